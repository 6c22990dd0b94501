"""nvFuser frontend ops with no mlirfuse op of their own, built from mlirfuse ops: `fd.ops`
finds them here after `mlirfuse.frontend.ops` (they are not `mlirfuse.ops` names)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mlirfuse.dtypes import DataType, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend import indexing as I
from mlirfuse.frontend import ops as O
from mlirfuse.frontend.attention import sdpfa_bwd, sdpfa_fwd  # noqa: F401 (fd.ops names)
from mlirfuse.frontend.graph import Tensor
from mlirfuse.frontend.symbolic import product

NVFUSER_NAMES = ["div", "broadcast", "truediv", "signbit", "welford", "embedding_fwd", "normal", "segment_set", "frac",
                 "isfinite", "isneginf", "isposinf", "threshold", "addcmul", "randn_like", "real", "imag", "shape",
                 "tensor_sizes", "slice", "sdpfa_fwd", "sdpfa_bwd", "cat", "squeeze", "reshape", "at", "where",
                 "mod", "isreal"]
__all__ = NVFUSER_NAMES


def cat(tensors: Sequence[Tensor], dim: int = 0, manual_padding: bool = False) -> Tensor:
    """nvFuser's `cat(tensors, dim, manual_padding=False)`: mlirfuse's cat
    (`manual_padding` asks nvFuser to pad the inputs itself before concatenating, a lowering
    choice: no effect here)."""
    del manual_padding
    return I.cat(tensors, dim)


def _original_shape(what: str, x: Tensor, args: tuple, kwargs: dict[str, Any], last: str) -> Any:
    """The argument after nvFuser's older `original_shape` (`what(t, original_shape, last)`:
    two lists), checked against the tensor's rank; None where the call has the newer form."""
    if "original_shape" not in kwargs and not (len(args) >= 2 and not isinstance(args[1], bool)):
        return None  # (the newer squeeze's second argument is the bool squeeze_expanded)
    sizes = kwargs["original_shape"] if "original_shape" in kwargs else args[0]
    if len(sizes) != x.ndim:
        raise FusionError(f"{what}: original_shape {list(sizes)} has {len(sizes)} dims, the tensor {x.ndim}")
    return kwargs[last] if last in kwargs else args[-1]


def squeeze(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """nvFuser's `squeeze(t, dims, squeeze_expanded=False)`, and its older
    `squeeze(t, original_shape, dims)`; otherwise mlirfuse's squeeze."""
    dims = _original_shape("squeeze", x, args, kwargs, "dims")
    if dims is None:
        kwargs.pop("squeeze_expanded", None)
        dims = args[0] if args else kwargs.pop("dims", None)
    if dims is None or not isinstance(x, Tensor):
        return O.squeeze(x, dims)
    if x.ndim == 0 and list(dims):
        raise FusionError(f"squeeze: dims {list(dims)} of a 0-d tensor (nvFuser: the dims to squeeze must be <= "
                          "the number of dims of the input tensor)")
    # nvFuser's: every given dim is squeezed, so it must be 1: a dynamic one is tied to 1 (checked
    # at every call), a static one of another size is an error (torch's squeeze keeps it).
    for d in O.normalize_axes(dims, x.ndim, "squeeze"):
        size = x.fusion.canonical(x.shape[d])
        if isinstance(size, int) and size != 1:
            raise FusionError(f"squeeze: dim {d} has size {size}; only dims of size 1 can be squeezed")
        x.fusion.unify(size, 1, f"squeeze: dim {d} must have size 1")
    return O.squeeze(x, dims)


def where(condition: Any, x: Any, y: Any) -> Tensor:
    """nvFuser's `where`: the condition must be Bool, as nvFuser's and torch's (mlirfuse.ops.where
    takes numpy's truth of any dtype)."""
    if isinstance(condition, Tensor) and condition.dtype is not DataType.Bool:
        raise FusionError(f"where: the condition should be of DataType Bool, got {condition.dtype.value}")
    return O.where(condition, x, y)


def reshape(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """nvFuser's `reshape(t, new_shape)`, and its older `reshape(t, original_shape,
    new_shape)`; otherwise mlirfuse's reshape."""
    shape = _original_shape("reshape", x, args, kwargs, "new_shape")
    if shape is not None:
        return O.reshape(x, shape)
    if "new_shape" in kwargs:
        return O.reshape(x, kwargs.pop("new_shape"), **kwargs)
    return O.reshape(x, *args, **kwargs)


def broadcast(x: Tensor, is_broadcast_dim: Sequence[bool]) -> Tensor:
    """nvFuser's `broadcast(t, [bool, ...])`: a size-1 dim inserted wherever the flag is True;
    the False entries are x's dims, in order."""
    flags = [bool(f) for f in is_broadcast_dim]
    if flags.count(False) != x.ndim:
        raise FusionError(f"broadcast: {flags.count(False)} non-broadcast entries in {flags} for a tensor "
                          f"of rank {x.ndim}")
    for d, flag in enumerate(flags):
        if flag:
            x = O.unsqueeze(x, d)
    return x


def slice(x: Tensor, start_indices: Sequence[Any], end_indices: Sequence[Any] | None = None,  # noqa: A001
          strides: Sequence[Any] | None = None, manual_normalization: bool = False) -> Tensor:
    """nvFuser's `fd.ops.slice`, with its checks and their messages: one start, end and
    stride per dim, constant starts >= 0, constant ends >= their starts, strides 1 (nvFuser's
    limitation; `mlirfuse.ops.slice` takes Python's negative bounds and steps). Ends past a
    dim clamp to it (`manual_normalization` promises they need not: no effect here)."""
    starts = list(start_indices)
    ends = list(end_indices) if end_indices is not None else []
    steps = list(strides) if strides else [1] * len(starts)
    if len(starts) != len(steps):
        raise FusionError(f"Slice start_indices and strides don't match! Start Indices: {len(starts)} "
                          f"Strides: {len(steps)}")
    if isinstance(x, Tensor) and x.ndim != len(starts):
        raise FusionError(f"Number of tensor dimensions does not match slice dimensions! Tensor-dims: {x.ndim} "
                          f"Slice-dims: {len(starts)}")
    if len(starts) != len(ends):
        raise FusionError(f"Slice indexing attribute dimensions don't match! Start Indices: {len(starts)} "
                          f"End Indices: {len(ends)}")
    for start, end, step in zip(starts, ends, steps):
        if isinstance(start, int) and start < 0:
            raise FusionError(f"Slice operation start_indices must be greater than or equal to 0. "
                              f"Start Indices: {start}")
        if isinstance(start, int) and isinstance(end, int) and end < start:
            raise FusionError(f"Slice operation end_indices must be greater than or equal to start_indices. "
                              f"Start Indices: {start} End Indices: {end}")
        if step != 1:
            raise FusionError("nvFuser Limitation: All slice operation strides must be of const size 1.")
    return I.slice(x, starts, ends, steps)


def div(a: Any, b: Any) -> Tensor:
    """nvFuser's `div`: integers divide as C does (rounded toward zero; `truediv` gives a
    float), floats as `mlirfuse.ops.div`."""
    def integral(v: Any) -> bool:
        if isinstance(v, Tensor):
            return v.dtype.is_int or v.dtype.is_bool
        return isinstance(v, int)
    if integral(a) and integral(b):
        return O.trunc_div(a, b)
    return O.div(a, b)


def truediv(a: Any, b: Any) -> Tensor:
    """Division that is true for integers too (nvFuser's `truediv`: int / int gives float)."""
    def as_float(v: Any) -> Any:
        if isinstance(v, Tensor):
            return O.cast(v, DataType.Float) if not v.dtype.is_float else v
        return float(v) if isinstance(v, (bool, int)) else v
    if not any(isinstance(v, Tensor) and v.dtype.is_float for v in (a, b)):
        a, b = as_float(a), as_float(b)
    return O.div(a, b)


def signbit(x: Tensor) -> Tensor:
    """Whether the sign bit is set: x < 0, and for floats -0.0 too (1 / -0.0 is -inf)."""
    negative = O.lt(x, 0)
    if not x.dtype.is_float:
        return negative
    return O.logical_or(negative, O.logical_and(O.eq(x, 0), O.lt(O.reciprocal(x), 0)))


def welford(x: Tensor, axes: Any) -> tuple[Tensor, Tensor, Tensor]:
    """nvFuser's `welford(t, dims)`: (mean, sum of squared deviations from it, element count),
    the count an int64 tensor of the mean's shape."""
    dims = [O.normalize_dim(d, x.ndim, "welford") for d in ([axes] if isinstance(axes, int) else axes)]
    mean = O.mean(x, dims, keepdim=True)
    var_sum = O.sum(O.square(O.sub(x, mean)), dims)
    avg = O.squeeze(mean, dims) if dims else mean
    count = product([x.size(d) for d in dims]) if dims else 1
    if isinstance(count, int):
        return avg, var_sum, O.full(list(avg.shape), count, DataType.Int)
    return avg, var_sum, O.sum(O.full(list(x.shape), 1, DataType.Int), dims)  # a runtime size


def embedding_fwd(indices: Tensor, weight: Tensor, padding_idx: Any = None, max_norm: Any = None,
                  norm_type: Any = None, scale_grad_by_freq: Any = None, sparse: Any = None) -> Tensor:
    """torch.nn.functional.embedding's forward: weight's rows at `indices` (shape indices.shape
    + [embedding dim]), rows whose `norm_type`-norm exceeds `max_norm` scaled down to it.
    padding_idx, scale_grad_by_freq and sparse change only the gradient. torch also renorms
    those rows of `weight` in place: here only the output is."""
    if weight.ndim != 2:
        raise FusionError(f"embedding_fwd: weight must be 2-D, got rank {weight.ndim}")
    rows = O.index_select(weight, O.reshape(I.torch_indices(indices), [-1]), 0)  # [0, rows), as torch
    if max_norm is not None:
        p = 2.0 if norm_type is None else norm_type
        compute = DataType.Double if weight.dtype is DataType.Double else DataType.Float
        norm = O.pow(O.sum(O.pow(O.abs(O.cast(rows, compute)), p), [-1], keepdim=True), O.div(1.0, p))
        scale = O.where(O.gt(norm, max_norm), O.div(max_norm, O.add(norm, 1e-7)), 1.0)
        rows = O.cast(O.mul(rows, scale), weight.dtype)
    return O.reshape(rows, list(indices.shape) + [weight.shape[1]])


def normal(mean: Any, std: Any, shape: Any, rng_seed: Any = 0, rng_offset: Any = 0,
           dtype: Any = DataType.Float) -> Tensor:
    """nvFuser's `normal(mean, std, shape, rng_seed, rng_offset, dtype)`: Gaussian numbers
    from the Philox stream `uniform` draws from (Box-Muller on a pair of its uniforms per
    element: one `uniform` of shape + [2], so no second stream is taken), computed in float32
    (float64 for a float64 result)."""
    dt = DataType.Float if dtype is None else to_dtype(dtype)
    if not dt.is_float:
        raise FusionError(f"normal: dtype must be floating point, got {dt.value}")
    compute = DataType.Double if dt is DataType.Double else DataType.Float
    sizes = O._sizes_arg(shape, "normal")
    pairs = O.uniform(0.0, 1.0, list(sizes) + [2], rng_seed, rng_offset, compute)
    u1 = O.sub(1.0, I.select(pairs, 0, len(sizes)))  # (0, 1]: its log is finite
    u2 = I.select(pairs, 1, len(sizes))
    z = O.mul(O.sqrt(O.mul(-2.0, O.log(u1))), O.cos(O.mul(2.0 * math.pi, u2)))
    return O.cast(O.add(O.mul(z, std), mean), dt)


def segment_set(x: Tensor) -> Tensor:
    """nvFuser's segmentation hint (a copy where it cuts the fusion into kernels): accepted,
    and a copy here as `set`; mlirfuse's segmenter places the kernel boundaries itself."""
    return O.set(x)


def frac(x: Tensor) -> Tensor:
    """The fractional part, x - trunc(x), with x's sign (torch.frac)."""
    return O.sub(x, O.trunc(x))


def isfinite(x: Tensor) -> Tensor:
    """Neither NaN nor infinite (always true for integers and bools)."""
    return O.logical_not(O.logical_or(O.isnan(x), O.isinf(x)))


def isreal(x: Tensor) -> Tensor:
    """torch's isreal: true everywhere for a real tensor (a complex one: where its imaginary
    part is 0)."""
    return O.expand(O.constant(True, DataType.Bool, x.fusion), list(x.shape))


def mod(a: Any, b: Any) -> Tensor:
    """nvFuser's `mod`: the remainder of truncated division, a - b * trunc(a / b) (C's %, torch's fmod)."""
    return O.fmod(a, b)


def isneginf(x: Tensor) -> Tensor:
    return O.logical_and(O.isinf(x), O.lt(x, 0))


def isposinf(x: Tensor) -> Tensor:
    return O.logical_and(O.isinf(x), O.gt(x, 0))


def threshold(x: Tensor, threshold: Any, value: Any) -> Tensor:
    """torch's threshold: value where x <= threshold, else x (in x's dtype)."""
    return O.where(O.le(x, threshold), O.cast(value, x.dtype) if not isinstance(value, Tensor) else value, x)


def addcmul(x: Tensor, a: Any, b: Any, value: Any = 1.0) -> Tensor:
    """x + value * a * b (torch.addcmul)."""
    return O.add(x, O.mul(O.mul(a, b), value))


def randn_like(x: Tensor, rng_seed: Any = 0, rng_offset: Any = 0, dtype: Any = None) -> Tensor:
    """Standard normal numbers with x's shape (and dtype unless given): `normal`'s stream."""
    dt = x.dtype if dtype is None else to_dtype(dtype)
    return normal(0.0, 1.0, list(x.shape), rng_seed, rng_offset, dt)


def real(x: Tensor) -> Tensor:
    """The real part: a copy of a real tensor (mlirfuse has no complex dtypes)."""
    return O.set(x)


def imag(x: Tensor) -> Tensor:
    raise FusionError(f"imag: not defined for a real ({x.dtype.value}) tensor; mlirfuse has no complex dtypes")


def shape(x: Tensor) -> list[Any]:
    """nvFuser's `shape(t)`: the sizes (ints, or symbolic sizes usable in shapes)."""
    return list(x.shape)


tensor_sizes = shape


def at(vector: Sequence[Any], index: int) -> Any:
    """nvFuser's `at(vector, index)`: one entry of a vector (`shape(t)`, `define_vector`), a
    negative index counting from the end."""
    if not isinstance(vector, (list, tuple)):
        raise FusionError(f"at: expected a vector (a list of sizes or scalars), got {vector!r}")
    if isinstance(index, bool) or not isinstance(index, int) or not -len(vector) <= index < len(vector):
        raise FusionError(f"at: index {index!r} out of range for a vector of {len(vector)}")
    return vector[index]
