"""A dependency graph over one function's ops, shared by the grouping and segmentation passes."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from mlir import ir

from mlirfuse.dialects.optable import OPS

META_ONLY = {"reshape", "permute", "squeeze", "unsqueeze", "expand", "broadcast_in_dim"}
SHAPE_OPS = {"size"}


def kind(op: ir.Operation) -> str:
    """The op table's kind of a fusion op ('library' ops are never fused), 'index' for
    shape arithmetic, 'other' for anything else."""
    if op.name.startswith("fusion."):
        name = op.name[len("fusion."):]
        if name in SHAPE_OPS:
            return "index"
        return OPS[name].kind if name in OPS else "other"
    if op.name.startswith("arith.") and all(isinstance(r.type, ir.IndexType) for r in op.results):
        return "index"
    return "other"


def short_name(op: ir.Operation) -> str:
    return op.name.split(".", 1)[1]


def is_fusible(op: ir.Operation) -> bool:
    return op.name.startswith("fusion.") and kind(op) not in ("library", "index", "other")


def owner(value: ir.Value) -> ir.Operation | None:
    o = value.owner
    if isinstance(o, ir.OpView):
        o = o.operation
    return o if isinstance(o, ir.Operation) else None


class OpGraph:
    """Ops of a block, numbered in order, with producer/consumer edges between them."""

    def __init__(self, block: ir.Block):
        # Values map to their producer by walking results once: `Value.owner` would try to
        # import a Python module for the (IRDL) fusion dialect on every call.
        self.ops = [op.operation for op in block.operations]
        self.index = {op: i for i, op in enumerate(self.ops)}
        self.producer_of = {r: i for i, op in enumerate(self.ops) for r in op.results}
        self.users_of: dict[ir.Value, list[int]] = {}
        self.producers: list[set[int]] = [set() for _ in self.ops]
        self.consumers: list[set[int]] = [set() for _ in self.ops]
        for i, op in enumerate(self.ops):
            for v in op.operands:
                self.users_of.setdefault(v, []).append(i)
                p = self.producer_of.get(v)
                if p is not None:
                    self.producers[i].add(p)
                    self.consumers[p].add(i)

    def reaches_outside_and_back(self, members: set[int],
                                 units: Mapping[int, Sequence[int]] | None = None) -> bool:
        """True if some path leaves `members` and re-enters it (merging would make a cycle).
        `units`: node -> the nodes already merged with it (absent: alone). A path that reaches
        one node of a unit goes on from all of them, since they become one kernel: two groups
        each free of such paths can still feed each other (a1 -> b1 and b2 -> a2), a cycle
        between the kernels that only the contracted graph shows."""
        units = units or {}
        frontier = [c for m in members for c in self.consumers[m] if c not in members]
        seen: set[int] = set()
        while frontier:
            n = frontier.pop()
            if n in seen:
                continue
            unit = units.get(n, (n,))
            seen.update(unit)
            for u in unit:
                for c in self.consumers[u]:
                    if c in members:
                        return True
                    if c not in seen:
                        frontier.append(c)
        return False

    def external_operands(self, members: Iterable[int]) -> list[ir.Value]:
        """Values used by `members` but defined outside them, in first-use order."""
        inside = set(members)
        seen: list[ir.Value] = []
        for m in sorted(inside):
            for v in self.ops[m].operands:
                if self.producer_of.get(v) not in inside and v not in seen:
                    seen.append(v)
        return seen

    def escaping_results(self, members: Iterable[int]) -> list[ir.Value]:
        """Results of `members` used outside them, in definition order."""
        inside = set(members)
        out = []
        for m in sorted(inside):
            for r in self.ops[m].results:
                if any(u not in inside for u in self.users_of.get(r, ())):
                    out.append(r)
        return out
