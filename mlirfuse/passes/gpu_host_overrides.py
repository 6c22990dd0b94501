"""gpu-host-overrides: the host code streams and allocates as its caller says.

Expects the LLVM dialect host module after the NVVM pipeline. Replaces the CUDA runtime's
stream and allocation entry points (`mgpuStreamCreate`, `mgpuStreamSynchronize`,
`mgpuStreamDestroy`, `mgpuMemAlloc`, `mgpuMemFree`) with definitions that use the caller's
stream and allocator (no stream created, synchronized and destroyed per launch).
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.lowering.gpu.host_overrides import host_overrides
from mlirfuse.passes.common import ModuleView

NAME = "gpu-host-overrides"
OPTIONS: dict = {}


def run(module: ir.Operation) -> None:
    host_overrides(ModuleView(module))
