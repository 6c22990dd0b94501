"""Concrete result shapes of fusion ops, from operand shapes and size operands.

The executor allocates each group's outputs with these before calling its kernel.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from mlir import ir

from mlirfuse.dialects.optable import OPS
from mlirfuse.errors import FusionError

# Library ops whose result has their first operand's shape.
SCAN_LIBRARY_OPS = ("cumsum", "cumprod", "cummax", "cummin", "cumprod_grad", "cummaxmin_grad")

Shape = tuple[int, ...]


def _ints(op: ir.Operation, name: str) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def _filled(op: ir.Operation, sizes: Sequence[int]) -> Shape:
    it = iter(sizes)
    return tuple(int(next(it)) if s == -1 else s for s in _ints(op, "shape"))


def result_shapes(op: ir.Operation, operands: Sequence[Any]) -> list[Any]:
    """Shapes (tuples) of a fusion op's tensor results; index results as ints.

    `operands`: a shape tuple per tensor operand, an int per index operand.
    """
    name = op.name[len("fusion."):]
    row = OPS[name]
    if row.kind in ("elementwise", "cast"):
        return [tuple(operands[-1] if name == "where" else operands[0])]
    if row.kind == "size":
        return [operands[0][int(ir.IntegerAttr(op.attributes["dim"]).value)]]
    if row.kind == "constant":
        return [()]
    if row.kind == "reduction":
        x = operands[0]
        axes = _ints(op, "axes")
        keep = bool(ir.BoolAttr(op.attributes["keepdim"]).value)
        shape = tuple(1 if i in axes else s for i, s in enumerate(x) if keep or i not in axes)
        return [shape] * len(op.results)
    if name in ("broadcast_in_dim", "expand", "reshape"):
        return [_filled(op, operands[1:])]
    if name == "uniform":
        return [_filled(op, operands[4:])]
    if name == "rand_like":
        return [tuple(operands[0])]
    if name == "permute":
        return [tuple(operands[0][d] for d in _ints(op, "dims"))]
    if name == "iota":
        return [_filled(op, operands)]
    if name == "slice":
        return [_filled(op, operands[1:])]
    if name == "cat":
        d = int(ir.IntegerAttr(op.attributes["dim"]).value)
        x = list(operands[0])
        x[d] = sum(int(s[d]) for s in operands)
        return [tuple(x)]
    if name == "pad":
        low, high = _ints(op, "low"), _ints(op, "high")
        return [tuple(s + lo + hi for s, lo, hi in zip(operands[0], low, high))]
    if name == "gather":
        return [tuple(operands[1])]
    if name == "squeeze":
        dims = _ints(op, "dims")
        return [tuple(s for i, s in enumerate(operands[0]) if i not in dims)]
    if name == "unsqueeze":
        d = int(ir.IntegerAttr(op.attributes["dim"]).value)
        x = tuple(operands[0])
        return [x[:d] + (1,) + x[d:]]
    if name == "matmul":
        a, b = tuple(operands[0]), tuple(operands[1])
        batch = np.broadcast_shapes(a[:-2], b[:-2])
        return [tuple(batch) + (a[-2:-1] if len(a) > 1 else ()) + (b[-1:] if len(b) > 1 else ())]
    if name in SCAN_LIBRARY_OPS:
        return [tuple(operands[0])]
    if name == "linear":
        x, w = operands[0], operands[1]
        return [tuple(x[:-1]) + (tuple(w[:1]) if len(w) == 2 else ())]
    raise FusionError(f"shape inference: unsupported op {op.name}")


def index_value(op: ir.Operation, operands: Sequence[int]) -> int:
    kind = op.name[len("arith."):]
    if kind == "constant":
        return int(ir.IntegerAttr(op.attributes["value"]).value)
    a, b = operands
    return {"muli": a * b, "addi": a + b, "subi": a - b, "divsi": a // b if b else 0,
            "divui": a // b if b else 0}[kind]


def function_result_shapes(func: ir.Operation, args: Sequence[Any]) -> list[Any]:
    """Result shapes of a function (a fusion group) for argument shapes / index values."""
    block = func.regions[0].blocks[0]
    env: dict[ir.Value, Any] = dict(zip(block.arguments, args))
    for op in block.operations:
        op = op.operation
        if op.name == "func.return":
            return [env[v] for v in op.operands]
        values = [env[v] for v in op.operands]
        if op.name.startswith("arith."):
            env[op.results[0]] = index_value(op, values)
        else:
            for r, s in zip(op.results, result_shapes(op, values)):
                env[r] = s
    raise FusionError("shape inference: function without return")
