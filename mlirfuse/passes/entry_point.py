"""entry-point: wraps the lowered `@fusion` function in `@mlirfuse_entry`, the destination-passing
function both backends export.

Expects linalg on tensors (after fusion-to-linalg) with one `@fusion` function. Its optional
`mlirfuse.inputs` attribute says how each input is passed: "tensor" (a contiguous memref, the
default), "strided" (a memref with any strides and offset) or "scalar" (a 0-d input passed by
value: a runtime Python scalar). Leaves `@fusion` private and `@mlirfuse_entry(inputs...,
outputs...)` calling it, outputs written into caller-allocated buffers.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.dtypes import DataType
from mlirfuse.frontend.graph import InputSpec
from mlirfuse.lowering.host_abi import add_entry_point
from mlirfuse.passes.common import ModuleView, functions

NAME = "entry-point"
OPTIONS: dict = {}
INPUTS_ATTR = "mlirfuse.inputs"
KINDS = ("tensor", "strided", "scalar")


def input_kinds(specs: list[InputSpec]) -> ir.ArrayAttr:
    """The `mlirfuse.inputs` attribute for a signature's input specs."""
    return ir.ArrayAttr.get([ir.StringAttr.get("scalar" if s.scalar else "tensor" if s.contiguous else "strided")
                             for s in specs])


def run(module: ir.Operation) -> None:
    fusion = next((f for f in functions(module) if ir.StringAttr(f.attributes["sym_name"]).value == "fusion"), None)
    if fusion is None:
        raise ValueError("no @fusion function to wrap")
    n = len(ir.FunctionType(ir.TypeAttr(fusion.attributes["function_type"]).value).inputs)
    kinds = ([ir.StringAttr(k).value for k in ir.ArrayAttr(fusion.attributes[INPUTS_ATTR])]
             if INPUTS_ATTR in fusion.attributes else ["tensor"] * n)
    if len(kinds) != n or any(k not in KINDS for k in kinds):
        raise ValueError(f"{INPUTS_ATTR} must give one of {KINDS} for each of the {n} inputs, got {kinds}")
    specs = [InputSpec(DataType.Float, (), contiguous=k != "strided", scalar=k == "scalar") for k in kinds]
    add_entry_point(ModuleView(module), specs)
