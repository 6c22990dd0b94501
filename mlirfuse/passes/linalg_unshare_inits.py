"""linalg-unshare-inits: give every linalg op its own initial value (`linalg.fill` of a
`tensor.empty`) where `cse` made several ops share one.

Expects linalg on tensors (after fusion-to-linalg and cse); leaves it with each `linalg.fill`
(and the `tensor.empty` it fills) used once. Without it, two reductions that start from the
same fill (e.g. `x.sum(-1)` and `(x * x).sum(-1)`) share one destination, and
`eliminate-empty-tensors` + one-shot bufferization then write both results into one output
buffer (a silent wrong answer); with separate inits every result gets its own buffer.

A frame built by `tensor.insert_slice`s (a pad's border: fills inserted into an empty
tensor) that `cse` made the destination of several inserts is cloned alike, one per
destination use. Two padded outputs of one value, `pad(v)` and `pad(v.mT)`, shared one frame:
empty-tensor elimination rooted it in the first output's buffer, bufferization kept the
second output's value there and copied the first's in, after which the second output was
copied from that buffer, the first output's value (a silent wrong answer, MLIR 22.1; fuzz
seed 730572).
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


def _destination_uses(value: ir.Value) -> list[tuple[ir.Operation, int]]:
    """The uses of `value` that write into it: an insert's destination, a linalg op's init."""
    found = []
    for use in value.uses:
        user = use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner
        index = use.operand_number
        if user.name == "tensor.insert_slice" and index == 1 \
                or user.name.startswith("linalg.") and index >= len(getattr(user.opview, "inputs", user.operands)):
            found.append((user, index))
    return found


def _unshare_frames(func: ir.Operation) -> None:
    """Clone each `tensor.insert_slice` for every destination use after its first; users
    first, so that the frame each clone writes into is unshared in its turn."""
    for op in reversed([o for o in walk_ops(func) if o.name == "tensor.insert_slice"]):
        for user, index in _destination_uses(op.results[0])[1:]:
            clone = op.clone(ir.InsertionPoint(user))
            user.operands[index] = clone.results[0]


def run(module: ir.Operation) -> None:
    for func in functions(module):
        _unshare_frames(func)
        for name in _SHARED:  # fills first: their clones share the tensor.empty, unshared next
            for op in [o for o in walk_ops(func) if o.name == name and len(o.results)]:  # (a fill of a memref owns it)
                _unshare(op)
