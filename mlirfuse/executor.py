"""Running a grouped fusion: fusion groups as compiled kernels, the rest by a library.

After `fusion-group` the top function holds shape arithmetic, calls to groups, library ops
(matmul, linear), views and ops left ungrouped. The executor turns it once into a program of
Python steps (no MLIR calls per run): a call runs the group's compiled kernel (compiled once
per group and argument signature; outputs allocated from inferred shapes), library ops and
views run through numpy (`GraphExecutor`, CPU) or torch on CUDA tensors
(`DeviceGraphExecutor`, GPU), anything else through the numpy reference semantics.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from mlir import ir

from mlirfuse.arrays import torch_empty
from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.dialects.optable import OPS
from mlirfuse.dtypes import DataType
from mlirfuse.errors import FusionError, IndexOutOfRange
from mlirfuse.fallback import fall_back
from mlirfuse.frontend.graph import InputSpec
from mlirfuse.passes.fusion_group import GROUP_ATTR
from mlirfuse.reference import _attr, _Evaluator, compute_dtype, element_dtype
from mlirfuse.shapes import function_result_shapes

Step = tuple[Callable[[list[Any]], list[Any]], tuple[int, ...], tuple[int, ...]]
_INDEX_FNS = {"muli": lambda a, b: a * b, "addi": lambda a, b: a + b, "subi": lambda a, b: a - b,
              "divsi": lambda a, b: a // b if b else 0, "divui": lambda a, b: a // b if b else 0}


def _name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _ints(op: ir.Operation, name: str) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def group_as_fusion(func: ir.Operation) -> str:
    """A group function as a stand-alone fusion module (its function named @fusion)."""
    text = str(func)
    text = re.sub(r"func\.func private @[\w$.]+", "func.func @fusion", text, count=1)
    text = text.replace(" attributes {fusion.group}", "", 1)
    return "module {\n" + text + "\n}\n"


@dataclass(frozen=True)
class _Param:
    """One argument of a group: a tensor (dtype, static sizes or None) or an index."""

    tensor: bool
    dtype: DataType
    shape: tuple[int | None, ...] = ()


@dataclass
class _Group:
    name: str
    func: ir.Operation
    ir_text: str
    params: list[_Param]
    results: list[DataType]


def _param(type_: ir.Type) -> _Param:
    if not isinstance(type_, ir.RankedTensorType):
        return _Param(False, DataType.Int)
    t = ir.RankedTensorType(type_)
    return _Param(True, element_dtype(type_), tuple(None if t.is_dynamic_dim(i) else s for i, s in enumerate(t.shape)))


def _filled(static: Sequence[int], sizes: Sequence[Any]) -> list[int]:
    it = iter(sizes)
    return [int(next(it)) if s == -1 else s for s in static]


class GraphExecutor:
    """Runs a grouped fusion on the CPU: numpy arrays, groups compiled by the CPU backend."""

    def __init__(self, module_text: str):
        self._for_torch = threading.local()
        self.context = fusion_dialect.new_context()
        with self.context, ir.Location.unknown():
            self.module = ir.Module.parse(module_text)
            self.groups: dict[str, _Group] = {}
            top = None
            for op in self.module.body.operations:
                op = op.operation
                if op.name != "func.func":
                    continue
                if GROUP_ATTR in op.attributes:
                    block = op.regions[0].blocks[0]
                    results = [element_dtype(t) for t in ir.FunctionType(
                        ir.TypeAttr(op.attributes["function_type"]).value).results]
                    self.groups[_name(op)] = _Group(_name(op), op, group_as_fusion(op),
                                                    [_param(a.type) for a in block.arguments], results)
                elif _name(op) == "fusion":
                    top = op
            if top is None:
                raise FusionError("executor: no @fusion function")
            self._compile_program(top)
        self._kernels: dict[tuple, Any] = {}
        self._shapes: dict[tuple, list[Any]] = {}
        self._lock = threading.Lock()
        self._failed: set[str] = set()  # groups running through the reference (fallback)

    @property
    def group_ir(self) -> dict[str, str]:
        return {name: g.ir_text for name, g in self.groups.items()}

    @property
    def n_kernels(self) -> int:
        return len(self.groups)

    def kernels(self) -> dict[tuple, Any]:
        """The compiled groups so far: (group name, argument layout) -> kernel."""
        with self._lock:
            return dict(self._kernels)

    def kernel(self, group: _Group, layout: tuple[str, ...]) -> Any:
        """The kernel of `group` for an argument layout (see `call_group`), compiled once."""
        key = (group.name, layout)
        with self._lock:
            if key not in self._kernels:
                specs = tuple(InputSpec(DataType.Int, (), scalar=True) if k == "i" else
                              InputSpec(p.dtype, (), scalar=True) if k == "s" else
                              InputSpec(p.dtype, p.shape, k == "c") for k, p in zip(layout, group.params))
                self._kernels[key] = self._compile(group.ir_text, specs)
            return self._kernels[key]

    # -- the program: one Python step per op of the top function ------------------------------
    def _compile_program(self, top: ir.Operation) -> None:
        slots: dict[ir.Value, int] = {}

        def slot(v: ir.Value) -> int:
            return slots.setdefault(v, len(slots))

        block = top.regions[0].blocks[0]
        self._params = [(slot(a), _param(a.type)) for a in block.arguments]
        self._steps: list[Step] = []
        self._returns: tuple[int, ...] = ()
        for op in block.operations:
            op = op.operation
            ins = tuple(slot(v) for v in op.operands)
            if op.name == "func.return":
                self._returns = ins
                break
            outs = tuple(slot(r) for r in op.results)
            self._steps.append((self._step(op), ins, outs))
        self._n_slots = len(slots)

    def _step(self, op: ir.Operation) -> Callable[[list[Any]], list[Any]]:
        name = op.name
        if name == "func.call":
            return functools.partial(self.call_group, self.groups[ir.FlatSymbolRefAttr(op.attributes["callee"]).value])
        if name == "arith.constant":
            value = int(ir.IntegerAttr(op.attributes["value"]).value)
            return lambda args: [value]
        if name[len("arith."):] in _INDEX_FNS:
            fn = _INDEX_FNS[name[len("arith."):]]
            return lambda args: [fn(*args)]
        kind = name[len("fusion."):]
        row = OPS.get(kind) if name.startswith("fusion.") else None
        if row is not None and row.kind == "size":
            dim = int(ir.IntegerAttr(op.attributes["dim"]).value)
            return lambda args: [int(args[0].shape[dim])]
        if row is not None and row.kind == "library":
            dtype = element_dtype(op.results[0].type)
            attrs = {a: _attr(op, a) for a in row.attributes}
            return lambda args: [self._library(kind, args, dtype, attrs)]
        if kind in ("reshape", "expand", "broadcast_in_dim", "permute", "squeeze", "unsqueeze"):
            return self._view_step(op, kind)
        return self._reference_step(op)

    def _view_step(self, op: ir.Operation, kind: str) -> Callable[[list[Any]], list[Any]]:
        if kind == "permute":
            dims = _ints(op, "dims")
            return lambda args: [self._permute(args[0], dims)]
        if kind == "squeeze":
            dims = set(_ints(op, "dims"))
            return lambda args: [args[0].reshape([s for i, s in enumerate(args[0].shape) if i not in dims])]
        if kind == "unsqueeze":
            dim = int(ir.IntegerAttr(op.attributes["dim"]).value)
            return lambda args: [args[0].reshape(tuple(args[0].shape[:dim]) + (1,) + tuple(args[0].shape[dim:]))]
        static = _ints(op, "shape")
        if kind == "reshape":
            return lambda args: [args[0].reshape(_filled(static, args[1:]))]
        if kind == "expand":
            return lambda args: [self._broadcast(args[0], _filled(static, args[1:]))]
        bdims = _ints(op, "broadcast_dims")

        def broadcast_in_dim(args: list[Any]) -> list[Any]:
            shape = _filled(static, args[1:])
            src = [1] * len(shape)
            for i, d in enumerate(bdims):
                src[d] = args[0].shape[i]
            return [self._broadcast(args[0].reshape(src), shape)]
        return broadcast_in_dim

    def _reference_step(self, op: ir.Operation) -> Callable[[list[Any]], list[Any]]:
        """Any other op (left outside a group): the numpy reference, on host copies."""
        def run(args: list[Any]) -> list[Any]:
            evaluator = _Evaluator()
            for v, a in zip(op.operands, args):
                evaluator.env[v] = self._to_host(a)
            with self.context, np.errstate(all="ignore"):
                evaluator.eval(op)
            return [self._from_host(np.array(evaluator.env[r], order="C")) for r in op.results]  # (see `run`)
        return run

    # -- what differs between the CPU and the GPU ----------------------------------------------
    def _compile(self, fusion_ir: str, specs: tuple[InputSpec, ...]) -> Any:
        from mlirfuse.lowering.cpu.compile import compile_cpu

        return compile_cpu(fusion_ir, specs), [s.scalar for s in specs]

    def _contiguous(self, value: Any) -> bool:
        return bool(value.flags.c_contiguous)

    def _by_value(self, value: Any) -> bool:
        """Whether a 0-d argument goes to the kernel by value (else as a 0-d buffer)."""
        return False

    def _tensor_argument(self, value: Any) -> Any:
        return value

    def _empty(self, shape: tuple[int, ...], dtype: DataType) -> Any:
        if getattr(self._for_torch, "value", False):
            return torch_empty(shape, dtype)
        return np.empty(shape, dtype=dtype.np)

    def _launch(self, kernel: Any, values: Sequence[Any], outputs: Sequence[Any]) -> None:
        compiled, scalar = kernel
        compiled(values, outputs, scalar)

    def _library(self, name: str, args: Sequence[Any], dtype: DataType, attrs: dict[str, Any]) -> Any:
        converted = [np.asarray(a).astype(compute_dtype(element_dtype_of(a)), copy=False) for a in args]
        return np.asarray(OPS[name].ref(*converted, **attrs)).astype(dtype.np, copy=False)

    def _permute(self, x: Any, dims: Sequence[int]) -> Any:
        return np.transpose(x, dims)

    def _broadcast(self, x: Any, shape: Sequence[int]) -> Any:
        return np.broadcast_to(x, shape)

    def _input(self, value: Any, param: _Param) -> Any:
        return np.asarray(value, dtype=param.dtype.np) if param.tensor else int(value)

    def _output(self, value: Any) -> Any:
        return np.asarray(value, order="C")  # (ascontiguousarray makes a 0-d array 1-d)

    def _to_host(self, value: Any) -> Any:
        return value

    def _from_host(self, value: Any) -> Any:
        return value

    # -- running -------------------------------------------------------------------------------
    def call_group(self, group: _Group, values: Sequence[Any]) -> list[Any]:
        # Per argument: "i" index, "s" 0-d by value, "c"/"n" (non-)contiguous tensor. With the
        # group's static types they make its signature (a cheap key for the kernel lookup).
        layout, shape_args, values = [], [], list(values)
        for i, (p, v) in enumerate(zip(group.params, values)):
            if not p.tensor:
                layout.append("i")
                values[i] = np.asarray(v, np.int64)
                shape_args.append(int(v))
                continue
            if not p.shape and self._by_value(v):
                values[i] = np.asarray(v.item() if hasattr(v, "item") else v, p.dtype.np)
                layout.append("s")
            else:
                v = values[i] = self._tensor_argument(v)
                layout.append("c" if self._contiguous(v) else "n")
            shape_args.append(tuple(v.shape))
        if group.name in self._failed:
            return self._run_reference(group, values)
        key = (group.name, tuple(shape_args))
        shapes = self._shapes.get(key)
        if shapes is None:
            with self.context:
                shapes = self._shapes[key] = function_result_shapes(group.func, shape_args)
        kernel = self._kernels.get((group.name, tuple(layout)))
        if kernel is None:
            try:
                kernel = self.kernel(group, tuple(layout))
            except Exception as e:  # noqa: BLE001 - any compiler failure takes the fallback path
                fall_back(group.ir_text, e, f"compiling fusion group @{group.name}")
                self._failed.add(group.name)
                return self._run_reference(group, values)
        outputs = [self._empty(s, dt) for s, dt in zip(shapes, group.results)]
        try:
            self._launch(kernel, values, outputs)
        except IndexOutOfRange:
            raise  # the inputs' fault, as torch's IndexError: not the compiler's
        except Exception as e:  # noqa: BLE001 - a failing run takes the fallback path too
            fall_back(group.ir_text, e, f"running fusion group @{group.name}")
            self._failed.add(group.name)
            return self._run_reference(group, values)
        return outputs

    def _run_reference(self, group: _Group, values: Sequence[Any]) -> list[Any]:
        with self.context:
            results = _Evaluator().run(group.func, [self._to_host(v) for v in values])
        return [self._from_host(r) for r in results]

    def run(self, inputs: Sequence[Any], for_torch: bool = False) -> list[Any]:
        """The graph's results for `inputs`; `for_torch`: results are handed to torch, so
        kernels write them into memory torch allocated (see `arrays.torch_empty`)."""
        self._for_torch.value = for_torch
        env: list[Any] = [None] * self._n_slots
        for (slot, param), value in zip(self._params, inputs):
            env[slot] = self._input(value, param)
        with np.errstate(all="ignore"):
            for fn, ins, outs in self._steps:
                for o, r in zip(outs, fn([env[i] for i in ins])):
                    env[o] = r
        return [self._output(env[i]) for i in self._returns]


def element_dtype_of(array: Any) -> DataType:
    from mlirfuse.dtypes import to_dtype

    return to_dtype(np.asarray(array).dtype)


class DeviceGraphExecutor(GraphExecutor):
    """Runs a grouped fusion on the GPU with torch CUDA tensors: each group a GPU kernel
    launched on torch's current stream, library ops (cuBLAS) and views through torch."""

    def __init__(self, module_text: str, arch: str, binary_format: str | None = None):
        self.arch = arch
        self.binary_format = binary_format
        super().__init__(module_text)

    @functools.cached_property
    def torch(self) -> Any:
        import torch  # only when it runs: compiling for the GPU needs no torch

        return torch

    def _compile(self, fusion_ir: str, specs: tuple[InputSpec, ...]) -> Any:
        from mlirfuse.gpu_kernel import GpuKernel

        return GpuKernel(fusion_ir, specs, self.arch, self.binary_format)

    def _contiguous(self, value: Any) -> bool:
        return bool(value.is_contiguous())

    def _by_value(self, value: Any) -> bool:
        # The lowering reads 0-d operands such as a dropout seed on the host: a 0-d GPU
        # tensor would be a device pointer there, so its value is fetched (rare: a seed or
        # scale computed on the GPU).
        return True

    def _empty(self, shape: tuple[int, ...], dtype: DataType) -> Any:
        return self.torch.empty(shape, dtype=getattr(self.torch, dtype.value), device="cuda")

    def _launch(self, kernel: Any, values: Sequence[Any], outputs: Sequence[Any]) -> None:
        kernel.launch_torch(values, outputs, self.torch.cuda.current_device())

    def _tensor_argument(self, value: Any) -> Any:
        return self._from_host(value)  # e.g. a runtime scalar broadcast in the caller

    def _library(self, name: str, args: Sequence[Any], dtype: DataType, attrs: dict[str, Any]) -> Any:
        torch = self.torch
        args = [self._from_host(a) for a in args]
        if name == "matmul":
            out = torch.matmul(*args)
        elif name == "linear":
            out = torch.nn.functional.linear(*args)
        elif name == "cumsum":
            x, dim = args[0], attrs["dim"]
            if x.is_floating_point() and x.element_size() < 4:
                x = x.float()  # half precision and float8 summed in float32, rounded once (as on the CPU)
            out = torch.flip(torch.cumsum(torch.flip(x, [dim]), dim), [dim]) if attrs["reverse"] else x.cumsum(dim)
        elif name in ("cumprod", "cummax", "cummin", "cumprod_grad", "cummaxmin_grad"):
            out = _torch_scan(torch, name, args, attrs)
        else:
            raise FusionError(f"executor: no torch implementation of library op {name}")
        return out.to(getattr(torch, dtype.value))

    def _permute(self, x: Any, dims: Sequence[int]) -> Any:
        return self._from_host(x).permute(list(dims))

    def _broadcast(self, x: Any, shape: Sequence[int]) -> Any:
        return self._from_host(x).expand(list(shape))

    def _input(self, value: Any, param: _Param) -> Any:
        if not param.tensor:
            return int(value)
        if isinstance(value, self.torch.Tensor):
            return value
        return np.asarray(value, dtype=param.dtype.np)  # a runtime scalar stays on the host

    def _output(self, value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return self._from_host(value)
        return value.contiguous()

    def _to_host(self, value: Any) -> Any:
        return value.cpu().numpy() if isinstance(value, self.torch.Tensor) else value

    def _from_host(self, value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return self.torch.from_numpy(np.asarray(value, order="C")).cuda()
        return value


def _torch_scan(torch: Any, name: str, args: Sequence[Any], attrs: dict[str, Any]) -> Any:
    """The library scans other than cumsum, and the gradients of cumprod/cummax/cummin, in
    torch: half precision and float8 computed in float32 (as numpy does on the CPU), bools
    through uint8 (torch's cummax/cummin have no bool kernel)."""
    dim = attrs["dim"]
    xs = [a.float() if a.is_floating_point() and a.element_size() < 4 else a for a in args]
    if name == "cumprod":
        return xs[0].cumprod(dim)
    if name in ("cummax", "cummin"):
        x = xs[0].to(torch.uint8) if xs[0].dtype == torch.bool else xs[0]
        return getattr(torch, name)(x, dim).values
    g, x, y = xs
    if name == "cumprod_grad":
        return torch.ops.aten.cumprod_backward(g, x, dim, y)
    _, index = (torch.cummax if attrs["max"] else torch.cummin)(x, dim)
    return torch.ops.aten.cummaxmin_backward(g, x, index, dim)
