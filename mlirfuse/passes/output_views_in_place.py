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

A result built by `tensor.insert_slice`s into a `tensor.empty` (a pad after a reduction,
`indexing.lower_pad`: the fills of its border and its operand) is materialized slice by
slice, each slice's source into a `memref.subview` of the output: the operand's producer
writes the padded output's interior (rows of their own stride), the fills its border, and no
kernel copies the operand into the padded buffer (BERT's masked-LM gradient, padded for the
matmul after it). The interior's view is built before the `tensor.empty` its source is
computed in, from that op's sizes, as above.

It is also a correctness fix: upstream empty-tensor elimination follows a result back
through a reshape whose operand has the same type (`tensor<?x?xf32>` to `tensor<?x?xf32>`,
[6, 10] to [10, 6] at run time) and makes the output buffer the destination of the value
before the reshape, with the wrong shape (MLIR 22.1). With no reshape left between a
result and its materialization, that path is never taken.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, bufferization, memref, tensor

from mlirfuse.passes.common import body_ops, functions, output_materializations

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


def _identity_reshapes(func: ir.Operation) -> None:
    """Drop `tensor.reshape`s between equal static types (what moving reshapes onto
    elementwise producers leaves, [64, 30522] to [64, 30522]): bufferized, a reshape of a
    strided buffer (a view of a padded output) would be a copy."""
    for op in [o for o in body_ops(func) if o.name == "tensor.reshape"]:
        t = ir.RankedTensorType(op.results[0].type)
        if op.operands[0].type == t and t.has_static_shape:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()


def _inserted_slices(value: ir.Value) -> list[ir.Operation] | None:
    """The `tensor.insert_slice`s (unit strides) that build `value` into a `tensor.empty`,
    last first (a pad in place: its fills and its operand), or None."""
    slices = []
    while True:
        owner = value.owner
        if isinstance(owner, ir.Block):
            return None
        op = owner.operation
        if op.name == "tensor.empty":
            return slices or None
        if op.name != "tensor.insert_slice" or len(list(op.results[0].uses)) != 1 or \
                any(s != 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"])):
            return None
        slices.append(op)
        value = op.operands[1]


def _slice_view(out: ir.Value, piece: ir.Operation, before: ir.Operation) -> ir.Value:
    """`memref.subview` of the output at the slice's offsets and sizes, built before `before`."""
    n_off = len([v for v in ir.DenseI64ArrayAttr(piece.attributes["static_offsets"]) if v == _DYNAMIC])
    dynamic = list(piece.operands)[2:]
    offsets = _fixed(ir.DenseI64ArrayAttr(piece.attributes["static_offsets"]), dynamic[:n_off])
    sizes = _fixed(ir.DenseI64ArrayAttr(piece.attributes["static_sizes"]), dynamic[n_off:])
    with ir.InsertionPoint(before), before.location:
        return memref.subview(out, offsets, sizes, [1] * len(sizes),
                              result_type=_subview_type(ir.MemRefType(out.type), offsets, sizes))


def _subview_type(source: ir.MemRefType, offsets: list, sizes: list) -> ir.MemRefType:
    """The type `memref.subview` infers for unit strides of a buffer of the identity layout
    (its strides; the offset their sum, dynamic where a term is, 0 absorbing)."""
    rank, shape = source.rank, source.shape
    strides, stride = [0] * rank, 1
    for d in reversed(range(rank)):
        strides[d] = stride
        stride = _DYNAMIC if stride == _DYNAMIC or source.is_dynamic_dim(d) else stride * shape[d]
    offset = 0
    for o, st in zip(offsets, strides):
        term = 0 if o == 0 or st == 0 else _DYNAMIC if not isinstance(o, int) or st == _DYNAMIC else o * st
        offset = _DYNAMIC if _DYNAMIC in (offset, term) else offset + term
    result_shape = [s if isinstance(s, int) else _DYNAMIC for s in sizes]
    return ir.MemRefType.get(result_shape, source.element_type, ir.StridedLayoutAttr.get(offset, strides))


_DYNAMIC = -(1 << 63)  # ShapedType's dynamic size or offset in static lists


def _fixed(static: ir.DenseI64ArrayAttr, dynamic: list[ir.Value]) -> list:
    it = iter(dynamic)
    return [next(it) if v == _DYNAMIC else int(v) for v in static]


def _dominates_empty(piece: ir.Operation) -> ir.Operation | None:
    """The `tensor.empty` the slice's source is computed in, where the slice's offsets and
    sizes are known before it (constants, or the empty's own sizes), else None."""
    empty = _init_empty(piece.operands[0])
    if empty is None:
        return None
    known = set(empty.operands)
    for v in list(piece.operands)[2:]:
        owner = v.owner
        if v not in known and (isinstance(owner, ir.Block) or owner.operation.name != "arith.constant"):
            return None
    return empty


def _materialize_slices(op: ir.Operation, slices: list[ir.Operation]) -> None:
    """Each slice's source materialized in its own view of the output (a pad in place: the
    operand's producer writes the interior, the fills write the border), instead of the
    whole built tensor."""
    out = op.operands[1]
    for piece in slices:
        empty = _dominates_empty(piece)
        if empty is not None:  # built before the empty tensor: elimination makes it the buffer
            # (the sizes the empty has at run time are its operands: the view takes them)
            view = _slice_view(out, piece, empty)
        else:
            view = _slice_view(out, piece, op)
        with ir.InsertionPoint(op), op.location:
            bufferization.materialize_in_destination(None, piece.operands[0], view, restrict=True, writable=True)
    op.erase()
    for piece in slices:
        piece.erase()


def run(module: ir.Operation) -> None:
    for func in functions(module):
        _identity_reshapes(func)
        for op in output_materializations(func):
            slices = _inserted_slices(op.operands[0])
            if slices is not None:
                _materialize_slices(op, slices)
                continue
            source, inner = None, _reshaped(op.operands[0])
            while inner is not None:  # the value before a chain of reshapes
                source, inner = inner, _reshaped(inner)
            if source is None:
                continue
            view = _view(op.operands[1], source, op)
            op.operands[0] = source
            op.operands[1] = view
