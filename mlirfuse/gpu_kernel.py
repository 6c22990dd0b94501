"""One piece of fusion IR compiled for the GPU: the disk-cached host module, its executables
(one per device, JIT-ed or loaded from the linked host library) and launches.

A whole fusion (`CompiledFusion`) and each fusion group of a graph with library ops
(`executor.DeviceGraphExecutor`) are each one `GpuKernel`.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Sequence

import numpy as np

from mlirfuse import cache, dump
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import InputSpec

# Every loaded executable, by (host module key, device), for the life of the process: GpuKernels
# of the same fusion share one (a function jitted again does not load its module again), and no
# module is unloaded while kernels launched from it may still run (launches are asynchronous).
_LOADED: dict[tuple[str, int], Any] = {}
_LOADED_LOCK = threading.Lock()
TIMED_REPEATS = 10  # eff_bandwidth: calls timed back to back after the call itself
SPIN_US, SPIN_CYCLES_PER_US = 30, 2000  # eff_bandwidth: the stream's spin before them, per call (2 GHz)


class GpuKernel:
    def __init__(self, fusion_ir: str, specs: Sequence[InputSpec], arch: str,
                 binary_format: str | None = None, keep_stages: bool = False, scheduled_ir: str | None = None):
        from mlirfuse.lowering.gpu import runtime as gpu_runtime
        from mlirfuse.lowering.gpu import toolchain

        self.fusion_ir = fusion_ir
        self.arch = arch
        self.scalar = [s.scalar for s in specs]
        start = time.perf_counter()
        key = cache.make_key("gpu", fusion_ir, repr(tuple(specs)), arch, str(binary_format), str(toolchain.find()),
                             scheduled_ir or "")
        self._key = key
        cached = None if keep_stages else cache.load(key)
        if cached is not None:
            self.module: Any = gpu_runtime.CachedGpuModule(cached.decode())
            self._time("host module from the disk cache", start)
        else:
            from mlirfuse.lowering.gpu.compile import compile_gpu  # the compiler: only on a cache miss

            self.module = compile_gpu(fusion_ir, specs, arch, binary_format, keep_stages, scheduled_ir=scheduled_ir)
            cache.store(key, self.module.host_llvm.encode())
            self._time("compiled (lowering, LLVM, ptxas)", start)
        self.n_launches = self.module.n_launches
        self.in_place = self.module.in_place  # (input, output) pairs that may share memory
        self.stages = self.module.stages
        self.compile_seconds = self.module.compile_seconds
        self._host_llvm = self.module.host_llvm
        # The host module linked into a shared library: a warm start dlopens it (no LLVM JIT).
        self._library_key = cache.make_key("gpu-host-library-v2", key)
        self._host_library = None if keep_stages else cache.load(self._library_key)

    @property
    def ptx(self) -> str:
        return self.module.ptx

    def executable(self, device: int) -> Any:
        """The loaded executable of `device` (shared by every GpuKernel of this fusion)."""
        with _LOADED_LOCK:
            exe = _LOADED.get((self._key, device))
            if exe is None:
                exe = _LOADED[(self._key, device)] = self._load_executable(device)
            return exe

    def _time(self, what: str, start: float) -> None:
        dump.emit("compile_time", f"{what}: {time.perf_counter() - start:.3f} s", dump.key_of(self.fusion_ir))

    def _load_executable(self, device: int) -> Any:
        from mlirfuse.lowering.gpu.runtime import DeviceExecutable

        start = time.perf_counter()
        if self._host_library is not None:
            try:
                exe = DeviceExecutable(self._host_llvm, device, shared_library=self._host_library)
                self._time(f"device {device}: linked host library loaded, GPU binary loaded", start)
                return exe
            except (OSError, AttributeError, FusionError):
                self._host_library = None  # e.g. linked on another system: JIT it instead
        exe = DeviceExecutable(self._host_llvm, device)
        self._time(f"device {device}: host module JIT-compiled, GPU binary loaded", start)
        if cache.cache_dir() is not None:
            start = time.perf_counter()
            library = exe.link_shared_library()
            if library is not None:
                cache.store(self._library_key, library)
                self._host_library = library
            self._time("host module linked into a shared library for warm starts"
                       + ("" if library is not None else " (no C compiler driver: not linked)"), start)
        return exe

    def torch_executable(self, device: int) -> Any:
        """The executable of `device`, its scratch memory taken from torch's caching allocator."""
        import torch

        from mlirfuse.lowering.gpu.runtime import torch_allocator

        exe = self.executable(device)
        with exe.lock:
            if exe.allocator_kind != "torch":
                exe.set_allocator(*torch_allocator(torch, device), kind="torch")
        return exe

    def launch_torch(self, values: Sequence[Any], outputs: Sequence[Any], device: int) -> None:
        """Launch on torch's current stream of `device`: `values` are torch CUDA tensors (or
        Python scalars where the signature has scalars), `outputs` torch CUDA tensors."""
        import torch

        exe = self.torch_executable(device)
        call_args: list[Any] = [v if scalar else (v.data_ptr(), v.shape, v.stride())
                                for v, scalar in zip(values, self.scalar)]
        call_args += [(o.data_ptr(), o.shape, o.stride()) for o in outputs]
        stream = torch._C._cuda_getCurrentRawStream(device)
        if not dump.enabled("eff_bandwidth"):
            exe.launch(stream, call_args)
            return
        # The call, then TIMED_REPEATS more of it back to back between two events (each writes
        # the same outputs from the same inputs): the kernels' time, not the host's gaps
        # between calls of a host-bound step. A call writing into an input's memory (an
        # in-place update) is timed alone: repeating it would change the result. The stream
        # first spins (SPIN_US per call) while the host enqueues the timed calls: without it,
        # calls shorter than a launch's host time were timed at the host's launch rate
        # (a 4 us rotary kernel of Llama at 15 us).
        read = {v.untyped_storage().data_ptr() for v, s in zip(values, self.scalar) if not s}
        repeats = 1 if any(o.untyped_storage().data_ptr() in read for o in outputs) else TIMED_REPEATS
        if repeats > 1:
            exe.launch(stream, call_args)
        with torch.cuda.device(device):  # the spin and the events on the launches' stream
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SPIN_US * repeats * SPIN_CYCLES_PER_US)
            start.record()
            for _ in range(repeats):
                exe.launch(stream, call_args)
            end.record()
            end.synchronize()
        us = start.elapsed_time(end) * 1e3 / repeats
        moved = sum(v.nbytes for v, s in zip(values, self.scalar) if not s) + sum(o.nbytes for o in outputs)
        dump.emit("eff_bandwidth", f"GPU kernel ({self.n_launches} launch(es)): {moved} bytes in {us:.1f} us "
                  f"= {moved / max(us, 1e-6) / 1e3:.2f} GB/s (mean of {repeats} call(s) back to back)",
                  dump.key_of(self.fusion_ir))

    def run_staged(self, values: Sequence[Any], outputs: Sequence[np.ndarray]) -> None:
        """numpy in, numpy out (`outputs` filled), on device 0: copies through the runtime,
        synchronized."""
        from mlirfuse.lowering.gpu.runtime import RUNTIME_ALLOC, RUNTIME_FREE, HostStaging, device_count

        if device_count() == 0:
            raise FusionError("backend='gpu' needs an NVIDIA GPU and driver; none was found "
                              "(compile(..., backend='gpu') still produces PTX)")
        exe = self.executable(0)
        with exe.lock:
            exe.set_allocator(RUNTIME_ALLOC, RUNTIME_FREE)  # a later torch call sets torch's again
        staging = HostStaging(0)
        try:
            call_args: list[Any] = []
            for v, scalar in zip(values, self.scalar):
                if scalar:
                    call_args.append(v)
                else:
                    v = np.asarray(v, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
                    call_args.append((staging.to_device(v), v.shape, [s // v.itemsize for s in v.strides]))
            device_outs = [staging.empty(o.nbytes) for o in outputs]
            call_args += [(p, o.shape, [s // o.itemsize for s in o.strides]) for p, o in zip(device_outs, outputs)]
            exe.launch(staging.stream, call_args)
            for p, o in zip(device_outs, outputs):
                staging.to_host(p, o)
        finally:
            staging.finish()
