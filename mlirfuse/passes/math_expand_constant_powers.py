"""math-expand-constant-powers: `math.powf(x, c)` with `c` a constant in {0, 1, 2, 3, 4, -1}
becomes multiplications (and one division for -1).

Expects any IR (runs on every `math.powf` of the module, usually inside linalg bodies after
elementwise fusion has turned a broadcast constant exponent into an `arith.constant`);
leaves no such `math.powf`. `x ** 3` in GELU's tanh approximation otherwise calls libdevice's
general `powf` (a logarithm, an exponential and the checks for integral and odd exponents:
about 40 instructions an element), which makes a pointwise kernel compute-bound; torch
eager and torch.compile multiply too. Results keep powf's special cases: `x ** 0` is 1 for
every x (NaN too), and signed zeros, infinities and NaNs propagate as in C's `pow`. Only
these exponents are taken: for x ** 0.5 a square root differs from `pow` at -0 and -inf, and
for x ** -2 a product that underflows loses the result's precision.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from mlirfuse.passes.common import defining_op, functions, walk_ops

NAME = "math-expand-constant-powers"
OPTIONS: dict = {}


def _constant_exponent(value: ir.Value) -> float | None:
    owner = defining_op(value)
    if owner is None or owner.name != "arith.constant" or not isinstance(owner.attributes["value"], ir.FloatAttr):
        return None
    return ir.FloatAttr(owner.attributes["value"]).value


def _expand(x: ir.Value, exponent: float) -> ir.Value | None:
    if exponent == 0:
        return arith.constant(x.type, 1.0)
    if exponent == 1:
        return x
    if exponent == 2:
        return arith.mulf(x, x)
    if exponent == 3:
        return arith.mulf(arith.mulf(x, x), x)
    if exponent == 4:
        square = arith.mulf(x, x)
        return arith.mulf(square, square)
    if exponent == -1:
        return arith.divf(arith.constant(x.type, 1.0), x)
    return None


def run(module: ir.Operation) -> None:
    for func in functions(module):
        for op in [o for o in walk_ops(func) if o.name == "math.powf"]:
            exponent = _constant_exponent(op.operands[1])
            if exponent is None or not isinstance(op.operands[0].type, ir.FloatType):
                continue
            with ir.InsertionPoint(op), op.location:
                value = _expand(op.operands[0], exponent)
            if value is not None:
                op.results[0].replace_all_uses_with(value)
                op.erase()
