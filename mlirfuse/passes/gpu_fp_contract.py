"""gpu-fp-contract: float multiplies, adds and subtracts inside `gpu.launch` bodies may fuse
into fused multiply-adds (`#arith.fastmath<contract>`).

Without the flag, LLVM's NVPTX backend prints every float32 multiply and add with `.rn`,
which forbids ptxas from fusing them, so `a * b + c` costs two instructions and two roundings.
CUDA C++ (nvcc's default `--fmad=true`, which torch's own kernels are built with) and Triton
(Inductor's kernels) fuse them. Compute-heavy pointwise bodies (GELU's polynomial, the
normalizations' scale-and-shift) then issue fewer instructions, and the fused result is
rounded once instead of twice (an H200: bias + tanh-GELU on 4096x3072 bfloat16, float32
inside, 16.3 -> 15.7 us; GELU -> LayerNorm 9.4 -> 9.1). Other flags an op carries (a
reduction's `reassoc`) are kept.
Half-precision ops (torch's bfloat16 ops, `mul.rn.bf16`) keep their rounding: ops on them are
left as they are, as are float32 ops on widened half values.

Host code and the CPU backend are left as they are. Expects the `gpu` stage's IR (after
gpu-loops-to-launches).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from mlirfuse.passes.common import defining_op, walk_ops

NAME = "gpu-fp-contract"
OPTIONS: dict = {}

CONTRACTIBLE = frozenset({"arith.mulf", "arith.addf", "arith.subf"})
# Only float32 and float64 ops, and not those on half-precision values widened (or constants):
# LLVM narrows such an op whose result is rounded back into the half-precision instruction
# (`mul.bf16`, torch's op on that type), which would then fuse without rounding the product.
WIDE = ("f32", "f64")
HALF = ("bf16", "f16")


def run(module: ir.Operation) -> None:
    for launch in [op for op in walk_ops(module) if op.name == "gpu.launch"]:
        for op in walk_ops(launch):
            if op.name in CONTRACTIBLE and _element_type(op.results[0].type) in WIDE and not _half_op(op):
                op.attributes["fastmath"] = _with_contract(op.attributes["fastmath"]
                                                           if "fastmath" in op.attributes else None)


def _half_op(op: ir.Operation) -> bool:
    """Every operand of `op` is a widened half-precision value or a constant."""
    def narrow(value: ir.Value) -> bool:
        source = defining_op(value)
        return source is not None and (source.name == "arith.constant" or (
            source.name == "arith.extf" and _element_type(source.operands[0].type) in HALF))
    return all(narrow(v) for v in op.operands)


def _element_type(t: ir.Type) -> str:
    return str(ir.ShapedType(t).element_type) if isinstance(t, ir.ShapedType) else str(t)


def _with_contract(flags: ir.Attribute | None) -> ir.Attribute:
    """`flags` (an #arith.fastmath attribute, or None for none) with `contract` added. The
    Python bindings read no flags from the attribute (their own builder prints and parses
    `FastMathFlags`): its flag names are read from its text."""
    text = str(flags) if flags is not None else "#arith.fastmath<none>"
    value = arith.FastMathFlags.none
    for name in text[text.index("<") + 1:text.rindex(">")].split(","):
        value |= arith.FastMathFlags[name.strip()]
    if flags is not None and value & arith.FastMathFlags.contract:
        return flags
    return ir.Attribute.parse(f"#arith.fastmath<{value | arith.FastMathFlags.contract}>")
