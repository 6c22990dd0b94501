"""Helpers shared by passes."""

from __future__ import annotations

from typing import Iterator

from mlir import ir


def functions(module: ir.Operation) -> Iterator[ir.Operation]:
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func":
            yield op.operation


def body_ops(func: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in func.regions[0].blocks[0].operations]


def is_fusion_op(op: ir.Operation) -> bool:
    return op.name.startswith("fusion.")


def has_uses(op: ir.Operation) -> bool:
    return any(len(list(r.uses)) for r in op.results)
