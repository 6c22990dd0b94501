"""Running a grouped fusion: fusion groups as compiled kernels, the rest by a library.

After `fusion-group` (and `fusion-strip-bookend-views`) the top function holds shape
arithmetic, calls to groups, library ops (matmul, linear), host views and ops left ungrouped.
The executor walks it: a call runs the group's compiled kernel (compiled once per group and
argument signature; outputs allocated from inferred shapes), every other op runs through
the numpy reference semantics.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Sequence

import numpy as np
from mlir import ir

from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.dtypes import DataType
from mlirfuse.errors import FusionError
from mlirfuse.fallback import fall_back
from mlirfuse.frontend.graph import InputSpec
from mlirfuse.passes.fusion_group import GROUP_ATTR
from mlirfuse.reference import _Evaluator, element_dtype
from mlirfuse.shapes import function_result_shapes


def _name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def group_as_fusion(func: ir.Operation) -> str:
    """A group function as a stand-alone fusion module (its function named @fusion)."""
    text = str(func)
    text = re.sub(r"func\.func private @[\w$.]+", "func.func @fusion", text, count=1)
    text = text.replace(" attributes {fusion.group}", "", 1)
    return "module {\n" + text + "\n}\n"


class GraphExecutor:
    def __init__(self, module_text: str):
        self.context = ir.Context()
        fusion_dialect.load(self.context)
        with self.context, ir.Location.unknown():
            self.module = ir.Module.parse(module_text)
        self.groups: dict[str, ir.Operation] = {}
        self.top: ir.Operation | None = None
        for op in self.module.body.operations:
            op = op.operation
            if op.name != "func.func":
                continue
            if GROUP_ATTR in op.attributes:
                self.groups[_name(op)] = op
            elif _name(op) == "fusion":
                self.top = op
        if self.top is None:
            raise FusionError("executor: no @fusion function")
        self.group_ir = {name: group_as_fusion(f) for name, f in self.groups.items()}
        self._kernels: dict[tuple, Any] = {}
        self._shapes: dict[tuple, list[Any]] = {}
        self._lock = threading.Lock()
        self._failed: set[str] = set()  # groups running through the reference (fallback)

    @property
    def n_kernels(self) -> int:
        return len(self.groups)

    def kernel(self, name: str, specs: tuple[InputSpec, ...]) -> Any:
        key = (name, specs)
        with self._lock:
            if key not in self._kernels:
                from mlirfuse.lowering.cpu import compile_cpu

                self._kernels[key] = compile_cpu(self.group_ir[name], specs)
            return self._kernels[key]

    def call_group(self, op: ir.Operation, values: Sequence[Any]) -> list[np.ndarray]:
        name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        func = self.groups[name]
        block = func.regions[0].blocks[0]
        specs, shape_args = [], []
        for arg, v in zip(block.arguments, values):
            if isinstance(arg.type, ir.RankedTensorType):
                t = ir.RankedTensorType(arg.type)
                shape = tuple(None if t.is_dynamic_dim(i) else s for i, s in enumerate(t.shape))
                specs.append(InputSpec(element_dtype(arg.type), shape, bool(v.flags.c_contiguous)))
                shape_args.append(tuple(v.shape))
            else:
                specs.append(InputSpec(DataType.Int, (), scalar=True))
                shape_args.append(int(v))
        key = (name, tuple(shape_args))
        shapes = self._shapes.get(key)
        if shapes is None:
            with self.context:
                shapes = self._shapes[key] = function_result_shapes(func, shape_args)
        outputs = [np.empty(s, dtype=element_dtype(r.type).np) for s, r in zip(shapes, op.results)]
        inputs = [v if isinstance(v, np.ndarray) else np.asarray(v, np.int64) for v in values]
        if name in self._failed:
            return _Evaluator().run(func, values)
        try:
            kernel = self.kernel(name, tuple(specs))
        except Exception as e:  # noqa: BLE001 - any compiler failure takes the fallback path
            fall_back(self.group_ir[name], e, f"compiling fusion group @{name}")
            self._failed.add(name)
            return _Evaluator().run(func, values)
        kernel(inputs, outputs, [s.scalar for s in specs])
        return outputs

    def run(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        assert self.top is not None
        evaluator = _Evaluator()
        block = self.top.regions[0].blocks[0]
        for arg, value in zip(block.arguments, inputs):
            evaluator.env[arg] = np.asarray(value, dtype=element_dtype(arg.type).np)
        with self.context, np.errstate(all="ignore"):
            for op in block.operations:
                op = op.operation
                if op.name == "func.return":
                    return [np.ascontiguousarray(evaluator.env[v]) for v in op.operands]
                if op.name == "func.call":
                    results = self.call_group(op, [evaluator.env[v] for v in op.operands])
                    for r, value in zip(op.results, results):
                        evaluator.env[r] = value
                else:
                    evaluator.eval(op)
        raise FusionError("executor: @fusion has no return")
