"""Composite ops: torch.nn.functional's softmax, log_softmax, logsumexp, gelu, layer_norm and
rms_norm, torch's amax/amin/std/square, and torch-style tensor methods (transpose, t,
flatten, clamp with optional bounds), built from mlirfuse's ops: the fuser sees the
primitive chain (a normalization is one kernel), nothing here is a new IR op."""

from __future__ import annotations

from typing import Any

from mlirfuse.dtypes import DataType, promote_pair, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend import ops as O
from mlirfuse.frontend.graph import Tensor

Operand = Any  # Tensor | bool | int | float


@O.reduction_api
def amax(x: Tensor, axes: Any = None, keepdim: bool = False) -> Tensor:
    """torch.amax: the maximum over `axes` (torch's x.max(dim) returns indices too; this does not)."""
    return O.max(x, axes, keepdim)


@O.reduction_api
def amin(x: Tensor, axes: Any = None, keepdim: bool = False) -> Tensor:
    return O.min(x, axes, keepdim)


@O.reduction_api
def std(x: Tensor, axes: Any = None, correction: float = 1, keepdim: bool = False) -> Tensor:
    """sqrt(var); where the variance is 0 the gradient is 0, as torch's std_backward masks
    it (sqrt's own at 0 is infinite: the row's gradient was NaN)."""
    return _root(O.var(x, axes, correction, keepdim), O.sqrt)


def _root(total: Tensor, root: Any) -> Tensor:
    """root(total), but 0 with a zero gradient where total is 0 (the root's own gradient is
    infinite there: NaN through it), as torch's std and norm backwards mask it."""
    zero = O.eq(total, 0.0)
    return O.where(zero, 0.0, root(O.where(zero, 1.0, total)))


def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """torch.linalg.vector_norm: (sum |x|^ord)^(1 / ord) over `dim` (every dim by default);
    ord inf / -inf: the largest / smallest |x|; ord 0: the count of nonzeros. Half precision
    is computed in float32 and rounded once, as torch's. Gradients as torch's norm_backward:
    0 where the norm is 0 (sqrt's own there is infinite: NaN), ord inf's shared among the
    elements at the norm."""
    what = "vector_norm"
    if dtype is not None and isinstance(x, Tensor):
        to = to_dtype(dtype)
        if not to.is_float or promote_pair(x.dtype, to) != to:
            raise FusionError(f"{what}: the input ({x.dtype.value}) must convert to dtype {to.value} without "
                              "narrowing")
        x = O.cast(x, to)
    if not isinstance(x, Tensor):
        raise FusionError(f"{what}: expected a tensor, got {type(x).__name__}")
    x = _floating(x, what)
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise FusionError(f"{what}: ord must be a number, got {ord!r}")
    axes = None if dim is None else O.normalize_axes(dim, x.ndim, what)
    u = _in_float(x)
    a = O.abs(u)
    if ord == float("inf"):
        out = O.max(a, axes, keepdim)
    elif ord == float("-inf"):
        out = O.min(a, axes, keepdim)
    elif ord == 0:  # (a zero gradient, as torch's: the count taken where it always is)
        count = O.sum(O.cast(O.ne(u, 0.0), u.dtype), axes, keepdim)
        out = O.where(O.ge(count, 0.0), count, O.sum(a, axes, keepdim))
    elif ord == 1:
        out = O.sum(a, axes, keepdim)
    elif ord == 2:
        out = _root(O.sum(O.mul(u, u), axes, keepdim), O.sqrt)
    elif ord > 0:  # (|x|^ord's gradient at 0 is infinite for ord < 1: 0 there, as torch's)
        held = O.eq(a, 0.0)
        total = O.sum(O.where(held, 0.0, O.pow(O.where(held, 1.0, a), float(ord))), axes, keepdim)
        out = _root(total, lambda t: O.pow(t, 1.0 / ord))
    else:  # the norm is 0 where some |x| is: 0 there, with no gradient, as torch's
        held, zero = (O.eq(O.min(a, axes, k), 0.0) for k in (True, keepdim))
        total = O.sum(O.pow(O.where(held, 1.0, a), float(ord)), axes, keepdim)
        out = O.where(zero, 0.0, O.pow(total, 1.0 / ord))
    return _as(out, x)


def norm(x: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """torch.norm / x.norm(p, dim, keepdim, dtype): a vector norm (`vector_norm`); 'fro' is
    ord 2 (over the given dims, or every element). 'nuc' (a matrix norm) is not supported."""
    if p == "fro":
        p = 2
    elif isinstance(p, str):
        raise FusionError(f"norm: p={p!r} is not supported on traced tensors (a vector norm's number, or 'fro')")
    return vector_norm(x, p, dim, keepdim, dtype)


def square(x: Tensor) -> Tensor:
    """x * x; a bool tensor's square is int64, as torch's (pow(x, 2))."""
    if isinstance(x, Tensor) and x.dtype is DataType.Bool:
        x = O.cast(x, DataType.Int)
    return O.mul(x, x)


def _one_axis(dim: int, x: Tensor, what: str) -> int:
    if isinstance(dim, (list, tuple)):
        raise FusionError(f"{what}: takes one dim, got {dim!r}")
    return O.normalize_dim(dim, x.ndim, what)


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `dim` (a reduction broadcast back: one kernel)."""
    d = _one_axis(dim, x, "softmax")
    u = _in_float(_floating(x, "softmax"))
    e = O.exp(O.sub(u, O.max(u, [d], True)))
    return _as(O.div(e, O.sum(e, [d], True)), x)


def logsumexp(x: Tensor, dim: Any = -1, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) along `dim`, computed around the maximum (an infinite maximum is
    taken as 0 there, as torch does, so that -inf rows give -inf, not NaN)."""
    dims = O.normalize_axes(dim, x.ndim, "logsumexp")
    if x.dtype.is_int or x.dtype is DataType.Bool:  # torch: integers in the default float type
        x = O.cast(x, DataType.Float)
    u = _in_float(x)
    m = _finite_max(u, dims)
    out = _as(O.add(O.log(O.sum(O.exp(O.sub(u, m)), dims, True)), m), x)
    return O.squeeze(out, dims) if not keepdim else out


def _finite_max(u: Tensor, dims: list[int]) -> Tensor:
    """The maximum along `dims` (kept), an infinite one taken as 0."""
    m = O.max(u, dims, True)
    return O.where(O.isinf(m), O.constant(0.0, u.dtype), m)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """(x - max) - log(sum(exp(x - max))), as torch's: subtracting max + log(sum) at once
    rounded that sum to the maximum's ulp (logits of 1000: 3e-5 off)."""
    d = _one_axis(dim, x, "log_softmax")
    u = _in_float(_floating(x, "log_softmax"))
    shifted = O.sub(u, _finite_max(u, [d]))
    return _as(O.sub(shifted, O.log(O.sum(O.exp(shifted), [d], True))), x)


def _floating(x: Tensor, what: str) -> Tensor:
    """x, which must be of a floating type (torch refuses softmax of integers)."""
    if isinstance(x, Tensor) and not x.dtype.is_float:
        raise FusionError(f"{what}: needs a floating-point tensor, got {x.dtype.value} (cast it first)")
    return x


def _in_float(x: Tensor) -> Tensor:
    """A half-precision input as float32: torch computes these ops in float32 (its opmath
    type) and rounds the result once, not every intermediate."""
    return O.cast(x, DataType.Float) if x.dtype in (DataType.Half, DataType.BFloat16) else x


def _as(y: Tensor, x: Tensor) -> Tensor:
    return O.cast(y, x.dtype) if y.dtype != x.dtype else y


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """torch's GELU: x * Phi(x) with erf, or its tanh approximation (`approximate='tanh'`)."""
    if approximate not in ("none", "tanh"):
        raise FusionError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    u = _in_float(x)
    if approximate == "none":
        return _as(O.mul(O.mul(u, 0.5), O.add(O.erf(O.mul(u, 0.7071067811865476)), 1.0)), x)
    inner = O.mul(O.add(u, O.mul(O.mul(O.mul(u, u), u), 0.044715)), 0.7978845608028654)
    return _as(O.mul(O.mul(u, 0.5), O.add(O.tanh(inner), 1.0)), x)


def floor_divide(a: Operand, b: Operand) -> Tensor:
    """torch.floor_divide (Python's `//`, torch.div(..., rounding_mode="floor")): the
    quotient rounded toward -inf. Floats as torch computes it, from fmod (floor(a / b) is
    off where a / b rounds up to an integer: 1.0 // 0.1 is 9, floor(1.0 / 0.1) is 10), half
    precision in float32; by 0, a / b. Integers: the truncated quotient less one where the
    remainder's sign differs from the divisor's (by 0: 0, as mlirfuse's integer division)."""
    fusion = O._fusion_of([a, b], "floor_divide")
    common = O.result_type([O._dtype_priority(v, "floor_divide") for v in (a, b)], fusion.typed_scalars)
    if common.is_bool:
        raise FusionError("floor_divide: not defined for bool operands; cast them first")
    if not common.is_float:
        q, r = O.trunc_div(a, b), O.fmod(a, b)
        past = O.logical_and(O.ne(r, 0), O.ne(O.lt(r, 0), O.lt(b, 0)))
        return O.where(past, O.sub(q, 1), q)
    wide = DataType.Float if common in (DataType.Half, DataType.BFloat16) else common
    u = O.cast(a, wide) if isinstance(a, Tensor) and a.dtype != wide else a
    v = O.cast(b, wide) if isinstance(b, Tensor) and b.dtype != wide else b
    mod = O.fmod(u, v)
    div = O.div(O.sub(u, mod), v)
    div = O.where(O.logical_and(O.ne(mod, 0), O.ne(O.lt(v, 0), O.lt(mod, 0))), O.sub(div, 1), div)
    floor = O.floor(div)
    floor = O.where(O.gt(O.sub(div, floor), 0.5), O.add(floor, 1), floor)
    quotient = O.div(u, v)
    floor = O.where(O.eq(div, 0), O.mul(quotient, 0.0), floor)  # a zero with the quotient's sign
    out = O.where(O.eq(v, 0), quotient, floor)
    return O.cast(out, common) if out.dtype != common else out


def _normalized_axes(x: Tensor, normalized_shape: Any, what: str) -> list[int]:
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    n = len(shape)
    if n == 0 or n > x.ndim:
        raise FusionError(f"{what}: normalized_shape {tuple(shape)} does not fit an input of rank {x.ndim}")
    for want, have in zip(shape, x.shape[x.ndim - n:]):
        if isinstance(have, int) and isinstance(want, int) and want != have:
            raise FusionError(f"{what}: normalized_shape {tuple(shape)} does not match the input's "
                              f"trailing sizes {tuple(x.shape[x.ndim - n:])}")
    return list(range(x.ndim - n, x.ndim))


def _affine(y: Tensor, weight: Operand | None, bias: Operand | None) -> Tensor:
    if weight is not None:
        y = O.mul(y, weight)
    if bias is not None:
        y = O.add(y, bias)
    return y


def layer_norm(x: Tensor, normalized_shape: Any, weight: Operand | None = None, bias: Operand | None = None,
               eps: float = 1e-5) -> Tensor:
    """torch.nn.functional.layer_norm: (x - mean) / sqrt(var + eps) over the trailing
    `normalized_shape` dims (biased variance), then `* weight + bias`."""
    axes = _normalized_axes(x, normalized_shape, "layer_norm")
    u = _in_float(x)
    v, m = O.var_mean(u, axes, correction=0, keepdim=True)
    return _as(_affine(O.mul(O.sub(u, m), O.rsqrt(O.add(v, eps))), weight, bias), x)


# rms_norm's default eps: the machine epsilon of the type it computes in, as torch's (its
# opmath type: float32 for float16/bfloat16 inputs; their own 2^-10 and 2^-7 made small rows 3x smaller)
_MACHINE_EPSILON = {DataType.Float: 2.0 ** -23, DataType.Double: 2.0 ** -52, DataType.Half: 2.0 ** -23,
                    DataType.BFloat16: 2.0 ** -23}


def rms_norm(x: Tensor, normalized_shape: Any, weight: Operand | None = None, eps: float | None = None) -> Tensor:
    """torch.nn.functional.rms_norm: x / sqrt(mean(x^2) + eps) over the trailing
    `normalized_shape` dims, then `* weight`; eps defaults to the machine epsilon of the type
    it computes in (float32 for 16-bit inputs), as torch's."""
    axes = _normalized_axes(x, normalized_shape, "rms_norm")
    if eps is None:
        eps = _MACHINE_EPSILON.get(x.dtype, _MACHINE_EPSILON[DataType.Float])
    u = _in_float(x)
    return _as(_affine(O.mul(u, O.rsqrt(O.add(O.mean(O.mul(u, u), axes, True), eps))), weight, None), x)


COMPOSITE_NAMES = ["amax", "amin", "std", "square", "softmax", "logsumexp", "log_softmax", "gelu", "floor_divide",
                   "layer_norm", "rms_norm", "norm", "vector_norm"]
__all__ = COMPOSITE_NAMES


def _transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    perm = list(range(x.ndim))
    a, b = O.normalize_dim(dim0, x.ndim, "transpose"), O.normalize_dim(dim1, x.ndim, "transpose")
    perm[a], perm[b] = perm[b], perm[a]
    return O.permute(x, perm)


def _t(x: Tensor) -> Tensor:
    if x.ndim != 2:
        raise FusionError(f"t: expects a 2-D tensor, got rank {x.ndim} (use transpose or permute)")
    return _transpose(x, 0, 1)


def _flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if x.ndim == 0:
        return O.reshape(x, [1])
    a, b = O.normalize_dim(start_dim, x.ndim, "flatten"), O.normalize_dim(end_dim, x.ndim, "flatten")
    if a > b:
        raise FusionError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return O.reshape(x, list(x.shape[:a]) + [-1] + list(x.shape[b + 1:]))


def _clamp(x: Tensor, min: Operand | None = None, max: Operand | None = None) -> Tensor:  # noqa: A002
    """torch's x.clamp(min, max): either bound may be None (not both)."""
    if min is None and max is None:
        raise FusionError("clamp: give min, max or both")
    # one-sided: the bound where x is past it, else x (the gradient goes to x at a tie, as
    # torch's clamp_min/clamp_max backward; maximum/minimum split it)
    if min is not None and max is not None:
        return O.clamp(x, min, max)
    bound, past, kept = (min, O.lt, O.ge) if max is None else (max, O.gt, O.le)
    floating = x.dtype.is_float or isinstance(bound, float) or isinstance(bound, Tensor) and bound.dtype.is_float
    if not floating:
        return O.where(past(x, bound), bound, x)
    # Where x or the bound is NaN (a NaN number too), neither comparison holds: the result is
    # NaN and, as torch's clamp_min/clamp_max backward, neither operand gets a gradient there.
    return O.where(past(x, bound), bound, O.where(kept(x, bound), x, float("nan")))


def attach_tensor_methods() -> None:
    for name in ("amax", "amin", "std", "square", "softmax", "logsumexp", "log_softmax", "norm"):
        setattr(Tensor, name, globals()[name])
    Tensor.__floordiv__ = floor_divide
    Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)
    Tensor.transpose = _transpose
    Tensor.t = _t
    Tensor.flatten = _flatten
    Tensor.clamp = _clamp
