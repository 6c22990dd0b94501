"""linalg-scalars-apart: 0-d work with math functions, read by a pointwise generic over a
tensor, is computed once instead of for every element.

Expects linalg on tensors before elementwise fusion; run it just before
`linalg-fuse-elementwise-ops`. Elementwise fusion fuses a 0-d producer into its consumer, which
then recomputes it at every element: an optimizer step's bias corrections (`beta ** step`, two
powers, three divisions and a square root per parameter element), worth as much time as the
step's memory traffic on an H200. Here the consumer reads such a value with `tensor.extract`
in its body instead of as an operand: fusion leaves the 0-d chain to a 0-d generic of its own
(one thread's work, its kernel packed with the others'), and the consumer loads the result.
Taken: 0-d operands of all-parallel generics of rank >= 1 produced by a 0-d generic whose
body, or that of a 0-d generic it reads (transitively), has a `math` function (fma aside).
Cheaper 0-d work (a division, an add, a conversion) is still recomputed: a cross-entropy
gradient's 1 / N read from memory at every element cost its kernel 25% on an H200.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import tensor

from mlirfuse.passes.common import defining_op, functions, walk_ops

NAME = "linalg-scalars-apart"
OPTIONS: dict = {}


def _rank0(value: ir.Value) -> bool:
    return isinstance(value.type, ir.RankedTensorType) and value.type.rank == 0


def _costly(value: ir.Value, memo: dict) -> bool:
    """`value` is a 0-d generic's result whose computation (0-d generics back) is costly."""
    producer = defining_op(value)
    if producer is None or producer.name != "linalg.generic" or not _rank0(value):
        return False
    if producer in memo:
        return memo[producer]
    memo[producer] = False
    found = any(o.name.startswith("math.") and o.name != "math.fma" for o in walk_ops(producer)[1:]) or \
        any(_costly(v, memo) for v in producer.operands if _rank0(v))
    memo[producer] = found
    return found


def _pointwise_over_tensor(op: ir.Operation) -> bool:
    iterators = [str(it) for it in ir.ArrayAttr(op.attributes["iterator_types"])]
    return bool(iterators) and all("parallel" in it for it in iterators)


def run(module: ir.Operation) -> None:
    memo: dict = {}
    for func in functions(module):
        for op in [o for o in walk_ops(func) if o.name == "linalg.generic"]:
            if not _pointwise_over_tensor(op):
                continue
            n_inputs = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]
            block = op.regions[0].blocks[0]
            for k in range(n_inputs):
                value = op.operands[k]
                arg = block.arguments[k]
                if not _costly(value, memo) or not list(arg.uses):
                    continue
                with ir.InsertionPoint.at_block_begin(block), op.location:
                    scalar = tensor.extract(value, [])
                arg.replace_all_uses_with(scalar)
                with ir.InsertionPoint(op), op.location:
                    op.operands[k] = tensor.empty([], value.type.element_type)
