"""User mistakes raise `mlirfuse.FusionError` (a ValueError) naming the op or argument and
the offending shapes/dtypes; no user input may crash the process.

Every check asserts the exception type and that the message contains the op/argument and
the shapes or dtypes involved. Inputs that crashed the process once (integer division
traps, MLIR assertions) run in a subprocess, so that a crash fails one test, not the run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import mlirfuse
from mlirfuse import DataType, FusionDefinition, FusionError, ops


@pytest.fixture(autouse=True, scope="module")
def _no_fallback():
    """A kernel that fails to compile or run must fail the test, not quietly run the reference."""
    previous = mlirfuse.set_options(fallback=False)
    yield
    mlirfuse.restore_options(previous)


def f32(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def raises(fn: Callable[[], Any], *needles: str) -> FusionError:
    """fn() raises FusionError whose message contains every needle (a regex)."""
    with pytest.raises(FusionError) as info:
        fn()
    message = str(info.value)
    for needle in needles:
        assert re.search(needle, message), f"{needle!r} not in message {message!r}"
    return info.value


def q(text: str) -> str:
    return re.escape(text)


def test_fusion_error_is_value_error() -> None:
    assert issubclass(FusionError, ValueError)


# -- FusionDefinition: inputs not as defined ------------------------------------------------------
def _add_tensor_scalar() -> FusionDefinition:
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.add(t, s))
    return fd


def test_execute_wrong_number_of_inputs() -> None:
    fd = _add_tensor_scalar()
    raises(lambda: fd.execute([f32(2, 3)]), "expected 2 inputs", "got 1", q("float32[?, ?]"))
    raises(lambda: fd.execute([f32(2, 3), 1.0, 2.0]), "expected 2 inputs", "got 3")
    raises(lambda: fd.execute([]), "expected 2 inputs", "got 0")
    assert fd.execute([f32(2, 3), 1.0])[0].shape == (2, 3)  # still usable


def test_execute_inputs_not_a_list() -> None:
    fd = _add_tensor_scalar()
    raises(lambda: fd.execute(f32(2, 3)), "execute", "list")


def test_execute_rank_not_as_defined() -> None:
    fd = _add_tensor_scalar()
    raises(lambda: fd.execute([f32(2, 3, 4), 1.0]), "input 0", "rank 2", q("(2, 3, 4)"))
    raises(lambda: fd.execute([f32(6), 1.0]), "input 0", "rank 2", q("(6,)"))


def test_execute_dtype_not_as_defined() -> None:
    fd = _add_tensor_scalar()
    raises(lambda: fd.execute([np.ones((2, 3), np.float64), 1.0]), "input 0", "float32", "float64")
    raises(lambda: fd.execute([np.ones((2, 3), np.int32), 1.0]), "input 0", "float32", "int32")
    raises(lambda: fd.execute([np.ones((2, 3), np.bool_), 1.0]), "input 0", "float32", "bool")


def test_execute_tensor_and_scalar_swapped() -> None:
    fd = _add_tensor_scalar()
    raises(lambda: fd.execute([1.0, 1.0]), "input 0", "array", q("float32[?, ?]"))
    raises(lambda: fd.execute([f32(2, 3), f32(2)]), "input 1", "scalar", q("(2,)"))


def test_execute_unconvertible_scalar_names_the_input() -> None:
    fd = _add_tensor_scalar()
    raises(lambda: fd.execute([f32(2, 3), "two"]), "input 1", "float64|scalar", "two|str")


def test_execute_scalar_of_the_wrong_kind() -> None:
    """A float given for an integer scalar input is lossy: an error, not a silent truncation."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        s = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.mul(t, s))
    assert fd.execute([f32(3), 2])[0].tolist() == [2.0, 2.0, 2.0]
    raises(lambda: fd.execute([f32(3), 2.5]), "input 1", "int64", "2.5")
    # a complex value for a real scalar: named as such (it is a Python scalar; complex scalars
    # are taken by inputs of a complex dtype)
    raises(lambda: fd.execute([f32(3), 2 + 1j]), "input 1", "complex scalar", re.escape("(2+1j)"), "complex dtype")


def test_execute_unsupported_dtype_names_the_input() -> None:
    fd = _add_tensor_scalar()
    raises(lambda: fd.execute([np.ones((2, 3), np.complex64), 1.0]), "input 0", "complex64")
    raises(lambda: fd.execute([np.ones((2, 3), np.uint16), 1.0]), "input 0", "uint16")
    raises(lambda: fd.execute([f32(2, 3), None]), "input 1", "NoneType|None")


def test_execute_static_dim_not_as_defined() -> None:
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.abs(fd.define_tensor(shape=[4, 5])))
    raises(lambda: fd.execute([f32(4, 6)]), "input 0", "dim 1", "5", q("(4, 6)"))


def test_execute_size_one_for_a_symbolic_dim() -> None:
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1])
        b = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.add(a, b))
    # A symbolic size may be 1 (as in nvFuser: it is no broadcast dim), and then must equal
    # the sizes the definition ties it to.
    raises(lambda: fd.execute([f32(4, 5), f32(1)]), "inconsistent", "got 5 and 1", "do not broadcast")
    (out,) = fd.execute([f32(4, 1), np.full(1, 2.0, np.float32)])
    np.testing.assert_array_equal(out, np.full((4, 1), 3.0, np.float32))


def test_define_tensor_bad_shape() -> None:
    with FusionDefinition() as fd:
        raises(lambda: fd.define_tensor(shape=[-2, 3]), "define_tensor", "-2")
        raises(lambda: fd.define_tensor(shape=[2.0]), "define_tensor", q("2.0"))
        raises(lambda: fd.define_tensor(shape=[2], dtype=np.int8), "int8")  # complex64 is offered (pairs of reals)
        raises(lambda: fd.define_tensor(shape=[2], dtype="uint16"), "uint16")


# -- shapes that do not broadcast -------------------------------------------------------------------
def test_static_shapes_do_not_broadcast_at_definition() -> None:
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[4, 5])
        b = fd.define_tensor(shape=[6])
        raises(lambda: fd.ops.add(a, b), "add", q("[4, 5]"), q("[6]"))
        c = fd.define_tensor(shape=[3, 2, 5])
        raises(lambda: fd.ops.where(fd.ops.gt(c, 0.0), a, c), "where", q("[4, 5]"), q("[3, 2, 5]"))


def test_static_jit_shapes_do_not_broadcast_at_trace() -> None:
    f = mlirfuse.jit(lambda x, y: ops.mul(x, y), dynamic=False)
    raises(lambda: f(f32(4, 5), f32(6)), "mul", q("[4, 5]"), q("[6]"))


def test_symbolic_shapes_do_not_broadcast_at_call() -> None:
    f = mlirfuse.jit(lambda x, y: x + y)
    assert f(f32(4, 5), f32(5)).shape == (4, 5)
    err = raises(lambda: f(f32(4, 5), f32(6)), q("(4, 5)"), q("(6,)"), "add|in0|input 0")
    assert "5" in str(err) and "6" in str(err)
    assert f.cache_info().compiles == 1  # same signature: the check is at call time
    # the first call may be the bad one, too
    g = mlirfuse.jit(lambda x, y: ops.maximum(x, y))
    raises(lambda: g(f32(4, 5), f32(6)), q("(4, 5)"), q("(6,)"))


def test_symbolic_sizes_that_cannot_be_equal() -> None:
    """A merged dim (rows*cols) against one of its factors (rows): a FusionError at call time
    (the trace must not loop on the size aliases it records)."""
    f = mlirfuse.jit(lambda x: ops.reshape(x, [-1]) + ops.sum(x, 1))
    raises(lambda: f(f32(2, 3)), q("(2, 3)"))


def test_symbolic_shapes_do_not_broadcast_in_fusion_definition() -> None:
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1])
        b = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.add(a, b))
    raises(lambda: fd.execute([f32(4, 5), f32(6)]), q("(4, 5)"), q("(6,)"))


def test_expand_and_broadcast_in_dim_mismatches() -> None:
    raises(lambda: mlirfuse.jit(lambda x: ops.expand(x, [5, 4]), dynamic=False)(f32(3, 4)),
           "expand", "3", "5")
    raises(lambda: mlirfuse.jit(lambda x: ops.expand(x, [5, 4]))(f32(3, 4)), q("(3, 4)"), "5")
    raises(lambda: mlirfuse.jit(lambda x: ops.expand(x, [4]))(f32(3, 4)), "expand", q("[4]"))
    raises(lambda: mlirfuse.jit(lambda x: ops.broadcast_in_dim(x, [3, 4], [1, 0]))(f32(3, 4)),
           "broadcast_in_dim", q("[1, 0]"))
    raises(lambda: mlirfuse.jit(lambda x: ops.broadcast_in_dim(x, [3, 4, 5], [0]))(f32(3, 4)),
           "broadcast_in_dim", q("[0]"))
    raises(lambda: mlirfuse.jit(lambda x: ops.broadcast_in_dim(x, [7, 4], [0, 1]),
                                dynamic=False)(f32(3, 4)), "broadcast_in_dim", q("[3, 4]"), q("[7, 4]"))


# -- jit calls --------------------------------------------------------------------------------------
def test_jit_later_call_with_another_number_of_arguments() -> None:
    f = mlirfuse.jit(lambda x, y: x + y)
    f(f32(4, 5), f32(5))
    raises(lambda: f(f32(4, 5)), "argument|input", "2", "1")
    raises(lambda: f(f32(4, 5), f32(5), f32(5)), "argument|input", "2", "3")


def test_jit_takes_keyword_arguments_as_the_positions_they_name() -> None:
    """`f(x, scale=3.0)` raised "JitFunction.__call__() got an unexpected keyword argument"
    (black-box review, session 79). Keywords bind as a Python call binds them; a parameter
    skipped before the last one given takes its default; keyword-only ones cannot be traced."""
    def scaled(x, shift=1.0, scale=2.0):
        return (x + shift) * scale

    f = mlirfuse.jit(scaled)
    x = f32(3)
    for args, kwargs in [((x,), {"scale": 3.0}), ((x, 0.5), {"scale": 3.0}), ((), {"x": x, "shift": -1.0}),
                         ((x,), {})]:
        np.testing.assert_allclose(f(*args, **kwargs), scaled(*args, **kwargs), rtol=1e-6)
    raises(lambda: f(x, x=x), "scaled", "multiple values")
    raises(lambda: f(x, bias=1.0), "scaled", "bias")
    raises(lambda: mlirfuse.jit(lambda x, *, k=2.0: x * k)(x, k=3.0), "keyword-only", "k")


def test_jit_later_call_with_another_rank_traces_again() -> None:
    f = mlirfuse.jit(lambda x: ops.sum(x, 1))
    f(f32(3, 4))
    raises(lambda: f(f32(3)), "sum", "dim 1", "rank 1")


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.uint16, np.uint8, np.int8,
                                   np.int16, np.uint32, np.uint64, np.longdouble, np.object_, np.str_])
def test_jit_unsupported_array_dtype(dtype) -> None:
    f = mlirfuse.jit(lambda x, y: x + y)
    bad = np.ones(3, dtype) if dtype is not np.str_ else np.array(["a", "b", "c"])
    raises(lambda: f(f32(3), bad), "input 1", "unsupported dtype", re.escape(np.dtype(bad.dtype).name) if dtype
           not in (np.object_, np.str_) else "dtype")


@pytest.mark.parametrize("value", [None, "abc", 1j, object(), {"a": 1}])
def test_jit_unsupported_argument(value) -> None:
    f = mlirfuse.jit(lambda x, y: x + y)
    raises(lambda: f(value, f32(3)), "input 0", "unsupported", type(value).__name__)


def test_jit_returns_a_non_tensor() -> None:
    for result in [None, 3, 2.5, "x", np.ones(3)]:
        f = mlirfuse.jit(lambda x, r=result: r)
        raises(lambda f=f: f(f32(3)), "<lambda>", "return", re.escape(repr(result)[:10]))
    raises(lambda: mlirfuse.jit(lambda x: (x + 1, None))(f32(3)), "return", "None")
    raises(lambda: mlirfuse.jit(lambda x: {"a": x})(f32(3)), "return", "dict|{")

    def named(x):
        return x.shape

    raises(lambda: mlirfuse.jit(named)(f32(3)), "named", "return")


def test_unknown_backend() -> None:
    raises(lambda: mlirfuse.jit(lambda x: x + 1, backend="tpu")(f32(3)), "backend", "tpu")


@pytest.mark.parametrize("arch", ["90", "sm_xx", "SM_90", "compute_90", "sm_", ""])
def test_malformed_arch(arch: str) -> None:
    """Checked before LLVM sees it (it ignores an unknown processor, and asserts, killing the
    process, on "90")."""
    raises(lambda: mlirfuse.jit(lambda x: ops.exp(x)).compile(f32(4, 4), backend="gpu", arch=arch),
           "arch", q(repr(arch)), "sm_90")


def test_torch_tensor_on_an_unsupported_device() -> None:
    torch = pytest.importorskip("torch")
    raises(lambda: mlirfuse.jit(lambda a: a + 1)(torch.ones(4, device="meta")), "input 0", "meta")


def test_a_gpu_array_torch_cannot_take() -> None:
    """A CUDA-array-interface object torch refuses (here: torch without CUDA, or a made-up
    pointer): FusionError, whether or not anything imported torch before the call."""
    pytest.importorskip("torch")
    script = textwrap.dedent("""
        import sys, numpy as np, mlirfuse
        class Fake:
            __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (1 << 40, False), "version": 3}
        try:
            mlirfuse.jit(lambda a, b: a + b)(np.ones(4, np.float32), Fake())
        except mlirfuse.FusionError as e:
            print("FusionError:", e)
            assert "torch" in sys.modules and "install torch" not in str(e)
        """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "FusionError: input 1" in out.stdout or "FusionError: inputs mix" in out.stdout


def test_unknown_dump_names() -> None:
    raises(lambda: mlirfuse.set_options(dump="fx_graph,bogus"), "unknown dump", "bogus", "partition")
    out = subprocess.run([sys.executable, "-c", "import mlirfuse"], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, MLIRFUSE_DUMP="fx_graph,bogus"))
    assert out.returncode == 0 and "unknown dump(s) ['bogus'] ignored" in out.stderr


def test_out_of_range_and_unconvertible_scalars() -> None:
    ints = np.array([1, 2], np.int64)
    raises(lambda: mlirfuse.jit(lambda a: a + 2 ** 80)(ints), "constant", "out of range for int64")
    raises(lambda: mlirfuse.jit(lambda a: a + ops.constant(float("nan"), "int32"))(f32(2)), "constant nan", "int32")
    raises(lambda: mlirfuse.jit(lambda a, s: a + s)(f32(2), 2 ** 80), "input 1", "int64 scalar")
    raises(lambda: mlirfuse.jit(lambda a, s: a + s)(ints, 2 ** 63 + 5), "input 1", "int64 scalar")


def test_dtype_none_is_no_dtype() -> None:
    raises(lambda: mlirfuse.jit(lambda a: ops.cast(a, None))(f32(2)), "dtype None")


def test_fusion_definition_argument_mistakes() -> None:
    with FusionDefinition() as fd:
        raises(lambda: fd.define_tensor(shape=-1), "define_tensor", "list of sizes")
        raises(lambda: fd.define_tensor(shape=[-1, -1], contiguity=[True]), "contiguity", "rank 2")
        a = fd.define_tensor(shape=[-1, -1], dtype=None)  # nvFuser's default: Float
        fd.add_output(a * 2.0)
    assert fd.execute([f32(2, 3)])[0].dtype == np.float32
    raises(lambda: fd.compile([f32(2, 3)]), "compile", "backend", "list")


def test_option_values_are_checked() -> None:
    raises(lambda: mlirfuse.set_options(max_args="abc"), "max_args", "int")
    raises(lambda: mlirfuse.set_options(max_args=0), "max_args", "at least 1")
    raises(lambda: mlirfuse.set_options(horizontal="no"), "horizontal", "bool")
    out = subprocess.run([sys.executable, "-c", "import mlirfuse; print(mlirfuse.config.options().max_args)"],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ, MLIRFUSE_MAX_ARGS="abc"))
    assert out.returncode == 0 and out.stdout.strip() == "128" and "not an integer" in out.stderr


# -- axes -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "var_mean"])
def test_reduction_axes_out_of_range(name: str) -> None:
    op = getattr(ops, name)
    raises(lambda: mlirfuse.jit(lambda x: op(x, [2]))(f32(2, 3)), name, "2", "rank 2")
    raises(lambda: mlirfuse.jit(lambda x: op(x, -3))(f32(2, 3)), name, "-3", "rank 2")
    raises(lambda: mlirfuse.jit(lambda x: op(x, [0, 5]))(f32(2, 3)), name, "5", "rank 2")


@pytest.mark.parametrize("name", ["sum", "max", "mean", "var"])
def test_reduction_axes_repeated(name: str) -> None:
    op = getattr(ops, name)
    raises(lambda: mlirfuse.jit(lambda x: op(x, [0, 0]))(f32(2, 3)), name, "repeated", q("[0, 0]"))
    raises(lambda: mlirfuse.jit(lambda x: op(x, [1, -1]))(f32(2, 3)), name, "repeated", q("[1, -1]"))


def test_empty_axes_reduce_everything() -> None:
    """torch's dim=[] and dim=(): every axis, whichever sequence spells it."""
    for axes in ([], ()):
        assert float(mlirfuse.jit(lambda x, a=axes: ops.sum(x, a))(f32(3, 4))) == 12.0


def test_reduction_axis_not_an_int() -> None:
    raises(lambda: mlirfuse.jit(lambda x: ops.sum(x, [1.0]))(f32(2, 3)), "sum", q("1.0"))
    raises(lambda: mlirfuse.jit(lambda x: ops.mean(x, "0"))(f32(2, 3)), "mean", "0")


def test_permute_bad_dims() -> None:
    raises(lambda: mlirfuse.jit(lambda x: ops.permute(x, [0, 0]))(f32(2, 3)), "permute", q("[0, 0]"))
    raises(lambda: mlirfuse.jit(lambda x: ops.permute(x, [0]))(f32(2, 3)), "permute", q("[0]"), "2")
    raises(lambda: mlirfuse.jit(lambda x: ops.permute(x, [0, 2]))(f32(2, 3)), "permute", "2", "rank 2")
    raises(lambda: mlirfuse.jit(lambda x: ops.permute(x, [0, 1, 2]))(f32(2, 3)), "permute", "2")
    raises(lambda: mlirfuse.jit(lambda x: ops.permute(x, [1, -1]))(f32(2, 3)), "permute", q("[1, -1]"))


def test_squeeze_unsqueeze_bad_dims() -> None:
    raises(lambda: mlirfuse.jit(lambda x: ops.squeeze(x, [3]))(f32(2, 3)), "squeeze", "3", "rank 2")
    raises(lambda: mlirfuse.jit(lambda x: ops.squeeze(x, -3))(f32(2, 3)), "squeeze", "-3", "rank 2")
    raises(lambda: mlirfuse.jit(lambda x: ops.squeeze(x, [0, -2]))(f32(1, 3)), "squeeze", "repeated")
    raises(lambda: mlirfuse.jit(lambda x: ops.unsqueeze(x, 4))(f32(2, 3)), "unsqueeze", "4")
    raises(lambda: mlirfuse.jit(lambda x: ops.unsqueeze(x, -4))(f32(2, 3)), "unsqueeze", "-4")
    raises(lambda: mlirfuse.jit(lambda x: ops.unsqueeze(x, [0]))(f32(2, 3)), "unsqueeze", q("[0]"))


# -- reshape ----------------------------------------------------------------------------------------
def test_reshape_changing_the_element_count_static() -> None:
    raises(lambda: mlirfuse.jit(lambda x: ops.reshape(x, [7]), dynamic=False)(f32(2, 3)),
           "reshape", q("[2, 3]"), q("[7]"), "6", "7")
    raises(lambda: mlirfuse.jit(lambda x: ops.reshape(x, [4, -1]), dynamic=False)(f32(2, 3)),
           "reshape", q("[2, 3]"), q("[4, -1]"))
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[2, 3])
        raises(lambda: fd.ops.reshape(a, [7]), "reshape", q("[2, 3]"), q("[7]"))


def test_reshape_changing_the_element_count_at_run_time() -> None:
    f = mlirfuse.jit(lambda x: ops.reshape(x, [7]))
    raises(lambda: f(f32(2, 3)), q("(2, 3)"), "7")
    g = mlirfuse.jit(lambda x: ops.reshape(x, [6, -1]))
    assert g(f32(2, 3)).shape == (6, 1) and g(f32(3, 4)).shape == (6, 2)
    raises(lambda: g(f32(2, 5)), q("(2, 5)"), "6|reshape")
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.reshape(fd.define_tensor(shape=[-1, -1]), [7]))
    raises(lambda: fd.execute([f32(2, 3)]), q("(2, 3)"), "7")


def test_reshape_invalid_shapes() -> None:
    raises(lambda: mlirfuse.jit(lambda x: ops.reshape(x, [-1, -1]))(f32(2, 3)), "reshape", q("[-1, -1]"))
    raises(lambda: mlirfuse.jit(lambda x: ops.reshape(x, [-2, 3]))(f32(2, 3)), "reshape", q("[-2, 3]"))
    raises(lambda: mlirfuse.jit(lambda x: ops.reshape(x, [2.0, 3]))(f32(2, 3)), "reshape", q("2.0"))
    raises(lambda: mlirfuse.jit(lambda x: ops.reshape(x, [0, -1]))(f32(0, 3)), "reshape", q("[0, -1]"))


# -- dtypes -----------------------------------------------------------------------------------------
def test_bitwise_ops_on_floats() -> None:
    for name in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
        op = getattr(ops, name)
        raises(lambda op=op: mlirfuse.jit(lambda x: op(x, x))(f32(3)), name, "float32")
        raises(lambda op=op: mlirfuse.jit(lambda x: op(x, 1.5))(np.ones(3, np.int32)), name, "int32", "float")
        raises(lambda op=op: mlirfuse.jit(lambda x, y: op(x, y))(np.ones(3, np.int32), np.ones(3, np.float64)),
               name, "float64")
    raises(lambda: mlirfuse.jit(lambda x: ops.bitwise_not(x))(f32(3)), "bitwise_not", "float32")
    raises(lambda: mlirfuse.jit(lambda x: x ^ x)(f32(3)), "bitwise_xor", "float32")
    raises(lambda: mlirfuse.jit(lambda x: x & 1)(np.ones(3, np.float64)), "bitwise_and", "float64")
    raises(lambda: mlirfuse.jit(lambda x: ~x)(f32(3)), "bitwise_not", "float32")


@pytest.mark.parametrize("name", ["mean", "var", "var_mean"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_mean_and_var_of_ints(name: str, dtype) -> None:
    op = getattr(ops, name)
    raises(lambda: mlirfuse.jit(lambda x: op(x, 0))(np.ones((2, 3), dtype)), name, np.dtype(dtype).name)


def test_sub_and_neg_on_bools() -> None:
    b = np.ones(3, np.bool_)
    raises(lambda: mlirfuse.jit(lambda x, y: ops.sub(x, y))(b, b), "sub", "bool")
    raises(lambda: mlirfuse.jit(lambda x: x - True)(b), "sub", "bool")
    raises(lambda: mlirfuse.jit(lambda x: ops.neg(x))(b), "neg", "bool")
    raises(lambda: mlirfuse.jit(lambda x: -x)(b), "neg", "bool")


def test_random_ops_with_bad_arguments() -> None:
    x = f32(3)
    for dt in [DataType.Int32, DataType.Int, "int64", DataType.Bool]:
        raises(lambda dt=dt: mlirfuse.jit(lambda t: ops.uniform(0.0, 1.0, [3], dtype=dt) + t)(x), "uniform",
               "int|bool")
    raises(lambda: mlirfuse.jit(lambda t: ops.rand_like(t))(np.ones(3, np.int32)), "rand_like", "int32")
    raises(lambda: mlirfuse.jit(lambda t: ops.uniform(0.0, 1.0, [-3]) + t)(x), "uniform", "-3")
    raises(lambda: mlirfuse.jit(lambda t: ops.uniform(0.0, 1.0, [3], seed=1.5) + t)(x), "uniform", "seed",
           "1.5")
    raises(lambda: mlirfuse.jit(lambda t: ops.uniform(t, 1.0, [3]))(x), "uniform", "minval")


def test_unsupported_cast_dtypes() -> None:
    for dt in ["complex64", "float8", np.uint16, "int8"]:
        raises(lambda dt=dt: mlirfuse.jit(lambda t: ops.cast(t, dt))(f32(3)), "unsupported dtype",
               re.escape(np.dtype(dt).name) if dt != "float8" else "float8")
    raises(lambda: mlirfuse.jit(lambda t: ops.sum(t, dtype="complex64"))(f32(3)), "complex64")


# -- other misuse -----------------------------------------------------------------------------------
def test_wrong_operand_counts_and_kinds() -> None:
    raises(lambda: mlirfuse.jit(lambda x: ops.clamp(x))(f32(3)), "clamp", "3", "1")
    raises(lambda: mlirfuse.jit(lambda x: ops.where(x > 0, x))(f32(3)), "where", "3", "2")
    raises(lambda: mlirfuse.jit(lambda x: ops.exp([1, 2]) + x)(f32(3)), "exp", "list")
    raises(lambda: mlirfuse.jit(lambda x: ops.add(x, "a"))(f32(3)), "add", "str")
    raises(lambda: mlirfuse.jit(lambda x: ops.sum([1, 2]))(f32(3)), "sum", q("[1, 2]"))
    raises(lambda: mlirfuse.jit(lambda x: ops.reshape(3.0, [1]))(f32(3)), "reshape", "3.0")


def test_python_control_flow_on_a_traced_tensor() -> None:
    raises(lambda: mlirfuse.jit(lambda x: x if x > 0 else -x)(f32(3)), "truth value", "where")


def test_fusion_definition_lifecycle_mistakes() -> None:
    with FusionDefinition() as a:
        ta = a.define_tensor(shape=[-1])
    with FusionDefinition() as b:
        tb = b.define_tensor(shape=[-1])
        raises(lambda: b.ops.add(ta, tb), "add", "different fusion")
        raises(lambda: b.add_output(3), "add_output", "3")
        raises(lambda: b.execute([f32(3)]), "execute", "with")
    with FusionDefinition() as c:
        c.define_tensor(shape=[-1])
    raises(lambda: c.execute([f32(3)]), "execute", "no outputs")
    raises(lambda: c.define_tensor(shape=[-1]), "define_tensor", "closed")
    raises(lambda: c.define_scalar(None), "define_scalar", "closed")

    def reenter():
        with c:
            pass
    raises(reenter, "already defined")


def test_fusion_definition_ops_after_the_definition_closed() -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.exp(t))
    raises(lambda: fd.ops.sin(t), "sin|closed")


# -- the reference evaluator --------------------------------------------------------------------------
GOOD_IR = """
func.func @fusion(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "fusion.exp"(%a) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""

INVALID_IR = {
    "not mlir": ("this is not mlir", "invalid fusion IR"),
    "unterminated": ("func.func @fusion(%a: tensor<3xf32>) -> tensor<3xf32> {", "invalid fusion IR"),
    "unknown op": (GOOD_IR.replace("fusion.exp", "fusion.bogus"), "fusion.bogus"),
    "operand count": (GOOD_IR.replace('"fusion.exp"(%a)', '"fusion.add"(%a)'), "operands"),
    "missing attribute": ("""
func.func @fusion(%a: tensor<3xf32>) -> tensor<f32> {
  %0 = "fusion.sum"(%a) : (tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}""", "fusion.sum.*(axes|keepdim)"),
    "result type": ("""
func.func @fusion(%a: tensor<3xf32>) -> tensor<3xi32> {
  %0 = "fusion.add"(%a, %a) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}""", "tensor<3xi32>"),
    "operand types": ("""
func.func @fusion(%a: tensor<3xf32>, %b: tensor<4xf32>) -> tensor<3xf32> {
  %0 = "fusion.add"(%a, %b) : (tensor<3xf32>, tensor<4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}""", "tensor<4xf32>"),
    "no @fusion": (GOOD_IR.replace("@fusion", "@other"), "@fusion"),
    "empty": ("", "@fusion"),
    "unsupported element type": (GOOD_IR.replace("f32", "i8"), "i8"),
    "non-fusion op": (GOOD_IR.replace('%0 = "fusion.exp"(%a) : (tensor<3xf32>) -> tensor<3xf32>',
                                      "%0 = arith.addf %a, %a : tensor<3xf32>"), "arith.addf"),
}


@pytest.mark.parametrize("case", list(INVALID_IR), ids=list(INVALID_IR))
def test_reference_rejects_invalid_ir(case: str) -> None:
    text, needle = INVALID_IR[case]
    raises(lambda: mlirfuse.reference.evaluate(text, [f32(3)]), needle)


SEMANTICALLY_INVALID_IR = {
    "axes out of range": ("""
func.func @fusion(%a: tensor<3xf32>) -> tensor<f32> {
  %0 = "fusion.sum"(%a) {axes = array<i64: 5>, keepdim = false} : (tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}""", "sum|axes|5"),
    "reshape element count": ("""
func.func @fusion(%a: tensor<3xf32>) -> tensor<7xf32> {
  %0 = "fusion.reshape"(%a) {shape = array<i64: 7>} : (tensor<3xf32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}""", "reshape|7"),
    "permute repeated dims": ("""
func.func @fusion(%a: tensor<3x4xf32>) -> tensor<4x3xf32> {
  %0 = "fusion.permute"(%a) {dims = array<i64: 0, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}""", "permute|dims"),
}


@pytest.mark.parametrize("case", list(SEMANTICALLY_INVALID_IR), ids=list(SEMANTICALLY_INVALID_IR))
def test_reference_rejects_ir_with_invalid_attributes(case: str) -> None:
    """IR that parses but whose attributes contradict its types: a FusionError, not numpy's."""
    text, needle = SEMANTICALLY_INVALID_IR[case]
    arg = f32(3, 4) if "3x4" in text else f32(3)
    raises(lambda: mlirfuse.reference.evaluate(text, [arg]), needle)


def test_reference_wrong_inputs() -> None:
    raises(lambda: mlirfuse.reference.evaluate(GOOD_IR, []), "expected 1 inputs", "got 0")
    raises(lambda: mlirfuse.reference.evaluate(GOOD_IR, [f32(3), f32(3)]), "expected 1", "got 2")
    # an input whose shape is not the argument's type
    raises(lambda: mlirfuse.reference.evaluate(GOOD_IR, [f32(4, 4)]), "input 0|argument 0",
           q("(4, 4)"), "tensor<3xf32>|3")


# -- no user input may crash the process ----------------------------------------------------------------
def _run_isolated(code: str, timeout: int = 300) -> subprocess.CompletedProcess:
    prelude = "import numpy as np\nimport mlirfuse\nfrom mlirfuse import DataType, FusionError, ops\n"
    env = {**os.environ, "MLIRFUSE_DISABLE_FALLBACK": "1"}  # compiled kernels, not the reference
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _assert_survives(code: str) -> str:
    r = _run_isolated(code)
    tail = (r.stdout + r.stderr)[-2000:]
    assert r.returncode == 0, f"the process died (return code {r.returncode}):\n{tail}"
    return r.stdout


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_integer_modulo_by_zero_does_not_crash(name: str, dtype: str) -> None:
    out = _assert_survives(f"""
        f = mlirfuse.jit(lambda x, y: ops.{name}(x, y))
        x = np.array([5, -5, 7, 0, -7], np.{dtype})
        y = np.array([0, 0, 2, 0, -2], np.{dtype})
        got = f(x, y)
        want = mlirfuse.reference.evaluate(f.fusion_ir(x, y), [x, y])[0]
        assert got.dtype == np.{dtype}, got.dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got[[0, 1, 3]], 0)  # division by zero gives 0
        # a runtime scalar zero, and a constant one
        assert (mlirfuse.jit(lambda x, s: ops.{name}(x, s))(x, 0) == 0).all()
        assert (mlirfuse.jit(lambda x: ops.{name}(x, 0))(x) == 0).all()
        print("ok")
    """)
    assert "ok" in out


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("name", ["fmod", "remainder"])
@pytest.mark.parametrize("divisor", ["tensor", "runtime scalar"])
def test_integer_min_modulo_minus_one_does_not_crash(name: str, dtype: str, divisor: str) -> None:
    """INT_MIN % -1 overflows the quotient: x86 `idiv` traps (SIGFPE) unless guarded."""
    call = f"f(x, np.full(2, -1, np.{dtype}))" if divisor == "tensor" else "f(x, -1)"
    out = _assert_survives(f"""
        f = mlirfuse.jit(lambda x, y: ops.{name}(x, y))
        x = np.array([np.iinfo(np.{dtype}).min, 7], np.{dtype})
        got = {call}
        assert got.tolist() == [0, 0], got
        print("ok")
    """)
    assert "ok" in out


def test_integer_division_by_zero_and_overflowing_casts_do_not_crash() -> None:
    out = _assert_survives("""
        x = np.array([5, 0, -3], np.int32)
        z = np.zeros(3, np.int32)
        r = mlirfuse.jit(lambda a, b: ops.div(a, b))(x, z)
        assert np.isinf(r[0]) and np.isnan(r[1]) and np.isinf(r[2]), r
        mlirfuse.jit(lambda a: ops.cast(a, DataType.Int32))(np.array([np.nan, np.inf, -1e30], np.float32))
        mlirfuse.jit(lambda a: ops.cast(a, DataType.Int))(np.array([np.nan, -np.inf, 1e300], np.float64))
        mlirfuse.jit(lambda a, b: ops.pow(a, b))(np.array([0, 2, -3], np.int32), np.array([-1, 40, 41], np.int32))
        print("ok")
    """)
    assert "ok" in out


@pytest.mark.parametrize("expr", [
    "ops.expand(x, [2**40, 2**40])",
    "ops.uniform(0.0, 1.0, [2**62, 4]) + ops.sum(x)",
    "ops.broadcast_in_dim(x, [2**33, 2**33, 2**33], [1, 2])",
])
def test_absurd_static_shapes_do_not_crash(expr: str) -> None:
    """Sizes whose element count overflows int64: an error, not an MLIR assertion (abort)."""
    out = _assert_survives(f"""
        try:
            mlirfuse.jit(lambda x: {expr})(np.ones((1, 1), np.float32))
            print("no error")
        except (FusionError, MemoryError) as e:
            print("raised", type(e).__name__, e)
    """)
    assert "raised" in out, out
