"""gpu-host-overrides: the host code streams, allocates and launches as its caller says.

Expects the LLVM dialect host module after the NVVM pipeline. Replaces the CUDA runtime's
stream and allocation entry points (`mgpuStreamCreate`, `mgpuStreamSynchronize`,
`mgpuStreamDestroy`, `mgpuMemAlloc`, `mgpuMemFree`) with definitions that use the caller's
stream and allocator (no stream created, synchronized and destroyed per launch), and its
module-loading, launch and memset entry points (`mgpuModuleLoad`, `mgpuModuleLoadJIT`,
`mgpuLaunchKernel`, `mgpuMemset32`) with ones that call the CUDA driver in the context of the
executable's device (the runtime's use the first device's context for every device), and its
kernel lookup (`mgpuModuleGetFunction`) with one that asks the driver once per kernel, not at
every launch. A host module calling any other runtime entry point than `mgpuModuleUnload` is
an error.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.lowering.gpu.host_overrides import host_overrides
from mlirfuse.passes.common import ModuleView

NAME = "gpu-host-overrides"
OPTIONS: dict = {}


def run(module: ir.Operation) -> None:
    host_overrides(ModuleView(module))
