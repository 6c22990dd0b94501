"""linalg-unshare-inits: give every linalg op its own initial value (`linalg.fill` of a
`tensor.empty`) where `cse` made several ops share one.

Expects linalg on tensors (after fusion-to-linalg and cse); leaves it with each `linalg.fill`
(and the `tensor.empty` it fills) used once. Without it, two reductions that start from the
same fill (e.g. `x.sum(-1)` and `(x * x).sum(-1)`) share one destination, and
`eliminate-empty-tensors` + one-shot bufferization then write both results into one output
buffer (a silent wrong answer); with separate inits every result gets its own buffer.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.passes.common import functions, walk_ops

NAME = "linalg-unshare-inits"
OPTIONS: dict = {}
_SHARED = ("linalg.fill", "tensor.empty")


def _unshare(op: ir.Operation) -> None:
    """Clone `op` for every use after its first."""
    uses = [(u.owner, u.operand_number) for u in op.results[0].uses]
    for user, index in uses[1:]:
        user = user.operation if isinstance(user, ir.OpView) else user
        clone = op.clone(ir.InsertionPoint(user))
        user.operands[index] = clone.results[0]


def run(module: ir.Operation) -> None:
    for func in functions(module):
        for name in _SHARED:  # fills first: their clones share the tensor.empty, unshared next
            for op in [o for o in walk_ops(func) if o.name == name and len(o.results)]:  # (a fill of a memref owns it)
                _unshare(op)
