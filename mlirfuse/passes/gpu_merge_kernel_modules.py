"""gpu-merge-kernel-modules: every outlined kernel in one gpu.module.

Expects what gpu-kernel-outlining leaves (a gpu.module per launch). Moves the kernels into
the first (renamed `mlirfuse_entry_kernel`, kernels `mlirfuse_entry_kernel_<k>`) and points the
launches at them, so that libdevice linking, optimization, ptxas and loading happen once;
kernel attributes the schedules asked for are set here.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.lowering.gpu import launches as gpu
from mlirfuse.passes.common import ModuleView

NAME = "gpu-merge-kernel-modules"
OPTIONS: dict = {}


def run(module: ir.Operation) -> None:
    gpu.merge_kernel_modules(ModuleView(module))
