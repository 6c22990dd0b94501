"""Fusion IR back into a traced `Fusion`: what passes that work on the traced graph (autodiff)
need to run from `mlirfuse-opt`.

Ops are rebuilt through the frontend's own op functions where a result has dynamic sizes
(they derive those sizes), and added as they stand where the IR spells every size (static
results, and ops whose sizes are index operands: broadcasts, reshapes, iota, slices). Index
values (`fusion.size`, `arith` constants and products) become symbolic sizes.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from mlirfuse.dialects.optable import OPS
from mlirfuse.errors import FusionError
from mlirfuse.frontend import ops
from mlirfuse.frontend.graph import Fusion, InputSpec, Tensor
from mlirfuse.frontend.printer import SIZED_OPS
from mlirfuse.frontend.symbolic import Size
from mlirfuse.reference import _attr, element_dtype


def _shape(type_: ir.Type) -> list[int | None]:
    t = ir.RankedTensorType(type_)
    return [None if t.is_dynamic_dim(d) else t.get_dim_size(d) for d in range(t.rank)]


class _Importer:
    def __init__(self, func: ir.Operation):
        self.func = func
        self.fusion = Fusion()
        self.values: dict[Any, Tensor | Size] = {}

    def run(self) -> Fusion:
        block = self.func.regions[0].blocks[0]
        for arg in block.arguments:
            if not isinstance(arg.type, ir.RankedTensorType):
                raise FusionError(f"import: argument of type {arg.type} (fusion functions take tensors)")
            spec = InputSpec(element_dtype(arg.type), tuple(_shape(arg.type)))
            self.values[arg] = self.fusion.add_input(spec)
        for op in block.operations:
            op = op.operation
            if op.name == "func.return":
                for v in op.operands:
                    self.fusion.add_output(self.values[v])
            elif op.name.startswith("arith."):
                self.values[op.results[0]] = self.index(op)
            elif op.name.startswith("fusion."):
                results = self.fusion_op(op, op.name[len("fusion."):])
                for r, t in zip(op.results, results):
                    self.values[r] = t
            else:
                raise FusionError(f"import: cannot import {op.name} (fusion functions hold fusion and index ops)")
        return self.fusion

    def index(self, op: ir.Operation) -> Size:
        kind = op.name[len("arith."):]
        if kind == "constant":
            return int(ir.IntegerAttr(op.attributes["value"]).value)
        a, b = (self.values[v] for v in op.operands)
        if kind == "muli":
            return a * b if not isinstance(a, int) else b * a
        if kind == "addi":
            return a + b if not isinstance(a, int) else b + a
        if kind == "divsi":
            return a // b
        if kind == "subi":
            return a - b
        raise FusionError(f"import: cannot import {op.name} on sizes")

    def fusion_op(self, op: ir.Operation, name: str) -> list[Tensor] | list[Size]:
        if name == "size":
            x = self.values[op.operands[0]]
            return [x.shape[_attr(op, "dim")]]
        if name not in OPS:
            raise FusionError(f"import: unknown op fusion.{name}")
        names = [op.attributes[i].name for i in range(len(op.attributes))]
        attrs = {n: _attr(op, n) for n in names if not n.startswith("fusion.")}
        operands = [self.values[v] for v in op.operands]
        tensors = [t for t in operands if isinstance(t, Tensor)]
        types = [r.type for r in op.results]
        static = all(None not in _shape(t) for t in types)
        if name in SIZED_OPS or static:
            sizes = iter(s for s in operands if not isinstance(s, Tensor))
            attrs.pop("shape", None)
            results = []
            for t in types:
                shape = tuple(next(sizes) if s is None else s for s in _shape(t))
                results.append((element_dtype(t), shape))
            return self.fusion.add_node(name, tensors, attrs, results)
        return self.derived(op, name, tensors, attrs, element_dtype(types[0]))

    @staticmethod
    def derived(op: ir.Operation, name: str, xs: list[Tensor], attrs: dict[str, Any], dtype: Any) -> list[Tensor]:
        """Ops with dynamic result sizes, rebuilt by the frontend (which derives the sizes)."""
        kind = OPS[name].kind
        if kind == "elementwise":
            out = [ops.elementwise(name, *xs)]
        elif kind == "reduction":
            extra = {"correction": attrs["correction"]} if "correction" in attrs else {}
            out = ops._reduction(name, xs[0], attrs["axes"], attrs["keepdim"], extra)
        elif name == "cast":
            out = [ops.cast(xs[0], dtype)]
        elif name in ("permute", "squeeze"):
            out = [getattr(ops, name)(xs[0], attrs["dims"])]
        elif name == "unsqueeze":
            out = [ops.unsqueeze(xs[0], attrs["dim"])]
        elif name == "cat":
            out = [ops.cat(xs, attrs["dim"])]
        elif name == "pad":
            x = xs[0]
            out = [x.fusion.add_node("pad", xs, attrs, [(dtype, tuple(
                s + lo + hi if lo or hi else s for s, lo, hi in zip(x.shape, attrs["low"], attrs["high"])))])[0]]
        elif name == "gather":
            out = [xs[0].fusion.add_node("gather", xs, attrs, [(dtype, xs[1].shape)])[0]]
        elif name == "rand_like":
            out = [ops.rand_like(*xs, dtype=dtype)]
        elif name in ("matmul", "linear"):
            out = [getattr(ops, name)(*xs)]
        elif name == "cumsum":
            out = [ops.cumsum_library(xs[0], attrs["dim"], bool(attrs["reverse"]))]
        elif name in ("cumprod", "cummax", "cummin"):
            out = [ops.scan_library(xs[0], attrs["dim"], name)]
        elif name in ("cumprod_grad", "cummaxmin_grad"):
            out = [ops.scan_grad_library(name, *xs, attrs["dim"], **({"max": bool(attrs["max"])} if "max" in attrs
                                                                     else {}))]
        else:
            raise FusionError(f"import: fusion.{name} with dynamic sizes")
        if out[0].dtype is not dtype:
            raise FusionError(f"import: {op.name} types as {out[0].dtype.value}, the IR says {dtype.value}")
        return out


def import_fusion(func: ir.Operation) -> Fusion:
    """The `Fusion` a fusion-dialect `func.func` computes."""
    return _Importer(func).run()
