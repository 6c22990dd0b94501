"""fusion-segment: split each fusion group into the fewest kernels one schedule can serve.

Expects IR after `fusion-group` (and usually `fusion-strip-bookend-views`); static or dynamic
sizes (domains are compared by symbolic extents, `extents.py`). Leaves the IR unchanged
except for annotations, so one printout shows the fusion IR with its segmentation (what
nvFuser issue 785 asks for): every op of a group gets `fusion.segment = k`, every group
`fusion.segments = ["reduction", "pointwise", ...]` (the scheduler of each segment; see
`segment_rules.py`), and every graph function `fusion.kernels = n`, the kernels it launches:
its groups' launching segments, plus tensor work left outside groups (one library kernel per
compute op, one copy per copying view or non-contiguous view returned as a result); such an
op outside the groups is a segment of its own, marked with its scheduler
(`fusion.scheduler = "reduction"`).
Segments grow by merging producers into consumers, then siblings (users of one tensor) of
the same kind, pointwise with pointwise and reductions with reductions; merges that no
scheduler can serve, or that would make a cycle between segments, are rejected and logged
on `mlirfuse.segmenter`.
"""

from __future__ import annotations

import logging

from mlir import ir

from mlirfuse.errors import FusionError
from mlirfuse.passes.common import functions
from mlirfuse.passes.extents import Extents, shape_of
from mlirfuse.passes.fusion_group import GROUP_ATTR
from mlirfuse.passes.graph import OpGraph
from mlirfuse.passes.segment_rules import NO_LAUNCH, Rules, is_tensor_compute
from mlirfuse.passes.views import Views

NAME = "fusion-segment"
OPTIONS: dict = {}
SEGMENT_ATTR = "fusion.segment"
SCHEDULERS_ATTR = "fusion.segments"
KERNELS_ATTR = "fusion.kernels"
SCHEDULER_ATTR = "fusion.scheduler"  # on a kernel's op left outside the groups (its own segment)
log = logging.getLogger("mlirfuse.segmenter")


class _Segments:
    """Union-find of one group's ops (its return excluded) into segments."""

    def __init__(self, graph: OpGraph, rules: Rules):
        self.graph = graph
        self.rules = rules
        self.ops = graph.ops[:-1]
        self.parent = list(range(len(self.ops)))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def members(self, root: int) -> list[int]:
        return [i for i in range(len(self.ops)) if self.find(i) == root]

    def units(self) -> dict[int, list[int]]:
        """Each op -> the ops of its segment."""
        segments: dict[int, list[int]] = {}
        for i in range(len(self.ops)):
            segments.setdefault(self.find(i), []).append(i)
        return {i: s for s in segments.values() for i in s}

    def try_merge(self, a: int, b: int, siblings: bool = False) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        left, right = self.members(ra), self.members(rb)
        if siblings and self.rules.has_reduction(left) != self.rules.has_reduction(right):
            log.info("not merging siblings %s and %s: a reduction and pointwise work that is not "
                     "its prologue or epilogue", self.ops[a].name, self.ops[b].name)
            return False
        ok, why = self.rules.serviceable(left + right)
        if not ok:
            log.info("rejected merging segment of %s with segment of %s: %s", self.ops[a].name,
                     self.ops[b].name, why)
            return False
        if self.graph.reaches_outside_and_back(set(left + right), self.units()):
            log.info("rejected merging %s with %s: it would make a cycle between segments",
                     self.ops[a].name, self.ops[b].name)
            return False
        self.parent[max(ra, rb)] = min(ra, rb)
        return True

    def producer_consumer(self) -> bool:
        """Producers into consumers, in program order: prologues into reductions, chains."""
        changed = False
        for consumer in range(len(self.ops)):
            for producer in sorted(self.graph.producers[consumer]):
                changed |= self.try_merge(producer, consumer)
        return changed

    def horizontal(self, block: ir.Block) -> bool:
        """Siblings: the users of one tensor (a group argument or an op result)."""
        changed = False
        values = list(block.arguments) + [r for op in self.ops for r in op.results]
        for v in values:
            if not shape_of(v):
                continue  # 0-d values and index sizes do not make siblings
            users = sorted({u for u in self.graph.users_of.get(v, ()) if u < len(self.ops)})
            for other in users[1:]:
                changed |= self.try_merge(users[0], other, siblings=True)
        return changed

    def depends_on(self, m: int, sources: list[int]) -> bool:
        stack, seen = [m], set()
        while stack:
            n = stack.pop()
            if n in sources:
                return True
            if n not in seen:
                seen.add(n)
                stack.extend(p for p in self.graph.producers[n] if p < len(self.ops))
        return False


def segment_function(func: ir.Operation, extents: Extents, views: Views) -> list[str]:
    """Segment one group: annotate its ops and itself; returns the scheduler of each segment."""
    block = func.regions[0].blocks[0]
    graph = OpGraph(block)
    seg = _Segments(graph, Rules(graph.ops[:-1], extents, views))
    while seg.producer_consumer() | seg.horizontal(block):
        pass
    returned = set(graph.ops[-1].operands)
    schedulers = []
    i64 = ir.IntegerType.get_signless(64)
    for k, root in enumerate(sorted({seg.find(i) for i in range(len(seg.ops))})):
        members = seg.members(root)
        escaping = graph.escaping_results(members)
        schedulers.append(seg.rules.scheduler(members, escaping, [v for v in escaping if v in returned],
                                              seg.depends_on))
        for m in members:
            seg.ops[m].attributes[SEGMENT_ATTR] = ir.IntegerAttr.get(i64, k)
    func.attributes[SCHEDULERS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in schedulers])
    return schedulers


def _graph_kernels(func: ir.Operation, extents: Extents, views: Views, launching: dict[str, int]) -> int:
    """Kernels a graph function launches: its groups' plus tensor work left outside them
    (each a kernel of its own: marked with its scheduler, `fusion.scheduler`)."""
    count = 0
    ops = [op.operation for op in func.regions[0].blocks[0].operations]
    rules = Rules(ops, extents, views)
    for i, op in enumerate(ops):
        if op.name == "func.call":
            count += launching.get(ir.FlatSymbolRefAttr(op.attributes["callee"]).value, 0)
        elif op.name == "func.return":
            count += len({v for v in op.operands if views.layout(v) is not None})  # materialized
        elif any(len(list(r.uses)) for r in op.results) and (is_tensor_compute(op) or op in views.copies):
            count += 1
            results = list(op.results)
            scheduler = rules.scheduler([i], results, results, lambda m, sources: False)
            op.attributes[SCHEDULER_ATTR] = ir.StringAttr.get(scheduler)
    return count


def run(module: ir.Operation) -> None:
    extents, views = Extents(module, GROUP_ATTR), Views(module, GROUP_ATTR)
    launching = {}
    for func in functions(module):
        if GROUP_ATTR in func.attributes:
            schedulers = segment_function(func, extents, views)
            launching[ir.StringAttr(func.attributes["sym_name"]).value] = sum(s not in NO_LAUNCH for s in schedulers)
    i64 = ir.IntegerType.get_signless(64)
    for func in functions(module):
        if GROUP_ATTR not in func.attributes:
            func.attributes[KERNELS_ATTR] = ir.IntegerAttr.get(i64, _graph_kernels(func, extents, views, launching))


def kernel_count(module: ir.Module) -> int:
    """Kernels launched by the module's graph functions, as `fusion-segment` annotated them:
    launching segments of groups, plus tensor compute and copies left outside groups (0-d
    scalar work, shape arithmetic, views and library ops like matmul are not kernels)."""
    graphs = [f for f in functions(module.operation) if GROUP_ATTR not in f.attributes]
    if any(KERNELS_ATTR not in f.attributes for f in graphs):
        raise FusionError("kernel_count: run fusion-segment first")
    return sum(ir.IntegerAttr(f.attributes[KERNELS_ATTR]).value for f in graphs)
