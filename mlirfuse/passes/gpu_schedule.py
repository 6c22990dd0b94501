"""gpu-schedule: records each GPU kernel's schedule, as data, on its linalg op.

Expects the GPU path's bufferized entry function (`mlirfuse_entry`: linalg ops on memrefs,
generalized, as `compile_gpu` has it before its kernels are made; the `scheduled` stage of
`compiled.stages` less the attributes). Runs the pure heuristics of `lowering/schedules.py`
for `arch` and leaves the IR unchanged but for an `mlirfuse.schedule` dictionary on every
linalg op that becomes a kernel (a normalization chain's on its last op): the kind
(pointwise, transpose, inner_reduction, column_reduction, normalization, or naive with its
reason) and the parameters. A schedule already there is kept: one may be written by hand,
then applied by `gpu-apply-schedules`.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.errors import FusionError
from mlirfuse.lowering.gpu import heuristics as schedules
from mlirfuse.lowering.gpu import schedule as gpu
from mlirfuse.lowering.gpu import toolchain
from mlirfuse.lowering.host_abi import ENTRY
from mlirfuse.passes.common import functions

NAME = "gpu-schedule"
OPTIONS = {"arch": (str, "sm_90", "the GPU architecture the heuristics size kernels for (sm_XX)")}


def run(module: ir.Operation, arch: str = "sm_90") -> None:
    toolchain.check_arch(arch)
    entries = [f for f in functions(module) if ir.StringAttr(f.attributes["sym_name"]).value == ENTRY]
    if not entries:
        raise FusionError(f"no @{ENTRY} function: {NAME} runs on the GPU path's bufferized entry point")
    for func in entries:
        gpu.plan_schedules(func, schedules.device_properties(arch))
