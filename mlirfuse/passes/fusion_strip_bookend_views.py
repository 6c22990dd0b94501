"""fusion-strip-bookend-views: meta-only ops at a group's edges leave the group.

Expects IR after `fusion-group` (static or dynamic sizes; a view's index operands move with
it). A reshape, permute, squeeze, unsqueeze, expand or broadcast_in_dim whose operand is a
group input (input side), or whose result is only a group output (output side), moves to
the caller, where it is a view (no kernel); views inside a group stay, and so do views that
copy (a reshape of a permuted or broadcast view, `views.py`) and permutes/broadcasts of
outputs. Moving a view out can add a group argument (a view of an input the group also
reads directly): a move that would take a group above `max-args` inputs + outputs is not
made (pass the same limit as to fusion-group). Each group is inlined back, its edge views
peeled off repeatedly, and the rest outlined again under the same name; a group left with
no op disappears.
"""

from __future__ import annotations

import logging

from mlir import ir

from mlirfuse.passes.common import functions
from mlirfuse.passes.fusion_group import GROUP_ATTR, _outline
from mlirfuse.passes.graph import META_ONLY, OpGraph, owner, short_name
from mlirfuse.passes.views import Views, transfer

NAME = "fusion-strip-bookend-views"
OPTIONS = {"max-args": (int, 128, "most inputs + outputs of a group after stripping (as fusion-group's)")}
log = logging.getLogger("mlirfuse.fuser")


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


def _arguments(ops: list[ir.Operation]) -> int:
    """Inputs + outputs the ops would have as one group (in the caller block, inlined)."""
    inside = set(ops)
    inputs = {v for op in ops for v in op.operands if owner(v) not in inside}
    outputs = [r for op in ops for r in op.results if any(_user(u) not in inside for u in r.uses)]
    return len(inputs) + len(outputs)


def _peel(members: list[ir.Operation], layouts: dict, max_args: int) -> tuple[list, list, list]:
    """Split inlined ops into input-side views, the group proper, output-side views.

    Input side: a view of a value from outside the group, unless it copies (a reshape of a
    permuted or broadcast view: it stays, e.g. a transpose kernel). Output side: a view of a
    group value used only outside, if it keeps a contiguous value contiguous (permutes and
    broadcasts of outputs stay: the group writes them). A peel that would take the group
    above `max_args` arguments (and above what it has) is skipped.
    """
    inside = list(members)
    before, after = [], []
    layouts = dict(layouts)
    current = _arguments(inside)
    changed = True
    while changed:
        changed = False
        ids = set(inside)
        for op in list(inside):
            if not op.name.startswith("fusion.") or short_name(op) not in META_ONLY:
                continue
            operand = op.operands[0]
            users = [_user(u) for r in op.results for u in r.uses]
            input_side = owner(operand) not in ids
            if input_side:
                layout, copies = transfer(op, layouts.get(operand))
                if copies:
                    continue
            else:
                layout, copies = transfer(op, None)
                if layout is not None or any(u in ids for u in users):
                    continue
            rest = [o for o in inside if o is not op]
            n = _arguments(rest)
            if n > max(max_args, current):
                log.info("not moving %s out of its group: %d arguments > max-args %d", op.name, n, max_args)
                continue
            inside, current = rest, n
            ids.discard(op)
            layouts[op.results[0]] = layout
            (before if input_side else after).append(op)
            changed = True
    position = {op: i for i, op in enumerate(members)}
    return sorted(before, key=position.get), inside, sorted(after, key=position.get)


def run(module: ir.Operation, max_args: int = 128, **kw: object) -> None:
    max_args = int(kw.pop("max-args", max_args))
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
            views = Views(module, GROUP_ATTR)
            layouts = {v: views.layout(v) for v in call.operands}
            members = _inline(call, group)
            before, inside, after = _peel(members, layouts, max_args)
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
