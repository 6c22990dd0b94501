"""Accuracy tests for mlirfuse.lowering.approx (JIT-compiled through the CPU pipeline).

Each emitter is wrapped in ``f(%in, %out)`` looping over a memref, lowered to
LLVM, JIT-compiled and compared in ulps against a float64 numpy reference.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import math
import pathlib
import re
from typing import Callable

import numpy as np
import pytest

import mlir.runtime
from mlir import ir, passmanager
from mlir.dialects import arith, func, memref, scf
from mlir.dialects import math as mmath
from mlir.execution_engine import ExecutionEngine

try:
    approx = importlib.import_module("mlirfuse.lowering.approx")
except Exception:  # package __init__ broken or not importable: load the file directly
    _path = pathlib.Path(__file__).resolve().parents[2] / "mlirfuse" / "lowering" / "approx.py"
    _spec = importlib.util.spec_from_file_location("mlirfuse_lowering_approx", _path)
    approx = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(approx)

PIPELINE = (
    "builtin.module(convert-scf-to-cf, convert-math-to-llvm, convert-math-to-libm, "
    "expand-strided-metadata, lower-affine, finalize-memref-to-llvm, "
    "convert-arith-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, "
    "reconcile-unrealized-casts)"
)
MAX_ULP = 4.0
F32_MAX = float(np.finfo(np.float32).max)


def _build(emit: Callable[[ir.Value], ir.Value]) -> ir.Module:
    """func.func @f(%in, %out: memref<?xf32>): out[i] = emit(in[i])."""
    module = ir.Module.create()
    f32 = ir.F32Type.get()
    mt = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], f32)
    index = ir.IndexType.get()
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp("f", ([mt, mt], []))
        fn.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        with ir.InsertionPoint(fn.add_entry_block()):
            src, dst = fn.arguments
            c0 = arith.constant(index, 0)
            c1 = arith.constant(index, 1)
            loop = scf.ForOp(c0, memref.dim(src, c0), c1)
            with ir.InsertionPoint(loop.body):
                i = loop.induction_variable
                memref.store(emit(memref.load(src, [i])), dst, [i])
                scf.yield_([])
            func.return_([])
    return module


def _lower(module: ir.Module) -> ir.Module:
    passmanager.PassManager.parse(PIPELINE).run(module.operation)
    return module


def _memref_arg(arr: np.ndarray) -> ctypes.pointer:
    return ctypes.pointer(ctypes.pointer(mlir.runtime.get_ranked_memref_descriptor(arr)))


def run(emit: Callable[[ir.Value], ir.Value], x: np.ndarray) -> np.ndarray:
    """JIT-compile ``emit`` in a loop and apply it to float32 array ``x``."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    with ir.Context(), ir.Location.unknown():
        engine = ExecutionEngine(_lower(_build(emit)), opt_level=3)
        engine.initialize()
        engine.invoke("f", _memref_arg(x), _memref_arg(out))
    return out


def lowered_ir(emit: Callable[[ir.Value], ir.Value]) -> str:
    with ir.Context(), ir.Location.unknown():
        return str(_lower(_build(emit)))


def ulp_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in float32 ulps at ref (ref in float64, finite in f32)."""
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / ulp


def check(name: str, x: np.ndarray, ref_fn: Callable[[np.ndarray], np.ndarray],
          max_ulp: float = MAX_ULP) -> float:
    """Run approximation ``name`` on x; finite refs within max_ulp, overflowing
    refs must be +-inf.  Returns the max ulp error."""
    x = np.asarray(x, dtype=np.float32)
    got = run(approx.APPROXIMATIONS[name], x)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    big = np.abs(ref) > F32_MAX * (1 + 2.0**-25)  # rounds to inf in f32
    np.testing.assert_array_equal(got[big], np.sign(ref[big]) * np.inf)
    err = ulp_error(got[~big], ref[~big])
    worst = int(np.argmax(err)) if err.size else 0
    assert err.size == 0 or err[worst] <= max_ulp, (
        f"{name}: {err[worst]:.2f} ulp at x={x[~big][worst]!r}: "
        f"got {got[~big][worst]!r}, want {ref[~big][worst]!r}")
    return float(err.max()) if err.size else 0.0


def special(name: str, x: list[float], want: list[float]) -> None:
    got = run(approx.APPROXIMATIONS[name], np.array(x, dtype=np.float32))
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32), err_msg=name)


def f32_linspace(lo: float, hi: float, n: int = 1_000_001) -> np.ndarray:
    return np.linspace(lo, hi, n).astype(np.float32)


def f32_logspace(lo: float, hi: float, n: int = 400_001, sign: float = 1.0) -> np.ndarray:
    return (sign * np.logspace(lo, hi, n)).astype(np.float32)


def rand_f32(lo: float, hi: float, n: int = 1_000_000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(np.float32)


SMALL = np.concatenate([f32_logspace(-30, 0, 100_001), f32_logspace(-30, 0, 100_001, -1.0)])
INF, NAN = math.inf, math.nan
v_erf = np.vectorize(math.erf, otypes=[np.float64])


def sigmoid_ref(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


# ---------------------------------------------------------------------------


# LLVM intrinsics that the x86 backend turns into libm calls (expf, sinf, ...).
LIBM_INTRINSICS = re.compile(
    r"llvm\.intr\.(exp|exp2|exp10|log|log2|log10|sin|cos|tan|pow|powi|sinh|cosh|tanh)\b")
LIBM_SYMBOLS = ("expf", "exp2f", "expm1f", "logf", "log2f", "log1pf", "tanhf", "erff",
                "sinf", "cosf", "fmaf", "floorf", "roundevenf", "copysignf", "fabsf")


def called(text: str) -> set[str]:
    """Callees in lowered LLVM-dialect IR, minus the C-interface wrapper's call to @f."""
    return set(re.findall(r"llvm\.call @([\w.$]+)", text)) - {"f"}


def object_symbols(emit: Callable[[ir.Value], ir.Value], path: pathlib.Path) -> set[str]:
    """libm symbol names present in the JIT-compiled object code."""
    with ir.Context(), ir.Location.unknown():
        engine = ExecutionEngine(_lower(_build(emit)), opt_level=3, enable_object_dump=True)
        engine.initialize()
        engine.dump_to_object_file(str(path))
    data = path.read_bytes()
    return {s for s in LIBM_SYMBOLS if b"\0" + s.encode() + b"\0" in data}


def test_no_libm_calls(tmp_path: pathlib.Path):
    text = lowered_ir(approx.exp)
    assert "expf" not in text and not called(text) and not LIBM_INTRINSICS.search(text)
    assert not object_symbols(approx.exp, tmp_path / "exp.o")
    for name, emit in approx.APPROXIMATIONS.items():
        text = lowered_ir(emit)
        assert not called(text) and not LIBM_INTRINSICS.search(text), name
    # Sanity: plain math.exp becomes llvm.intr.exp, which the backend turns into expf.
    assert LIBM_INTRINSICS.search(lowered_ir(mmath.exp))
    assert object_symbols(mmath.exp, tmp_path / "libm.o") == {"expf"}


def test_exp():
    check("exp", np.concatenate([f32_linspace(-100, 100), rand_f32(-104, 89), SMALL]), np.exp)
    special("exp", [-INF, INF, NAN, 0.0, -0.0, 88.73, -103.0, -104.0, 1000.0, -1000.0],
            [0.0, INF, NAN, 1.0, 1.0, INF, 1.4e-45, 0.0, INF, 0.0])


def test_exp2():
    check("exp2", np.concatenate([f32_linspace(-160, 130), rand_f32(-150, 128), SMALL]), np.exp2)
    special("exp2", [-INF, INF, NAN, 0.0, 1.0, 10.0, -149.0, -150.5, 127.0, 128.0],
            [0.0, INF, NAN, 1.0, 2.0, 1024.0, 2.0**-149, 0.0, 2.0**127, INF])


def test_expm1():
    check("expm1", np.concatenate([f32_linspace(-100, 100), rand_f32(-2, 2), SMALL]), np.expm1)
    special("expm1", [-INF, INF, NAN, 0.0, -0.0, 1e-30, 89.0, 1.4e-45, -1.4e-45],
            [-1.0, INF, NAN, 0.0, -0.0, np.float32(1e-30), INF, 1.4e-45, -1.4e-45])


POS = np.concatenate([f32_logspace(-45.8, 30), rand_f32(0, 1e30), rand_f32(0.5, 2.0),
                      1 + f32_logspace(-7, -1, 10_001), 1 - f32_logspace(-8, -1, 10_001)])


def test_log():
    check("log", POS, np.log)
    special("log", [0.0, -0.0, -1.0, -INF, INF, NAN, 1.0, 1.4e-45],
            [-INF, -INF, NAN, NAN, INF, NAN, 0.0, np.log(2.0**-149)])


def test_log2():
    check("log2", POS, np.log2)
    special("log2", [0.0, -1.0, INF, NAN, 1.0, 8.0, 2.0**-149, 0.5],
            [-INF, NAN, INF, NAN, 0.0, 3.0, -149.0, -1.0])


def test_log1p():
    x = np.concatenate([POS, SMALL, -1 + f32_logspace(-7.3, -0.1, 100_001), rand_f32(-1, 1)])
    check("log1p", x[x > -1], np.log1p)
    special("log1p", [-1.0, -2.0, -INF, INF, NAN, 0.0, -0.0, 1e-30, 1.4e-45],
            [-INF, NAN, NAN, INF, NAN, 0.0, -0.0, np.float32(1e-30), 1.4e-45])


SYM = np.concatenate([f32_linspace(-20, 20), rand_f32(-5, 5), SMALL])


def test_tanh():
    check("tanh", SYM, np.tanh)
    special("tanh", [-INF, INF, NAN, 0.0, -0.0, 20.0, -20.0, 1e-30],
            [-1.0, 1.0, NAN, 0.0, -0.0, 1.0, -1.0, np.float32(1e-30)])


def test_sigmoid():
    check("sigmoid", np.concatenate([SYM, f32_linspace(-100, 100)]), sigmoid_ref)
    special("sigmoid", [-INF, INF, NAN, 0.0, 20.0, -200.0],
            [0.0, 1.0, NAN, 0.5, 1.0, 0.0])


def test_erf():
    check("erf", SYM, v_erf)
    special("erf", [-INF, INF, NAN, 0.0, -0.0, 4.0, -10.0],
            [-1.0, 1.0, NAN, 0.0, -0.0, 1.0, -1.0])


# Float32 values closest to multiples of pi/2: the hardest cases for range reduction.
_K = np.arange(-6366, 6367, dtype=np.float64)
NEAR_PIO2 = (_K * (np.pi / 2)).astype(np.float32)
TRIG = np.concatenate([f32_linspace(-1e4, 1e4, 2_000_001), rand_f32(-1e4, 1e4), rand_f32(-4, 4),
                       SMALL, NEAR_PIO2, np.nextafter(NEAR_PIO2, np.float32(np.inf))])


@pytest.mark.parametrize("name, ref", [("sin", np.sin), ("cos", np.cos)])
def test_sin_cos(name: str, ref: Callable[[np.ndarray], np.ndarray]):
    check(name, TRIG, ref)
    special(name, [INF, -INF, NAN, 0.0], [NAN, NAN, NAN, 0.0 if name == "sin" else 1.0])
    if name == "sin":
        special(name, [-0.0, 1e-30], [-0.0, np.float32(1e-30)])


# Past 1e6 a float32 Cody-Waite reduction fell apart (~13000 ulp at 1e7; sin(2^31) = -7.1e9,
# cos(1e30) = -inf): the whole float32 range, both signs, and integers near powers of two.
WIDE = np.concatenate([f32_logspace(-30, 38.5, 400_001), f32_logspace(-30, 38.5, 400_001, -1.0),
                       np.float32(2.0) ** np.arange(20, 128, dtype=np.float32),
                       np.nextafter(np.float32(2.0) ** np.arange(20, 128, dtype=np.float32), np.float32(0)),
                       np.array([np.finfo(np.float32).max, -np.finfo(np.float32).max, 2**31 - 1], np.float32)])


@pytest.mark.parametrize("name, ref", [("sin", np.sin), ("cos", np.cos)])
def test_sin_cos_over_the_float32_range(name: str, ref: Callable[[np.ndarray], np.ndarray]):
    check(name, WIDE, ref)
