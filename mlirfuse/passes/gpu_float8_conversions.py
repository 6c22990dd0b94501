"""gpu-float8-conversions: the float8 conversions fusion-to-linalg{target=gpu} leaves as
`arith.extf` (f8E4M3FN/f8E5M2 to f32) and `arith.truncf` (f32 to them), lowered for the GPU.

Inside `gpu.launch` bodies, where the architecture has them (sm_89 and later), they become
PTX `cvt`: `nvvm.convert.f8x2.to.f16x2` then an exact `extf` (every float8 value is a
float16 one), and `nvvm.convert.f32x2.to.f8x2` (round to nearest even, `satfinite`). torch's
float8_e4m3fn saturates at 448 as `satfinite` does; its float8_e5m2 overflows to infinity
where `satfinite` gives 57344, so those results are made infinite again: |x| >= 61440 (the
midpoint to 65536, which rounds up) or an infinity. Elsewhere (host code, or an earlier
architecture) they become the integer code on the bits that the CPU backend runs (exact).
Expects the `gpu` stage's IR (after gpu-loops-to-launches); option `arch` (sm_XX).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, math, nvvm, vector

from mlirfuse.errors import FusionError
from mlirfuse.lowering.scalar import f32_to_float8, float8_to_f32, is_float8
from mlirfuse.passes.common import walk_ops

NAME = "gpu-float8-conversions"
OPTIONS = {"arch": (str, "sm_90", "the GPU architecture (sm_XX): PTX cvt from sm_89")}

CVT_ARCH = 89  # cvt.{e4m3x2,e5m2x2}.f32 and cvt.f16x2.{e4m3x2,e5m2x2}: PTX ISA 7.8, sm_89
E5M2_OVERFLOW = 61440.0  # float32 magnitudes from here round past float8_e5m2's largest, 57344


def run(module: ir.Operation, arch: str = "sm_90") -> None:
    if not arch.startswith("sm_") or not arch[3:].rstrip("a").isdigit():
        raise FusionError(f"{NAME}: arch must be sm_XX, got '{arch}'")
    cvt = int(arch[3:].rstrip("a")) >= CVT_ARCH
    for op in walk_ops(module):
        if op.name == "arith.extf" and is_float8(op.operands[0].type):
            _replace(op, lambda v: _from_float8_cvt(v) if cvt and _in_kernel(op) else float8_to_f32(v))
        elif op.name == "arith.truncf" and is_float8(op.results[0].type):
            to = op.results[0].type
            _replace(op, lambda v: _to_float8_cvt(v, to) if cvt and _in_kernel(op) else f32_to_float8(v, to))


def _replace(op: ir.Operation, lower) -> None:
    """Replace `op` by `lower` (float32 <-> float8) applied through float32: canonicalization
    folds `truncf(extf(x))` and `extf(extf(x))`, so a bf16/f16 source or an f16/f64 result meets
    the conversion directly; float32 holds all of them exactly on the way."""
    source, result = op.operands[0].type, op.results[0].type
    f32 = ir.F32Type.get()
    if any(str(t) == "f64" for t in (source, result)) and is_float8(result):
        raise FusionError(f"{NAME}: float64 to float8 must round once, through no float32: {op}")
    with ir.InsertionPoint(op), op.location:
        value = op.operands[0]
        if not is_float8(source) and source != f32:
            value = arith.extf(f32, value)  # bf16/f16: exact
        value = lower(value)
        if not is_float8(result) and result != f32:  # float8 values are exact in f16, bf16, f64
            value = arith.extf(result, value) if str(result) == "f64" else arith.truncf(result, value)
    op.results[0].replace_all_uses_with(value)
    op.erase()


def _in_kernel(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None and parent.name != "builtin.module":
        if parent.name == "gpu.launch":
            return True
        parent = parent.parent
    return False


def _from_float8_cvt(value: ir.Value) -> ir.Value:
    i8 = ir.IntegerType.get_signless(8)
    byte = arith.bitcast(i8, value)
    pair = vector.from_elements(ir.VectorType.get([2], i8), [byte, byte])
    halves = nvvm.convert_f8x2_to_f16x2(ir.VectorType.get([2], ir.F16Type.get()), pair, ir.TypeAttr.get(value.type))
    return arith.extf(ir.F32Type.get(), vector.extract(halves, [], [0]))


def _to_float8_cvt(value: ir.Value, to: ir.Type) -> ir.Value:
    """The low byte of `cvt.rn.satfinite.<f8>x2.f32 (0, value)`; e5m2's overflow made infinite."""
    f32, i8, i16 = ir.F32Type.get(), ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(16)
    zero = arith.constant(f32, 0.0)
    packed = nvvm.convert_f32x2_to_f8x2(i16, zero, value, ir.TypeAttr.get(to),
                                         rnd=ir.Attribute.parse("#nvvm.fp_rnd_mode<rn>"),
                                         sat=ir.Attribute.parse("#nvvm.sat_mode<satfinite>"))
    result = arith.bitcast(to, arith.trunci(i8, packed))
    if str(to) != "f8E5M2":
        return result
    infinite = arith.cmpf(arith.CmpFPredicate.OGE, math.absf(value), arith.constant(f32, E5M2_OVERFLOW))
    sign = arith.andi(arith.trunci(i8, arith.shrui(arith.bitcast(ir.IntegerType.get_signless(32), value),
                                                   arith.constant(ir.IntegerType.get_signless(32), 24))),
                      arith.constant(i8, -0x80))  # the sign bit
    inf = arith.bitcast(to, arith.ori(sign, arith.constant(i8, 0x7C)))
    return arith.select(infinite, inf, result)
