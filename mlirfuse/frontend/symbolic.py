"""Symbolic tensor sizes: one compiled fusion serves every shape of a signature.

A dynamic size is a monomial over input extents plus a constant,
`coef * prod(input[i].shape[d]) + offset`, which covers what broadcasting, reductions and
reshapes produce (merging dims multiplies, an inferred reshape dim divides) and what pads
and slices of a dynamic dim do (add or remove a constant number of elements). A product of
two sizes with offsets is not of that form: tracing it needs concrete sizes. The host
evaluates a size to allocate outputs and to check constraints; the IR emitter turns it into
`fusion.size` and `arith` index ops.
"""

from __future__ import annotations

import numbers
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence, Union

from mlirfuse.errors import FusionError

Extent = tuple[int, int]


class ConcreteSizeNeeded(FusionError):
    """Tracing needs a concrete size; `jit` retraces with static shapes when it sees this."""  # (input position, dim)


class StaticTraceNeeded(FusionError):
    """A call's sizes that the symbolic trace cannot take but Python answers (a slice starting
    past a dim's end, which Python clamps to empty): `jit` runs a trace of those static sizes."""


@dataclass(frozen=True, eq=False)
class SymSize:
    """coef * product of input extents; hashable, so equal sizes compare equal."""

    factors: tuple[Extent, ...]
    coef: Fraction = Fraction(1)
    offset: int = 0

    @staticmethod
    def of(extent: Extent) -> "SymSize":
        return SymSize((extent,))

    @property
    def monomial(self) -> "SymSize":
        """This size without its offset."""
        return SymSize(self.factors, self.coef) if self.offset else self

    def _no_offset(self, what: str) -> None:
        if self.offset:
            raise ConcreteSizeNeeded(f"symbolic size {self} {what}: not of the form coef * product + offset")

    def __add__(self, other: "Size") -> "Size":
        if _other_number(other):
            self._concrete(other)
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return _make(self.factors, self.coef, self.offset + other)

    __radd__ = __add__

    def __sub__(self, other: "Size") -> "Size":
        if _other_number(other):
            self._concrete(other)
        if isinstance(other, SymSize) and other.monomial == self.monomial:
            return self.offset - other.offset
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return _make(self.factors, self.coef, self.offset - other)

    def __mul__(self, other: "Size") -> "Size":
        if isinstance(other, SymSize):
            self._no_offset(f"times {other}")
            other._no_offset(f"times {self}")
            return _make(tuple(sorted(self.factors + other.factors)), self.coef * other.coef)
        if isinstance(other, int):
            return _make(self.factors, self.coef * other, self.offset * other)
        if _other_number(other):
            self._concrete(other)
        return NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other: "Size") -> "Size":
        """Exact division (reshape sizes); the caller checks divisibility at run time."""
        if _other_number(other):
            self._concrete(other)
        self._no_offset(f"divided by {other}")
        if isinstance(other, int):
            if other == 0:
                raise FusionError("symbolic size divided by zero")
            return _make(self.factors, self.coef / other)
        if isinstance(other, SymSize):
            other._no_offset(f"dividing {self}")
            rest = list(self.factors)
            for f in other.factors:
                if f not in rest:
                    raise FusionError(f"cannot divide symbolic size {self} by {other}")
                rest.remove(f)
            return _make(tuple(rest), self.coef / other.coef)
        return NotImplemented

    def evaluate(self, shapes: Sequence[Sequence[int]]) -> int:
        value = self.coef
        for i, d in self.factors:
            value *= shapes[i][d]
        value += self.offset
        if value.denominator != 1:
            raise FusionError(f"input shapes {[tuple(x) for x in shapes]} do not fit the traced shapes: "
                              f"size {self} is not an integer (a reshape whose -1 does not divide?)")
        return int(value)

    def __eq__(self, other: object) -> bool:
        """Equal symbolic sizes compare equal, others not, and a symbolic size is never an int:
        so mlirfuse compares sizes while tracing (size-1 dims are part of a signature). In the
        traced function's own code (a caller outside mlirfuse), an answer that is not known
        statically needs the concrete size: `x.shape[0] == 4`, `x.shape == (4, 8)` or
        `x.shape[0] == y.shape[0]` specialize the signature on full shapes, as int(x.shape[0])
        does (they were silently False, taking the other branch)."""
        if isinstance(other, SymSize):
            if (self.factors, self.coef, self.offset) == (other.factors, other.coef, other.offset):
                return True
        elif isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        if _traced_code(sys._getframe(1)):
            raise ConcreteSizeNeeded(f"symbolic size {self} compared with {other} in traced code: the "
                                     "comparison needs the concrete size (mlirfuse.jit specializes on shapes)")
        return False

    def __hash__(self) -> int:
        return hash((self.factors, self.coef, self.offset))

    def __bool__(self) -> bool:
        raise ConcreteSizeNeeded(f"the truth of symbolic size {self} (is it 0?) needs the concrete size")

    def _ordered(self, other: object) -> bool:
        if isinstance(other, bool) or not isinstance(other, (int, SymSize)):
            return NotImplemented
        raise ConcreteSizeNeeded(f"symbolic size {self} ordered against {other}: needs the concrete size")

    __lt__ = __le__ = __gt__ = __ge__ = _ordered

    def _concrete(self, *other: object) -> Any:
        raise ConcreteSizeNeeded(f"arithmetic on symbolic size {self} that sizes do not have (%, /, **, "
                                 "negation): needs the concrete size")

    # (`n - size` too, and a float with a size: `x.shape[-1] * 1.0` raised TypeError, black-box
    # review, session 79; `jit` retraces with the concrete sizes)
    __mod__ = __rmod__ = __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __neg__ = __rsub__ = _concrete
    __rfloordiv__ = _concrete

    def __index__(self) -> int:
        raise ConcreteSizeNeeded(
            f"symbolic size {self} used where a concrete number is needed; define the "
            "tensor with static sizes (mlirfuse.jit specializes on shapes by itself)")

    __int__ = __index__
    __float__ = __index__  # type: ignore[assignment]

    def __str__(self) -> str:
        parts = [f"in{i}.shape[{d}]" for i, d in self.factors]
        if self.coef != 1:
            parts.insert(0, str(self.coef))
        text = "*".join(parts)
        return text if not self.offset else f"{text}{self.offset:+d}"


Size = Union[int, SymSize]


def _other_number(value: object) -> bool:
    """A number that is not an int (a float, a numpy float): arithmetic with a size then needs
    its concrete value."""
    return isinstance(value, numbers.Number) and not isinstance(value, (int, SymSize))


def _traced_code(frame: Any) -> bool:
    """The frame is the user's code being traced, not mlirfuse's (nor Python's own, which
    compares on behalf of its caller: a tuple's == runs in the caller's frame)."""
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return not (name == "mlirfuse" or name.startswith("mlirfuse."))


def _make(factors: tuple[Extent, ...], coef: Fraction, offset: int = 0) -> Size:
    if coef == 0:
        return offset
    if not factors:
        if coef.denominator != 1:
            raise FusionError(f"size {coef} is not an integer")
        return int(coef) + offset
    return SymSize(factors, Fraction(coef), offset)


def evaluate(size: Size, shapes: Sequence[Sequence[int]]) -> int:
    return size.evaluate(shapes) if isinstance(size, SymSize) else size


def product(sizes: Sequence[Size]) -> Size:
    result: Size = 1
    for s in sizes:
        result = s * result if isinstance(s, SymSize) else result * s
    return result
