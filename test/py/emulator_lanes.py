"""The emulator's lockstep rules: a block's threads run together, each value one numpy array
over the block's threads (lanes). `gpu_emulator.py` runs kernels this way; the scalar rules
of `emulator_rules.py` stay the reference (ops without a rule here run lane by lane through
them, and the per-thread interpreter runs them with the race check off).

Values of a launch's body: integers (index, iN, i1) are uint64 arrays [lanes] holding the
unsigned N-bit value, as the scalar rules' Python ints; floats are arrays of the element
type; vectors are [lanes, n]; memrefs stay `MemRef`s (one for all lanes) or a list of one per
lane (a `memref.alloca` in a kernel). Ops compute on every lane; the lanes a region runs for
are `mask` (None: all), and only memory accesses, asserts and integer divisions look at it
(an inactive lane's value is never kept: `scf.if` and loops merge by mask)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from emulator_rules import (RACES, RULES, DeviceAssert, EmulationError, Kind, MemRef, maybe_kind, position,
                            storage_dtype_of)
from mlir import ir

MASKS = {w: np.uint64((1 << w) - 1) for w in range(1, 64)}
# Ops whose scalar rule has an effect per lane (memory, allocation): never run once for all lanes.
EFFECTS = {"memref.load", "memref.store", "vector.load", "vector.store", "memref.atomic_rmw", "memref.alloca",
           "memref.alloc", "gpu.alloc", "gpu.memset"}


# -- values over lanes ----------------------------------------------------------------------
def spread(value: Any, lanes: int) -> Any:
    """A value every lane holds (a host value, a constant) as lanes' values."""
    if isinstance(value, (MemRef, type(None), list)):
        return value
    if isinstance(value, tuple):
        row = np.array([int(v) for v in value], np.uint64) if isinstance(value[0], int) else np.array(value)
        return np.broadcast_to(row, (lanes, len(value)))
    if isinstance(value, int):
        return np.full(lanes, value, np.uint64)
    return np.full(lanes, value, type(value))


def lane(value: Any, t: int) -> Any:
    """Lane t's value as the scalar rules take it."""
    if isinstance(value, np.ndarray):
        x = value[t]
        if value.dtype == np.uint64:
            return tuple(int(v) for v in x) if value.ndim == 2 else int(x)
        return tuple(x) if value.ndim == 2 else x
    return value[t] if isinstance(value, list) else value


def gather(values: list[Any], kind: Kind | None, lanes: int, active: np.ndarray) -> Any:
    """Lanes' scalar results (`values[k]` is lane `active[k]`'s) as one value."""
    if not len(values):
        return None
    if isinstance(values[0], MemRef):
        if all(v is values[0] for v in values):
            return values[0]
        out = [None] * lanes
        for t, v in zip(active, values):
            out[t] = v
        return out
    if values[0] is None:
        return None
    dtype = np.uint64 if kind is None or kind.float is None else kind.float
    first = np.asarray(values[0] if not isinstance(values[0], int) else np.uint64(values[0]))
    out = np.zeros((lanes,) + first.shape, dtype)
    out[active] = np.array([np.array(v, dtype) if not isinstance(v, tuple) else
                            np.array([np.uint64(x) if isinstance(x, int) else x for x in v], dtype) for v in values])
    return out


def uniform(value: np.ndarray, mask: np.ndarray | None) -> Any:
    """The one value every active lane holds, or None."""
    on = value if mask is None else value[mask]
    if not len(on):
        return None
    first = on[0]
    return first if (on == first).all() else None


def where(mask: np.ndarray, a: Any, b: Any) -> Any:
    """Lanes in `mask` take a, the others b."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.where(mask if mask.ndim == a.ndim else mask[:, None], a, b)
    if a is b or b is None:
        return a
    if a is None:
        return b
    raise EmulationError("lanes of one value that is not a number (a memref) take different branches")


def active(mask: np.ndarray | None, lanes: int) -> np.ndarray:
    return np.arange(lanes) if mask is None else np.flatnonzero(mask)


# -- integers -------------------------------------------------------------------------------
def wrap(v: np.ndarray, width: int) -> np.ndarray:
    return v if width >= 64 else v & MASKS[width]


def signed(v: np.ndarray, width: int) -> np.ndarray:
    x = v.astype(np.int64)
    return x if width >= 64 else np.where((x >> (width - 1)) & 1 == 1, x - (1 << width), x)


def unsigned(x: np.ndarray, width: int) -> np.ndarray:
    return wrap(x.astype(np.uint64), width)


def _int(fn: Callable) -> Callable:
    return lambda p, vals, mask: [wrap(fn(p.kind.width, *vals).astype(np.uint64), p.kind.width)]


def _nonzero(divisor: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    zero = divisor == 0
    if (zero if mask is None else zero & mask).any():
        raise EmulationError("integer division by zero")
    return np.where(zero, 1, divisor)


def _division(fn: Callable, signs: bool) -> Callable:
    def rule(p, vals, mask):
        w = p.kind.width
        a, b = vals
        b = _nonzero(b, mask)
        if signs:
            a, b = signed(a, w), signed(b, w)
        return [unsigned(fn(a, b), w)]
    return rule


def _truncated(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a) // np.abs(b)
    return np.where((a >= 0) == (b >= 0), q, -q)


def _shift(fn: Callable) -> Callable:
    def rule(p, vals, mask):
        w = p.kind.width
        a, b = vals
        return [wrap(np.where(b < w, fn(a, np.minimum(b, np.uint64(63))), np.uint64(0)).astype(np.uint64), w)]
    return rule


def _shrsi(p, vals, mask):
    w = p.kind.width
    a, b = vals
    return [unsigned(signed(a, w) >> np.minimum(b, w - 1).astype(np.int64), w)]


_UNSIGNED_CMP = {0: np.equal, 1: np.not_equal, 6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}
_SIGNED_CMP = {2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal}


def _cmpi(p, vals, mask):
    predicate = p.attr("predicate")
    a, b = vals
    if predicate in _SIGNED_CMP:
        w = p.src.width
        return [_SIGNED_CMP[predicate](signed(a, w), signed(b, w)).astype(np.uint64)]
    return [_UNSIGNED_CMP[predicate](a, b).astype(np.uint64)]


def _cmpf(p, vals, mask):
    predicate = p.attr("predicate")
    a, b = vals
    if predicate in (0, 15):
        return [np.full(len(a), int(predicate == 15), np.uint64)]
    unordered = np.isnan(a) | np.isnan(b)
    base = {1: np.equal, 2: np.greater, 3: np.greater_equal, 4: np.less, 5: np.less_equal,
            6: np.not_equal, 7: None}[predicate if predicate <= 7 else predicate - 7]
    holds = np.ones(len(a), bool) if base is None else base(a, b)
    if predicate <= 7:
        return [(~unordered & holds).astype(np.uint64)]
    return [(unordered | holds).astype(np.uint64) if predicate != 14 else unordered.astype(np.uint64)]


# -- casts ----------------------------------------------------------------------------------
def _cast(fn: Callable) -> Callable:
    return lambda p, vals, mask: [fn(p.src, p.kind, vals[0])]


def _float_to_int(s: Kind, d: Kind, v: np.ndarray) -> np.ndarray:
    """Truncation toward zero (NaN and infinities give 0, as the scalar rule)."""
    f = v.astype(np.float64)
    ok = np.isfinite(f)
    return unsigned(np.where(ok, np.trunc(np.where(ok, f, 0)), 0).astype(np.int64), d.width)


def _bitcast(p, vals, mask):
    src, dst = p.src, p.kind
    v = vals[0]
    if src.float is None:
        raw = v.astype(np.int64).astype(storage_dtype_of(src))
    else:
        raw = v
    out = raw.view(storage_dtype_of(dst))
    return [out.astype(dst.float) if dst.float is not None else unsigned(out.astype(np.int64), dst.width)]


# -- floats ---------------------------------------------------------------------------------
def _float(fn: Callable) -> Callable:
    return lambda p, vals, mask: [np.asarray(fn(*vals)).astype(p.kind.float)]


def _math(fn: Callable) -> Callable:
    """Computed in float64 and rounded, as the scalar rules."""
    return lambda p, vals, mask: [np.asarray(fn(*(v.astype(np.float64) for v in vals))).astype(p.kind.float)]


def _each(fn: Callable) -> Callable:
    """A float64 function numpy lacks (erf, erfc), element by element."""
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda x: ufunc(x).astype(np.float64)


def _fma(p, vals, mask):
    a, b, c = (v.astype(np.float64) for v in vals)
    return [(a * b + c).astype(p.kind.float)]


# -- memory ---------------------------------------------------------------------------------
def _places(m: MemRef, idx: list[np.ndarray], on: np.ndarray) -> np.ndarray:
    """The storage places of the active lanes' indices (`on`), bounds-checked."""
    if m.host:
        raise EmulationError("a kernel (or memset) accesses host memory (a memref.global or memref.alloc of "
                             "the host code): on a GPU an illegal address")
    if len(idx) != len(m.sizes):
        raise EmulationError(f"{len(idx)} indices for a rank-{len(m.sizes)} memref")
    place = np.full(len(on), m.offset, np.int64)
    for i, n, s in zip(idx, m.sizes, m.strides):
        i = i[on]
        if (i >= np.uint64(n)).any():
            k = int(np.flatnonzero(i >= np.uint64(n))[0])
            raise EmulationError(f"index {[int(j[on][k]) for j in idx]} out of bounds of sizes {m.sizes}")
        place += i.astype(np.int64) * s
    return place


def _to_lanes(stored: np.ndarray, kind: Kind) -> np.ndarray:
    if kind.float is not None:
        return stored.astype(kind.float)
    return unsigned(stored.astype(np.int64), kind.width)


def _to_storage(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "iu":
        return v.astype(np.int64).astype(dtype) if v.dtype == np.uint64 else v.astype(dtype)
    if dtype.kind == "b":
        return v != 0
    return v.astype(dtype)


def _load(p, vals, mask, lanes):
    m, *idx = vals
    on = active(mask, lanes)
    place = _places(m, idx, on)
    RACES.access(m, place, on, False)
    out = np.zeros(lanes, p.kind.float or np.uint64)
    out[on] = _to_lanes(m.data[place], p.kind)
    return [out]


def _store(p, vals, mask, lanes):
    value, m, *idx = vals
    on = active(mask, lanes)
    place = _places(m, idx, on)
    RACES.access(m, place, on, True)
    m.data[place] = _to_storage(value[on], m.data.dtype)
    return []


def _vector_places(p, m: MemRef, idx: list[np.ndarray], n: int, on: np.ndarray) -> np.ndarray:
    """[active lanes, n] places of a vector access, bounds- and alignment-checked."""
    if m.strides and m.strides[-1] != 1:
        raise EmulationError("vector access along a strided dim")
    first = _places(m, idx, on)
    last = list(idx[:-1]) + [idx[-1] + np.uint64(n - 1)]
    _places(m, last, on)
    align = p.attr("alignment") or 1
    address = m.address + first * m.data.itemsize
    if (address % align).any():
        bad = int(address[np.flatnonzero(address % align)[0]])
        raise EmulationError(f"vector access at address {bad:#x} is not {align}-byte aligned")
    return first[:, None] + np.arange(n)


def _vload(p, vals, mask, lanes):
    m, *idx = vals
    n = ir.VectorType(p.op.results[0].type).shape[0]
    on = active(mask, lanes)
    places = _vector_places(p, m, idx, n, on)
    RACES.access(m, places.reshape(-1), np.repeat(on, n), False)
    out = np.zeros((lanes, n), p.kind.float or np.uint64)
    out[on] = _to_lanes(m.data[places], p.kind)
    return [out]


def _vstore(p, vals, mask, lanes):
    value, m, *idx = vals
    n = value.shape[1]
    on = active(mask, lanes)
    places = _vector_places(p, m, idx, n, on)
    RACES.access(m, places.reshape(-1), np.repeat(on, n), True)
    m.data[places] = _to_storage(value[on], m.data.dtype)
    return []


def _assert(p, vals, mask, lanes):
    if not (vals[0] if mask is None else vals[0][mask]).all():
        raise DeviceAssert(ir.StringAttr(p.op.attributes["msg"]).value)
    return []


def _select(p, vals, mask):
    c, a, b = vals
    if isinstance(a, np.ndarray):
        return [where(c != 0, a, b)]
    choice = uniform(c, mask)
    if choice is None:
        raise EmulationError("arith.select of memrefs with different conditions across lanes")
    return [a if choice else b]


def _intrinsic(p, vals, mask):
    """`llvm.nvvm.mulhi.ui` (the high word of a 32-bit product); None: another, lane by lane."""
    name = p.cache.get("intrin") or p.cache.setdefault("intrin", ir.StringAttr(p.op.attributes["intrin"]).value)
    if name != "llvm.nvvm.mulhi.ui" or p.kind.width > 32:
        return None
    return [(vals[0] * vals[1]) >> np.uint64(p.kind.width)]


def _inline_asm(p, vals, mask):
    """float32 `sqrt.rn` (correctly rounded); None: other asm, lane by lane (the scalar rule names it)."""
    asm = p.cache.get("asm") or p.cache.setdefault("asm", ir.StringAttr(p.op.attributes["asm_string"]).value)
    return [np.sqrt(vals[0])] if asm == "sqrt.rn.f32 $0, $1;" and vals[0].dtype == np.float32 else None


_MASKED: dict[str, Callable] = {  # rules that take the lane count (memory)
    "memref.load": _load, "memref.store": _store, "vector.load": _vload, "vector.store": _vstore,
    "cf.assert": _assert,
}

LANE_RULES: dict[str, Callable] = {
    "llvm.call_intrinsic": _intrinsic,
    "llvm.inline_asm": _inline_asm,
    "arith.addi": _int(lambda w, a, b: a + b),
    "arith.subi": _int(lambda w, a, b: a - b),
    "arith.muli": _int(lambda w, a, b: a * b),
    "arith.andi": _int(lambda w, a, b: a & b),
    "arith.ori": _int(lambda w, a, b: a | b),
    "arith.xori": _int(lambda w, a, b: a ^ b),
    "arith.maxui": _int(lambda w, a, b: np.maximum(a, b)),
    "arith.minui": _int(lambda w, a, b: np.minimum(a, b)),
    "arith.maxsi": _int(lambda w, a, b: unsigned(np.maximum(signed(a, w), signed(b, w)), w)),
    "arith.minsi": _int(lambda w, a, b: unsigned(np.minimum(signed(a, w), signed(b, w)), w)),
    "arith.divui": _division(lambda a, b: a // b, False),
    "arith.remui": _division(lambda a, b: a % b, False),
    "arith.ceildivui": _division(lambda a, b: a // b + (a % b != 0), False),
    "arith.divsi": _division(_truncated, True),
    "arith.remsi": _division(lambda a, b: a - _truncated(a, b) * b, True),
    "arith.ceildivsi": _division(lambda a, b: -((-a) // b), True),
    "arith.floordivsi": _division(lambda a, b: a // b, True),
    "arith.shli": _shift(np.left_shift),
    "arith.shrui": _shift(np.right_shift),
    "arith.shrsi": _shrsi,
    "arith.cmpi": _cmpi,
    "arith.cmpf": _cmpf,
    "arith.select": _select,
    "arith.index_cast": _cast(lambda s, d, v: unsigned(signed(v, s.width), d.width) if s.width < d.width
                              else wrap(v, d.width)),
    "arith.index_castui": _cast(lambda s, d, v: wrap(v, d.width)),
    "arith.extsi": _cast(lambda s, d, v: unsigned(signed(v, s.width), d.width)),
    "arith.extui": _cast(lambda s, d, v: v),
    "arith.trunci": _cast(lambda s, d, v: wrap(v, d.width)),
    "arith.sitofp": _cast(lambda s, d, v: signed(v, s.width).astype(d.float)),
    "arith.uitofp": _cast(lambda s, d, v: v.astype(d.float)),
    "arith.fptosi": _cast(_float_to_int),
    "arith.fptoui": _cast(_float_to_int),
    "arith.extf": _cast(lambda s, d, v: v.astype(d.float)),
    "arith.truncf": _cast(lambda s, d, v: v.astype(d.float)),
    "arith.bitcast": _bitcast,
    "arith.addf": _float(np.add),
    "arith.subf": _float(np.subtract),
    "arith.mulf": _float(np.multiply),
    "arith.divf": _float(np.divide),
    "arith.remf": _float(np.fmod),
    "arith.maximumf": _float(np.maximum),
    "arith.minimumf": _float(np.minimum),
    "arith.maxnumf": _float(np.fmax),
    "arith.minnumf": _float(np.fmin),
    "arith.negf": _float(np.negative),
    "math.absf": _float(np.abs),
    "math.fma": _fma,
    "math.exp": _math(np.exp),
    "math.exp2": _math(np.exp2),
    "math.expm1": _math(np.expm1),
    "math.log": _math(np.log),
    "math.log1p": _math(np.log1p),
    "math.log2": _math(np.log2),
    "math.log10": _math(np.log10),
    "math.tanh": _math(np.tanh),
    "math.erf": _math(_each(math.erf)),
    "math.erfc": _math(_each(math.erfc)),
    "math.sqrt": _math(np.sqrt),
    "math.rsqrt": _math(lambda x: 1 / np.sqrt(x)),
    "math.sin": _math(np.sin),
    "math.cos": _math(np.cos),
    "math.tan": _math(np.tan),
    "math.floor": _math(np.floor),
    "math.ceil": _math(np.ceil),
    "math.trunc": _math(np.trunc),
    "math.roundeven": _math(np.rint),
    "math.atan2": _math(np.arctan2),
    "math.powf": _math(np.power),
    "math.copysign": _math(np.copysign),
    "vector.extract": lambda p, vals, mask: [vals[0][:, position(p)]],
    "vector.from_elements": lambda p, vals, mask: [np.stack(vals, axis=1)],
    "vector.broadcast": lambda p, vals, mask: [np.repeat(vals[0][:, None],
                                                         ir.VectorType(p.op.results[0].type).shape[0], axis=1)],
}


def run_op(p, vals: list[Any], mask: np.ndarray | None, lanes: int) -> list[Any]:
    """One op for the active lanes: its lockstep rule (which may return None: not for these
    operands); else, for an op without effects whose
    operands every active lane holds alike, its scalar rule once; else lane by lane."""
    rule = LANE_RULES.get(p.name)
    results = None if rule is None else rule(p, vals, mask)
    if results is not None:
        return results
    rule = _MASKED.get(p.name)
    if rule is not None and not any(isinstance(v, list) for v in vals):
        return rule(p, vals, mask, lanes)
    on = active(mask, lanes)
    if not len(on):
        return [None] * len(p.outs)
    if p.name not in EFFECTS:
        one = [v if not isinstance(v, np.ndarray) else uniform(v, mask) for v in vals]
        if not any(o is None and isinstance(v, np.ndarray) for o, v in zip(one, vals)) and \
                not any(isinstance(v, list) for v in vals):
            t = int(on[0])
            results = RULES[p.name](p, [lane(v, t) for v in vals])
            return [r if isinstance(r, MemRef) or r is None else spread(r, lanes) for r in results]
    per_lane: list[list[Any]] = [[] for _ in p.outs]
    for t in on:
        RACES.thread = int(t)
        for k, r in enumerate(RULES[p.name](p, [lane(v, int(t)) for v in vals])):
            per_lane[k].append(r)
    kinds = [maybe_kind(r.type) for r in p.op.results]
    return [gather(values, kind, lanes, on) for values, kind in zip(per_lane, kinds)]
