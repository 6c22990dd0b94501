"""Complex values in a FusionDefinition, as pairs of real tensors (real and imaginary parts).

mlirfuse's IR, backends and schedules are real. A complex64 (complex128) input is read as the
float32 (float64) tensor its memory already is, with a trailing dim of 2, and split into its
parts; complex ops are written with real ops on the parts (so they fuse and schedule like any
real work: a complex sum is two real sums in one kernel); a complex output is stacked back
into that layout and handed out as a complex view of it. An op with no rule here raises
FusionError naming it.
"""

from __future__ import annotations

import warnings
import contextvars
from typing import Any, Callable, Sequence

from mlirfuse.dtypes import DataType, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend import indexing as I
from mlirfuse.frontend import nvfuser_ops as N
from mlirfuse.frontend import ops as O
from mlirfuse.frontend.graph import Tensor

_FD: contextvars.ContextVar[Any] = contextvars.ContextVar("complex_definition")  # the definition tracing
COMPLEX_OF = {DataType.Float: DataType.ComplexFloat, DataType.Double: DataType.ComplexDouble}
PART_OF = {c: r for r, c in COMPLEX_OF.items()}


class ComplexTensor:
    """A complex value of a definition: its real and imaginary parts (real tensors of one
    shape). Python operators go through the definition's `fd.ops`, as a tensor's do."""

    def __init__(self, fd: Any, re: Tensor, im: Tensor):
        self._fd, self.re, self.im = fd, re, im

    @property
    def dtype(self) -> DataType:
        return COMPLEX_OF[self.re.dtype]

    @property
    def shape(self) -> tuple:
        return self.re.shape

    @property
    def ndim(self) -> int:
        return self.re.ndim

    def size(self, dim: int) -> Any:
        return self.re.size(dim)

    def __repr__(self) -> str:
        return f"ComplexTensor({self.dtype.value}, shape={self.re.shape})"


def _operator(name: str, reflected: bool = False) -> Callable:
    def call(self: ComplexTensor, other: Any) -> Any:
        args = (other, self) if reflected else (self, other)
        return getattr(self._fd.ops, name)(*args)
    return call


for _dunder, _name in {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div"}.items():
    setattr(ComplexTensor, f"__{_dunder}__", _operator(_name))
    setattr(ComplexTensor, f"__r{_dunder}__", _operator(_name, reflected=True))
ComplexTensor.__eq__ = _operator("eq")  # type: ignore[assignment,method-assign]
ComplexTensor.__ne__ = _operator("ne")  # type: ignore[assignment,method-assign]
ComplexTensor.__hash__ = object.__hash__  # type: ignore[method-assign]
ComplexTensor.__neg__ = lambda self: self._fd.ops.neg(self)  # type: ignore[attr-defined]
ComplexTensor.__abs__ = lambda self: self._fd.ops.abs(self)  # type: ignore[attr-defined]


def involves_complex(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    values = list(args) + list(kwargs.values())
    values += [v for x in values if isinstance(x, (list, tuple)) for v in x]
    return any(isinstance(v, (ComplexTensor, complex)) for v in values) or any(
        _is_complex_dtype(v) for v in values)


def _is_complex_dtype(v: Any) -> bool:
    if isinstance(v, (Tensor, ComplexTensor, list, tuple, bool, int, float)) or v is None:
        return False
    try:
        return to_dtype(v).is_complex
    except FusionError:
        return False


def part_dtype(values: Sequence[Any]) -> DataType:
    """The real dtype of the parts of a result over `values`, as torch promotes: float64 when
    a complex128 value or a float64 tensor is among the operands of the highest priority
    (tensors with dims before 0-d ones and scalars), else float32."""
    ranked = [(v, (v.re if isinstance(v, ComplexTensor) else v).priority) for v in values
              if isinstance(v, (Tensor, ComplexTensor))]
    top = max((p for _, p in ranked), default=0)
    for v, p in ranked:
        if p == top and (v.dtype is DataType.ComplexDouble or v.dtype is DataType.Double):
            return DataType.Double
    return DataType.Float


def parts(v: Any, dt: DataType) -> tuple[Tensor, Tensor]:
    """(real, imaginary) of an operand as dt tensors (numbers as 0-d constants)."""
    fusion = _FD.get().fusion
    if isinstance(v, ComplexTensor):
        return O.cast(v.re, dt), O.cast(v.im, dt)
    if isinstance(v, Tensor):
        return O.cast(v, dt), O.constant(0.0, dt, fusion)
    if isinstance(v, (bool, int, float, complex)):
        v = complex(v)
        return O.constant(v.real, dt, fusion), O.constant(v.imag, dt, fusion)
    raise FusionError(f"complex operand {v!r} of type {type(v).__name__}")


def _make(re: Tensor, im: Tensor) -> ComplexTensor:
    """A complex value from parts, broadcast to one shape."""
    shape = list(O.broadcast_shapes([re.shape, im.shape], re.fusion, "complex"))
    return ComplexTensor(_FD.get(), O.expand(re, shape), O.expand(im, shape))


# -- rules: name -> fn(*args, **kwargs) ----------------------------------------------------------
def _binary(combine: Callable) -> Callable:
    def rule(a: Any, b: Any) -> ComplexTensor:
        dt = part_dtype([a, b])
        (ar, ai), (br, bi) = parts(a, dt), parts(b, dt)
        return _make(*combine(ar, ai, br, bi))
    return rule


def _mul(ar: Any, ai: Any, br: Any, bi: Any) -> tuple[Any, Any]:
    return O.sub(O.mul(ar, br), O.mul(ai, bi)), O.add(O.mul(ar, bi), O.mul(ai, br))


def _div(ar: Any, ai: Any, br: Any, bi: Any) -> tuple[Any, Any]:
    """Smith's algorithm, as torch's complex division: the divisor scaled by its larger part,
    so that (1e30 + 0j) / (1e30 + 0j) is 1 in complex64 and x / (inf + 0j) is 0 (c * c + d * d
    overflowed there: 0 and NaN). A zero divisor divides each part by a zero, as torch's:
    1 / 0 = inf + nan j."""
    c, d = O.abs(br), O.abs(bi)
    wide = O.ge(c, d)  # NaN: the other branch, as torch's
    rat = O.where(wide, O.div(bi, br), O.div(br, bi))
    scale = O.div(_const(1.0, rat), O.where(wide, O.add(br, O.mul(bi, rat)), O.add(bi, O.mul(br, rat))))
    re = O.where(wide, O.add(ar, O.mul(ai, rat)), O.add(O.mul(ar, rat), ai))
    im = O.where(wide, O.sub(ai, O.mul(ar, rat)), O.sub(O.mul(ai, rat), ar))
    zero = O.logical_and(O.eq(c, _const(0.0, c)), O.eq(d, _const(0.0, d)))
    return O.where(zero, O.div(ar, c), O.mul(re, scale)), O.where(zero, O.div(ai, d), O.mul(im, scale))


def _unary(fn: Callable[[Tensor, Tensor], tuple[Any, Any]]) -> Callable:
    def rule(z: Any) -> ComplexTensor:
        return _make(*fn(*parts(z, part_dtype([z]))))
    return rule


def _const(value: float, like: Tensor) -> Tensor:
    return O.constant(value, like.dtype, like.fusion)


def _signed(magnitude: float, sign_of: Tensor) -> Tensor:
    """copysign(magnitude, sign_of), for a constant magnitude (0 or inf)."""
    return O.where(N.signbit(sign_of), _const(-magnitude, sign_of), _const(magnitude, sign_of))


# |z| as sqrt(re^2 + im^2) while the squares neither overflow nor underflow, else scaled by the
# larger part (hypot's range): |1e30 + 0j| is 1e30 in float32, not inf
_UNSCALED = {DataType.Float: (1e-18, 1e18), DataType.Double: (1e-150, 1e150)}


def _abs(re: Tensor, im: Tensor) -> Tensor:
    """hypot(re, im), as torch's abs: inf where a part is infinite (the other NaN or not)."""
    a, b = O.abs(re), O.abs(im)
    big, small = O.maximum(a, b), O.minimum(a, b)
    direct = O.sqrt(O.add(O.mul(re, re), O.mul(im, im)))
    ratio = O.div(small, O.where(O.eq(big, _const(0.0, big)), _const(1.0, big), big))
    scaled = O.mul(big, O.sqrt(O.add(O.mul(ratio, ratio), _const(1.0, big))))
    low, high = _UNSCALED.get(re.dtype, _UNSCALED[DataType.Double])
    in_range = O.logical_and(O.lt(big, _const(high, big)), O.le(_const(low, big), big))
    r = O.where(in_range, direct, scaled)
    return O.where(O.logical_or(O.isinf(re), O.isinf(im)), _const(float("inf"), re), r)


def _exp(re: Tensor, im: Tensor) -> tuple[Tensor, Tensor]:
    """exp(re) (cos(im) + i sin(im)) with C99's (torch's) special values: an imaginary part of
    0 stays (exp(inf + 0j) = inf + 0j); exp(-inf + i y) = 0 for y infinite or NaN; exp(inf + i y)
    = inf + nan j for y infinite or NaN."""
    e = O.exp(re)
    out_re, out_im = O.mul(e, O.cos(im)), O.mul(e, O.sin(im))
    zero_im = O.eq(im, _const(0.0, im))
    out_re, out_im = O.where(zero_im, e, out_re), O.where(zero_im, im, out_im)
    bad_im = O.logical_not(N.isfinite(im))
    low = O.logical_and(O.eq(re, _const(float("-inf"), re)), bad_im)
    high = O.logical_and(O.eq(re, _const(float("inf"), re)), bad_im)
    out_re = O.where(low, _const(0.0, re), O.where(high, _const(float("inf"), re), out_re))
    out_im = O.where(low, _signed(0.0, im), O.where(high, _const(float("nan"), re), out_im))
    return out_re, out_im


def _sqrt(re: Tensor, im: Tensor) -> tuple[Tensor, Tensor]:
    """The principal root without cancellation: t = sqrt((|re| + |z|) / 2), then (t, im / 2t)
    for re >= 0, else (|im| / 2t, t signed as im); C99's (torch's) special values: an infinite
    imaginary part gives (inf, im), sqrt(-inf + nan j) = nan + inf j, sqrt(0 + i y) for y 0 is y's zero."""
    t = O.sqrt(O.add(O.mul(O.abs(re), _const(0.5, re)), O.mul(_abs(re, im), _const(0.5, re))))
    twice = O.mul(t, _const(2.0, t))
    nonneg = O.logical_not(N.signbit(re))
    root_re = O.where(nonneg, t, O.div(O.abs(im), twice))
    root_im = O.where(nonneg, O.div(im, twice), O.where(N.signbit(im), O.neg(t), t))
    zero = O.eq(t, _const(0.0, t))
    root_re, root_im = O.where(zero, _const(0.0, re), root_re), O.where(zero, im, root_im)
    inf_im = O.isinf(im)
    root_re = O.where(inf_im, _const(float("inf"), re), root_re)
    root_im = O.where(inf_im, im, root_im)
    nan_low = O.logical_and(O.eq(re, _const(float("-inf"), re)), O.isnan(im))
    return (O.where(nan_low, _const(float("nan"), re), root_re),
            O.where(nan_low, _const(float("inf"), re), root_im))


def _reciprocal(re: Tensor, im: Tensor) -> tuple[Tensor, Tensor]:
    return _div(_const(1.0, re), _const(0.0, re), re, im)


def _rsqrt(re: Tensor, im: Tensor) -> tuple[Tensor, Tensor]:
    return _reciprocal(*_sqrt(re, im))


def _real_result(fn: Callable[[Tensor, Tensor], Tensor]) -> Callable:
    def rule(z: Any) -> Tensor:
        if not isinstance(z, ComplexTensor):
            raise FusionError(f"expected a complex tensor, got {z!r}")
        return fn(z.re, z.im)
    return rule


def _compare(both: bool) -> Callable:
    def rule(a: Any, b: Any) -> Tensor:
        dt = part_dtype([a, b])
        (ar, ai), (br, bi) = parts(a, dt), parts(b, dt)
        if both:
            return O.logical_and(O.eq(ar, br), O.eq(ai, bi))
        return O.logical_or(O.ne(ar, br), O.ne(ai, bi))
    return rule


def _where(c: Any, a: Any, b: Any) -> ComplexTensor:
    dt = part_dtype([a, b])
    (ar, ai), (br, bi) = parts(a, dt), parts(b, dt)
    return _make(O.where(c, ar, br), O.where(c, ai, bi))


def _reduction(fn: Callable) -> Callable:
    def rule(z: Any, *args: Any, **kwargs: Any) -> ComplexTensor:
        args = tuple(None if _is_complex_dtype(a) else a for a in args)  # nvFuser's positional dtype
        if _is_complex_dtype(kwargs.get("dtype")):
            kwargs = {**kwargs, "dtype": None}
        return ComplexTensor(_FD.get(), fn(z.re, *args, **kwargs), fn(z.im, *args, **kwargs))
    return rule


def _cast(z: Any, dtype: Any) -> Any:
    dt = to_dtype(dtype)
    if isinstance(z, ComplexTensor):
        if dt.is_complex:
            return ComplexTensor(_FD.get(), O.cast(z.re, PART_OF[dt]), O.cast(z.im, PART_OF[dt]))
        warnings.warn("casting a complex tensor to a real dtype discards the imaginary part", UserWarning,
                      stacklevel=3)
        return O.cast(z.re, dt)
    if not isinstance(z, Tensor):
        raise FusionError(f"cast: {z!r} to {dt.value}: give a complex constant as fd.define_scalar(value)")
    return _make(*parts(z, PART_OF[dt]))


def _both_parts(fn: Callable) -> Callable:
    """Shape and data-movement ops: the same op on each part."""
    def rule(z: Any, *args: Any, **kwargs: Any) -> ComplexTensor:
        return ComplexTensor(_FD.get(), fn(z.re, *args, **kwargs), fn(z.im, *args, **kwargs))
    return rule


def _pad(z: Any, pad_widths: Sequence[Any], value: Any = None) -> ComplexTensor:
    """Each part padded with the value's part (a real value pads the imaginary part with 0)."""
    if not isinstance(z, ComplexTensor):
        raise FusionError(f"pad: a complex pad value {value!r} for a {z.dtype.value} tensor (nvFuser: Tensor arg "
                          "and pad value must have the same dtype)")
    re, im = (None, None) if value is None else parts(value, z.re.dtype)
    return ComplexTensor(_FD.get(), I.pad(z.re, pad_widths, re), I.pad(z.im, pad_widths, im))


def _cat(tensors: Sequence[Any], dim: int = 0) -> ComplexTensor:
    dt = part_dtype(tensors)
    split = []
    for t in tensors:
        re, im = parts(t, dt)
        split.append((re, O.expand(im, list(re.shape))))
    return ComplexTensor(_FD.get(), I.cat([re for re, _ in split], dim), I.cat([im for _, im in split], dim))


RULES: dict[str, Callable] = {
    "add": _binary(lambda ar, ai, br, bi: (O.add(ar, br), O.add(ai, bi))),
    "sub": _binary(lambda ar, ai, br, bi: (O.sub(ar, br), O.sub(ai, bi))),
    "mul": _binary(_mul),
    "div": _binary(_div),
    "truediv": _binary(_div),
    "neg": _unary(lambda re, im: (O.neg(re), O.neg(im))),
    "conj": _unary(lambda re, im: (re, O.neg(im))),
    "exp": _unary(_exp),
    "log": _unary(lambda re, im: (O.log(_abs(re, im)), O.atan2(im, re))),
    "sqrt": _unary(_sqrt),
    "rsqrt": _unary(_rsqrt),
    "reciprocal": _unary(_reciprocal),
    "sin": _unary(lambda re, im: (O.mul(O.sin(re), O.cosh(im)), O.mul(O.cos(re), O.sinh(im)))),
    "cos": _unary(lambda re, im: (O.mul(O.cos(re), O.cosh(im)), O.neg(O.mul(O.sin(re), O.sinh(im))))),
    "abs": _real_result(_abs),
    "real": _real_result(lambda re, im: re),
    "imag": _real_result(lambda re, im: im),
    "isnan": _real_result(lambda re, im: O.logical_or(O.isnan(re), O.isnan(im))),
    "isreal": _real_result(lambda re, im: O.eq(im, 0.0)),
    "isinf": _real_result(lambda re, im: O.logical_or(O.isinf(re), O.isinf(im))),
    "isfinite": _real_result(lambda re, im: O.logical_and(N.isfinite(re), N.isfinite(im))),
    "eq": _compare(True),
    "ne": _compare(False),
    "where": _where,
    "sum": _reduction(O.sum),
    "mean": _reduction(O.mean),
    "cast": _cast,
    "cat": _cat,
    **{name: _both_parts(getattr(O, name)) for name in ("permute", "broadcast_in_dim", "expand", "unsqueeze", "set")},
    **{name: _both_parts(getattr(I, name)) for name in ("select", "index_select", "gather")},
    # nvFuser's forms and checks, as fd.ops takes them for real tensors
    **{name: _both_parts(getattr(N, name)) for name in ("reshape", "squeeze", "slice")},
    "pad": _pad,
    "broadcast": _both_parts(N.broadcast),
    # sizes: a complex value's are its parts'
    "size": lambda z, dim: O.size(z.re, dim),
    "shape": lambda z: N.shape(z.re),
    "tensor_sizes": lambda z: N.shape(z.re),
    "segment_set": _both_parts(N.segment_set),
}


def dispatch(fd: Any, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """fd.ops.<name> on complex operands (or to a complex dtype)."""
    rule = RULES.get(name)
    if rule is None:
        raise FusionError(f"fd.ops.{name}: not offered for complex operands (complex values are pairs of real "
                          f"tensors here; offered: {', '.join(sorted(RULES))})")
    token = _FD.set(fd)
    try:
        return rule(*args, **kwargs)
    finally:
        _FD.reset(token)
