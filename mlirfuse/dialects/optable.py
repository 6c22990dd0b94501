"""The op table: one row per `fusion` op, and everything derived from it.

A row says how the frontends type the op (`rule`), how the numpy reference computes it
(`ref`), how it lowers to one element's arith/math code (`lower`, elementwise ops), its
vector-Jacobian product written with fusion ops (`vjp`; see dialects/derivatives.py) or why it
has none (`no_grad`), and its IRDL signature (`operands`, `results`, `attributes`). `fusion.irdl.mlir` is generated from
these rows (`python -m mlirfuse.dialects.gen_irdl`); a test keeps the two in sync. Adding an
elementwise op is adding one row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from mlirfuse.dialects import derivatives as D
from mlirfuse.lowering import scalar as S

# Typing rules for elementwise ops (see frontend/ops.py).
SAME = "same"            # operands promoted together; result has that dtype
FLOAT = "float"          # as SAME, but integer/bool results become float32
COMPARE = "compare"      # operands promoted together; result bool
PREDICATE = "predicate"  # one operand, not promoted; result bool
LOGICAL = "logical"      # operands converted to bool; result bool
BITWISE = "bitwise"      # integer/bool operands promoted together
WHERE = "where"          # condition converted to bool, other operands promoted
FLOATING = "floating"    # operands promoted together, must be float32 or float64


@dataclass(frozen=True)
class OpDef:
    """One `fusion` op. operands/results: names; `T` marks operands sharing one type."""

    name: str
    kind: str  # elementwise | reduction | shape | indexing | cast | constant | random | size
    operands: tuple[str, ...]
    results: tuple[str, ...] = ("result",)
    rule: str = ""
    ref: Callable | None = None
    lower: S.Lowering | None = None
    attributes: tuple[str, ...] = ()
    variadic_sizes: bool = False
    bool_ok: bool = True
    doc: str = ""
    same_type: tuple[str, ...] = field(default=())
    optional: tuple[str, ...] = ()  # operands that may be absent (IRDL `optional`)
    # vjp(ops, g, y, *operands, **attributes) -> one gradient (or None) per operand.
    vjp: Callable | None = None
    no_grad: str = ""  # why the op has no gradient (then vjp is None)

    @property
    def arity(self) -> int:
        return len(self.operands)


# Why ops give no gradient (torch gives none for the same ops; its zero gradients, of floor and
# the like, are `derivatives.zero`).
BOOL_RESULT = "bool result"
INTEGER_OP = "integer op"
NO_TORCH_DERIVATIVE = "torch has no derivative for it (its backward raises)"
GENERATED = "values made from nothing differentiable (indices, random numbers, constants)"


def _ew(name: str, arity: int, rule: str, ref: Callable, lower: S.Lowering,
        bool_ok: bool = True, doc: str = "", vjp: Callable | None = None, no_grad: str = "") -> OpDef:
    operands = {1: ("x",), 2: ("lhs", "rhs"), 3: ("a", "b", "c")}[arity]
    if name == "where":
        operands = ("condition", "lhs", "rhs")
    if rule in (COMPARE, PREDICATE):
        same = operands  # result is a bool tensor of its own type
    elif rule == WHERE:
        same = ("lhs", "rhs", "result")
    else:
        same = operands + ("result",)
    if rule in (COMPARE, PREDICATE, LOGICAL):
        no_grad = BOOL_RESULT
    elif rule == BITWISE:
        no_grad = INTEGER_OP
    return OpDef(name, "elementwise", operands, rule=rule, ref=ref, lower=lower,
                 bool_ok=bool_ok, same_type=same, doc=doc, vjp=vjp, no_grad=no_grad)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


def _erfc(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erfc, otypes=[np.float64])(x).astype(x.dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _int_identity(fn: Callable) -> Callable:
    return lambda x: fn(x) if x.dtype.kind == "f" else x


def _ref_shift(kind: str) -> Callable:
    """Shifts as torch defines them for counts outside [0, bits) (0, or the sign)."""
    def ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        bits = a.dtype.itemsize * 8
        over = (b < 0) | (b >= bits)
        if kind == "right":
            return np.right_shift(a, np.where(over, bits - 1, b).astype(a.dtype))
        count = np.where(over, 0, b)
        if kind == "left":
            shifted = np.left_shift(a, count.astype(a.dtype))
        else:
            unsigned = np.dtype(f"u{a.dtype.itemsize}")
            shifted = np.right_shift(a.astype(unsigned), count.astype(unsigned)).astype(a.dtype)
        return np.where(over, np.zeros((), a.dtype), shifted)
    return ref


def _ref_gcd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    return np.gcd(a, b).astype(np.result_type(a, b))


def _ref_trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    safe = np.where(b == 0, 1, b)
    with np.errstate(over="ignore"):
        q = np.floor_divide(a, safe)
        q = q + ((np.remainder(a, safe) != 0) & ((a < 0) != (safe < 0)))
    return np.where(b == 0, np.zeros((), a.dtype), q).astype(a.dtype)


def _ref_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch's pow: integers exactly (numpy's wrapping products), a negative exponent giving
    1 for a base of 1, +-1 for -1 and 0 otherwise."""
    if a.dtype.kind == "f":
        return np.power(a, b)
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    negative = b < 0
    with np.errstate(over="ignore"):
        r = np.power(a, np.where(negative, 0, b))
    inverse = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 != 0, -1, 1), 0))
    return np.where(negative, inverse, r).astype(a.dtype)


def _ref_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c in float64 (exact products of float32 and narrower), rounded to the type."""
    dtype = np.result_type(a, b, c)
    wide = np.float64 if dtype.itemsize <= 4 else np.longdouble
    return (np.asarray(a, wide) * np.asarray(b, wide) + np.asarray(c, wide)).astype(dtype)


def _ref_lerp(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    diff = b - a
    return np.where(np.abs(w) < 0.5, _ref_fma(w, diff, a), _ref_fma(w - 1, diff, b))


def _ref_not(x: np.ndarray) -> np.ndarray:
    return np.invert(x)


ELEMENTWISE = [
    _ew("neg", 1, SAME, np.negative, S.by_kind(lambda e, x: S.arith.negf(x), S.neg_int), bool_ok=False,
        vjp=lambda ops, g, y, x: (ops.neg(g),)),
    _ew("abs", 1, SAME, np.abs, S.by_kind(lambda e, x: S.math.absf(x), S.abs_int, lambda e, x: x),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.sign(x)),)),
    _ew("exp", 1, FLOAT, np.exp, S.transcendental("exp"),
        vjp=lambda ops, g, y, x: (ops.mul(g, y),)),
    _ew("exp2", 1, FLOAT, np.exp2, S.transcendental("exp2"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.mul(y, D.LN2)),)),
    _ew("expm1", 1, FLOAT, np.expm1, S.transcendental("expm1"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.add(y, 1)),)),
    _ew("log", 1, FLOAT, np.log, S.transcendental("log"),
        vjp=lambda ops, g, y, x: (ops.div(g, x),)),
    _ew("log2", 1, FLOAT, np.log2, S.transcendental("log2"),
        vjp=lambda ops, g, y, x: (ops.div(g, ops.mul(x, D.LN2)),)),
    _ew("log1p", 1, FLOAT, np.log1p, S.transcendental("log1p"),
        vjp=lambda ops, g, y, x: (ops.div(g, ops.add(x, 1)),)),
    _ew("sqrt", 1, FLOAT, np.sqrt, S.sqrt,
        vjp=lambda ops, g, y, x: (ops.div(g, ops.mul(y, 2)),)),
    _ew("rsqrt", 1, FLOAT, lambda x: 1 / np.sqrt(x), S.rsqrt,
        vjp=lambda ops, g, y, x: (ops.mul(ops.mul(g, -0.5), ops.mul(ops.mul(y, y), y)),)),
    _ew("reciprocal", 1, FLOAT, lambda x: 1 / x, S.reciprocal,
        vjp=lambda ops, g, y, x: (ops.mul(ops.neg(g), ops.mul(y, y)),)),
    _ew("sin", 1, FLOAT, np.sin, S.transcendental("sin"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.cos(x)),)),
    _ew("cos", 1, FLOAT, np.cos, S.transcendental("cos"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.neg(ops.sin(x))),)),
    _ew("tan", 1, FLOAT, np.tan, S.transcendental("tan"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.add(ops.mul(y, y), 1)),)),
    _ew("asin", 1, FLOAT, np.arcsin, S.transcendental("asin"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.rsqrt(ops.sub(1, ops.mul(x, x)))),)),
    _ew("acos", 1, FLOAT, np.arccos, S.transcendental("acos"),
        vjp=lambda ops, g, y, x: (ops.mul(ops.neg(g), ops.rsqrt(ops.sub(1, ops.mul(x, x)))),)),
    _ew("atan", 1, FLOAT, np.arctan, S.transcendental("atan"),
        vjp=lambda ops, g, y, x: (ops.div(g, ops.add(ops.mul(x, x), 1)),)),
    _ew("sinh", 1, FLOAT, np.sinh, S.transcendental("sinh"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.cosh(x)),)),
    _ew("cosh", 1, FLOAT, np.cosh, S.transcendental("cosh"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.sinh(x)),)),
    _ew("asinh", 1, FLOAT, np.arcsinh, S.transcendental("asinh"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.rsqrt(ops.add(ops.mul(x, x), 1))),)),
    _ew("acosh", 1, FLOAT, np.arccosh, S.transcendental("acosh"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.rsqrt(ops.sub(ops.mul(x, x), 1))),)),
    _ew("atanh", 1, FLOAT, np.arctanh, S.transcendental("atanh"),
        vjp=lambda ops, g, y, x: (ops.div(g, ops.sub(1, ops.mul(x, x))),)),
    _ew("log10", 1, FLOAT, np.log10, S.transcendental("log10"),
        vjp=lambda ops, g, y, x: (ops.div(g, ops.mul(x, D.LN10)),)),
    _ew("erfc", 1, FLOAT, _erfc, S.transcendental("erfc"),
        vjp=lambda ops, g, y, x: (ops.mul(ops.mul(g, -D.TWO_OVER_SQRT_PI), ops.exp(ops.neg(ops.mul(x, x)))),)),
    _ew("tanh", 1, FLOAT, np.tanh, S.transcendental("tanh"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.sub(1, ops.mul(y, y))),)),
    _ew("sigmoid", 1, FLOAT, _sigmoid, S.transcendental("sigmoid"),
        vjp=lambda ops, g, y, x: (ops.mul(g, ops.mul(ops.sub(1, y), y)),)),
    _ew("erf", 1, FLOAT, _erf, S.transcendental("erf"),
        vjp=lambda ops, g, y, x: (ops.mul(ops.mul(g, D.TWO_OVER_SQRT_PI), ops.exp(ops.neg(ops.mul(x, x)))),)),
    _ew("relu", 1, SAME, lambda x: np.maximum(x, np.zeros((), x.dtype)), S.relu,
        vjp=lambda ops, g, y, x: (ops.where(ops.le(y, 0), 0, g),)),  # NaN passes it, as torch's
    _ew("silu", 1, FLOAT, lambda x: x * _sigmoid(x), S.silu,
        vjp=D.silu),
    _ew("floor", 1, SAME, _int_identity(np.floor), S.by_kind(lambda e, x: S.math.floor(x), lambda e, x: x),
        vjp=D.zero),
    _ew("ceil", 1, SAME, _int_identity(np.ceil), S.by_kind(lambda e, x: S.math.ceil(x), lambda e, x: x),
        vjp=D.zero),
    _ew("round", 1, SAME, _int_identity(np.round), S.round_even,
        vjp=D.zero),
    _ew("trunc", 1, SAME, _int_identity(np.trunc), S.by_kind(lambda e, x: S.math.trunc(x), lambda e, x: x),
        vjp=D.zero),
    _ew("sign", 1, SAME, lambda x: x if x.dtype == np.bool_ else np.sign(np.where(np.isnan(x), 0, x)).astype(x.dtype),
        S.sign,
        vjp=D.zero),
    _ew("isnan", 1, PREDICATE, np.isnan, S.isnan),
    _ew("isinf", 1, PREDICATE, np.isinf, S.isinf),
    _ew("logical_not", 1, LOGICAL, np.logical_not, S.invert),
    _ew("bitwise_not", 1, BITWISE, _ref_not, S.invert),
    _ew("add", 2, SAME, np.add, S.binary(S.arith.addf, S.arith.addi, S.arith.ori),
        vjp=lambda ops, g, y, a, b: (g, g)),
    _ew("sub", 2, SAME, np.subtract, S.binary(S.arith.subf, S.arith.subi), bool_ok=False,
        vjp=lambda ops, g, y, a, b: (g, ops.neg(g))),
    _ew("mul", 2, SAME, np.multiply, S.binary(S.arith.mulf, S.arith.muli, S.arith.andi),
        vjp=lambda ops, g, y, a, b: (ops.mul(g, b), ops.mul(g, a))),
    _ew("div", 2, FLOAT, np.true_divide, S.div,
        vjp=lambda ops, g, y, a, b: (ops.div(g, b), ops.mul(ops.neg(g), ops.div(ops.div(a, b), b)))),
    _ew("pow", 2, SAME, _ref_pow, S.power, bool_ok=False,
        vjp=D.pow_),
    _ew("fmod", 2, SAME, np.fmod, S.by_kind(lambda e, a, b: S.arith.remf(a, b), S.fmod_int), bool_ok=False,
        vjp=lambda ops, g, y, a, b: (g, ops.mul(ops.neg(g), D.trunc(ops, ops.div(a, b))))),
    _ew("remainder", 2, SAME, np.remainder, S.remainder, bool_ok=False,
        vjp=lambda ops, g, y, a, b: (g, ops.mul(ops.neg(g), ops.floor(ops.div(a, b))))),
    _ew("maximum", 2, SAME, np.maximum, S.maximum,
        vjp=D.extreme_of_two(+1)),
    _ew("minimum", 2, SAME, np.minimum, S.minimum,
        vjp=D.extreme_of_two(-1)),
    _ew("atan2", 2, FLOAT, np.arctan2, lambda e, a, b: S.math.atan2(a, b),
        vjp=D.atan2),
    _ew("eq", 2, COMPARE, np.equal, S.compare("eq")),
    _ew("ne", 2, COMPARE, np.not_equal, S.compare("ne")),
    _ew("lt", 2, COMPARE, np.less, S.compare("lt")),
    _ew("le", 2, COMPARE, np.less_equal, S.compare("le")),
    _ew("gt", 2, COMPARE, np.greater, S.compare("gt")),
    _ew("ge", 2, COMPARE, np.greater_equal, S.compare("ge")),
    _ew("logical_and", 2, LOGICAL, np.logical_and, lambda e, a, b: S.arith.andi(a, b)),
    _ew("logical_or", 2, LOGICAL, np.logical_or, lambda e, a, b: S.arith.ori(a, b)),
    _ew("bitwise_and", 2, BITWISE, np.bitwise_and, lambda e, a, b: S.arith.andi(a, b)),
    _ew("bitwise_or", 2, BITWISE, np.bitwise_or, lambda e, a, b: S.arith.ori(a, b)),
    _ew("bitwise_xor", 2, BITWISE, np.bitwise_xor, lambda e, a, b: S.arith.xori(a, b)),
    _ew("bitwise_left_shift", 2, BITWISE, _ref_shift("left"), S.shift("left"), bool_ok=False),
    _ew("bitwise_right_shift", 2, BITWISE, _ref_shift("right"), S.shift("right"), bool_ok=False,
        doc="arithmetic (sign-filling) right shift"),
    _ew("logical_right_shift", 2, BITWISE, _ref_shift("logical"), S.shift("logical"), bool_ok=False,
        doc="right shift of the bits as unsigned (zero-filling)"),
    _ew("trunc_div", 2, BITWISE, _ref_trunc_div, S.trunc_div, bool_ok=False,
        doc="integer division rounded toward zero (by 0: 0)"),
    _ew("gcd", 2, BITWISE, _ref_gcd, S.gcd, bool_ok=False, doc="greatest common divisor of |lhs| and |rhs|"),
    _ew("nextafter", 2, FLOATING, np.nextafter, S.nextafter,
        doc="the next representable float after lhs toward rhs", no_grad=NO_TORCH_DERIVATIVE),
    # A gradient that is not the value's own (torch.scatter's: every colliding write gets the
    # gradient at its place, though only the last one lands). autodiff reads it; fusion-dce
    # then replaces it by lhs, so nothing computes rhs in a kernel.
    _ew("straight_through", 2, SAME, lambda a, b: a, lambda e, a, b: a,
        doc="lhs's value with the gradient of rhs: autodiff gives rhs the result's gradient and lhs none",
        vjp=lambda ops, g, y, a, b: (None, g)),
    _ew("where", 3, WHERE, np.where, S.where,
        vjp=lambda ops, g, y, c, a, b: (None, ops.where(c, g, 0), ops.where(c, 0, g))),
    _ew("clamp", 3, SAME, lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), S.clamp,
        vjp=D.clamp),
    _ew("lerp", 3, FLOAT, _ref_lerp, S.lerp,
        vjp=lambda ops, g, y, a, b, w: (ops.mul(g, ops.sub(1, w)), ops.mul(g, w), ops.mul(g, ops.sub(b, a)))),
    _ew("fma", 3, FLOAT, _ref_fma, S.fma, doc="a * b + c rounded once (half types: in float32)",
        vjp=lambda ops, g, y, a, b, c: (ops.mul(g, b), ops.mul(g, a), g)),
]

_REDUCE_ATTRS = ("axes", "keepdim")
REDUCTIONS = [
    OpDef("sum", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="sum over axes", vjp=D.sum_),
    OpDef("prod", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="product over axes", vjp=D.prod),
    OpDef("max", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="maximum (NaN propagates)",
          vjp=D.extreme),
    OpDef("min", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="minimum (NaN propagates)",
          vjp=D.extreme),
    OpDef("mean", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="arithmetic mean", vjp=D.mean),
    OpDef("var", "reduction", ("input",), attributes=_REDUCE_ATTRS + ("correction",),
          doc="variance with Bessel-style correction", vjp=D.var),
    OpDef("var_mean", "reduction", ("input",), results=("var", "mean"),
          attributes=_REDUCE_ATTRS + ("correction",), doc="(var, mean) as torch.var_mean", vjp=D.var_mean),
]

SHAPE_OPS = [
    OpDef("broadcast_in_dim", "shape", ("input",), attributes=("shape", "broadcast_dims"),
          variadic_sizes=True, doc="place input dims at broadcast_dims of a larger shape",
          vjp=D.broadcast_in_dim),
    OpDef("expand", "shape", ("input",), attributes=("shape",), variadic_sizes=True,
          doc="broadcast size-1 dims to the given sizes (same rank)", vjp=D.expand),
    OpDef("reshape", "shape", ("input",), attributes=("shape",), variadic_sizes=True,
          doc="row-major reshape to new_shape", vjp=D.reshape),
    OpDef("permute", "shape", ("input",), attributes=("dims",), doc="dimension permutation", vjp=D.permute),
    OpDef("squeeze", "shape", ("input",), attributes=("dims",), doc="drop size-1 dims", vjp=D.squeeze),
    OpDef("unsqueeze", "shape", ("input",), attributes=("dim",), doc="insert a size-1 dim", vjp=D.unsqueeze),
]

# Data movement with computed indices: each result element reads its operands at indices
# computed from its own (lowered to generics that recompute elementwise producers at those
# indices, so that they fuse both ways).
INDEXING_OPS = [
    OpDef("iota", "indexing", (), attributes=("shape", "dim", "start", "step"), variadic_sizes=True,
          doc="start + step * (index along dim), in the result's type", no_grad=GENERATED),
    OpDef("slice", "indexing", ("input",), attributes=("shape", "starts", "steps"), variadic_sizes=True,
          doc="result[i] = input[starts + i * steps] (shape: the result's)", vjp=D.slice_),
    # Binary: IRDL types every value of a variadic operand alike, and cat's operands differ in
    # shape. n tensors are a chain of n - 1 cats (one loop after lowering).
    OpDef("cat", "indexing", ("lhs", "rhs"), attributes=("dim",), doc="lhs then rhs along dim", vjp=D.cat),
    OpDef("pad", "indexing", ("input", "value"), attributes=("low", "high"),
          doc="input surrounded by low[d] / high[d] copies of the 0-d value (negative: cropped)", vjp=D.pad),
    OpDef("gather", "indexing", ("input", "index"), attributes=("dim",),
          doc="result[i] = input[i with i[dim] = index[i]] (torch.gather); shape of index", vjp=D.gather),
]

OTHER_OPS = [
    OpDef("cast", "cast", ("input",), doc="element type conversion (result type says to what)", vjp=D.cast),
    OpDef("constant", "constant", (), attributes=("value",), doc="a 0-d tensor constant", no_grad=GENERATED),
    OpDef("uniform", "random", ("minval", "maxval", "seed", "offset"), attributes=("shape",),
          variadic_sizes=True, doc="Philox4x32-10 uniform numbers in [minval, maxval)", no_grad=GENERATED),
    OpDef("rand_like", "random", ("input", "seed", "offset"),
          doc="uniform [0, 1) numbers shaped like input", no_grad=GENERATED),
    OpDef("size", "size", ("input",), results=("result",), attributes=("dim",),
          doc="extent of one dim, as an index", no_grad=GENERATED),
]

def _ref_linear(x: np.ndarray, w: np.ndarray, *bias: np.ndarray) -> np.ndarray:
    y = np.matmul(x, np.swapaxes(w, -1, -2) if w.ndim > 1 else w)
    return y + bias[0] if bias else y


def _ref_cumsum(x: np.ndarray, dim: int, reverse: bool) -> np.ndarray:
    if reverse:
        return np.ascontiguousarray(np.flip(np.cumsum(np.flip(x, dim), axis=dim, dtype=x.dtype), dim))
    return np.cumsum(x, axis=dim, dtype=x.dtype)


def _rows(x: np.ndarray, dim: int) -> np.ndarray:
    """x with `dim` moved last, as [rows, length] (a copy)."""
    moved = np.moveaxis(x, dim, -1)
    return np.array(moved.reshape(-1, moved.shape[-1]) if moved.ndim else moved.reshape(1, 1))


def _unrows(rows: np.ndarray, like: np.ndarray, dim: int) -> np.ndarray:
    moved_shape = np.moveaxis(like, dim, -1).shape if like.ndim else ()
    return np.ascontiguousarray(np.moveaxis(rows.reshape(moved_shape), -1, dim) if like.ndim else rows.reshape(()))


def _ref_cumprod(x: np.ndarray, dim: int) -> np.ndarray:
    return np.cumprod(x, axis=dim, dtype=x.dtype)


def _ref_cummax(x: np.ndarray, dim: int) -> np.ndarray:
    return np.maximum.accumulate(x, axis=dim)  # NaN, once met, stays (as torch's)


def _ref_cummin(x: np.ndarray, dim: int) -> np.ndarray:
    return np.minimum.accumulate(x, axis=dim)


def _ref_cumprod_grad(g: np.ndarray, x: np.ndarray, y: np.ndarray, dim: int) -> np.ndarray:
    """The gradient of y = cumprod(x) along dim, zeros in x included (torch's
    cumprod_backward), in linear time: before a row's first zero k, the reverse inclusive
    sum of g * y divided by x; at k, y[k-1] times the reverse sum of g[j] * prod(x[k+1..j]);
    after k, zero (every product through them holds x[k])."""
    gr, xr, yr = _rows(g, dim), _rows(x, dim), _rows(y, dim)
    out = np.zeros_like(gr)
    zero = xr == 0
    clean = ~zero.any(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out[clean] = np.flip(np.cumsum(np.flip(gr[clean] * yr[clean], -1), -1), -1) / xr[clean]
    for r in np.flatnonzero(~clean):
        k = int(np.argmax(zero[r]))
        if k:
            out[r, :k] = np.flip(np.cumsum(np.flip(gr[r, :k] * yr[r, :k]))) / xr[r, :k]
        after = np.cumprod(np.concatenate([[1], xr[r, k + 1:]]).astype(gr.dtype))  # prod(x[k+1..j])
        out[r, k] = (yr[r, k - 1] if k else 1) * np.sum(gr[r, k:] * after)
    return _unrows(out, g, dim)


def _ref_cummaxmin_grad(g: np.ndarray, x: np.ndarray, y: np.ndarray, dim: int, max: bool) -> np.ndarray:
    """The gradient of y = cummax(x) (or cummin) along dim: each g[i] goes to the position
    torch's cummax indices name, the last j <= i with x[j] == y[i] (a NaN: its first one), in
    linear time. `max` is not needed (y tells), kept for the op's attributes."""
    del max
    gr, xr, yr = _rows(g, dim), _rows(x, dim), _rows(y, dim)
    n = gr.shape[-1]
    took = (xr == yr) | np.isnan(xr) if xr.dtype.kind == "f" else xr == yr
    index = np.maximum.accumulate(np.where(took, np.arange(n), 0), axis=-1)
    out = np.zeros_like(gr)
    np.add.at(out, (np.arange(gr.shape[0])[:, None], index), gr)
    return _unrows(out, g, dim)


# Not fused: run by a library (numpy on the CPU, torch for torch tensors), as nvFuser hands
# matmuls to ATen. Fusion groups form around them. The scans (`cumsum`, `cumprod`, `cummax`,
# `cummin`) along `dim` are here for rows too long (or of a length not known when traced) for
# their fused form, a masked reduction whose work is quadratic in the length: no schedule
# scans yet. `cumprod_grad` and `cummaxmin_grad` are their gradients.
LIBRARY_OPS = [
    OpDef("matmul", "library", ("lhs", "rhs"), ref=np.matmul, doc="numpy.matmul semantics", vjp=D.matmul),
    OpDef("linear", "library", ("input", "weight", "bias"), ref=_ref_linear,
          doc="x @ w.T + bias (PyTorch's linear); bias optional", optional=("bias",), vjp=D.linear),
    OpDef("cumsum", "library", ("input",), attributes=("dim", "reverse"), ref=_ref_cumsum,
          doc="inclusive sum along dim (torch.cumsum, the input's dtype); reverse: from the end",
          vjp=D.cumsum),
    OpDef("cumprod", "library", ("input",), attributes=("dim",), ref=_ref_cumprod,
          doc="inclusive product along dim (torch.cumprod, the input's dtype)", vjp=D.cumprod),
    OpDef("cummax", "library", ("input",), attributes=("dim",), ref=_ref_cummax,
          doc="running maximum along dim (torch.cummax's values; NaN, once met, stays)", vjp=D.cummax),
    OpDef("cummin", "library", ("input",), attributes=("dim",), ref=_ref_cummin,
          doc="running minimum along dim (torch.cummin's values; NaN, once met, stays)", vjp=D.cummin),
    OpDef("cumprod_grad", "library", ("grad", "input", "output"), attributes=("dim",), ref=_ref_cumprod_grad,
          doc="the gradient of output = cumprod(input) along dim (zeros in input included)", vjp=D.scan_gradient),
    OpDef("cummaxmin_grad", "library", ("grad", "input", "output"), attributes=("dim", "max"),
          ref=_ref_cummaxmin_grad,
          doc="the gradient of output = cummax(input) (cummin where max is false) along dim: each grad "
              "element added at the position torch's indices name", vjp=D.scan_gradient),
]

OPS: dict[str, OpDef] = {op.name: op for op in
                         ELEMENTWISE + REDUCTIONS + SHAPE_OPS + INDEXING_OPS + OTHER_OPS + LIBRARY_OPS}
