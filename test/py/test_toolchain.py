"""Finding the CUDA tools and asking ptxas what it supports (no GPU needed)."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pytest

from mlirfuse import ops
from mlirfuse.lowering.gpu import toolchain
from mlirfuse.stages import nvvm_pipeline


def _fake_ptxas(folder: Path, help_text: str) -> str:
    exe = folder / "ptxas"
    exe.write_text(f"#!/bin/sh\necho '{help_text}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_split_compile_only_where_ptxas_has_it(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    new = _fake_ptxas(tmp_path / "new", "--split-compile <N>   (-split-compile)")
    old = _fake_ptxas(tmp_path / "old", "--opt-level <N>   (-O)")
    assert toolchain.ptxas_options(new) == "--split-compile=0"
    assert toolchain.ptxas_options(old) == ""
    assert toolchain.ptxas_options(str(tmp_path / "missing")) == ""
    assert toolchain.ptxas_options(None) == ""


def test_ptxas_of_prefers_the_toolkit_root(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    exe = _fake_ptxas(tmp_path / "bin", "")
    assert toolchain.ptxas_of(toolchain.Toolkit(str(tmp_path), None, "/elsewhere/ptxas")) == exe
    assert toolchain.ptxas_of(toolchain.Toolkit(str(tmp_path / "none"), None, "/elsewhere/ptxas")) == "/elsewhere/ptxas"


def test_ptxas_options_reach_gpu_module_to_binary() -> None:
    pipeline = nvvm_pipeline("sm_90", "+ptx80", "fatbin", "/cuda", "--split-compile=0")
    assert "gpu-module-to-binary{format=fatbin toolkit=/cuda opts=--split-compile=0}" in pipeline
    assert "opts=" not in nvvm_pipeline("sm_90", "+ptx80", "isa", "/cuda")


@pytest.mark.skipif(toolchain.find().libdevice is None or toolchain.ptxas_of(toolchain.find()) is None,
                    reason="no libdevice and ptxas (CUDA toolkit or nvidia-cuda-nvcc wheel)")
def test_multi_kernel_fusion_compiles_to_a_cubin_with_the_options(tmp_path: Path, monkeypatch) -> None:
    """A column sum (two kernels) through ptxas with this toolkit's options: a fatbin."""
    from mlirfuse.frontend.jit import JitFunction
    from mlirfuse.lowering.gpu.compile import compile_gpu

    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", str(tmp_path))
    fusion, _ = JitFunction(lambda x: x.sum((0, 1)) + ops.exp(x).sum(-1).sum(-1)).trace(
        np.ones((4, 8, 16), np.float32))
    module = compile_gpu(fusion.to_mlir(), fusion.specs, "sm_90", "fatbin")
    assert module.n_kernels >= 2 and module.binary_format == "fatbin" and len(module.binary) > 0
