"""The traced computation: a small SSA graph that both frontends build and print as fusion IR.

Frontends record ops here with their inferred dtypes and (symbolic) shapes; `to_mlir`
prints the graph as one `func.func @fusion` in the `fusion` dialect. Everything after that
(passes, backends, the reference evaluator) works on the IR.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from mlirfuse.dtypes import DataType
from mlirfuse.errors import FusionError
from mlirfuse.frontend.symbolic import ConcreteSizeNeeded, Size, SymSize

# Priorities for type promotion (see dtypes.result_type).
SCALAR, ZERO_DIM, DIMENSIONED = 0, 1, 2


@dataclass(frozen=True)
class InputSpec:
    """What a compiled fusion expects of one input: its guard."""

    dtype: DataType
    shape: tuple[int | None, ...]  # None: dynamic extent (never 1 at run time)
    contiguous: bool = True
    scalar: bool = False  # a runtime Python scalar (0-d, weakly typed)
    # The argument is a permutation of a dense layout (`Arg.order`): the fusion reads its
    # contiguous `permute(order)` (the same memory), whose shape `shape` is, and the traced
    # function sees it permuted back. None: the argument is read as it is.
    order: tuple[int, ...] | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(eq=False)
class Node:
    op: str
    inputs: list["Tensor"]
    attrs: dict[str, Any]
    outputs: list["Tensor"] = field(default_factory=list)
    sizes: list[SymSize] = field(default_factory=list)  # dynamic extents of the result


class Fusion:
    """A graph of fusion ops with inputs, outputs and runtime shape constraints."""

    # Python operators on its tensors call recorder(op name, *operands) when set (a
    # FusionDefinition logs them as it logs fd.ops calls).
    recorder: Any = None
    typed_scalars = False  # nvFuser's rule: operations on scalars alone keep their dtypes

    def __init__(self) -> None:
        self.inputs: list[Tensor] = []
        self.specs: list[InputSpec] = []
        self.nodes: list[Node] = []
        self.outputs: list[Tensor] = []
        self.constraints: list[tuple[Size, Size]] = []  # sizes equal at run time
        # (size, least value, what needs it, whether Python would clamp instead: a slice's bounds,
        # which a trace of the static sizes takes)
        self.minimums: list[tuple[Size, int, str, bool]] = []
        self._aliases: dict[SymSize, Size] = {}
        self._next_id = 0

    # -- building ----------------------------------------------------------------------
    def add_input(self, spec: InputSpec) -> "Tensor":
        if spec.dtype.is_complex:
            raise FusionError(f"a {spec.dtype.value} input: complex tensors are offered by FusionDefinition only "
                              "(as pairs of real tensors)")
        pos = len(self.inputs)
        shape = tuple(SymSize.of((pos, d)) if s is None else s for s, d in zip(spec.shape, range(spec.rank)))
        t = Tensor(self, spec.dtype, shape, None, priority=SCALAR if spec.scalar else _priority(shape))
        self.inputs.append(t)
        self.specs.append(spec)
        return t

    def add_node(self, op: str, inputs: Sequence["Tensor"], attrs: dict[str, Any],
                 results: Sequence[tuple[DataType, tuple[Size, ...]]],
                 priority: int | None = None) -> list["Tensor"]:
        for t in inputs:
            if t.fusion is not self:
                raise FusionError(f"{op}: operand belongs to another fusion definition")
        node = Node(op, list(inputs), dict(attrs))
        for dtype, shape in results:
            if dtype.is_complex:
                raise FusionError(f"{op}: unsupported dtype {dtype.value} in a traced function: complex values "
                                  "are offered by FusionDefinition only (as pairs of real tensors)")
            shape = tuple(self.canonical(s) for s in shape)
            _check_size(op, shape)
            node.outputs.append(Tensor(self, dtype, shape, node,
                                       priority=_priority(shape) if priority is None else priority))
        self.nodes.append(node)
        return node.outputs

    def add_output(self, t: "Tensor") -> None:
        if not isinstance(t, Tensor) or t.fusion is not self:
            raise FusionError(f"add_output: expected a tensor of this fusion, got {t!r}")
        self.outputs.append(t)

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # -- symbolic sizes ----------------------------------------------------------------
    def canonical(self, size: Size) -> Size:
        while isinstance(size, SymSize) and size in self._aliases:
            size = self._aliases[size]
        return size

    def unify(self, a: Size, b: Size, what: str) -> Size:
        """Sizes that must match: equal statically, or recorded as a runtime constraint."""
        a, b = self.canonical(a), self.canonical(b)
        if a == b:
            return a
        if isinstance(a, int) and isinstance(b, int):
            raise FusionError(f"{what}: sizes {a} and {b} do not match")
        self.constraints.append((a, b))
        # The representative is the simpler size (an int, else fewer factors), so that no
        # extent is ever aliased to a product containing it.
        if isinstance(a, SymSize) and (isinstance(b, int) or (len(b.factors), abs(b.offset)) < (len(a.factors),
                                                                                          abs(a.offset))):
            a, b = b, a
        assert isinstance(b, SymSize)
        self._aliases[b] = a
        return a

    def require_at_least(self, size: Size, least: int, what: str, clamps: bool = False) -> None:
        """A size that must be >= `least`: checked now if static, else at every call. `clamps`:
        Python's answer for a smaller size is not an error but another trace (a slice past the
        end is empty): the call raises `StaticTraceNeeded`, which `jit` answers with a trace of
        the call's static sizes."""
        size = self.canonical(size)
        if isinstance(size, int):
            if size < least:
                raise FusionError(f"{what} (size {size}, needs {least})")
        elif least > 0:
            self.minimums.append((size, least, what, clamps))

    # -- printing ----------------------------------------------------------------------
    def to_mlir(self) -> str:
        from mlirfuse.frontend.printer import print_fusion

        return print_fusion(self)

    def __str__(self) -> str:
        return self.to_mlir()


MAX_ELEMENTS = 2 ** 56  # far beyond any memory; keeps index arithmetic from overflowing


def _check_size(op: str, shape: tuple[Size, ...]) -> None:
    static = [s for s in shape if isinstance(s, int)]
    if any(s < 0 for s in static):
        raise FusionError(f"{op}: negative size in shape {list(shape)}")
    if math.prod(static) > MAX_ELEMENTS or any(s > MAX_ELEMENTS for s in static):
        raise FusionError(f"{op}: result shape {[str(s) for s in shape]} is too large "
                          f"(more than 2**56 elements)")


def _priority(shape: tuple[Size, ...]) -> int:
    return DIMENSIONED if shape else ZERO_DIM


class Shape(tuple):
    """A traced tensor's sizes: a tuple, also callable as nvFuser's `t.shape()`."""

    def __call__(self) -> "Shape":
        return self


class Tensor:
    """A value of a fusion being traced; supports Python operators."""

    __array_priority__ = 1000  # numpy scalars defer to our operators

    def __init__(self, fusion: Fusion, dtype: DataType, shape: tuple[Size, ...],
                 node: Node | None, priority: int):
        self.fusion = fusion
        self.dtype = dtype
        self.shape = Shape(shape)
        self.node = node
        self.priority = priority
        self.id = fusion.new_id()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def size(self, dim: int) -> Size:
        from mlirfuse.frontend.ops import normalize_dim

        return self.shape[normalize_dim(dim, self.ndim, "size")]

    def numel(self) -> Size:
        result: Size = 1
        for s in self.shape:
            result = s * result if isinstance(s, SymSize) else result * s
        return result

    def __repr__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"Tensor(T{self.id}, {self.dtype.value}[{dims}])"

    def __bool__(self) -> bool:
        raise FusionError("a traced tensor has no truth value (use mlirfuse.ops.where)")

    def __len__(self) -> int:
        if not self.shape:
            raise FusionError("len() of a 0-d tensor")
        first = self.shape[0]
        if isinstance(first, SymSize):
            raise ConcreteSizeNeeded("len() of a tensor with a symbolic first dimension needs its concrete size")
        return first

    def __hash__(self) -> int:
        return id(self)

    # Python operators are attached by frontend/ops.py (they need the op functions).


# -- the fusion being traced (explicit scope, not module state) ----------------------------
_CURRENT: contextvars.ContextVar[Fusion | None] = contextvars.ContextVar("mlirfuse_fusion", default=None)


@contextlib.contextmanager
def tracing(fusion: Fusion) -> Iterator[Fusion]:
    token = _CURRENT.set(fusion)
    try:
        yield fusion
    finally:
        _CURRENT.reset(token)


def current_fusion() -> Fusion | None:
    return _CURRENT.get()


def static_numel(shape: Sequence[Size]) -> int | None:
    if any(isinstance(s, SymSize) for s in shape):
        return None
    return math.prod(shape)  # type: ignore[arg-type]
