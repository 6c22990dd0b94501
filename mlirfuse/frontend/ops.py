"""The ops users call (`mlirfuse.ops.<name>`, `fd.ops.<name>`): typing, broadcasting, checks.

Each function infers its result dtype and (symbolic) shape with PyTorch's rules, inserts the
casts and broadcasts that make the recorded fusion op's operands agree, and raises
FusionError, naming the op and the offending shapes/dtypes, on any user mistake.
"""

from __future__ import annotations

import builtins
import functools
import re
from typing import Any, Sequence

import numpy as np

from mlirfuse.dialects import optable as T
from mlirfuse.dtypes import DataType, result_type, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import DIMENSIONED, SCALAR, ZERO_DIM, Fusion, Tensor, current_fusion
from mlirfuse.frontend.symbolic import ConcreteSizeNeeded, Size, SymSize, product

Operand = Any  # Tensor | bool | int | float


# -- helpers ---------------------------------------------------------------------------
def normalize_dim(dim: int, ndim: int, what: str) -> int:
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise FusionError(f"{what}: dim {dim!r} is not an int")
    if not -builtins.max(ndim, 1) <= dim < builtins.max(ndim, 1):
        raise FusionError(f"{what}: dim {dim} out of range for a tensor of rank {ndim}")
    return dim % builtins.max(ndim, 1)


def _empty_axes(axes: Any) -> bool:
    return isinstance(axes, (list, tuple)) and len(axes) == 0


def normalize_axes(axes: int | Sequence[int] | None, ndim: int, what: str) -> list[int]:
    if axes is None:
        return list(range(ndim))
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        axes = [int(axes)]
    if not isinstance(axes, (list, tuple)) or not all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in axes):
        raise FusionError(f"{what}: axes must be an int or a list of ints, got {axes!r}")
    out = sorted(normalize_dim(a, ndim, what) for a in axes)
    if len(builtins.set(out)) != len(out):
        raise FusionError(f"{what}: repeated axes {list(axes)}")
    return out


def _fusion_of(args: Sequence[Any], what: str) -> Fusion:
    fusion = None
    for a in args:
        if isinstance(a, Tensor):
            if fusion is not None and a.fusion is not fusion:
                raise FusionError(f"{what}: operands come from different fusion definitions")
            fusion = a.fusion
    fusion = fusion or current_fusion()
    if fusion is None:
        raise FusionError(f"{what}: needs a tensor operand or an active fusion definition")
    return fusion


def _scalar_dtype(value: Any, what: str) -> DataType:
    if isinstance(value, bool):
        return DataType.Bool
    if isinstance(value, int):
        return DataType.Int
    if isinstance(value, float):
        return DataType.Double
    if hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        return to_dtype(value.dtype)  # a numpy scalar
    raise FusionError(f"{what}: unsupported operand {value!r} of type {type(value).__name__}")


def _dtype_priority(x: Operand, what: str) -> tuple[DataType, int]:
    if isinstance(x, Tensor):
        return x.dtype, x.priority
    if isinstance(x, SymSize):  # jit then traces again with static shapes (the size a number)
        raise ConcreteSizeNeeded(f"{what}: the symbolic size {x} used as a number needs concrete sizes; "
                                 "define the tensor with static sizes (mlirfuse.jit specializes on shapes by itself)")
    return _scalar_dtype(x, what), SCALAR


def constant(value: bool | int | float, dtype: DataType | str | None = None,
             fusion: Fusion | None = None) -> Tensor:
    """A 0-d constant; Python numbers used as operands become these."""
    fusion = fusion or _fusion_of([], "constant")
    dt = to_dtype(dtype) if dtype is not None else _scalar_dtype(value, "constant")
    try:
        if dt.is_float:
            value = float(value)
        elif dt.is_int:
            value = int(value)
            bits = np.iinfo(dt.np).bits
            if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
                raise OverflowError(f"out of range for {dt.value}")
        else:
            value = bool(value)
    except ConcreteSizeNeeded:  # a symbolic size as a value: traced again with concrete sizes
        raise
    except (OverflowError, ValueError, TypeError) as e:
        raise FusionError(f"constant {value!r} as {dt.value}: {e}") from None
    return fusion.add_node("constant", [], {"value": value}, [(dt, ())], priority=SCALAR)[0]


def cast(x: Operand, dtype: DataType | str) -> Tensor:
    dt = to_dtype(dtype)
    if not isinstance(x, Tensor):
        return constant(x, dt, _fusion_of([x], "cast"))
    if x.dtype is dt:
        return x
    return x.fusion.add_node("cast", [x], {}, [(dt, x.shape)], priority=x.priority)[0]


def as_tensor(x: Tensor) -> Tensor:
    """`x` typed as a tensor in promotion: a weakly typed 0-d value (a Python number, a
    runtime scalar) becomes a 0-d tensor of its dtype, as `torch.full([], v, dtype=...)` is."""
    if x.priority != SCALAR:
        return x
    return copy(x, ZERO_DIM)


def copy(x: Tensor, priority: Any = None) -> Tensor:
    """A copy of `x` that a kernel writes (a cast to its own dtype): a fusion output that is
    one of the inputs is otherwise that input, no buffer of its own. `priority`: its place in
    type promotion (default: x's)."""
    return x.fusion.add_node("cast", [x], {}, [(x.dtype, x.shape)],
                             priority=x.priority if priority is None else priority)[0]


def _materialize(x: Operand, dtype: DataType, fusion: Fusion) -> Tensor:
    return cast(x, dtype) if isinstance(x, Tensor) else constant(x, dtype, fusion)


def broadcast_shapes(shapes: Sequence[tuple[Size, ...]], fusion: Fusion, what: str) -> tuple[Size, ...]:
    rank = builtins.max((len(s) for s in shapes), default=0)
    out: list[Size] = []
    for i in range(rank):
        sizes = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        result: Size = 1
        for size in sizes:
            if size == 1:
                continue
            if result == 1:
                result = size
                continue
            try:
                result = fusion.unify(result, size, what)
            except FusionError:
                raise FusionError(f"{what}: shapes {[_fmt(s) for s in shapes]} do not broadcast") from None
        out.append(result)
    return tuple(out)


def _fmt(shape: tuple[Size, ...]) -> list[Any]:
    return [s if isinstance(s, int) else str(s) for s in shape]


def broadcast_in_dim(x: Tensor, shape: Sequence[Size], broadcast_dims: Sequence[int]) -> Tensor:
    """Place x's dims at `broadcast_dims` of `shape`; x's size-1 dims broadcast.

    A -1 in `shape` takes the size of the input dim mapped there.
    """
    what = "broadcast_in_dim"
    if not isinstance(x, Tensor):
        raise FusionError(f"{what}: expected a tensor, got {x!r}")
    bdims = list(broadcast_dims)
    out = _sizes_arg(shape, what)
    if len(bdims) != x.ndim:
        raise FusionError(f"{what}: broadcast_dims {bdims} must name one output dim per input dim "
                          f"(input shape {_fmt(x.shape)})")
    if any(not 0 <= d < len(out) for d in bdims) or bdims != sorted(builtins.set(bdims)):
        raise FusionError(f"{what}: broadcast_dims {bdims} must be increasing and within rank {len(out)}")
    for i, d in enumerate(bdims):
        if isinstance(out[d], int) and out[d] == -1:
            out[d] = x.shape[i]
        elif x.shape[i] != 1:
            try:
                out[d] = x.fusion.unify(x.shape[i], out[d], what)
            except FusionError:
                raise FusionError(f"{what}: input shape {_fmt(x.shape)} does not broadcast to "
                                  f"{_fmt(tuple(shape))} at dims {bdims}") from None
    for s in out:
        if isinstance(s, int) and s < 0:
            raise FusionError(f"{what}: invalid output shape {_fmt(tuple(shape))}")
    out_t = tuple(out)
    if out_t == x.shape:
        return x
    return x.fusion.add_node(what, [x], {"broadcast_dims": bdims}, [(x.dtype, out_t)])[0]


def _broadcast_to(x: Tensor, shape: tuple[Size, ...]) -> Tensor:
    if x.shape == shape:
        return x
    offset = len(shape) - x.ndim
    return broadcast_in_dim(x, shape, list(range(offset, len(shape))))


def expand(x: Tensor, shape: Sequence[Size]) -> Tensor:
    """torch.Tensor.expand: size-1 dims grow, -1 keeps a size, new dims may lead."""
    what = "expand"
    shape = _sizes_arg(shape, what)
    if not isinstance(x, Tensor) or len(shape) < x.ndim:
        raise FusionError(f"{what}: cannot expand shape {_fmt(getattr(x, 'shape', ()))} to {shape}")
    offset = len(shape) - x.ndim
    out: list[Size] = []
    for i, s in enumerate(shape):
        src = x.shape[i - offset] if i >= offset else None
        if isinstance(s, int) and s == -1:
            if src is None:
                raise FusionError(f"{what}: -1 not allowed for a new leading dim in {shape}")
            s = src
        elif src is not None and src != 1:
            try:
                s = x.fusion.unify(src, s, what)
            except FusionError:
                raise FusionError(f"{what}: dim {i} of size {src} cannot expand to {s}") from None
        out.append(s)
    out_t = tuple(out)
    if out_t == x.shape:
        return x
    if offset:
        return broadcast_in_dim(x, out_t, list(range(offset, len(out_t))))
    return x.fusion.add_node(what, [x], {}, [(x.dtype, out_t)])[0]


# -- elementwise -------------------------------------------------------------------------
def elementwise(name: str, *args: Operand) -> Tensor:
    op = T.OPS[name]
    if len(args) != op.arity:
        raise FusionError(f"{name}: expects {op.arity} operands, got {len(args)}")
    fusion = _fusion_of(args, name)
    typed = [_dtype_priority(a, name) for a in args]
    if op.rule == T.LOGICAL:
        operand_dtypes = [DataType.Bool] * len(args)
        out_dtype = DataType.Bool
    elif op.rule == T.PREDICATE:
        operand_dtypes = [typed[0][0]]
        out_dtype = DataType.Bool
    elif op.rule == T.WHERE:
        common = result_type(typed[1:], fusion.typed_scalars)
        operand_dtypes = [DataType.Bool, common, common]
        out_dtype = common
    else:
        common = result_type(typed, fusion.typed_scalars)
        if op.rule == T.FLOAT and not common.is_float:
            common = DataType.Float
        if op.rule == T.BITWISE and common.is_float:
            raise FusionError(f"{name}: needs integer or bool operands, got "
                              f"{[d.value for d, _ in typed]}")
        if op.rule == T.FLOATING and common not in (DataType.Float, DataType.Double):
            raise FusionError(f"{name}: needs float32 or float64 operands, got {[d.value for d, _ in typed]}")
        if common.is_bool and not op.bool_ok:
            raise FusionError(f"{name}: not defined for bool tensors; cast them first")
        if name == "pow" and not common.is_float and type(args[1]) is int and args[1] < 0:
            raise FusionError(f"pow: integers to negative integer powers are not allowed (torch raises too); "
                              f"got exponent {args[1]} for {common.value} values (cast them to a float type)")
        operand_dtypes = [common] * len(args)
        out_dtype = DataType.Bool if op.rule == T.COMPARE else common
    # (fmod and remainder take their operands in the result's type, scalars too: torch's
    # kernels, CUDA's included, read them as scalar_t)
    compute = out_dtype if name in ("fmod", "remainder") else _opmath(op.rule, typed, out_dtype)
    if compute is not out_dtype:
        operand_dtypes = [compute] * len(args)
    operands = [_materialize(a, dt, fusion) for a, dt in zip(args, operand_dtypes)]
    shape = broadcast_shapes([t.shape for t in operands], fusion, name)
    operands = [_broadcast_to(t, shape) for t in operands]
    priority = builtins.max(p for _, p in typed)
    result = fusion.add_node(name, operands, {}, [(compute, shape)],
                             priority=priority if priority < DIMENSIONED or not shape else DIMENSIONED)[0]
    return cast(result, out_dtype)


_HALF_TYPES = (DataType.Half, DataType.BFloat16)


def _opmath(rule: str, typed: list[tuple[DataType, int]], out_dtype: DataType) -> DataType:
    """The dtype an elementwise op computes in: its result's, except where a half-precision
    result has a wider float operand (a 0-d float32 tensor, a Python float) or an integer
    scalar (a Python int, a 0-d integer tensor): then float32, the value unrounded, and the
    result rounded once. torch's kernels read such an operand as its original value in
    float32 arithmetic (`original_scalar_value<opmath_t>`: every binary op on CUDA, mul and
    div on the CPU), as Inductor and nvFuser do; rounded to bfloat16 first,
    `x * logit_scale.exp()` (CLIP) was off by a fixed 0.2%, and rounded to float16, the
    mean `x.sum(-1) / x.shape[-1]` of a row of 70000 was 0 (70000 is inf in float16). An
    integer tensor with dims is cast to the result's type first, as torch does."""
    if out_dtype not in _HALF_TYPES or rule not in (T.SAME, T.FLOAT):
        return out_dtype
    wider = any((dt.is_float and not dt.is_float8 and dt not in _HALF_TYPES)
                or (dt.is_int and priority < DIMENSIONED) for dt, priority in typed)
    return DataType.Float if wider else out_dtype


def _make_elementwise(name: str):
    def fn(*args: Operand) -> Tensor:
        return elementwise(name, *args)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}` with PyTorch broadcasting and type promotion."
    return fn


# -- reductions --------------------------------------------------------------------------
def _reduction(name: str, x: Operand, axes: Any, keepdim: bool, extra: dict[str, Any],
               dtype: Any = None) -> list[Tensor]:
    if not isinstance(x, Tensor):
        raise FusionError(f"{name}: expected a tensor, got {x!r}")
    if dtype is not None and dtype is not DataType.Null:
        x = cast(x, dtype)
    # None, [] and (): every axis (torch's dim=None / dim=[] / dim=()).
    dims = normalize_axes(axes, x.ndim, name) if axes is not None and not _empty_axes(axes) else list(range(x.ndim))
    if x.ndim == 0:
        dims = []
    if name in ("mean", "var", "var_mean") and not x.dtype.is_float:
        raise FusionError(f"{name}: needs a floating-point input, got {x.dtype.value}; cast it first")
    out_dtype = x.dtype
    if name in ("sum", "prod") and not x.dtype.is_float and (dtype is None or dtype is DataType.Null):
        out_dtype = DataType.Int  # torch's sums of integers and bools are int64, unless a dtype is given
    shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape) if keepdim or i not in dims)
    n_results = 2 if name == "var_mean" else 1
    attrs = {"axes": dims, "keepdim": bool(keepdim), **extra}
    return x.fusion.add_node(name, [x], attrs, [(out_dtype, shape)] * n_results)


_AXES_ALIASES = ("dims", "dim", "axis")  # nvFuser, torch, numpy


def reduction_api(fn):
    """Reductions take their axes as `axes`, `dims` (nvFuser), `dim` (torch) or `axis` (numpy),
    and `keepdim` (torch) or `keepdims` (numpy)."""
    @functools.wraps(fn)
    def wrapper(x: Tensor, *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], DataType):  # nvFuser's sum(t, dtype): every axis
            kwargs["dtype"], args = args[0], args[1:]
        if fn.__name__ in ("max", "min") and kwargs.get("dtype", DataType.Null) in (None, DataType.Null):
            kwargs.pop("dtype", None)  # nvFuser's max/min take dtype=Null only
        if fn.__name__ in ("max", "min") and len(args) == 3 and args[2] in (None, DataType.Null):
            args = args[:2]
        given = [k for k in ("axes", *_AXES_ALIASES) if k in kwargs]
        if len(given) + builtins.min(len(args), 1) > 1:
            raise FusionError(f"{fn.__name__}: the axes are given twice ({', '.join(given) or 'positionally'})")
        for k in given:
            kwargs["axes"] = kwargs.pop(k)
        if "keepdims" in kwargs:
            if "keepdim" in kwargs:
                raise FusionError(f"{fn.__name__}: give keepdim or keepdims, not both")
            kwargs["keepdim"] = kwargs.pop("keepdims")
        return fn(x, *args, **kwargs)
    return wrapper


@reduction_api
def sum(x: Tensor, axes: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:  # noqa: A001
    return _reduction("sum", x, axes, keepdim, {}, dtype)[0]


@reduction_api
def prod(x: Tensor, axes: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    return _reduction("prod", x, axes, keepdim, {}, dtype)[0]


@reduction_api
def max(x: Tensor, axes: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _reduction("max", x, axes, keepdim, {})[0]


@reduction_api
def min(x: Tensor, axes: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _reduction("min", x, axes, keepdim, {})[0]


@reduction_api
def mean(x: Tensor, axes: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    return _reduction("mean", x, axes, keepdim, {}, dtype)[0]


@reduction_api
def var(x: Tensor, axes: Any = None, correction: float = 1, keepdim: bool = False) -> Tensor:
    return _reduction("var", x, axes, keepdim, {"correction": float(correction)})[0]


@reduction_api
def var_mean(x: Tensor, axes: Any = None, correction: float = 1, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    v, m = _reduction("var_mean", x, axes, keepdim, {"correction": float(correction)})
    return v, m


# -- shapes ------------------------------------------------------------------------------
def _sizes_arg(shape: Any, what: str) -> list[Size]:
    if isinstance(shape, (int, SymSize)):
        return [shape]
    try:
        sizes = list(shape)
    except TypeError:
        raise FusionError(f"{what}: shape must be a sequence of sizes, got {shape!r}") from None
    for k, s in enumerate(sizes):
        if isinstance(s, Tensor) and s.ndim == 0 and not s.dtype.is_float:
            value = fold(s)
            if value is None:  # FusionDefinition then specializes on the scalars it depends on
                raise ConcreteSizeNeeded(f"{what}: the runtime scalar {s!r} used as a size needs its value")
            sizes[k] = s = int(value)
        if isinstance(s, bool) or not isinstance(s, (int, SymSize)):
            raise FusionError(f"{what}: shape entries must be ints or sizes, got {s!r} in {sizes}")
    return sizes


def fold(t: Tensor) -> Any:
    """The value of a 0-d tensor computed from constants alone (a size written as scalar
    arithmetic, as nvFuser definitions do), by the ops' reference semantics; None when it
    depends on an input."""
    node = t.node
    if node is None or t.ndim != 0:
        return None
    if node.op == "constant":
        return node.attrs["value"]
    row = T.OPS.get(node.op)
    if row is None or row.kind not in ("elementwise", "cast"):
        return None
    values = [fold(x) for x in node.inputs]
    if any(v is None for v in values):
        return None
    operands = [np.asarray(v, x.dtype.np) for v, x in zip(values, node.inputs)]
    with np.errstate(all="ignore"):
        result = operands[0] if row.kind == "cast" else row.ref(*operands)
    return np.asarray(result).astype(t.dtype.np).item()


def reshape(x: Tensor, new_shape: Any) -> Tensor:
    what = "reshape"
    if not isinstance(x, Tensor):
        raise FusionError(f"{what}: expected a tensor, got {x!r}")
    sizes = _sizes_arg(new_shape, what)
    inferred = [i for i, s in enumerate(sizes) if isinstance(s, int) and s == -1]
    if len(inferred) > 1 or any(isinstance(s, int) and s < -1 for s in sizes):
        raise FusionError(f"{what}: invalid shape {_fmt(tuple(sizes))}")
    numel = x.numel()
    if inferred:
        known = product([s for i, s in enumerate(sizes) if i != inferred[0]])
        if known == 0:
            raise FusionError(f"{what}: cannot infer -1 in {_fmt(tuple(sizes))} with a zero-size dim")
        if isinstance(numel, int) and isinstance(known, int) and numel % known:
            raise FusionError(f"{what}: shape {_fmt(x.shape)} ({numel} elements) cannot be "
                              f"reshaped to {_fmt(tuple(sizes))}")
        try:
            sizes[inferred[0]] = _div_size(numel, known)
        except FusionError:
            raise FusionError(f"{what}: cannot infer -1 in {_fmt(tuple(sizes))} from "
                              f"input shape {_fmt(x.shape)}") from None
    new_numel = product(sizes)
    if isinstance(numel, int) and isinstance(new_numel, int):
        if numel != new_numel:
            raise FusionError(f"{what}: shape {_fmt(x.shape)} ({numel} elements) cannot be "
                              f"reshaped to {_fmt(tuple(sizes))} ({new_numel} elements)")
    else:
        x.fusion.unify(numel, new_numel, what)
    out = tuple(sizes)
    if out == x.shape:
        return x
    if x.node is not None and x.node.op == what:  # a reshape of a reshape: one reshape of the source
        source = x.node.inputs[0]
        return source if out == source.shape else x.fusion.add_node(what, [source], {}, [(x.dtype, out)])[0]
    return x.fusion.add_node(what, [x], {}, [(x.dtype, out)])[0]


def _div_size(numel: Size, known: Size) -> Size:
    if isinstance(known, SymSize) and isinstance(numel, int):
        raise FusionError("cannot divide a static size by a symbolic one")
    return numel // known


def view(x: Tensor, original_shape: Any = None, new_shape: Any = None) -> Tensor:
    """nvFuser's `view(t, original_shape, new_shape)`: a reshape."""
    if new_shape is None:
        raise FusionError("view: new_shape is required")
    return reshape(x, new_shape)


def set(x: Tensor) -> Tensor:  # noqa: A001 - nvFuser's name
    """nvFuser's `set` (a copy): values are immutable here, so it is the identity."""
    if not isinstance(x, Tensor):
        raise FusionError(f"set: expected a tensor, got {x!r}")
    return x


def permute(x: Tensor, dims: Sequence[int]) -> Tensor:
    what = "permute"
    if not isinstance(x, Tensor):
        raise FusionError(f"{what}: expected a tensor, got {x!r}")
    perm = [normalize_dim(d, x.ndim, what) for d in dims]
    if sorted(perm) != list(range(x.ndim)):
        raise FusionError(f"{what}: {list(dims)} is not a permutation of {x.ndim} dims")
    if perm == list(range(x.ndim)):
        return x
    return x.fusion.add_node(what, [x], {"dims": perm}, [(x.dtype, tuple(x.shape[p] for p in perm))])[0]


def squeeze(x: Tensor, dims: Any = None) -> Tensor:
    """torch.squeeze: drops the given size-1 dims (all of them when dims is None)."""
    what = "squeeze"
    if not isinstance(x, Tensor):
        raise FusionError(f"{what}: expected a tensor, got {x!r}")
    sizes = [x.fusion.canonical(s) for s in x.shape]  # (a dynamic size tied to 1 is 1)
    axes = range(x.ndim) if dims is None else normalize_axes(dims, x.ndim, what) if x.ndim else []
    chosen = [d for d in axes if sizes[d] == 1]
    for d in axes if dims is not None else []:
        if isinstance(sizes[d], SymSize):  # kept, as torch keeps a dim > 1: one of 1 would be dropped
            x.fusion.require_at_least(sizes[d], 2, f"{what}: dynamic dim {d} is kept (as torch keeps dims "
                                      "> 1; define it with size 1 to squeeze it)")
    if not chosen:
        return x
    shape = tuple(s for i, s in enumerate(x.shape) if i not in chosen)
    return x.fusion.add_node(what, [x], {"dims": chosen}, [(x.dtype, shape)])[0]


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    what = "unsqueeze"
    if not isinstance(x, Tensor):
        raise FusionError(f"{what}: expected a tensor, got {x!r}")
    d = normalize_dim(dim, x.ndim + 1, what)
    shape = x.shape[:d] + (1,) + x.shape[d:]
    return x.fusion.add_node(what, [x], {"dim": d}, [(x.dtype, shape)])[0]


def size(x: Tensor, dim: int) -> Size:
    """The extent of one dim: an int, or a symbolic size usable in shapes."""
    return x.size(dim)


# -- library ops (not fused) ------------------------------------------------------------------
def _library_operands(what: str, *xs: Tensor) -> tuple[list[Tensor], DataType]:
    for x in xs:
        if not isinstance(x, Tensor):
            raise FusionError(f"{what}: expected tensors, got {x!r}")
    dt = result_type([(x.dtype, x.priority) for x in xs])
    if dt.is_bool:
        raise FusionError(f"{what}: not defined for bool tensors")
    return [cast(x, dt) for x in xs], dt


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """numpy.matmul: batched, broadcasting batch dims; 1-D operands are vectors."""
    what = "matmul"
    (a, b), dt = _library_operands(what, a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise FusionError(f"{what}: operands must have at least one dim, got {_fmt(a.shape)} and {_fmt(b.shape)}")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    try:
        a.fusion.unify(k_a, k_b, what)
    except FusionError:
        raise FusionError(f"{what}: inner dims differ: {_fmt(a.shape)} @ {_fmt(b.shape)}") from None
    batch = broadcast_shapes([a.shape[:-2], b.shape[:-2]], a.fusion, what)
    shape = batch + (a.shape[-2:-1] if a.ndim > 1 else ()) + (b.shape[-1:] if b.ndim > 1 else ())
    return a.fusion.add_node(what, [a, b], {}, [(dt, shape)])[0]


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """PyTorch's linear: x @ weight.T + bias; weight is [out, in] (or [in])."""
    what = "linear"
    xs = [x, weight] + ([bias] if bias is not None else [])
    operands, dt = _library_operands(what, *xs)
    x, weight = operands[0], operands[1]
    if weight.ndim not in (1, 2) or x.ndim == 0:
        raise FusionError(f"{what}: weight must be [out, in] or [in] and input at least 1-D, got "
                          f"{_fmt(x.shape)} and {_fmt(weight.shape)}")
    try:
        x.fusion.unify(x.shape[-1], weight.shape[-1], what)
    except FusionError:
        raise FusionError(f"{what}: input {_fmt(x.shape)} and weight {_fmt(weight.shape)} "
                          "disagree on in_features") from None
    shape = x.shape[:-1] + (weight.shape[:1] if weight.ndim == 2 else ())
    if bias is not None:
        b = operands[2]
        if b.ndim > 1:
            raise FusionError(f"{what}: bias must be 0-D or 1-D, got {_fmt(b.shape)}")
        full = broadcast_shapes([shape, b.shape], x.fusion, what)
        if len(full) != len(shape) or any(f != 1 and s == 1 for f, s in zip(full, shape)):
            raise FusionError(f"{what}: bias {_fmt(b.shape)} does not broadcast to the output {_fmt(shape)} "
                              "(torch: the expanded size must match the existing size)")
    return x.fusion.add_node(what, operands, {}, [(dt, shape)])[0]


# -- random ------------------------------------------------------------------------------
def _rng_operand(value: Any, what: str, fusion: Fusion) -> Tensor:
    if isinstance(value, Tensor):
        if value.shape or value.dtype.is_float:
            raise FusionError(f"{what}: seed/offset must be integer scalars, got {value!r}")
        return cast(value, DataType.Int)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FusionError(f"{what}: seed/offset must be ints, got {value!r}")
    return constant(value, DataType.Int, fusion)


def uniform(minval: Operand, maxval: Operand, shape: Any, seed: Any = 0, offset: Any = 0,
            dtype: Any = DataType.Float, *, rng_seed: Any = None, rng_offset: Any = None) -> Tensor:
    """Philox4x32-10 uniform numbers in [minval, maxval): same bits on every backend."""
    what = "uniform"
    seed = seed if rng_seed is None else rng_seed
    offset = offset if rng_offset is None else rng_offset
    dt = to_dtype(dtype)
    if not dt.is_float:
        raise FusionError(f"{what}: dtype must be floating point, got {dt.value}")
    sizes = _sizes_arg(shape, what)
    if any(isinstance(s, int) and s < 0 for s in sizes):
        raise FusionError(f"{what}: invalid shape {_fmt(tuple(sizes))}")
    fusion = _fusion_of([minval, maxval, seed, offset], what)
    lo = _materialize(minval, dt, fusion)
    hi = _materialize(maxval, dt, fusion)
    if lo.shape or hi.shape:
        raise FusionError(f"{what}: minval and maxval must be scalars")
    operands = [lo, hi, _rng_operand(seed, what, fusion), _rng_operand(offset, what, fusion)]
    return fusion.add_node(what, operands, {}, [(dt, tuple(sizes))])[0]


def rand_like(x: Tensor, seed: Any = 0, offset: Any = 0, *, rng_seed: Any = None,
              rng_offset: Any = None, dtype: Any = None) -> Tensor:
    """Uniform [0, 1) numbers with x's shape (and dtype unless given)."""
    what = "rand_like"
    if not isinstance(x, Tensor):
        raise FusionError(f"{what}: expected a tensor, got {x!r}")
    dt = to_dtype(dtype) if dtype is not None else x.dtype
    if not dt.is_float:
        raise FusionError(f"{what}: needs a floating-point dtype, got {dt.value}")
    seed = seed if rng_seed is None else rng_seed
    offset = offset if rng_offset is None else rng_offset
    operands = [x, _rng_operand(seed, what, x.fusion), _rng_operand(offset, what, x.fusion)]
    return x.fusion.add_node(what, operands, {}, [(dt, x.shape)])[0]


# The elementwise ops, generated from the op table.
for _op in T.ELEMENTWISE:
    globals()[_op.name] = _make_elementwise(_op.name)

ELEMENTWISE_NAMES = [op.name for op in T.ELEMENTWISE]
REDUCTION_NAMES = [op.name for op in T.REDUCTIONS]
SHAPE_NAMES = ["broadcast_in_dim", "expand", "reshape", "view", "set", "permute", "squeeze",
               "unsqueeze", "size"]
__all__ = ELEMENTWISE_NAMES + REDUCTION_NAMES + SHAPE_NAMES + [
    "cast", "constant", "uniform", "rand_like", "broadcast_shapes", "matmul", "linear"]


def _sizes_method(fn: Any) -> Any:
    def method(self: Tensor, *sizes: Any) -> Tensor:
        if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
            return fn(self, sizes[0])
        return fn(self, list(sizes))
    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


_AUGMENTED = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
              "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}


def _augmented(dunder: str, symbol: str) -> Any:
    """`x += y` and its kin on a traced tensor. torch and numpy write the result into x: the
    caller's tensor and every alias of x see it. Traced code writes into no tensor, and
    rebinding the name instead (Python's fallback) left the input unwritten and an alias
    (`z = y; y += 1; return z`) with the old value, silently: it raises, as the other in-place
    forms do. In a FusionDefinition it is nvFuser's rebinding (`t = t + s`): definitions are
    functional there."""
    def operator(self: Tensor, other: Any) -> Any:
        if self.fusion.recorder is not None:
            return getattr(self, f"__{dunder}__")(other)
        raise FusionError(f"x {symbol}= y on a traced tensor: torch and numpy write it into x in place (the "
                          f"caller's tensor and every alias of x see it), and traced code writes into no tensor; "
                          f"write x = x {symbol} y (a new value) instead")
    operator.__name__ = f"__i{dunder}__"
    return operator


def _set_item(self: Tensor, key: Any, value: Any) -> None:
    raise FusionError("item assignment (x[i] = v) on a traced tensor: it writes into x in place, and traced code "
                      "writes into no tensor; build the new value instead (mlirfuse.ops.where with a mask, "
                      "masked_fill, scatter, or slices and cat)")


def _attach_tensor_methods() -> None:
    """Python operators and torch-style methods on traced tensors."""
    g = globals()

    def binary(name: str, reflected: bool = False):
        def operator(self: Tensor, other: Any) -> Any:
            args = (other, self) if reflected else (self, other)
            record = self.fusion.recorder  # a FusionDefinition logs its operators as fd.ops calls
            return record(name, *args) if record is not None else g[name](*args)
        return operator

    operators = {
        "add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "pow": "pow",
        "mod": "remainder", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
        "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift",  # >>: arithmetic, as torch's
    }
    operators["matmul"] = "matmul"
    for dunder, name in operators.items():
        setattr(Tensor, f"__{dunder}__", binary(name))
        setattr(Tensor, f"__r{dunder}__", binary(name, reflected=True))
    for dunder in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Tensor, f"__{dunder}__", binary(dunder))
    for dunder, symbol in _AUGMENTED.items():
        setattr(Tensor, f"__i{dunder}__", _augmented(dunder, symbol))
    Tensor.__setitem__ = _set_item
    Tensor.__neg__ = lambda self: self.fusion.recorder("neg", self) if self.fusion.recorder else g["neg"](self)
    Tensor.__abs__ = lambda self: self.fusion.recorder("abs", self) if self.fusion.recorder else g["abs"](self)
    Tensor.__pos__ = lambda self: self
    Tensor.__invert__ = lambda self: g["logical_not" if self.dtype is DataType.Bool else "bitwise_not"](self)
    for name in ELEMENTWISE_NAMES + REDUCTION_NAMES + ["squeeze", "unsqueeze"]:
        if not hasattr(Tensor, name):
            setattr(Tensor, name, g[name])
    for name in ("reshape", "permute", "expand"):  # torch style: x.reshape(2, -1) or x.reshape((2, -1))
        setattr(Tensor, name, _sizes_method(g[name]))
    Tensor.view = Tensor.reshape
    Tensor.to = g["cast"]
    Tensor.float = lambda self: cast(self, DataType.Float)
    Tensor.double = lambda self: cast(self, DataType.Double)
    Tensor.half = lambda self: cast(self, DataType.Half)
    Tensor.bfloat16 = lambda self: cast(self, DataType.BFloat16)
    Tensor.long = lambda self: cast(self, DataType.Int)
    Tensor.int = lambda self: cast(self, DataType.Int32)
    Tensor.bool = lambda self: cast(self, DataType.Bool)
    Tensor.dim = lambda self: self.ndim
    Tensor.contiguous = lambda self: self  # traced values have no layout; the compiler picks it
    Tensor.expand_as = lambda self, other: expand(self, list(other.shape))
    Tensor.T = property(lambda self: permute(self, list(reversed(range(self.ndim)))))
    Tensor.mT = property(lambda self: permute(self, [*range(self.ndim - 2), self.ndim - 1, self.ndim - 2]))
    Tensor.matmul = lambda self, other: g["matmul"](self, other)
    # torch's x.where(condition, y): x where the condition holds, else y (the method had taken
    # x as the condition)
    Tensor.where = lambda self, condition, other: g["where"](_bool_condition(condition), self, other)


_attach_tensor_methods()

# Composites (torch.nn.functional's softmax, layer_norm, ...): built from the ops above.
from mlirfuse.frontend.composites import *  # noqa: E402,F401,F403 (COMPOSITE_NAMES)
from mlirfuse.frontend.composites import COMPOSITE_NAMES, attach_tensor_methods  # noqa: E402

__all__ += COMPOSITE_NAMES
attach_tensor_methods()

# Indexing ops (slice, cat, pad, gather, iota) and what torch builds from them.
from mlirfuse.frontend import indexing as _indexing  # noqa: E402
from mlirfuse.frontend.indexing import *  # noqa: E402,F401,F403

__all__ += _indexing.INDEXING_NAMES
_indexing.attach_tensor_methods()


# -- torch's functions on traced tensors (`torch.tanh(x)`, `F.softmax(x, -1)`) -------------------
# Keyword arguments torch passes along that mean nothing in traced code at these values.
_TORCH_NOISE = {"_stacklevel": None, "inplace": False, "out": None, "dtype": None}
# torch functions whose mlirfuse namesake means something else: refused, saying why.
_TORCH_OTHER_MEANING = {
    "cummax": "it returns (values, indices); mlirfuse.ops.cummax gives the values alone",
    "cummin": "it returns (values, indices); mlirfuse.ops.cummin gives the values alone",
    "rand_like": "it draws new numbers at every call; mlirfuse.ops.rand_like(x, seed, offset) draws from a seed "
                 "(pass it as an argument)",
}


_TORCH_ALIASES = {"linalg_vector_norm": "vector_norm"}  # torch.linalg.vector_norm's __name__


def _torch_function(cls: type, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
    """`torch.<name>(...)` and `torch.nn.functional.<name>(...)` with traced tensors among the
    arguments: `torch.max/min(a, b)` of two tensors is maximum/minimum, `torch.where` and
    `torch.scatter` are mlirfuse.ops' (their first argument is no `self`); otherwise the traced
    tensor's torch-style method of that name (`torch.sum(x, -1)` is `x.sum(-1)`), else
    `mlirfuse.ops.<name>` (`F.gelu(x, approximate="tanh")`). Functions whose mlirfuse namesake
    means something else, any other function, in-place forms and `out=` raise, saying what to
    use instead."""
    name = getattr(func, "__name__", repr(func))
    name = _TORCH_ALIASES.get(name, name)
    kwargs = dict(kwargs or {})
    for key, ignored in _TORCH_NOISE.items():
        if key in kwargs and (kwargs[key] is ignored or key == "_stacklevel"):
            del kwargs[key]
    if "inplace" in kwargs or "out" in kwargs:
        raise FusionError(f"torch.{name} with {'inplace=True' if 'inplace' in kwargs else 'out='} on traced "
                          "tensors: traced code has no memory to write into; return the result instead")
    if name in _TORCH_OTHER_MEANING:
        raise FusionError(f"torch.{name} is not supported on traced tensors: {_TORCH_OTHER_MEANING[name]}")
    if not args and "input" in kwargs:  # torch.tanh(input=x)
        args = (kwargs.pop("input"),)
    args, kwargs = _torch_arguments(name, args, kwargs)
    first = args[0] if args else None
    if name in ("max", "min") and len(args) >= 2 and isinstance(args[1], Tensor):
        fn = globals()["maximum" if name == "max" else "minimum"]
    elif name in ("where", "scatter"):
        fn = globals()[name]
        if name == "where" and args:
            args = (_bool_condition(args[0]),) + tuple(args[1:])
    elif isinstance(first, Tensor) and callable(getattr(first, name, None)) and not name.startswith("_"):
        fn, args = getattr(first, name), args[1:]
    elif name in __all__:
        fn = globals()[name]
    else:
        raise FusionError(f"torch.{name} is not supported on traced tensors; write it with mlirfuse.ops "
                          f"(the ops: {', '.join(sorted(__all__)[:8])}, ...) or Tensor methods")
    try:
        return fn(*args, **kwargs)
    except TypeError as e:
        reason = re.sub(r"^[\w.<>]+\(\) ", "", str(e))  # (not the name of the Python function that took them)
        raise FusionError(f"torch.{name} on traced tensors: {reason} (mlirfuse takes torch's arguments, "
                          "not all of them)") from None


def _bool_condition(condition: Any) -> Any:
    """torch.where's condition: a bool tensor, as torch requires (mlirfuse.ops.where itself
    takes numpy's truth of any dtype)."""
    if isinstance(condition, Tensor) and condition.dtype is not DataType.Bool:
        raise FusionError("where expected condition to be a boolean tensor, but got a tensor with dtype "
                          f"{condition.dtype.value}")
    return condition


def _torch_arguments(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """torch's argument forms that mlirfuse spells otherwise: `var(x, unbiased)` and
    `unbiased=` (a correction of 1 or 0), `scatter(x, dim, index, src or value)`,
    `F.pad(x, pad, mode="constant", value)`."""
    if name in ("var", "std", "var_mean"):
        if "unbiased" in kwargs:
            kwargs["correction"] = int(kwargs.pop("unbiased"))
        if len(args) == 2 and isinstance(args[1], bool):  # torch.var(x, unbiased)
            args, kwargs["correction"] = args[:1], int(args[1])
    elif name == "scatter":
        bound = dict(zip(("input", "dim", "index", "src"), args), **kwargs)
        if "value" in bound:
            bound["src"] = bound.pop("value")
        if builtins.set(bound) != {"input", "dim", "index", "src"}:
            raise FusionError(f"torch.scatter on traced tensors: takes (input, dim, index, src or value), got "
                              f"{sorted(bound)}")
        args, kwargs = (bound["input"], bound["index"], bound["src"], bound["dim"]), {}
    elif name == "pad":
        mode = kwargs.pop("mode", "constant")
        if len(args) > 2:
            mode, args = args[2], args[:2] + args[3:]
        if mode != "constant":
            raise FusionError(f"torch.nn.functional.pad on traced tensors: mode {mode!r} is not supported "
                              "(only 'constant')")
    return args, kwargs


Tensor.__torch_function__ = classmethod(_torch_function)  # type: ignore[attr-defined]
