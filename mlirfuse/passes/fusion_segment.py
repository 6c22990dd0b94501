"""fusion-segment: split each fusion group into the fewest kernels one schedule can serve.

Expects IR after `fusion-group` (and usually `fusion-strip-bookend-views`). Leaves the IR
unchanged except for annotations, so one printout shows the fusion IR with its segmentation
(what nvFuser issue 785 asks for): every op of a group gets `fusion.segment = k`, and the
group `fusion.segments = ["reduction", "pointwise", ...]`, the scheduler of each segment:
- pointwise: elementwise work over one iteration domain;
- reduction: reductions over one input domain and axes, with pointwise prologue/epilogue;
- normalization: a reduction whose result is broadcast back into work on its input domain;
- transpose: pointwise work containing a permute;
- no-op: metadata only (no launch).
Merges that no scheduler can serve are rejected and logged on `mlirfuse.segmenter`.
"""

from __future__ import annotations

import logging

from mlir import ir

from mlirfuse.passes.common import functions
from mlirfuse.passes.fusion_group import GROUP_ATTR
from mlirfuse.passes.graph import META_ONLY, OpGraph, kind, short_name

NAME = "fusion-segment"
OPTIONS: dict = {}
SEGMENT_ATTR = "fusion.segment"
SCHEDULERS_ATTR = "fusion.segments"
log = logging.getLogger("mlirfuse.segmenter")


def _shape(t: ir.Type) -> str:
    return "x".join("?" if d < 0 else str(d) for d in ir.RankedTensorType(t).shape) \
        if isinstance(t, ir.RankedTensorType) and ir.RankedTensorType(t).rank else "scalar"


class _Segments:
    def __init__(self, graph: OpGraph):
        self.graph = graph
        self.ops = graph.ops[:-1]  # without the return
        self.parent = list(range(len(self.ops)))
        self.reduction_key: dict[int, tuple] = {}
        for i, op in enumerate(self.ops):
            if kind(op) == "reduction":
                axes = str(op.attributes["axes"])
                self.reduction_key[i] = (_shape(op.operands[0].type), axes)

    def domain(self, i: int) -> str:
        op = self.ops[i]
        if kind(op) == "reduction":
            return _shape(op.operands[0].type)
        return _shape(op.results[0].type) if op.results else "scalar"

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            i = self.parent[i]
        return i

    def members(self, root: int) -> list[int]:
        return [i for i in range(len(self.ops)) if self.find(i) == root]

    def serviceable(self, members: list[int]) -> tuple[bool, str]:
        keys = {self.reduction_key[m] for m in members if m in self.reduction_key}
        if len(keys) > 1:
            return False, f"reductions over different domains/axes {sorted(keys)}"
        domains = {self.domain(m) for m in members if short_name(self.ops[m]) not in META_ONLY
                   and short_name(self.ops[m]) != "constant"} - {"scalar"}  # 0-d work goes anywhere
        if not keys and len(self._domain_classes(members, domains)) > 1:
            return False, f"pointwise work over different domains {sorted(domains)}"
        if keys:
            (in_domain, _), = keys
            reduced = {self.domain(m) for m in members if m not in self.reduction_key}
            extra = reduced - {in_domain} - {_shape(self.ops[m].results[0].type)
                                             for m in members if m in self.reduction_key} - {"scalar"}
            if extra:
                return False, f"work over domains {sorted(extra)} besides the reduction's {in_domain}"
        return True, ""

    def _domain_classes(self, members: list[int], domains: set[str]) -> set[str]:
        """Domains joined by a reshape inside the segment count as one (a row-major reshape
        keeps the element order, so one pointwise kernel can serve both sides)."""
        parent = {d: d for d in domains}

        def find(d: str) -> str:
            while parent.setdefault(d, d) != d:
                d = parent[d]
            return d

        for m in members:
            op = self.ops[m]
            if short_name(op) == "reshape":
                parent[find(_shape(op.operands[0].type))] = find(_shape(op.results[0].type))
        return {find(d) for d in domains}

    def try_merge(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        members = self.members(ra) + self.members(rb)
        ok, why = self.serviceable(members)
        if not ok:
            log.info("rejected merging segment of %s with segment of %s: %s",
                     self.ops[a].name, self.ops[b].name, why)
            return
        if self.graph.reaches_outside_and_back(set(members)):
            log.info("rejected merging %s with %s: it would make a cycle between segments",
                     self.ops[a].name, self.ops[b].name)
            return
        self.parent[max(ra, rb)] = min(ra, rb)

    def scheduler(self, members: list[int]) -> str:
        names = [short_name(self.ops[m]) for m in members]
        if all(n in META_ONLY | {"constant", "size"} for n in names):
            return "no-op"
        reductions = [m for m in members if m in self.reduction_key]
        if reductions:
            in_domain = self.reduction_key[reductions[0]][0]
            downstream = any(self.domain(m) == in_domain and m > min(reductions)
                             and m not in self.reduction_key and self._depends_on(m, reductions)
                             for m in members)
            return "normalization" if downstream else "reduction"
        return "transpose" if "permute" in names else "pointwise"

    def _depends_on(self, m: int, sources: list[int]) -> bool:
        stack, seen = [m], set()
        while stack:
            n = stack.pop()
            if n in sources:
                return True
            if n in seen:
                continue
            seen.add(n)
            stack.extend(p for p in self.graph.producers[n] if p < len(self.ops))
        return False


def segment_function(func: ir.Operation) -> list[str]:
    graph = OpGraph(func.regions[0].blocks[0])
    seg = _Segments(graph)
    # Producers first: prologues into reductions, then chains and epilogues.
    for consumer in range(len(seg.ops)):
        for producer in sorted(graph.producers[consumer]):
            seg.try_merge(producer, consumer)
    roots = sorted({seg.find(i) for i in range(len(seg.ops))})
    schedulers = []
    i64 = ir.IntegerType.get_signless(64)
    for k, root in enumerate(roots):
        members = seg.members(root)
        schedulers.append(seg.scheduler(members))
        for m in members:
            seg.ops[m].attributes[SEGMENT_ATTR] = ir.IntegerAttr.get(i64, k)
    func.attributes[SCHEDULERS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in schedulers])
    return schedulers


def run(module: ir.Operation) -> None:
    for func in functions(module):
        if GROUP_ATTR in func.attributes:
            segment_function(func)


def kernel_count(module: ir.Module) -> int:
    """Kernels launched: segments that are not metadata-only, over all groups, plus one per
    compute op left outside groups (single-node off); library ops (matmul) not counted."""
    count = 0
    for func in functions(module.operation):
        if SCHEDULERS_ATTR in func.attributes:
            count += sum(1 for s in ir.ArrayAttr(func.attributes[SCHEDULERS_ATTR])
                         if ir.StringAttr(s).value != "no-op")
        elif GROUP_ATTR not in func.attributes:
            for op in func.regions[0].blocks[0].operations:
                op = op.operation
                if op.name.startswith("fusion.") and kind(op) not in ("library", "index", "constant") \
                        and short_name(op) not in META_ONLY:
                    count += 1
    return count
