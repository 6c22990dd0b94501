"""Emit Philox4x32-10 random numbers as plain ``arith`` ops.

Only integer ``arith`` ops plus one int->float conversion and a mul/add are
used, so the result is bit-identical on every backend (LLVM CPU, NVVM) and
matches ``mlirfuse.reference_philox``.  Element ``i`` with seed ``s`` and
offset ``o`` uses counter ``(lo32(i//4), hi32(i//4), lo32(o), hi32(o))``,
key ``(lo32(s), hi32(s))`` and output word ``i % 4``.

All functions must be called under an active ``ir.InsertionPoint`` and
``ir.Location``.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10
# Discardable tags that let GPU kernels share one Philox call among 4 consecutive elements
# (`gpu.philox_sharing.share_philox`): the element's i64 index and the word selected for it.
INDEX_TAG = "mlirfuse.philox_index"
WORD_TAG = "mlirfuse.philox_word"


def _i32() -> ir.IntegerType:
    return ir.IntegerType.get_signless(32)


def _i64() -> ir.IntegerType:
    return ir.IntegerType.get_signless(64)


def _const_int(ty: ir.IntegerType, value: int) -> ir.Value:
    """Integer constant from an unsigned Python int (stored as its signed twin)."""
    width = ty.width
    value &= (1 << width) - 1
    if value >= 1 << (width - 1):
        value -= 1 << width
    return arith.constant(ty, ir.IntegerAttr.get(ty, value))


def _lo_hi32(x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Split an i64 into its (low, high) 32-bit halves."""
    hi = arith.shrui(x, _const_int(_i64(), 32))
    return arith.trunci(_i32(), x), arith.trunci(_i32(), hi)


def emit_philox4x32(
    counter: list[ir.Value], key: list[ir.Value], rounds: int = PHILOX_ROUNDS
) -> list[ir.Value]:
    """Philox4x32-``rounds`` on four i32 counter words and two i32 key words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    m0, m1 = _const_int(_i32(), PHILOX_M0), _const_int(_i32(), PHILOX_M1)
    w0, w1 = _const_int(_i32(), PHILOX_W0), _const_int(_i32(), PHILOX_W1)
    for r in range(rounds):
        if r > 0:  # key bump between rounds (wraps mod 2**32)
            k0, k1 = arith.addi(k0, w0), arith.addi(k1, w1)
        lo0, hi0 = arith.mului_extended(m0, c0)
        lo1, hi1 = arith.mului_extended(m1, c2)
        c0, c1, c2, c3 = (
            arith.xori(arith.xori(hi1, c1), k0),
            lo1,
            arith.xori(arith.xori(hi0, c3), k1),
            lo0,
        )
    return [c0, c1, c2, c3]


def emit_philox_word(index: ir.Value, seed: ir.Value, offset: ir.Value) -> ir.Value:
    """Random i32 word for linear element ``index`` (index type); seed/offset are i64."""
    idx = arith.index_castui(_i64(), index)
    idx.owner.attributes[INDEX_TAG] = ir.UnitAttr.get()
    block = arith.shrui(idx, _const_int(_i64(), 2))
    lane = arith.trunci(_i32(), arith.andi(idx, _const_int(_i64(), 3)))
    words = emit_philox4x32(
        [*_lo_hi32(block), *_lo_hi32(offset)], list(_lo_hi32(seed))
    )
    result = words[0]
    for n in (1, 2, 3):
        is_n = arith.cmpi(arith.CmpIPredicate.eq, lane, _const_int(_i32(), n))
        result = arith.select(is_n, words[n], result)
    result.owner.attributes[WORD_TAG] = ir.UnitAttr.get()
    return result


def emit_uniform(
    index: ir.Value,
    seed: ir.Value,
    offset: ir.Value,
    minval: ir.Value,
    maxval: ir.Value,
    float_type: ir.Type,
) -> ir.Value:
    """``minval + u * (maxval - minval)`` with ``u`` uniform in [0, 1), in f32 or f64.

    f32: ``u = (w >> 8) * 2**-24``; f64: ``u = w * 2**-32`` (both exact).  No
    fast-math flags are set, so backends must not contract mul+add into an FMA.
    """
    word = emit_philox_word(index, seed, offset)
    if float_type == ir.F32Type.get():
        bits, scale = arith.shrui(word, _const_int(_i32(), 8)), 2.0**-24
    elif float_type == ir.F64Type.get():
        bits, scale = word, 2.0**-32
    else:
        raise TypeError(f"emit_uniform supports f32/f64, got {float_type}")
    u = arith.mulf(
        arith.uitofp(float_type, bits),
        arith.constant(float_type, ir.FloatAttr.get(float_type, scale)),
    )
    return arith.addf(minval, arith.mulf(u, arith.subf(maxval, minval)))
