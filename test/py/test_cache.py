"""The disk cache: hits, corrupt/truncated entries, concurrent compiles."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import mlirfuse
from mlirfuse import cache, ops

X = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", str(tmp_path))
    return tmp_path


def fn(x):
    return ops.tanh(x) * 3.0 + x.sum(-1, keepdim=True)


def expected() -> np.ndarray:
    return np.tanh(X) * 3 + X.sum(-1, keepdims=True)


def test_compile_writes_then_reuses_an_entry(cache_dir: Path) -> None:
    np.testing.assert_allclose(mlirfuse.jit(fn)(X), expected(), rtol=1e-6)
    entries = list(cache_dir.glob("*.entry"))
    assert len(entries) == 1
    before = entries[0].stat().st_mtime_ns
    np.testing.assert_allclose(mlirfuse.jit(fn)(X), expected(), rtol=1e-6)  # a new jit: disk hit
    assert entries[0].stat().st_mtime_ns == before


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_entries_are_ignored_and_rebuilt(cache_dir: Path, damage: str) -> None:
    mlirfuse.jit(fn)(X)
    (entry,) = cache_dir.glob("*.entry")
    data = entry.read_bytes()
    entry.write_bytes({"truncate": data[: len(data) // 2], "flip": data[:-10] + b"X" + data[-9:],
                       "garbage": b"\x00\xff" * 50, "empty": b""}[damage])
    np.testing.assert_allclose(mlirfuse.jit(fn)(X), expected(), rtol=1e-6)
    assert cache.load(entry.stem) is not None  # rebuilt and valid again


def test_key_depends_on_ir_signature_and_versions() -> None:
    k = cache.make_key("cpu", "ir", "spec")
    assert k == cache.make_key("cpu", "ir", "spec")
    assert k != cache.make_key("cpu", "ir2", "spec") != cache.make_key("gpu", "ir", "spec")
    assert "mlirfuse=" in cache.toolchain_versions() and "xtc-mlir-python-bindings" in cache.toolchain_versions()


def test_disabled_cache_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", "off")
    mlirfuse.jit(fn)(X)
    assert cache.cache_dir() is None


def test_threads_compiling_the_same_fusion(cache_dir: Path) -> None:
    results, errors = [], []

    def work() -> None:
        try:
            results.append(mlirfuse.jit(fn)(X))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        np.testing.assert_allclose(r, expected(), rtol=1e-6)
    # One compiled module; a thread that found it already on disk (a second load) may also
    # have stored its linked warm-start library (an ELF entry).
    modules = [p for p in cache_dir.glob("*.entry") if b"\x7fELF" not in p.read_bytes()[:200]]
    assert len(modules) == 1 and not list(cache_dir.glob(".tmp-*"))


def test_processes_compiling_the_same_fusion(cache_dir: Path) -> None:
    code = ("import numpy as np, mlirfuse\nfrom mlirfuse import ops\n"
            "x = np.arange(12, dtype=np.float32).reshape(3, 4)\n"
            "y = mlirfuse.jit(lambda x: ops.tanh(x) * 3.0 + x.sum(-1, keepdim=True))(x)\n"
            "assert np.allclose(y, np.tanh(x) * 3 + x.sum(-1, keepdims=True))\nprint('ok')\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 and "ok" in o for p, (o, _) in zip(procs, outs)), outs
    # the module; and its linked library where a process came late enough to load the module
    assert len(list(cache_dir.glob("*.entry"))) in (1, 2) and not list(cache_dir.glob(".tmp-*"))


def test_the_second_load_links_a_library_that_later_processes_dlopen(cache_dir: Path) -> None:
    code = ("import numpy as np, mlirfuse\nfrom mlirfuse import ops\n"
            "x = np.arange(12, dtype=np.float32).reshape(3, 4)\n"
            "f = mlirfuse.jit(lambda x: ops.tanh(x) * 3.0 + x.sum(-1, keepdim=True))\n"
            "assert np.allclose(f(x), np.tanh(x) * 3 + x.sum(-1, keepdims=True))\n"
            "print('jit' if next(iter(f._cache.values()))[0].kernel.engine else 'dlopen')\n")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
            for _ in range(3)]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    how = [r.stdout.strip() for r in runs]
    if len(list(cache_dir.glob("*.entry"))) == 1:
        pytest.skip("no C compiler driver to link with: every load JIT-compiles")
    assert how == ["jit", "jit", "dlopen"]
    # a library linked from code of another LLVM optimization level is not taken (the tests
    # compile at 0, test/py/conftest.py; users at 3)
    other = "3" if os.environ.get("MLIRFUSE_CPU_OPT_LEVEL", "3") != "3" else "0"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MLIRFUSE_CPU_OPT_LEVEL": other})
    assert run.returncode == 0 and run.stdout.strip() == "jit", run.stderr


@pytest.mark.parametrize("level", [-1, 4, True, "3"])
def test_the_cpu_opt_level_is_0_to_3(level) -> None:
    with pytest.raises(mlirfuse.FusionError, match="cpu_opt_level"):
        mlirfuse.set_options(cpu_opt_level=level)


@pytest.mark.skipif(__import__("mlirfuse.lowering.gpu.toolchain", fromlist=["find"]).find().libdevice is None,
                    reason="no libdevice")
def test_a_gpu_entry_keeps_its_launch_count(cache_dir: Path) -> None:
    """A normalization is three kernel functions (rows held; looping, in vectors or element by
    element) and one launch a call: the host module's text says so, and a load from the disk
    cache reads it back."""
    from mlirfuse.gpu_kernel import GpuKernel
    from mlirfuse.lowering.gpu.runtime import CachedGpuModule

    def layer_norm(x):
        d = x - x.mean(-1, keepdim=True)
        return d * ops.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5)

    fusion, _ = mlirfuse.jit(layer_norm).trace(X)
    cold = GpuKernel(fusion.to_mlir(), fusion.specs, "sm_90", "isa")
    warm = GpuKernel(fusion.to_mlir(), fusion.specs, "sm_90", "isa")
    assert isinstance(warm.module, CachedGpuModule) and not isinstance(cold.module, CachedGpuModule)
    assert cold.n_launches == warm.n_launches == 1 and warm.module.n_kernels == 3
    assert warm.module.host_llvm.startswith("// mlirfuse: 1 launch(es) a call\n")
