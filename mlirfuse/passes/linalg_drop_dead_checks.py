"""linalg-drop-dead-checks: generics whose results nothing reads are erased though their bodies
hold checks (`cf.assert`), and a body's repeated checks of one condition become one.

Expects linalg on tensors (after elementwise fusion). A gather checks its indices in its body
(`lowering/indexing.lower_gather`), and a `cf.assert` has a side effect, so upstream's dead
code elimination keeps a generic holding one: once elementwise fusion had copied a gather
into its consumers (the embedding into the LayerNorm reading it), the gather itself stayed,
a kernel of its own writing a tensor no one read. Its consumers hold the same check, so
erasing it loses none. Fusion also copies a producer's check into the consumer once for each
value it takes from it; the copies test the same condition, and the first is kept.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.passes.common import body_ops, functions

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
    return any(inner.operation.name in _CHECKS or _has_checks(inner.operation)
               for region in op.regions for block in region.blocks for inner in block.operations)


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


def run(module: ir.Operation) -> None:
    for func in functions(module):
        changed = True
        while changed:
            changed = False
            for op in body_ops(func):
                if op.name == "linalg.generic" and all(not list(r.uses) for r in op.results) and \
                        _has_checks(op) and _only_checks_have_effects(op):
                    op.erase()
                    changed = True
                    break
        for op in body_ops(func):
            if op.name == "linalg.generic" and _has_checks(op):
                _dedupe(op)
