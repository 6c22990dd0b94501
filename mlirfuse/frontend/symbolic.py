"""Symbolic tensor sizes: one compiled fusion serves every shape of a signature.

A dynamic size is a monomial over input extents, `coef * prod(input[i].shape[d])`,
which covers what broadcasting, reductions and reshapes produce (merging dims multiplies,
an inferred reshape dim divides). The host evaluates it to allocate outputs and to check
constraints; the IR emitter turns it into `fusion.size` and `arith` index ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence, Union

from mlirfuse.errors import FusionError

Extent = tuple[int, int]


class ConcreteSizeNeeded(FusionError):
    """Tracing needs a concrete size; `jit` retraces with static shapes when it sees this."""  # (input position, dim)


@dataclass(frozen=True)
class SymSize:
    """coef * product of input extents; hashable, so equal sizes compare equal."""

    factors: tuple[Extent, ...]
    coef: Fraction = Fraction(1)

    @staticmethod
    def of(extent: Extent) -> "SymSize":
        return SymSize((extent,))

    def __mul__(self, other: "Size") -> "Size":
        if isinstance(other, SymSize):
            return _make(tuple(sorted(self.factors + other.factors)), self.coef * other.coef)
        if isinstance(other, int):
            return _make(self.factors, self.coef * other)
        return NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other: "Size") -> "Size":
        """Exact division (reshape sizes); the caller checks divisibility at run time."""
        if isinstance(other, int):
            if other == 0:
                raise FusionError("symbolic size divided by zero")
            return _make(self.factors, self.coef / other)
        if isinstance(other, SymSize):
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
        if value.denominator != 1:
            raise FusionError(f"input shapes {[tuple(x) for x in shapes]} do not fit the traced shapes: "
                              f"size {self} is not an integer (a reshape whose -1 does not divide?)")
        return int(value)

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
        return "*".join(parts)


Size = Union[int, SymSize]


def _make(factors: tuple[Extent, ...], coef: Fraction) -> Size:
    if not factors:
        if coef.denominator != 1:
            raise FusionError(f"size {coef} is not an integer")
        return int(coef)
    return SymSize(factors, Fraction(coef))


def evaluate(size: Size, shapes: Sequence[Sequence[int]]) -> int:
    return size.evaluate(shapes) if isinstance(size, SymSize) else size


def product(sizes: Sequence[Size]) -> Size:
    result: Size = 1
    for s in sizes:
        result = s * result if isinstance(s, SymSize) else result * s
    return result
