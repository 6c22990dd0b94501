"""CPU backend: fusion IR -> linalg -> loops -> LLVM, run by MLIR's ExecutionEngine.

The compiled entry point is destination-passing: the host allocates outputs (numpy) and
passes every array as a memref descriptor, so one compile serves all shapes.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import InputSpec
from mlirfuse.passes import Pipeline

ENTRY = "mlirfuse_entry"

# Stage pipelines (each replayable with mlirfuse-opt).
# bf16 conversions are expanded into integer ops before canonicalize can fold them into
# int<->bf16 casts that LLVM lowers to compiler-rt calls the JIT cannot resolve.
# Shapes are resolved to the inputs' dims first: a `tensor.dim` of an intermediate counts as
# a second use and stops elementwise fusion.
TO_LINALG = ("builtin.module(fusion-to-linalg{target=cpu}, arith-expand{include-bf16=true}, "
             "canonicalize, resolve-shaped-type-result-dims, canonicalize, cse, "
             "func.func(linalg-fuse-elementwise-ops), canonicalize, cse)")
BUFFERIZE = ("builtin.module(inline, symbol-dce, canonicalize, eliminate-empty-tensors, "
             "one-shot-bufferize{bufferize-function-boundaries "
             "function-boundary-type-conversion=identity-layout-map}, "
             "buffer-deallocation-pipeline, canonicalize, cse)")
TO_LLVM = ("builtin.module(func.func(convert-linalg-to-loops), convert-scf-to-cf, "
           "expand-strided-metadata, lower-affine, "
           "finalize-memref-to-llvm, convert-math-to-llvm, convert-math-to-libm, "
           "convert-arith-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, "
           "reconcile-unrealized-casts)")


def memref_type(spec_shape: Sequence[int | None], element: str, contiguous: bool) -> str:
    dims = "".join(f"{'?' if s is None else s}x" for s in spec_shape)
    if contiguous or not spec_shape:
        return f"memref<{dims}{element}>"
    strides = ", ".join("?" for _ in spec_shape)
    return f"memref<{dims}{element}, strided<[{strides}], offset: ?>>"


def _tensor_shape(t: ir.Type) -> list[int | None]:
    rt = ir.RankedTensorType(t)
    return [None if rt.is_dynamic_dim(i) else s for i, s in enumerate(rt.shape)]


def add_entry_point(module: ir.Module, specs: Sequence[InputSpec]) -> None:
    """Wrap @fusion in a destination-passing @mlirfuse_entry taking memrefs."""
    func = next(op for op in module.body.operations if op.operation.name == "func.func")
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    args, lines = [], []
    for i, (t, spec) in enumerate(zip(ftype.inputs, specs)):
        elem = str(ir.RankedTensorType(t).element_type)
        mt = memref_type(_tensor_shape(t), elem, spec.contiguous)
        args.append(f"%in{i}: {mt}")
        lines.append(f"%t{i} = bufferization.to_tensor %in{i} restrict : {mt} to {t}")
    outs = []
    for j, t in enumerate(ftype.results):
        elem = str(ir.RankedTensorType(t).element_type)
        mt = memref_type(_tensor_shape(t), elem, True)
        args.append(f"%out{j}: {mt}")
        outs.append((mt, t))
    ins = ", ".join(f"%t{i}" for i in range(len(ftype.inputs)))
    in_types = ", ".join(str(t) for t in ftype.inputs)
    res_types = ", ".join(str(t) for t in ftype.results)
    if outs:
        lines.append(f"%r:{len(outs)} = func.call @fusion({ins}) : ({in_types}) -> ({res_types})")
    for j, (mt, t) in enumerate(outs):
        lines.append(f"bufferization.materialize_in_destination %r#{j} in restrict writable "
                     f"%out{j} : ({t}, {mt}) -> ()")
    text = (f"func.func @{ENTRY}({', '.join(args)}) attributes {{llvm.emit_c_interface}} {{\n  "
            + "\n  ".join(lines) + "\n  return\n}")
    func.attributes["sym_visibility"] = ir.StringAttr.get("private")
    declaration = f"func.func private @fusion({in_types}) -> ({res_types})\n"
    wrapper = ir.Module.parse(declaration + text)
    entry = wrapper.body.operations[1]
    entry.operation.detach_from_parent()
    module.body.append(entry.operation)


@dataclass
class CompiledCpu:
    engine: ExecutionEngine
    n_outputs: int
    stages: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0

    def __post_init__(self) -> None:
        address = self.engine.raw_lookup("_mlir_ciface_" + ENTRY)
        if not address:
            raise FusionError("CPU backend: entry point missing after compilation")
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        descriptors = [descriptor(a) for a in list(inputs) + list(outputs)]
        pointers = [ctypes.pointer(d) for d in descriptors]
        packed = (ctypes.c_void_p * len(pointers))()
        for i, p in enumerate(pointers):
            packed[i] = ctypes.addressof(p)
        self._fn(packed)


_DESCRIPTOR_CLASSES: dict[int, type] = {}  # explicit cache: one ctypes class per rank


def descriptor_class(rank: int) -> type:
    cls = _DESCRIPTOR_CLASSES.get(rank)
    if cls is None:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64)]
        if rank:
            fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        cls = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
        _DESCRIPTOR_CLASSES[rank] = cls
    return cls


def descriptor(a: np.ndarray) -> ctypes.Structure:
    d = descriptor_class(a.ndim)()
    ptr = a.ctypes.data
    d.allocated = ptr
    d.aligned = ptr
    d.offset = 0
    if a.ndim:
        d.sizes[:] = a.shape
        d.strides[:] = [s // a.itemsize for s in a.strides]
    return d


def compile_cpu(fusion_ir: str, specs: Sequence[InputSpec], keep_stages: bool = False) -> CompiledCpu:
    """Compile fusion IR for the host; `keep_stages` records the IR after every stage."""
    start = time.perf_counter()
    stages: dict[str, str] = {}
    with fusion_dialect.context() as ctx:
        module = fusion_dialect.parse(fusion_ir, ctx)
        if keep_stages:
            stages["fusion"] = str(module)
        n_outputs = len(ir.FunctionType(ir.TypeAttr(
            module.body.operations[0].attributes["function_type"]).value).results)
        for name, pipeline in (("linalg", TO_LINALG), ("bufferized", None), ("llvm", TO_LLVM)):
            if name == "bufferized":
                add_entry_point(module, specs)
                pipeline = BUFFERIZE
            run_pipeline(module, pipeline, name)
            if keep_stages:
                stages[name] = str(module)
        engine = ExecutionEngine(module, opt_level=3, shared_libs=[])
        engine.initialize()
    return CompiledCpu(engine, n_outputs, stages, time.perf_counter() - start)


def run_pipeline(module: ir.Module, pipeline: str, stage: str) -> None:
    try:
        Pipeline(pipeline).run(module)
    except FusionError as e:
        raise FusionError(f"CPU backend: stage '{stage}' failed: {e}\npipeline: {pipeline}") from None
