"""gpu-loops-to-launches: the naive kernels and the device side of the host code.

Expects the entry point after gpu-apply-schedules and convert-linalg-to-parallel-loops: the
scheduled kernels as `gpu.launch`, what ran naive as `scf.parallel` nests. Each nest becomes
a `gpu.launch` of one thread per element (with bounds guards); index constants are sunk into
the launches; 32-bit high multiplies (Philox) become `llvm.nvvm.mulhi.ui`; buffers become
device allocations (`gpu.alloc`). Leaves host code and `gpu.launch` kernels, ready to outline,
and on the module `mlirfuse.launch_params`: each launch's grid, block and schedule (from
gpu-apply-schedules' notes), then `launches: N` (a call's launches, a kernel's variants
once) and `kernels: K`.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.lowering.gpu import launches, naive
from mlirfuse.passes.common import entry_functions

NAME = "gpu-loops-to-launches"
OPTIONS: dict = {}


LAUNCH_PARAMS = "mlirfuse.launch_params"  # on the module: the launch_params dump


def run(module: ir.Operation) -> None:
    from mlirfuse.passes.gpu_apply_schedules import NOTES

    lines = []
    notes = ([ir.StringAttr(n).value for n in ir.ArrayAttr(module.attributes[NOTES])]
             if NOTES in module.attributes else [])
    for func in entry_functions(module):
        naive.loops_to_gpu(func)
        launches.sink_constants(func)
        launches.high_multiplies(func)
        naive.allocs_to_gpu(func)
        dims = launches.launch_dims(func)
        lines += [f"{d}: {n}" for d, n in zip(dims, notes)] if len(notes) == len(dims) else notes + dims
        n_kernels, n_launches = launches.launch_counts(func)
        lines += [f"launches: {n_launches}", f"kernels: {n_kernels}"]
    module.attributes[LAUNCH_PARAMS] = ir.ArrayAttr.get([ir.StringAttr.get(line) for line in lines])
    if NOTES in module.attributes:  # merged into the launch lines
        del module.attributes[NOTES]


def launch_params(module: ir.Operation) -> tuple[list[str], int, int]:
    """(one line per launch: grid, block and schedule; launches a call; kernels) as recorded."""
    lines = [ir.StringAttr(x).value for x in ir.ArrayAttr(module.attributes[LAUNCH_PARAMS])]
    return lines[:-2], int(lines[-2].split(": ")[1]), int(lines[-1].split(": ")[1])
