"""Print a traced `Fusion` as fusion-dialect MLIR (generic op form, as IRDL ops print)."""

from __future__ import annotations

import math
import struct
from typing import Any

from mlirfuse.dtypes import DataType
from mlirfuse.frontend.graph import Fusion, Node, Tensor
from mlirfuse.frontend.symbolic import Size, SymSize

SIZED_OPS = {"broadcast_in_dim", "expand", "reshape", "uniform", "iota", "slice"}


def tensor_type(dtype: DataType, shape: tuple[Size, ...]) -> str:
    dims = "".join(f"{s if isinstance(s, int) else '?'}x" for s in shape)
    return f"tensor<{dims}{dtype.mlir}>"


def type_of(t: Tensor) -> str:
    """The tensor's type with sizes resolved by the fusion's constraints (a symbolic size
    found equal to a static one prints static; the host checks the constraint)."""
    return tensor_type(t.dtype, tuple(t.fusion.canonical(s) for s in t.shape))


def float_literal(value: float) -> str:
    if math.isfinite(value):
        text = repr(float(value))  # MLIR wants a '.' before any exponent
        return text.replace("e", ".0e") if "." not in text else text
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


def attribute(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return f"{float_literal(value)} : f64"
    if isinstance(value, (list, tuple)):
        return f"array<i64: {', '.join(str(int(v)) for v in value)}>" if value else "array<i64>"
    raise TypeError(f"cannot print attribute {value!r}")


class _Printer:
    def __init__(self, fusion: Fusion):
        self.fusion = fusion
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.sizes: dict[Any, str] = {}
        self.computed = 0  # %s names given: a size computed from others
        for i, t in enumerate(fusion.inputs):
            self.names[t.id] = f"%arg{i}"

    def emit_size(self, size: Size, resolve: bool = True) -> str:
        """SSA name of an index value holding `size`, emitted once per function."""
        if resolve:
            size = self.fusion.canonical(size)
        key = size
        if key in self.sizes:
            return self.sizes[key]
        if isinstance(size, int):
            name = f"%c{size}"
            self.lines.append(f"  {name} = arith.constant {size} : index")
        elif size.offset:
            base, offset = self.emit_size(size.monomial, resolve=False), self.emit_size(size.offset)
            name = self._computed()  # after its operands' names (a product's is one too)
            self.lines.append(f"  {name} = arith.addi {base}, {offset} : index")
        elif len(size.factors) == 1 and size.coef == 1:
            pos, dim = size.factors[0]
            name = f"%d{pos}_{dim}"
            arg = self.fusion.inputs[pos]
            self.lines.append(f'  {name} = "fusion.size"({self.names[arg.id]}) {{dim = {dim} : i64}}'
                              f" : ({type_of(arg)}) -> index")
        else:
            name = self._computed()
            steps = [("muli", self.emit_size(SymSize((f,)), resolve=False)) for f in size.factors[1:]]
            if size.coef.numerator != 1:
                steps.append(("muli", self.emit_size(int(size.coef.numerator))))
            if size.coef.denominator != 1:
                steps.append(("divsi", self.emit_size(int(size.coef.denominator))))
            operand = self.emit_size(SymSize((size.factors[0],)), resolve=False)
            for k, (op, rhs) in enumerate(steps):
                result = name if k == len(steps) - 1 else f"{name}_{k}"
                self.lines.append(f"  {result} = arith.{op} {operand}, {rhs} : index")
                operand = result
        self.sizes[key] = name
        return name

    def _computed(self) -> str:
        self.computed += 1
        return f"%s{self.computed - 1}"

    def emit_node(self, node: Node) -> None:
        operands = [self.names[t.id] for t in node.inputs]
        operand_types = [type_of(t) for t in node.inputs]
        out_shape = [self.fusion.canonical(s) for s in node.outputs[0].shape]
        if node.op in SIZED_OPS:
            for s in out_shape:
                if isinstance(s, SymSize):
                    operands.append(self.emit_size(s))
                    operand_types.append("index")
        attrs = dict(node.attrs)
        if node.op in SIZED_OPS:
            attrs["shape"] = [s if isinstance(s, int) else -1 for s in out_shape]
        attr_text = ""
        if attrs:
            attr_text = " {" + ", ".join(f"{k} = {attribute(v)}" for k, v in attrs.items()) + "}"
        result_types = [type_of(t) for t in node.outputs]
        base = f"%t{node.outputs[0].id}"
        if len(node.outputs) == 1:
            self.names[node.outputs[0].id] = base
            lhs, results = base, result_types[0]
        else:
            for i, t in enumerate(node.outputs):
                self.names[t.id] = f"{base}#{i}"
            lhs, results = f"{base}:{len(node.outputs)}", f"({', '.join(result_types)})"
        self.lines.append(f'  {lhs} = "fusion.{node.op}"({", ".join(operands)}){attr_text}'
                          f" : ({', '.join(operand_types)}) -> {results}")

    def print(self) -> str:
        for node in self.fusion.nodes:
            self.emit_node(node)
        args = ", ".join(f"{self.names[t.id]}: {type_of(t)}" for t in self.fusion.inputs)
        outs = self.fusion.outputs
        ret_types = ", ".join(type_of(t) for t in outs)
        body = "\n".join("  " + line for line in self.lines)
        ret = f"    return {', '.join(self.names[t.id] for t in outs)} : {ret_types}" if outs else "    return"
        return (f"func.func @fusion({args}) -> ({ret_types}) {{\n{body}\n{ret}\n  }}").replace("\n\n", "\n")


def print_fusion(fusion: Fusion) -> str:
    """The fusion as a module with one function `@fusion`."""
    return "module {\n  " + _Printer(fusion).print() + "\n}\n"
