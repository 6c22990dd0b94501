"""Running a grouped fusion: fusion groups as compiled kernels, the rest by a library.

After `fusion-group` (and `fusion-strip-bookend-views`) the top function holds shape
arithmetic, calls to groups, library ops (matmul, linear), host views and ops left ungrouped.
The executor walks it: a call runs the group's compiled kernel (compiled once per group and
argument signature; outputs allocated from inferred shapes), every other op runs through
the numpy reference semantics. On the GPU (`DeviceGraphExecutor`) groups are GPU kernels and
library ops run in torch, on torch CUDA tensors.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Sequence

import numpy as np
from mlir import ir

from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.dialects.optable import OPS
from mlirfuse.dtypes import DataType
from mlirfuse.errors import FusionError
from mlirfuse.fallback import fall_back
from mlirfuse.frontend.graph import InputSpec
from mlirfuse.passes.fusion_group import GROUP_ATTR
from mlirfuse.reference import _Evaluator, element_dtype
from mlirfuse.shapes import function_result_shapes, index_value


def _name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def group_as_fusion(func: ir.Operation) -> str:
    """A group function as a stand-alone fusion module (its function named @fusion)."""
    text = str(func)
    text = re.sub(r"func\.func private @[\w$.]+", "func.func @fusion", text, count=1)
    text = text.replace(" attributes {fusion.group}", "", 1)
    return "module {\n" + text + "\n}\n"


class GraphExecutor:
    """Runs a grouped fusion on the CPU: numpy arrays, groups compiled by the CPU backend."""

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

    def kernels(self) -> dict[tuple, Any]:
        """The compiled groups so far: (group name, argument signature) -> kernel."""
        with self._lock:
            return dict(self._kernels)

    def kernel(self, name: str, specs: tuple[InputSpec, ...]) -> Any:
        key = (name, specs)
        with self._lock:
            if key not in self._kernels:
                self._kernels[key] = self._compile(self.group_ir[name], specs)
            return self._kernels[key]

    def _compile(self, fusion_ir: str, specs: tuple[InputSpec, ...]) -> Any:
        from mlirfuse.lowering.cpu import compile_cpu

        return compile_cpu(fusion_ir, specs)

    # -- what differs between the CPU and the GPU: arrays, launches, ops outside groups --------
    def _contiguous(self, value: Any) -> bool:
        return bool(value.flags.c_contiguous)

    def _by_value(self, value: Any) -> bool:
        """Whether a 0-d argument goes to the kernel by value (else as a 0-d buffer)."""
        return False

    @staticmethod
    def _host_scalar(value: Any, dtype: DataType) -> np.ndarray:
        return np.asarray(value.item() if hasattr(value, "item") else value, dtype.np)

    def _empty(self, shape: tuple[int, ...], dtype: DataType) -> Any:
        return np.empty(shape, dtype=dtype.np)

    def _launch(self, kernel: Any, values: Sequence[Any], outputs: Sequence[Any],
                specs: Sequence[InputSpec]) -> None:
        kernel(values, outputs, [s.scalar for s in specs])

    def _reference(self, func: ir.Operation, values: Sequence[Any]) -> list[Any]:
        return _Evaluator().run(func, values)

    def _input(self, value: Any, type_: ir.Type) -> Any:
        return np.asarray(value, dtype=element_dtype(type_).np)

    def _output(self, value: Any) -> Any:
        return np.ascontiguousarray(value)

    def _eval(self, evaluator: _Evaluator, op: ir.Operation) -> None:
        evaluator.eval(op)

    # -- the walk ------------------------------------------------------------------------------
    def call_group(self, op: ir.Operation, values: Sequence[Any]) -> list[Any]:
        name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        func = self.groups[name]
        block = func.regions[0].blocks[0]
        specs, shape_args, values = [], [], list(values)
        for i, (arg, v) in enumerate(zip(block.arguments, values)):
            if isinstance(arg.type, ir.RankedTensorType):
                t = ir.RankedTensorType(arg.type)
                shape = tuple(None if t.is_dynamic_dim(i) else s for i, s in enumerate(t.shape))
                if t.rank == 0 and self._by_value(v):
                    values[i] = self._host_scalar(v, element_dtype(arg.type))
                    specs.append(InputSpec(element_dtype(arg.type), (), scalar=True))
                else:
                    specs.append(InputSpec(element_dtype(arg.type), shape, self._contiguous(v)))
                shape_args.append(tuple(v.shape))
            else:
                specs.append(InputSpec(DataType.Int, (), scalar=True))
                values[i] = np.asarray(v, np.int64)
                shape_args.append(int(v))
        if name in self._failed:
            return self._reference(func, values)
        key = (name, tuple(shape_args))
        shapes = self._shapes.get(key)
        if shapes is None:
            with self.context:
                shapes = self._shapes[key] = function_result_shapes(func, shape_args)
        try:
            kernel = self.kernel(name, tuple(specs))
        except Exception as e:  # noqa: BLE001 - any compiler failure takes the fallback path
            fall_back(self.group_ir[name], e, f"compiling fusion group @{name}")
            self._failed.add(name)
            return self._reference(func, values)
        outputs = [self._empty(s, element_dtype(r.type)) for s, r in zip(shapes, op.results)]
        self._launch(kernel, values, outputs, specs)
        return outputs

    def run(self, inputs: Sequence[Any]) -> list[Any]:
        assert self.top is not None
        evaluator = _Evaluator()
        block = self.top.regions[0].blocks[0]
        for arg, value in zip(block.arguments, inputs):
            evaluator.env[arg] = self._input(value, arg.type)
        with self.context, np.errstate(all="ignore"):
            for op in block.operations:
                op = op.operation
                if op.name == "func.return":
                    return [self._output(evaluator.env[v]) for v in op.operands]
                if op.name == "func.call":
                    results = self.call_group(op, [evaluator.env[v] for v in op.operands])
                    for r, value in zip(op.results, results):
                        evaluator.env[r] = value
                else:
                    self._eval(evaluator, op)
        raise FusionError("executor: @fusion has no return")


class DeviceGraphExecutor(GraphExecutor):
    """Runs a grouped fusion on the GPU with torch CUDA tensors: each group a GPU kernel
    launched on torch's current stream, library ops (and views) through torch; any other op
    left outside a group through the numpy reference (copied to the host and back)."""

    def __init__(self, module_text: str, arch: str, binary_format: str | None = None):
        super().__init__(module_text)
        self.arch = arch
        self.binary_format = binary_format

    def _compile(self, fusion_ir: str, specs: tuple[InputSpec, ...]) -> Any:
        from mlirfuse.gpu_kernel import GpuKernel

        return GpuKernel(fusion_ir, specs, self.arch, self.binary_format)

    def _contiguous(self, value: Any) -> bool:
        return bool(value.is_contiguous())

    def _empty(self, shape: tuple[int, ...], dtype: DataType) -> Any:
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype.value), device="cuda")

    def _launch(self, kernel: Any, values: Sequence[Any], outputs: Sequence[Any],
                specs: Sequence[InputSpec]) -> None:
        import torch

        kernel.launch_torch(values, outputs, torch.cuda.current_device())

    def _reference(self, func: ir.Operation, values: Sequence[Any]) -> list[Any]:
        import torch

        results = _Evaluator().run(func, [_to_host(v) for v in values])
        return [torch.from_numpy(np.ascontiguousarray(r)).cuda() for r in results]

    def _by_value(self, value: Any) -> bool:
        # The lowering reads 0-d operands such as a dropout seed on the host: a 0-d GPU
        # tensor would be a device pointer there, so its value is fetched (rare: a seed or
        # scale computed on the GPU).
        return True

    def _input(self, value: Any, type_: ir.Type) -> Any:
        if isinstance(type_, ir.RankedTensorType) and not hasattr(value, "is_cuda"):
            return np.asarray(value, dtype=element_dtype(type_).np)  # a runtime scalar, on the host
        return value

    def _output(self, value: Any) -> Any:
        return value.contiguous() if hasattr(value, "contiguous") else value

    def _eval(self, evaluator: _Evaluator, op: ir.Operation) -> None:
        import torch

        name = op.name
        args = [evaluator.env[v] for v in op.operands]
        if name.startswith("arith."):
            evaluator.env[op.results[0]] = index_value(op, args)
            return
        kind = name[len("fusion."):]
        row = OPS.get(kind)
        if kind == "size":
            result = int(args[0].shape[int(ir.IntegerAttr(op.attributes["dim"]).value)])
        elif row is not None and row.kind == "library":
            result = torch_library_op(kind, args)
        elif kind in TORCH_VIEWS:
            result = TORCH_VIEWS[kind](op, args)
        else:  # an ungrouped op (none today: on the GPU every fusible op is in a group)
            host = _Evaluator()
            for v, a in zip(op.operands, args):
                host.env[v] = _to_host(a)
            host.eval(op)
            for r in op.results:
                value = host.env[r]
                evaluator.env[r] = torch.from_numpy(np.ascontiguousarray(value)).cuda() \
                    if isinstance(value, np.ndarray) else value
            return
        out = op.results[0]
        if isinstance(out.type, ir.RankedTensorType):
            result = result.to(getattr(torch, element_dtype(out.type).value))
        evaluator.env[out] = result


def _to_host(value: Any) -> Any:
    return value.cpu().numpy() if hasattr(value, "cpu") else value


def torch_library_op(name: str, args: Sequence[Any]) -> Any:
    """matmul (numpy semantics) and linear (x @ w.T + bias) through torch."""
    import torch

    if name == "matmul":
        return torch.matmul(*args)
    if name == "linear":
        return torch.nn.functional.linear(*args)
    raise FusionError(f"executor: no torch implementation of library op {name}")


def _result_shape(op: ir.Operation, sizes: Sequence[int]) -> list[int]:
    it = iter(sizes)
    return [int(next(it)) if s == -1 else s for s in ir.DenseI64ArrayAttr(op.attributes["shape"])]


def _ints(op: ir.Operation, name: str) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def _broadcast_in_dim(op: ir.Operation, args: Sequence[Any]) -> Any:
    shape = _result_shape(op, args[1:])
    src = [1] * len(shape)
    for i, d in enumerate(_ints(op, "broadcast_dims")):
        src[d] = args[0].shape[i]
    return args[0].reshape(src).expand(shape)


# Views on torch tensors, as the numpy reference defines them (meta-only: no copy unless
# a reshape of a non-contiguous view needs one).
TORCH_VIEWS = {
    "broadcast_in_dim": _broadcast_in_dim,
    "expand": lambda op, a: a[0].expand(_result_shape(op, a[1:])),
    "reshape": lambda op, a: a[0].reshape(_result_shape(op, a[1:])),
    "permute": lambda op, a: a[0].permute(_ints(op, "dims")),
    "squeeze": lambda op, a: a[0].reshape([s for i, s in enumerate(a[0].shape) if i not in _ints(op, "dims")]),
    "unsqueeze": lambda op, a: a[0].unsqueeze(int(ir.IntegerAttr(op.attributes["dim"]).value)),
}
