"""A numpy evaluator of fusion IR: the test oracle and the fallback path.

It follows the same semantics the backends implement: float16/bfloat16 ops compute in
float32 and round each result; reductions of 16-bit floats accumulate in float32.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from mlir import ir

from mlirfuse import reference_philox
from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.dialects.optable import OPS
from mlirfuse.dtypes import DataType, from_mlir, to_storage
from mlirfuse.errors import FusionError, IndexOutOfRange
from mlirfuse.lowering.indexing import GATHER_OUT_OF_RANGE


def element_dtype(type_: ir.Type) -> DataType:
    return from_mlir(str(ir.ShapedType(type_).element_type))


def compute_dtype(dt: DataType) -> np.dtype:
    return DataType.Float.np if dt.is_low_precision else dt.np


def _ints(attr: ir.Attribute) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(attr)]


def _attr(op: ir.Operation, name: str) -> Any:
    a = op.attributes[name]
    if isinstance(a, ir.DenseI64ArrayAttr):
        return _ints(a)
    if isinstance(a, (ir.BoolAttr, ir.IntegerAttr, ir.FloatAttr)):
        return a.value
    raise FusionError(f"{op.name}: unsupported attribute {name} = {a}")


def result_shape(op: ir.Operation, sizes: Sequence[int]) -> list[int]:
    """Static `shape` attribute with its -1 entries filled from the size operands."""
    it = iter(sizes)
    return [next(it) if s == -1 else s for s in _attr(op, "shape")]


def _reduce(name: str, x: np.ndarray, axes: list[int], keepdim: bool, out: DataType,
            correction: float = 0.0) -> list[np.ndarray]:
    ax = tuple(axes)
    acc = compute_dtype(out)
    if name == "sum":
        return [np.sum(x, axis=ax, keepdims=keepdim, dtype=acc)]
    if name == "prod":
        return [np.prod(x, axis=ax, keepdims=keepdim, dtype=acc)]
    if name in ("max", "min"):
        fn = np.max if name == "max" else np.min
        if x.dtype.kind == "f":
            init = -np.inf if name == "max" else np.inf
        elif x.dtype == np.bool_:
            init = name == "min"
        else:
            info = np.iinfo(x.dtype)
            init = info.min if name == "max" else info.max
        return [fn(x, axis=ax, keepdims=keepdim, initial=init)]
    x = x.astype(acc)
    count = int(np.prod([x.shape[a] for a in ax])) if ax else 1
    mean = np.sum(x, axis=ax, keepdims=True, dtype=acc) / acc.type(count) if count else \
        np.full([1 if i in ax else s for i, s in enumerate(x.shape)], np.nan, acc)
    mean_out = mean if keepdim else np.squeeze(mean, axis=ax)
    if name == "mean":
        return [mean_out]
    sq = np.sum(np.square(x - mean), axis=ax, keepdims=keepdim, dtype=acc)
    var = sq / acc.type(max(count - correction, 0))
    return [var] if name == "var" else [var, mean_out]


class _Evaluator:
    def __init__(self) -> None:
        self.env: dict[ir.Value, Any] = {}

    def run(self, func: ir.Operation, inputs: Sequence[Any]) -> list[np.ndarray]:
        block = func.regions[0].blocks[0]
        if len(inputs) != len(block.arguments):
            raise FusionError(f"reference: expected {len(block.arguments)} inputs, got {len(inputs)}")
        for i, (arg, value) in enumerate(zip(block.arguments, inputs)):
            if not isinstance(arg.type, ir.RankedTensorType):
                self.env[arg] = int(value)
                continue
            t = ir.RankedTensorType(arg.type)
            array = np.asarray(value, dtype=element_dtype(arg.type).np)
            static_ok = array.ndim == t.rank and all(
                t.is_dynamic_dim(d) or s == array.shape[d] for d, s in enumerate(t.shape))
            if not static_ok:
                raise FusionError(f"reference: input {i} has shape {array.shape}, not of type {t}")
            self.env[arg] = array
        with np.errstate(all="ignore"):
            for op in block.operations:
                op = op.operation
                if op.name == "func.return":
                    # each result in memory of its own, dense, as a kernel writes it (numpy's
                    # views would hand back an input for a copy, a strided view for a permute)
                    return [np.array(self.env[v], order="C") for v in op.operands]
                self.eval(op)
        raise FusionError("reference: function has no return")

    def eval(self, op: ir.Operation) -> None:
        name = op.name
        args = [self.env[v] for v in op.operands]
        try:
            if name.startswith("arith."):
                results = [self.eval_index(op, args)]
            elif name.startswith("fusion."):
                results = self.eval_fusion(op, name[len("fusion."):], args)
            else:
                raise FusionError(f"reference: cannot evaluate {name}")
        except (ValueError, IndexError, TypeError, KeyError, ZeroDivisionError) as e:
            if isinstance(e, FusionError):
                raise
            raise FusionError(f"reference: {name} failed on operand shapes "
                              f"{[getattr(a, 'shape', a) for a in args]}: {e}") from None
        for r, v in zip(op.results, results):
            if isinstance(r.type, ir.RankedTensorType):
                dt = element_dtype(r.type)
                v = to_storage(np.asarray(v), dt)
            self.env[r] = v

    @staticmethod
    def eval_index(op: ir.Operation, args: list[int]) -> int:
        kind = op.name[len("arith."):]
        if kind == "constant":
            return int(ir.IntegerAttr(op.attributes["value"]).value)
        a, b = args
        if kind == "muli":
            return a * b
        if kind == "addi":
            return a + b
        if kind == "subi":
            return a - b
        if kind in ("divsi", "divui"):
            return a // b
        raise FusionError(f"reference: cannot evaluate {op.name}")

    def eval_fusion(self, op: ir.Operation, name: str, args: list[Any]) -> list[Any]:
        if name not in OPS:
            raise FusionError(f"reference: unknown op fusion.{name}")
        row = OPS[name]
        out_types = [element_dtype(r.type) for r in op.results if isinstance(r.type, ir.RankedTensorType)]
        if row.kind in ("elementwise", "library"):
            operand_dts = [element_dtype(v.type) for v in op.operands]
            converted = [a.astype(compute_dtype(dt), copy=False) for a, dt in zip(args, operand_dts)]
            return [row.ref(*converted, **{a: _attr(op, a) for a in row.attributes})]
        if row.kind == "reduction":
            extra = {"correction": _attr(op, "correction")} if "correction" in row.attributes else {}
            x = args[0]
            if element_dtype(op.operands[0].type).is_low_precision:
                x = x.astype(np.float32)
            return _reduce(name, x, _attr(op, "axes"), bool(_attr(op, "keepdim")), out_types[0], **extra)
        if row.kind == "size":
            return [int(args[0].shape[_attr(op, "dim")])]
        if row.kind == "cast":
            return [args[0]]  # eval() converts results to their type
        if row.kind == "constant":
            return [np.array(_attr(op, "value"))]
        if row.kind == "random":
            return [self.eval_random(op, name, args, out_types[0])]
        if row.kind == "indexing":
            return [eval_indexing(op, name, args, out_types[0])]
        return [self.eval_shape(op, name, args)]

    @staticmethod
    def eval_shape(op: ir.Operation, name: str, args: list[Any]) -> np.ndarray:
        x = args[0]
        if name == "broadcast_in_dim":
            shape = result_shape(op, args[1:])
            dims = _attr(op, "broadcast_dims")
            src = [1] * len(shape)
            for i, d in enumerate(dims):
                src[d] = x.shape[i]
            return np.broadcast_to(x.reshape(src), shape)
        if name == "expand":
            return np.broadcast_to(x, result_shape(op, args[1:]))
        if name == "reshape":
            return np.reshape(x, result_shape(op, args[1:]))
        if name == "permute":
            return np.transpose(x, _attr(op, "dims"))
        if name == "squeeze":
            return np.squeeze(x, axis=tuple(_attr(op, "dims")))
        if name == "unsqueeze":
            return np.expand_dims(x, _attr(op, "dim"))
        raise FusionError(f"reference: cannot evaluate fusion.{name}")

    @staticmethod
    def eval_random(op: ir.Operation, name: str, args: list[Any], out: DataType) -> np.ndarray:
        if name == "uniform":
            lo, hi, seed, offset = (a.item() for a in args[:4])
            shape = result_shape(op, args[4:])
        else:
            lo, hi = 0.0, 1.0
            shape = list(args[0].shape)
            seed, offset = args[1].item(), args[2].item()
        return reference_philox.uniform(tuple(shape), int(seed), int(offset), float(lo), float(hi), out.np)


def eval_indexing(op: ir.Operation, name: str, args: list[Any], out: DataType) -> np.ndarray:
    if name == "iota":
        shape = result_shape(op, args)
        dim = _attr(op, "dim")
        acc = compute_dtype(out)
        i = np.arange(shape[dim], dtype=acc).reshape([-1 if d == dim else 1 for d in range(len(shape))])
        return np.broadcast_to(acc.type(_attr(op, "start")) + acc.type(_attr(op, "step")) * i, shape)
    x = args[0]
    if name == "slice":
        shape = result_shape(op, args[1:])
        for d, (s, st, n) in enumerate(zip(_attr(op, "starts"), _attr(op, "steps"), shape)):
            x = np.take(x, np.arange(n, dtype=np.int64) * st + s, axis=d)
        return x
    if name == "cat":
        return np.concatenate(args, axis=_attr(op, "dim"))
    if name == "pad":
        low, high = _attr(op, "low"), _attr(op, "high")
        crop = tuple(slice(max(0, -lo), x.shape[d] - max(0, -hi)) for d, (lo, hi) in enumerate(zip(low, high)))
        widths = [(max(0, lo), max(0, hi)) for lo, hi in zip(low, high)]
        return np.pad(x[crop], widths, constant_values=args[1].item())
    if name == "gather":
        index, dim = args[1].astype(np.int64), _attr(op, "dim")
        size = x.shape[dim]
        if index.size and (index.min() < -size or index.max() >= size):
            raise IndexOutOfRange(GATHER_OUT_OF_RANGE)
        index = np.clip(np.where(index < 0, index + size, index), 0, max(size - 1, 0))
        x = x[tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(index.shape))]
        return np.take_along_axis(x, index, axis=dim)
    raise FusionError(f"reference: cannot evaluate fusion.{name}")


def evaluate(module: Any, inputs: Sequence[Any], func_name: str = "fusion") -> list[np.ndarray]:
    """Run function `func_name` of fusion IR on numpy inputs; returns its results.

    `module`: fusion IR text, a parsed module, or anything printing as fusion IR with
    `to_mlir()`/`fusion` (a FusionDefinition, a traced Fusion).
    """
    if hasattr(module, "fusion") and hasattr(module.fusion, "to_mlir"):
        module = module.fusion
    if hasattr(module, "to_mlir"):
        module = module.to_mlir()
    if isinstance(module, str):
        with fusion_dialect.context() as ctx:
            return evaluate(fusion_dialect.parse(module, ctx), inputs, func_name)
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == func_name:
            return _Evaluator().run(op.operation, inputs)
    raise FusionError(f"reference: no function @{func_name}")
