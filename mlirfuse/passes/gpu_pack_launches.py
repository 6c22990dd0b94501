"""gpu-pack-launches: independent pointwise (and transpose) launches run as one launch.

Expects what `gpu-apply-schedules` leaves: the entry function with each kernel a guarded
`gpu.launch` (a naive one still a linalg op). Each run of pointwise launches with only host
code between them (arithmetic, views, sizes, allocations) and no buffer one writes that
another reads or writes becomes one launch: grid the sum of theirs, block the widest of
theirs, block b running the kernel whose range holds it (`mlirfuse.lowering.gpu.packing`);
a transpose launch (shared memory, a barrier) joins a run whose launches all have its
constant block size. First, a pointwise launch moves up to an earlier one past launches it is independent of
(`hoist_independent`), so that it joins that one's run.
In the module's `mlirfuse.schedule_notes` (one line per launch) the packed kernels' lines
become one.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.lowering.gpu import column_sums
from mlirfuse.lowering.gpu.kernels import SCHEDULE_ATTR
from mlirfuse.lowering.gpu.packing import hoist_independent, pack, packable_runs
from mlirfuse.passes.common import entry_functions
from mlirfuse.passes.gpu_apply_schedules import NOTES

NAME = "gpu-pack-launches"
OPTIONS: dict = {}


def _slots(func: ir.Operation) -> list[ir.Operation]:
    """The launches' guards and naive ops, in order: what the notes describe, one line each
    (the guards in a column sum's host branches too, `column_sums.finish`)."""
    found = []

    def visit(block: ir.Block) -> None:
        for op in [o.operation for o in block.operations]:
            if op.name == "scf.if" and any(i.operation.name == "gpu.launch" for i in op.regions[0].blocks[0]) \
                    or op.name.startswith("linalg."):
                found.append(op)
            elif op.name == "scf.if" and SCHEDULE_ATTR in op.attributes and \
                    ir.StringAttr(op.attributes[SCHEDULE_ATTR]).value == column_sums.BRANCH:
                for region in op.regions:
                    for inner in region.blocks:
                        visit(inner)
    visit(func.regions[0].blocks[0])
    return found


def run(module: ir.Operation) -> None:
    attrs = module.attributes
    notes = [ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[NOTES])] if NOTES in attrs else []
    for func in entry_functions(module):
        slots = _slots(func)
        described = dict(zip(slots, notes)) if len(slots) == len(notes) else None
        hoist_independent(func)
        runs = packable_runs(func)
        if described is not None:
            for guards in runs:
                params = "; ".join(described[g].split(": ", 1)[1] for g in guards)
                for g in guards[:-1]:
                    described[g] = ""
                described[guards[-1]] = f"pointwise: {len(guards)} kernels packed in one launch: {params}"
            notes = [described[op] for op in _slots(func) if described[op]]
        for guards in runs:
            pack(guards)
    if notes:
        module.attributes[NOTES] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in notes])
