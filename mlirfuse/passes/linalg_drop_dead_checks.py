"""linalg-drop-dead-checks: generics whose results nothing reads are erased though their bodies
hold checks (`cf.assert`), copies of one checked generic become one, and a body's repeated
checks of one condition become one.

Expects linalg on tensors (after elementwise fusion). A gather checks its indices in its body
(`lowering/indexing.lower_gather`), and a `cf.assert` has a side effect, so upstream's dead
code elimination keeps a generic holding one: once elementwise fusion had copied a gather
into its consumers (the embedding into the LayerNorm reading it), the gather itself stayed,
a kernel of its own writing a tensor no one read. Its consumers hold the same check, so
erasing it loses none, unless they read it only in part (a slice of its rows): such a gather
carries `mlirfuse.keep_checks` (`lowering/indexing.lower_gather`) and stays. Fusion also
copies a producer's check into the consumer once for each value it takes from it; the
copies test the same condition, and the first is kept.
`linalg-recompute-producers` clones a producer for each consumer, and a clone fusion cannot
fold into its consumer (one read through a broadcast) stays; `cse` merges such clones back,
but not those holding a check. GPT-2's position-embedding gather was computed three times,
and its LayerNorm's reductions then lay apart, one starting from a fill in memory.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.lowering.indexing import KEEP_CHECKS
from mlirfuse.passes.common import body_ops, defining_op, functions, has_uses, walk_ops

NAME = "linalg-drop-dead-checks"
OPTIONS: dict = {}
_CHECKS = ("cf.assert",)


def _only_checks_have_effects(op: ir.Operation) -> bool:
    """The body's side effects are its checks alone (no store, call or other op with one)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                name = inner.operation.name
                if name in _CHECKS or name.startswith(("arith.", "math.", "linalg.index", "linalg.yield",
                                                       "tensor.extract", "tensor.dim", "scf.yield")):
                    continue
                if name in ("scf.if", "scf.for") and _only_checks_have_effects(inner.operation):
                    continue
                return False
    return True


def _has_checks(op: ir.Operation) -> bool:
    return any(inner.name in _CHECKS for inner in walk_ops(op))


def _dedupe(op: ir.Operation) -> None:
    """Within each block: a check of a condition already checked (same value, same message)
    is erased."""
    for region in op.regions:
        for block in region.blocks:
            seen = set()
            for inner in list(block.operations):
                o = inner.operation
                if o.name in _CHECKS:
                    key = (o.operands[0], str(o.attributes["msg"]))
                    if key in seen:
                        o.erase()
                    else:
                        seen.add(key)
                else:
                    _dedupe(o)


def _attributes(op: ir.Operation) -> dict[str, str]:
    return {named.name: str(named.attr) for named in (op.attributes[k] for k in range(len(op.attributes)))}


def _equal_constants(x: ir.Value, y: ir.Value) -> bool:
    """Two constants of one value, or two `tensor.empty` of one type and sizes (clones and
    fusion leave copies of them until `cse`)."""
    dx, dy = defining_op(x), defining_op(y)
    return dx is not None and dy is not None and dx.name == dy.name and x.type == y.type and \
        (dx.name == "arith.constant" and _attributes(dx) == _attributes(dy)
         or dx.name == "tensor.empty" and list(dx.operands) == list(dy.operands))


def _same(a: ir.Operation, b: ir.Operation, inner: dict) -> bool:
    """`b` computes what `a` does: the same op, attributes and result types, operands equal or
    (inside the bodies compared) corresponding, and regions alike. `inner`: b's values
    defined inside the compared bodies -> a's."""
    if a.name != b.name or len(a.operands) != len(b.operands) or len(a.regions) != len(b.regions) or \
            [r.type for r in a.results] != [r.type for r in b.results] or \
            _attributes(a) != _attributes(b):
        return False
    if any(inner.get(y, y) != x and not _equal_constants(x, y) for x, y in zip(a.operands, b.operands)):
        return False
    for ra, rb in zip(a.regions, b.regions):
        blocks_a, blocks_b = list(ra.blocks), list(rb.blocks)
        if len(blocks_a) != len(blocks_b):
            return False
        for ba, bb in zip(blocks_a, blocks_b):
            ops_a, ops_b = list(ba.operations), list(bb.operations)
            if [x.type for x in ba.arguments] != [y.type for y in bb.arguments] or len(ops_a) != len(ops_b):
                return False
            inner.update(zip(bb.arguments, ba.arguments))
            for x, y in zip(ops_a, ops_b):
                if not _same(x.operation, y.operation, inner):
                    return False
                inner.update(zip(y.results, x.results))
    return True


def _merge_copies(func: ir.Operation) -> None:
    """A checked generic of the function's body computing what an earlier one does is replaced by it."""
    kept: list[ir.Operation] = []
    for op in body_ops(func):
        if op.name != "linalg.generic" or not _has_checks(op):
            continue
        same = next((k for k in kept if _same(k, op, {})), None)
        if same is None:
            kept.append(op)
            continue
        for old, new in zip(op.results, same.results):
            old.replace_all_uses_with(new)
        op.erase()


def run(module: ir.Operation) -> None:
    for func in functions(module):
        for op in reversed(body_ops(func)):  # consumers first: a producer they alone read is dead next
            if op.name == "linalg.generic" and not has_uses(op) and KEEP_CHECKS not in op.attributes and \
                    _has_checks(op) and _only_checks_have_effects(op):
                op.erase()
        _merge_copies(func)
        for op in body_ops(func):
            if op.name == "linalg.generic" and _has_checks(op):
                _dedupe(op)
