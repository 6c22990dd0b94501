"""CPU backend: fusion IR -> linalg -> loops -> LLVM, run by MLIR's ExecutionEngine.

The compiled entry point is destination-passing: the host allocates outputs (numpy) and
passes every array as a memref descriptor, so one compile serves all shapes.
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from mlirfuse import cache
from mlirfuse import stages as pipelines
from mlirfuse.config import options
from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.errors import FusionError, IndexOutOfRange
from mlirfuse.frontend.graph import InputSpec
from mlirfuse.lowering.cpu import host_library
from mlirfuse.lowering.host_abi import ENTRY, ArgumentSlots
from mlirfuse.lowering.indexing import GATHER_OUT_OF_RANGE
from mlirfuse.passes.cpu_asserts_as_error_flag import TAKE as TAKE_ERROR


@dataclass
class CompiledCpu:
    engine: ExecutionEngine | None  # None where the code was loaded from a linked library
    stages: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0
    library: Any = None  # the dlopen-ed warm-start library (see compile_cpu)

    def __post_init__(self) -> None:
        self._slots = ArgumentSlots()
        name = "_mlir_ciface_" + ENTRY
        address = self.engine.raw_lookup(name) if self.engine is not None else host_library.packed(self.library, name)
        if not address:
            raise FusionError("CPU backend: entry point missing after compilation")
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        self._error = _error_flag(self.engine, self.library)
        # The checks' flag is one global of the module: calls that could set it run one at a
        # time (ctypes releases the GIL during a call), so that none reads another's failure.
        self._checked = threading.Lock() if self._error is not None else None

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
                 scalar: Sequence[bool]) -> None:
        """Run; `scalar[i]` says input i is passed by value (a runtime scalar). Raises
        `IndexOutOfRange` where a check of the code failed (`cpu-asserts-as-error-flag`)."""
        args = [a if i < len(scalar) and scalar[i] else buffer_of(a)
                for i, a in enumerate(list(inputs) + list(outputs))]
        packed = self._slots.fill(args)
        if self._checked is None:
            self._fn(packed)
            return
        with self._checked:
            self._fn(packed)
            failed = self._error()
        if failed:
            raise IndexOutOfRange(GATHER_OUT_OF_RANGE)


def _error_flag(engine: ExecutionEngine | None, library: Any) -> Callable[[], int] | None:
    """The module's `@mlirfuse_take_error` (the flag of its checks, read and cleared) through
    its packed wrapper, as the entry point is called; None where the module has no check."""
    address = engine.raw_lookup(TAKE_ERROR) if engine is not None else host_library.packed(library, TAKE_ERROR)
    if not address:
        return None
    wrapper = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
    result = ctypes.c_int32(0)
    slots = (ctypes.c_void_p * 1)(ctypes.addressof(result))

    def take() -> int:
        wrapper(slots)
        return result.value
    return take


def buffer_of(a: np.ndarray) -> tuple[int, tuple[int, ...], list[int]]:
    """(data pointer, sizes, element strides) of a host array."""
    item = a.itemsize
    return a.ctypes.data, a.shape, [st // item for st in a.strides]


def lower_cpu(fusion_ir: str, specs: Sequence[InputSpec], stages: dict[str, str] | None = None) -> str:
    """Fusion IR -> the LLVM-dialect module text of the entry point, through
    `stages.cpu_stages` (`stages` records each stage's IR), with `TRUNCSFBF2` where it
    handles bfloat16."""
    with fusion_dialect.context() as ctx:
        module = pipelines.parse_fusion(fusion_ir, specs, ctx, stages)
        text = str(pipelines.run(module, pipelines.cpu_stages(), stages, "CPU backend")).rstrip()
    if "bf16" in text and "@__truncsfbf2" not in text:
        text = text[:-1] + TRUNCSFBF2 + "}\n"  # the module's last line is its closing brace
    return text


# float32 -> bfloat16, rounded to nearest even, NaN kept (quiet, its sign and top payload
# bits): compiler-rt's `__truncsfbf2`, which LLVM calls for an `fptrunc float to bfloat` on a
# host without bf16 conversion instructions (x86 before AVX512-BF16: an AMD EPYC of the Zen 3
# generation, say). The conversions are expanded into integer ops before LLVM (`stages.TO_LINALG`),
# but LLVM folds some back into an `fptrunc`: where the float's low 16 bits are known zero the
# rounding is exact (-x of a bf16 x, as rotate_half's cat(-x2, x1)). ExecutionEngine resolves no
# compiler-rt symbol: the module failed to load ("Symbols not found: [ __truncsfbf2 ]") and
# ran on the reference evaluator (session 78; `test_bf16_negation_compiles_on_any_host`).
# Defined in the module with external linkage (the call appears only at instruction
# selection, after IR-level dead-code elimination); its own body does not fold (its input's
# low bits are unknown).
TRUNCSFBF2 = """  llvm.func @__truncsfbf2(%arg0: f32) -> bf16 {
    %c16 = llvm.mlir.constant(16 : i32) : i32
    %c1 = llvm.mlir.constant(1 : i32) : i32
    %bias = llvm.mlir.constant(32767 : i32) : i32
    %quiet = llvm.mlir.constant(64 : i16) : i16
    %bits = llvm.bitcast %arg0 : f32 to i32
    %high = llvm.lshr %bits, %c16 : i32
    %odd = llvm.and %high, %c1 : i32
    %half = llvm.add %odd, %bias : i32
    %sum = llvm.add %bits, %half : i32
    %shifted = llvm.lshr %sum, %c16 : i32
    %rounded = llvm.trunc %shifted : i32 to i16
    %top = llvm.trunc %high : i32 to i16
    %nan = llvm.or %top, %quiet : i16
    %isnan = llvm.fcmp "uno" %arg0, %arg0 : f32
    %result = llvm.select %isnan, %nan, %rounded : i1, i16
    %bf = llvm.bitcast %result : i16 to bf16
    llvm.return %bf : bf16
  }
"""


def jit_llvm(llvm_text: str, opt_level: int = 3) -> ExecutionEngine:
    with fusion_dialect.new_context(fusion=False), ir.Location.unknown():
        engine = ExecutionEngine(ir.Module.parse(llvm_text), opt_level=opt_level, shared_libs=[])
        engine.initialize()
    return engine


def compile_cpu(fusion_ir: str, specs: Sequence[InputSpec], keep_stages: bool = False) -> CompiledCpu:
    """Compile fusion IR for the host, through the disk cache; `keep_stages` records the IR
    after every stage (and bypasses the cache, which keeps only the final module).

    The cache keeps the LLVM-dialect module; the second time a process loads it from there
    (JIT-compiling it again), its object code is linked into a shared library that later
    processes `dlopen` instead (no LLVM code generation). A cold compile does not link: most
    fusions compiled once are never loaded again."""
    start = time.perf_counter()
    key = cache.make_key("cpu-v2", fusion_ir, repr(tuple(specs)))  # v2: with TRUNCSFBF2
    level = options().cpu_opt_level  # (the LLVM-dialect module is the same at every level)
    library_key = cache.make_key("cpu-host-library-v2", key, f"O{level}")
    stages: dict[str, str] = {}
    if not keep_stages:
        library = cache.load(library_key)
        if library is not None:
            try:
                return CompiledCpu(None, stages, time.perf_counter() - start, host_library.load(library))
            except (OSError, FusionError):
                pass  # e.g. linked on another system: JIT-compile instead
    cached = None if keep_stages else cache.load(key)
    if cached is not None:
        llvm_text = cached.decode()
    else:
        llvm_text = lower_cpu(fusion_ir, specs, stages if keep_stages else None)
        cache.store(key, llvm_text.encode())
    engine = jit_llvm(llvm_text, level)
    compiled = CompiledCpu(engine, stages, time.perf_counter() - start)
    if cached is not None and cache.cache_dir() is not None:
        library = host_library.link(engine, libraries=["m"])
        if library is not None:
            cache.store(library_key, library)
    return compiled
