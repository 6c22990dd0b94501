"""The indexing ops (slice, cat, pad, gather, iota) and what is built from them (select,
index_select, take_along_axis, arange, full, triu/tril, masked_fill, argmax/argmin, cumsum):
numerics against numpy on the CPU backend, the reference evaluator and the GPU kernels run
by the emulator; the loops they lower to (one loop where producers and consumers fuse);
typing and errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_emulator import emulate
from tolerances import assert_close

import mlirfuse
from mlirfuse import ops
from mlirfuse.dtypes import DataType
from mlirfuse.errors import FusionError
from mlirfuse.frontend.fusion_definition import FusionDefinition
from mlirfuse.lowering.gpu import toolchain
from mlirfuse.reference import evaluate

RNG = np.random.default_rng(11)
needs_libdevice = pytest.mark.skipif(toolchain.find().libdevice is None, reason="no libdevice")


def randn(*shape: int, dtype=np.float32) -> np.ndarray:
    return (RNG.standard_normal(shape) * 3).astype(dtype)


def _rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], -1)


def _rotary(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + ops.cat([-ops.slice_dim(x, -1, h, None), ops.slice_dim(x, -1, 0, h)], -1) * sin


def _cumsum_ref(x):
    return np.cumsum(x, axis=1)


# name, fn, numpy reference, inputs
CASES = [
    ("slice_steps", lambda x: ops.slice(x, [1, 0], [5, 7], [2, 3]) * 2.0, lambda x: x[1:5:2, 0:7:3] * 2,
     [randn(6, 7)]),
    ("slice_negative_bounds", lambda x: ops.slice(x, [-3, 2], [None, -1]), lambda x: x[-3:, 2:-1], [randn(5, 6)]),
    ("slice_empty", lambda x: ops.slice(x, [3, 0], [3, 4]) + 1.0, lambda x: x[3:3, :] + 1, [randn(5, 4)]),
    ("select", lambda x: ops.select(x, -1, 1) * 2.0, lambda x: x[:, -1] * 2, [randn(3, 4)]),
    ("cat_three", lambda a, b, c: ops.cat([a * 2.0, b, ops.exp(c)], 1),
     lambda a, b, c: np.concatenate([a * 2, b, np.exp(c)], 1), [randn(3, 2), randn(3, 5), randn(3, 1)]),
    ("cat_promotes", lambda a, b: ops.cat([a, b], 0), lambda a, b: np.concatenate([a, b.astype(np.float32)], 0),
     [randn(2, 3), np.arange(6, dtype=np.int64).reshape(2, 3)]),
    ("rotary", _rotary, lambda x, c, s: x * c + _rotate_half(x) * s, [randn(2, 3, 5, 8), randn(5, 8), randn(5, 8)]),
    ("pad", lambda x: ops.pad(x * 3.0, [1, 2, 0, 1], 7.5), lambda x: np.pad(x * 3, [(0, 1), (1, 2)],
                                                                              constant_values=7.5), [randn(3, 4)]),
    ("pad_crops", lambda x: ops.pad(x, [-1, 2]), lambda x: np.pad(x[:, 1:], [(0, 0), (0, 2)]), [randn(2, 5)]),
    ("pad_bool", lambda m: ops.pad(m, [0, 1], True), lambda m: np.pad(m, [(0, 0), (0, 1)], constant_values=True),
     [RNG.random((3, 4)) > 0.5]),
    ("gather", lambda x, i: ops.gather(ops.exp(x), i, 1), lambda x, i: np.take_along_axis(np.exp(x), i, 1),
     [randn(4, 9), RNG.integers(0, 9, (4, 3))]),
    ("gather_negative", lambda x, i: ops.gather(x, i, 0), lambda x, i: np.take_along_axis(x, i % 5, 0),
     [randn(5, 3), RNG.integers(-5, 5, (2, 3))]),
    ("take_along_axis", lambda x, i: ops.take_along_axis(x, i, 1), lambda x, i: np.take_along_axis(x, i, 1),
     [randn(4, 6), RNG.integers(0, 6, (1, 2))]),
    ("index_select", lambda x, i: ops.index_select(x + 1.0, i, 0), lambda x, i: (x + 1)[i],
     [randn(6, 4), np.array([5, 0, 0, 3], dtype=np.int64)]),
    ("arange", lambda x: x + ops.arange(2, 11, 3), lambda x: x + np.arange(2, 11, 3), [randn(4, 3)]),
    ("iota_float", lambda x: x * ops.iota(5, 0.5, 0.25, DataType.Float), lambda x: x * (0.5 + 0.25 * np.arange(5)),
     [randn(2, 5)]),
    ("full", lambda x: x + ops.full([3, 4], 2.5, DataType.Float), lambda x: x + 2.5, [randn(3, 4)]),
    ("triu", lambda x: ops.triu(x * 2.0, 1), lambda x: np.triu(x * 2, 1), [randn(2, 4, 6)]),
    ("tril", lambda x: ops.tril(x, -1), lambda x: np.tril(x, -1), [randn(5, 5)]),
    ("masked_fill", lambda x: ops.masked_fill(x, x > 1.0, -1e4), lambda x: np.where(x > 1, -1e4, x).astype(np.float32),
     [randn(4, 5)]),
    ("argmax", lambda x: ops.argmax(x, 1), lambda x: np.argmax(x, 1), [randn(6, 9)]),
    ("argmin_keepdim", lambda x: ops.argmin(x, 0, keepdim=True), lambda x: np.argmin(x, 0)[None], [randn(6, 9)]),
    ("argmax_all", lambda x: ops.argmax(x), lambda x: np.argmax(x), [randn(3, 4)]),
    ("cumsum", lambda x: ops.cumsum(x, 1), _cumsum_ref, [randn(3, 7)]),
    ("cumsum_int", lambda m: ops.cumsum(m, 1), lambda m: np.cumsum(m, 1, dtype=np.int64),
     [RNG.random((2, 9)) > 0.5]),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name, fn, ref, args", CASES, ids=IDS)
def test_cpu_backend_and_reference_match_numpy(name, fn, ref, args) -> None:
    f = mlirfuse.jit(fn)
    got = f(*args)
    want = np.asarray(ref(*args))
    assert_close(np.asarray(got), want.astype(np.asarray(got).dtype), name, reduction_size=16)
    assert np.asarray(got).dtype == want.dtype or name in ("full", "masked_fill") or want.dtype == np.float64
    fusion = f.compile(*args).fusion if hasattr(f.compile(*args), "fusion") else None
    if fusion is not None:
        assert_close(evaluate(fusion, list(args))[0], want.astype(np.asarray(got).dtype), name, 16)


@needs_libdevice
@pytest.mark.parametrize("name, fn, ref, args", CASES, ids=IDS)
def test_gpu_kernels_on_the_emulator_match_the_cpu_backend(name, fn, ref, args) -> None:
    # cumsum: traced with its static length, the fused form (a masked sum, up to
    # FUSED_SCAN_LIMIT); a length unknown at trace time goes to the library
    f = mlirfuse.jit(fn, dynamic=not name.startswith("cumsum"))
    want = f(*args)
    compiled = f.compile(*args, backend="gpu", arch="sm_90")
    got = emulate(compiled.stages["gpu"], list(args), [np.empty_like(np.asarray(want))])
    assert_close(got[0], np.asarray(want), name, reduction_size=16)


def test_nan_is_the_extreme_for_argmax_and_argmin() -> None:
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, 0.0]], dtype=np.float32)
    np.testing.assert_array_equal(mlirfuse.jit(lambda x: ops.argmax(x, 1))(x), [1, 1])
    np.testing.assert_array_equal(mlirfuse.jit(lambda x: ops.argmin(x, 1))(x), [1, 3])


def test_rotary_and_cat_are_one_loop_with_their_producers_and_consumers() -> None:
    args = [randn(2, 3, 5, 8), randn(5, 8), randn(5, 8)]
    linalg = mlirfuse.jit(_rotary).compile(*args).stages["linalg"]
    assert linalg.count("linalg.generic") == 1, linalg
    assert "scf.if" in linalg and "arith.negf" in linalg


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.int32])
def test_long_or_dynamic_cumsum_runs_in_the_library_in_linear_time(dtype, caplog) -> None:
    """cumsum over a dim longer than FUSED_SCAN_LIMIT, or of a length unknown when traced, is
    `fusion.cumsum` (numpy here), the reason logged; short static ones stay fused (a masked
    sum). Values as numpy's (integers as int64; bfloat16 summed in float32, rounded once)."""
    import logging

    from mlirfuse.frontend.indexing import FUSED_SCAN_LIMIT

    def fn(x):
        return ops.cumsum(x * 2, 1) + 1

    def want(x):
        wide = np.float32 if dtype == ml_dtypes.bfloat16 else np.int64 if dtype == np.int32 else dtype
        out = np.cumsum(x.astype(wide) * 2, 1) + 1
        return out.astype(dtype) if dtype == ml_dtypes.bfloat16 else out

    for shape, dynamic, library in (((3, 5000), False, True), ((3, 9), True, True), ((3, 9), False, False),
                                    ((2, FUSED_SCAN_LIMIT), False, False)):
        x = (np.random.default_rng(0).random(shape) * 4).astype(dtype)
        f = mlirfuse.jit(fn, dynamic=dynamic)
        with caplog.at_level(logging.INFO, logger="mlirfuse.fuser"):
            caplog.clear()
            got = f(x)
        assert ('"fusion.cumsum"' in f.fusion_ir(x)) is library
        assert ("left to the library" in caplog.text) is library
        tol = 2e-2 if dtype == ml_dtypes.bfloat16 else 1e-5
        np.testing.assert_allclose(got.astype(np.float64), want(x).astype(np.float64), rtol=tol, atol=tol)
        assert got.dtype == want(x).dtype


def test_library_cumsum_gradient_is_the_reverse_cumsum() -> None:
    """Through torch autograd (`mlirfuse.jit` of torch tensors requiring grad): the library
    cumsum's gradient is the inclusive sum of the cotangent from the end, as torch's."""
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 700, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 700, dtype=torch.float64)
    y = mlirfuse.jit(lambda t: ops.cumsum(ops.tanh(t), 1))(x)
    (y * w).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    (torch.cumsum(torch.tanh(x2), 1) * w).sum().backward()
    torch.testing.assert_close(y.detach(), torch.cumsum(torch.tanh(x2), 1).detach())
    torch.testing.assert_close(x.grad, x2.grad)


_SCAN_REFS = {"cumprod": np.cumprod, "cummax": np.maximum.accumulate, "cummin": np.minimum.accumulate}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.int32, np.bool_])
@pytest.mark.parametrize("name", ["cumprod", "cummax", "cummin"])
def test_long_or_dynamic_scans_run_in_the_library_in_linear_time(name, dtype, caplog) -> None:
    """cumprod, cummax and cummin over a dim longer than FUSED_SCAN_LIMIT, or of a length
    unknown when traced, are `fusion.<name>` (numpy here), the reason logged; short static ones
    stay fused. Values as numpy's (integer and bool products as int64; bfloat16 in float32,
    rounded once; NaN, once met, stays in cummax/cummin)."""
    import logging

    def want(x, dim):
        wide = np.float32 if dtype == ml_dtypes.bfloat16 else np.int64 if name == "cumprod" and \
            dtype in (np.int32, np.bool_) else dtype
        out = _SCAN_REFS[name](x.astype(wide), axis=dim)
        return out.astype(dtype) if dtype == ml_dtypes.bfloat16 else out

    rng = np.random.default_rng(0)
    for shape, dynamic, library in (((3, 700), False, True), ((600, 2), False, True), ((3, 9), True, True),
                                    ((3, 9), False, False)):
        if dtype == np.bool_:
            x = rng.random(shape) < (0.998 if name == "cumprod" else 0.5)
        elif np.issubdtype(dtype, np.integer):
            x = rng.integers(-3, 4, shape).astype(dtype) if name != "cumprod" else \
                rng.choice(np.array([-1, 1, 1, 1], dtype), shape)
        else:
            x = (rng.random(shape) * 0.2 + 0.9).astype(dtype)
            x[1, 1] = np.nan
        dim = 0 if shape[0] > 9 else 1
        f = mlirfuse.jit(lambda t, dim=dim: getattr(ops, name)(t, dim), dynamic=dynamic)
        with caplog.at_level(logging.INFO, logger="mlirfuse.fuser"):
            caplog.clear()
            got = f(x)
        assert (f'"fusion.{name}"' in f.fusion_ir(x)) is library
        assert ("left to the library" in caplog.text) is library
        tol = 2e-2 if dtype == ml_dtypes.bfloat16 else 1e-5
        assert got.dtype == want(x, dim).dtype
        np.testing.assert_allclose(got.astype(np.float64), want(x, dim).astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["cumprod", "cummax", "cummin"])
def test_library_scan_gradients_match_torch(name) -> None:
    """Through torch autograd: the library cumprod's gradient with no zero, one zero and two
    zeros in a row (torch's cumprod_backward); cummax/cummin's with ties (each cotangent
    element goes to the last position holding the running extreme, as torch's indices)."""
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 700, dtype=torch.float64)
    if name == "cumprod":
        x = x * 0.05 + 1.0
        x[1, 5] = 0.0
        x[2, 3] = x[2, 600] = 0.0
    else:
        x = torch.round(x * 2) / 2  # ties
    x.requires_grad_()
    w = torch.randn(4, 700, dtype=torch.float64)
    y = mlirfuse.jit(lambda t: getattr(ops, name)(t * 1.5, 1))(x)
    (y * w).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    want = getattr(torch, name)(x2 * 1.5, 1)
    want = want if isinstance(want, torch.Tensor) else want.values
    (want * w).sum().backward()
    torch.testing.assert_close(y.detach(), want.detach())
    torch.testing.assert_close(x.grad, x2.grad)


def test_library_scan_gradient_references_match_torch() -> None:
    """The numpy references (the CPU backend's implementation) of cumprod_grad and
    cummaxmin_grad against torch's backward, zeros and ties included, along a middle dim."""
    torch = pytest.importorskip("torch")
    from mlirfuse.dialects.optable import OPS

    rng = np.random.default_rng(1)
    x = np.round(rng.standard_normal((3, 50, 4)) * 2) / 2
    x[0, 7, 1] = x[1, 3, 2] = x[1, 30, 2] = 0.0
    g = rng.standard_normal(x.shape)
    for name, fn in (("cumprod", torch.cumprod), ("cummax", torch.cummax), ("cummin", torch.cummin)):
        t = torch.from_numpy(x).requires_grad_()
        y = fn(t, 1)
        y = y if isinstance(y, torch.Tensor) else y.values
        (want,) = torch.autograd.grad(y, t, torch.from_numpy(g))
        ref = OPS["cumprod_grad"].ref(g, x, y.detach().numpy(), 1) if name == "cumprod" else \
            OPS["cummaxmin_grad"].ref(g, x, y.detach().numpy(), 1, name == "cummax")
        np.testing.assert_allclose(ref, want.numpy(), rtol=1e-12, atol=1e-12)


def test_bfloat16_slices_and_cat_keep_their_dtype() -> None:
    x = randn(4, 8, dtype=ml_dtypes.bfloat16)
    got = mlirfuse.jit(lambda x: ops.cat([ops.slice_dim(x, 1, 4, None), ops.slice_dim(x, 1, 0, 4)], 1))(x)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got, np.concatenate([x[:, 4:], x[:, :4]], 1))


def test_fd_ops_spellings() -> None:
    x = randn(4, 6)
    idx = np.array([[0, 5], [1, 1], [2, 0], [3, 3]], dtype=np.int64)
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[4, 6])
        i = fd.define_tensor(shape=[4, 2], dtype=DataType.Int)
        g = fd.ops.gather(a, i, 1)
        s = fd.ops.slice(a, [0, 0], [4, 2])
        p = fd.ops.pad(s, [0, 1], 0.0)
        fd.add_output(fd.ops.add(g, fd.ops.slice(p, [0, 0], [4, 2])))
        fd.add_output(fd.ops.index_select(a, fd.ops.iota(3, 1, 1, DataType.Int), 1))
    got = fd.execute([x, idx])
    np.testing.assert_allclose(got[0], np.take_along_axis(x, idx, 1) + x[:, :2])
    np.testing.assert_allclose(got[1], x[:, 1:4])


def test_traced_tensor_methods_take_torchs_argument_order() -> None:
    x, idx = randn(3, 4), RNG.integers(0, 4, (3, 2))
    got = mlirfuse.jit(lambda x, i: x.gather(1, i) + x.index_select(1, i[0]).sum(1, keepdim=True))(x, idx)
    terms = np.abs(np.take_along_axis(x, idx, 1)) + np.abs(x[:, idx[0]]).sum(1, keepdims=True)  # see below
    np.testing.assert_allclose(got, np.take_along_axis(x, idx, 1) + x[:, idx[0]].sum(1, keepdims=True), rtol=1e-6,
                               atol=4 * np.finfo(np.float32).eps * terms.max())


@pytest.mark.parametrize("fn, message", [
    (lambda x: ops.cat([x, ops.reshape(x, [6])], 0), "different ranks"),
    (lambda x: ops.cat([x, ops.permute(x, [1, 0])], 0), "differ in dim 1"),
    (lambda x: ops.pad(x, [1, 1, 1]), "pairs"),
    (lambda x: ops.pad(x, [-4, 0]), "negative"),
    (lambda x: ops.gather(x, x, 1), "integer tensor"),
    (lambda x: ops.slice(x, [0, 0], [1, 1], [1, 0]), "positive"),
    (lambda x: ops.select(x, 2, 0), "out of range"),
    (lambda x: ops.triu(ops.sum(x, 0)), "rank >= 2"),
    (lambda x: ops.masked_fill(x, x, 0.0), "bool tensor"),
])
def test_user_errors_name_the_op(fn, message) -> None:
    with pytest.raises(FusionError, match=message):
        mlirfuse.jit(fn)(randn(2, 3))


def test_dynamic_sizes_retrace_with_static_shapes_where_a_slice_cuts_them() -> None:
    f = mlirfuse.jit(lambda x: ops.slice_dim(x, 1, 1, None) * 2.0)
    for n in (5, 9):
        x = randn(3, n)
        np.testing.assert_allclose(f(x), x[:, 1:] * 2, rtol=1e-6)


def test_basic_indexing_of_traced_tensors() -> None:
    x = randn(3, 4, 6)
    got = mlirfuse.jit(lambda x: x[..., 1::2] * 2.0 + x[:, None, -1, :3].sum(-1, keepdim=True)
                       + x[..., 0, :][:, None, ::2])(x)
    # An element that cancels to ~0.1 differs from numpy's float32 by roundings of its terms
    # (the host sums in float64), not by its own size: the tolerance scales with the terms.
    terms = 2 * np.abs(x[..., 1::2]) + np.abs(x[:, None, -1, :3]).sum(-1, keepdims=True) \
        + np.abs(x[..., 0, :][:, None, ::2])
    np.testing.assert_allclose(got, x[..., 1::2] * 2 + x[:, None, -1, :3].sum(-1, keepdims=True)
                               + x[..., 0, :][:, None, ::2], rtol=1e-6, atol=4 * np.finfo(np.float32).eps * terms.max())
    with pytest.raises(FusionError, match="gather or index_select"):
        mlirfuse.jit(lambda x: x[x > 0])(x)


def test_select_in_a_dynamic_dim_is_checked_at_every_call() -> None:
    """One compile serves every size of a dynamic dim; an index past a smaller size must raise,
    not read outside the tensor."""
    f = mlirfuse.jit(lambda x: ops.select(x, 2, 0) * 2.0)
    x = randn(3, 4)
    np.testing.assert_allclose(f(x), x[2] * 2)
    np.testing.assert_allclose(f(randn(7, 4)).shape, (4,))
    with pytest.raises(FusionError, match="select of index 2 in dim 0 is out of range"):
        f(randn(2, 4))
    assert f.cache_info().compiles == 1


def test_pads_and_shifts_of_a_dynamic_dim_compile_once() -> None:
    """A dynamic size plus or minus a constant is a size the fusion expresses: HF's label
    shift (pad one -100 at the end, drop the first) and x[:, :-1] serve every length."""
    shift = mlirfuse.jit(lambda y: ops.pad(y, [0, 1], -100)[:, 1:])
    trim = mlirfuse.jit(lambda x: x[:, :-1] * 2.0 + x[:, 1:])
    for n in (5, 9, 2):  # (1 is another signature: a broadcast dim)
        y = RNG.integers(0, 7, (2, n))
        np.testing.assert_array_equal(shift(y), np.pad(y, [(0, 0), (0, 1)], constant_values=-100)[:, 1:])
        x = randn(3, n)
        np.testing.assert_allclose(trim(x), x[:, :-1] * 2 + x[:, 1:], rtol=1e-6)
    assert shift.cache_info().compiles == 1 and trim.cache_info().compiles == 1
    ir = shift.fusion_ir(y)
    assert '"fusion.pad"' in ir and "tensor<?x?xi64>" in ir  # traced with dynamic sizes


def test_a_crop_or_slice_longer_than_a_dynamic_dim_raises() -> None:
    crop = mlirfuse.jit(lambda x: ops.pad(x, [-2, -1]) + 1.0)
    np.testing.assert_allclose(crop(randn(2, 5)).shape, (2, 2))
    with pytest.raises(FusionError, match=r"widths \[-2, -1\] make dim 1 negative"):
        crop(randn(2, 2))


@pytest.mark.parametrize("first", ["smaller first", "larger first"])
def test_a_slice_starting_past_a_dynamic_dims_end_is_empty_as_in_numpy(first: str) -> None:
    """Python, numpy and torch clamp a slice's bounds: x[:, 3:] of 2 columns is empty. The
    symbolic trace (one compile for every size) needs the dim to hold the slice, and raised
    "negative length" for valid code (black-box review, session 79). A call whose sizes that
    trace cannot take now runs a trace of its static sizes; the others keep the symbolic one."""
    tail = mlirfuse.jit(lambda x: (x[:, 3:] * 2.0).sum(-1) + x[:, :-3].sum(-1) + x.sum(-1))
    sizes = [2, 7, 3, 9] if first == "smaller first" else [7, 2, 9, 3]
    for n in sizes:
        x = randn(4, n)
        np.testing.assert_allclose(tail(x), (x[:, 3:] * 2).sum(-1) + x[:, :-3].sum(-1) + x.sum(-1), rtol=1e-5)
    assert tail.cache_info().compiles == 2  # the symbolic trace (7 and 9), the static one of 2 (3 holds it)
    empty = mlirfuse.jit(lambda x: x[1:] + 1.0)
    assert empty(randn(0, 3)).shape == (0, 3) and empty(randn(4, 3)).shape == (3, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("name, fn, ref, args", CASES, ids=IDS)
def test_gpu_backend_matches_numpy(name, fn, ref, args) -> None:
    torch = pytest.importorskip("torch")
    from test_gpu import to_numpy, to_torch

    got = mlirfuse.jit(fn)(*[to_torch(a) for a in args])
    assert isinstance(got, torch.Tensor) and got.is_cuda
    want = np.asarray(ref(*args))
    assert_close(to_numpy(got), want.astype(to_numpy(got).dtype), name, reduction_size=16)


@pytest.mark.gpu
def test_gpu_rotary_at_model_size_matches_numpy() -> None:
    """Rotary embedding on a [8, 32, 2048, 128] bfloat16 tensor (Llama's shapes) against torch
    eager on the same tensors: each bfloat16 op rounds its result, as eager's do (a numpy
    reference rounding once differs by an ulp of the larger terms where they cancel)."""
    import torch

    from test_gpu import to_numpy, to_torch

    bf16 = ml_dtypes.bfloat16
    x, c, s = (to_torch(a) for a in (randn(8, 32, 2048, 128, dtype=bf16), randn(2048, 128, dtype=bf16),
                                     randn(2048, 128, dtype=bf16)))
    got = mlirfuse.jit(_rotary)(x, c, s)
    assert got.dtype == torch.bfloat16
    h = x.shape[-1] // 2
    want = x * c + torch.cat((-x[..., h:], x[..., :h]), -1) * s
    assert_close(to_numpy(got), to_numpy(want), "rotary", reduction_size=1)


def test_a_gather_index_out_of_range_raises() -> None:
    """Indices in [-size, size) are read (negative ones from the end); outside it the call
    raises IndexOutOfRange, an IndexError, as torch raises (the CPU backend's check of the
    gather; it clamped the index and read that element before), and the next call runs."""
    from mlirfuse.errors import IndexOutOfRange

    f = mlirfuse.jit(lambda x, i: ops.index_select(x * 2.0, i, 0))
    x = randn(5, 4)
    np.testing.assert_array_equal(f(x, np.array([4, -5])), (x * 2)[[4, 0]])
    for bad in ([5, 0], [-6, 1]):
        with pytest.raises(IndexOutOfRange, match="gather index out of range"):
            f(x, np.array(bad))
    assert issubclass(IndexOutOfRange, IndexError)
    np.testing.assert_array_equal(f(x, np.array([1, 2])), (x * 2)[[1, 2]])


@pytest.mark.parametrize("read", [
    lambda g: g[:1], lambda g: ops.pad(g, [0, 0, -1, 0]) + 1.0,
    lambda g: ops.gather(g * 3.0, ops.broadcast_in_dim(ops.iota(1), [1, 4], [0]), 0)], ids=["slice", "crop", "gather"])
def test_a_gather_read_in_part_checks_every_index(read) -> None:
    """A gather whose result is read only in part (a slice of its rows, a crop, a gather of it)
    still checks every index, as torch's index_select does before the slice: the rows read
    are computed in the consumer, and the gather itself is kept (not erased as dead code)
    for its checks. Before, `index_select(x, i)[:1]` with i = [0, 7] returned x[0]."""
    from mlirfuse.errors import IndexOutOfRange

    f = mlirfuse.jit(lambda x, i: read(ops.index_select(x * 2.0, i, 0)))
    x = randn(5, 4)
    with pytest.raises(IndexOutOfRange, match="gather index out of range"):
        f(x, np.array([0, 7]))
    good = f(x, np.array([3, 1]))
    assert good.shape[1] == 4 and np.isfinite(good).all()


def test_finding_a_gather_read_in_part_visits_each_value_once(monkeypatch) -> None:
    """`lower_gather` looks for a consumer reading its result in part through every op after
    it: each value once. Walking every path instead, a chain of tanh(y) * y + y (each y read
    three times) tripled the work at each step (found by review)."""
    from mlirfuse.lowering import indexing

    calls = []
    owner = indexing.use_owner
    monkeypatch.setattr(indexing, "use_owner", lambda use: calls.append(1) or owner(use))

    def fn(x, i):
        y = ops.index_select(x * 2.0, i, 0)
        for _ in range(12):
            y = ops.tanh(y) * y + y
        return y

    x = randn(5, 4)
    got = mlirfuse.jit(fn)(x, np.array([1, 0]))
    assert np.isfinite(got).all()
    assert len(calls) < 500  # a few uses a step, each value once; 3^12 paths before


def test_concurrent_calls_raise_for_their_own_indices() -> None:
    """The CPU backend's checks set one flag of the compiled module: two threads calling one
    fusion (ctypes releases the GIL during a call) read each other's failure, so a call with
    valid indices raised and one with a bad index returned (found by review). Checked calls
    now run one at a time."""
    import threading

    from mlirfuse.errors import IndexOutOfRange

    f = mlirfuse.jit(lambda x, i: ops.index_select(x * 2.0, i, 0))
    x = randn(1000, 16)
    good = RNG.integers(0, 1000, 200000)
    bad = good.copy()
    bad[-1] = 5000
    f(x, good)
    wrong = []

    def run(index: np.ndarray, should_raise: bool) -> None:
        for _ in range(200):
            try:
                f(x, index)
                raised = False
            except IndexOutOfRange:
                raised = True
            if raised != should_raise:
                wrong.append(should_raise)
    threads = [threading.Thread(target=run, args=(good, False)), threading.Thread(target=run, args=(bad, True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


@pytest.mark.parametrize("fn", [lambda x: x * (x.shape[-1] * 1.0), lambda x: x / (x.shape[-1] + 0.5),
                                lambda x: x * (2.5 - x.shape[0]), lambda x: x * (7 - x.shape[0]),
                                lambda x: x * (x.shape[1] // 2.0), lambda x: x * (np.float32(0.5) * x.shape[1])],
                         ids=["size * float", "size + float", "float - size", "int - size", "size // float",
                              "numpy float * size"])
def test_sizes_in_float_arithmetic_take_their_concrete_values(fn) -> None:
    """`x.shape[-1] * 1.0` raised TypeError on a symbolic size (black-box review, session 79),
    where `x.shape[-1] ** 0.5` retraced with the concrete sizes; every number a size does not
    combine with symbolically now does that."""
    f = mlirfuse.jit(fn)
    for shape in ((2, 3), (5, 4)):
        x = randn(*shape)
        np.testing.assert_allclose(f(x), fn(x), rtol=1e-6)
