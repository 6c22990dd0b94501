"""The aten op table: one row per aten overload that mlirfuse can fuse, and how it lowers.

A row says how the op becomes mlirfuse ops (`lower(ctx, args)`, with `args` the call's
arguments bound by name from the op's schema: tensors as traced mlirfuse tensors, Python
numbers as they are, symbolic scalars as runtime scalar inputs), what kind of node it is for
the partitioner (compute, view, random, creation) and, optionally, a check that leaves a
particular call to torch with a reason. Sizes (`SymInt[]` arguments) are never read from the
arguments: a lowering that needs a shape takes the node's output shape (`ctx.shape`), which
the region resolves from its inputs' symbolic sizes.

Adding an op is adding one row. Ops mlirfuse does not generate code for (matmul, conv,
attention, embedding's backward) are listed in LIBRARY: they stay torch calls between fused
groups. The embedding itself is a gather of the table's rows, fused with what reads it (the
position embedding's add and the LayerNorm after them: one kernel).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch._inductor.inductor_prims  # noqa: F401  (registers prims.fma, which dynamo makes of addcdiv_)

from mlirfuse import ops
from mlirfuse.dtypes import DataType
from mlirfuse.errors import FusionError
from mlirfuse.frontend import indexing as I
from mlirfuse.frontend.graph import Tensor

aten = torch.ops.aten
prims = torch.ops.prims

COMPUTE, VIEW, RANDOM, CREATION = "compute", "view", "random", "creation"


class LoweringContext:
    """What a lowering may need besides its arguments: the node's output dtype and shape
    (resolved lazily: only shape-making ops need it) and, for random ops, the region's
    runtime seed and this op's own Philox stream (offset)."""

    def __init__(self, dtype: DataType, shape_fn: Callable[[], tuple], seed: Any = None, offset: int = 0,
                 arg_shapes_fn: Callable[[str], list[tuple]] | None = None,
                 arg_exprs_fn: Callable[[str], list[tuple]] | None = None, device_type: str = "cpu"):
        self.dtype = dtype
        self.device_type = device_type  # the node's device ("cpu", "cuda"): where torch's kernels differ
        self._shape_fn = shape_fn
        self.seed = seed
        self.offset = offset
        self._arg_shapes_fn = arg_shapes_fn
        self._arg_exprs_fn = arg_exprs_fn

    @property
    def shape(self) -> tuple:
        return self._shape_fn()

    def arg_shapes(self, name: str) -> list[tuple]:
        """The metadata shapes of the tensors of argument `name` (one per tensor of a list)."""
        if self._arg_shapes_fn is None:
            raise FusionError(f"no metadata shapes for argument {name!r}")
        return self._arg_shapes_fn(name)

    def arg_size_exprs(self, name: str) -> list[tuple]:
        """torch's symbolic sizes (sympy expressions) of the tensors of argument `name`: sizes
        of different inputs that torch relates (s0 and s0 - 1) where the traced ones do not."""
        if self._arg_exprs_fn is None:
            raise FusionError(f"no metadata shapes for argument {name!r}")
        return self._arg_exprs_fn(name)

    def pin(self, name: str, tensors: list[Any], what: str) -> None:
        """Tie the traced tensors of argument `name` to the sizes torch's metadata gives them
        (checked at run time): lowerings that need a static size (cat, pad) or equal sizes
        (scatter) get them where the region's signature left a size symbolic."""
        for t, shape in zip(tensors, self.arg_shapes(name)):
            I.pin_sizes(t, shape, what)


@dataclass(frozen=True)
class AtenLowering:
    lower: Callable[[LoweringContext, dict[str, Any]], Any]
    kind: str = COMPUTE
    check: Callable[[dict[str, Any]], str | None] | None = None  # FX-level args -> reason to leave it


def bind(target: Any, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by schema name, defaults filled in."""
    bound: dict[str, Any] = {}
    positional = list(args)
    for i, a in enumerate(target._schema.arguments):
        if i < len(positional) and not a.kwarg_only:
            bound[a.name] = positional[i]
        elif a.name in kwargs:
            bound[a.name] = kwargs[a.name]
        elif a.has_default_value():
            bound[a.name] = a.default_value
        else:
            raise FusionError(f"{target}: missing argument {a.name!r}")
    return bound


def _is_one(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == 1


def _dims(dim: Any) -> Any:
    """aten's reduction dims (None, [] or a list, or an int) as mlirfuse axes."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    return [dim] if isinstance(dim, int) else list(dim)


def _filled(ctx: LoweringContext, value: Any) -> Any:
    """`value` (a Python or runtime scalar) broadcast to the node's shape and dtype."""
    c = ops.cast(value, ctx.dtype)
    shape = ctx.shape
    return ops.expand(c, list(shape)) if shape else c


def _rand(ctx: LoweringContext, like: Any = None) -> Any:
    dtype = ctx.dtype if ctx.dtype.is_float else DataType.Float
    if like is not None:
        return ops.rand_like(like, seed=ctx.seed, offset=ctx.offset, dtype=dtype)
    return ops.uniform(0.0, 1.0, list(ctx.shape), ctx.seed, ctx.offset, dtype)


def _no_generator(a: dict[str, Any]) -> str | None:
    if a.get("generator") is not None:
        return "an explicit torch.Generator (mlirfuse draws seeds from the default one)"
    return None


def _trunc(x: Any) -> Any:
    return ops.where(x < 0, ops.ceil(x), ops.floor(x))


def _div_mode(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """div with a rounding mode: "floor" as torch's (from fmod: floor(a / b) gave 10 for
    1.0 // 0.1, torch 9), "trunc" the quotient truncated (torch's trunc(a / b))."""
    mode = a["rounding_mode"]
    if mode == "floor":
        return ops.floor_divide(a["self"], a["other"])
    q = ops.div(a["self"], a["other"])
    return q if mode is None else _trunc(q)


def _float_rounding(a: dict[str, Any]) -> str | None:
    if a.get("rounding_mode") is None:
        return None
    dtypes = [getattr(v.meta.get("val"), "dtype", None) for v in (a["self"], a["other"]) if hasattr(v, "meta")]
    if any(d is not None and not d.is_floating_point for d in dtypes):
        return "integer division with a rounding mode"
    return None


def _clamp(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    x, lo, hi = a["self"], a["min"], a["max"]
    if lo is not None:
        x = ops.maximum(x, lo)
    if hi is not None:
        x = ops.minimum(x, hi)
    return x


def _to_copy_check(a: dict[str, Any]) -> str | None:
    x = a["self"]
    val = x.meta.get("val") if hasattr(x, "meta") else None
    device = a.get("device")
    if device is not None and val is not None and torch.device(device) != val.device:
        return f"a copy between devices ({val.device} -> {device})"
    if a.get("layout") not in (None, torch.strided):
        return f"layout {a.get('layout')}"
    return None


def _unary(name: str, fn: Callable[[Any], Any] | None = None) -> dict[Any, AtenLowering]:
    f = fn or getattr(ops, name)
    return {getattr(aten, name).default: AtenLowering(lambda ctx, a: f(a["self"]))}


def _binary(name: str, fn: Callable[[Any, Any], Any] | None = None,
            overloads: tuple[str, ...] = ("Tensor", "Scalar")) -> dict[Any, AtenLowering]:
    f = fn or getattr(ops, name)
    packet = getattr(aten, name)
    return {getattr(packet, o): AtenLowering(lambda ctx, a: f(a["self"], a["other"]))
            for o in overloads if hasattr(packet, o)}


HALF = (DataType.Half, DataType.BFloat16)  # computed in float32 (torch's opmath), rounded once


def _scaled(ctx: LoweringContext, f: Callable[[Any, Any], Any], x: Any, y: Any, alpha: Any) -> Any:
    """f(x, alpha * y) (f: add or sub) as torch's add/sub/rsub with alpha compute it: operands
    converted to the result's type, then one fused multiply-add for floating results
    (vectorized fmadd on the CPU, nvcc's contraction on CUDA: mul then add moved 18% of float32
    results an ulp off eager's), bfloat16/float16 in float32 and rounded once (alpha * y rounded
    to bfloat16 first moved SGD's bf16 weights off eager's), alpha itself in the result's type
    on the CPU and in float32 on CUDA, as torch's kernels take it."""
    cpu = ctx.device_type == "cpu"
    if _is_one(alpha):
        return f(*_in_result_type(ctx, x, y, numbers=cpu)) if ctx.dtype.is_float else f(x, y)
    if not ctx.dtype.is_float or not isinstance(alpha, (int, float, Tensor)):
        return f(x, ops.mul(y, alpha))
    x, y = _opmath(ctx, *_in_result_type(ctx, x, y, numbers=cpu))
    if isinstance(alpha, Tensor):  # a runtime alpha (dynamo made it symbolic): a 0-d tensor
        half = ctx.dtype in HALF
        if cpu and half:
            alpha = ops.cast(alpha, ctx.dtype)  # in the result's type, as on the CPU above
        alpha = ops.cast(alpha, DataType.Float if half else ctx.dtype)
        scale = alpha if f is ops.add else ops.neg(alpha)
    else:
        scale = float(_in_type(ctx, alpha) if cpu else alpha)
        scale = scale if f is ops.add else -scale
    return ops.cast(ops.fma(y, scale, x), ctx.dtype)


def _half_operands(f: Callable[[Any, Any], Any]) -> Callable[[LoweringContext, dict[str, Any]], Any]:
    """mul/div as torch's kernels take a half-precision node's 0-d operand of a wider type: on
    the CPU the second one in float32 as it is (the "original scalar" path) and the first one
    rounded to the result's type, like any other operand (NAdam's step sizes times bfloat16
    gradients); on CUDA both rounded (its kernels load a 0-d CUDA tensor as the result's type:
    1983 of 4096 bfloat16 `(s / t) * 2` were off). Python numbers stay as they are."""
    def lower(ctx: LoweringContext, a: dict[str, Any]) -> Any:
        x, y = a["self"], a["other"]
        if ctx.dtype in HALF:
            x = _in_result_type(ctx, x, numbers=False)[0]
            if ctx.device_type != "cpu" or isinstance(y, Tensor) and y.ndim > 0:
                y = _in_result_type(ctx, y, numbers=False)[0]
        return f(x, y)
    return lower


def _pow_scalar(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """pow(x, number) as torch's kernels compute it: exponent 0.5 a square root, -0.5 its
    reciprocal square root (pow differs at -0 and -inf: pow(-0, 0.5) is +0 where sqrt gives -0,
    pow(-inf, 0.5) +inf where sqrt gives NaN), 3 x * x * x and -2 1 / (x * x), a half type
    rounded after x * x too, as torch's bfloat16 and CUDA float16 arithmetic is (its CPU float16
    kernel rounds once; GELU-tanh's bfloat16 x ** 3 was an ulp off eager's in 728 of 3320
    values, CUDA float16's in 696 of 3001); other exponents pow (math-expand-constant-powers
    multiplies for 2 and 4, as torch does)."""
    x, e = a["self"], a["exponent"]
    if not (isinstance(e, float) and e in (0.5, -0.5, 3.0, -2.0) and ctx.dtype.is_float):
        return ops.pow(x, e)
    x = x if x.dtype == ctx.dtype else ops.cast(x, ctx.dtype)
    if e == 0.5:
        return ops.sqrt(x)
    if e == -0.5:
        return ops.rsqrt(x)
    if ctx.dtype is DataType.Half and ctx.device_type == "cpu":  # float32 math, rounded once
        x = ops.cast(x, DataType.Float)
    square = ops.mul(x, x)
    return ops.cast(ops.mul(square, x) if e == 3.0 else ops.reciprocal(square), ctx.dtype)


def _in_type(ctx: LoweringContext, value: Any) -> Any:
    """A Python number as the node's half type holds it (other types: as it is)."""
    if ctx.dtype in HALF and isinstance(value, (int, float)):
        return float(torch.tensor(float(value), dtype=getattr(torch, ctx.dtype.value)))
    return value


def _in_result_type(ctx: LoweringContext, *values: Any, numbers: bool = True) -> list[Any]:
    """Operands converted to the node's result type, as torch's kernels take them: tensors of
    another dtype (a 0-d float32 beside bfloat16 tensors is rounded to bfloat16), and, with
    `numbers`, Python numbers rounded to a half type (torch's CPU add/sub do; its CUDA kernels
    take a Python number in float32)."""
    return [(v if v.dtype == ctx.dtype else ops.cast(v, ctx.dtype)) if isinstance(v, Tensor)
            else _in_type(ctx, v) if numbers else v for v in values]


def _opmath(ctx: LoweringContext, *values: Any) -> list[Any]:
    """Tensors of a half-precision node in float32, torch's opmath (the rest as they are)."""
    if ctx.dtype not in HALF:
        return list(values)
    return [ops.cast(v, DataType.Float) if isinstance(v, Tensor) else v for v in values]


def _addcmul(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """self + value * t1 * t2 as torch's kernels round it, operands in the result's type, in
    float32 for half types: on the CPU fma(value * t1, t2, self) (its vectorized kernel is
    contracted), on CUDA self + value * (t1 * t2), which nvcc contracts to
    fma(value, t1 * t2, self), and with value 1 (folded) to fma(t1, t2, self). Integers take
    value as an integer (truncated), as torch does."""
    value = a["value"]
    if not ctx.dtype.is_float:
        value = int(value) if isinstance(value, float) else value
        return ops.add(a["self"], ops.mul(ops.mul(a["tensor1"], value), a["tensor2"]))
    x, t1, t2 = _opmath(ctx, *_in_result_type(ctx, a["self"], a["tensor1"], a["tensor2"]))
    if ctx.device_type == "cpu":
        out = ops.fma(t1 if _is_one(value) else ops.mul(t1, value), t2, x)
    else:
        out = ops.fma(t1, t2, x) if _is_one(value) else ops.fma(ops.mul(t1, t2), value, x)
    return ops.cast(out, ctx.dtype)


def _addcdiv(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """self + value * t1 / t2 as torch's kernels round it, operands in the result's type:
    (value * t1) / t2 + self on the CPU, fma(value, t1 / t2, self) on CUDA (nvcc's
    contraction), in float32 for half types."""
    x, t1, t2 = _opmath(ctx, *_in_result_type(ctx, a["self"], a["tensor1"], a["tensor2"]))
    value = a["value"]
    if ctx.device_type == "cpu" or not isinstance(value, (int, float)):
        out = ops.add(x, ops.div(ops.mul(t1, value), t2))
    else:
        out = ops.fma(ops.div(t1, t2), float(value), x)
    return ops.cast(out, ctx.dtype)


def _lerp(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """torch.lerp, tensors converted to the result's type first (a 0-d float32 weight beside
    bfloat16 tensors is rounded to bfloat16; a Python number weight stays float32)."""
    return ops.lerp(*_in_result_type(ctx, a["self"], a["end"], a["weight"], numbers=False))


def _vals(a: dict[str, Any], *names: str) -> list[Any]:
    """The FX values (meta['val']) of the named tensor arguments."""
    return [a[n].meta.get("val") for n in names if hasattr(a.get(n), "meta")]


def _raises_unless_float(what: str, *names: str) -> Callable[[dict[str, Any]], str | None]:
    """A check leaving the op to torch (which raises) where no named operand is floating."""
    def check(a: dict[str, Any]) -> str | None:
        dtypes = [getattr(v, "dtype", None) for v in _vals(a, *names)]
        if dtypes and not any(d is not None and d.is_floating_point for d in dtypes):
            return f"{what} of integers or bools (torch raises)"
        return None
    return check


def _no_bool(what: str, *names: str) -> Callable[[dict[str, Any]], str | None]:
    def check(a: dict[str, Any]) -> str | None:
        if any(getattr(v, "dtype", None) == torch.bool for v in _vals(a, *names)):
            return f"{what} of bools (torch raises)"
        return None
    return check


def _alpha_check(name: str) -> Callable[[dict[str, Any]], str | None]:
    """What torch refuses and mlirfuse would compute: sub/rsub of a bool (tensor or Python
    bool); a bool alpha beside non-bool tensors; an alpha beyond the largest value of the type
    torch converts it to (the result's on the CPU, float32 for half results on CUDA)."""
    def check(a: dict[str, Any]) -> str | None:
        vals = _vals(a, "self", "other")
        numbers = [a.get(k) for k in ("self", "other") if not hasattr(a.get(k), "meta")]
        if name != "add" and (any(getattr(v, "dtype", None) == torch.bool for v in vals)
                              or any(isinstance(n, bool) for n in numbers)):
            return f"{name} of a bool (torch raises)"
        alpha = a.get("alpha")
        dtypes = [v.dtype for v in vals if isinstance(v, torch.Tensor)]
        if isinstance(alpha, bool) and dtypes and any(d != torch.bool for d in dtypes):
            return "a bool alpha beside non-bool tensors (torch raises)"
        floats = [v for v in vals if isinstance(v, torch.Tensor) and v.dtype.is_floating_point]
        if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and floats and math.isfinite(alpha):
            widest = max(floats, key=lambda v: (v.dim() > 0, v.dtype.itemsize))
            target = widest.dtype
            if widest.device.type != "cpu" and target in (torch.float16, torch.bfloat16):
                target = torch.float32
            if abs(alpha) > torch.finfo(target).max:
                return f"alpha {alpha} overflows {target} (torch raises)"
        return None
    return check


def _add_sub(name: str) -> dict[Any, AtenLowering]:
    f = getattr(ops, name)

    def lower(ctx: LoweringContext, a: dict[str, Any]) -> Any:
        return _scaled(ctx, f, a["self"], a["other"], a["alpha"])
    check = _alpha_check(name)
    return {getattr(aten, name).Tensor: AtenLowering(lower, check=check),
            getattr(aten, name).Scalar: AtenLowering(lower, check=check)}


def _reduction(name: str, overload: str, fn: Callable[..., Any]) -> dict[Any, AtenLowering]:
    return {getattr(getattr(aten, name), overload): AtenLowering(fn)}


def _view(fn: Callable[[LoweringContext, dict[str, Any]], Any]) -> AtenLowering:
    return AtenLowering(fn, VIEW)


def _identity(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    return a["self"]


def _transpose(x: Any, d0: int, d1: int) -> Any:
    perm = list(range(x.ndim))
    if perm:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return ops.permute(x, perm)


def _sum(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    return ops.sum(a["self"], _dims(a.get("dim")), a.get("keepdim", False), a.get("dtype"))


def _vector_norm(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    return ops.vector_norm(a["self"], a["ord"], _dims(a["dim"]), a["keepdim"], a.get("dtype"))


def _mean(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    return ops.mean(a["self"], _dims(a.get("dim")), a.get("keepdim", False), a.get("dtype"))


def _correction(a: dict[str, Any]) -> float:
    return 1.0 if a.get("correction") is None else float(a["correction"])


# -- indexing: slices, cat, pad, gather and their kin ------------------------------------
def _static_int(value: Any, what: str) -> int:
    """An int argument given as a constant (a symbolic one is an fx.Node here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FusionError(f"{what}: the symbolic argument {value} (only constants are lowered)")
    return value


def _slice(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """aten.slice: the result's length comes from the node's shape (torch clamped the bounds
    when it traced, and its guards keep them so); the start must be a constant."""
    x = a["self"]
    d = ops.normalize_dim(a["dim"], x.ndim, "slice")
    ctx.pin("self", [x], "slice")
    length = ctx.shape[d]
    start = _slice_start(a["start"], x.fusion.canonical(x.shape[d]), length, "slice")
    return I.slice_length(x, d, start, _static_int(a["step"], "slice step"), length)


def _slice_start(start: Any, size: Any, length: Any, what: str) -> int:
    """A slice's first index, from its start argument as torch resolved it: a slice as long
    as its dim starts at 0 whatever was written (x[:, -4096:] of a shorter dim)."""
    if size == length:
        return 0
    start = 0 if start is None else _static_int(start, f"{what} start")
    if start < 0:
        start = max(0, start + _static_int(size, f"{what} from the end of a dynamic dim"))
    return min(start, size) if isinstance(size, int) else start


def _split_with_sizes(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    x = a["self"]
    d = ops.normalize_dim(a["dim"], x.ndim, "split_with_sizes")
    results, start = [], 0
    for n in a["split_sizes"]:
        n = _static_int(n, "split_with_sizes size")
        results.append(I.slice_length(x, d, start, 1, n))
        start += n
    return tuple(results)


def _cat(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """torch.cat, which skips 1-D empty tensors whatever the others' rank (a legacy rule
    transformers' DynamicCache relies on: its first keys are torch.tensor([]))."""
    tensors, shapes = list(a["tensors"]), ctx.arg_shapes("tensors")
    kept = [(t, s) for t, s in zip(tensors, shapes) if tuple(s) != (0,)] or list(zip(tensors, shapes))[:1]
    for t, s in kept:
        I.pin_sizes(t, s, "cat")
    return ops.cat([t for t, _ in kept], a["dim"])


def _pad(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    ctx.pin("self", [a["self"]], "pad")
    return ops.pad(a["self"], [_static_int(w, "pad width") for w in a["pad"]], a["value"])


def _gather(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    return ops.gather(a["self"], I.torch_indices(a["index"]), a["dim"])


def _index_select(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    return ops.index_select(a["self"], I.torch_indices(a["index"]), a["dim"])


def _embedding(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """aten.embedding(weight, indices): the rows of `weight` the indices name, shaped
    indices.shape + [width] (padding_idx and the rest only change the backward). An index
    outside [0, rows) fails the gather's check, as eager raises."""
    weight, indices = a["weight"], a["indices"]
    count: Any = 1
    for s in ctx.shape[:-1]:
        count = s * count if not isinstance(s, int) else count * s
    rows = I.index_select(weight, ops.reshape(I.torch_indices(indices), [count]), 0)
    return ops.reshape(rows, list(ctx.shape))


def _scatter_value(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """aten.scatter(self, dim, index, value) where index holds one position per row along dim
    and covers self in every other dim (nll_loss's backward writes its one-hot this way):
    where(position == index, value, self). Several positions a row could collide: torch.
    Symbolic sizes of the index and self that torch does not relate (a dynamic-shape backward
    graph gives the gradient's rows and the labels' rows symbols of their own) are tied,
    checked at every call (a call where the index covers less falls back to torch)."""
    x, index, value = a["self"], a["index"], a["value"]
    if x.ndim == 0:
        raise FusionError("scatter: a 0-d input is left to torch")
    d = ops.normalize_dim(a["dim"], x.ndim, "scatter")
    (xs,), (js,) = ctx.arg_shapes("self"), ctx.arg_shapes("index")
    if len(js) != len(xs) or js[d] != 1 or any(js[i] != xs[i] and isinstance(js[i], int) and isinstance(xs[i], int)
                                               for i in range(len(xs)) if i != d):
        raise FusionError("scatter: only one index per row covering the input (a one-hot) is fused")
    ctx.pin("self", [x], "scatter")
    ctx.pin("index", [index], "scatter")
    for i in range(x.ndim):
        if i != d:
            x.fusion.unify(index.shape[i], x.shape[i], "scatter: the index covers the input (a one-hot)")
    hit = ops.eq(I.iota_like(x, d), ops.expand(index, list(x.shape)))
    return ops.where(hit, ops.cast(value, x.dtype), x)


def _slice_scatter(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    """aten.slice_scatter (a slice's backward); with step 1, src padded into place where the
    slice lies, self elsewhere. The widths are constants: the slice's start and what follows
    it (the dim's size less start and src's length, constant also where the dim is dynamic)."""
    x, src = a["self"], a["src"]
    d = ops.normalize_dim(a["dim"], x.ndim, "slice_scatter")
    step = _static_int(a["step"], "slice_scatter step")
    ctx.pin("self", [x], "slice_scatter")
    ctx.pin("src", [src], "slice_scatter")
    size, n = x.fusion.canonical(x.shape[d]), x.fusion.canonical(src.shape[d])
    start = _slice_start(a["start"], size, n, "slice_scatter")
    if step != 1:
        return _strided_scatter(x, src, d, start, step, _static_int(n, "slice_scatter of a dynamic length"))
    after = _size_after(ctx, d, size, start, n)
    widths = [0, 0] * (x.ndim - 1 - d) + [start, after]
    fill = _fill_value(x)
    if fill is not None:  # into zeros (a slice's gradient): src padded with them, no select
        return ops.pad(ops.cast(src, x.dtype), widths, ops.constant(fill, x.dtype))
    inside = ops.pad(I.full(list(src.shape), True, DataType.Bool), widths, False)
    return ops.where(inside, ops.pad(src, widths, 0), x)


def _fill_value(x: Any) -> Any:
    """The value of every element of `x` where it is a constant broadcast (torch.zeros,
    new_full), else None."""
    while x.node is not None and x.node.op in ("broadcast_in_dim", "expand") and x.ndim:
        x = x.node.inputs[0]
    return ops.fold(x) if x.ndim == 0 else None


def _size_after(ctx: LoweringContext, d: int, size: Any, start: int, n: Any) -> int:
    """slice_scatter's elements after the slice along d: from the traced sizes, or where they
    are sizes of different inputs (a zeros tensor made from a size argument, a gradient of
    another input: no common monomial), from torch's symbolic shapes, which relate them (the
    pins check the traced sizes against those at run time)."""
    try:
        after = size - start - n
    except TypeError:
        after = None
    if isinstance(after, int) and not isinstance(after, bool):
        return after
    (whole,), (part,) = ctx.arg_size_exprs("self"), ctx.arg_size_exprs("src")
    after = whole[d] - start - part[d]
    if not after.is_Integer:
        raise FusionError(f"slice_scatter: the size after the slice, {after}, is symbolic (only constants are lowered)")
    return int(after)


def _strided_scatter(x: Any, src: Any, d: int, start: int, step: int, n: int) -> Any:
    """src[k] at x's positions start + k * step along d (k < n), x elsewhere: a gather of src
    at (i - start) // step (computed in float64, exact for any size that fits in memory)."""
    rel = ops.sub(I.iota_like(x, d), start)
    k = ops.cast(ops.floor(ops.div(ops.cast(rel, DataType.Double), float(step))), DataType.Int)
    inside = ops.logical_and(ops.logical_and(ops.ge(rel, 0), ops.eq(ops.remainder(rel, step), 0)), ops.lt(k, n))
    k = ops.minimum(ops.maximum(k, 0), max(n - 1, 0))
    return ops.where(inside, ops.gather(src, k, d), x)


def _arange(ctx: LoweringContext, a: dict[str, Any]) -> Any:
    start = a.get("start", 0)
    step = a.get("step", 1)
    for v, what in ((start, "arange start"), (step, "arange step")):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise FusionError(f"{what}: the symbolic argument {v} (only constants are lowered)")
    return ops.iota(ctx.shape[0], start, step, ctx.dtype)


def _truth(reduce: Callable[..., Any]) -> AtenLowering:
    """aten.any / aten.all: whether any (all) element along dim is nonzero, as a max (min) of
    0/1 values compared with 0. Over no elements the max is INT32_MIN and the min INT32_MAX (the
    reductions' identities): compared, False for any and True for all, as torch gives (a cast
    to bool made any's True)."""
    def lower(ctx: LoweringContext, a: dict[str, Any]) -> Any:
        x = a["self"]
        nonzero = ops.cast(ops.ne(x, ops.cast(0, x.dtype)), DataType.Int32)
        return ops.gt(reduce(nonzero, _dims(a.get("dim")), a.get("keepdim", False)), ops.cast(0, DataType.Int32))
    return AtenLowering(lower)


def _arg_extreme(name: str) -> AtenLowering:
    f = getattr(ops, name)
    return AtenLowering(lambda ctx, a: f(a["self"], a["dim"], a["keepdim"]))


TABLE: dict[Any, AtenLowering] = {}
for _name in ("abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal",
              "sin", "cos", "tanh", "sigmoid", "erf", "relu", "floor", "ceil", "round", "sign", "isnan",
              "isinf", "logical_not", "bitwise_not", "silu", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
              "acosh", "atanh", "log10", "erfc"):
    TABLE.update(_unary(_name))
TABLE.update(_unary("trunc"))
TABLE.update(_unary("sgn", ops.sign))
for _name in ("fmod", "remainder", "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor"):
    TABLE.update(_binary(_name))
for _name in ("mul", "div"):
    TABLE.update({getattr(getattr(aten, _name), o): AtenLowering(_half_operands(getattr(ops, _name)))
                  for o in ("Tensor", "Scalar")})
# true_divide is div (left in graphs by dynamo's size arithmetic, which tracing would decompose)
TABLE.update({getattr(aten.true_divide, o): TABLE[getattr(aten.div, o)] for o in ("Tensor", "Scalar")})
for _name in ("maximum", "minimum", "atan2", "logical_and", "logical_or", "gcd"):
    TABLE.update(_binary(_name, overloads=("default",)))


def _float32_or_64(a: dict[str, Any]) -> str | None:
    dtypes = [getattr(v.meta.get("val"), "dtype", None) for v in (a["self"], a["other"]) if hasattr(v, "meta")]
    if any(str(d) not in ("torch.float32", "torch.float64") for d in dtypes if d is not None):
        return "nextafter of a 16-bit float (mlirfuse's steps float32 and float64 bits)"
    return None


TABLE[aten.nextafter.default] = AtenLowering(lambda ctx, a: ops.nextafter(a["self"], a["other"]), check=_float32_or_64)
for _name in ("bitwise_left_shift", "bitwise_right_shift"):
    TABLE.update(_binary(_name, overloads=("Tensor", "Tensor_Scalar")))
TABLE.update(_binary("logical_xor", lambda x, y: ops.ne(ops.cast(x, DataType.Bool), ops.cast(y, DataType.Bool)),
                     overloads=("default",)))
TABLE.update(_add_sub("add"))
TABLE.update(_add_sub("sub"))
TABLE.update({
    aten.rsub.Scalar: AtenLowering(lambda ctx, a: _scaled(ctx, ops.sub, a["other"], a["self"], a["alpha"]),
                                   check=_alpha_check("rsub")),
    aten.div.Tensor_mode: AtenLowering(_div_mode, check=_float_rounding),
    aten.div.Scalar_mode: AtenLowering(_div_mode, check=_float_rounding),
    aten.pow.Tensor_Tensor: AtenLowering(lambda ctx, a: ops.pow(a["self"], a["exponent"])),
    aten.pow.Tensor_Scalar: AtenLowering(_pow_scalar),
    aten.pow.Scalar: AtenLowering(lambda ctx, a: ops.pow(a["self"], a["exponent"])),
    aten.where.self: AtenLowering(lambda ctx, a: ops.where(a["condition"], a["self"], a["other"])),
    aten.clamp.default: AtenLowering(_clamp),
    aten.clamp.Tensor: AtenLowering(_clamp),
    aten.clamp_min.default: AtenLowering(lambda ctx, a: ops.maximum(a["self"], a["min"])),
    aten.clamp_max.default: AtenLowering(lambda ctx, a: ops.minimum(a["self"], a["max"])),
    aten.lerp.Scalar: AtenLowering(_lerp, check=_raises_unless_float("lerp", "self", "end")),
    aten.lerp.Tensor: AtenLowering(_lerp, check=_raises_unless_float("lerp", "self", "end")),
    aten.addcmul.default: AtenLowering(_addcmul, check=_no_bool("addcmul", "self", "tensor1", "tensor2")),
    # dynamo's rewrite of in-place addcdiv_ (Adam's update) and of add_ with a tensor alpha
    prims.fma.default: AtenLowering(lambda ctx, a: ops.cast(ops.fma(*_opmath(ctx, a["a"], a["b"], a["c"])), ctx.dtype)),
    aten.copy.default: AtenLowering(lambda ctx, a: ops.expand(ops.cast(a["src"], ctx.dtype), list(ctx.shape))),
    aten.addcdiv.default: AtenLowering(_addcdiv, check=_raises_unless_float("addcdiv", "self", "tensor1", "tensor2")),
    aten._to_copy.default: AtenLowering(lambda ctx, a: ops.cast(a["self"], ctx.dtype), check=_to_copy_check),
    prims.convert_element_type.default: AtenLowering(lambda ctx, a: ops.cast(a["a"], ctx.dtype)),
    # reductions
    aten.sum.dim_IntList: AtenLowering(_sum),
    aten.linalg_vector_norm.default: AtenLowering(_vector_norm),
    aten.sum.default: AtenLowering(_sum),
    aten.mean.dim: AtenLowering(_mean),
    aten.mean.default: AtenLowering(_mean),
    aten.amax.default: AtenLowering(lambda ctx, a: ops.max(a["self"], _dims(a["dim"]), a["keepdim"])),
    aten.amin.default: AtenLowering(lambda ctx, a: ops.min(a["self"], _dims(a["dim"]), a["keepdim"])),
    aten.max.default: AtenLowering(lambda ctx, a: ops.max(a["self"])),
    aten.min.default: AtenLowering(lambda ctx, a: ops.min(a["self"])),
    aten.prod.dim_int: AtenLowering(lambda ctx, a: ops.prod(a["self"], [a["dim"]], a["keepdim"], a["dtype"])),
    aten.prod.default: AtenLowering(lambda ctx, a: ops.prod(a["self"], None, False, a["dtype"])),
    aten.var.correction: AtenLowering(lambda ctx, a: ops.var(a["self"], _dims(a["dim"]), _correction(a),
                                                             a["keepdim"])),
    aten.var_mean.correction: AtenLowering(lambda ctx, a: ops.var_mean(a["self"], _dims(a["dim"]),
                                                                       _correction(a), a["keepdim"])),
    # views (free in torch; inside a group they are index arithmetic)
    aten.view.default: _view(lambda ctx, a: ops.reshape(a["self"], list(ctx.shape))),
    aten._unsafe_view.default: _view(lambda ctx, a: ops.reshape(a["self"], list(ctx.shape))),
    aten.reshape.default: _view(lambda ctx, a: ops.reshape(a["self"], list(ctx.shape))),
    aten.expand.default: _view(lambda ctx, a: ops.expand(a["self"], list(ctx.shape))),
    aten.permute.default: _view(lambda ctx, a: ops.permute(a["self"], a["dims"])),
    aten.t.default: _view(lambda ctx, a: _transpose(a["self"], 0, -1) if a["self"].ndim == 2 else a["self"]),
    aten.transpose.int: _view(lambda ctx, a: _transpose(a["self"], a["dim0"], a["dim1"])),
    aten.unsqueeze.default: _view(lambda ctx, a: ops.unsqueeze(a["self"], a["dim"])),
    aten.squeeze.dim: _view(lambda ctx, a: ops.squeeze(a["self"], [a["dim"]])),
    aten.squeeze.dims: _view(lambda ctx, a: ops.squeeze(a["self"], list(a["dim"]))),
    aten.squeeze.default: _view(lambda ctx, a: ops.squeeze(a["self"])),
    aten.clone.default: _view(_identity),
    aten.alias.default: _view(_identity),
    aten.lift_fresh_copy.default: _view(_identity),
    aten.slice.Tensor: _view(_slice),
    aten.select.int: _view(lambda ctx, a: ops.select(a["self"], _static_int(a["index"], "select index"), a["dim"])),
    aten.split_with_sizes.default: _view(_split_with_sizes),
    # indexing
    aten.cat.default: AtenLowering(_cat),
    aten.constant_pad_nd.default: AtenLowering(_pad),
    aten.gather.default: AtenLowering(_gather),
    aten.index_select.default: AtenLowering(_index_select),
    aten.embedding.default: AtenLowering(_embedding),
    aten.scatter.value: AtenLowering(_scatter_value),
    aten.slice_scatter.default: AtenLowering(_slice_scatter),
    aten.any.dim: _truth(ops.max),
    aten.any.dims: _truth(ops.max),
    aten.any.default: _truth(ops.max),
    aten.all.dim: _truth(ops.min),
    aten.all.dims: _truth(ops.min),
    aten.all.default: _truth(ops.min),
    aten.argmax.default: _arg_extreme("argmax"),
    aten.argmin.default: _arg_extreme("argmin"),
    aten.arange.start_step: AtenLowering(_arange, CREATION),
    aten.arange.start: AtenLowering(_arange, CREATION),
    aten.arange.default: AtenLowering(_arange, CREATION),
    # tensors made from scalars
    aten.full.default: AtenLowering(lambda ctx, a: _filled(ctx, a["fill_value"]), CREATION),
    aten.full_like.default: AtenLowering(lambda ctx, a: _filled(ctx, a["fill_value"]), CREATION),
    aten.zeros_like.default: AtenLowering(lambda ctx, a: _filled(ctx, 0), CREATION),
    aten.ones_like.default: AtenLowering(lambda ctx, a: _filled(ctx, 1), CREATION),
    aten.scalar_tensor.default: AtenLowering(lambda ctx, a: ops.cast(a["s"], ctx.dtype), CREATION),
    # random numbers: Philox keyed by the region's runtime seed, one stream (offset) per op
    aten.rand_like.default: AtenLowering(lambda ctx, a: _rand(ctx, a["self"]), RANDOM),
    aten.rand.default: AtenLowering(lambda ctx, a: _rand(ctx), RANDOM),
    # (float32 uniforms whatever the dtype, as torch's kernel draws them: bfloat16 ones take the
    # values k/256 in [0.5, 1), and `< p` was then true for 129/256 of them at p = 0.5)
    aten.bernoulli.p: AtenLowering(lambda ctx, a: ops.cast(ops.rand_like(a["self"], seed=ctx.seed, offset=ctx.offset,
                                                                        dtype=DataType.Float) < a["p"], ctx.dtype),
                                   RANDOM, check=_no_generator),
})

# Views inside a group (identities) that are copies in torch: kept in a group where they can be.
COPIES = {aten.clone.default, aten.lift_fresh_copy.default}

# Not generated by mlirfuse: these run in torch (cuBLAS, cuDNN, oneDNN) between fused groups.
LIBRARY = {getattr(aten, name) for name in (
    "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "convolution",
    "convolution_backward", "embedding_dense_backward", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_efficient_attention_backward",
    "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward", "_scaled_dot_product_cudnn_attention_backward",
    "_flash_attention_forward", "_flash_attention_backward", "_efficient_attention_forward",
    "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_fused_attention_overrideable_backward",
) if hasattr(aten, name)}


# Ops with no row on purpose, and why.
NO_SCAN = "no scan schedule (as a masked sum it would be quadratic in the dim's length)"
NOT_FUSED = {
    aten.cumsum: NO_SCAN,
    aten.cumprod: NO_SCAN,
    aten.index: "advanced indexing (tensor indices): use gather or index_select",
    aten.index_put: "scatter with tensor indices (writes may collide)",
    aten.scatter_add: "scatter-add (writes may collide)",
}


def lookup(target: Any) -> AtenLowering | None:
    return TABLE.get(target)


def unsupported_reason(target: Any) -> str:
    """Why an op without a row stays in torch."""
    packet = getattr(target, "overloadpacket", None)
    if packet in LIBRARY or getattr(target, "library_call", False):
        return "library op, runs in torch"
    if packet in NOT_FUSED:
        return NOT_FUSED[packet]
    if target is operator.getitem:
        return "getitem of an op that runs in torch"
    return "no mlirfuse lowering"
