"""Scalar semantics of elementwise ops, emitted as arith/math ops on one element.

Each op of the op table names one function here, `fn(e, *operands) -> value`. Operands
arrive in the op's compute type (float32 for float16/bfloat16), so every function is written
once for f32/f64/i32/i64/i1. Transcendentals go through `Emitter.math`: on the CPU, float32
uses the vectorizable approximations of `approx.py` (libm calls would stop LLVM's loop
vectorizer); on the GPU, `math` ops lower to libdevice.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Callable, Iterator

from mlir import ir
from mlir.dialects import arith, llvm, math, scf

F = arith.CmpFPredicate
IP = arith.CmpIPredicate


class Emitter:
    """Emits scalar code for one compute type under the current insertion point."""

    def __init__(self, compute: ir.Type, target: str):
        self.type = compute
        self.target = target
        self.is_float = isinstance(compute, (ir.F32Type, ir.F64Type))
        self.is_bool = isinstance(compute, ir.IntegerType) and compute.width == 1
        self.is_int = isinstance(compute, ir.IntegerType) and not self.is_bool

    def const(self, value: float | int | bool, type_: ir.Type | None = None) -> ir.Value:
        t = type_ or self.type
        if isinstance(t, ir.IntegerType):
            value = int(value)
            if t.width == 1:
                value = 1 if value else 0
            return arith.constant(t, ir.IntegerAttr.get(t, value))
        return arith.constant(t, ir.FloatAttr.get(t, float(value)))

    def math(self, name: str, *xs: ir.Value) -> ir.Value:
        """A transcendental function: approximation on CPU f32, math op elsewhere."""
        from mlirfuse.lowering import approx  # noqa: PLC0415 (heavy only when used)

        if self.target == "cpu" and isinstance(self.type, ir.F32Type) and name in approx.APPROXIMATIONS:
            return approx.APPROXIMATIONS[name](*xs)
        if self.target == "cpu" and name in ("expm1", "log1p"):  # LLVM has exp(x) - 1, log(1 + x)
            return (self._expm1 if name == "expm1" else self._log1p)(xs[0])
        if name == "sigmoid":
            one = self.const(1.0)
            return arith.divf(one, arith.addf(one, self.math("exp", arith.negf(xs[0]))))
        return getattr(math, name)(*xs)

    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return arith.select(cond, a, b)

    def _expm1(self, x: ir.Value) -> ir.Value:
        """exp(x) - 1 without its cancellation near 0 (Kahan: (u - 1) * (x / log(u)) with
        u = exp(x); MLIR lowers math.expm1 to exp(x) - 1 on the host, 8e-8 relative error at
        1e-10 in float64). The quotient first: (u - 1) * x overflowed for x above about 703
        in float64, where expm1 is still finite."""
        u = math.exp(x)
        um1 = arith.subf(u, self.const(1.0))
        kahan = arith.mulf(um1, arith.divf(x, math.log(u)))
        r = self.select(arith.cmpf(F.OEQ, um1, self.const(-1.0)), um1, kahan)
        r = self.select(arith.cmpf(F.OEQ, u, self.const(float("inf"))), u, r)
        return self.select(arith.cmpf(F.OEQ, u, self.const(1.0)), x, r)  # keeps -0 and NaN's payload

    def _log1p(self, x: ir.Value) -> ir.Value:
        """log(1 + x) without its cancellation near 0 (Goldberg: log(u) * (x / (u - 1)) with
        u = 1 + x; the quotient first, as in `_expm1`: log(u) * x overflowed for x above about
        2.5e305 in float64)."""
        u = arith.addf(self.const(1.0), x)
        goldberg = arith.mulf(math.log(u), arith.divf(x, arith.subf(u, self.const(1.0))))
        r = self.select(arith.cmpf(F.OEQ, u, self.const(float("inf"))), u, goldberg)
        r = self.select(arith.cmpf(F.OEQ, u, self.const(0.0)), math.log(u), r)
        return self.select(arith.cmpf(F.OEQ, u, self.const(1.0)), x, r)

    def cmp(self, pred: str, a: ir.Value, b: ir.Value) -> ir.Value:
        """Compare with torch semantics: NaN is unordered (only `ne` holds)."""
        if self.is_float:
            fp = {"eq": F.OEQ, "ne": F.UNE, "lt": F.OLT, "le": F.OLE, "gt": F.OGT, "ge": F.OGE}
            return arith.cmpf(fp[pred], a, b)
        ip = {"eq": IP.eq, "ne": IP.ne, "lt": IP.slt, "le": IP.sle, "gt": IP.sgt, "ge": IP.sge}
        if self.is_bool:
            ip = {**ip, "lt": IP.ult, "le": IP.ule, "gt": IP.ugt, "ge": IP.uge}
        return arith.cmpi(ip[pred], a, b)


Lowering = Callable[..., ir.Value]


def by_kind(on_float: Lowering, on_int: Lowering, on_bool: Lowering | None = None) -> Lowering:
    def lower(e: Emitter, *xs: ir.Value) -> ir.Value:
        if e.is_float:
            return on_float(e, *xs)
        if e.is_bool and on_bool is not None:
            return on_bool(e, *xs)
        return on_int(e, *xs)
    return lower


def transcendental(name: str) -> Lowering:
    return lambda e, x: e.math(name, x)


def neg_int(e: Emitter, x: ir.Value) -> ir.Value:
    return arith.subi(e.const(0), x)


def abs_int(e: Emitter, x: ir.Value) -> ir.Value:
    return arith.maxsi(x, neg_int(e, x))


def sign(e: Emitter, x: ir.Value) -> ir.Value:
    zero, one = e.const(0), e.const(1)
    if e.is_bool:
        return x
    pos = e.select(e.cmp("gt", x, zero), one, zero)
    neg = e.select(e.cmp("lt", x, zero), one, zero)
    return arith.subf(pos, neg) if e.is_float else arith.subi(pos, neg)  # sign(nan) = 0, as torch's


def _safe_divisor(e: Emitter, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """x % 0 and INT_MIN % -1 trap the process: divide by 1 instead and report 0 (the true
    remainder by -1 is 0; by 0 mlirfuse defines it as 0)."""
    trivial = arith.ori(e.cmp("eq", b, e.const(0)), e.cmp("eq", b, e.const(-1)))
    return trivial, e.select(trivial, e.const(1), b)


def fmod_int(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    is_zero, safe = _safe_divisor(e, b)
    return e.select(is_zero, e.const(0), arith.remsi(a, safe))


def trunc_div(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    """Integer division rounded toward zero (C's); by 0 gives 0, by -1 the negation
    (wrapping at INT_MIN) rather than trapping."""
    trivial, safe = _safe_divisor(e, b)
    quotient = arith.divsi(a, safe)
    return e.select(trivial, e.select(e.cmp("eq", b, e.const(0)), e.const(0), neg_int(e, a)), quotient)


def remainder(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    """Python's modulo: the result takes the sign of the divisor."""
    r = arith.remf(a, b) if e.is_float else fmod_int(e, a, b)
    zero = e.const(0)
    fix = arith.andi(e.cmp("ne", r, zero),
                     arith.xori(e.cmp("lt", r, zero), e.cmp("lt", b, zero)))
    return e.select(fix, arith.addf(r, b) if e.is_float else arith.addi(r, b), r)


def shift(kind: str) -> Lowering:
    """Integer shifts with torch's meaning of counts outside [0, bits): a left or logical
    right shift gives 0, an arithmetic right shift the sign (LLVM's shifts are poison there)."""
    def lower(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
        bits = ir.IntegerType(e.type).width
        over = arith.ori(e.cmp("lt", b, e.const(0)), e.cmp("ge", b, e.const(bits)))
        if kind == "right":
            return arith.shrsi(a, e.select(over, e.const(bits - 1), b))
        shifted = (arith.shli if kind == "left" else arith.shrui)(a, e.select(over, e.const(0), b))
        return e.select(over, e.const(0), shifted)
    return lower


def gcd(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    """torch.gcd: Euclid's algorithm on |a| and |b| (a loop per element; gcd(0, 0) = 0)."""
    t = e.type
    loop = scf.WhileOp([t, t], [abs_int(e, a), abs_int(e, b)])
    before = loop.before.blocks.append(t, t)
    with ir.InsertionPoint(before):
        x, y = before.arguments
        scf.condition(e.cmp("ne", x, e.const(0)), [x, y])
    after = loop.after.blocks.append(t, t)
    with ir.InsertionPoint(after):
        x, y = after.arguments
        scf.yield_([arith.remsi(y, x), x])  # (a, b) <- (b % a, a)
    return loop.results[1]


def nextafter(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    """The float after `a` toward `b` (C's nextafter): one step of a's bits away from or
    toward zero; b when they are equal (so the sign of a zero b), NaN when either is."""
    bits_t = ir.IntegerType.get_signless(ir.FloatType(e.type).width)
    bits = arith.bitcast(bits_t, a)
    one = arith.constant(bits_t, ir.IntegerAttr.get(bits_t, 1))
    away_from_zero = arith.xori(arith.cmpf(F.OLT, a, b), arith.cmpf(F.OLT, a, e.const(0.0)))
    stepped = arith.bitcast(e.type, e.select(away_from_zero, arith.addi(bits, one), arith.subi(bits, one)))
    tiny = math.copysign(arith.bitcast(e.type, one), b)  # the smallest subnormal, signed as b
    stepped = e.select(arith.cmpf(F.OEQ, a, e.const(0.0)), tiny, stepped)
    result = e.select(arith.cmpf(F.OEQ, a, b), b, stepped)
    return e.select(arith.cmpf(F.UNO, a, b), arith.addf(a, b), result)


def div(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.divf(a, b)


def power(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    if e.is_float:
        return math.powf(a, b)
    return power_int(e, a, b)


def power_int(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    """torch's integer pow: squaring and multiplying, wrapping as the type's products do
    (through float64 it was inexact past 2^53 and gave INT_MIN on overflow); a negative
    exponent gives 1 for a base of 1, +-1 for -1 (by the exponent's parity) and 0 otherwise."""
    t, zero, one = e.type, e.const(0), e.const(1)
    negative = e.cmp("lt", b, zero)
    loop = scf.WhileOp([t, t, t], [one, a, e.select(negative, zero, b)])
    before = loop.before.blocks.append(t, t, t)
    with ir.InsertionPoint(before):
        r, x, y = before.arguments
        scf.condition(e.cmp("ne", y, zero), [r, x, y])
    after = loop.after.blocks.append(t, t, t)
    with ir.InsertionPoint(after):
        r, x, y = after.arguments
        odd = e.cmp("ne", arith.andi(y, one), zero)
        scf.yield_([e.select(odd, arith.muli(r, x), r), arith.muli(x, x), arith.shrui(y, one)])
    minus_one = e.const(-1)
    odd_exponent = e.cmp("ne", arith.andi(b, one), zero)
    inverse = e.select(e.cmp("eq", a, one), one,
                       e.select(e.cmp("eq", a, minus_one), e.select(odd_exponent, minus_one, one), zero))
    return e.select(negative, inverse, loop.results[0])


def relu(e: Emitter, x: ir.Value) -> ir.Value:
    """max(x, 0); on the CPU x < 0 ? 0 : x, which keeps -0 (torch's CPU relu does, its CUDA
    relu does not)."""
    zero = e.const(0)
    if e.is_float and e.target == "cpu":
        return arith.select(arith.cmpf(F.OLT, x, zero), zero, x)
    return arith.maximumf(x, zero) if e.is_float else (x if e.is_bool else arith.maxsi(x, zero))


def round_even(e: Emitter, x: ir.Value) -> ir.Value:
    return math.roundeven(x) if e.is_float else x


def isnan(e: Emitter, x: ir.Value) -> ir.Value:
    return arith.cmpf(F.UNO, x, x) if e.is_float else e.const(False, ir.IntegerType.get_signless(1))


def isinf(e: Emitter, x: ir.Value) -> ir.Value:
    if not e.is_float:
        return e.const(False, ir.IntegerType.get_signless(1))
    return arith.cmpf(F.OEQ, math.absf(x), e.const(float("inf")))


def silu(e: Emitter, x: ir.Value) -> ir.Value:
    return arith.mulf(x, e.math("sigmoid", x))


def sqrt(e: Emitter, x: ir.Value) -> ir.Value:
    """Correctly rounded, as torch.sqrt on CUDA (nvcc's -prec-sqrt default): on the GPU,
    math.sqrt becomes libdevice's __nv_sqrtf, which is sqrt.approx.f32 (up to an ulp off), and
    convert-gpu-to-nvvm takes llvm.sqrt there too; float32 is PTX's sqrt.rn by inline asm."""
    if e.target == "gpu" and isinstance(x.type, ir.F32Type):
        return llvm.inline_asm(x.type, [x], "sqrt.rn.f32 $0, $1;", "=f,f")
    return math.sqrt(x)


def rsqrt(e: Emitter, x: ir.Value) -> ir.Value:
    return arith.divf(e.const(1.0), sqrt(e, x))


def reciprocal(e: Emitter, x: ir.Value) -> ir.Value:
    return arith.divf(e.const(1.0), x)


def invert(e: Emitter, x: ir.Value) -> ir.Value:
    return arith.xori(x, e.const(-1 if not e.is_bool else 1))


def maximum(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    if e.is_float:
        return arith.maximumf(a, b)
    return arith.maxui(a, b) if e.is_bool else arith.maxsi(a, b)


def minimum(e: Emitter, a: ir.Value, b: ir.Value) -> ir.Value:
    if e.is_float:
        return arith.minimumf(a, b)
    return arith.minui(a, b) if e.is_bool else arith.minsi(a, b)


def where(e: Emitter, c: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.select(c, a, b)


def clamp(e: Emitter, x: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    return minimum(e, maximum(e, x, lo), hi)


def lerp(e: Emitter, a: ir.Value, b: ir.Value, w: ir.Value) -> ir.Value:
    """torch.lerp's two-sided formula, exact at both ends, each side one fused multiply-add as
    torch's vectorized CPU kernel (and nvcc's contraction on CUDA) computes it."""
    diff = arith.subf(b, a)
    small = arith.cmpf(F.OLT, math.absf(w), e.const(0.5))
    lo = math.fma(w, diff, a)
    hi = math.fma(arith.subf(w, e.const(1.0)), diff, b)
    return arith.select(small, lo, hi)


def fma(e: Emitter, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    """a * b + c rounded once (llvm.fma; half types arrive widened to float32)."""
    return math.fma(a, b, c)


def compare(pred: str) -> Lowering:
    return lambda e, a, b: e.cmp(pred, a, b)


def binary(float_op: Callable, int_op: Callable, bool_op: Callable | None = None) -> Lowering:
    return by_kind(lambda e, a, b: float_op(a, b), lambda e, a, b: int_op(a, b),
                    (lambda e, a, b: bool_op(a, b)) if bool_op else None)


# The target fusion-to-linalg lowers for (`lowering_target`): on the GPU, float8 conversions
# stay `arith.extf`/`arith.truncf` for gpu-float8-conversions (PTX cvt where the arch has it).
_TARGET: contextvars.ContextVar[str] = contextvars.ContextVar("mlirfuse_lowering_target", default="cpu")


@contextlib.contextmanager
def lowering_target(target: str) -> Iterator[None]:
    token = _TARGET.set(target)
    try:
        yield
    finally:
        _TARGET.reset(token)


def convert(value: ir.Value, to: ir.Type) -> ir.Value:
    """Element conversion with torch semantics (float->bool is `!= 0`, bool->number is 0/1).
    float8 goes through float32: integer code on the bits for the CPU, `arith.extf` /
    `arith.truncf` for the GPU (lowered by gpu-float8-conversions)."""
    src = value.type
    if src == to:
        return value
    src_float = not isinstance(src, ir.IntegerType)
    dst_float = not isinstance(to, ir.IntegerType)
    if isinstance(to, ir.IntegerType) and to.width == 1:
        zero = Emitter(src, "").const(0)
        return arith.cmpf(F.UNE, value, zero) if src_float else arith.cmpi(IP.ne, value, zero)
    gpu = _TARGET.get() == "gpu"
    if is_float8(src):
        return convert(arith.extf(ir.F32Type.get(), value) if gpu else float8_to_f32(value), to)
    if is_float8(to):
        wide = convert(value, ir.F32Type.get())
        return arith.truncf(to, wide) if gpu else f32_to_float8(wide, to)
    if src_float and dst_float:
        src_w, dst_w = _float_width(src), _float_width(to)
        if src_w == dst_w:  # f16 <-> bf16 go through f32
            return convert(convert(value, ir.F32Type.get()), to)
        return arith.extf(to, value) if dst_w > src_w else arith.truncf(to, value)
    if src_float:
        return arith.fptosi(to, value)
    src_bool = src.width == 1
    if dst_float:
        return arith.uitofp(to, value) if src_bool else arith.sitofp(to, value)
    if src.width < to.width:
        return arith.extui(to, value) if src_bool else arith.extsi(to, value)
    return arith.trunci(to, value)


def _float_width(t: ir.Type) -> int:
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[str(t)]


# -- float8 (storage only): conversions from and to float32 on the bits, both backends ------
# LLVM has no 8-bit float type, so these are integer code. (exponent bits, mantissa bits,
# bias, largest finite code, code an overflow gives): float8_e4m3fn has no infinity and
# saturates to 448 (as nvFuser's cvt.satfinite and torch 2.13); float8_e5m2 overflows to inf.
_FLOAT8 = {"f8E4M3FN": (4, 3, 7, 0x7E, 0x7E), "f8E5M2": (5, 2, 15, 0x7B, 0x7C)}


def is_float8(t: ir.Type) -> bool:
    return str(t) in _FLOAT8


def _i32(value: int) -> ir.Value:
    i32 = ir.IntegerType.get_signless(32)
    return arith.constant(i32, ir.IntegerAttr.get(i32, value))


def float8_to_f32(value: ir.Value) -> ir.Value:
    """Exact: normal codes rebias their exponent, subnormal ones are m * 2^(1 - bias - M)."""
    exp_bits, man_bits, bias, _, _ = _FLOAT8[str(value.type)]
    f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
    b = arith.extui(i32, arith.bitcast(ir.IntegerType.get_signless(8), value))
    sign = arith.shli(arith.andi(b, _i32(0x80)), _i32(24))
    e = arith.andi(arith.shrui(b, _i32(man_bits)), _i32((1 << exp_bits) - 1))
    m = arith.andi(b, _i32((1 << man_bits) - 1))
    normal = arith.ori(arith.shli(arith.addi(e, _i32(127 - bias)), _i32(23)), arith.shli(m, _i32(23 - man_bits)))
    e32 = Emitter(f32, "")
    tiny = arith.mulf(arith.uitofp(f32, m), e32.const(2.0 ** (1 - bias - man_bits)))
    magnitude = arith.select(arith.cmpi(IP.eq, e, _i32(0)), tiny, arith.bitcast(f32, normal))
    result = arith.bitcast(f32, arith.ori(arith.bitcast(i32, magnitude), sign))
    top = _i32((1 << exp_bits) - 1)
    if str(value.type) == "f8E4M3FN":  # S.1111.111 is NaN; no infinity
        special = arith.andi(arith.cmpi(IP.eq, e, top), arith.cmpi(IP.eq, m, _i32(7)))
        return arith.select(special, e32.const(float("nan")), result)
    inf = arith.bitcast(f32, arith.ori(_i32(0x7F800000), sign))
    special = arith.select(arith.cmpi(IP.eq, m, _i32(0)), inf, e32.const(float("nan")))
    return arith.select(arith.cmpi(IP.eq, e, top), special, result)


def f32_to_float8(value: ir.Value, to: ir.Type) -> ir.Value:
    """Round to nearest even: normal results by rounding the float32 mantissa to M bits and
    rebiasing; subnormal ones as round(|x| * 2^(bias + M - 1)) (exact scaling); overflow as
    the format says; NaN stays NaN."""
    exp_bits, man_bits, bias, largest, overflow = _FLOAT8[str(to)]
    f32, i32, i8 = ir.F32Type.get(), ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(8)
    e32 = Emitter(f32, "")
    bits = arith.bitcast(i32, value)
    sign = arith.andi(arith.shrui(bits, _i32(24)), _i32(0x80))
    u = arith.andi(bits, _i32(0x7FFFFFFF))
    shift = 23 - man_bits
    odd = arith.andi(arith.shrui(u, _i32(shift)), _i32(1))
    rounded = arith.shrui(arith.addi(arith.addi(u, _i32((1 << (shift - 1)) - 1)), odd), _i32(shift))
    normal = arith.subi(rounded, _i32((127 - bias) << man_bits))
    scaled = math.roundeven(arith.mulf(math.absf(value), e32.const(2.0 ** (bias + man_bits - 1))))
    subnormal = arith.fptoui(i32, scaled)
    min_normal = _i32((127 + 1 - bias) << 23)  # float32 bits of 2^(1 - bias)
    code = arith.select(arith.cmpi(IP.ult, u, min_normal), subnormal, normal)
    code = arith.select(arith.cmpi(IP.ugt, code, _i32(largest)), _i32(overflow), code)
    nan = arith.cmpf(F.UNO, value, value)
    code = arith.select(nan, _i32(0x7F if exp_bits == 4 else 0x7E), code)
    return arith.bitcast(to, arith.trunci(i8, arith.ori(code, sign)))
