"""nvFuser's introspection of a FusionDefinition: its IR, the code and the scheduled IR of
its last execution, captured debug output and a profile of the last execution.

    fd.execute(inputs, profile=True)
    prof = fd.profile()               # FusionProfile: segments, kernel_profiles, times
    fd.last_cuda_code()               # the generated code: PTX (GPU), LLVM IR (CPU)
    fd.last_scheduled_fusion_ir()     # linalg after fusion: what each kernel computes
    fd.execute(inputs, capture_debug_output=True); fd.debug_output()   # MLIRFUSE_DUMP's text

What nvFuser calls CUDA code is mlirfuse's generated code for the backend that ran; its
kernels are the segmenter's plan: one per segment of each fused group, one per library call
(nvFuser's `expr_eval` segments), scheduled by the segment's scheduler, or `user` for a
definition with a `schedule()` method, as nvFuser names them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from mlirfuse.dialects.optable import OPS
from mlirfuse.errors import FusionError

LIBRARY_OPS = tuple(name for name, op in OPS.items() if op.kind == "library")


@dataclass
class KernelProfile:
    """One kernel of a profiled execution (nvFuser's field names). `time_ms` is measured
    where the execution is that one kernel; else None (the fusion's time is the profile's)."""

    name: str
    segment_id: int
    scheduler: str
    device: int = -1  # -1: the host (CPU backend)
    time_ms: float | None = None


@dataclass
class FusionProfile:
    """nvFuser's profile of one execution: the fusion's number, its segments (kernels) and
    times in ms (host: the whole call; kernel: CUDA events around it on the GPU, the call's
    wall time on the CPU; compile: what compiling the fusion took when it was compiled)."""

    fusion_id: int
    segments: int
    kernel_profiles: list[KernelProfile] = field(default_factory=list)
    host_time_ms: float = 0.0
    kernel_time_ms: float = 0.0
    compile_time_ms: float = 0.0


def plan_kernels(segmented_ir: str, user_schedule: bool) -> list[tuple[str, str]]:
    """(name, scheduler) of every kernel of a segmented fusion, in the order they run: each
    group's segments (its `fusion.segments`) where the entry function calls it, a group of
    one op (left in the entry function, with its `fusion.scheduler`), each library op."""
    groups = {m.group(1): re.findall(r'"(\w+)"', m.group(2))
              for m in re.finditer(r"func\.func private @(\w+)\(.*fusion\.segments = \[([^\]]*)\]", segmented_ir)}
    entry = segmented_ir[segmented_ir.find("func.func @"):]
    kernels: list[tuple[str, str]] = []
    for line in entry.splitlines():
        call = re.search(r"call @(\w+)\(", line)
        op = re.search(r'"fusion\.(\w+)"', line)
        single = re.search(r'fusion\.scheduler = "(\w+)"', line)
        if call and call.group(1) in groups:
            named = [(call.group(1), scheduler) for scheduler in groups[call.group(1)]]
        elif op and op.group(1) in LIBRARY_OPS:
            named = [(op.group(1), "expr_eval")]
        elif op and single:
            named = [(op.group(1), single.group(1))]
        else:
            continue
        for name, scheduler in named:
            kernels.append((f"{name}_kernel{len(kernels)}", "user" if user_schedule and scheduler != "expr_eval"
                            else scheduler))
    return kernels


class Inspection:
    """FusionDefinition's introspection methods (a base class of FusionDefinition)."""

    _profile: FusionProfile | None = None
    _debug_output: str | None = None
    _ran: Any = None  # (the definition that ran: this one, or its trace for those inputs' sizes; backend)

    def _check_defined(self) -> None:
        if not getattr(self, "_finalized", False):
            raise FusionError("Invalid fusion definition! (define it first: leave its `with` block, or "
                              "execute a subclass's definition())")

    def _last(self) -> Any:
        if self._ran is None:
            raise FusionError("Invalid fusion definition! (nothing executed yet: call execute first)")
        fd, backend = self._ran
        return fd._compile(backend, keep_stages=True)

    def fusion_ir(self) -> str:
        """The fusion IR as defined (before grouping and scheduling)."""
        self._check_defined()
        return str(self)

    def last_cuda_code(self, intrinsic_code: bool = False, override_user_schedule: bool = False) -> str:
        """The generated code of the last execution: PTX on the GPU, LLVM IR on the CPU."""
        compiled = self._last()
        return compiled.stages.get("ptx") or compiled.stages.get("llvm") or ""

    def last_scheduled_fusion_ir(self, tensor_transforms: bool = False, override_user_schedule: bool = False) -> str:
        """The scheduled IR of the last execution (linalg after fusion)."""
        return self._last().stages["linalg"]

    def cuda_code_for(self, inputs: Sequence[Any], intrinsic_code: bool = False,
                      override_user_schedule: bool = False) -> str:
        """The generated code that executing on `inputs` runs (compiled before: raises
        "Fusion is not compiled!" otherwise). One compile serves every size of the defined
        inputs, so unlike nvFuser's, other sizes find it too."""
        compiled = self._compiled_for(inputs)
        return compiled.stages.get("ptx") or compiled.stages.get("llvm") or ""

    def scheduled_fusion_ir_for(self, inputs: Sequence[Any], tensor_transforms: bool = False,
                                override_user_schedule: bool = False) -> str:
        """The scheduled IR that executing on `inputs` runs (as `cuda_code_for`)."""
        return self._compiled_for(inputs).stages["linalg"]

    def _compiled_for(self, inputs: Sequence[Any]) -> Any:
        from mlirfuse.arrays import classify_all, placement

        self._check_defined()
        fd = self
        if getattr(self, "_deferred", None) is not None:
            fd = self._replays.get(self._replay_key(inputs))
        backend = "gpu" if placement(classify_all(list(inputs)))[0] == "device" else "cpu"
        if fd is None or not any(b == backend for b, _ in fd._compiled):
            raise FusionError("Fusion is not compiled! (no execution on inputs like these yet)")
        return fd._compile(backend, keep_stages=True)

    @property
    def sched(self) -> "_Schedule":
        """nvFuser's schedule interface, for `user_schedule_ir()`."""
        return _Schedule(self)

    def debug_output(self) -> str | None:
        """The dumps (MLIRFUSE_DUMP) of the last `execute(..., capture_debug_output=True)`;
        None if the last execution did not capture."""
        return self._debug_output

    def profile(self) -> FusionProfile:
        """The profile of the last `execute(..., profile=True)`."""
        if self._profile is None:
            raise ValueError("profile: no profile to return: execute with profile=True first")
        return self._profile

    def _observe(self, run: Callable[[], Any], *, profile: bool, capture_debug_output: bool) -> Any:
        """Run one execution, profiled and with its dumps captured as asked."""
        from mlirfuse import dump

        self._debug_output = None
        if not profile and not capture_debug_output:
            return run()
        with dump.capture() as texts:
            start, events = time.perf_counter(), _cuda_events()
            outputs = run()
            kernel_ms = events() if events is not None else None
            host_ms = (time.perf_counter() - start) * 1e3
        if capture_debug_output:
            self._debug_output = "".join(texts)
        if profile:
            self._profile = self._profile_of(host_ms, kernel_ms if kernel_ms is not None else host_ms)
        return outputs

    def _profile_of(self, host_ms: float, kernel_ms: float) -> FusionProfile:
        fd, backend = self._ran
        compiled = fd._compile(backend, keep_stages=True)
        kernels = plan_kernels(compiled.stages["segmented"], callable(getattr(self, "schedule", None)))
        device = -1 if backend == "cpu" else 0
        profiles = [KernelProfile(name, k, scheduler, device) for k, (name, scheduler) in enumerate(kernels)]
        if len(profiles) == 1:
            profiles[0].time_ms = kernel_ms
        compile_ms = fd._compile(backend, keep_stages=False).compile_seconds * 1e3
        return FusionProfile(self.id() if self.id() is not None else -1, len(profiles), profiles, host_ms, kernel_ms,
                             compile_ms)


class _Schedule:
    def __init__(self, fd: Inspection):
        self._fd = fd

    def user_schedule_ir(self) -> str:
        """The segmented fusion of the last execution: each op's segment and each segment's
        scheduler (mlirfuse schedules are chosen per segment; a definition's schedule()
        cannot change them)."""
        return self._fd._last().stages["segmented"]


def _cuda_events() -> Callable[[], float] | None:
    """A stop-watch of CUDA events on the current stream (None without torch CUDA)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()

    def elapsed() -> float:
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)
    return elapsed
