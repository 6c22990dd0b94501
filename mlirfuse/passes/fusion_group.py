"""fusion-group: the graph fuser. Groups fusible ops and outlines each group.

Expects fusion IR; leaves each function calling outlined `func.func private @<f>_group<k>`
(marked `fusion.group`) in place of its fusible ops. As nvFuser's graph fuser: producers merge
into consumers in reverse topological order; siblings that share an input merge when
`horizontal` is set (users of one non-scalar tensor); a merge never creates a cycle (a path
leaving the group and coming back, e.g. through a `matmul`) and never gives a group more
than `max-args` inputs+outputs. A value read only for its shape (`fusion.size` of an op
result) is not a group output: the size is first taken from an equal size upstream
(`extents.resolve_sizes`, as nvFuser's removeOutputsUsedOnlyInSize), and ops left unused by
that are erased. Static and dynamic sizes alike.
Library ops (`matmul`, `linear`) and shape arithmetic stay in the caller; index values a
group needs become its `index` arguments. Without `single-node`, a group with one compute
op is not formed (the op stays in the caller, run by a library kernel).
"""

from __future__ import annotations

import logging

from mlir import ir
from mlir.dialects import func

from mlirfuse.passes.common import erase_if_dead, functions, use_owner
from mlirfuse.passes.extents import resolve_sizes, shape_of
from mlirfuse.passes.graph import META_ONLY, OpGraph, is_fusible, short_name

NAME = "fusion-group"
OPTIONS = {
    "horizontal": (bool, True, "merge siblings that share an input"),
    "single-node": (bool, False, "also outline groups of a single compute op"),
    "max-args": (int, 128, "most inputs + outputs of one group (kernel arguments)"),
}
GROUP_ATTR = "fusion.group"
log = logging.getLogger("mlirfuse.fuser")


class _Grouping:
    def __init__(self, graph: OpGraph, max_args: int):
        self.graph = graph
        self.max_args = max_args
        self.parent = {i: i for i, op in enumerate(graph.ops) if is_fusible(op)}

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def members(self, root: int) -> set[int]:
        return {i for i in self.parent if self.find(i) == root}

    def units(self) -> dict[int, list[int]]:
        """Each grouped op -> the ops of its group."""
        groups: dict[int, list[int]] = {}
        for i in self.parent:
            groups.setdefault(self.find(i), []).append(i)
        return {i: g for g in groups.values() for i in g}

    def try_merge(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        members = self.members(ra) | self.members(rb)
        n_args = len(self.graph.external_operands(members)) + len(self.graph.escaping_results(members))
        if n_args > self.max_args:
            log.info("not merging %s into %s: %d kernel arguments > max-args %d",
                     self.graph.ops[a].name, self.graph.ops[b].name, n_args, self.max_args)
            return False
        if self.graph.reaches_outside_and_back(members, self.units()):
            log.info("not merging %s into %s: it would create a cycle", self.graph.ops[a].name,
                     self.graph.ops[b].name)
            return False
        self.parent[ra] = rb
        return True

    def producer_consumer(self) -> None:
        for consumer in reversed(range(len(self.graph.ops))):
            if consumer not in self.parent:
                continue
            changed = True
            while changed:
                changed = False
                group = self.members(self.find(consumer))
                producers = sorted({p for m in group for p in self.graph.producers[m]} - group, reverse=True)
                for p in producers:
                    if p in self.parent and self.try_merge(p, consumer):
                        changed = True
                        break

    def horizontal(self) -> None:
        """Siblings: fusible users of one tensor (an op result or a function argument). As in
        nvFuser, only non-scalar tensors make siblings: ops sharing a 0-d value or an index
        size read no common memory."""
        for value, users in self.graph.users_of.items():
            if not shape_of(value):
                continue
            fusible = sorted({c for c in users if c in self.parent})
            for other in fusible[1:]:
                self.try_merge(other, fusible[0])

    def groups(self) -> list[list[int]]:
        by_root: dict[int, list[int]] = {}
        for i in sorted(self.parent):
            by_root.setdefault(self.find(i), []).append(i)
        return sorted(by_root.values(), key=lambda g: g[0])


def _compute_ops(graph: OpGraph, members: list[int]) -> int:
    return sum(1 for m in members if short_name(graph.ops[m]) not in META_ONLY | {"constant", "cast"})


def _order(graph: OpGraph, groups: list[list[int]]) -> list[list[int]]:
    """Super-nodes (groups and single ops) in a topological order of the contracted graph."""
    node_of = {m: k for k, g in enumerate(groups) for m in g}
    nodes = list(groups)
    for i in range(len(graph.ops)):
        if i not in node_of:
            node_of[i] = len(nodes)
            nodes.append([i])
    preds = [set() for _ in nodes]
    for i, ps in enumerate(graph.producers):
        for p in ps:
            if node_of[p] != node_of[i]:
                preds[node_of[i]].add(node_of[p])
    done: set[int] = set()
    order: list[list[int]] = []
    while len(order) < len(nodes):
        ready = [k for k in range(len(nodes)) if k not in done and preds[k] <= done]
        k = min(ready, key=lambda k: min(nodes[k]))  # stable: earliest original op first
        done.add(k)
        order.append(nodes[k])
    return order


def _outline(parent: ir.Operation, graph: OpGraph, members: list[int], name: str,
             terminator: ir.Operation) -> None:
    ops = [graph.ops[m] for m in members]
    inputs = graph.external_operands(members)
    outputs = graph.escaping_results(members)
    with ir.InsertionPoint(parent), parent.location:
        fn = func.FuncOp(name, ir.FunctionType.get([v.type for v in inputs], [r.type for r in outputs]))
    fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
    fn.attributes[GROUP_ATTR] = ir.UnitAttr.get()
    block = fn.add_entry_block()
    with ir.InsertionPoint(terminator), terminator.location:
        call = func.CallOp(fn, list(inputs))
    inside = set(ops)
    for r, new in zip(outputs, call.results):
        for use in list(r.uses):
            user = use_owner(use)
            if user not in inside:
                user.replace_uses_of_with(r, new)
    for op in ops:
        op.detach_from_parent()
        block.append(op)
        for v, arg in zip(inputs, block.arguments):
            op.replace_uses_of_with(v, arg)
    with ir.InsertionPoint(block), parent.location:
        func.ReturnOp(list(outputs))


def run(module: ir.Operation, horizontal: bool = True, single_node: bool = False,
        max_args: int = 128, **kw: object) -> None:
    single_node = bool(kw.pop("single-node", single_node))
    max_args = int(kw.pop("max-args", max_args))
    for f in list(functions(module)):
        if GROUP_ATTR in f.attributes:
            continue
        erase_if_dead(f, resolve_sizes(f))  # outputs read only for their shape are not computed
        block = f.regions[0].blocks[0]
        graph = OpGraph(block)
        grouping = _Grouping(graph, max_args)
        grouping.producer_consumer()
        if horizontal:
            grouping.horizontal()
        groups = [g for g in grouping.groups() if single_node or _compute_ops(graph, g) > 1]
        terminator = graph.ops[-1]
        fname = ir.StringAttr(f.attributes["sym_name"]).value
        count = 0
        for node in _order(graph, groups):
            if node in groups:
                _outline(f, graph, node, f"{fname}_group{count}", terminator)
                count += 1
            elif graph.ops[node[0]] is not terminator:
                graph.ops[node[0]].move_before(terminator)
