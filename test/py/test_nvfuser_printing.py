"""nvFuser's FusionDefinition around the definition itself, from its documented behaviour:
the printed definition (`repr(fd)`, a Python function that defines the same fusion again),
FusionCache serialization, outputs that are inputs or views of them (aliases, not copies),
nvFuser's slice checks, and introspection (`fusion_ir`, `last_cuda_code`,
`last_scheduled_fusion_ir`, `execute(profile=True)` / `profile()`, `debug_output()`)."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

import mlirfuse  # noqa: E402
from mlirfuse import DataType, FusionCache, FusionDefinition, FusionError  # noqa: E402


def _define(build) -> FusionDefinition:
    with FusionDefinition() as fd:
        build(fd)
    return fd


def _run_printed(fd: FusionDefinition) -> FusionDefinition:
    """Execute `repr(fd)` as a test harness does: only FusionDefinition and DataType in scope."""
    text = repr(fd)
    name = text.split("\n")[1].split("(")[0][len("def "):]
    scope = {"FusionDefinition": FusionDefinition, "DataType": DataType}
    exec(text, scope)
    with FusionDefinition() as again:
        scope[name](again)
    return again


def test_printed_definition_defines_the_same_fusion_again() -> None:
    x, y = torch.randn(3, 4), torch.randn(3, 1)

    def build(fd):
        t0 = fd.from_pytorch(x)
        t1 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Double)
        shape = fd.define_vector([t0.size(0), 4], dtype=DataType.Int)
        t2 = (t0 + t1) * s + float("-inf") * fd.ops.lt(t0, -100.0)
        mean, var = fd.ops.var_mean(t2, [1], 0, True)
        t3 = fd.ops.reshape(fd.ops.where(t2 > 0, t2, float("nan")), shape)
        fd.add_output(t3)
        fd.add_output(mean, stride_order=[0, 1])
        fd.add_output(fd.ops.broadcast_in_dim(var, [t0.size(0), t0.size(1)], [0, 1]))
    fd = _define(build)
    text = repr(fd)
    assert text.split("\n")[1] == f"def nvfuser_fusion_id{fd.id()}(fd : FusionDefinition) -> None :"
    assert "T0 = fd.define_tensor([-1, -1], dtype=DataType.Float, contiguity=True)" in text  # from_pytorch
    assert "float('nan')" in text and "-float('inf')" in text and "T0.size(0)" in text
    before = FusionCache.get().num_fusions()
    again = _run_printed(fd)
    assert again.id() == fd.id() and FusionCache.get().num_fusions() == before
    for a, b in zip(fd.execute([x, y, 2.0]), again.execute([x, y, 2.0])):
        torch.testing.assert_close(a, b, equal_nan=True)


def test_printed_definitions_of_random_ops_complex_values_and_aliases() -> None:
    z = torch.randn(5, dtype=torch.complex64)
    x = torch.randn(5)

    def build(fd):
        c = fd.from_pytorch(z)
        t = fd.from_pytorch(x)
        k = fd.define_scalar(complex(1.5, -2.0), dtype=DataType.ComplexFloat)
        fd.add_output(fd.ops.mul(c, k))
        fd.add_output(fd.ops.add(t, fd.ops.uniform(0.0, 1.0, [5], dtype=DataType.Float)), alias_input=t)
    fd = _define(build)
    again = _run_printed(fd)
    assert again.id() == fd.id()
    torch.manual_seed(3)
    x1 = x.clone()
    (a,) = fd.execute([z, x1])
    torch.manual_seed(3)
    x2 = x.clone()
    (b,) = again.execute([z, x2])
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(x1, x2)  # the same numbers drawn, written into the input


def test_printed_sizes_of_complex_inputs() -> None:
    """A complex input's sizes (its real parts' memory has a trailing dim of 2) are printed as
    the complex value's (`T1.size(0)`); printing raised. `fd.ops.size`/`shape` take complex
    values too."""
    a, b = torch.randn(2, 6, dtype=torch.complex128), torch.randn(3, 4, dtype=torch.complex128)

    def build(fd):
        za, zb = fd.from_pytorch(a), fd.from_pytorch(b)
        fd.add_output(fd.ops.reshape(za, zb.shape()))
        fd.add_output(fd.ops.reshape(za, [fd.ops.size(zb, 1), fd.ops.at(fd.ops.shape(zb), 0)]))
    fd = _define(build)
    assert "fd.ops.reshape(T0, (T1.size(0), T1.size(1)))" in repr(fd)
    again = _run_printed(fd)
    for outs in (fd.execute([a, b]), again.execute([a, b])):
        assert torch.equal(outs[0], a.reshape(3, 4)) and torch.equal(outs[1], a.reshape(4, 3))


def test_the_cache_keys_calls_as_nvfuser_does() -> None:
    """`add_output(t, stride_order)` and `ops.stride_order` + `add_output` make one fusion but
    are two definitions in nvFuser's cache (its records differ); a repeated definition is one."""
    x = torch.randn(2, 3, 4)

    def as_output(fd):
        fd.add_output(fd.ops.add(fd.from_pytorch(x), 3.0), [0, 2, 1])

    def as_op(fd):
        fd.add_output(fd.ops.stride_order(fd.ops.add(fd.from_pytorch(x), 3.0), [0, 2, 1]))
    before = FusionCache.get().num_fusions()
    first, second, third = _define(as_output), _define(as_op), _define(as_output)
    assert first.id() != second.id() and first.id() == third.id()
    assert FusionCache.get().num_fusions() == before + 2
    for fd in (first, second):
        (out,) = fd.execute([x])
        torch.testing.assert_close(out, x + 3.0)
        assert out.stride() == (1, 8, 2)  # dim 1 outermost, then dim 2, dim 0 innermost


def test_serialize_and_deserialize_the_fusion_cache(tmp_path) -> None:
    FusionCache.reset()
    x = torch.randn(4, 4)
    fds = [_define(lambda fd: fd.add_output(fd.ops.exp(fd.from_pytorch(x)))),
           _define(lambda fd: fd.add_output(fd.ops.sum(fd.ops.mul(fd.from_pytorch(x), 2.0), [0])))]
    ids = [fd.id() for fd in fds]
    cache = FusionCache.get()
    path = tmp_path / "cache.json"
    cache.serialize(path)
    count = cache.num_fusions()
    assert json.loads(path.read_text())["format"].startswith("mlirfuse-fusion-cache")
    FusionCache.reset()
    assert FusionCache.get().num_fusions() == 0
    FusionCache.get().deserialize(path)
    assert FusionCache.get().num_fusions() == count
    again = [_define(lambda fd: fd.add_output(fd.ops.exp(fd.from_pytorch(x)))),
             _define(lambda fd: fd.add_output(fd.ops.sum(fd.ops.mul(fd.from_pytorch(x), 2.0), [0])))]
    assert [fd.id() for fd in again] == ids and FusionCache.get().num_fusions() == count
    torch.testing.assert_close(FusionDefinition(ids[1]).execute([x])[0], (x * 2).sum(0))
    with FusionDefinition() as fd:
        fd.add_output(fd.from_pytorch(x).exp())  # a Tensor method: not in the definition's calls
    with pytest.warns(RuntimeWarning, match=f"definition {fd.id()} left out"):
        FusionCache.get().serialize(path)
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(FusionError, match="not a serialized mlirfuse FusionCache"):
        FusionCache.get().deserialize(tmp_path / "bad.json")


def test_automatic_serialization_writes_the_default_workspace_at_exit(tmp_path) -> None:
    import subprocess
    import sys

    program = (
        "import torch, mlirfuse\n"
        "from mlirfuse import FusionDefinition, FusionCache\n"
        "mlirfuse.enable_automatic_serialization()\n"
        "n = FusionCache.get().num_fusions()\n"
        "with FusionDefinition() as fd:\n"
        "    fd.add_output(fd.ops.neg(fd.from_pytorch(torch.ones(2))))\n"
        "print(n, FusionCache.get().num_fusions())\n")
    env = {**__import__("os").environ, "MLIRFUSE_CACHE_DIR": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.split() == ["0", "1"]
    assert (tmp_path / "nvfuser_fusion_cache.json").exists()
    second = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
    assert second.stdout.split() == ["1", "1"]  # read back at the first get(); the same definition found


def test_outputs_that_are_inputs_or_views_of_them_are_aliases() -> None:
    """nvFuser's alias analysis: a reshape (or permute, squeeze, unsqueeze) of an input is a
    view of it; an output equal to an input is that input; an output also written into an
    input is that input, which holds the new values."""
    x = torch.rand(2, 3, 4)

    def views(fd):
        t = fd.define_tensor([2, 3, 4], contiguity=[True, True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(t, [2, 12]))
        fd.add_output(fd.ops.unsqueeze(fd.ops.permute(t, [2, 0, 1]), 0))
        fd.add_output(fd.ops.exp(t))
    reshaped, permuted, computed = _define(views).execute([x])
    assert reshaped.data_ptr() == x.data_ptr() and permuted.data_ptr() == x.data_ptr()
    assert computed.data_ptr() != x.data_ptr()
    torch.testing.assert_close(permuted, x.permute(2, 0, 1)[None])
    y = torch.randn(1, 2, 3, 4)
    original = y.clone()

    def updates(fd):
        t = fd.define_tensor([-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.Float)
        u = fd.ops.where(fd.ops.gt(t, 0.0), t, 0.0)
        fd.add_output(u)
        fd.add_output(u, t)
        fd.add_output(u)
        fd.add_output(t)
    outs = _define(updates).execute([y])
    assert len(outs) == 3 and all(o.data_ptr() == y.data_ptr() for o in outs)
    torch.testing.assert_close(y, original.clamp(min=0))


def test_slice_checks_as_nvfuser() -> None:
    x = torch.randn(10, 10)
    cases = [(dict(start_indices=[-1, -2], end_indices=[5, 5]), "start_indices must be greater than or equal to 0"),
             (dict(start_indices=[3, 4], end_indices=[1, 2]), "end_indices must be greater than or equal to start"),
             (dict(start_indices=[0, 0], end_indices=[5, 5], strides=[5, 5]), "strides must be of const size 1"),
             (dict(start_indices=[0, 0, 0], end_indices=[4, 4, 4]), "Number of tensor dimensions does not match"),
             (dict(start_indices=[0, 0, 0], end_indices=[4, 4], strides=[1, 1]), "start_indices and strides don't"),
             (dict(start_indices=[0, 0], end_indices=[4, 4, 4]), "Slice indexing attribute dimensions don't match")]
    for kwargs, message in cases:
        with pytest.raises(RuntimeError, match=message):
            _define(lambda fd, k=kwargs: fd.add_output(fd.ops.slice(fd.from_pytorch(x), **k)))
    fd = _define(lambda fd: fd.add_output(fd.ops.slice(fd.from_pytorch(x), start_indices=[2, 6], end_indices=[4, 12])))
    torch.testing.assert_close(fd.execute([x])[0], x[2:4, 6:])


def test_introspection_of_the_last_execution() -> None:
    x, y = torch.randn(2, 5), torch.randn(2, 5)

    class Sums(FusionDefinition):
        def definition(self):
            t = self.ops.add(self.from_pytorch(x), self.from_pytorch(y))
            self.add_output(self.ops.sum(self.ops.sum(t, [-1]), [-1]))
    fd = Sums()
    for method in (fd.fusion_ir, fd.last_cuda_code, fd.last_scheduled_fusion_ir):
        with pytest.raises(RuntimeError, match="Invalid fusion definition!"):
            method()
    with pytest.raises(ValueError):
        fd.profile()
    fd.id()  # (runs the definition)
    with pytest.raises(RuntimeError, match="Fusion is not compiled!"):
        fd.cuda_code_for([x, y])
    (out,) = fd.execute([x, y], profile=True)
    torch.testing.assert_close(out, (x + y).sum())
    profile = fd.profile()
    assert profile.fusion_id == fd.id() and profile.segments == 2
    assert [k.scheduler for k in profile.kernel_profiles] == ["reduction", "reduction"]
    assert profile.host_time_ms > 0 and profile.kernel_time_ms > 0
    assert "fusion.sum" in fd.fusion_ir()
    code = fd.last_cuda_code()
    assert ("llvm.func" in code) if out.device.type == "cpu" else (".entry" in code)
    assert "linalg.generic" in fd.last_scheduled_fusion_ir()
    assert fd.cuda_code_for([x, y]) == code and "fusion.segments" in fd.sched.user_schedule_ir()
    assert fd.debug_output() is None
    previous = mlirfuse.set_options(dump="kernel_args")
    try:
        fd.execute([x, y], capture_debug_output=True)
    finally:
        mlirfuse.restore_options(previous)
    assert "mlirfuse kernel_args" in fd.debug_output()
    fd.execute([x, y])
    assert fd.debug_output() is None


def test_profiles_name_library_kernels_and_user_schedules() -> None:
    a, b, w = torch.randn(2, 4, 16), torch.randn(2, 4, 16), torch.randn(16, 16)

    class Linear(FusionDefinition):
        def definition(self):
            t = self.ops.linear(self.from_pytorch(a), self.from_pytorch(w))
            self.add_output(self.ops.add(t, self.from_pytorch(b)))

    class Scheduled(FusionDefinition):
        def definition(self):
            self.add_output(self.ops.mul(self.from_pytorch(a), 2.0))

        def schedule(self):
            pass
    linear, scheduled = Linear(), Scheduled()
    torch.testing.assert_close(linear.execute([a, w, b], profile=True)[0], a @ w.t() + b, rtol=1e-5, atol=1e-5)
    assert [k.scheduler for k in linear.profile().kernel_profiles] == ["expr_eval", "pointwise"]
    scheduled.execute([a], profile=True)
    (kernel,) = scheduled.profile().kernel_profiles
    assert kernel.scheduler == "user" and kernel.time_ms is not None and not math.isnan(kernel.time_ms)


# -- repro scripts ----------------------------------------------------------------------------
def _repro_fusion(fd: FusionDefinition) -> None:
    t0 = fd.define_tensor([-1, -1], dtype=DataType.Float, contiguity=[True, False], stride_order=[0, 1])
    t1 = fd.define_tensor([-1], dtype=DataType.Bool)
    s = fd.define_scalar(None, DataType.Double)
    t2 = fd.ops.mul(t0, s)
    fd.add_output(fd.ops.where(t1, t2, fd.ops.neg(t2)))


def test_last_repro_script_needs_the_repro_state_of_an_execute() -> None:
    """nvFuser asserts (an AssertionError, its message) where no execute saved its inputs."""
    fd = _define(_repro_fusion)
    fd.execute([torch.randn(3, 2).t(), torch.tensor([True, False, True]), 2.0])
    with pytest.raises(AssertionError, match=r"save_repro_state=True\) was not executed"):
        fd.last_repro_script()


@pytest.mark.parametrize("scalar", [2.0, float("inf"), float("nan")])
def test_the_last_repro_script_runs_alone_on_inputs_like_the_last(scalar, recwarn) -> None:
    """`execute(inputs, save_repro_state=True)` (no warning: the option is honoured) keeps a
    description of the inputs, and `last_repro_script()` is a script that, executed with
    nothing in scope, defines the fusion again and runs it on inputs of the same sizes,
    strides (a transposed input), dtypes and devices, the runtime scalar as it was
    (nvFuser's spelling of inf and nan). Its outputs match the fusion's on those inputs."""
    fd = _define(_repro_fusion)
    x, keep = torch.randn(3, 2).t(), torch.tensor([True, False, True])
    fd.execute([x, keep, scalar], save_repro_state=True)
    assert not [w for w in recwarn if "save_repro_state" in str(w.message)]
    text = fd.last_repro_script()
    assert text.startswith("# CUDA devices:") and "from mlirfuse import FusionDefinition, DataType" in text
    assert ".as_strided((2, 3), (1, 2))" in text and "torch.testing.make_tensor((3,), dtype=torch.bool" in text
    namespace: dict = {}
    exec(text, namespace)  # noqa: S102 - the script is the feature under test
    inputs = namespace["inputs"]
    assert inputs[0].stride() == x.stride() and inputs[0].dtype == x.dtype and inputs[1].dtype == torch.bool
    assert inputs[2] == scalar or (math.isnan(scalar) and math.isnan(inputs[2]))
    (want,) = fd.execute(inputs)
    (got,) = namespace["fd"].execute(inputs)
    torch.testing.assert_close(got, want, equal_nan=True)


def test_a_repro_script_for_given_inputs_or_none() -> None:
    """`repro_script_for(inputs)` for any inputs (numpy arrays too, on the CPU); without
    inputs, the definition alone."""
    import numpy as np

    fd = _define(_repro_fusion)
    text = fd.repro_script_for([np.ones((2, 3), np.float32), np.array([True, False, True]), 0.5])
    assert "torch.testing.make_tensor((2, 3), dtype=torch.float32, device='cpu')" in text and "    0.5,\n" in text
    bare = fd.repro_script_for()
    assert "inputs = [" not in bare and "with FusionDefinition() as fd:\n    nvfuser_fusion_id" in bare
    namespace: dict = {}
    exec(bare, namespace)  # noqa: S102
    assert repr(namespace["fd"]) == repr(fd)
