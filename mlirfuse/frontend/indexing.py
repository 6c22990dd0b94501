"""Indexing ops: `iota`, `slice`, `cat`, `pad` and `gather` (fusion ops, lowered to loops that
read their operands at computed indices), and what torch and nvFuser build from them:
`arange`, `full`/`zeros`/`ones`, `select`, `index_select`, `take_along_axis`, `triu`/`tril`,
`masked_fill`, `argmax`/`argmin`, `scatter` and the scans (`cumsum`, `cumprod`, `cummax`,
`cummin`).

Sizes follow the frontend's symbolic rule (a dynamic size is a product of input extents):
an op whose result size would be a sum or difference of dynamic sizes (a slice that cuts a
dynamic dim, a cat or pad along one) needs concrete sizes and raises `ConcreteSizeNeeded`,
on which `mlirfuse.jit` retraces with static shapes. Indices read from tensors (`gather`,
`index_select`) must be in range, as torch requires; negative ones count from the end and
the kernels clamp any other into range, so that no index reads outside a tensor.
"""

from __future__ import annotations

import builtins
import logging
import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from mlirfuse.dtypes import DataType, result_type, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend import ops as O
from mlirfuse.frontend.graph import Tensor, static_numel
from mlirfuse.frontend.symbolic import ConcreteSizeNeeded, Size, SymSize

log = logging.getLogger("mlirfuse.fuser")

Operand = Any  # Tensor | bool | int | float
_BIG = 2 ** 62  # an index past any tensor


def _tensor(x: Any, what: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise FusionError(f"{what}: expected a tensor, got {x!r}")
    return x


def _add(a: Size, b: Size, what: str) -> Size:
    """a + b where one is static (a dynamic size plus a constant); two dynamic sizes do not
    add up to a size the fusion can express."""
    if isinstance(a, SymSize) and isinstance(b, SymSize):
        raise ConcreteSizeNeeded(f"{what}: the result size would be the sum of the dynamic sizes {a} and {b}; "
                                 "define the tensors with static sizes")
    return a + b


def _int_arg(value: Any, what: str) -> int:
    """An int argument: a Python int, or an integer 0-d tensor computed from constants (nvFuser's
    scalar arithmetic). One held in a runtime scalar raises `ConcreteSizeNeeded`: a
    FusionDefinition then traces again per value of the scalars it depends on."""
    if isinstance(value, Tensor) and value.ndim == 0 and not value.dtype.is_float:
        folded = O.fold(value)
        if folded is None:
            raise ConcreteSizeNeeded(f"{what}: the runtime scalar {value!r} used as a bound needs its value")
        value = int(folded)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FusionError(f"{what}: expected an int, got {value!r}")
    return value


def _bound(value: Any, what: str) -> Any:
    """A slice bound: None, a size (int or symbolic) or an int scalar (see `_int_arg`)."""
    return value if value is None or isinstance(value, (int, SymSize)) else _int_arg(value, what)


# -- iota, arange, full ------------------------------------------------------------------
def _iota(shape: Sequence[Size], dim: int, start: Any, step: Any, dtype: DataType, fusion: Any) -> Tensor:
    """start + step * (index along `dim`), over `shape`."""
    if dtype.is_bool:
        raise FusionError("iota: a bool result is not supported")
    cast = float if dtype.is_float else int
    return fusion.add_node("iota", [], {"dim": dim, "start": cast(start), "step": cast(step)},
                           [(dtype, tuple(shape))])[0]


def iota(length: Size, start: int | float | None = 0, step: int | float | None = 1,
         dtype: Any = DataType.Int) -> Tensor:
    """nvFuser's `iota(length, start, step, dtype)`: the 1-D tensor start + step * i (start
    None: 0; step None: 1)."""
    fusion = O._fusion_of([length, start, step], "iota")
    length, start, step = (O.fold(v) if isinstance(v, Tensor) and O.fold(v) is not None else v
                           for v in (length, start, step))
    if any(isinstance(v, Tensor) for v in (length, start, step)):
        raise ConcreteSizeNeeded("iota: a length, start or step held in a runtime scalar needs its value")
    start, step = 0 if start is None else start, 1 if step is None else step
    if isinstance(length, int) and length < 0:
        raise FusionError(f"iota: negative length {length}")
    if not all(math.isfinite(v) for v in (start, step)):
        raise FusionError(f"iota: start {start} and step {step} must be finite numbers")
    if step == 0:
        raise FusionError("iota: the step value must not equal zero")
    return _iota((length,), 0, start, step, to_dtype(dtype), fusion)


def arange(start: int | float, end: int | float | None = None, step: int | float = 1, dtype: Any = None) -> Tensor:
    """torch.arange: [start, end) by step (int64 for int bounds, else float32)."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise FusionError("arange: step must not be zero")
    all_int = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end, step))
    dt = to_dtype(dtype) if dtype is not None else DataType.Int if all_int else DataType.Float
    length = -(-(end - start) // step) if all_int else math.ceil((end - start) / step)
    return iota(builtins.max(0, int(length)), start, step, dt)


def full(shape: Sequence[Size], fill_value: Operand, dtype: Any = None) -> Tensor:
    """nvFuser's / torch's `full(shape, fill_value, dtype)`."""
    fusion = O._fusion_of([fill_value], "full")
    dt = to_dtype(dtype) if dtype is not None else O._dtype_priority(fill_value, "full")[0]
    value = O.cast(fill_value, dt) if isinstance(fill_value, Tensor) else O.constant(fill_value, dt, fusion)
    shape = O._sizes_arg(shape, "full")
    return O.expand(value, shape) if shape else O.as_tensor(value)


def zeros(shape: Sequence[Size], dtype: Any = DataType.Float) -> Tensor:
    return full(shape, 0, dtype)


def ones(shape: Sequence[Size], dtype: Any = DataType.Float) -> Tensor:
    return full(shape, 1, dtype)


# -- slice, select -----------------------------------------------------------------------
def _normalized(start: Any, end: Any, step: int, size: Size, fusion: Any, what: str) -> tuple[int, Size]:
    """(first index, length) of Python's `range(size)[start:end:step]` (step > 0). Of a dynamic
    size: a constant start from the front, an end from the back (x[:, 1:], x[:, :-1]), step
    1; the size is then checked at every call to hold the slice, and a call it does not hold
    traced again with its static sizes (Python clamps: x[3:] of 2 rows is empty)."""
    if isinstance(size, int):
        r = range(size)[builtins.slice(start, end, step)]
        return (r.start if len(r) else 0), len(r)
    first = 0 if start is None else start
    back = 0 if end is None or end is size or (isinstance(end, int) and end >= _BIG) else end
    if step == 1 and isinstance(first, int) and first >= 0 and isinstance(back, int) and back <= 0:
        fusion.require_at_least(size, first - back, f"{what} [{start}:{end}] has a negative length", clamps=True)
        return first, size - (first - back)
    raise ConcreteSizeNeeded(f"{what}: slicing [{start}:{end}:{step}] of the dynamic size {size}; "
                             "define the tensor with static sizes")


def _slice(x: Tensor, starts: Sequence[int], steps: Sequence[int], shape: Sequence[Size]) -> Tensor:
    if tuple(shape) == x.shape and all(s == 0 for s in starts) and all(s == 1 for s in steps):
        return x
    return x.fusion.add_node("slice", [x], {"starts": list(starts), "steps": list(steps)},
                             [(x.dtype, tuple(shape))])[0]


def slice(x: Tensor, start_indices: Sequence[int], end_indices: Sequence[int] | None = None,  # noqa: A001
          strides: Sequence[int] | None = None) -> Tensor:
    """nvFuser's `slice(x, start_indices, end_indices, strides)`: Python slicing per dim
    (negative bounds count from the end, bounds clamp to the size); strides > 0."""
    what = "slice"
    x = _tensor(x, what)
    n = x.ndim
    ends = list(end_indices) if end_indices is not None else [None] * n
    steps = list(strides) if strides is not None else [1] * n
    if not (len(start_indices) == len(ends) == len(steps) == n):
        raise FusionError(f"{what}: needs {n} starts, ends and strides for a tensor of rank {n}, got "
                          f"{list(start_indices)}, {ends}, {steps}")
    firsts, shape = [], []
    steps = [_int_arg(st, what) if isinstance(st, Tensor) else st for st in steps]
    for d, (s, e, st) in enumerate(zip(start_indices, ends, steps)):
        if not isinstance(st, int) or st <= 0:
            raise FusionError(f"{what}: stride {st!r} of dim {d} must be a positive int")
        first, length = _normalized(_bound(s, what), _bound(e, what), st, x.shape[d], x.fusion, what)
        firsts.append(first)
        shape.append(length)
    return _slice(x, firsts, steps, shape)


def slice_dim(x: Tensor, dim: int, start: int | None, end: Any, step: int = 1) -> Tensor:
    """x[..., start:end:step, ...] along one dim (torch's `aten.slice`)."""
    what = "slice"
    x = _tensor(x, what)
    d = O.normalize_dim(dim, x.ndim, what)
    if not isinstance(step, int) or step <= 0:
        raise FusionError(f"{what}: step {step!r} must be a positive int")
    first, length = _normalized(start, end, step, x.shape[d], x.fusion, what)
    starts, steps, shape = [0] * x.ndim, [1] * x.ndim, list(x.shape)
    starts[d], steps[d], shape[d] = first, step, length
    return _slice(x, starts, steps, shape)


def slice_length(x: Tensor, dim: int, start: int, step: int, length: Size) -> Tensor:
    """`length` elements of `dim` from `start` by `step` (torch's slice once its bounds are
    resolved: the torch backend takes the length from the graph's metadata). A static length
    is checked against a static dim; a dynamic one is clamped into the dim by the kernel."""
    what = "slice"
    d = O.normalize_dim(dim, x.ndim, what)
    size = x.shape[d]
    if start < 0 or step <= 0:
        raise FusionError(f"{what}: start {start} and step {step} must be >= 0 and > 0")
    if isinstance(size, int) and isinstance(length, int) and length > 0 and start + (length - 1) * step >= size:
        raise FusionError(f"{what}: {length} elements from {start} by {step} exceed dim {d} of size {size}")
    starts, steps, shape = [0] * x.ndim, [1] * x.ndim, list(x.shape)
    starts[d], steps[d], shape[d] = start, step, length
    return _slice(x, starts, steps, shape)


def pin_sizes(x: Tensor, sizes: Sequence[Size], what: str) -> None:
    """Tie x's sizes to `sizes` known elsewhere (the torch graph's metadata): a runtime check
    where they are symbolic, after which the fusion uses the known (e.g. static) sizes."""
    if len(sizes) != x.ndim:
        raise FusionError(f"{what}: {len(sizes)} known sizes for a tensor of rank {x.ndim}")
    for have, known in zip(x.shape, sizes):
        x.fusion.unify(have, known, what)


def iota_like(x: Tensor, dim: int) -> Tensor:
    """The index along `dim` of every element of x (int64, x's shape)."""
    return _positions(x, O.normalize_dim(dim, x.ndim, "iota_like"))


def select(x: Tensor, index: Operand, dim: int) -> Tensor:
    """nvFuser's `select(x, index, dim)`: the slice at `index` along `dim`, that dim dropped.
    An int index may be negative (from the end); a 0-d integer tensor index is read at run time."""
    what = "select"
    x = _tensor(x, what)
    d = O.normalize_dim(dim, x.ndim, what)
    if isinstance(index, Tensor):
        if index.ndim != 0:
            raise FusionError(f"{what}: a tensor index must be 0-d, got shape {O._fmt(index.shape)}")
        return O.squeeze(index_select(x, O.unsqueeze(index, 0), d), [d])
    i = _int_arg(index, what)
    size = x.shape[d]
    if isinstance(size, int):
        if not -size <= i < size:
            raise FusionError(f"{what}: index {i} out of range for dim {d} of size {size}")
        i %= size
    elif i < 0:
        raise ConcreteSizeNeeded(f"{what}: a negative index of the dynamic size {size}")
    else:
        x.fusion.require_at_least(size, i + 1, f"{what} of index {i} in dim {d} is out of range")
    starts, steps, shape = [0] * x.ndim, [1] * x.ndim, list(x.shape)
    starts[d], shape[d] = i, 1
    return O.squeeze(x.fusion.add_node("slice", [x], {"starts": starts, "steps": steps},
                                       [(x.dtype, tuple(shape))])[0], [d])


# -- cat, pad ----------------------------------------------------------------------------
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """torch.cat / nvFuser's `cat(tensors, dim)`: dtypes promote as torch's; the other dims
    must agree."""
    what = "cat"
    tensors = [_tensor(t, what) for t in tensors]
    if not tensors:
        raise FusionError(f"{what}: needs at least one tensor")
    rank = tensors[0].ndim
    if rank == 0:
        raise FusionError(f"{what}: 0-d tensors cannot be concatenated")
    if any(t.ndim != rank for t in tensors):
        raise FusionError(f"{what}: tensors of different ranks {[t.ndim for t in tensors]}")
    d = O.normalize_dim(dim, rank, what)
    dtype = result_type([(t.dtype, t.priority) for t in tensors])
    fusion = O._fusion_of(tensors, what)
    tensors = [O.cast(t, dtype) for t in tensors]
    shape = list(tensors[0].shape)
    for t in tensors[1:]:
        for i in range(rank):
            if i != d:
                try:
                    shape[i] = fusion.unify(shape[i], t.shape[i], what)
                except FusionError:
                    raise FusionError(f"{what}: shapes {[O._fmt(u.shape) for u in tensors]} differ "
                                      f"in dim {i}") from None
    kept = [t for t in tensors if t.shape[d] != 0]
    if len(kept) <= 1:
        return kept[0] if kept else tensors[0]
    result = kept[0]
    for t in kept[1:]:  # binary fusion.cat ops (see the op table)
        shape[d] = _add(fusion.canonical(result.shape[d]), fusion.canonical(t.shape[d]), what)
        result = fusion.add_node(what, [result, t], {"dim": d}, [(dtype, tuple(shape))])[0]
    return result


def pad(x: Tensor, pad_widths: Sequence[int], value: Operand = None) -> Tensor:
    """torch.nn.functional.pad (constant) / nvFuser's `pad(x, pad_widths, value)`: pad_widths
    are (low, high) pairs from the last dim backwards; negative widths crop."""
    what = "pad"
    x = _tensor(x, what)
    widths = [_int_arg(w, what) for w in pad_widths]
    if len(widths) % 2 or len(widths) > 2 * x.ndim:
        raise FusionError(f"{what}: {len(widths)} pad widths for a tensor of rank {x.ndim} "
                          "(need (low, high) pairs, at most one per dim)")
    low, high = [0] * x.ndim, [0] * x.ndim
    for k in range(len(widths) // 2):
        low[x.ndim - 1 - k], high[x.ndim - 1 - k] = widths[2 * k], widths[2 * k + 1]
    shape = []
    for d, size in enumerate(x.shape):
        if low[d] == high[d] == 0:
            shape.append(size)
            continue
        n = x.fusion.canonical(size) + (low[d] + high[d])
        if isinstance(n, int) and n < 0:
            raise FusionError(f"{what}: widths {widths} make dim {d} of size {size} negative")
        if isinstance(n, SymSize):  # cropping more than a dynamic size holds: checked per call
            x.fusion.require_at_least(size, -min(low[d], 0) - min(high[d], 0),
                                       f"{what}: widths {widths} make dim {d} negative")
        shape.append(n)
    fill = O._materialize(0 if value is None else value, x.dtype, x.fusion)
    if all(w == 0 for w in widths):
        return x
    return x.fusion.add_node(what, [x, fill], {"low": low, "high": high}, [(x.dtype, tuple(shape))])[0]


# -- gather and its kin ------------------------------------------------------------------
def _index_tensor(index: Any, what: str) -> Tensor:
    index = _tensor(index, what)
    if not index.dtype.is_int:
        raise FusionError(f"{what}: index must be an integer tensor, got {index.dtype.value}")
    return index


def torch_indices(index: Tensor) -> Tensor:
    """Indices as torch's gather, index_select and embedding take them, in [0, size) (negative
    ones count from the end only in advanced indexing), for the fusion's gather, which reads
    [-size, size) as numpy's take_along_axis: a negative index becomes the dtype's minimum,
    outside both, so that the gather's check fails as eager raises."""
    lowest = -(1 << (8 * index.dtype.itemsize - 1)) if index.dtype.is_int else 0
    return O.where(O.lt(index, 0), lowest, index)


def gather(x: Tensor, index: Tensor, dim: int) -> Tensor:
    """torch.gather / nvFuser's `gather(x, index, dim)`: result[i] = x[i with i[dim] = index[i]],
    shaped like index (of x's rank; index.size(d) <= x.size(d) for d != dim)."""
    what = "gather"
    x, index = _tensor(x, what), _index_tensor(index, what)
    if index.ndim != x.ndim:
        raise FusionError(f"{what}: index of rank {index.ndim} for an input of rank {x.ndim}")
    if x.ndim == 0:  # torch's: a 0-d input is one element along dim 0 (or -1)
        O.normalize_dim(dim, 1, what)
        return O.reshape(gather(O.reshape(x, [1]), O.reshape(index, [1]), 0), [])
    d = O.normalize_dim(dim, x.ndim, what)
    for i, (a, b) in enumerate(zip(index.shape, x.shape)):
        if i != d and isinstance(a, int) and isinstance(b, int) and a > b:
            raise FusionError(f"{what}: index shape {O._fmt(index.shape)} exceeds the input's "
                              f"{O._fmt(x.shape)} in dim {i}")
    if x.shape[d] == 0 and static_numel(index.shape) != 0:
        raise FusionError(f"{what}: indexing dim {d} of size 0")
    return x.fusion.add_node(what, [x, index], {"dim": d}, [(x.dtype, index.shape)])[0]


def take_along_axis(x: Tensor, index: Tensor, dim: int) -> Tensor:
    """nvFuser's / numpy's `take_along_axis`: gather with index and input broadcast together
    in every dim but `dim`."""
    what = "take_along_axis"
    x, index = _tensor(x, what), _index_tensor(index, what)
    if index.ndim != x.ndim:
        raise FusionError(f"{what}: index of rank {index.ndim} for an input of rank {x.ndim}")
    d = O.normalize_dim(dim, x.ndim, what)
    others = O.broadcast_shapes([tuple(1 if i == d else s for i, s in enumerate(t.shape)) for t in (x, index)],
                                x.fusion, what)
    x = O.expand(x, [x.shape[d] if i == d else s for i, s in enumerate(others)])
    index = O.expand(index, [index.shape[d] if i == d else s for i, s in enumerate(others)])
    return gather(x, index, d)


def index_select(x: Tensor, index: Tensor, dim: int) -> Tensor:
    """torch.index_select / nvFuser's `index_select(x, index, dim)`: the entries of 1-D
    `index` along `dim`."""
    what = "index_select"
    x, index = _tensor(x, what), _index_tensor(index, what)
    if index.ndim > 1:
        raise FusionError(f"{what}: index must be 1-D, got shape {O._fmt(index.shape)}")
    if x.ndim == 0:  # torch's: a 0-d input is one element, and so is the result (0-d)
        O.normalize_dim(dim, 1, what)
        if index.ndim == 1 and isinstance(index.shape[0], int) and index.shape[0] != 1:
            raise FusionError(f"{what}: index of {index.shape[0]} entries for a 0-d input")
        return O.reshape(gather(O.reshape(x, [1]), O.reshape(index, [1]), 0), [])
    d = O.normalize_dim(dim, x.ndim, what)
    if index.ndim == 0:
        index = O.unsqueeze(index, 0)
    shape = list(x.shape)
    shape[d] = index.shape[0]
    return gather(x, O.broadcast_in_dim(index, shape, [d]), d)


def scatter(x: Tensor, index: Tensor, src: Operand, dim: int) -> Tensor:
    """torch.scatter / nvFuser's `scatter(x, index, src, dim)`: x with x[i with i[dim] =
    index[i]] = src[i] for every position i of index (index.size(d) <= src.size(d), and <=
    x.size(d) for d != dim; src may be a number). Of several writes to one place the last
    along `dim` wins (torch's CPU order); indices outside [0, x.size(dim)) write nothing
    (torch raises). Computed as a gather: each result element finds the last index entry
    that names it, so the work is x.size(dim) * index.size(dim) per row."""
    what = "scatter"
    x, index = _tensor(x, what), _index_tensor(index, what)
    if index.ndim != x.ndim:
        raise FusionError(f"{what}: index of rank {index.ndim} for an input of rank {x.ndim}")
    d = O.normalize_dim(dim, x.ndim, what)
    if not isinstance(src, Tensor):
        src = O.expand(O._materialize(src, x.dtype, x.fusion), list(index.shape))
    if src.ndim != x.ndim or src.dtype != x.dtype:
        raise FusionError(f"{what}: src must be a {x.dtype.value} tensor of rank {x.ndim}, got a "
                          f"{src.dtype.value} tensor of rank {src.ndim}")
    widths: list[int] = []  # pads index-shaped results up to x's extents, last dim first
    for i in reversed(range(x.ndim)):
        ext, have, room = x.fusion.canonical(index.shape[i]), x.fusion.canonical(x.shape[i]), src.shape[i]
        if isinstance(ext, int) and isinstance(room, int) and ext > room:
            raise FusionError(f"{what}: index shape {O._fmt(index.shape)} exceeds src's {O._fmt(src.shape)} in dim {i}")
        if i == d or ext == have:
            widths += [0, 0]
        elif isinstance(ext, int) and isinstance(have, int):
            if ext > have:
                raise FusionError(f"{what}: index shape {O._fmt(index.shape)} exceeds the input's "
                                  f"{O._fmt(x.shape)} in dim {i}")
            widths += [0, have - ext]
        else:
            raise ConcreteSizeNeeded(f"{what}: index dim {i} ({ext}) and the input's ({have}) are different "
                                     "dynamic sizes; define them with static sizes")
    pairs = list(index.shape[:d]) + [x.shape[d], index.shape[d]] + list(index.shape[d + 1:])  # (.., c, k, ..)
    names = O.eq(O.expand(O.unsqueeze(O.cast(index, DataType.Int), d), pairs),
                 _iota(pairs, d, 0, 1, DataType.Int, x.fusion))
    last = O.max(O.where(names, _iota(pairs, d + 1, 0, 1, DataType.Int, x.fusion), -1), [d + 1])
    # torch's gradient of src is g.gather(dim, index): every write, colliding ones included,
    # gets the gradient at its place, though only the last one lands. So the value is the
    # last write's, and its gradient that of the sum of all writes to the place (no kernel
    # computes that sum: fusion-dce drops it after autodiff).
    value = gather(src, O.maximum(last, 0), d)
    if src.dtype.is_float:
        canonical = x.fusion.canonical
        if [canonical(e) for e in src.shape] != [canonical(e) for e in index.shape]:
            src = slice(src, [0] * src.ndim, list(index.shape))
        writes = O.sum(O.where(names, O.expand(O.unsqueeze(src, d), pairs), 0), [d + 1])
        value = O.straight_through(value, O.cast(writes, value.dtype))
    if any(widths):
        last, value = pad(last, widths, -1), pad(value, widths, 0)
    return O.where(O.ge(last, 0), value, x)


# -- masks -------------------------------------------------------------------------------
def _positions(x: Tensor, dim: int) -> Tensor:
    return _iota(x.shape, dim, 0, 1, DataType.Int, x.fusion)


def _band(x: Tensor, diagonal: int, upper: bool, what: str) -> Tensor:
    x = _tensor(x, what)
    if x.ndim < 2:
        raise FusionError(f"{what}: needs a tensor of rank >= 2, got shape {O._fmt(x.shape)}")
    offset = O.sub(_positions(x, x.ndim - 1), _positions(x, x.ndim - 2))
    keep = O.ge(offset, _int_arg(diagonal, what)) if upper else O.le(offset, diagonal)
    return O.where(keep, x, O.cast(0, x.dtype))


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """torch.triu: entries on and above the `diagonal`-th diagonal of the last two dims."""
    return _band(x, diagonal, True, "triu")


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """torch.tril: entries on and below the `diagonal`-th diagonal of the last two dims."""
    return _band(x, diagonal, False, "tril")


def masked_fill(x: Tensor, mask: Tensor, value: Operand) -> Tensor:
    """torch.masked_fill: `value` (cast to x's dtype) where mask is true."""
    x = _tensor(x, "masked_fill")
    if not isinstance(mask, Tensor) or not mask.dtype.is_bool:
        raise FusionError(f"masked_fill: mask must be a bool tensor, got {mask!r}")
    return O.where(mask, O._materialize(value, x.dtype, x.fusion), x)


# -- argmax, argmin, cumsum --------------------------------------------------------------
def _nonempty(x: Tensor, d: int, name: str) -> None:
    """An index of the extreme along an empty dim does not exist: an error, as torch's (checked
    at every call for a dynamic dim: the index was INT64_MAX, and x.max(dim)'s values were
    gathered there, out of bounds)."""
    size = x.fusion.canonical(x.shape[d])
    what = f"{name}: dim {d} is empty (torch: Expected reduction dim {d} to have non-zero size)"
    if isinstance(size, int) and size == 0:
        raise FusionError(what)
    x.fusion.require_at_least(size, 1, what)


def _arg_extreme(x: Tensor, dim: int | None, keepdim: bool, name: str) -> Tensor:
    x = _tensor(x, name)
    if dim is None:
        flat = O.reshape(x, [-1]) if x.ndim != 1 else x
        result = _arg_extreme(flat, 0, False, name)
        return O.reshape(result, [1] * x.ndim) if keepdim else result
    if x.ndim == 0:
        return O.cast(0, DataType.Int)
    d = O.normalize_dim(dim, x.ndim, name)
    _nonempty(x, d, name)
    best = (O.max if name == "argmax" else O.min)(x, [d], keepdim=True)
    hit = O.eq(x, best)
    if x.dtype.is_float:  # NaN is the extreme (max and min propagate it), as in torch
        hit = O.logical_or(hit, O.isnan(x))
    first = O.where(hit, _positions(x, d), O.cast(_BIG, DataType.Int))
    return O.min(first, [d], keepdim=keepdim)


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """torch.argmax: the index of the first maximum along `dim` (NaN counts as the maximum)."""
    return _arg_extreme(x, dim, keepdim, "argmax")


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """torch.argmin: the index of the first minimum along `dim` (NaN counts as the minimum)."""
    return _arg_extreme(x, dim, keepdim, "argmin")


# The longest dim a fused scan covers (its work grows with the square of the length).
FUSED_SCAN_LIMIT = 256


def _scan(x: Tensor, dim: int, what: str, dtype: Any = None) -> Tensor:
    """An inclusive scan as a masked reduction: result[i] = op(x[j] for j <= i) along `dim`,
    the other x[j] replaced by the op's identity. The work is quadratic in the dim's length
    (no scan schedule yet): fine for masks, position ids and short rows, not for long ones.
    A scan over a dim longer than FUSED_SCAN_LIMIT, or of a length not known when traced, is
    left to the library (`fusion.cumsum`, `fusion.cumprod`, `fusion.cummax`, `fusion.cummin`:
    numpy or torch, linear work), the reason logged. The torch backend leaves aten's scans
    to torch."""
    x = _tensor(x, what)
    if dtype is not None:
        x = O.cast(x, dtype)
    elif what in ("cumsum", "cumprod") and not x.dtype.is_float:
        x = O.cast(x, DataType.Int)  # torch: integer and bool sums and products are int64
    if x.ndim == 0:
        return x
    d = O.normalize_dim(dim, x.ndim, what)
    n = x.fusion.canonical(x.shape[d])
    if not (isinstance(n, int) and n <= FUSED_SCAN_LIMIT):
        log.info("%s over dim %d of length %s: left to the library (numpy or torch): no schedule scans, "
                 "and the fused form (a masked reduction) is quadratic in the length beyond %d",
                 what, d, n, FUSED_SCAN_LIMIT)
        return cumsum_library(x, d) if what == "cumsum" else scan_library(x, d, what)
    square = list(x.shape[:d]) + [n] + list(x.shape[d:])  # (.., i, j, ..)
    xj = O.expand(O.unsqueeze(x, d), square)
    below = O.le(_iota(square, d + 1, 0, 1, DataType.Int, x.fusion), _iota(square, d, 0, 1, DataType.Int, x.fusion))
    reduce, identity = _SCANS[what]
    return reduce(O.where(below, xj, O.cast(identity(x.dtype), x.dtype)), [d + 1])


def cumsum_library(x: Tensor, dim: int, reverse: bool = False) -> Tensor:
    """`fusion.cumsum`: the inclusive sum along `dim` (from the end where `reverse`), in x's
    dtype, run by the library (numpy on the CPU, torch for torch tensors; half precision
    summed in float32); fusion groups form around it."""
    x = _tensor(x, "cumsum")
    d = O.normalize_dim(dim, x.ndim, "cumsum")
    return x.fusion.add_node("cumsum", [x], {"dim": d, "reverse": bool(reverse)}, [(x.dtype, x.shape)])[0]


def scan_library(x: Tensor, dim: int, what: str) -> Tensor:
    """`fusion.cumprod`, `fusion.cummax` or `fusion.cummin` along `dim`, in x's dtype, run by
    the library (numpy on the CPU, torch for torch tensors; half precision in float32)."""
    if what not in ("cumprod", "cummax", "cummin"):
        raise FusionError(f"scan_library: {what!r} is not cumprod, cummax or cummin")
    x = _tensor(x, what)
    d = O.normalize_dim(dim, x.ndim, what)
    return x.fusion.add_node(what, [x], {"dim": d}, [(x.dtype, x.shape)])[0]


def scan_grad_library(what: str, g: Tensor, x: Tensor, y: Tensor, dim: int, **attrs: Any) -> Tensor:
    """The library gradient of y = cumprod(x) (`cumprod_grad`) or cummax/cummin(x)
    (`cummaxmin_grad`, attribute `max`) along `dim`, given the cotangent g."""
    g, x, y = (_tensor(t, what) for t in (g, x, y))
    d = O.normalize_dim(dim, x.ndim, what)
    return x.fusion.add_node(what, [g, x, y], {"dim": d, **attrs}, [(g.dtype, g.shape)])[0]


def _lowest(dt: DataType) -> Any:
    return False if dt.is_bool else -math.inf if dt.is_float else int(np.iinfo(dt.np).min)


def _highest(dt: DataType) -> Any:
    return True if dt.is_bool else math.inf if dt.is_float else int(np.iinfo(dt.np).max)


_SCANS: dict[str, tuple[Callable, Callable]] = {
    "cumsum": (O.sum, lambda dt: 0), "cumprod": (O.prod, lambda dt: 1),
    "cummax": (O.max, _lowest), "cummin": (O.min, _highest),
}


def cumsum(x: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """torch.cumsum: result[i] = sum(x[j] for j <= i) along `dim` (integers and bools give int64)."""
    return _scan(x, dim, "cumsum", dtype)


def cumprod(x: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """torch.cumprod: result[i] = prod(x[j] for j <= i) along `dim` (integers and bools give int64)."""
    return _scan(x, dim, "cumprod", dtype)


def cummax(x: Tensor, dim: int) -> Tensor:
    """The running maximum along `dim` (NaN, once met, stays): torch.cummax's values (nvFuser's
    `cummax` gives the values alone; torch's indices are not computed)."""
    return _scan(x, dim, "cummax")


def cummin(x: Tensor, dim: int) -> Tensor:
    """The running minimum along `dim` (NaN, once met, stays): torch.cummin's values."""
    return _scan(x, dim, "cummin")


__all__ = INDEXING_NAMES = ["iota", "arange", "full", "zeros", "ones", "slice", "slice_dim", "select", "cat", "pad",
                            "gather", "take_along_axis", "index_select", "scatter", "triu", "tril", "masked_fill",
                            "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin",
                            "cumsum_library", "scan_library", "scan_grad_library"]


def getitem(x: Tensor, key: Any) -> Tensor:
    """Basic indexing, as torch's: ints (select), slices (positive steps), None (a new dim)
    and one Ellipsis. Tensor indices (advanced indexing) are not supported: use gather or
    index_select."""
    what = "getitem"
    key = key if isinstance(key, tuple) else (key,)
    if builtins.sum(k is Ellipsis for k in key) > 1:
        raise FusionError(f"{what}: more than one Ellipsis in {key!r}")
    used = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > x.ndim:
        raise FusionError(f"{what}: {used} indices for a tensor of rank {x.ndim}")
    at = next((i for i, k in enumerate(key) if k is Ellipsis), None)  # `in` would trace tensor == ...
    if at is not None:
        key = key[:at] + (builtins.slice(None),) * (x.ndim - used) + key[at + 1:]
    d = 0
    for k in key:
        if k is None:
            x = O.unsqueeze(x, d)
            d += 1
        elif isinstance(k, builtins.slice):
            x = slice_dim(x, d, k.start, k.stop, 1 if k.step is None else k.step)
            d += 1
        elif isinstance(k, int) and not isinstance(k, bool):
            x = select(x, k, d)
        else:
            raise FusionError(f"{what}: unsupported index {k!r} (ints, slices, None and ... are; "
                              "for tensor indices use gather or index_select)")
    return x


class MinMax(NamedTuple):
    """torch.return_types.max / min: what x.max(dim) and x.min(dim) return."""
    values: Tensor
    indices: Tensor


def _extreme_method(name: str) -> Callable[..., Any]:
    reduce, arg, pairwise = (O.max, argmax, O.maximum) if name == "max" else (O.min, argmin, O.minimum)

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        """torch's spellings: x.max() the maximum; x.max(dim, keepdim=False) the named pair
        (values, indices) (so x.max(-1)[0] is the values, as in torch); x.max(other) the
        elementwise maximum. numpy's keywords (axis=, keepdims=) and lists of axes give the
        values alone, as ndarray.max and mlirfuse.ops.max do."""
        if len(args) == 1 and not kwargs and isinstance(args[0], Tensor):
            return pairwise(self, args[0])
        dim = args[0] if args else kwargs.get("dim")
        numpy_style = {"axis", "keepdims", "axes", "dims"} & kwargs.keys()
        if not isinstance(dim, int) or isinstance(dim, bool) or numpy_style:
            return reduce(self, *args, **kwargs)
        if len(args) > 2 or set(kwargs) - {"dim", "keepdim"}:
            raise FusionError(f"x.{name}(dim, keepdim=False): unexpected arguments {args[2:]} {kwargs}")
        keepdim = bool(args[1] if len(args) > 1 else kwargs.get("keepdim", False))
        # the values gathered at the indices: their gradient goes to that element alone,
        # as torch's (a reduction's is shared among tied extremes)
        indices = arg(self, dim, True)
        values = gather(self, indices, dim)
        if not keepdim:
            indices, values = O.squeeze(indices, [dim]), O.squeeze(values, [dim])
        return MinMax(values, indices)
    method.__name__ = name
    return method


def _split(x: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """torch's x.split(size, dim) (pieces of `size`, the last shorter) and x.split([sizes], dim);
    the dim's size must be known (a dynamic one specializes the signature)."""
    what = "split"
    d = O.normalize_dim(dim, x.ndim, what)
    n = int(x.fusion.canonical(x.shape[d]))
    if isinstance(split_size_or_sections, int) and not isinstance(split_size_or_sections, bool):
        size = split_size_or_sections
        if size < 0 or size == 0 and n:
            raise FusionError(f"{what}: split_size {size} must be positive")
        sizes = [builtins.min(size, n - s) for s in range(0, n, size)] if n else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise FusionError(f"{what}: sizes {sizes} must be non-negative and sum to dim {d}'s size {n}")
    pieces, start = [], 0
    for s in sizes:
        pieces.append(slice_dim(x, d, start, start + s))
        start += s
    return tuple(pieces)


def _chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """torch's x.chunk(chunks, dim): pieces of ceil(size / chunks) (fewer pieces where they run out)."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks <= 0:
        raise FusionError(f"chunk: chunks must be a positive int, got {chunks!r}")
    d = O.normalize_dim(dim, x.ndim, "chunk")
    n = int(x.fusion.canonical(x.shape[d]))
    return _split(x, -(-n // chunks) if n else 0, d)


def attach_tensor_methods() -> None:
    """torch's spellings: x.gather(dim, index), x.index_select(dim, index), x.masked_fill(mask,
    value), x.triu(diagonal), x.argmax(dim, keepdim), x.cumsum(dim), x.cumprod(dim), x.max(dim) / x.min(dim)
    (values and indices), x.split(size or sizes, dim), x.chunk(chunks, dim)."""
    Tensor.split = _split
    Tensor.chunk = _chunk
    Tensor.max = _extreme_method("max")
    Tensor.min = _extreme_method("min")
    Tensor.gather = lambda self, dim, index: gather(self, index, dim)
    Tensor.index_select = lambda self, dim, index: index_select(self, index, dim)
    Tensor.select = lambda self, dim, index: select(self, index, dim)
    Tensor.__getitem__ = getitem
    for name in ("triu", "tril", "masked_fill", "argmax", "argmin", "cumsum", "cumprod"):
        setattr(Tensor, name, globals()[name])
