"""constant-outputs-as-fills: a result that is a splat constant is written by `linalg.fill`.

Expects the destination-passing entry point on tensors (after inlining and
`output-views-in-place`, before bufferization), whose outputs are written by
`bufferization.materialize_in_destination %result in restrict writable %out`. Where `%result`
is an `arith.constant` splat (a group returning a constant, e.g. a `scalar_tensor` that torch
code reads outside the group too), it becomes

    linalg.fill ins(%scalar) outs(%out)

Bufferization would otherwise copy the constant from a `memref.global` of the host module,
and on the GPU that copy is a kernel reading host memory: an illegal address (T5 under bf16
autocast). The fill keeps the value an immediate of the kernel that writes the output.
(A scalar argument returned as a result is filled earlier, by `inline-scalar-operands`.)
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg

from mlirfuse.passes.common import defining_op, functions, has_uses, output_materializations

NAME = "constant-outputs-as-fills"
OPTIONS: dict = {}


def _splat(value: ir.Value) -> ir.Attribute | None:
    """The element of a splat `arith.constant` tensor, or None."""
    op = defining_op(value)
    if op is None or op.name != "arith.constant" or not isinstance(value.type, ir.RankedTensorType):
        return None
    attr = op.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    return attr.get_splat_value()


def run(module: ir.Operation) -> None:
    for func in functions(module):
        for op in output_materializations(func):
            element = _splat(op.operands[0])
            if element is None:
                continue
            constant = defining_op(op.operands[0])
            with ir.InsertionPoint(op), op.location:
                linalg.fill(arith.constant(element.type, element), outs=[op.operands[1]])
            op.erase()
            if not has_uses(constant):
                constant.erase()
