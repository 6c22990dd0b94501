"""output-views-in-place: results that leave through a reshape are computed in the output buffer.

Expects the destination-passing entry point on tensors (after inlining, before
`eliminate-empty-tensors` and `one-shot-bufferize`), whose outputs are written by
`bufferization.materialize_in_destination %result in restrict writable %out`. Where a result
is a reshape (`tensor.reshape`, `tensor.collapse_shape`, `tensor.expand_shape`, or a
`linalg.generic` copy that only inserts size-1 dims, a broadcast of [C] to [1, 1, C]) of a
value `%v` (GELU between bookend reshapes, a transpose between reshapes, a bias gradient
returned with the bias's [1, 1, C] shape), it becomes

    %view = memref.reshape %out(<%v's sizes>)      // the output seen with %v's shape
    bufferization.materialize_in_destination %v in restrict writable %view

A reshape keeps the row-major order of the elements, so this writes the same bytes; and the
kernel computing `%v` then writes the output itself instead of a temporary that a second
kernel copies: the view is built before the `tensor.empty` that sizes `%v` (through linalg
inits), from that op's sizes, so that `eliminate-empty-tensors` makes it `%v`'s buffer.
Where `%v` has no such `tensor.empty` (a reshaped input), the sizes are `tensor.dim`s of
`%v` (`resolve-shaped-type-result-dims` should follow) and the value is copied in.

It is also a correctness fix: upstream empty-tensor elimination follows a result back
through a reshape whose operand has the same type (`tensor<?x?xf32>` to `tensor<?x?xf32>`,
[6, 10] to [10, 6] at run time) and makes the output buffer the destination of the value
before the reshape, with the wrong shape (MLIR 22.1). With no reshape left between a
result and its materialization, that path is never taken.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, tensor

from mlirfuse.passes.common import functions, output_materializations

NAME = "output-views-in-place"
OPTIONS: dict = {}
_RESHAPES = ("tensor.reshape", "tensor.collapse_shape", "tensor.expand_shape")


def _reshaped(value: ir.Value) -> ir.Value | None:
    """The operand of the reshape that produced `value` (or of a copy that only inserts
    size-1 dims, `_unit_dims_copy`), or None."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name in _RESHAPES:
        return op.operands[0]
    return _unit_dims_copy(op)


def _unit_dims_copy(op: ir.Operation) -> ir.Value | None:
    """The input of a linalg.generic that copies it into a tensor.empty with size-1 dims
    inserted (a broadcast to [1, 1, C] of [C]: the same elements in the same order), or None."""
    if op.name != "linalg.generic" or len(op.operands) != 2 or len(op.results) != 1:
        return None
    body = list(op.regions[0].blocks[0].operations)
    source, init = op.operands
    if len(body) != 1 or list(body[0].operands) != [op.regions[0].blocks[0].arguments[0]]:
        return None
    init_owner = init.owner
    if isinstance(init_owner, ir.Block) or init_owner.operation.name != "tensor.empty":
        return None
    in_map, out_map = (ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"]))
    out_t = ir.RankedTensorType(op.results[0].type)
    if out_map != ir.AffineMap.get_identity(out_t.rank) or "reduction" in str(op.attributes["iterator_types"]):
        return None
    kept = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in in_map.results]
    dropped = [d for d in range(out_t.rank) if d not in kept]
    if None in kept or kept != sorted(kept) or any(out_t.is_dynamic_dim(d) or out_t.shape[d] != 1 for d in dropped):
        return None
    return source


def _init_empty(value: ir.Value) -> ir.Operation | None:
    """The `tensor.empty` whose buffer a linalg result is computed in (through the inits of
    linalg ops, e.g. a fill's), or None."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name == "tensor.empty":
        return op
    if not op.name.startswith("linalg.") or "operandSegmentSizes" not in op.attributes:
        return None
    n_inputs = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]
    return _init_empty(op.operands[n_inputs + ir.OpResult(value).result_number])


def _view(out: ir.Value, of: ir.Value, before: ir.Operation) -> ir.Value:
    """The output memref `out` seen with the shape of the tensor `of`, built before the
    `tensor.empty` that sizes `of` where there is one (so that empty-tensor elimination can
    make the view its buffer), else before `before` from `tensor.dim`s of `of`."""
    t = ir.RankedTensorType(of.type)
    index = ir.IndexType.get()
    empty = _init_empty(of)
    dynamic = iter(empty.operands) if empty is not None else None
    with ir.InsertionPoint(empty or before), (empty or before).location:
        sizes = memref.alloc(ir.MemRefType.get([t.rank], index), [], [])
        for d in range(t.rank):
            if not t.is_dynamic_dim(d):
                size = arith.constant(index, t.shape[d])
            else:
                size = next(dynamic) if dynamic is not None else tensor.dim(of, arith.constant(index, d))
            memref.store(size, sizes, [arith.constant(index, d)])
        element = ir.MemRefType(out.type).element_type
        return memref.reshape(ir.MemRefType.get(t.shape, element), out, sizes)


def run(module: ir.Operation) -> None:
    for func in functions(module):
        for op in output_materializations(func):
            source, inner = None, _reshaped(op.operands[0])
            while inner is not None:  # the value before a chain of reshapes
                source, inner = inner, _reshaped(inner)
            if source is None:
                continue
            view = _view(op.operands[1], source, op)
            op.operands[0] = source
            op.operands[1] = view
