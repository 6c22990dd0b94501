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
reshape's one user is a linalg.generic to fuse with (a reshape that feeds an output stays:
there the generic is better left with its siblings of the original shape).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg, tensor

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
    old = generic.regions[0].blocks[0]
    block = moved.regions[0].blocks.append(*[a.type for a in old.arguments])
    mapping = dict(zip(old.arguments, block.arguments))
    with ir.InsertionPoint(block):
        for inner in old.operations:
            clone = inner.operation.clone()
            for i, v in enumerate(list(clone.operands)):
                if v in mapping:
                    clone.operands[i] = mapping[v]
            for a, b in zip(inner.operation.results, clone.results):
                mapping[a] = b
    reshape.results[0].replace_all_uses_with(moved.results[0])
    reshape.erase()
    generic.erase()


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
                        len(consumers) == 1 and consumers[0].name == "linalg.generic":
                    _move_past(op, generic)
                    changed = True
                    break
