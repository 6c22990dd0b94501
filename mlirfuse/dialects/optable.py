"""The op table: one row per `fusion` op, and everything derived from it.

A row says how the frontends type the op (`rule`), how the numpy reference computes it
(`ref`), how it lowers to one element's arith/math code (`lower`, elementwise ops), and its
IRDL signature (`operands`, `results`, `attributes`). `fusion.irdl.mlir` is generated from
these rows (`python -m mlirfuse.dialects.gen_irdl`); a test keeps the two in sync. Adding an
elementwise op is adding one row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from mlirfuse.lowering import scalar as S

# Typing rules for elementwise ops (see frontend/ops.py).
SAME = "same"            # operands promoted together; result has that dtype
FLOAT = "float"          # as SAME, but integer/bool results become float32
COMPARE = "compare"      # operands promoted together; result bool
PREDICATE = "predicate"  # one operand, not promoted; result bool
LOGICAL = "logical"      # operands converted to bool; result bool
BITWISE = "bitwise"      # integer/bool operands promoted together
WHERE = "where"          # condition converted to bool, other operands promoted


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

    @property
    def arity(self) -> int:
        return len(self.operands)


def _ew(name: str, arity: int, rule: str, ref: Callable, lower: S.Lowering,
        bool_ok: bool = True, doc: str = "") -> OpDef:
    operands = {1: ("x",), 2: ("lhs", "rhs"), 3: ("a", "b", "c")}[arity]
    if name == "where":
        operands = ("condition", "lhs", "rhs")
    if rule in (COMPARE, PREDICATE):
        same = operands  # result is a bool tensor of its own type
    elif rule == WHERE:
        same = ("lhs", "rhs", "result")
    else:
        same = operands + ("result",)
    return OpDef(name, "elementwise", operands, rule=rule, ref=ref, lower=lower,
                 bool_ok=bool_ok, same_type=same, doc=doc)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


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


def _ref_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.power(a, b)
    return np.round(np.power(a.astype(np.float64), b.astype(np.float64))).astype(a.dtype)


def _ref_lerp(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    diff = b - a
    return np.where(np.abs(w) < 0.5, a + w * diff, b - diff * (1 - w))


def _ref_not(x: np.ndarray) -> np.ndarray:
    return np.invert(x)


ELEMENTWISE = [
    _ew("neg", 1, SAME, np.negative, S.by_kind(lambda e, x: S.arith.negf(x), S.neg_int), bool_ok=False),
    _ew("abs", 1, SAME, np.abs, S.by_kind(lambda e, x: S.math.absf(x), S.abs_int, lambda e, x: x)),
    _ew("exp", 1, FLOAT, np.exp, S.transcendental("exp")),
    _ew("exp2", 1, FLOAT, np.exp2, S.transcendental("exp2")),
    _ew("expm1", 1, FLOAT, np.expm1, S.transcendental("expm1")),
    _ew("log", 1, FLOAT, np.log, S.transcendental("log")),
    _ew("log2", 1, FLOAT, np.log2, S.transcendental("log2")),
    _ew("log1p", 1, FLOAT, np.log1p, S.transcendental("log1p")),
    _ew("sqrt", 1, FLOAT, np.sqrt, lambda e, x: S.math.sqrt(x)),
    _ew("rsqrt", 1, FLOAT, lambda x: 1 / np.sqrt(x), S.rsqrt),
    _ew("reciprocal", 1, FLOAT, lambda x: 1 / x, S.reciprocal),
    _ew("sin", 1, FLOAT, np.sin, S.transcendental("sin")),
    _ew("cos", 1, FLOAT, np.cos, S.transcendental("cos")),
    _ew("tanh", 1, FLOAT, np.tanh, S.transcendental("tanh")),
    _ew("sigmoid", 1, FLOAT, _sigmoid, S.transcendental("sigmoid")),
    _ew("erf", 1, FLOAT, _erf, S.transcendental("erf")),
    _ew("relu", 1, SAME, lambda x: np.maximum(x, np.zeros((), x.dtype)), S.relu),
    _ew("silu", 1, FLOAT, lambda x: x * _sigmoid(x), S.silu),
    _ew("floor", 1, SAME, _int_identity(np.floor), S.by_kind(lambda e, x: S.math.floor(x), lambda e, x: x)),
    _ew("ceil", 1, SAME, _int_identity(np.ceil), S.by_kind(lambda e, x: S.math.ceil(x), lambda e, x: x)),
    _ew("round", 1, SAME, _int_identity(np.round), S.round_even),
    _ew("sign", 1, SAME, lambda x: x if x.dtype == np.bool_ else np.sign(x), S.sign),
    _ew("isnan", 1, PREDICATE, np.isnan, S.isnan),
    _ew("isinf", 1, PREDICATE, np.isinf, S.isinf),
    _ew("logical_not", 1, LOGICAL, np.logical_not, S.invert),
    _ew("bitwise_not", 1, BITWISE, _ref_not, S.invert),
    _ew("add", 2, SAME, np.add, S.binary(S.arith.addf, S.arith.addi, S.arith.ori)),
    _ew("sub", 2, SAME, np.subtract, S.binary(S.arith.subf, S.arith.subi), bool_ok=False),
    _ew("mul", 2, SAME, np.multiply, S.binary(S.arith.mulf, S.arith.muli, S.arith.andi)),
    _ew("div", 2, FLOAT, np.true_divide, S.div),
    _ew("pow", 2, SAME, _ref_pow, S.power, bool_ok=False),
    _ew("fmod", 2, SAME, np.fmod, S.by_kind(lambda e, a, b: S.arith.remf(a, b), S.fmod_int), bool_ok=False),
    _ew("remainder", 2, SAME, np.remainder, S.remainder, bool_ok=False),
    _ew("maximum", 2, SAME, np.maximum, S.maximum),
    _ew("minimum", 2, SAME, np.minimum, S.minimum),
    _ew("atan2", 2, FLOAT, np.arctan2, lambda e, a, b: S.math.atan2(a, b)),
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
    _ew("where", 3, WHERE, np.where, S.where),
    _ew("clamp", 3, SAME, lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), S.clamp),
    _ew("lerp", 3, FLOAT, _ref_lerp, S.lerp),
]

_REDUCE_ATTRS = ("axes", "keepdim")
REDUCTIONS = [
    OpDef("sum", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="sum over axes"),
    OpDef("prod", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="product over axes"),
    OpDef("max", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="maximum (NaN propagates)"),
    OpDef("min", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="minimum (NaN propagates)"),
    OpDef("mean", "reduction", ("input",), attributes=_REDUCE_ATTRS, doc="arithmetic mean"),
    OpDef("var", "reduction", ("input",), attributes=_REDUCE_ATTRS + ("correction",),
          doc="variance with Bessel-style correction"),
    OpDef("var_mean", "reduction", ("input",), results=("var", "mean"),
          attributes=_REDUCE_ATTRS + ("correction",), doc="(var, mean) as torch.var_mean"),
]

SHAPE_OPS = [
    OpDef("broadcast_in_dim", "shape", ("input",), attributes=("shape", "broadcast_dims"),
          variadic_sizes=True, doc="place input dims at broadcast_dims of a larger shape"),
    OpDef("expand", "shape", ("input",), attributes=("shape",), variadic_sizes=True,
          doc="broadcast size-1 dims to the given sizes (same rank)"),
    OpDef("reshape", "shape", ("input",), attributes=("shape",), variadic_sizes=True,
          doc="row-major reshape to new_shape"),
    OpDef("permute", "shape", ("input",), attributes=("dims",), doc="dimension permutation"),
    OpDef("squeeze", "shape", ("input",), attributes=("dims",), doc="drop size-1 dims"),
    OpDef("unsqueeze", "shape", ("input",), attributes=("dim",), doc="insert a size-1 dim"),
]

# Data movement with computed indices: each result element reads its operands at indices
# computed from its own (lowered to generics that recompute elementwise producers at those
# indices, so that they fuse both ways).
INDEXING_OPS = [
    OpDef("iota", "indexing", (), attributes=("shape", "dim", "start", "step"), variadic_sizes=True,
          doc="start + step * (index along dim), in the result's type"),
    OpDef("slice", "indexing", ("input",), attributes=("shape", "starts", "steps"), variadic_sizes=True,
          doc="result[i] = input[starts + i * steps] (shape: the result's)"),
    # Binary: IRDL types every value of a variadic operand alike, and cat's operands differ in
    # shape. n tensors are a chain of n - 1 cats (one loop after lowering).
    OpDef("cat", "indexing", ("lhs", "rhs"), attributes=("dim",), doc="lhs then rhs along dim"),
    OpDef("pad", "indexing", ("input", "value"), attributes=("low", "high"),
          doc="input surrounded by low[d] / high[d] copies of the 0-d value (negative: cropped)"),
    OpDef("gather", "indexing", ("input", "index"), attributes=("dim",),
          doc="result[i] = input[i with i[dim] = index[i]] (torch.gather); shape of index"),
]

OTHER_OPS = [
    OpDef("cast", "cast", ("input",), doc="element type conversion (result type says to what)"),
    OpDef("constant", "constant", (), attributes=("value",), doc="a 0-d tensor constant"),
    OpDef("uniform", "random", ("minval", "maxval", "seed", "offset"), attributes=("shape",),
          variadic_sizes=True, doc="Philox4x32-10 uniform numbers in [minval, maxval)"),
    OpDef("rand_like", "random", ("input", "seed", "offset"),
          doc="uniform [0, 1) numbers shaped like input"),
    OpDef("size", "size", ("input",), results=("result",), attributes=("dim",),
          doc="extent of one dim, as an index"),
]

def _ref_linear(x: np.ndarray, w: np.ndarray, *bias: np.ndarray) -> np.ndarray:
    y = np.matmul(x, np.swapaxes(w, -1, -2))
    return y + bias[0] if bias else y


# Not fused: run by a library (numpy on the CPU, torch for torch tensors), as nvFuser hands
# matmuls to ATen. Fusion groups form around them.
LIBRARY_OPS = [
    OpDef("matmul", "library", ("lhs", "rhs"), ref=np.matmul, doc="numpy.matmul semantics"),
    OpDef("linear", "library", ("input", "weight", "bias"), ref=_ref_linear,
          doc="x @ w.T + bias (PyTorch's linear); bias optional", optional=("bias",)),
]

OPS: dict[str, OpDef] = {op.name: op for op in
                         ELEMENTWISE + REDUCTIONS + SHAPE_OPS + INDEXING_OPS + OTHER_OPS + LIBRARY_OPS}
