"""Every op x dtype on the CPU backend against numpy (the reference evaluator's numpy code)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import mlirfuse
import mlirfuse.dtypes
from mlirfuse import DataType, ops
from mlirfuse.dialects import optable
from tolerances import assert_close

FLOATS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
INTS = [np.int32, np.int64]
ALL = FLOATS + INTS + [np.bool_]
RNG = np.random.default_rng(0)

# Inputs kept inside each op's domain so comparisons are meaningful.
POSITIVE = {"log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "pow"}


def sample(dtype, shape, op: str = "", operand: int = 0) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return RNG.random(shape) < 0.5
    if dt.kind in "iu":
        if op == "pow" and operand == 1:
            return RNG.integers(0, 4, shape).astype(dt)
        if op in ("fmod", "remainder") and operand == 1:
            return RNG.integers(1, 7, shape).astype(dt) * RNG.choice([-1, 1], shape).astype(dt)
        return RNG.integers(-20, 20, shape).astype(dt)
    x = RNG.standard_normal(shape) * 3
    if op in POSITIVE:
        x = np.abs(x) + 0.1
    if op == "pow" and operand == 1:
        x = RNG.uniform(-2, 2, shape)
    if op in ("exp", "exp2", "expm1", "sinh", "cosh"):
        x = x / 2
    if op in ("asin", "acos", "atanh"):
        x = np.tanh(x)
    if op == "acosh":
        x = np.abs(x) + 1.1
    if op == "log10":
        x = np.abs(x) + 0.1
    return x.astype(dt)


def _valid(op: optable.OpDef, dtype) -> bool:
    dt = np.dtype(dtype)
    if op.rule == optable.BITWISE and mlirfuse.dtypes.to_dtype(dt).is_float:
        return False
    if op.rule == optable.FLOATING and dt not in (np.float32, np.float64):
        return False
    if dt == np.bool_ and not op.bool_ok:
        return False
    return True


ELEMENTWISE_CASES = [(op.name, d) for op in optable.ELEMENTWISE for d in ALL if _valid(op, d)]


@pytest.mark.parametrize("name,dtype", ELEMENTWISE_CASES,
                         ids=[f"{n}-{np.dtype(d).name}" for n, d in ELEMENTWISE_CASES])
def test_elementwise(name: str, dtype) -> None:
    op = optable.OPS[name]
    shape = (3, 17)
    inputs = [sample(dtype, shape, name, i) for i in range(op.arity)]
    if name == "where":
        inputs[0] = RNG.random(shape) < 0.5
    f = mlirfuse.jit(getattr(ops, name))
    got = f(*inputs)
    expected = mlirfuse.reference.evaluate(f.fusion_ir(*inputs), inputs)[0]
    assert got.dtype == expected.dtype
    assert_close(got, expected, name)


@pytest.mark.parametrize("dtype,eps", [(np.float32, 2.0 ** -12), (np.float64, 2.0 ** -30)],
                         ids=["float32", "float64"])
def test_fma_rounds_once(dtype, eps) -> None:
    """(1 + eps)^2 - 1 = 2 eps + eps^2: a multiply rounded before the add loses eps^2 (a tie
    to even), one fused multiply-add keeps it."""
    a, c = np.full(5, 1 + eps, dtype), np.full(5, -1, dtype)
    got = mlirfuse.jit(ops.fma)(a, a, c)
    assert got.dtype == dtype and (got == dtype(2 * eps + eps * eps)).all()
    assert (a * a + c != got).all()  # separately rounded, as numpy, differs


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_fma_of_half_types_is_float32_rounded_once(dtype) -> None:
    """Half types: a * b + c in float32 (one fma) rounded once to the type, as torch's CUDA
    add with alpha; not three roundings in the type."""
    a, b, c = (sample(dtype, (64,), "fma", i) for i in range(3))
    got = mlirfuse.jit(ops.fma)(a, b, c)
    wide = [v.astype(np.float64) for v in (a, b, c)]
    want = (wide[0] * wide[1] + wide[2]).astype(np.float32).astype(dtype)
    assert got.dtype == dtype and np.array_equal(got.astype(np.float32), want.astype(np.float32))


def test_fma_of_integers_is_float32() -> None:
    i = np.arange(6, dtype=np.int32)
    got = mlirfuse.jit(lambda x: ops.fma(x, 2, 1))(i)
    assert got.dtype == np.float32 and np.array_equal(got, 2 * i + 1.0)


@pytest.mark.parametrize("dtype", FLOATS + INTS + [np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "var_mean"])
@pytest.mark.parametrize("axes,keepdim", [(None, False), ([-1], True), ([0, 2], False), (1, True)])
def test_reduction(name: str, dtype, axes, keepdim) -> None:
    if name in ("mean", "var", "var_mean") and np.dtype(dtype).kind != "f":
        pytest.skip("floating-point only (FusionError, see test_errors)")
    x = sample(dtype, (4, 5, 6), name)
    if name == "prod" and np.dtype(dtype).kind == "f":
        x = (np.abs(x.astype(np.float32)) * 0.2 + 0.9).astype(dtype)
    f = mlirfuse.jit(lambda t: getattr(ops, name)(t, axes, keepdim=keepdim))
    got = f(x)
    expected = mlirfuse.reference.evaluate(f.fusion_ir(x), [x])
    got = got if isinstance(got, tuple) else (got,)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        assert_close(g, e, name, reduction_size=x.size)


def test_reduction_matches_numpy_directly() -> None:
    x = RNG.standard_normal((8, 33, 5)).astype(np.float32)
    f = mlirfuse.jit(lambda t: (ops.sum(t, [0, 2]), ops.var(t, -1, correction=0),
                                ops.var_mean(t, [1], keepdim=True), ops.max(t)))
    s, v, (vv, vm), m = f(x)
    np.testing.assert_allclose(s, x.sum((0, 2)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(v, x.var(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vv, x.var(1, ddof=1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vm, x.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert m == x.max()


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["float32", "bfloat16"])
def test_long_host_sums_are_accurate(dtype) -> None:
    """The CPU backend's sums over 2^20 elements are as accurate as one rounding of the exact
    sum (numpy's and torch's blocked sums are near that): added one element after another in
    float32, a mean of values around 3 was off by 5e-4 relative (the black-box sweep's
    layer_norm(y).pow(2).sum() and y.mean())."""
    x = (RNG.standard_normal(1 << 20) * 0.1 + 3.0).astype(dtype)
    f = mlirfuse.jit(lambda t: (ops.sum(t), ops.mean(t), ops.var(t, 0), ops.sum(ops.reshape(t, [1 << 18, 4]), 0)))
    exact = x.astype(np.float64)
    want = [exact.sum(), exact.mean(), exact.var(ddof=1), exact.reshape(1 << 18, 4).sum(0)]
    rounding = float(ml_dtypes.finfo(dtype).eps)  # the result's dtype is the input's
    for got, ref in zip(f(x), want):
        assert np.all(np.abs(np.asarray(got, np.float64) - ref) <= rounding * np.abs(ref)), (got, ref)


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_shape_ops(dtype) -> None:
    x = sample(dtype, (2, 1, 3, 4))

    def fn(t):
        a = ops.reshape(t, [2, 12])
        b = ops.permute(t, [3, 0, 2, 1])
        c = ops.squeeze(t, [1])
        d = ops.unsqueeze(c, -1)
        e = ops.expand(t, [2, 5, 3, 4])
        g = ops.broadcast_in_dim(c, [7, 2, 3, 4], [1, 2, 3])
        return a, b, c, d, e, g

    got = mlirfuse.jit(fn)(x)
    want = (x.reshape(2, 12), x.transpose(3, 0, 2, 1), x.squeeze(1), x.squeeze(1)[..., None],
            np.broadcast_to(x, (2, 5, 3, 4)), np.broadcast_to(x.squeeze(1), (7, 2, 3, 4)))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("src", ALL, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dst", ALL, ids=lambda d: np.dtype(d).name)
def test_cast(src, dst) -> None:
    x = sample(src, (5, 7))
    if np.dtype(src).kind == "f" and np.dtype(dst).kind in "iu":
        x = np.trunc(x.astype(np.float32)).astype(src)  # float->int of in-range values
    got = mlirfuse.jit(lambda t: ops.cast(t, dst))(x)
    want = x.astype(np.float32).astype(dst) if np.dtype(src).itemsize == 2 and np.dtype(src).kind == "f" \
        else x.astype(dst)
    assert got.dtype == np.dtype(dst)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_uniform_matches_reference_bits(dtype) -> None:
    def fn(x, seed):
        return ops.uniform(-1.0, 3.0, x.shape, seed=seed, offset=7, dtype=DataType.Float) + 0 * x, \
            ops.rand_like(x, seed=5)

    x = np.zeros((33, 17), dtype)
    f = mlirfuse.jit(fn)
    u, r = f(x, 123)
    eu, er = mlirfuse.reference.evaluate(f.fusion_ir(x, 123), [x, np.int64(123)])
    np.testing.assert_array_equal(u, eu)
    np.testing.assert_array_equal(r, er)
    assert -1.0 <= u.min() and u.max() < 3.0
    assert abs(float(u.mean()) - 1.0) < 0.1
    u2, _ = f(x, 124)
    assert not np.array_equal(u, u2)  # seed is a runtime scalar


def test_type_promotion_follows_torch() -> None:
    cases = [
        (lambda a, b: a + b, np.int32, np.float16, np.float16),
        (lambda a, b: a + b, np.float16, ml_dtypes.bfloat16, np.float32),
        (lambda a, b: a * 2.5, np.int32, np.int32, np.float32),
        (lambda a, b: a * 2, np.float16, np.float16, np.float16),
        (lambda a, b: a / b, np.int64, np.int64, np.float32),
        (lambda a, b: a < b, np.float32, np.int32, np.bool_),
        (lambda a, b: a + True, np.bool_, np.bool_, np.bool_),
        (lambda a, b: ops.exp(a), np.int64, np.int64, np.float32),
    ]
    for fn, da, db, want in cases:
        a, b = sample(da, (3,)), sample(db, (3,))
        assert mlirfuse.jit(fn)(a, b).dtype == np.dtype(want), (da, db, want)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_half_precision_ops_read_wider_operands_unrounded(dtype) -> None:
    """CLIP's bf16-autocast loss (`logits * logit_scale.exp()`, a 0-d float32 tensor) was off by a
    fixed 0.2%: the operand was rounded to bfloat16 before the multiply. torch computes
    half-precision arithmetic in float32 with the wider operand's own value (a Python float, a
    0-d float32 or float64 tensor) and rounds the result once, as Inductor and nvFuser do."""
    x = (RNG.standard_normal(4096) * 3).astype(dtype)
    scale = np.float32(14.2849)  # exp(2.6592), not a bfloat16 value

    def op(a, b, f):  # one torch op: float32 arithmetic on the operands' own values, rounded once
        return f(np.asarray(a).astype(np.float32), np.float32(b)).astype(dtype)
    for fn, want in [(lambda x, s: x * s, op(x, scale, np.multiply)),
                     (lambda x, s: x / s + 0.044715, op(op(x, scale, np.divide), 0.044715, np.add)),
                     (lambda x, s: x * 0.7978845608 - s, op(op(x, 0.7978845608, np.multiply), scale, np.subtract))]:
        got = mlirfuse.jit(fn)(x, np.array(scale))
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_half_precision_ops_read_integer_scalars_unrounded(dtype) -> None:
    """An integer scalar (a Python int, a 0-d integer tensor, a size) beside a half-precision
    tensor was rounded to the half type first: x / 70000 in float16 was x / inf = 0, the mean
    x.sum(-1) / x.shape[-1] of a float16 row of 70000 was 0, and 3 * 257 in bfloat16 was 768.
    torch computes with the integer's value in float32 and rounds once (772); an integer
    tensor with dims is cast to the half type first, as torch does."""
    x = np.array([1.0, -60000.0, 0.5, 3.0], dtype)

    def op(a, b, f):
        return f(np.asarray(a).astype(np.float32), np.float32(b)).astype(dtype)
    for fn, want in [(lambda a: a / 70000, op(x, 70000, np.divide)),
                     (lambda a: a * 257, op(x, 257, np.multiply)),
                     (lambda a: 3 / a - 257, op(op(x, 3, lambda u, v: v / u), 257, np.subtract))]:
        got = mlirfuse.jit(fn)(x)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    got = mlirfuse.jit(lambda a, s: a / s)(x, np.array(70000, np.int64))
    np.testing.assert_array_equal(got.astype(np.float32), op(x, 70000, np.divide).astype(np.float32))
    row = np.full((2, 70000), 0.5, dtype)
    np.testing.assert_array_equal(mlirfuse.jit(lambda a: a.sum(-1) / a.shape[-1])(row).astype(np.float32), 0.5)
    ints = np.array([257, 70000, 3, 1], np.int32)  # with dims: cast to the half type, then divided
    got = mlirfuse.jit(lambda a, b: a / b)(x, ints)
    np.testing.assert_array_equal(got.astype(np.float32), (x.astype(np.float32) / ints.astype(dtype).astype(np.float32))
                                  .astype(dtype).astype(np.float32))


def test_runtime_scalar_is_not_baked() -> None:
    f = mlirfuse.jit(lambda x, s: x * s)
    x = np.ones(4, np.float32)
    assert (f(x, 2.0) == 2).all() and (f(x, 3.0) == 3).all()
    assert f.cache_info().compiles == 1


def test_float_constants_special_values() -> None:
    f = mlirfuse.jit(lambda x: (ops.maximum(x, -math.inf), ops.where(x > 0, x, math.nan)))
    a, b = f(np.array([1.0, -1.0], np.float32))
    np.testing.assert_array_equal(a, [1.0, -1.0])
    assert b[0] == 1.0 and np.isnan(b[1])


@pytest.mark.parametrize("shape", [(6, 10), (1, 7), (4, 4)])
def test_results_returned_through_reshapes(shape) -> None:
    """A result reshaped to another shape of the same rank (`tensor<?x?xf32>` both sides) once
    came back as the value before the reshape written with the output's strides (upstream
    empty-tensor elimination follows reshapes); with flattens, unsqueezes, shared values and
    a reshaped input beside it."""
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    n, m = shape

    def fn(t):  # sizes from the traced shape: symbolic, so both sides of a reshape are ?x?
        rows, cols = t.shape
        y = ops.exp(t) + 1.0
        return ((t * 2.0).reshape(cols, rows), y.reshape(-1), y.unsqueeze(0), (y * 3.0).reshape(cols, rows),
                y.sum(-1), t.reshape(rows * cols), ops.broadcast_in_dim(y.sum(0), [1, 1, cols], [2]))

    y = np.exp(x) + 1
    want = [(x * 2).reshape(m, n), y.reshape(-1), y[None], (y * 3).reshape(m, n), y.sum(-1), x.reshape(-1),
            y.sum(0)[None, None]]
    got = mlirfuse.jit(fn)(x)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w.astype(np.float32), f"output {k}", reduction_size=m)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32], ids=lambda d: np.dtype(d).name)
def test_sibling_column_reductions_merged(dtype) -> None:
    """Reductions over the rows of one input (merged into one generic): sums, products of
    two inputs, max, and a result another op reads."""
    rng = np.random.default_rng(4)
    g, x = (rng.standard_normal((7, 5, 33)) * 4).astype(dtype), (rng.standard_normal((7, 5, 33)) * 4).astype(dtype)

    def fn(a, b):
        dw, db, m = (a * b).sum((0, 1)), a.sum((0, 1)), ops.max(a, [0, 1])
        return dw, db, m, db * 2

    got = mlirfuse.jit(fn)(g, x)
    want = [(g * x).sum((0, 1)), g.sum((0, 1)), g.max((0, 1)), g.sum((0, 1)) * 2]
    for k, (a, w) in enumerate(zip(got, want)):
        assert_close(a, w.astype(dtype), f"output {k}", reduction_size=35)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "var_mean"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_column_reductions_of_viewed_rows(name, keepdim, dynamic) -> None:
    """A computed [batch, seq, hidden] value viewed as [tokens, hidden] (and [tokens, 2, h])
    and reduced over the tokens, as a linear's bias gradient is (fusion-reshapes-past-
    reductions reduces it over [batch, seq] instead): every reduction kind, keepdim or not,
    sizes traced dynamic or static, against numpy."""
    rng = np.random.default_rng(9)
    x = (rng.uniform(0.5, 1.5, (3, 5, 8))).astype(np.float32)
    reduce = getattr(ops, name)

    def fn(a):
        b, s, h = a.shape
        y = a * 1.5
        return reduce(ops.reshape(y, [b * s, h]), [0], keepdim=keepdim), \
            reduce(ops.reshape(y, [b * s, 2, h // 2]), [0], keepdim=keepdim)

    ref = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean,
           "var": lambda v, axis, keepdims: np.var(v, axis=axis, ddof=1, keepdims=keepdims)}
    got = mlirfuse.jit(fn, dynamic=dynamic)(x)
    y = x.astype(np.float64) * 1.5
    for k, viewed in enumerate([y.reshape(15, 8), y.reshape(15, 2, 4)]):
        if name == "var_mean":
            want = [np.var(viewed, axis=0, ddof=1, keepdims=keepdim), np.mean(viewed, axis=0, keepdims=keepdim)]
            outs = got[k]
        else:
            want, outs = [ref[name](viewed, axis=0, keepdims=keepdim)], [got[k]]
        for g, w in zip(outs, want):
            assert g.shape == w.shape, (g.shape, w.shape)
            assert_close(g, w.astype(np.float32), f"{name} output {k}", reduction_size=15)


@pytest.mark.parametrize("name", ["sum", "mean", "max"])
@pytest.mark.parametrize("sibling", [None, "bf16", "f32"])
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_column_reductions_of_viewed_rows_through_a_cast(name, sibling, dynamic) -> None:
    """A [batch, seq, hidden] value cast to bfloat16, viewed as [tokens, hidden], widened and
    reduced over the tokens (a bias gradient under CUDA autocast), beside a reduction over
    [batch, seq] of a bfloat16 or float32 input or none (fusion-reshapes-past-reductions moves
    the widening cast with the reduction, or not): against numpy."""
    rng = np.random.default_rng(10)
    x = rng.uniform(0.5, 1.5, (3, 5, 8)).astype(np.float32)
    d = rng.standard_normal((3, 5, 8)).astype(ml_dtypes.bfloat16 if sibling == "bf16" else np.float32)
    reduce = getattr(ops, name)

    def fn(a, dy):
        b, s, h = a.shape
        g = ops.cast(dy, DataType.Float)
        flat = ops.reshape(ops.cast(a * g, DataType.BFloat16), [b * s, h])
        out = [reduce(ops.cast(flat, DataType.Float), [0], keepdim=True)]
        return tuple(out + ([g.sum((0, 1))] if sibling else []))

    got = mlirfuse.jit(fn, dynamic=dynamic)(x, d)
    g = d.astype(np.float64)
    flat = (x * g.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float64).reshape(15, 8)
    want = [getattr(np, name)(flat, axis=0, keepdims=True)] + ([g.sum((0, 1))] if sibling else [])
    for k, (a, w) in enumerate(zip(got, want)):
        assert a.shape == w.shape, (a.shape, w.shape)
        assert_close(a, w.astype(np.float32), f"{name} output {k}", reduction_size=15)


POWER_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, math.inf, -math.inf, math.nan, 1e-30, 7e12]


def _c_pow(x: float, y: float) -> float:
    """C's pow (what `powf` computes; numpy and torch take x ** 0.5 as a square root, which
    differs at -0 and -inf)."""
    odd = y == int(y) and int(y) % 2 == 1
    if x == 0 and y < 0:  # a pole: Python raises, C returns infinity
        return math.copysign(math.inf, x) if odd else math.inf
    try:
        return math.pow(x, y)
    except ValueError:  # a negative base, a non-integral exponent
        return math.nan
    except OverflowError:
        return math.copysign(math.inf, x) if odd else math.inf


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_sign_of_nan_and_half_remainders_follow_torch(dtype) -> None:
    """sign(NaN) is 0 in torch (it was NaN, numpy's answer); fmod and remainder of a half
    precision tensor by a Python float or a 0-d float32 tensor round the divisor to the
    tensor's type first, as torch's kernels (CUDA's too) do: divided by the unrounded 0.1,
    99% of float16 remainders differed."""
    torch = pytest.importorskip("torch")
    x = torch.tensor([float("nan"), -0.0, -2.5, 3.0, 100.3125, 3.30078125, -2.30078125, 1.0]).to(getattr(torch, dtype))
    got = mlirfuse.jit(ops.sign)(x)
    assert torch.equal(got, torch.sign(x))
    for name in ("fmod", "remainder"):
        for divisor in (0.1, torch.tensor(0.1)):
            got = mlirfuse.jit(lambda a, d: getattr(ops, name)(a, d))(x, divisor)
            want = getattr(torch, name)(x, divisor)
            assert got.dtype == want.dtype and torch.allclose(got, want, equal_nan=True, rtol=0, atol=0), name


def test_floor_division_of_traced_tensors() -> None:
    """`//` on traced tensors (it raised TypeError) is torch.floor_divide: integers rounded
    toward -inf, floats from fmod as torch computes them (1.0 // 0.1 is 9), half precision
    in float32."""
    torch = pytest.importorskip("torch")
    i, j = torch.tensor([7, -7, 7, -7, 0, 5, -9]), torch.tensor([2, 2, -2, -2, 3, 1, 4])
    got = mlirfuse.jit(lambda p, q: (p // q, p // 2, 7 // q, p // 0.5))(i, j)
    for g, w in zip(got, (i // j, i // 2, 7 // j, i // 0.5)):
        assert g.dtype == w.dtype and torch.equal(g, w)
    a = torch.tensor([1.0, 7.0, -1.0, 0.3, 5.0, -0.0, 3.0, -7.5, float("nan")], dtype=torch.float64)
    b = torch.tensor([0.1, 0.7, 0.1, 0.1, -0.0, 2.0, -2.0, 2.0, 1.0], dtype=torch.float64)
    for dt in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
        got, want = mlirfuse.jit(lambda p, q: ops.floor_divide(p, q))(a.to(dt), b.to(dt)), a.to(dt) // b.to(dt)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(got.signbit(), want.signbit())


def test_sums_and_products_with_a_dtype_give_that_dtype() -> None:
    """sum/prod(x, dtype=int32) returned int64 (the result type of integer sums without a
    dtype), for int32, float and bool inputs alike; torch gives the dtype asked for."""
    torch = pytest.importorskip("torch")
    for x in (torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.int32), torch.tensor([[1.5, 2.5, 3.0]]),
              torch.tensor([[True, False, True]])):
        for name in ("sum", "prod"):
            got = mlirfuse.jit(lambda a: getattr(ops, name)(a, -1, dtype=torch.int32))(x)
            want = getattr(torch, name)(x, -1, dtype=torch.int32)
            assert got.dtype == want.dtype and torch.equal(got, want), (name, x.dtype)
        got = mlirfuse.jit(lambda a: (a.sum(), a.sum(dtype=torch.int32)))(x)
        assert [g.dtype for g in got] == [x.sum().dtype, torch.int32]


def test_float64_expm1_and_log1p_keep_their_precision_near_zero() -> None:
    """On the host, MLIR lowers math.expm1 to exp(x) - 1 and math.log1p to log(1 + x): float64
    expm1(1e-10) was off by 8e-8 relative (float32 has its own approximations). Now within
    2 ulp of numpy over small and ordinary arguments, infinities, -0 and NaN as numpy's."""
    rng = np.random.default_rng(3)
    x = np.concatenate([10.0 ** rng.uniform(-300, 2.8, 4000) * rng.choice([-1, 1], 4000), rng.uniform(-5, 5, 2000),
                        [0.0, -0.0, 1e-300, -1.0, -2.0, 710.0, -800.0, np.inf, -np.inf, np.nan, 1e300]])
    with np.errstate(all="ignore"):
        got = mlirfuse.jit(lambda t: (ops.expm1(t), ops.log1p(t)))(x)
        for g, want in zip(got, (np.expm1(x), np.log1p(x))):
            finite = np.isfinite(want)
            assert (np.abs(g[finite] - want[finite]) <= 2 * np.spacing(np.abs(want[finite]))).all()
            np.testing.assert_array_equal(g[~finite], want[~finite])
            assert np.signbit(g[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_powers_are_exact_and_wrap_as_torch(dtype) -> None:
    """Integer `a ** b` went through float64: past 2^53 it was inexact (3 ** 39 ended in 256,
    not 267), and it gave INT_MIN for 0 ** -2 and on overflow. torch squares and multiplies
    (wrapping as the type's products do) and gives 1, +-1 or 0 for negative exponents."""
    torch = pytest.importorskip("torch")
    tdt = getattr(torch, dtype)
    info = torch.iinfo(tdt)
    base = torch.tensor([3, info.max, 0, 7, -1, -1, 1, 2, -3, 5, 0, 2, -2], dtype=tdt)
    exponent = torch.tensor([39, 2, -2, 23, -3, -4, -7, 0, 5, 1, 0, 62, 63], dtype=tdt).clamp(max=info.max)
    f = mlirfuse.jit(lambda a, b: a ** b)
    got = f(base, exponent)
    assert got.dtype == tdt and torch.equal(got, base ** exponent), (got, base ** exponent)
    args = [base.numpy(), exponent.numpy()]  # the reference evaluator (the fallback) agrees
    np.testing.assert_array_equal(mlirfuse.reference.evaluate(f.fusion_ir(*args), args)[0], (base ** exponent).numpy())
    got = mlirfuse.jit(lambda a: (a ** 2, a ** 7))(base)
    assert torch.equal(got[0], base ** 2) and torch.equal(got[1], base ** 7)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 4, -1, 0.5, 5])
def test_constant_powers(dtype, exponent) -> None:
    """`x ** c` with a constant c: 0..4 and -1 become multiplications (math-expand-constant-
    powers), the others stay `powf`; both equal C's pow, signed zeros, infinities and NaNs
    included (NaN ** 0 is 1)."""
    dt = np.dtype(dtype)
    is_int = dt.kind in "iu"
    if is_int and (exponent < 0 or exponent != int(exponent)):
        pytest.skip("integer powers take non-negative integral exponents")
    if is_int:
        x = np.arange(-6, 7).astype(dt)
        exponent = int(exponent)
    else:
        with np.errstate(over="ignore"):
            x = np.array(POWER_SPECIALS + list(sample(np.float32, (20,)) * 3), np.float64).astype(dt)
    f = mlirfuse.jit(lambda t: t ** exponent)
    got = f(x)
    want = np.array([_c_pow(float(v), float(exponent)) for v in x.astype(np.float64)])
    with np.errstate(over="ignore"):
        want = want.astype(got.dtype)
    assert_close(got, want, f"x ** {exponent}")
    for k in np.flatnonzero(np.isfinite(want) & (want == 0)):  # the sign of zero too
        assert np.signbit(got[k]) == np.signbit(want[k]), (x[k], got[k])
    linalg = f.compile(x).stages["linalg"]
    # (integer powers square and multiply in a loop: no powf)
    assert ("math.powf" in linalg) == (exponent not in (0, 1, 2, 3, 4, -1) and not is_int)


def _softmax(t):
    e = ops.exp(t - t.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def check_row_quotients(got, x: np.ndarray) -> None:
    """`_softmax(x)` in a 16-bit type against the reference evaluator (numpy, every op rounded
    as the program says, the quotients correctly rounded): within one ulp everywhere, equal
    nearly everywhere (a reciprocal and a product instead of a division)."""
    f = mlirfuse.jit(_softmax)
    want = mlirfuse.reference.evaluate(f.fusion_ir(x), [x])[0]
    ulp = np.abs(np.spacing(want)).astype(np.float64)
    got = np.asarray(got).astype(np.float64)
    assert np.all(np.abs(got - want.astype(np.float64)) <= ulp * 1.01)
    assert np.mean(got == want.astype(np.float64)) > 0.99


def test_division_by_a_row_value_rounded_to_16_bits() -> None:
    """Softmax's `e / e.sum(-1)` in float16 multiplies by the sum's reciprocal
    (linalg-reciprocal-divisors; bfloat16 on the GPU backend, see test_emulated_kernels);
    float32 keeps the division."""
    x = (RNG.standard_normal((64, 300)) * 3).astype(np.float16)
    f = mlirfuse.jit(_softmax)
    check_row_quotients(f(x), x)
    last = f.compile(x).stages["linalg"].split("linalg.generic")[-1]
    assert "arith.divf %cst" in last and "arith.mulf" in last
    assert "arith.divf %in" in mlirfuse.jit(_softmax).compile(x.astype(np.float32)).stages["linalg"]
