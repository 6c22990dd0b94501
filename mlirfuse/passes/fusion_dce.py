"""fusion-dce: erase fusion ops whose results are unused (IRDL ops are not known Pure).

A result read only for its shape counts as unused: every `fusion.size` of an op result is
first pointed at an equal size that does not need it (`extents.resolve_sizes`: a size of an
operand or function argument, an index operand, a constant), so the value is not computed
just to be measured. A `fusion.straight_through` (a gradient that is not the value's own,
read by fusion-autodiff: run that first) is replaced by its value, lhs, so that nothing
computes its rhs. Expects and leaves fusion IR; run upstream `canonicalize` after it for
unused index math.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.passes.common import body_ops, functions, has_uses, is_fusion_op
from mlirfuse.passes.extents import resolve_sizes

NAME = "fusion-dce"
OPTIONS: dict = {}


def run(module: ir.Operation) -> None:
    for func in functions(module):
        for op in body_ops(func):
            if op.name == "fusion.straight_through":
                op.results[0].replace_all_uses_with(op.operands[0])
        resolve_sizes(func)
        for op in reversed(body_ops(func)):
            if is_fusion_op(op) and not has_uses(op):
                op.erase()
