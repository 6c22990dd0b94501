"""fusion-strip-bookend-views: meta-only ops at a group's edges leave the group.

Expects IR after `fusion-group`. A reshape, permute, squeeze, unsqueeze, expand or
broadcast_in_dim whose operand is a group input (input side), or whose result is only a
group output (output side), moves to the caller, where it is a view (no kernel); views
inside a group stay. Each group is inlined back, its edge views peeled off repeatedly, and
the rest outlined again under the same name.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.passes.common import functions
from mlirfuse.passes.fusion_group import GROUP_ATTR, _outline
from mlirfuse.passes.graph import META_ONLY, OpGraph, owner, short_name

NAME = "fusion-strip-bookend-views"
OPTIONS: dict = {}


def _user(use: ir.OpOperand) -> ir.Operation:
    u = use.owner
    return u.operation if isinstance(u, ir.OpView) else u


def _inline(call: ir.Operation, group: ir.Operation) -> list[ir.Operation]:
    """Move the group's body to the call site; returns the moved ops."""
    block = group.regions[0].blocks[0]
    moved = []
    ret = None
    for op in list(block.operations):
        op = op.operation
        if op.name == "func.return":
            ret = op
            continue
        op.move_before(call)
        for arg, value in zip(block.arguments, call.operands):
            op.replace_uses_of_with(arg, value)
        moved.append(op)
    assert ret is not None
    for result, value in zip(call.results, ret.operands):
        if owner(value) is None:  # a group argument returned as is
            value = call.operands[list(block.arguments).index(value)]
        result.replace_all_uses_with(value)
    return moved


STRIDED = {"permute", "expand", "broadcast_in_dim"}  # views that are no longer contiguous
ALWAYS_VIEWS = {"squeeze", "unsqueeze"}


def _peel(members: list[ir.Operation], group_inputs: set) -> tuple[list, list, list]:
    """Split inlined ops into input-side views, the group proper, output-side views.

    Input side: any view of a group input, except a reshape of a strided view (that needs a
    copy: it stays, e.g. a transpose kernel). Output side: reshape/squeeze/unsqueeze of a
    group output (which is contiguous); permutes and broadcasts of outputs stay in the group.
    """
    inside = list(members)
    before, after = [], []
    strided: set = set()
    changed = True
    while changed:
        changed = False
        ids = set(inside)
        for op in list(inside):
            if not op.name.startswith("fusion.") or short_name(op) not in META_ONLY:
                continue
            name = short_name(op)
            operand = op.operands[0]
            users = [_user(u) for r in op.results for u in r.uses]
            if owner(operand) not in ids:
                if name == "reshape" and operand in strided:
                    continue
                if name in STRIDED or (name in ALWAYS_VIEWS and operand in strided):
                    strided.add(op.results[0])
                inside.remove(op)
                ids.discard(op)
                before.append(op)
                changed = True
            elif all(u not in ids for u in users) and name not in STRIDED:
                inside.remove(op)
                ids.discard(op)
                after.append(op)
                changed = True
    position = {op: i for i, op in enumerate(members)}
    return sorted(before, key=position.get), inside, sorted(after, key=position.get)


def run(module: ir.Operation) -> None:
    groups = {ir.StringAttr(f.attributes["sym_name"]).value: f
              for f in functions(module) if GROUP_ATTR in f.attributes}
    for parent in list(functions(module)):
        if GROUP_ATTR in parent.attributes:
            continue
        block = parent.regions[0].blocks[0]
        calls = [op.operation for op in block.operations if op.operation.name == "func.call"
                 and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in groups]
        for call in calls:
            name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            group = groups[name]
            members = _inline(call, group)
            before, inside, after = _peel(members, set(call.operands))
            anchor = call
            for op in before:
                op.move_before(inside[0] if inside else anchor)
            for op in after:
                op.move_before(anchor)
            call.erase()
            group.erase()
            if inside:
                graph = OpGraph(block)
                _outline(parent, graph, [graph.index[op] for op in inside], name, inside[0])
