"""linalg-reshape-elementwise: a `tensor.reshape` of an elementwise linalg.generic's result
becomes the generic over the reshaped shape, reading reshaped inputs.

Expects linalg on tensors after elementwise fusion (the backends run it after inlining, where
an entry point's strided inputs show). A reshape keeps the row-major order of
the elements, and an elementwise generic (parallel loops, identity indexing maps, inputs of
its full shape) computes element k from the inputs' elements k: so reshape(f(x, y)) equals
f(reshape(x), reshape(y)). Moved past the reshape, the generic meets its consumer, and
`linalg-fuse-elementwise-ops` makes them one kernel: a view between two pointwise ops inside
a fusion group (the view study of nvFuser's bookend-view issue, view B) no longer splits it
into two launches. The reshapes move onto the generic's inputs, where they are views of
contiguous buffers (free): only where every input is contiguous (a strided one would be
copied), the generic's result has no other user (else it would be computed twice), and the
reshape's users are linalg.generics to fuse with (a reshape that feeds an output stays:
there the generic is better left with its siblings of the original shape). An input may lack
dims of size 1 of the generic's shape (a column sum cast to its [1, C] keepdim form, then
viewed as [C] and cast again: the bias gradients of a bf16 step): it holds the same elements
in the same order, and is reshaped like the others. A generic whose
body reads its loop indices (a slice or gather reading its source at the element's position)
moves too: its body reads the reshaped indices mapped back to its own shape (per group of
dims the reshape merges or splits, the row-major position split by the old sizes), so the
slice of padded logits that cross-entropy views as rows is read in place by the reduction.

The other way round, at a fusion's end: an elementwise generic with an input that is a
reshape of a computed value, and whose result no generic reads (it leaves the function: the
cast to bf16 of cross-entropy's gradient, reshaped back to [batch, seq, vocab], plus the
logits' other gradient), is computed before the reshape instead, reading the value in its own
shape and its other (contiguous) inputs reshaped to it; it then fuses into the value's
producer and the reshape moves to the output, which `output-views-in-place` writes through
(one kernel writes the bf16 result; no float32 temporary is written and read back), where
the value has a lower rank than the generic (the reshape split dims). The two rules never
undo each other: the first moves only reshapes that generics read, the second makes only
reshapes that no generic reads, and each of its moves lowers the generic's rank.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import linalg, tensor

from mlirfuse.lowering import linalg_builders as B
from mlirfuse.lowering.reshape_indices import source_indices
from mlirfuse.passes.common import body_ops, defining_op, functions, users

NAME = "linalg-reshape-elementwise"
OPTIONS: dict = {}


def _elementwise(op: ir.Operation | None, indexed: bool = False, unit_inputs: bool = False) -> bool:
    """A one-result generic of parallel loops and identity maps over operands of its rank;
    with `indexed`, its body may read its loop indices (`linalg.index`); with `unit_inputs`,
    an input may also lack dims of static size 1 of the result (a [C] sum cast to its
    [1, C] keepdim form): it holds the same elements in the same row-major order."""
    if op is None or op.name != "linalg.generic" or len(op.results) != 1:
        return False
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    rank = len(iterators)
    if not all("parallel" in it for it in iterators) or not all(isinstance(v.type, ir.RankedTensorType)
                                                                   for v in op.operands):
        return False
    shape = ir.RankedTensorType(op.results[0].type).shape
    n_inputs = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]
    for k, (m, v) in enumerate(zip(maps, op.operands)):
        full = m == ir.AffineMap.get_identity(rank) and ir.RankedTensorType(v.type).rank == rank
        if not full and not (unit_inputs and k < n_inputs and _drops_unit_dims(m, shape)):
            return False
    return indexed or not _indexed(op)


def _drops_unit_dims(m: ir.AffineMap, shape: list[int]) -> bool:
    """The map reads dims in order, leaving out only dims of static size 1."""
    kept = []
    for r in m.results:
        if not isinstance(r, ir.AffineDimExpr):
            return False
        kept.append(r.position)
    return kept == sorted(set(kept)) and all(shape[d] == 1 for d in range(len(shape)) if d not in kept)


def _indexed(op: ir.Operation) -> bool:
    return any(inner.operation.name == "linalg.index" for inner in op.regions[0].blocks[0].operations)


def _contiguous(value: ir.Value) -> bool:
    """False for a tensor read from a memref with a strided layout (an entry point's
    non-contiguous input: reshaping it would copy it); computed tensors and function
    arguments bufferize to contiguous buffers."""
    op = defining_op(value)
    if op is None or op.name != "bufferization.to_tensor":
        return True
    layout = ir.MemRefType(op.operands[0].type).layout
    return isinstance(layout, ir.AffineMapAttr) and layout.value == ir.AffineMap.get_identity(layout.value.n_dims)


def _move_past(reshape: ir.Operation, generic: ir.Operation) -> None:
    """The generic rebuilt at the reshape over the reshape's result shape; both old ops erased.
    A body reading its loop indices reads them mapped back to the generic's own shape."""
    shape_operand = reshape.operands[1]
    result = ir.RankedTensorType(reshape.results[0].type)
    rank = result.rank
    with ir.InsertionPoint(reshape), reshape.location:
        index_of = None
        if _indexed(generic):
            old_type = ir.RankedTensorType(generic.results[0].type)
            n_in = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0]
            old_dims = B.dims_of(list(generic.operands)[n_in])
            new_dims = [B.index_const(size) if size >= 0 else tensor.extract(shape_operand, [B.index_const(d)])
                        for d, size in enumerate(result.shape)]  # (the shape operand: defined before)

            def index_of(ivs: list[ir.Value]) -> list[ir.Value]:
                return source_indices(ivs, new_dims.__getitem__, old_dims.__getitem__, list(old_type.shape),
                                      list(result.shape))
        operands = []
        for v in generic.operands:
            element = ir.RankedTensorType(v.type).element_type
            operands.append(tensor.reshape(ir.RankedTensorType.get(result.shape, element), v, shape_operand))
        n_inputs = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0]
        identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
        parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        moved = linalg.GenericOp([result], operands[:n_inputs], operands[n_inputs:],
                                 ir.ArrayAttr.get([identity] * len(operands)), ir.ArrayAttr.get([parallel] * rank))
    _clone_body(generic, moved, index_of)
    reshape.results[0].replace_all_uses_with(moved.results[0])
    reshape.erase()
    generic.erase()


def _sink_target(generic: ir.Operation) -> int | None:
    """The input of `generic` (elementwise, result read by no generic) that it should be
    computed before: a single-use reshape of a generic's result of lower rank (the reshape
    split dims: rows back to [batch, seq, vocab]), the other inputs contiguous (they are
    reshaped too, as views). None where there is none. The rank falls with each move, so
    moves end: moved to a shape of equal or higher rank, the generic's other inputs,
    reshaped to it, could be moved back to (fuzzer seed 20370 hung the compile so). A
    generic of one input (a cast) moves to a higher rank too, where the first rule cannot
    move the reshape past the value's producer (a normalization's multi-result generic:
    autocast's LayerNorm output viewed as [tokens, hidden] and cast to bf16 for the matmul),
    and reads a reshape that is also a result: it creates no reshape of an input, and the
    one after it feeds no generic."""
    if not _elementwise(generic) or any(u.name == "linalg.generic" for u in users(generic.results[0])):
        return None
    n_inputs = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0]
    inputs = list(generic.operands)[:n_inputs]
    rank = ir.RankedTensorType(generic.results[0].type).rank
    for k, v in enumerate(inputs):
        reshape = defining_op(v)
        if reshape is None or reshape.name != "tensor.reshape":
            continue
        cast = len(inputs) == 1 and not any(u.name == "linalg.generic" for u in users(reshape.results[0])
                                            if u != generic)
        if len(users(reshape.results[0])) != 1 and not cast:
            continue
        source = defining_op(reshape.operands[0])
        if source is not None and source.name == "linalg.generic" and (
                ir.RankedTensorType(reshape.operands[0].type).rank < rank or cast and not _elementwise(source)) and \
                all(_contiguous(w) for j, w in enumerate(inputs) if j != k):
            return k
    return None


def _compute_before(generic: ir.Operation, k: int) -> None:
    """generic(.., reshape(v), ..) becomes reshape(generic'(.., v, ..)), generic' over v's
    shape, its other inputs reshaped to that shape."""
    reshape = defining_op(generic.operands[k])
    source = reshape.operands[0]
    shape = ir.RankedTensorType(source.type)
    element = ir.RankedTensorType(generic.results[0].type).element_type
    rank = shape.rank
    n_inputs = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0]
    with ir.InsertionPoint(generic), generic.location:
        dims = B.dims_of(source)
        shape_operand = tensor.from_elements(ir.RankedTensorType.get([rank], ir.IndexType.get()), dims) \
            if n_inputs > 1 else None
        inputs = [source if j == k else tensor.reshape(
            ir.RankedTensorType.get(shape.shape, ir.RankedTensorType(w.type).element_type), w, shape_operand)
            for j, w in enumerate(list(generic.operands)[:n_inputs])]
        init = B.empty(shape.shape, dims, element)
        identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
        parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        moved = linalg.GenericOp([init.type], inputs, [init], ir.ArrayAttr.get([identity] * (n_inputs + 1)),
                                 ir.ArrayAttr.get([parallel] * rank))
        _clone_body(generic, moved)
        result = tensor.reshape(generic.results[0].type, moved.results[0], reshape.operands[1])
    generic.results[0].replace_all_uses_with(result)
    generic.erase()
    if not list(reshape.results[0].uses):  # (a reshape that is also a result stays)
        reshape.erase()


def _clone_body(old_op: ir.Operation, new_op: ir.Operation,
                index_of: Callable[[list[ir.Value]], list[ir.Value]] | None = None) -> None:
    """The old generic's body moved into the new generic (the old one is erased next): its
    arguments replaced by the new block's everywhere, nested regions included; with
    `index_of`, its `linalg.index` ops replaced by `index_of(the new generic's indices)`."""
    old = old_op.regions[0].blocks[0]
    block = new_op.regions[0].blocks.append(*[a.type for a in old.arguments])
    for a, b in zip(old.arguments, block.arguments):
        a.replace_all_uses_with(b)
    with ir.InsertionPoint(block), new_op.location:
        mapped = None
        if index_of is not None:
            rank = len(ir.ArrayAttr(new_op.attributes["iterator_types"]))
            mapped = index_of([linalg.IndexOp(d).result for d in range(rank)])
        for inner in list(old.operations):
            op = inner.operation
            if mapped is not None and op.name == "linalg.index":
                op.results[0].replace_all_uses_with(mapped[ir.IntegerAttr(op.attributes["dim"]).value])
                op.erase()
                continue
            ir.InsertionPoint(block).insert(op.detach_from_parent())


def _readers(consumers: list[ir.Operation], generic: ir.Operation) -> bool:
    """The reshape's users are generics to fuse with; or, for a generic reading no input (a
    gather or iota: it has no siblings of its own shape to stay with), generics and the
    function's return (Llama's embedding rows, a result, viewed as [batch, seq, hidden] and
    normalized: computed in that shape, the gather joins the normalization's kernel)."""
    n_inputs = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0]
    result = ("func.return", "bufferization.materialize_in_destination")  # before and after inlining
    return any(c.name == "linalg.generic" for c in consumers) and \
        all(c.name == "linalg.generic" or c.name in result and not n_inputs for c in consumers)


def run(module: ir.Operation) -> None:
    for func in functions(module):
        changed = True
        while changed:
            changed = False
            for op in body_ops(func):
                if op.name != "tensor.reshape":
                    continue
                generic = defining_op(op.operands[0])
                consumers = users(op.results[0])
                if _elementwise(generic, indexed=True, unit_inputs=True) and len(users(op.operands[0])) == 1 and \
                        all(_contiguous(v) for v in generic.operands) and _readers(consumers, generic):
                    _move_past(op, generic)
                    changed = True
                    break
            if changed:
                continue
            for op in body_ops(func):
                k = _sink_target(op) if op.name == "linalg.generic" else None
                if k is not None:
                    _compute_before(op, k)
                    changed = True
                    break
