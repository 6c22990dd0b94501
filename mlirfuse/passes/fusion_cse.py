"""fusion-cse: merge identical fusion ops (same op, operands, attributes and result types).

IRDL ops carry no Pure trait, so upstream `cse` leaves them alone. Every fusion op is a pure
function of its operands (random ops too: seed and offset are operands), so merging is safe.
Expects and leaves fusion IR.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.passes.common import body_ops, functions, is_fusion_op

NAME = "fusion-cse"
OPTIONS: dict = {}


def _key(op: ir.Operation) -> tuple:
    operands = tuple(op.operands)
    attrs = tuple(sorted((name, str(op.attributes[name])) for name in op.attributes))
    return op.name, operands, attrs, tuple(str(r.type) for r in op.results)


def run(module: ir.Operation) -> None:
    for func in functions(module):
        seen: dict[tuple, ir.Operation] = {}
        for op in body_ops(func):
            if not is_fusion_op(op):
                continue
            key = _key(op)
            first = seen.get(key)
            if first is None:
                seen[key] = op
                continue
            for old, new in zip(op.results, first.results):
                old.replace_all_uses_with(new)
            op.erase()
