"""linalg-reciprocal-divisors: in a linalg.generic, `x / y` whose result is rounded to a
16-bit float and whose divisor `y` is the same for every element along the innermost loop
(computed from inputs that the innermost loop does not index, e.g. softmax's row sum)
becomes `x * (1 / y)`.

Expects linalg on tensors after elementwise fusion; leaves the body otherwise unchanged.
The reciprocal is then the same value for all elements a thread handles along a row (the
GPU schedules unroll those; LLVM computes it once), so an IEEE division per element becomes
a multiplication: a bfloat16 softmax measured 25.7 -> 20.8 us at 8192x1024 and 284 -> 242 us
at 32768x4096 on an H100. Only where the quotient is rounded to 16 bits: `x * (1 / y)` is
within 1.5 float32 ulps of `x / y`, which changes the rounded 16-bit result only for quotients
within that distance of a rounding boundary (one ulp of the 16-bit type, about 1 in 2^15
elements); float32 and float64 results keep the division.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from mlirfuse.passes.common import body_ops, defining_op, functions, users

NAME = "linalg-reciprocal-divisors"
OPTIONS: dict = {}
_NARROW = ("bf16", "f16")


def _innermost_invariant(generic: ir.Operation) -> set[int]:
    """Block argument numbers of the inputs whose indexing map does not use the innermost loop."""
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    n_inputs = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0]
    innermost = f"d{maps[0].n_dims - 1}"
    return {k for k in range(n_inputs)
            if not any(innermost in str(r).replace("(", " ").replace(")", " ").split() for r in maps[k].results)}


def _is_invariant(value: ir.Value, block: ir.Block, invariant_args: set[int], seen: dict) -> bool:
    """True where `value` depends only on invariant block arguments, constants and values from
    outside the body."""
    key = value
    if key in seen:
        return seen[key]
    if isinstance(value, ir.BlockArgument):
        result = value.owner != block or value.arg_number in invariant_args
    else:
        op = defining_op(value)
        inside = op is not None and op.parent is not None and op.block == block
        result = not inside or (not op.regions and op.name.startswith(("arith.", "math."))
                                and all(_is_invariant(v, block, invariant_args, seen) for v in op.operands))
    seen[key] = result
    return result


def _rounded_to_16_bits(value: ir.Value) -> bool:
    found = users(value)
    return bool(found) and all(u.name == "arith.truncf" and str(u.results[0].type) in _NARROW for u in found)


def run(module: ir.Operation) -> None:
    for func in functions(module):
        for generic in body_ops(func):
            if generic.name != "linalg.generic":
                continue
            block = generic.regions[0].blocks[0]
            invariant_args = _innermost_invariant(generic)
            if not invariant_args:
                continue
            seen: dict = {}
            for op in [o.operation for o in block.operations]:
                if op.name != "arith.divf" or not isinstance(op.results[0].type, ir.F32Type):
                    continue
                x, y = op.operands
                if not _rounded_to_16_bits(op.results[0]) or not _is_invariant(y, block, invariant_args, seen):
                    continue
                with ir.InsertionPoint(op), op.location:
                    reciprocal = arith.divf(arith.constant(y.type, 1.0), y)
                    product = arith.mulf(x, reciprocal)
                op.results[0].replace_all_uses_with(product)
                op.erase()
