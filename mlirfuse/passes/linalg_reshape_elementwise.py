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
there the generic is better left with its siblings of the original shape).

The other way round, at a fusion's end: an elementwise generic with an input that is a
reshape of a computed value, and whose result no generic reads (it leaves the function: the
cast to bf16 of cross-entropy's gradient, reshaped back to [batch, seq, vocab], plus the
logits' other gradient), is computed before the reshape instead, reading the value in its own
shape and its other (contiguous) inputs reshaped to it; it then fuses into the value's
producer and the reshape moves to the output, which `output-views-in-place` writes through
(one kernel writes the bf16 result; no float32 temporary is written and read back). The two
rules never undo each other: the first moves only reshapes that generics read, the second
makes only reshapes that no generic reads.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg, tensor

from mlirfuse.lowering import linalg_builders as B
from mlirfuse.passes.common import body_ops, defining_op, functions, users

NAME = "linalg-reshape-elementwise"
OPTIONS: dict = {}


def _elementwise(op: ir.Operation | None) -> bool:
    if op is None or op.name != "linalg.generic" or len(op.results) != 1:
        return False
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    rank = len(iterators)
    return (all("parallel" in it for it in iterators) and all(m == ir.AffineMap.get_identity(rank) for m in maps)
            and all(isinstance(v.type, ir.RankedTensorType) and v.type.rank == rank
                    for v in op.operands)
            and not any(inner.operation.name == "linalg.index" for inner in op.regions[0].blocks[0].operations))


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
    """The generic rebuilt at the reshape over the reshape's result shape; both old ops erased."""
    shape_operand = reshape.operands[1]
    result = ir.RankedTensorType(reshape.results[0].type)
    rank = result.rank
    with ir.InsertionPoint(reshape), reshape.location:
        operands = []
        for v in generic.operands:
            element = ir.RankedTensorType(v.type).element_type
            operands.append(tensor.reshape(ir.RankedTensorType.get(result.shape, element), v, shape_operand))
        n_inputs = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0]
        identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
        parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        moved = linalg.GenericOp([result], operands[:n_inputs], operands[n_inputs:],
                                 ir.ArrayAttr.get([identity] * len(operands)), ir.ArrayAttr.get([parallel] * rank))
    _clone_body(generic, moved)
    reshape.results[0].replace_all_uses_with(moved.results[0])
    reshape.erase()
    generic.erase()


def _sink_target(generic: ir.Operation) -> int | None:
    """The input of `generic` (elementwise, result read by no generic) that it should be
    computed before: a single-use reshape of a generic's result, the other inputs contiguous
    (they are reshaped too, as views). None where there is none."""
    if not _elementwise(generic) or any(u.name == "linalg.generic" for u in users(generic.results[0])):
        return None
    n_inputs = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0]
    inputs = list(generic.operands)[:n_inputs]
    for k, v in enumerate(inputs):
        reshape = defining_op(v)
        if reshape is None or reshape.name != "tensor.reshape" or len(users(reshape.results[0])) != 1:
            continue
        source = defining_op(reshape.operands[0])
        if source is not None and source.name == "linalg.generic" and \
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
    reshape.erase()


def _clone_body(old_op: ir.Operation, new_op: ir.Operation) -> None:
    old = old_op.regions[0].blocks[0]
    block = new_op.regions[0].blocks.append(*[a.type for a in old.arguments])
    mapping = dict(zip(old.arguments, block.arguments))
    with ir.InsertionPoint(block):
        for inner in old.operations:
            clone = inner.operation.clone()
            for i, v in enumerate(list(clone.operands)):
                if v in mapping:
                    clone.operands[i] = mapping[v]
            for a, b in zip(inner.operation.results, clone.results):
                mapping[a] = b


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
                if _elementwise(generic) and len(users(op.operands[0])) == 1 and \
                        all(_contiguous(v) for v in generic.operands) and \
                        consumers and all(c.name == "linalg.generic" for c in consumers):
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
