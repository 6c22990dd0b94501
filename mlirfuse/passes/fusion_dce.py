"""fusion-dce: erase fusion ops whose results are unused (IRDL ops are not known Pure).

Expects and leaves fusion IR; run upstream `canonicalize` after it for unused index math.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.passes.common import body_ops, functions, has_uses, is_fusion_op

NAME = "fusion-dce"
OPTIONS: dict = {}


def run(module: ir.Operation) -> None:
    for func in functions(module):
        for op in reversed(body_ops(func)):
            if is_fusion_op(op) and not has_uses(op):
                op.erase()
