"""gpu-apply-schedules: replaces each scheduled linalg op by its GPU kernel.

Expects what `gpu-schedule` leaves: the bufferized entry function (`mlirfuse_entry`) with an
`mlirfuse.schedule` on every linalg op that becomes a kernel. Each scheduled op becomes its
kernel as `gpu.launch` IR (guards, vector loads and stores, shuffles, shared memory) with
the host code that picks the variant and the grid; a fill that a reduction can start from is
folded into it, and buffers left unused are dropped. A `naive` schedule leaves its op, to be
lowered to loops and one thread an element. A schedule that does not fit its op (an unknown
kind, a kind that does not match the op, a vector width its operands cannot take, a block
over 1024 threads) is an error at that op. The module keeps one line per schedule applied
(`mlirfuse.schedule_notes`: its parameters, or why it is naive).
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.errors import FusionError
from mlirfuse.lowering.gpu import schedule as gpu
from mlirfuse.lowering.host_abi import ENTRY
from mlirfuse.passes.common import functions

NAME = "gpu-apply-schedules"
OPTIONS: dict = {}
NOTES = "mlirfuse.schedule_notes"  # on the module: one line per schedule applied (the launch_params dump)


def run(module: ir.Operation) -> None:
    entries = [f for f in functions(module) if ir.StringAttr(f.attributes["sym_name"]).value == ENTRY]
    if not entries:
        raise FusionError(f"no @{ENTRY} function: {NAME} runs on the GPU path's bufferized entry point")
    notes = []
    for func in entries:
        notes += gpu.apply_schedules(func)
        gpu.drop_dead_buffers(func)
    module.attributes[NOTES] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in notes])
