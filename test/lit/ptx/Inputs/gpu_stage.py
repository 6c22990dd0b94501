"""Compile a fusion-IR file for the GPU (no GPU needed) and print one stage (for lit RUN lines).

    python gpu_stage.py FILE STAGE [--naive]

STAGE: gpu (kernels as gpu.launch), ptx, launch_params (the schedule of every linalg op).
Inputs are taken from @fusion's signature: tensors (contiguous, `?` dims dynamic).
"""

from __future__ import annotations

import sys

from mlir import ir

from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.dtypes import to_dtype
from mlirfuse.frontend.graph import InputSpec
from mlirfuse.lowering.gpu import compile_gpu

ELEMENT = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
           "i32": "int32", "i64": "int64", "i1": "bool"}


def specs_of(text: str) -> list[InputSpec]:
    with fusion_dialect.context() as ctx:
        module = fusion_dialect.parse(text, ctx)
        func = next(op for op in module.body.operations if op.operation.name == "func.func")
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        specs = []
        for t in ftype.inputs:
            rt = ir.RankedTensorType(t)
            shape = tuple(None if rt.is_dynamic_dim(i) else s for i, s in enumerate(rt.shape))
            specs.append(InputSpec(to_dtype(ELEMENT[str(rt.element_type)]), shape))
        return specs


def main(path: str, stage: str, naive: bool) -> None:
    text = open(path).read()
    compiled = compile_gpu(text, specs_of(text), "sm_90", binary_format="isa", keep_stages=True,
                           use_schedules=not naive)
    print(compiled.stages.get(stage, compiled.ptx if stage == "ptx" else ""))
    print(f"// launches: {compiled.n_launches}")
    print(f"// kernels: {compiled.n_kernels}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--naive" in sys.argv[3:])
