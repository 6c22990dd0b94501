"""GPU backend: every op x dtype against torch and the CPU backend (run with `pytest -m gpu`)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mlirfuse
from mlirfuse import gpu_kernel, ops
from mlirfuse.dialects import optable
from mlirfuse.workloads import WORKLOADS
from test_ops import ALL, ELEMENTWISE_CASES, FLOATS, INTS, POWER_SPECIALS, sample
from tolerances import assert_close

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

TORCH_DTYPE = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
               np.dtype(np.float16): torch.float16, np.dtype(ml_dtypes.bfloat16): torch.bfloat16,
               np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64,
               np.dtype(np.bool_): torch.bool}


def to_torch(a: np.ndarray, device: str = "cuda") -> "torch.Tensor":
    a = np.asarray(a)
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).to(device)
    return torch.from_numpy(a.copy()).to(device)


def to_numpy(t: "torch.Tensor") -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def check_against_cpu(fn, inputs, reduction_size: int = 1) -> None:
    """GPU (torch tensors in and out) vs the CPU backend on the same inputs."""
    gpu_out = mlirfuse.jit(fn)(*[to_torch(a) if isinstance(a, np.ndarray) else a for a in inputs])
    cpu_out = mlirfuse.jit(fn)(*inputs)
    gpu_list = gpu_out if isinstance(gpu_out, tuple) else (gpu_out,)
    cpu_list = cpu_out if isinstance(cpu_out, tuple) else (cpu_out,)
    for g, c in zip(gpu_list, cpu_list):
        assert isinstance(g, torch.Tensor) and g.is_cuda
        assert_close(to_numpy(g), c, reduction_size=reduction_size)


@pytest.mark.parametrize("name,dtype", ELEMENTWISE_CASES,
                         ids=[f"{n}-{np.dtype(d).name}" for n, d in ELEMENTWISE_CASES])
def test_elementwise_vs_cpu(name: str, dtype) -> None:
    op = optable.OPS[name]
    inputs = [sample(dtype, (5, 33), name, i) for i in range(op.arity)]
    if name == "where":
        inputs[0] = np.random.default_rng(1).random((5, 33)) < 0.5
    check_against_cpu(getattr(ops, name), inputs)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("exponent", [0, 2, 3, 4, -1, 0.5])
def test_constant_powers_vs_cpu(dtype, exponent) -> None:
    """Constant exponents (expanded to multiplications, or powf for 0.5) with special values."""
    if np.dtype(dtype).kind in "iu":
        if exponent != int(exponent) or exponent < 0:
            pytest.skip("integer powers take non-negative integral exponents")
        x = np.arange(-6, 7).astype(dtype)
    else:
        with np.errstate(over="ignore"):
            x = np.array(POWER_SPECIALS + list(sample(np.float32, (40,))), np.float64).astype(dtype)
    check_against_cpu(lambda t: t ** exponent, [x])


TORCH_FN = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "div": torch.div,
            "exp": torch.exp, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf,
            "log": torch.log, "sqrt": torch.sqrt, "maximum": torch.maximum, "relu": torch.relu,
            "sin": torch.sin, "atan2": torch.atan2, "lt": torch.lt, "where": torch.where}


@pytest.mark.parametrize("name", sorted(TORCH_FN))
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_elementwise_vs_torch(name: str, dtype) -> None:
    op = optable.OPS[name]
    inputs = [to_torch(sample(dtype, (7, 129), name, i)) for i in range(op.arity)]
    if name == "where":
        inputs[0] = torch.rand(7, 129, device="cuda") < 0.5
    got = mlirfuse.jit(getattr(ops, name))(*inputs)
    want = TORCH_FN[name](*inputs)
    assert got.dtype == want.dtype
    assert_close(to_numpy(got), to_numpy(want), name)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "var_mean"])
def test_reductions_vs_cpu(name: str, dtype) -> None:
    if name in ("mean", "var", "var_mean") and np.dtype(dtype).kind in "iu":
        pytest.skip("floating point only")
    x = sample(dtype, (6, 7, 33), name)
    if name == "prod" and np.dtype(dtype).kind not in "iu":
        x = (np.abs(x.astype(np.float32)) * 0.1 + 0.95).astype(dtype)
    for axes, keepdim in [(None, False), ([-1], True), ([0, 2], False)]:
        check_against_cpu(lambda t: getattr(ops, name)(t, axes, keepdim=keepdim), [x], x.size)


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_shapes_casts_random_vs_cpu(dtype) -> None:
    x = sample(dtype, (2, 1, 3, 40))

    def fn(t):
        return (ops.reshape(t, [2, 120]), ops.permute(t, [3, 0, 2, 1]), ops.squeeze(t, [1]),
                ops.expand(t, [2, 5, 3, 40]), ops.cast(t, np.float32), ops.cast(t, np.bool_),
                ops.uniform(0.0, 1.0, [2, 3, 40], seed=3, offset=1), ops.rand_like(ops.cast(t, np.float32)))

    check_against_cpu(fn, [x])


def test_strided_views_and_runtime_scalars() -> None:
    base = torch.randn(64, 96, device="cuda")
    f = mlirfuse.jit(lambda x, y, s: x * s + y)
    for x, y in [(base.t(), base.t()), (base[:, ::2], base[:, 1::2]), (base[3:40], base[10:47])]:
        got = f(x, y, 2.5)
        torch.testing.assert_close(got, x * 2.5 + y)


def test_results_usable_without_sync_on_current_stream() -> None:
    f = mlirfuse.jit(lambda x: ops.relu(x + 1.0))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.randn(1 << 22, device="cuda")
        y = f(x)
        z = y * 2  # consumed right away on the same stream
    torch.cuda.synchronize()
    torch.testing.assert_close(z, torch.relu(x + 1) * 2)


def test_numpy_with_gpu_backend() -> None:
    f = mlirfuse.jit(lambda x, y: (x * y).sum(-1), backend="gpu")
    x = np.random.rand(17, 300).astype(np.float32)
    y = np.random.rand(300).astype(np.float32)
    out = f(x, y)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, (x * y).sum(-1), rtol=1e-5)


def test_mixing_host_and_device_raises() -> None:
    f = mlirfuse.jit(lambda x, y: x + y)
    with pytest.raises(mlirfuse.FusionError, match="mix host"):
        f(np.ones(3, np.float32), torch.ones(3, device="cuda"))


def test_empty_and_size_one() -> None:
    f = mlirfuse.jit(lambda x, b: (x + b).sum(-1))
    for shape in [(0, 5), (1, 5), (4, 1), (3, 0)]:
        x = torch.randn(*shape, device="cuda")
        b = torch.randn(shape[-1], device="cuda")
        torch.testing.assert_close(f(x, b), (x + b).sum(-1))


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: w.name)
def test_reference_workloads_vs_torch_and_cpu(w) -> None:
    rng = np.random.default_rng(0)
    inputs = w.make_inputs(w.small, rng)
    dev_inputs = [to_torch(a) if isinstance(a, np.ndarray) else a for a in inputs]
    if w.definition is not None:
        fd = w.definition()
        got, cpu = fd.execute(dev_inputs), fd.execute(inputs)
    else:
        got, cpu = mlirfuse.jit(w.jit_fn)(*dev_inputs), mlirfuse.jit(w.jit_fn)(*inputs)
    want = w.numpy_fn(*w.numpy_args(inputs))
    got = got if isinstance(got, (list, tuple)) else [got]
    cpu = cpu if isinstance(cpu, (list, tuple)) else [cpu]
    want = want if isinstance(want, (list, tuple)) else [want]
    for g, c, e in zip(got, cpu, want):
        np.testing.assert_allclose(to_numpy(g), c, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(to_numpy(g), e, rtol=2e-4, atol=2e-4)


def test_hot_path_refreshes_pointers_scalars_and_layouts() -> None:
    """Repeated calls take the exact-layout hot path: each call must see its own tensors,
    scalar values and (when the layout changes) a fresh launcher."""
    f = mlirfuse.jit(lambda x, y, s: x * s + y)
    for _ in range(3):
        x, y = torch.randn(33, 65, device="cuda"), torch.randn(33, 65, device="cuda")
        s = float(torch.rand(()).item())
        torch.testing.assert_close(f(x, y, s), x * s + y)
    base = torch.randn(65, 33, device="cuda")
    torch.testing.assert_close(f(base.t(), y, 2.0), base.t() * 2.0 + y)
    torch.testing.assert_close(f(x, y, 3), x * 3 + y)  # an int scalar: its own entry
    assert f.cache_info().hits >= 2


def test_hot_path_follows_the_current_stream_and_threads() -> None:
    import threading

    f = mlirfuse.jit(lambda x: ops.exp(x) + 1.0)
    x = torch.randn(1 << 20, device="cuda")
    f(x)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = f(x) * 2.0
    side.synchronize()
    torch.testing.assert_close(y, (torch.exp(x) + 1.0) * 2.0)
    inputs = [torch.randn(1 << 16, device="cuda") for _ in range(8)]
    results: dict[int, "torch.Tensor"] = {}

    def work(i: int) -> None:
        for _ in range(20):
            results[i] = f(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    for i, x_i in enumerate(inputs):
        torch.testing.assert_close(results[i], torch.exp(x_i) + 1.0)


def test_column_reduction_first_in_a_fresh_thread(capfd) -> None:
    """A column reduction zeroes its counters with a driver memset, which needs a current
    context; a thread that has made no CUDA runtime call has none (autograd's device thread
    running a backward: the memset failed with CUDA_ERROR_INVALID_CONTEXT, reported on
    stderr by the runtime, and the counters kept whatever the memory held: wrong bias
    gradients where it was not zero). The launch binds the device's primary context there."""
    import threading

    f = mlirfuse.jit(lambda x: ops.sum(x, 0))
    x = torch.randn(8192, 256, device="cuda", dtype=torch.float64)
    expected = x.sum(0)
    torch.testing.assert_close(f(x), expected)
    results = []
    for _ in range(2):  # the first call of each thread, then the hot path's
        thread = threading.Thread(target=lambda: results.append([f(x) for _ in range(2)]))
        thread.start()
        thread.join()
    torch.cuda.synchronize()
    for outs in results:
        for out in outs:
            torch.testing.assert_close(out, expected)
    assert "CUDA_ERROR" not in capfd.readouterr().err


two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")


@two_gpus
def test_second_device_and_mixing_devices() -> None:
    f = mlirfuse.jit(lambda x, y: x * y)
    a, b = torch.randn(100, device="cuda:1"), torch.randn(100, device="cuda:1")
    out = f(a, b)
    assert out.device == a.device
    torch.testing.assert_close(out, a * b)
    with pytest.raises(mlirfuse.FusionError):
        f(a, torch.randn(100, device="cuda:0"))


@two_gpus
def test_second_device_launches_on_its_current_stream() -> None:
    """cuda:1 tensors, cuda:0 the current device, a side stream current on cuda:1: the call is
    ordered after the work queued on that stream (its input is written after a long sleep
    there; a launch on cuda:1's default stream, or on cuda:0, would read the zeros before)."""
    f = mlirfuse.jit(lambda x: ops.exp(x) + 1.0)
    x = torch.zeros(1 << 20, device="cuda:1")
    torch.testing.assert_close(f(x), torch.full_like(x, 2.0))  # compiled and loaded: only the launch below
    side = torch.cuda.Stream(device=1)
    torch.cuda.synchronize(1)
    assert torch.cuda.current_device() == 0
    for _ in range(2):  # the first call with these layouts, then the hot path's
        x.zero_()
        torch.cuda.synchronize(1)
        with torch.cuda.stream(side):
            with torch.cuda.device(1):
                torch.cuda._sleep(100_000_000)  # tens of ms on cuda:1's side stream
            x.fill_(3.0)
            y = f(x)
        side.synchronize()
        assert y.device == x.device
        torch.testing.assert_close(y, torch.full_like(x, float(np.exp(3.0)) + 1.0))


@two_gpus
def test_two_threads_drive_two_devices_at_once() -> None:
    """A thread per device, both started at once on a fusion not compiled yet: one compile
    (the jit's cache serves both devices), the one binary loaded once per device, each
    thread's results right and on its tensors' device."""
    import threading

    f = mlirfuse.jit(lambda x, y: ops.tanh(x) * y - 1.0)  # a fusion no other test loads
    inputs = {d: (torch.randn(4096, 257, device=f"cuda:{d}"), torch.randn(257, device=f"cuda:{d}"))
              for d in (0, 1)}
    start = threading.Barrier(2)
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def work(d: int) -> None:
        try:
            start.wait()
            results[d] = [f(*inputs[d]) for _ in range(50)]
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for d, (x, y) in inputs.items():
        torch.cuda.synchronize(d)
        for out in results[d]:
            assert out.device == x.device
            torch.testing.assert_close(out, torch.tanh(x) * y - 1.0)
    assert f.cache_info().compiles == 1
    compiled = next(iter(f._cache.values()))[0]
    loaded = {device for key, device in gpu_kernel._LOADED if key == compiled.kernel._key}
    assert loaded == {0, 1}


@two_gpus
def test_torch_compile_on_the_second_device() -> None:
    """torch.compile(backend="mlirfuse") of a LayerNorm-GELU block whose tensors are on cuda:1
    (cuda:0 current), forward and backward: results and gradients on cuda:1, as eager's."""
    ln = torch.nn.LayerNorm(256).to("cuda:1")

    def block(x):
        return torch.nn.functional.gelu(ln(x) * 2.0 + 1.0)

    x = torch.randn(64, 256, device="cuda:1", requires_grad=True)
    compiled = torch.compile(block, backend="mlirfuse")
    out = compiled(x)
    out.sum().backward()
    got = (out.detach(), x.grad.clone(), ln.weight.grad.clone())
    x.grad = ln.weight.grad = ln.bias.grad = None
    ref = block(x)
    ref.sum().backward()
    assert got[0].device == torch.device("cuda", 1)
    for a, b in zip(got, (ref.detach(), x.grad, ln.weight.grad)):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_library_cumsum_between_kernels(dtype) -> None:
    """A cumsum of dynamic length is `fusion.cumsum`, run by torch between the fused kernels
    before and after it (bfloat16 summed in float32, rounded once; integers as int64)."""
    f = mlirfuse.jit(lambda x: ops.cumsum(x * 2, 1) + 1)
    x = (torch.rand(5, 3000, device="cuda") * 4).to(dtype)
    wide = torch.float32 if dtype == torch.bfloat16 else torch.int64 if dtype == torch.int32 else dtype
    want = (torch.cumsum(x.to(wide) * 2, 1) + 1)
    want = want.to(dtype) if dtype == torch.bfloat16 else want
    got = f(x)
    assert got.dtype == want.dtype and got.device == x.device
    torch.testing.assert_close(got, want, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("name", ["cumprod", "cummax", "cummin"])
def test_library_scans_between_kernels(name, dtype) -> None:
    """cumprod, cummax and cummin of dynamic length are library ops, run by torch between the
    fused kernels (bfloat16 in float32, rounded once; an integer product is int64), and their
    gradients (torch's backward formulas) too."""
    f = mlirfuse.jit(lambda x: getattr(ops, name)(x * 2, 1) + 1)
    x = torch.rand(5, 3000, device="cuda") * 0.01 + 0.5 if name == "cumprod" else torch.randn(5, 3000, device="cuda")
    x = (x * 4).to(dtype) if dtype == torch.int32 else x.to(dtype)
    wide = torch.float32 if dtype == torch.bfloat16 else dtype
    want = getattr(torch, name)(x.to(wide) * 2, 1)
    want = (want if isinstance(want, torch.Tensor) else want.values) + 1
    want = want.to(dtype) if dtype == torch.bfloat16 else want
    got = f(x)
    assert got.dtype == want.dtype and got.device == x.device
    torch.testing.assert_close(got, want, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-3)
    if dtype == torch.float32:
        x = x.requires_grad_()
        w = torch.randn_like(x)
        (f(x) * w).sum().backward()
        x2 = x.detach().clone().requires_grad_()
        y = getattr(torch, name)(x2 * 2, 1)
        ((y if isinstance(y, torch.Tensor) else y.values) * w).sum().backward()
        # a cummax/cummin gradient element sums the cotangents of every position its value
        # leads (up to 3000, magnitudes up to ~50) in another order than torch's: 1.2e-4 apart
        # at one of 15000 elements, once, on an H200
        torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-3)


def test_64bit_indexing_past_2_31_elements() -> None:
    n = (1 << 31) + 1000
    if torch.cuda.get_device_properties(0).total_memory < 4 * n * 2 + (4 << 30):
        pytest.skip("not enough GPU memory")
    x = torch.zeros(n, dtype=torch.float16, device="cuda")
    x[-3:] = 2.0
    y = mlirfuse.jit(lambda t: t + 1.0)(x)
    assert y[-1].item() == 3.0 and y[(1 << 31) - 1].item() == 1.0 and y[0].item() == 1.0
    del x, y
    torch.cuda.empty_cache()


def test_warm_start_loads_the_linked_host_library(tmp_path, monkeypatch) -> None:
    """A disk-cache hit dlopens the host library linked at the cold compile (no LLVM JIT)."""
    import gc
    import shutil

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler driver to link host libraries")
    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", str(tmp_path))
    fn = lambda x, y: ops.tanh(x) * y + 1.0  # noqa: E731
    x, y = torch.randn(300, 7, device="cuda"), torch.randn(7, device="cuda")
    cold = mlirfuse.jit(fn)
    torch.testing.assert_close(cold(x, y), torch.tanh(x) * y + 1.0)
    assert next(iter(cold._cache.values()))[0].executable(0).engine is not None
    del cold
    gc.collect()
    # A new process's view: nothing loaded yet (in this process the JIT-ed executable would be
    # reused, and it stays loaded), so the library must load its own GPU binary.
    monkeypatch.setattr(gpu_kernel, "_LOADED", {})
    warm = mlirfuse.jit(fn)
    torch.testing.assert_close(warm(x, y), torch.tanh(x) * y + 1.0)
    exe = next(iter(warm._cache.values()))[0].executable(0)
    assert exe.engine is None and exe.shared_library is not None
    again = mlirfuse.jit(fn)  # the same fusion jitted again in this process: the loaded executable
    torch.testing.assert_close(again(x, y), torch.tanh(x) * y + 1.0)
    assert next(iter(again._cache.values()))[0].executable(0) is exe


def test_transformer_block_groups_around_two_linears_on_gpu() -> None:
    """linear -> bias -> GELU -> linear -> dropout -> residual add -> LayerNorm: the linears run
    in torch (cuBLAS), the fusible parts as GPU kernels of the groups around them."""
    from mlirfuse.executor import DeviceGraphExecutor
    from mlirfuse.workloads import transformer_block

    w = next(w for w in WORKLOADS if w.jit_fn is transformer_block)
    inputs = w.make_inputs((3, 7, 32), np.random.default_rng(1))
    dev = [to_torch(a) if isinstance(a, np.ndarray) else a for a in inputs]
    f = mlirfuse.jit(transformer_block)
    got = f(*dev)
    assert got.is_cuda and got.dtype == torch.float32 and got.shape == (3, 7, 32)
    compiled = f.compile(*dev)
    compiled(dev)
    assert isinstance(compiled.executor, DeviceGraphExecutor)
    assert compiled.stages["grouped"].count('"fusion.linear"') == 2
    assert len(compiled.executor.groups) == 2 and len(compiled.executor.kernels()) == 2
    np.testing.assert_allclose(to_numpy(got), f(*inputs), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(to_numpy(got), w.numpy_fn(*w.numpy_args(inputs)), rtol=1e-4, atol=1e-4)
    staged = mlirfuse.jit(transformer_block, backend="gpu")(*inputs)  # numpy in, numpy out
    assert isinstance(staged, np.ndarray)
    np.testing.assert_allclose(staged, to_numpy(got), rtol=1e-5, atol=1e-5)


_AFTER_A_DROPPED_EXECUTABLE = """
import gc, os, sys, tempfile, torch, mlirfuse
from mlir import ir
from mlirfuse import gpu_kernel, ops
os.environ["MLIRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
mlirfuse.jit(lambda x: ops.abs(x) * 2.0)(torch.ones(4, device="cuda"))
torch.cuda.synchronize()
os.environ["MLIRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
gpu_kernel._LOADED.clear()
gc.collect()  # the executable (its launcher's cycle too) is gone
with ir.Context(), ir.Location.unknown():  # C++ exceptions, thrown and caught in the bindings
    s = ir.StringAttr.get("x")
    for _ in range(20000):
        try:
            ir.IntegerAttr(s)
        except ValueError:
            pass
for dtype in (torch.bfloat16, torch.float32):
    x, w = torch.randn(8192, 1024, device="cuda", dtype=dtype), torch.randn(1024, device="cuda", dtype=dtype)
    norm = mlirfuse.jit(lambda x, w: x * ops.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w)
    torch.testing.assert_close(norm(x, w), x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w,
                               atol=2e-2, rtol=2e-2)
    soft = mlirfuse.jit(lambda x: ops.softmax(x, -1))
    torch.testing.assert_close(soft(x), torch.softmax(x.float(), -1).to(dtype), atol=2e-2, rtol=2e-2)
"""


def test_compiling_after_a_loaded_executable_is_dropped_does_not_crash() -> None:
    """bench/suite.py's row process: a first fusion compiled and launched, the loaded
    executables dropped (`_LOADED.clear()`, a new process's view), then C++ exceptions
    (thrown and caught inside the MLIR bindings) and fusions compiled. With the executable's
    ExecutionEngine destroyed, such processes crashed or hung (H200, session 62: 5 of 12 in
    the exceptions alone; 6 of 12 compiling, inside `kernels.nested_ops`). Engines are now
    never destroyed (`runtime._ENGINES`)."""
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", _AFTER_A_DROPPED_EXECUTABLE], stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    failures = [(p.wait(timeout=300), p.stderr.read()[-2000:]) for p in procs]
    crashed = [err for rc, err in failures if rc != 0]
    assert not crashed, f"{len(crashed)} of {len(procs)} processes failed; last: {crashed[-1]}"


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("shape,pad", [((256, 30522), 6), ((64, 1000), 6), ((33, 2048), 8)],
                         ids=["vocab", "unaligned-rows", "aligned-rows"])
def test_a_pad_of_a_normalization_written_in_place_on_the_gpu(shape, pad, dtype) -> None:
    """BERT's masked-LM gradient padded for the matmul after it and summed over rows: the
    normalization writes the padded output's interior (rows of their own stride), a pointwise
    kernel its border, the column reduction reads the interior; as the CPU backend."""
    x = (np.random.default_rng(5).standard_normal(shape) * 4).astype(dtype)

    def fn(x):
        y = ops.cast(ops.softmax(ops.cast(x, mlirfuse.DataType.Float)) * 3.0 - 1.0, x.dtype)
        return ops.pad(y, [0, pad]), ops.sum(ops.cast(y, mlirfuse.DataType.Float), [0])

    check_against_cpu(fn, [x], reduction_size=shape[0])
    compiled = mlirfuse.jit(fn).compile(x, backend="gpu", arch="sm_90")
    assert "naive" not in compiled.stages["launch_params"] and "strided<[" in compiled.stages["gpu"]


@pytest.mark.parametrize("shape", [(8, 512 * 768), (3, 5, 4099), (4096, 768)], ids=str)
def test_column_reductions_of_one_slice_and_of_many_on_the_gpu(shape) -> None:
    """Rows too few for two slices (a sum over a batch of 8: GPT-2's position-embedding
    gradient; an unaligned one): each block writes its columns' totals, with no workspace,
    counters or memset; rows enough for slices: the last block combines them. A sum, a max
    and a sum computing a pointwise epilogue, as the CPU backend."""
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    reduced = list(range(len(shape) - 1))

    def fn(x):
        return ops.sum(x, reduced), ops.max(x, reduced), ops.sum(x * x, reduced) * 0.5 + 1.0

    check_against_cpu(fn, [x], reduction_size=int(np.prod(shape[:-1])))


@pytest.mark.parametrize("shape", [(64, 1024, 256), (512, 512, 64), (8, 256, 64), (4, 2048, 100)], ids=str)
def test_batches_of_column_reductions_of_either_geometry_on_the_gpu(shape) -> None:
    """x.sum(1) of [B, R, C] of dynamic extents: 8 lanes across and one slice where the
    column blocks make one (the first two), 32 lanes and slices or the scalar variant where
    not; a sum, a max and a sum computing a pointwise epilogue, as the CPU backend."""
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)

    def fn(x):
        return ops.sum(x, [1]), ops.max(x, [1]), ops.sum(x * x, [1]) * 0.5 + 1.0

    check_against_cpu(fn, [x], reduction_size=shape[1])


@pytest.mark.parametrize("fn", [lambda x: x.sum(0), lambda x: x.sum(1), lambda x: x.amax((0, 1))],
                         ids=["sum(0)", "sum(1)", "amax((0,1))"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_lone_reduction_over_leading_or_middle_dims_is_a_region_on_the_gpu(fn, dtype) -> None:
    """Through torch.compile, alone (no other op in the graph): the column kernel, not ATen's
    reduce_kernel; as eager."""
    import torch._dynamo as dynamo

    from mlirfuse import torch_backend

    x = torch.randn(64, 300, 96, device="cuda", dtype=getattr(torch, dtype))
    dynamo.reset()
    with torch_backend.capture_partitions() as captured:
        got = torch.compile(fn, backend="mlirfuse")(x)
    assert [len(p.groups) for _, p in captured] == [1]
    torch.testing.assert_close(got, fn(x), rtol=2e-2 if dtype == "bfloat16" else 1e-5, atol=1e-3)
