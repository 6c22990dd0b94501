"""The graph fuser, segmentation, dumps and fallback (issue 4), checked through the Python API:
results do not depend on grouping options, kernel counts, the reproducer/fallback path, the
environment knobs and every dump."""

from __future__ import annotations

import math
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from mlir import ir

import mlirfuse
import mlirfuse.lowering.cpu.compile
from mlirfuse import DataType, FusionDefinition, ops
from mlirfuse.config import Options
from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.errors import FusionError
from mlirfuse.lowering.gpu import toolchain
from mlirfuse.passes import run_pipeline
from mlirfuse.passes.fusion_segment import kernel_count
from mlirfuse.reference_philox import uniform
from mlirfuse.workloads import gelu_backward_definition, gelu_bookend, gelu_bookend_np
from tolerances import assert_close

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(11)
_erf = np.vectorize(math.erf, otypes=[np.float64])


@pytest.fixture
def options():
    """`set(**knobs)` for the test; the previous knobs come back afterwards."""
    saved = []

    def set_(**changes):
        saved.append(mlirfuse.set_options(**changes))

    yield set_
    if saved:
        mlirfuse.restore_options(saved[0])


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape, dtype=np.float32)


# -- results do not depend on grouping options ------------------------------------------------
def chain(x):
    return ops.relu(ops.tanh(ops.exp(x) + 1.0))


def chain_np(x):
    return np.maximum(np.tanh(np.exp(x) + np.float32(1.0)), 0)


def diamond(x):
    e = ops.exp(x)
    return ops.sin(e) + ops.cos(e) - (-x) * ops.abs(x)


def diamond_np(x):
    e = np.exp(x)
    return np.sin(e) + np.cos(e) - (-x) * np.abs(x)


def siblings(x):
    return ops.exp(x) * 2.0, ops.sin(x).sum(-1), x.amax(-1), (x * x).sum(0)


def siblings_np(x):
    return np.exp(x) * np.float32(2.0), np.sin(x).sum(-1), x.max(-1), (x * x).sum(0)


def test_two_sums_over_the_same_axis_are_both_right() -> None:
    """cse merged the two reductions' fill; eliminate-empty-tensors then wrote one result into
    both outputs (fixed by linalg-unshare-inits)."""
    x = f32(4, 8)
    a, b = mlirfuse.jit(lambda t: (t.sum(-1), (t * t).sum(-1)))(x)
    assert_close(a, x.sum(-1), reduction_size=8)
    assert_close(b, (x * x).sum(-1), reduction_size=8)


def matmul_between_chains(x, w):
    return ops.relu(-ops.matmul(ops.tanh(ops.exp(x)), w))


def matmul_between_chains_np(x, w):
    return np.maximum(-(np.tanh(np.exp(x)) @ w), 0)


def linear_between_chains(x, w, b, y):
    h = ops.linear(ops.sigmoid(x * x), w, b)
    return ops.erf(h) + h * y, (h * 0.5).sum(-1)


def linear_between_chains_np(x, w, b, y):
    s = 1 / (1 + np.exp(-(x * x)))
    h = s @ w.T + b
    return (_erf(h) + h * y).astype(np.float32), (h * np.float32(0.5)).sum(-1)


GRAPHS = {
    "chain": (chain, chain_np, lambda: [f32(4, 8)]),
    "diamond": (diamond, diamond_np, lambda: [f32(4, 8)]),
    "siblings": (siblings, siblings_np, lambda: [f32(4, 8)]),
    "matmul": (matmul_between_chains, matmul_between_chains_np, lambda: [f32(4, 8), f32(8, 3)]),
    "linear": (linear_between_chains, linear_between_chains_np, lambda: [f32(2, 3, 8), f32(5, 8), f32(5), f32(5)]),
}
GROUPING = {
    "default": {},
    "no-horizontal": {"horizontal": False},
    "single-node": {"single_node": True},
    "max-args-4": {"max_args": 4},
    "all": {"horizontal": False, "single_node": True, "max_args": 4},
}


@pytest.mark.parametrize("knobs", GROUPING.values(), ids=GROUPING.keys())
@pytest.mark.parametrize("graph", GRAPHS.keys())
def test_results_do_not_depend_on_grouping_options(graph, knobs, options) -> None:
    fn, ref, make = GRAPHS[graph]
    options(**knobs)
    args = make()
    jitted = mlirfuse.jit(fn)
    got = jitted(*args)
    want = ref(*args)
    for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
        assert_close(g, np.asarray(w, np.float32), f"{graph} {knobs}", reduction_size=8)
    assert jitted.compile(*args).n_kernels >= 1


@pytest.mark.parametrize("max_args, n", [(8, 5), (128, 70)])
def test_argument_limit_never_makes_groups_feed_each_other(max_args, n, options) -> None:
    """A running sum with every partial as an output: the limit cuts the chain into groups
    that, merged carelessly, would each need the other's result (the pass failed)."""
    def running(*xs):
        s, outs = xs[0], []
        for x in xs[1:]:
            s = s + x
            outs.append(s * 1.0)
        return tuple(outs)

    options(max_args=max_args)
    xs = [np.random.default_rng(k).random(3, dtype=np.float32) for k in range(n)]
    for got, want in zip(mlirfuse.jit(running)(*xs), running(*xs)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_grouping_options_change_the_groups(options) -> None:
    """The knobs reach fusion-group: without horizontal fusion the two pointwise chains of x
    are two kernels; with max_args=2 no group can hold 1 input and 2 outputs."""
    fn = lambda x: (ops.neg(ops.exp(x)), ops.abs(ops.sin(x)))  # noqa: E731
    x = f32(4, 8)
    assert mlirfuse.jit(fn).compile(x).n_kernels == 1
    options(horizontal=False)
    assert mlirfuse.jit(fn).compile(x).n_kernels == 2
    options(horizontal=True, max_args=2)
    assert mlirfuse.jit(fn).compile(x).n_kernels == 2


# -- kernel counts ------------------------------------------------------------------------------
def n_kernels(fn, *args, dynamic: bool = True) -> int:
    compiled = mlirfuse.jit(fn, dynamic=dynamic).compile(*args)
    return compiled.n_kernels


def test_gelu_between_two_reshapes_is_one_kernel() -> None:
    x = f32(128, 16)
    assert n_kernels(gelu_bookend, x) == 1
    np.testing.assert_allclose(mlirfuse.jit(gelu_bookend)(x), gelu_bookend_np(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("views", [(a, b, c) for a in (0, 1) for b in (0, 1) for c in (0, 1)],
                         ids=lambda v: "".join("ABC"[i] for i in range(3) if v[i]) or "none")
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_view_study_is_one_kernel_each(views, dynamic) -> None:
    """003's study: views A, B, C around an add and a mul; each of the 8 is one kernel."""
    shapes = [[64, 24], [4, 16, 24]]

    def fn(t):
        current = 0

        def view(x):
            nonlocal current
            current = 1 - current
            return ops.reshape(x, shapes[current])

        t = view(t) if views[0] else t
        t = t + t
        t = view(t) if views[1] else t
        t = t * t
        return view(t) if views[2] else t

    x = f32(64, 24)
    compiled = mlirfuse.jit(fn, dynamic=dynamic).compile(x)
    assert compiled.n_kernels == 1, compiled.segmented_ir
    if toolchain.find().libdevice is not None:  # and one launch on the GPU (linalg-reshape-elementwise)
        gpu = mlirfuse.jit(fn, dynamic=dynamic).compile(x, backend="gpu", arch="sm_90")
        assert gpu.n_launches == 1, gpu.stages["launch_params"]
    want = (x + x) * (x + x)
    got = mlirfuse.jit(fn, dynamic=dynamic)(x)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-6)


def issue785_simple() -> FusionDefinition:
    """Issue 785's simplified nvfuser_fusion_id6, as written there (T8 is not an output)."""
    with FusionDefinition() as fd:
        T4 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
        T6 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
        S7 = fd.define_scalar(0.500000, dtype=DataType.Double)
        T8 = fd.ops.mul(S7, T6)  # noqa: F841 - dead, as in the issue
        S9 = fd.define_scalar(3.00000, dtype=DataType.Double)
        T10 = fd.ops.pow(T6, S9)
        T19 = fd.ops.sum(T4, axes=[0, 1], keepdim=False, dtype=DataType.Null)
        fd.add_output(T19)
        fd.add_output(T10)
    return fd


def test_issue_785_examples_are_two_kernels() -> None:
    from mlirfuse.compiler import CompiledFusion

    simple = CompiledFusion(issue785_simple().fusion)
    assert simple.n_kernels == 2, simple.segmented_ir
    t4, t6 = f32(2, 3, 4), f32(2, 3, 4)
    s, p = issue785_simple().execute([t4, t6])
    assert_close(s, t4.sum((0, 1)), reduction_size=6)
    assert_close(p, t6 ** 3)
    assert CompiledFusion(gelu_backward_definition().fusion).n_kernels == 2


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    d = x - mean
    return d * ops.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * w + b


def rms_norm(x, w):
    return x * ops.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w


def test_primitive_layernorm_and_rmsnorm_are_one_kernel() -> None:
    x, w, b = f32(6, 32), f32(32), f32(32)
    assert n_kernels(layer_norm, x, w, b) == 1
    assert n_kernels(rms_norm, x, w) == 1
    d = x - x.mean(-1, keepdims=True)
    assert_close(mlirfuse.jit(layer_norm)(x, w, b), d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * w + b,
                 reduction_size=32)
    assert_close(mlirfuse.jit(rms_norm)(x, w), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w,
                 reduction_size=32)


def test_sibling_reductions_over_the_same_axes_are_one_kernel() -> None:
    x = f32(6, 32)
    assert n_kernels(lambda t: (t.sum(-1), t.amax(-1), ops.exp(t).sum(-1)), x) == 1
    assert n_kernels(lambda t: (t.sum(0), t.sum(1)), x) == 2  # different axes: two schedules


def test_transpose_copy_is_a_kernel_and_views_are_not() -> None:
    """003's multi-head-attention transpose (view, permute, reshape = copy, view) is one
    transpose kernel; a chain of views of the input launches nothing."""
    def mha(t):
        t = ops.reshape(t, [4, 3, 8, 16])
        t = ops.permute(t, [0, 2, 1, 3])
        return ops.reshape(ops.reshape(t, [4, 8, 48]), [32, 48])

    x = f32(12, 8, 16)
    assert n_kernels(mha, x) == 1
    np.testing.assert_array_equal(mlirfuse.jit(mha)(x), x.reshape(4, 3, 8, 16).transpose(0, 2, 1, 3).reshape(32, 48))
    assert n_kernels(lambda t: ops.reshape(ops.unsqueeze(t, 0), [8, 16]), f32(4, 32)) == 0


def graph_kernels(text: str, pipeline: str = "fusion-cse, fusion-dce, fusion-group, fusion-strip-bookend-views, "
                  "fusion-segment") -> int:
    with fusion_dialect.context() as ctx:
        module = fusion_dialect.parse(text, ctx)
        run_pipeline(module, f"builtin.module({pipeline})")
        return kernel_count(module)


def test_kernel_count_skips_scalar_work_and_shape_arithmetic() -> None:
    scalar_cast = """func.func @fusion(%s: tensor<f64>) -> tensor<f32> {
      %c = "fusion.cast"(%s) : (tensor<f64>) -> tensor<f32>
      return %c : tensor<f32>
    }"""
    shape_math = """func.func @fusion(%x: tensor<?x?xf32>) -> tensor<?xf32> {
      %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
      %d1 = "fusion.size"(%x) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
      %n = arith.muli %d0, %d1 : index
      %r = "fusion.reshape"(%x, %n) {shape = array<i64: -1>} : (tensor<?x?xf32>, index) -> tensor<?xf32>
      return %r : tensor<?xf32>
    }"""
    scalar_then_tensor = """func.func @fusion(%s: tensor<f64>, %x: tensor<4xf32>) -> tensor<4xf32> {
      %c = "fusion.cast"(%s) : (tensor<f64>) -> tensor<f32>
      %h = "fusion.mul"(%c, %c) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      %b = "fusion.broadcast_in_dim"(%h) {broadcast_dims = array<i64>, shape = array<i64: 4>}
          : (tensor<f32>) -> tensor<4xf32>
      %m = "fusion.mul"(%x, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      return %m : tensor<4xf32>
    }"""
    full_reduction = """func.func @fusion(%x: tensor<4x8xf32>) -> tensor<f32> {
      %s = "fusion.sum"(%x) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<f32>
      return %s : tensor<f32>
    }"""
    for pipeline in ("fusion-cse, fusion-dce, fusion-group, fusion-strip-bookend-views, fusion-segment",
                     "fusion-group{single-node=true}, fusion-strip-bookend-views, fusion-segment"):
        assert graph_kernels(scalar_cast, pipeline) == 0  # host scalar math
        assert graph_kernels(shape_math, pipeline) == 0  # shape arithmetic and a view
        assert graph_kernels(scalar_then_tensor, pipeline) == 1  # the scalar work rides along
        assert graph_kernels(full_reduction, pipeline) == 1  # a 0-d result of tensor work
    with pytest.raises(FusionError, match="fusion-segment first"):
        with fusion_dialect.context() as ctx:
            kernel_count(fusion_dialect.parse(full_reduction, ctx))


# -- fallback -------------------------------------------------------------------------------
def _broken_compile(*args, **kwargs):
    raise RuntimeError("injected compiler failure")


def test_failed_compile_warns_once_with_reproducer_and_runs_the_reference(monkeypatch, tmp_path, options) -> None:
    options(dump_dir=str(tmp_path))  # reproducers go there
    monkeypatch.setattr(mlirfuse.lowering.cpu.compile, "compile_cpu", _broken_compile)
    f = mlirfuse.jit(chain)
    x = f32(4, 8)
    with pytest.warns(RuntimeWarning, match="injected compiler failure") as record:
        first = f(x)
        second = f(x)  # the same compile: no second warning
    assert len([w for w in record if "mlirfuse" in str(w.message)]) == 1
    path = Path(re.search(r"Reproducer: (\S+)", str(record[0].message)).group(1))
    assert path.exists() and path.parent == tmp_path and '"fusion.exp"' in path.read_text()
    assert_close(first, chain_np(x))
    assert_close(second, chain_np(x))


def test_failed_group_compile_falls_back_too(monkeypatch, options) -> None:
    """A fusion with a library op runs group by group: a group whose compile fails runs
    through the reference, once warned."""
    monkeypatch.setattr(mlirfuse.lowering.cpu.compile, "compile_cpu", _broken_compile)
    x, w = f32(4, 8), f32(8, 3)
    with pytest.warns(RuntimeWarning, match="injected compiler failure") as record:
        got = mlirfuse.jit(matmul_between_chains)(x, w)
    assert all(Path(re.search(r"Reproducer: (\S+)", str(r.message)).group(1)).exists() for r in record)
    assert_close(got, matmul_between_chains_np(x, w), reduction_size=8)


def copy_and_transpose(x):
    return ops.copy(x), ops.permute(x * 2.0, [1, 0]), ops.permute(x, [1, 0])


@pytest.mark.parametrize("origin", ["numpy", "torch"])
def test_the_reference_fallback_returns_fresh_dense_results(origin, monkeypatch, options) -> None:
    """Run by the reference after a failed compile, a fusion's results are what its kernels
    return: each in memory of its own, dense (a transposed result as a transpose written
    out, a copy of an input not the input). They were numpy's views: the input itself for the
    copy, a strided view for the permute; in torch.compile (HF Llama's KV-cache cat under bf16
    autocast, on a host whose JIT could not load the module) the layout check after the next
    library op failed, and a copy sharing its input's memory would see that input's writes."""
    monkeypatch.setattr(mlirfuse.lowering.cpu.compile, "compile_cpu", _broken_compile)
    x = f32(4, 8) + np.arange(32, dtype=np.float32).reshape(4, 8)
    if origin == "torch":
        torch = pytest.importorskip("torch")
        x = torch.from_numpy(x)
    with pytest.warns(RuntimeWarning, match="injected compiler failure"):
        copied, doubled, transposed = mlirfuse.jit(copy_and_transpose)(x)
    values = [np.asarray(v) for v in (copied, doubled, transposed)]
    assert_close(values[0], np.asarray(x))
    assert_close(values[1], np.asarray(x).T * 2)
    assert_close(values[2], np.asarray(x).T)
    for v in values:
        assert v.flags.c_contiguous and not np.shares_memory(v, np.asarray(x))


@pytest.mark.parametrize("graph", ["direct", "grouped"])
def test_failed_run_warns_once_and_runs_the_reference(graph, monkeypatch, options) -> None:
    """Running, not only compiling, may fail: the fusion (or the group) then runs through the
    reference, warned once; with the fallback off the failure raises."""
    def broken_run(self, *args, **kwargs):
        raise RuntimeError("injected run failure")

    monkeypatch.setattr(mlirfuse.lowering.cpu.compile.CompiledCpu, "__call__", broken_run)
    fn, ref, args = ((chain, chain_np, (f32(4, 8),)) if graph == "direct" else
                     (matmul_between_chains, matmul_between_chains_np, (f32(4, 8), f32(8, 3))))
    f = mlirfuse.jit(fn)
    with pytest.warns(RuntimeWarning, match="injected run failure") as record:
        first = f(*args)
        second = f(*args)
    assert len([w for w in record if "mlirfuse" in str(w.message)]) == (1 if graph == "direct" else 2)
    for got in (first, second):
        assert_close(got, ref(*args), reduction_size=8)
    options(fallback=False)
    with pytest.raises(FusionError, match="injected run failure"):
        mlirfuse.jit(fn)(*args)


def test_disabled_fallback_raises(monkeypatch, options) -> None:
    monkeypatch.setattr(mlirfuse.lowering.cpu.compile, "compile_cpu", _broken_compile)
    options(fallback=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # raising, not warning
        with pytest.raises(FusionError, match="injected compiler failure.*\\n.*reproducer: "):
            mlirfuse.jit(chain)(f32(4, 8))


def test_disable_fallback_environment_variable_raises(tmp_path) -> None:
    script = tmp_path / "run.py"
    script.write_text(
        "import numpy as np, mlirfuse, mlirfuse.lowering.cpu.compile\n"
        "from mlirfuse import ops\n"
        "def broken(*a, **k):\n"
        "    raise RuntimeError('injected compiler failure')\n"
        "mlirfuse.lowering.cpu.compile.compile_cpu = broken\n"
        "try:\n"
        "    mlirfuse.jit(lambda x: ops.exp(x) + 1.0)(np.ones(4, np.float32))\n"
        "except mlirfuse.FusionError as e:\n"
        "    print('raised:', e)\n")
    env = {"MLIRFUSE_DISABLE_FALLBACK": "1", "MLIRFUSE_DUMP_DIR": str(tmp_path), "PYTHONPATH": str(ROOT),
           "PATH": "/usr/bin:/bin", "MLIRFUSE_CACHE_DIR": "off"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert "raised: compiling the fusion failed: injected compiler failure" in out.stdout, out.stderr


# -- knobs from the environment ---------------------------------------------------------------
def test_environment_knobs_parse(monkeypatch) -> None:
    for name in ("MLIRFUSE_HORIZONTAL", "MLIRFUSE_SINGLE_NODE", "MLIRFUSE_MAX_ARGS", "MLIRFUSE_DISABLE_FALLBACK",
                 "MLIRFUSE_DUMP", "MLIRFUSE_DUMP_DIR", "MLIRFUSE_CPU_OPT_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    assert Options.from_env() == Options()
    monkeypatch.setenv("MLIRFUSE_HORIZONTAL", "0")
    monkeypatch.setenv("MLIRFUSE_SINGLE_NODE", "true")
    monkeypatch.setenv("MLIRFUSE_MAX_ARGS", "4")
    monkeypatch.setenv("MLIRFUSE_DISABLE_FALLBACK", "1")
    monkeypatch.setenv("MLIRFUSE_DUMP", "fusion_ir, pipeline")
    monkeypatch.setenv("MLIRFUSE_DUMP_DIR", "/tmp/dumps")
    opts = Options.from_env()
    assert (opts.horizontal, opts.single_node, opts.max_args, opts.fallback) == (False, True, 4, False)
    assert opts.dump == {"fusion_ir", "pipeline"} and opts.dump_dir == "/tmp/dumps"
    assert Options().cpu_opt_level == 3
    monkeypatch.setenv("MLIRFUSE_CPU_OPT_LEVEL", "1")
    assert Options.from_env().cpu_opt_level == 1
    monkeypatch.setenv("MLIRFUSE_CPU_OPT_LEVEL", "7")
    with pytest.warns(RuntimeWarning, match="not 0-3"):
        assert Options.from_env().cpu_opt_level == 3
    assert opts.plan_stages()[0].pipeline == ("builtin.module(fusion-cse, fusion-reshapes-past-reductions, fusion-dce, "
                                              "fusion-group{horizontal=false single-node=true max-args=4})")


def test_set_options_rejects_unknown_knobs() -> None:
    with pytest.raises(FusionError, match="unknown option"):
        mlirfuse.set_options(horizontl=False)


# -- dumps ----------------------------------------------------------------------------------
CPU_DUMPS = ["fusion_ir", "fusion_ir_presched", "segmented_fusion", "segmenter_logging", "scheduled_ir", "linalg",
             "python_definition", "pipeline", "kernel_args", "eff_bandwidth"]
GPU_DUMPS = ["gpu", "ptx", "launch_params", "compile_time"]
MARKERS = {"fusion_ir": "func.func @fusion", "fusion_ir_presched": "fusion.group", "segmented_fusion":
           "fusion.segments", "segmenter_logging": "", "scheduled_ir": "linalg.generic", "linalg": "linalg.generic",
           "python_definition": "FusionDefinition()", "pipeline": "mlirfuse-opt", "kernel_args": "input 0: float32",
           "eff_bandwidth": "GB/s", "gpu": "gpu.launch", "ptx": ".entry", "launch_params": "blockDim",
           "compile_time": "compiled (lowering, LLVM, ptxas): "}


def dumped(fn, args, backend: str = "cpu") -> None:
    jitted = mlirfuse.jit(fn)
    if backend == "cpu":
        jitted(*args)
    else:
        jitted.compile(*args, backend="gpu", arch="sm_90")


def two_kernels(x):
    """A reduction and a pointwise kernel: segments, and a rejected merge to log."""
    return ops.tanh(ops.exp(x) * 2.0), x.sum(0)


@pytest.mark.parametrize("name", CPU_DUMPS)
def test_dump_to_stderr(name, options, capfd) -> None:
    options(dump=name)
    dumped(two_kernels, [f32(4, 8)])
    err = capfd.readouterr().err
    assert f"===== mlirfuse {name} " in err
    body = err.split(f"===== mlirfuse {name} ", 1)[1].split("\n", 1)[1]
    assert body.strip() and MARKERS[name] in body, err
    assert "===== mlirfuse" not in err.replace(f"===== mlirfuse {name} ", "")  # only the one asked for


def test_segmenter_logging_says_why(options, capfd) -> None:
    options(dump="segmenter_logging")
    dumped(two_kernels, [f32(4, 8)])
    assert "not merging siblings" in capfd.readouterr().err


def test_dumps_to_files(options, tmp_path) -> None:
    options(dump=",".join(CPU_DUMPS), dump_dir=str(tmp_path))
    dumped(two_kernels, [f32(4, 8)])
    for name in CPU_DUMPS:
        files = list(tmp_path.glob(f"*-{name}.txt"))
        assert len(files) == 1, (name, sorted(p.name for p in tmp_path.iterdir()))
        assert MARKERS[name] in files[0].read_text()


needs_gpu_toolchain = pytest.mark.skipif(toolchain.find().libdevice is None,
                                         reason="no libdevice (CUDA toolkit or nvidia-cuda-nvcc wheel)")


@needs_gpu_toolchain
@pytest.mark.parametrize("name", GPU_DUMPS, ids=lambda n: f"{n}_dump")  # an id "gpu" would mark it needing one
def test_gpu_dumps_without_a_gpu(name, options, capfd) -> None:
    options(dump=name)
    dumped(lambda x: ops.exp(x) * 2.0, [f32(4, 8)], backend="gpu")
    err = capfd.readouterr().err
    assert f"===== mlirfuse {name} " in err and MARKERS[name] in err


def test_scheduled_ir_dump_for_fusions_with_library_ops(options, capfd) -> None:
    options(dump="scheduled_ir")
    dumped(matmul_between_chains, [f32(4, 8), f32(8, 3)])
    assert "linalg.generic" in capfd.readouterr().err


def _stage_commands(text: str) -> dict[str, str]:
    """The pipeline dump's commands by stage ('in one go' for the whole list)."""
    return {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in text.splitlines() if ": mlirfuse-opt " in line}


def _mlirfuse_opt(command: str, cwd: Path) -> str:
    argv = [sys.executable, "-m", "mlirfuse.tools.opt"] + shlex.split(command)[1:]
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, (command, out.stderr)
    return out.stdout


def test_pipeline_dump_replays(options, tmp_path) -> None:
    """The `pipeline` dump has one mlirfuse-opt command per stage, plan and backend, in the
    order of `compiled.stage_list()`; each, run on its source stage's IR saved under the name
    it gives, makes that stage's IR, and the whole list in one go makes the last."""
    options(dump="pipeline", dump_dir=str(tmp_path))
    compiled = mlirfuse.jit(two_kernels).compile(f32(4, 8), backend="cpu")
    (pipeline_file,) = tmp_path.glob("*-pipeline.txt")
    key = pipeline_file.name[:-len("-pipeline.txt")]
    commands = _stage_commands(pipeline_file.read_text())
    assert list(commands) == [s.name for s in compiled.stage_list()] + ["in one go"]
    assert [s.name for s in compiled.stage_list()][:4] == ["grouped", "stripped", "segmented", "linalg"]
    for name, text in compiled.stages.items():
        (tmp_path / f"{key}-{name}.mlir").write_text(text)
    for name, command in commands.items():
        got = _mlirfuse_opt(command, tmp_path)
        assert got.strip() == compiled.stages["llvm" if name == "in one go" else name].strip(), name
    assert compiled.stages["segmented"] == compiled.segmented_ir


def test_pipeline_dump_replays_each_group_around_library_ops(options, tmp_path) -> None:
    """With a matmul between groups, the dump gives each group's IR: the backend's stage
    commands, run in order from it, lower it (the whole fusion's IR has a library op that
    no lowering takes)."""
    options(dump="fusion_ir,pipeline", dump_dir=str(tmp_path))
    mlirfuse.jit(matmul_between_chains)(f32(4, 8), f32(8, 3))
    (pipeline_file,) = tmp_path.glob("*-pipeline.txt")
    text = pipeline_file.read_text()
    groups = re.findall(r"group @\S+ \(the 'fusion' stage of the cpu stages below: save as (\S+)\):\n(.*?)\n(?=stages of |group @)",
                        text, re.S)
    assert len(groups) == 2
    commands = _stage_commands(text)
    backend = ["linalg", "inlined", "bufferized", "llvm"]
    assert [n for n in commands if n in backend] == backend
    for name, group_ir in groups:
        (tmp_path / name).write_text(group_ir)
        for stage in backend:
            out = _mlirfuse_opt(commands[stage], tmp_path)
            (tmp_path / name.replace("-fusion.mlir", f"-{stage}.mlir")).write_text(out)
        assert "llvm.func @_mlir_ciface_mlirfuse_entry" in out


# -- one more end-to-end check: dropout + residual + LayerNorm around a linear, options on --
def test_transformer_block_matches_numpy_under_every_grouping(options) -> None:
    def block(x, w, b, g, beta, seed):
        h = ops.linear(x, w, b)
        y = ops.where(ops.rand_like(h, seed=seed) >= 0.1, h / 0.9, 0.0) + x
        m = y.mean(-1, keepdim=True)
        d = y - m
        return d * ops.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * g + beta

    x, w, b, g, beta = f32(2, 3, 16), f32(16, 16) * 0.1, f32(16), f32(16), f32(16)
    h = x @ w.T + b
    y = np.where(uniform(h.shape, 5, 0, 0.0, 1.0, np.float32) >= 0.1, h / np.float32(0.9), 0) + x
    d = y - y.mean(-1, keepdims=True)
    want = d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * g + beta
    for knobs in GROUPING.values():
        options(**knobs)
        assert_close(mlirfuse.jit(block)(x, w, b, g, beta, 5), want, str(knobs), reduction_size=16)


def test_segmented_ir_is_valid_mlir() -> None:
    compiled = mlirfuse.jit(layer_norm).compile(f32(4, 8), f32(8), f32(8))
    with fusion_dialect.context() as ctx:
        module = fusion_dialect.parse(compiled.segmented_ir, ctx)
        assert module.operation.verify()
        graph = [f for f in module.body.operations if "fusion.kernels" in f.attributes]
        assert len(graph) == 1 and ir.IntegerAttr(graph[0].attributes["fusion.kernels"]).value == 1


def _wkv(k, v, w, u, steps, exp, maximum):
    """RWKV's WKV recurrence unrolled over `steps` (as Dynamo traces HF's loop over the
    sequence), written once for mlirfuse's ops and for numpy."""
    num = k[:, 0] * 0.0
    den, mx, outs = num, num - 1e38, []
    for t in range(steps):
        kt, vt = k[:, t], v[:, t]
        m = maximum(mx, u + kt)
        e1, e2 = exp(mx - m), exp(u + kt - m)
        outs.append((e1 * num + e2 * vt) / (e1 * den + e2))
        m2 = maximum(mx + w, kt)
        e1, e2 = exp(mx + w - m2), exp(kt - m2)
        num, den, mx = e1 * num + e2 * vt, e1 * den + e2, m2
    return tuple(outs) + (num, den, mx)


def test_an_unrolled_recurrence_merges_its_siblings_and_matches_numpy() -> None:
    """Some hundred pointwise generics on slices of the same inputs: linalg-merge-siblings
    merges them pair by pair into a few generics of some thousand ops (each merge keeps the
    larger body whole and moves the other's ops into it, before or after). The results are
    numpy's."""
    steps = 24
    k, v = RNG.random((2, steps, 16), dtype=np.float32), RNG.random((2, steps, 16), dtype=np.float32)
    w, u = -RNG.random(16, dtype=np.float32), RNG.random(16, dtype=np.float32)
    f = mlirfuse.jit(lambda *a: _wkv(*a, steps, ops.exp, ops.maximum))
    got = f(k, v, w, u)
    want = _wkv(*(x.astype(np.float64) for x in (k, v, w, u)), steps, np.exp, np.maximum)
    for g, x in zip(got, want):
        assert_close(g, x.astype(np.float32), "wkv")
    generics = f.compile(k, v, w, u).stages["linalg"].count("linalg.generic")
    assert generics < 3 * steps  # 8 * steps ops, siblings merged
