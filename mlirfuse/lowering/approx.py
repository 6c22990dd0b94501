"""Vectorizable float32 approximations of transcendental functions.

On the CPU backend ``math.exp``/``math.tanh``/... lower to scalar libm calls
(``expf``), which block LLVM's loop vectorizer.  The emitters below build the
same functions from plain ``arith`` ops plus ``math.fma``/``math.absf``/
``math.copysign``/``math.floor``/``math.roundeven`` (all of which lower to LLVM
intrinsics), with ``arith.select`` instead of branches, so loops vectorize.

Algorithms follow Cephes / upstream ``PolynomialApproximation.cpp``: range
reduction (Cody-Waite), a short minimax polynomial, and exponent bit tricks.
The ``erf`` polynomials were fitted for this module (Lawson/minimax in float64).

Every emitter takes and returns a scalar ``f32`` ``ir.Value`` and must be called
with an active ``ir.InsertionPoint`` and ``ir.Location``.  Accuracy versus
float64 numpy (``test/py/test_approx.py`` asserts <= 4 ulp): measured max
~1 ulp for exp/exp2/log/log2/log1p, ~1.4 for expm1/tanh, ~1.6 for erf and sin/cos,
~2.4 for sigmoid.  nan propagates; +-inf, +-0, overflow and (gradual) underflow
follow C99.  ``sin``/``cos`` reduce x by pi/2 in float64 (Payne-Hanek: 2/pi in 28-bit
digits): <= 2 ulp over the float32 range (a float32 Cody-Waite reduction left ~13000 ulp at
1e7 and values outside [-1, 1] past 2^24).
``math.fma``/``floor``/``roundeven`` need FMA/SSE4.1 hardware to stay inline
(otherwise LLVM calls fmaf/floorf); the JIT targets the host CPU.
"""

from __future__ import annotations

import math as _pymath
import struct
from typing import Callable, Sequence, Union

from mlir import ir
from mlir.dialects import arith, math

Operand = Union[ir.Value, float]

# --------------------------------------------------------------------------
# Tiny builder helpers
# --------------------------------------------------------------------------


def _f32() -> ir.Type:
    return ir.F32Type.get()


def _i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def _round32(v: float) -> float:
    """Round a Python float to the nearest float32 (inf stays inf)."""
    return struct.unpack("f", struct.pack("f", v))[0] if _pymath.isfinite(v) else v


def _v(a: Operand) -> ir.Value:
    """Materialize a Python float as an f32 constant; pass values through."""
    return a if isinstance(a, ir.Value) else arith.constant(_f32(), _round32(float(a)))


def _ci(v: int) -> ir.Value:
    return arith.constant(_i32(), v)


def _add(a: Operand, b: Operand) -> ir.Value:
    return arith.addf(_v(a), _v(b))


def _sub(a: Operand, b: Operand) -> ir.Value:
    return arith.subf(_v(a), _v(b))


def _mul(a: Operand, b: Operand) -> ir.Value:
    return arith.mulf(_v(a), _v(b))


def _div(a: Operand, b: Operand) -> ir.Value:
    return arith.divf(_v(a), _v(b))


def _fma(a: Operand, b: Operand, c: Operand) -> ir.Value:
    """a * b + c with a single rounding (llvm.fma)."""
    return math.fma(_v(a), _v(b), _v(c))


def _cmp(pred: str, a: Operand, b: Operand) -> ir.Value:
    """Float compare; ``pred`` is an arith.cmpf predicate name like 'olt'."""
    return arith.cmpf(getattr(arith.CmpFPredicate, pred.upper()), _v(a), _v(b))


def _sel(cond: ir.Value, a: Operand, b: Operand) -> ir.Value:
    return arith.select(cond, _v(a), _v(b))


def _poly(x: ir.Value, coeffs: Sequence[float]) -> ir.Value:
    """Horner evaluation with fma; ``coeffs`` are highest degree first."""
    acc = _v(coeffs[0])
    for c in coeffs[1:]:
        acc = _fma(acc, x, c)
    return acc


def _clamp(x: ir.Value, lo: float, hi: float) -> ir.Value:
    """Clamp to [lo, hi]; nan maps to ``lo`` (keeps later int conversions defined)."""
    x = _sel(_cmp("oge", x, lo), x, lo)
    return _sel(_cmp("ole", x, hi), x, hi)


def _keep_nan(x: ir.Value, result: ir.Value) -> ir.Value:
    """Return ``x`` where it is nan, else ``result``."""
    return _sel(_cmp("uno", x, x), x, result)


def _pow2i(n: ir.Value) -> ir.Value:
    """2**n as f32 for an i32 ``n`` in [-126, 127] (builds the exponent bits)."""
    bits = arith.shli(arith.addi(n, _ci(127)), _ci(23))
    return arith.bitcast(_f32(), bits)


def _ldexp(y: ir.Value, k: ir.Value) -> ir.Value:
    """y * 2**k for integral f32 ``k`` in [-252, 254]; scaled in two halves so
    that overflow gives inf and underflow rounds correctly into denormals."""
    ki = arith.fptosi(_i32(), k)
    k1 = arith.shrsi(ki, _ci(1))
    k2 = arith.subi(ki, k1)
    return _mul(_mul(y, _pow2i(k1)), _pow2i(k2))


# --------------------------------------------------------------------------
# exp family
# --------------------------------------------------------------------------

_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
_LN2_HI = _round32(_LN2)                 # ln2 = _LN2_HI + _LN2_LO
_LN2_LO = _LN2 - _LN2_HI
# Cephes expf: e**r = 1 + r + r*r * P(r) on |r| <= ln2/2.
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
          4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)


def _exp_reduce(x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Split x = k*ln2 + r with integral f32 k and |r| <= ln2/2; returns (k, expm1(r))."""
    k = math.roundeven(_mul(x, _LOG2E))
    r = _fma(k, -_LN2_HI, x)
    r = _fma(k, -_LN2_LO, r)
    return k, _fma(_poly(r, _EXP_P), _mul(r, r), r)


def _exp_finite(x: ir.Value) -> ir.Value:
    """exp for non-nan x already clamped to [-110, 89]."""
    k, em1 = _exp_reduce(x)
    return _ldexp(_add(em1, 1.0), k)


def exp(x: ir.Value) -> ir.Value:
    """e**x (overflows to inf above ~88.72, underflows through denormals to 0)."""
    return _keep_nan(x, _exp_finite(_clamp(x, -110.0, 89.0)))


def exp2(x: ir.Value) -> ir.Value:
    """2**x: exact integer part, e**(f*ln2) polynomial for the fraction."""
    xc = _clamp(x, -160.0, 129.0)
    k = math.roundeven(xc)
    f = _sub(xc, k)
    t = _fma(f, _LN2_HI, _mul(f, _LN2_LO))
    em1 = _fma(_poly(t, _EXP_P), _mul(t, t), t)
    return _keep_nan(x, _ldexp(_add(em1, 1.0), k))


def expm1(x: ir.Value) -> ir.Value:
    """e**x - 1, accurate near 0: 2**k * expm1(r) + (2**k - 1), formed as
    2 * (h * expm1(r) + (h - 0.5)) with h = 2**(k-1) (exact for all k)."""
    xc = _clamp(x, -60.0, 88.8)  # e**88.8 > FLT_MAX, so the top clamp still overflows
    k, em1 = _exp_reduce(xc)
    h = _pow2i(arith.subi(arith.fptosi(_i32(), k), _ci(1)))
    scaled = _mul(_fma(h, em1, _sub(h, 0.5)), 2.0)
    r = _sel(_cmp("oeq", k, 0.0), em1, scaled)
    return _keep_nan(x, _sel(_cmp("oeq", x, 0.0), x, r))  # keep the sign of -0


# --------------------------------------------------------------------------
# log family
# --------------------------------------------------------------------------

_LN2_C1 = 0.693359375                    # Cephes split: e*_LN2_C1 is exact
_LN2_C2 = -2.12194440e-4
_LOG2E_HI = _round32(_LOG2E)
_LOG2E_LO = _LOG2E - _LOG2E_HI
# Cephes logf: log(1+f) = f - f*f/2 + f**3 * P(f) on sqrt(.5)-1 <= f < sqrt(2)-1.
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
          -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
          2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)


def _log_parts(u: ir.Value) -> tuple[ir.Value, ir.Value]:
    """For finite u > 0 (denormals too) return f32 (e, f) with
    u = 2**e * (1 + f) and sqrt(.5) <= 1 + f < sqrt(2).  f is exact."""
    tiny = _cmp("olt", u, 2.0**-126)
    u = _sel(tiny, _mul(u, 2.0**23), u)
    bits = arith.bitcast(_i32(), u)
    e = arith.shrsi(arith.subi(bits, _ci(0x3F3504F3)), _ci(23))  # 0x3F3504F3 = sqrt(.5)
    m = arith.bitcast(_f32(), arith.subi(bits, arith.shli(e, _ci(23))))
    e_f = _sub(arith.sitofp(_f32(), e), _sel(tiny, 23.0, 0.0))
    return e_f, _sub(m, 1.0)


def _log1p_tail(f: ir.Value) -> ir.Value:
    """t with log(1 + f) = f + t for f from ``_log_parts``."""
    z = _mul(f, f)
    return _fma(z, -0.5, _mul(_mul(_poly(f, _LOG_P), f), z))


def _log_specials(x: ir.Value, r: ir.Value, pole: float) -> ir.Value:
    """inf -> inf, x == pole -> -inf, x < pole or nan -> nan."""
    r = _sel(_cmp("oeq", x, _pymath.inf), _pymath.inf, r)
    r = _sel(_cmp("oeq", x, pole), -_pymath.inf, r)
    return _sel(_cmp("ult", x, pole), _pymath.nan, r)


def log(x: ir.Value) -> ir.Value:
    """Natural log; log(0) = -inf, log(x<0) = nan."""
    e, f = _log_parts(x)
    y = _fma(e, _LN2_C2, _log1p_tail(f))
    return _log_specials(x, _fma(e, _LN2_C1, _add(f, y)), 0.0)


def log2(x: ir.Value) -> ir.Value:
    """Base-2 log: e + log(1+f) * log2(e) with a two-part log2(e)."""
    e, f = _log_parts(x)
    t = _log1p_tail(f)
    lo = _fma(f, _LOG2E_LO, _mul(t, _LOG2E))
    return _log_specials(x, _add(e, _fma(f, _LOG2E_HI, lo)), 0.0)


def log1p(x: ir.Value) -> ir.Value:
    """log(1 + x): log(u) of u = fl(1 + x) plus the exact rounding error of
    1 + x (TwoSum) divided by u."""
    u = _add(x, 1.0)
    bb = _sub(u, x)
    err = _add(_sub(x, _sub(u, bb)), _sub(1.0, bb))
    e, f = _log_parts(u)
    y = _add(_fma(e, _LN2_C2, _log1p_tail(f)), _div(err, u))
    r = _sel(_cmp("oeq", x, 0.0), x, _fma(e, _LN2_C1, _add(f, y)))  # keep -0
    return _log_specials(x, r, -1.0)


# --------------------------------------------------------------------------
# tanh, sigmoid, erf
# --------------------------------------------------------------------------

# Cephes tanhf: tanh(a) = a + a*z*P(z) (z = a*a) for |a| < 0.625.
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
           1.33314422036e-1, -3.33332819422e-1)


def tanh(x: ir.Value) -> ir.Value:
    """Odd polynomial below 0.625, else 1 - 2/(e**(2a) + 1); saturates to +-1."""
    a = _clamp(math.absf(_v(x)), 0.0, 10.0)  # tanh(10) rounds to 1
    z = _mul(a, a)
    small = _fma(_mul(a, z), _poly(z, _TANH_P), a)
    big = _sub(1.0, _div(2.0, _add(_exp_finite(_add(a, a)), 1.0)))
    r = math.copysign(_sel(_cmp("olt", a, 0.625), small, big), x)
    return _keep_nan(x, r)


def sigmoid(x: ir.Value) -> ir.Value:
    """1 / (1 + e**-x) via t = e**-|x|: 1/(1+t) for x >= 0, t/(1+t) otherwise
    (no overflow; tiny results underflow gracefully)."""
    t = _exp_finite(_clamp(_sub(0.0, math.absf(_v(x))), -110.0, 0.0))
    d = _add(t, 1.0)
    r = _sel(_cmp("oge", x, 0.0), _div(1.0, d), _div(t, d))
    return _keep_nan(x, r)


# erf(a) = a * (2/sqrt(pi) + z * P(z)), z = a*a, on [0, 1.25] (rel. err 1.3e-9);
# 2/sqrt(pi) is split in two floats to keep the leading term exact.
_TWO_OVER_SQRTPI_HI = 1.128379225730896
_TWO_OVER_SQRTPI_LO = -5.863538342219759e-08
_ERF_A = (-7.521259249188006e-06, 0.0001037142428685911, -0.0008336217142641544,
          0.005208853632211685, -0.026860302314162254, 0.1128368228673935,
          -0.37612631916999817)
# erfc(a) = e**(-a*a) * Q(w), w = (a - 2.625) / 1.375, on [1.25, 4] (rel. err 4e-8).
_ERF_B = (2.4865599698387086e-05, -7.480203203158453e-05, 0.00014642640599049628,
          -0.00039649507380090654, 0.0011226893402636051, -0.0029244457837194204,
          0.007342686410993338, -0.01787032000720501, 0.041886959224939346,
          -0.09414565563201904, 0.2018875628709793)


def erf(x: ir.Value) -> ir.Value:
    """Odd polynomial for |x| < 1.25, 1 - e**(-x*x) * Q(|x|) up to 4
    (erf(x) rounds to 1 beyond ~3.92)."""
    a = _clamp(math.absf(_v(x)), 0.0, 4.0)
    z = _mul(a, a)
    t = _fma(z, _poly(z, _ERF_A), _TWO_OVER_SQRTPI_LO)
    small = _fma(a, _TWO_OVER_SQRTPI_HI, _mul(a, t))
    q = _poly(_mul(_sub(a, 2.625), 1.0 / 1.375), _ERF_B)
    big = _sub(1.0, _mul(_exp_finite(_sub(0.0, z)), q))
    r = math.copysign(_sel(_cmp("olt", a, 1.25), small, big), x)
    return _keep_nan(x, r)


# --------------------------------------------------------------------------
# sin / cos
# --------------------------------------------------------------------------

# 2/pi in 28-bit digits: 2/pi = sum(d * 2^(-28 (j + 1))). A float32 x has 24 significant bits,
# so x * d * 2^(-28 (j + 1)) is exact in float64: x * 2/pi reduced mod 4 term by term is exact
# but for the few terms' roundings (Payne-Hanek's reduction in float64 arithmetic: 8 digits
# reach the float32 range's top, 2^128).
_TWO_OVER_PI_DIGITS = (170891318, 240010261, 44024437, 131200308, 232525238, 43358524, 70845471, 240214955)
# Cephes sinf/cosf kernels on |r| <= pi/4.
_SIN_P = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COS_P = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)


def _sin_cos(x: ir.Value, quadrant_shift: float) -> ir.Value:
    """sin(x + quadrant_shift * pi/2) via x = k*pi/2 + r, |r| <= ~pi/4: x * 2/pi as a sum of
    exact float64 products, each reduced to [-2, 2] by whole multiples of 4 (plain float64
    ops: they vectorize as the float32 ones do)."""
    f64 = ir.F64Type.get()

    def c(v: float) -> ir.Value:
        return arith.constant(f64, v)

    def less_fours(t: ir.Value) -> ir.Value:  # t - 4 * round(t / 4): exact, in [-2, 2]
        return arith.subf(t, arith.mulf(math.roundeven(arith.mulf(t, c(0.25))), c(4.0)))
    xd = arith.extf(f64, x)
    f = None
    for j, digit in enumerate(_TWO_OVER_PI_DIGITS):
        term = less_fours(arith.mulf(xd, c(_pymath.ldexp(digit, -28 * (j + 1)))))
        f = term if f is None else arith.addf(f, term)
    k = math.roundeven(f)  # x * 2/pi = 4n + f, so the quadrant is k mod 4
    r = arith.truncf(_f32(), arith.mulf(arith.subf(f, k), c(_pymath.pi / 2)))
    z = _mul(r, r)
    s = _fma(_mul(r, z), _poly(z, _SIN_P), r)
    c_ = _fma(_mul(z, z), _poly(z, _COS_P), _fma(z, -0.5, 1.0))
    q = arith.addf(k, c(quadrant_shift))  # an integer in [-9, 10]: q mod 4 is exact
    q = arith.subf(q, arith.mulf(math.floor(arith.mulf(q, c(0.25))), c(4.0)))
    odd = arith.cmpf(arith.CmpFPredicate.OEQ, arith.subf(q, arith.mulf(math.floor(arith.mulf(q, c(0.5))), c(2.0))),
                     c(1.0))
    v = _sel(odd, c_, s)
    return _sel(arith.cmpf(arith.CmpFPredicate.OGE, q, c(2.0)), arith.negf(v), v)


def sin(x: ir.Value) -> ir.Value:
    """Sine; <= 2 ulp over the float32 range, nan for +-inf."""
    return _sel(_cmp("oeq", x, 0.0), x, _sin_cos(x, 0.0))  # keep -0


def cos(x: ir.Value) -> ir.Value:
    """Cosine; <= 2 ulp over the float32 range, nan for +-inf."""
    return _sin_cos(x, 1.0)


APPROXIMATIONS: dict[str, Callable[[ir.Value], ir.Value]] = {
    "exp": exp, "exp2": exp2, "expm1": expm1,
    "log": log, "log2": log2, "log1p": log1p,
    "tanh": tanh, "sigmoid": sigmoid, "erf": erf,
    "sin": sin, "cos": cos,
}
