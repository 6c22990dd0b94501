"""Philox4x32-10: numpy reference vs. known answers, and MLIR (CPU) vs. numpy bit for bit."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

import mlir.runtime
from mlir import ir, passmanager
from mlir.dialects import arith, func, memref, scf
from mlir.execution_engine import ExecutionEngine

from mlirfuse import reference_philox as ref
from mlirfuse.lowering import philox

# Random123 tests/kat_vectors (github.com/DEShawResearch/random123):
# (rounds, counter, key, expected).  The 7-round lines pin down the key schedule too.
KAT_VECTORS = [
    (10, (0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (10, (0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        10,
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
    (7, (0, 0, 0, 0), (0, 0), (0x5F6FB709, 0x0D893F64, 0x4F121F81, 0x4F730A48)),
    (7, (0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x5207DDC2, 0x45165E59, 0x4D8EE751, 0x8C52F662)),
    (
        7,
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0x4DFCCABA, 0x190A87F0, 0xC47362BA, 0xB6B5242A),
    ),
]

SEEDS = [0, 1, 42, 0xDEADBEEF, 2**32 + 5, 2**63 - 1, -1, -(2**63)]
OFFSETS = [0, 3, 2**32, 2**40 + 12345, -1]
SIZES = [1, 3, 7, 1001]

LOWERING = (
    "builtin.module(convert-scf-to-cf, expand-strided-metadata, finalize-memref-to-llvm, "
    "convert-arith-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, reconcile-unrealized-casts)"
)


# ---------------------------------------------------------------- numpy reference


@pytest.mark.parametrize("rounds,counter,key,expected", KAT_VECTORS)
def test_reference_known_answers(rounds, counter, key, expected) -> None:
    out = ref.philox4x32(counter, key, rounds=rounds)
    assert [int(w) for w in out] == list(expected)


def test_reference_counter_layout() -> None:
    """Element i is word i%4 of philox((lo(i//4), hi(i//4), lo(o), hi(o)), (lo(s), hi(s)))."""
    seed, offset = 0x0123456789ABCDEF, 0xFEDCBA9876543210
    idx = np.array([0, 1, 2, 3, 4, 7, 2**34 + 6, 2**64 - 1], dtype=np.uint64)
    got = ref.philox_words(idx, seed, offset)
    for i, w in zip(idx.tolist(), got.tolist()):
        b = i // 4
        ctr = (b & 0xFFFFFFFF, b >> 32, offset & 0xFFFFFFFF, offset >> 32)
        words = ref.philox4x32(ctr, (seed & 0xFFFFFFFF, seed >> 32))
        assert w == int(words[i % 4])
    # Negative int64 seeds/offsets are their uint64 bit patterns.
    assert np.array_equal(ref.philox_words(idx, -1, -2), ref.philox_words(idx, 2**64 - 1, 2**64 - 2))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_reference_half_types_round_from_f32(dtype) -> None:
    f32 = ref.uniform((5, 7), 3, 9, -1.0, 2.0, np.float32)
    half = ref.uniform((5, 7), 3, 9, -1.0, 2.0, dtype)
    assert half.dtype == np.dtype(dtype) and half.shape == (5, 7)
    rounded = f32.astype(dtype)
    rounded[rounded == dtype(2.0)] = dtype(-1.0)  # a value rounding to maxval is minval
    assert np.array_equal(half.view(np.uint16), rounded.view(np.uint16))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32])
@pytest.mark.parametrize("minval,maxval", [(0.0, 1.0), (-1.5, 3.7)])
def test_uniform_stays_below_maxval_in_its_type(dtype, minval, maxval) -> None:
    """Values that round to maxval in the result's type (near the top in half precision:
    about one in 2**12 for [0, 1) in float16) are minval, as torch's uniform_ makes them:
    every value is below maxval as that type holds it, on the CPU backend and in the
    reference, bit for bit."""
    import mlirfuse
    from mlirfuse import ops

    n = 1 << 16
    got = mlirfuse.jit(lambda: ops.uniform(minval, maxval, [n], 7, 0, dtype=dtype), backend="cpu")()
    # (Python bounds are constants of the result's type: 3.7 is 3.69921875 in float16)
    lo, top = np.asarray([minval, maxval], np.float32).astype(dtype)
    want = ref.uniform((n,), 7, 0, float(lo), float(top), dtype)
    assert got.dtype == np.dtype(dtype) and np.array_equal(got.view(np.uint8), want.view(np.uint8))
    assert np.all(got < top) and np.all(got >= lo)
    if dtype == np.float16:
        raw = (ref.uniform((n,), 7, 0, float(lo), float(top), np.float32)).astype(dtype)
        assert np.count_nonzero(raw == top) > 0  # the case the rule is for does occur here


# ---------------------------------------------------------------- MLIR on CPU


def _lower_and_jit(module: ir.Module) -> ExecutionEngine:
    passmanager.PassManager.parse(LOWERING).run(module.operation)
    engine = ExecutionEngine(module, opt_level=3)
    engine.initialize()
    return engine


def _build_func(
    name: str, elem_type: ir.Type, extra_args: list[ir.Type], body: Callable[..., ir.Value]
) -> None:
    """func @name(%out: memref<?xT>, *extra_args) { for i: out[i] = body(i, *args) }."""
    memref_type = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], elem_type)
    fn = func.FuncOp(name, ([memref_type, *extra_args], []))
    fn.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    entry = fn.add_entry_block()
    with ir.InsertionPoint(entry):
        out, *args = entry.arguments
        c0 = arith.constant(ir.IndexType.get(), 0)
        c1 = arith.constant(ir.IndexType.get(), 1)
        loop = scf.ForOp(c0, memref.dim(out, c0), c1)
        with ir.InsertionPoint(loop.body):
            i = loop.induction_variable
            memref.store(body(i, *args), out, [i])
            scf.yield_([])
        func.ReturnOp([])


def _run_uniform(
    dtype: type, minval: float, maxval: float, cases: list[tuple[int, int, int]]
) -> list[np.ndarray]:
    """JIT `f(%out: memref<?xT>, %seed: i64, %offset: i64)` once; run it for each (n, seed, offset)."""
    results = []
    with ir.Context(), ir.Location.unknown():
        ft = ir.F32Type.get() if dtype == np.float32 else ir.F64Type.get()
        i64 = ir.IntegerType.get_signless(64)
        module = ir.Module.create()

        def body(i: ir.Value, seed: ir.Value, offset: ir.Value) -> ir.Value:
            lo = arith.constant(ft, ir.FloatAttr.get(ft, minval))
            hi = arith.constant(ft, ir.FloatAttr.get(ft, maxval))
            return philox.emit_uniform(i, seed, offset, lo, hi, ft)

        with ir.InsertionPoint(module.body):
            _build_func("f", ft, [i64, i64], body)
        assert module.operation.verify()
        engine = _lower_and_jit(module)
        for n, seed, offset in cases:
            arr = np.full(n, np.nan, dtype=dtype)
            desc = mlir.runtime.get_ranked_memref_descriptor(arr)
            engine.invoke(
                "f",
                ctypes.pointer(ctypes.pointer(desc)),
                ctypes.pointer(ctypes.c_int64(seed)),
                ctypes.pointer(ctypes.c_int64(offset)),
            )
            results.append(arr)
    return results


def _run_words(cases: list[tuple[int, int, int, int]]) -> list[np.ndarray]:
    """JIT `words(%out: memref<?xi32>, %start: index, %seed, %offset)`: out[i] = word(start + i)."""
    results = []
    with ir.Context(), ir.Location.unknown():
        i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
        module = ir.Module.create()

        def body(i: ir.Value, start: ir.Value, seed: ir.Value, offset: ir.Value) -> ir.Value:
            return philox.emit_philox_word(arith.addi(start, i), seed, offset)

        with ir.InsertionPoint(module.body):
            _build_func("words", i32, [ir.IndexType.get(), i64, i64], body)
        assert module.operation.verify()
        engine = _lower_and_jit(module)
        for n, start, seed, offset in cases:
            arr = np.zeros(n, dtype=np.uint32)
            desc = mlir.runtime.get_ranked_memref_descriptor(arr)
            engine.invoke(
                "words",
                ctypes.pointer(ctypes.pointer(desc)),
                ctypes.pointer(ctypes.c_int64(np.uint64(start).astype(np.int64))),
                ctypes.pointer(ctypes.c_int64(seed)),
                ctypes.pointer(ctypes.c_int64(offset)),
            )
            results.append(arr)
    return results


def test_mlir_words_match_reference() -> None:
    # Starts past 2**34 make hi32(i // 4) nonzero; 2**64 - 8 exercises the top of the index range.
    cases = [
        (n, start, seed, offset)
        for n, start in [(7, 0), (13, 5), (9, 2**34 - 3), (8, 2**64 - 8)]
        for seed in SEEDS[::2]
        for offset in OFFSETS[::2]
    ]
    for (n, start, seed, offset), got in zip(cases, _run_words(cases)):
        idx = np.uint64(start) + np.arange(n, dtype=np.uint64)
        want = ref.philox_words(idx, seed, offset)
        assert np.array_equal(got, want), (n, start, seed, offset)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("minval,maxval", [(0.0, 1.0), (-2.5, 7.25), (1e-3, 3e-3)])
def test_mlir_uniform_bit_exact(dtype, minval, maxval) -> None:
    cases = [(n, s, o) for n in SIZES for s in SEEDS for o in OFFSETS]
    uint = np.uint32 if dtype == np.float32 else np.uint64
    for (n, seed, offset), got in zip(cases, _run_uniform(dtype, minval, maxval, cases)):
        want = ref.uniform((n,), seed, offset, minval, maxval, dtype)
        assert got.dtype == want.dtype
        assert np.array_equal(got.view(uint), want.view(uint)), (n, seed, offset)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mlir_uniform_statistics(dtype) -> None:
    n = 1 << 17
    (a, b) = _run_uniform(dtype, 0.0, 1.0, [(n, 1234, 0), (n, 1234, 1)])
    for x in (a, b):
        assert np.all((x >= 0.0) & (x < 1.0))
        assert abs(x.mean() - 0.5) < 0.005  # sigma of the mean ~ 0.0008
        assert abs(x.var() - 1.0 / 12.0) < 0.002
        counts = np.histogram(x, bins=16, range=(0.0, 1.0))[0]
        assert np.all(np.abs(counts - n / 16) < 6 * np.sqrt(n / 16))  # ~6 sigma
    # Different offsets give different, uncorrelated streams.
    assert not np.array_equal(a, b)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.02
