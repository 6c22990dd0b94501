"""nvFuser's module-level frontend names: the FusionCache, the value classes for isinstance
checks, and the layout helpers (contiguity and stride order of sizes and strides)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from mlirfuse.errors import FusionError
from mlirfuse.frontend.complex_ops import ComplexTensor
from mlirfuse.frontend.definition_log import Deferred
from mlirfuse.frontend.graph import SCALAR, Tensor

if TYPE_CHECKING:
    from mlirfuse.frontend.fusion_definition import FusionDefinition

class FusionCache:
    """nvFuser's process-wide cache of definitions: equal definitions (the same fusion IR,
    or for definitions traced per signature the same calls) share one number; each number
    holds that definition's compiled kernels, one per signature and backend."""

    _instance: "FusionCache | None" = None

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._definitions: dict[int, "FusionDefinition"] = {}

    @classmethod
    def get(cls) -> "FusionCache":
        if cls._instance is None:
            cls._instance = FusionCache()
        return cls._instance

    @classmethod
    def reset(cls) -> None:
        cls.get()._ids.clear()
        cls.get()._definitions.clear()

    def num_fusions(self) -> int:
        return len(self._ids)

    def _register(self, fd: "FusionDefinition") -> int:
        key = fd._cache_key()
        if key not in self._ids:
            self._ids[key] = len(self._ids)
            self._definitions[self._ids[key]] = fd
        return self._ids[key]

    def _definition(self, number: int) -> "FusionDefinition":
        if number not in self._definitions:
            raise FusionError(f"FusionDefinition({number}): no definition of that number in the FusionCache "
                              f"({self.num_fusions()} definitions)")
        return self._definitions[number]


class _ValueKind(type):
    """isinstance checks of nvFuser's value classes: a Tensor has dims or came from a tensor
    input; a Scalar is a define_scalar value or arithmetic on scalars alone."""

    def __instancecheck__(cls, value: Any) -> bool:
        if isinstance(value, ComplexTensor):
            value = value.re
        if isinstance(value, Deferred):
            return cls is TensorValue
        if not isinstance(value, Tensor):
            return False
        return (value.priority == SCALAR) == (cls is ScalarValue)


class TensorValue(metaclass=_ValueKind):
    """nvFuser's `Tensor`, for isinstance checks (mlirfuse.Tensor)."""


class ScalarValue(metaclass=_ValueKind):
    """nvFuser's `Scalar`, for isinstance checks (mlirfuse.Scalar)."""


def compute_contiguity(sizes: Sequence[int], strides: Sequence[int]) -> list[Any]:
    """nvFuser's `compute_contiguity(sizes, strides)`, in logical order: None for a broadcast
    dim (size 1 or stride 0), else whether the dim's stride is the next non-broadcast dim's
    stride times its size (1 for the last)."""
    if len(sizes) != len(strides):
        raise FusionError(f"compute_contiguity: {len(sizes)} sizes but {len(strides)} strides")
    contiguity: list[Any] = [None] * len(sizes)
    inner = None
    for d in reversed(range(len(sizes))):
        if sizes[d] == 1 or strides[d] == 0:
            continue
        contiguity[d] = strides[d] == (1 if inner is None else strides[inner] * sizes[inner])
        inner = d
    return contiguity


def compute_tensor_descriptor(sizes: Sequence[int], strides: Sequence[int]) -> tuple[list[Any], list[int]]:
    """nvFuser's `compute_tensor_descriptor(sizes, strides)`: (contiguity, stride_order).

    stride_order[d] ranks dim d's stride (0 the innermost); dims of stride 0 keep their own
    position in that order. Contiguity is listed in memory order (outermost first): None for
    a broadcast dim (size 1 or stride 0), else whether the dim's stride is the extent of the
    next non-broadcast dim inside it (1 for the innermost)."""
    if len(sizes) != len(strides):
        raise FusionError(f"compute_tensor_descriptor: {len(sizes)} sizes but {len(strides)} strides")
    if any(s < 0 for s in strides):
        raise FusionError(f"compute_tensor_descriptor: negative strides {list(strides)} are not supported")
    rank = len(sizes)
    order = sorted((d for d in range(rank) if strides[d] != 0), key=lambda d: -strides[d])  # stable
    for d in range(rank):
        if strides[d] == 0:
            order.insert(d, d)
    stride_order = [0] * rank
    for position, d in enumerate(order):
        stride_order[d] = rank - 1 - position
    dense = [d for d in order if sizes[d] != 1 and strides[d] != 0]
    contiguity: list[Any] = [None] * rank
    for position, d in enumerate(order):
        if d in dense:
            k = dense.index(d)
            inner = dense[k + 1] if k + 1 < len(dense) else None
            contiguity[position] = strides[d] == (1 if inner is None else strides[inner] * sizes[inner])
    return contiguity, stride_order
