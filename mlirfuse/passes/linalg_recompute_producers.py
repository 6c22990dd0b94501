"""linalg-recompute-producers: a cheap pointwise producer with several consumers is cloned
for each, so that elementwise fusion recomputes it inside them instead of writing it out.

Expects linalg on tensors after elementwise fusion; run `linalg-fuse-elementwise-ops` next.
Upstream elementwise fusion only fuses a producer with a single use: a broadcast of a
[rows, 1] tensor to [rows, C], or `g * w`, read by two kernels (a column reduction and a
row chain, as in RMSNorm's backward) is materialized, a full tensor written and read back
twice, where recomputing it costs an operation or two per element. Taken: single-result
generics with only parallel loops, an identity output map, at most `max-ops` arith ops
an element besides conversions (no math functions; conversions and `linalg.index` are free:
the sum of three bfloat16 gradients in float32 is recomputed, and masks computed from loop
indices, as the gradients of slices and cats have, are recomputed too; ops on values that do
not vary along the innermost loop, a row's label or a scalar's quotient, are computed once for
the elements a thread holds along a row, and are not counted: a cross-entropy's one-hot
gradient, where(iota == label, -1, 0) * scale, read by the row sum and the gradient's own
generic, is recomputed by each; so are reads of a tensor at computed
indices, `tensor.extract` under `scf.if`: a causal LM's labels shifted by one, read by the
loss's reductions and by the masks kept for the backward, are read from the input by each
instead of written out by a kernel of their own) that do not read the output's old value,
used as an input of two or more linalg.generic ops (other uses, e.g. as a result, keep the
original).
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.passes.common import body_ops, functions, use_owner, walk_ops

NAME = "linalg-recompute-producers"
OPTIONS = {"max-ops": (int, 4, "most arith ops (conversions aside) in a producer's body for it to be recomputed")}
CONVERSIONS = frozenset(f"arith.{op}" for op in ("extf", "truncf", "extsi", "extui", "trunci", "sitofp", "uitofp",
                                                  "fptosi", "fptoui", "bitcast", "index_cast"))


def _cheap(op: ir.Operation, max_ops: int) -> bool:
    if op.name != "linalg.generic" or len(op.results) != 1:
        return False
    if any("reduction" in str(it) for it in ir.ArrayAttr(op.attributes["iterator_types"])):
        return False
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if maps[-1] != ir.AffineMap.get_identity(maps[-1].n_dims):
        return False
    block = op.regions[0].blocks[0]
    inner = [o for top in list(block.operations)[:-1] for o in walk_ops(top.operation)]  # the yield aside
    # loop indices are free; reads of a source at computed indices (a slice, pad or shift
    # of an input: tensor.extract, under an scf.if where an index may fall outside) cost
    # what reading the materialized result would
    arith = [o for o in inner if o.name not in ("linalg.index", "tensor.extract", "scf.if", "scf.yield")]
    varying = _varying_ops(op, maps)
    if any(not o.name.startswith("arith.") and o in varying for o in arith):
        return False  # (a math function of a row's value, log_softmax's finite maximum, is once a row)
    # conversions are free too: they read an input of another type (the sum of three bf16
    # gradients in float32, Llama's RMSNorm backward after the q, k and v projections, is
    # two adds, not five ops; written out it cost a launch and a float32 tensor written and
    # read back twice)
    counted = [o for o in arith if o.name not in CONVERSIONS and o in varying]
    return len(counted) <= max_ops and not list(block.arguments[-1].uses)


def _varying_ops(op: ir.Operation, maps: list[ir.AffineMap]) -> list[ir.Operation]:
    """The ops of the body whose value varies along the innermost loop: those reading (through
    other ops) an input indexed by it or its `linalg.index`; ops nested in regions count as
    varying."""
    block = op.regions[0].blocks[0]
    innermost = maps[-1].n_dims - 1
    n_inputs = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]
    varying = {block.arguments[k] for k in range(n_inputs) if any(_uses_dim(r, innermost) for r in maps[k].results)}
    found = []
    for top in list(block.operations)[:-1]:
        top = top.operation
        index = top.name == "linalg.index" and ir.IntegerAttr(top.attributes["dim"]).value == innermost
        if index or top.regions or any(v in varying for v in top.operands):
            found += walk_ops(top)
            varying.update(top.results)
    return found


def _uses_dim(e: ir.AffineExpr, d: int) -> bool:
    if isinstance(e, ir.AffineDimExpr):
        return e.position == d
    return isinstance(e, ir.AffineBinaryExpr) and (_uses_dim(e.lhs, d) or _uses_dim(e.rhs, d))


def _generic_inputs(value: ir.Value) -> list[tuple[ir.Operation, int]]:
    """(consumer, operand index) of the uses of `value` as an input of a linalg.generic."""
    found = []
    for use in value.uses:
        user = use_owner(use)
        if user.name != "linalg.generic":
            continue
        n_inputs = ir.DenseI32ArrayAttr(user.attributes["operandSegmentSizes"])[0]
        if use.operand_number < n_inputs:
            found.append((user, use.operand_number))
    return found


def run(module: ir.Operation, max_ops: int = 4) -> None:
    for func in functions(module):
        # Last producer first: cloning a producer adds uses to its own producers (RMSNorm's
        # backward: `dy / broadcast(rstd)` read by two kernels, the broadcast by three), which
        # must be counted when their turn comes, or they stay shared and written out.
        for op in reversed(body_ops(func)):
            if not _cheap(op, max_ops):
                continue
            consumers = _generic_inputs(op.results[0])
            for user, index in consumers[1:]:  # the first keeps the original
                clone = op.clone(ir.InsertionPoint(user))
                user.operands[index] = clone.results[0]
