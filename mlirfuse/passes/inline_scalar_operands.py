"""inline-scalar-operands: a linalg.generic reads a 0-d `tensor.from_elements` input (a runtime
scalar) as a captured value instead of through memory.

Expects linalg on tensors after entry-point and inlining (the scalars are the entry's
by-value arguments); leaves those generics without the 0-d inputs.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.lowering.host_abi import inline_scalar_operands
from mlirfuse.passes.common import ModuleView

NAME = "inline-scalar-operands"
OPTIONS: dict = {}


def run(module: ir.Operation) -> None:
    inline_scalar_operands(ModuleView(module))
