"""The compiler's stages, defined once: each a pipeline of registered passes (`mlirfuse.passes`)
and upstream ones, named after the IR it leaves, reading the IR of its `source` stage.

    plan:  fusion -> grouped -> stripped -> segmented       (the kernels the segmenter plans)
    cpu:   fusion -> linalg -> inlined -> bufferized -> llvm
    gpu:   fusion -> linalg -> inlined -> bufferized -> generalized -> scheduled -> loops
                  -> gpu -> outlined -> llvm (NVVM, the binary's PTX or fatbin, host overrides)

The backends lower from the fusion IR itself: fusion-to-linalg and linalg's elementwise
fusion form the kernels, the segmented plan reports them (and the executor runs the grouped
stage's groups where library ops sit between them). `compile_cpu`, `compile_gpu`, the
`.stages` dicts, the `pipeline` dump and mlirfuse-opt's named pipelines all read these
lists; `replay_commands` prints the mlirfuse-opt command of every stage.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from mlir import ir

from mlirfuse.errors import FusionError


class Stage(NamedTuple):
    name: str  # the IR it leaves
    source: str  # the stage whose IR its pipeline reads
    pipeline: str  # builtin.module(...) of registered and upstream passes


def join(*pipelines: str) -> str:
    """One `builtin.module(...)` pipeline of the elements of several."""
    return "builtin.module(" + ", ".join(p.strip()[len("builtin.module("):-1] for p in pipelines if p) + ")"


# Shapes are resolved to the inputs' dims first: a `tensor.dim` of an intermediate counts as
# a second use and stops elementwise fusion. On the CPU, bf16 conversions are expanded into
# integer ops before canonicalize can fold them into int<->bf16 casts that LLVM lowers to
# compiler-rt calls the JIT cannot resolve.
_FUSE_ELEMENTWISE = ("resolve-shaped-type-result-dims, canonicalize, cse, linalg-scalars-apart, "
                     "func.func(linalg-fuse-elementwise-ops), linalg-drop-dead-checks, canonicalize, cse, "
                     "math-expand-constant-powers, linalg-recompute-producers, func.func(linalg-fuse-elementwise-ops), "
                     "linalg-drop-dead-checks, "
                     "canonicalize, cse, linalg-merge-siblings, linalg-reciprocal-divisors)")
# Column reductions of reshapes reduce the reshaped values (their producers' domain) first.
TO_LINALG = {"cpu": "builtin.module(fusion-reshapes-past-reductions, fusion-to-linalg{target=cpu}, "
                    "arith-expand{include-bf16=true}, canonicalize, " + _FUSE_ELEMENTWISE,
             "gpu": "builtin.module(fusion-reshapes-past-reductions, fusion-to-linalg{target=gpu}, canonicalize, "
                    + _FUSE_ELEMENTWISE}
# After inlining, the entry's inputs show their layouts: linalg-reshape-elementwise moves
# reshapes only onto contiguous ones (a strided input would need a copy).
INLINE = ("builtin.module(entry-point, inline, symbol-dce, canonicalize, cse, linalg-reshape-elementwise, "
          "linalg-recompute-producers, "
          "func.func(linalg-fuse-elementwise-ops), linalg-drop-dead-checks, canonicalize, cse, inline-scalar-operands)")
BUFFERIZE = ("builtin.module(output-views-in-place, constant-outputs-as-fills, resolve-shaped-type-result-dims, "
             "canonicalize, linalg-unshare-inits, eliminate-empty-tensors, "
             "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, "
             "buffer-deallocation-pipeline, canonicalize, cse, memref-copies-to-linalg)")
CPU_TO_LLVM = ("builtin.module(func.func(convert-linalg-to-loops), cpu-asserts-as-error-flag, convert-scf-to-cf, "
               "expand-strided-metadata, lower-affine, finalize-memref-to-llvm, convert-math-to-llvm, "
               "convert-math-to-libm, convert-arith-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, "
               "reconcile-unrealized-casts)")
# Fills and copies as generics: the schedules then take them too.
GENERALIZE = "builtin.module(func.func(linalg-generalize-named-ops))"
TO_LOOPS = "builtin.module(func.func(convert-linalg-to-parallel-loops))"  # no canonicalize: it folds unit loops


def plan_stages(horizontal: bool = True, single_node: bool = False, max_args: int = 128) -> list[Stage]:
    """Grouping, bookend-view stripping and segmentation (the options of `config.Options`)."""
    flag = {True: "true", False: "false"}
    group = f"fusion-group{{horizontal={flag[horizontal]} single-node={flag[single_node]} max-args={max_args}}}"
    first = "fusion-cse, fusion-reshapes-past-reductions, fusion-dce"
    return [Stage("grouped", "fusion", f"builtin.module({first}, {group})"),
            Stage("stripped", "grouped", f"builtin.module(fusion-strip-bookend-views{{max-args={max_args}}})"),
            Stage("segmented", "stripped", "builtin.module(fusion-segment)")]


def _chain(*named: tuple[str, str]) -> list[Stage]:
    """Stages each reading the one before (the first reads the fusion IR)."""
    names = ["fusion"] + [name for name, _ in named]
    return [Stage(name, source, pipeline) for (name, pipeline), source in zip(named, names)]


def cpu_stages() -> list[Stage]:
    return _chain(("linalg", TO_LINALG["cpu"]), ("inlined", INLINE), ("bufferized", BUFFERIZE),
                  ("llvm", CPU_TO_LLVM))


def gpu_stages(arch: str = "sm_90", fmt: str = "isa", toolkit: str | None = None, ptxas_options: str = "",
               use_schedules: bool = True) -> list[Stage]:
    """`use_schedules=False`: every kernel naive (one thread an iteration), for comparisons."""
    scheduled = [("generalized", GENERALIZE),
                 ("scheduled", f"builtin.module(gpu-split-reductions, gpu-schedule{{arch={arch}}})"),
                 ("loops", join("builtin.module(gpu-apply-schedules, gpu-pack-launches)", TO_LOOPS))]
    return _chain(("linalg", TO_LINALG["gpu"]), ("inlined", INLINE),
                  ("bufferized", join(BUFFERIZE, "builtin.module(gpu-unit-loops)")),
                  *(scheduled if use_schedules else [("loops", TO_LOOPS)]),
                  ("gpu", f"builtin.module(gpu-loops-to-launches, gpu-checks-at-kernel-end, "
                          f"gpu-float8-conversions{{arch={arch}}}, gpu-fp-contract)"),
                  ("outlined", "builtin.module(gpu-kernel-outlining, gpu-merge-kernel-modules)"),
                  ("llvm", gpu_llvm_stage(arch, fmt, toolkit, ptxas_options)))


def nvvm_pipeline(chip: str, features: str, fmt: str, toolkit: str | None, ptxas_options: str = "") -> str:
    """The stages of upstream's gpu-lower-to-nvvm-pipeline after kernel outlining (and
    gpu-merge-kernel-modules), with our toolkit path and ptxas options, the kernels converted
    before the host's arith, and memref.reshape (shape buffers) lowered on the host."""
    tk = (f" toolkit={toolkit}" if toolkit else "") + (f" opts={ptxas_options}" if ptxas_options else "")
    return ("builtin.module(func.func(gpu-async-region), convert-scf-to-cf, convert-nvvm-to-llvm, "
            "convert-func-to-llvm, expand-strided-metadata, "
            f"nvvm-attach-target{{chip={chip} features={features} O=3}}, lower-affine, "
            # Kernels first: convert-gpu-to-nvvm maps arith.remf to libdevice's fmod, which a
            # module-wide convert-arith-to-llvm would have turned into llvm.frem (illegal there).
            "gpu.module(strip-debuginfo, convert-gpu-to-nvvm, canonicalize, cse, reconcile-unrealized-casts), "
            "gpu-streaming-loads, "
            "convert-arith-to-llvm, convert-index-to-llvm, canonicalize, cse, "
            f"finalize-memref-to-llvm, gpu-to-llvm, gpu-module-to-binary{{format={fmt}{tk}}}, convert-math-to-llvm, "
            "canonicalize, cse, reconcile-unrealized-casts)")


def gpu_llvm_stage(arch: str, fmt: str, toolkit: str | None, ptxas_options: str = "") -> str:
    """The GPU path's last stage: NVVM, the binary (PTX or a fatbin through ptxas), the host overrides."""
    from mlirfuse.lowering.gpu import toolchain

    features = "+ptx" + str(toolchain.ptx_version(arch))
    return join(nvvm_pipeline(arch, features, fmt, toolkit, ptxas_options), "builtin.module(gpu-host-overrides)")


def run(module: ir.Module, stages: list[Stage], record: dict[str, str] | None = None, backend: str = "mlirfuse",
        after: Callable[[str, ir.Module], ir.Module | None] | None = None) -> ir.Module:
    """Run `stages` in order (each reading the one before's IR), recording each stage's IR in
    `record`; `after(name, module)` may look at the IR after a stage, or return another module
    to go on from. A failing stage is a FusionError naming it and its pipeline."""
    from mlirfuse.passes import Pipeline

    for k, stage in enumerate(stages):
        try:
            Pipeline(stage.pipeline).run(module)
        except FusionError as e:
            raise FusionError(f"{backend}: stage '{stage.name}' failed: {e}\npipeline: {stage.pipeline}") from None
        if after is not None:
            module = after(stage.name, module) or module
        text = str(module) if record is not None or k + 1 < len(stages) else None
        if record is not None:
            record[stage.name] = text
        if k + 1 < len(stages):
            # The next stage reads the printed IR, as its mlirfuse-opt replay does: printing
            # keeps no use-list order, on which one-shot bufferization's choices can depend
            # (a cross-entropy's fwd+bwd bufferized to one more buffer in process than replayed).
            module = ir.Module.parse(text, module.context)
    return module


def replay_commands(stages: list[Stage], key: str) -> list[str]:
    """For every stage, the mlirfuse-opt command turning its source stage's IR (saved as
    `<key>-<source>.mlir`) into its own."""
    return [f"{s.name}: mlirfuse-opt {key}-{s.source}.mlir --pass-pipeline='{s.pipeline}'" for s in stages]


def _named(stages: list[Stage], stop: str, pipeline_name: str) -> str:
    names = [s.name for s in stages]
    if stop not in names:
        raise FusionError(f"{pipeline_name}: stop={stop} is not a stage ({', '.join(names)})")
    return join(*(s.pipeline for s in stages[:names.index(stop) + 1]))


def cpu_pipeline(stop: str = "llvm") -> str:
    return _named(cpu_stages(), stop, "mlirfuse-cpu-pipeline")


def gpu_pipeline(arch: str = "sm_90", stop: str = "llvm", schedules: bool = True) -> str:
    from mlirfuse.lowering.gpu import toolchain

    toolchain.check_arch(arch)
    return _named(gpu_stages(arch, "isa", toolchain.find().root, use_schedules=schedules), stop,
                  "mlirfuse-gpu-pipeline")


def plan_pipeline(horizontal: bool = True, single_node: bool = False, max_args: int = 128) -> str:
    return join(*(s.pipeline for s in plan_stages(horizontal, single_node, max_args)))


# mlirfuse-opt's named pipelines: name -> (options, builder of the pipeline text, summary).
PIPELINES = {
    "mlirfuse-plan-pipeline": ({"horizontal": (bool, True, "group independent ops side by side"),
                                "single-node": (bool, False, "a group of one op too"),
                                "max-args": (int, 128, "the most arguments a group takes")},
                               plan_pipeline, "fusion IR to the segmented plan (grouped, stripped, segmented)"),
    "mlirfuse-cpu-pipeline": ({"stop": (str, "llvm", "the last stage to run (linalg, inlined, bufferized, llvm)")},
                              cpu_pipeline, "fusion IR to the LLVM-dialect host module (the CPU path's every stage)"),
    "mlirfuse-gpu-pipeline": ({"arch": (str, "sm_90", "the GPU architecture (sm_XX)"),
                               "stop": (str, "llvm", "the last stage to run (linalg, inlined, bufferized, generalized, "
                                        "scheduled, loops, gpu, outlined, llvm)"),
                               "schedules": (bool, True, "false: every kernel naive (one thread an element)")},
                              gpu_pipeline,
                              "fusion IR to a host module holding the kernels' PTX (the GPU path's every stage; "
                              "mlirfuse-opt --emit=ptx prints the PTX)"),
}


def parse_fusion(fusion_ir: str, specs: list, ctx: ir.Context, record: dict[str, str] | None = None) -> ir.Module:
    """The fusion IR as the backends' first stage: @fusion says how each input is passed
    (`mlirfuse.inputs`, read by entry-point)."""
    from mlirfuse.dialects import fusion as fusion_dialect
    from mlirfuse.passes.entry_point import INPUTS_ATTR, input_kinds

    module = fusion_dialect.parse(fusion_ir, ctx)
    fusion = next(op for op in module.body.operations
                  if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "fusion")
    fusion.attributes[INPUTS_ATTR] = input_kinds(list(specs))
    if record is not None:
        record["fusion"] = str(module)
    return module
