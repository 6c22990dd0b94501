"""compile_gpu: fusion IR through the GPU stages (`mlirfuse.stages.gpu_stages`) to a host
module holding the kernels' binary, with the artifacts a user looks at (each stage's IR,
the PTX, launch counts)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from mlir import ir
from mlir.dialects import gpu

from mlirfuse import stages as pipelines
from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import InputSpec
from mlirfuse.lowering.gpu import toolchain
from mlirfuse.lowering.gpu.in_place import in_place_pairs
from mlirfuse.lowering.host_abi import ENTRY, in_place_line, launches_line


def _entry(module: ir.Module) -> ir.Operation:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == ENTRY:
            return op.operation
    raise FusionError("GPU backend: entry function missing")


@dataclass
class GpuModule:
    """A compiled fusion for the GPU: host LLVM module (not yet JIT-ed) plus artifacts."""

    module: ir.Module
    context: ir.Context
    arch: str
    binary_format: str
    binary: bytes
    stages: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0
    n_kernels: int = 0  # kernel functions
    n_launches: int = 0  # launches a call makes at most (a kernel's variants count once)
    in_place: frozenset[tuple[int, int]] = frozenset()  # (input, output): may share memory

    @property
    def host_llvm(self) -> str:
        """The host module's text (what the disk cache keeps), after lines saying the number
        of launches and the in-place pairs (`gpu_runtime.CachedGpuModule` reads them back)."""
        return launches_line(self.n_launches) + in_place_line(self.in_place) + str(self.module)

    @property
    def ptx(self) -> str:
        if self.binary_format != "isa":
            raise FusionError("PTX text is kept only for format 'isa' (compile with ptx=True)")
        return self.binary.decode(errors="replace").rstrip("\0")


def _entry_type(module: ir.Module) -> str:
    return str(ir.TypeAttr(_entry(module).attributes["function_type"]).value)


def binary_objects(module: ir.Module) -> list[bytes]:
    """The bytes of every gpu.binary's object (PTX text where compiled with format isa)."""
    return [bytes(gpu.ObjectAttr(op.attributes["objects"][0]).object)
            for op in module.body.operations if op.operation.name == "gpu.binary"]


def _edited_schedules(module: ir.Module, scheduled_ir: str) -> ir.Module:
    """The given `scheduled` stage in place of this fusion's own, if its entry point takes the
    same arguments (launched with another signature's, its kernels would run out of bounds)."""
    try:
        edited = ir.Module.parse(scheduled_ir)
        edited_type = _entry_type(edited)
    except (ir.MLIRError, StopIteration) as e:
        raise FusionError(f"scheduled_ir: not a scheduled stage with @{ENTRY}: {e}") from None
    if edited_type != _entry_type(module):
        raise FusionError(f"scheduled_ir: its @{ENTRY} takes {edited_type}; this fusion's takes "
                          f"{_entry_type(module)}")
    return edited


def compile_gpu(fusion_ir: str, specs: Sequence[InputSpec], arch: str = "sm_90",
                binary_format: str | None = None, keep_stages: bool = False,
                use_schedules: bool = True, scheduled_ir: str | None = None) -> GpuModule:
    """Lower fusion IR to a host module whose gpu.binary holds PTX (isa) or a fatbin, through
    `stages.gpu_stages`. `use_schedules=False` lowers every op the naive way (for
    comparisons); `scheduled_ir` (a `scheduled` stage, its schedules perhaps edited by hand)
    is compiled from instead of fusion_ir's own."""
    from mlirfuse.passes.gpu_loops_to_launches import launch_params

    start = time.perf_counter()
    tk = toolchain.find()
    fmt = binary_format or ("fatbin" if tk.ptxas else "isa")
    if tk.libdevice is None:
        raise FusionError(toolchain.MISSING_LIBDEVICE)
    stages: dict[str, str] | None = {} if keep_stages else None
    counts = {"kernels": 0, "launches": 0}
    in_place: set[tuple[int, int]] = set()

    def after(name: str, module: ir.Module) -> ir.Module | None:
        if name == "gpu":  # one line per launch: its schedule (or why naive), grid and block
            lines, counts["launches"], counts["kernels"] = launch_params(module.operation)
            in_place.update(in_place_pairs(_entry(module), len(specs)))
            if stages is not None:
                stages["launch_params"] = "\n".join(lines)
        if name == "scheduled" and scheduled_ir is not None:
            return _edited_schedules(module, scheduled_ir)
        return None

    ctx = fusion_dialect.new_context()
    with ctx, ir.Location.unknown():
        module = pipelines.parse_fusion(fusion_ir, specs, ctx, stages)
        path = pipelines.gpu_stages(arch, fmt, tk.root, use_schedules=use_schedules)
        module = pipelines.run(module, path[:-1], stages, "GPU backend", after)
        module = ir.Module.parse(str(module), ctx)  # the last stage reads the printed IR too (stages.run)
        # Several kernels: ptxas compiles them in parallel (10-25% off the compile).
        options = toolchain.ptxas_options(toolchain.ptxas_of(tk)) if fmt != "isa" and counts["kernels"] > 1 else ""
        last = path[-1]._replace(pipeline=pipelines.gpu_llvm_stage(arch, fmt, tk.root, options))
        module = pipelines.run(module, [last], stages, "GPU backend")
        # One gpu.binary holding every kernel (PTX texts of several would be kept together).
        objects = binary_objects(module)
        binary = b"\n".join(o.rstrip(b"\0") for o in objects) if fmt == "isa" else (objects or [b""])[-1]
        if fmt == "isa" and stages is not None:
            stages["ptx"] = binary.decode(errors="replace")
    return GpuModule(module, ctx, arch, fmt, binary, stages or {}, time.perf_counter() - start,
                     counts["kernels"], counts["launches"], frozenset(in_place))
