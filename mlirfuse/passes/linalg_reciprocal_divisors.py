"""linalg-reciprocal-divisors: in a linalg.generic, `x / y` whose result is rounded to a
16-bit float and whose divisor `y` is the same for every element along the innermost loop
(computed from inputs that the innermost loop does not index, e.g. softmax's row sum)
becomes a multiplication by `r = 1 / y` and one Newton step: `q = x * r`,
`q + fma(-q, y, x) * r` (two fused multiply-adds), the correctly rounded quotient (Markstein)
wherever `r` and the quotient are normal and the remainder does not underflow (|x| above about
2^-100: 43 of 4 million random quotients of magnitudes 1e-35 to 1e35 were an ulp off below
it). Where `r` is 0, infinite or NaN (a divisor of 0, above 2^126, infinite or NaN) or the step
gives NaN (a quotient beyond float32's range), `q`, which is x / y there but for huge divisors.

Expects linalg on tensors after elementwise fusion; leaves the body otherwise unchanged.
The reciprocal is then the same value for all elements a thread handles along a row (the
GPU schedules unroll those; LLVM computes it once), so an IEEE division per element becomes
a multiplication and two fused multiply-adds: a bfloat16 softmax measured 25.7 -> 20.8 us at
8192x1024 and 284 -> 242 us at 32768x4096 on an H100 without the Newton step. Without it,
`x * r` was within 1.5 float32 ulps of the quotient, and the 16-bit result differed from
torch's where the quotient lay that close to a tie: rarely for a softmax, but in 62 of 4096
float16 quotients by 0.3 (quotients of few bits). Only where the quotient is rounded to
16 bits (float32 results keep the division).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, math

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
                    # one Newton step on the quotient: the remainder exact (fma), the quotient
                    # then correctly rounded (Markstein) where it and the reciprocal are normal
                    remainder = math.fma(arith.negf(product), y, x)
                    quotient = math.fma(remainder, reciprocal, product)
                    # a divisor of 0, infinity or NaN, or a quotient beyond float32's range: the
                    # product (the step's remainder is NaN there); no branch, which cost a
                    # bfloat16 softmax half its speed
                    lost = arith.cmpf(arith.CmpFPredicate.UNO, quotient, quotient)
                    result = arith.select(arith.ori(lost, _not_normal(reciprocal)), product, quotient)
                op.results[0].replace_all_uses_with(result)
                op.erase()


def _i32(value: int) -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(32), value)


def _not_normal(value: ir.Value) -> ir.Value:
    """A float32 that is zero, subnormal, infinite or NaN: its exponent field less 1, unsigned,
    is 254 or more."""
    bits = arith.bitcast(ir.IntegerType.get_signless(32), value)
    field = arith.subi(arith.andi(bits, _i32(0x7F800000)), _i32(0x00800000))
    return arith.cmpi(arith.CmpIPredicate.uge, field, _i32(0x7F000000))
