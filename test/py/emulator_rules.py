"""The values and op rules of the GPU-stage emulator (`gpu_emulator.py`): scalar kinds,
memrefs over numpy storage (bounds-checked, fresh ones full of NaN or a garbage pattern,
vector accesses alignment-checked), and one rule per arith/math/memref/vector op.

A rule takes the prepared op `p` (its result kind `p.kind`, operand kind `p.src`, the
`ir.Operation` `p.op`, cached attributes `p.attr(name)`) and the operands' values, and
returns the results' values. Integers are Python ints held as unsigned N-bit values; floats
are numpy scalars of the element type (so float32 math rounds as float32); transcendental
functions are computed in float64 and rounded (the GPU's libdevice is within 2 ulp of that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import ml_dtypes
import numpy as np
from mlir import ir

FLOATS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
          "f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2}
_INTS = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "index": np.int64}


class EmulationError(AssertionError):
    """The kernel did something a GPU would do wrong or undefined (out of bounds, deadlock)."""


class DeviceAssert(Exception):
    """A kernel's `cf.assert` failed: on a GPU, CUDA's device-side assert (`__assertfail`)."""


# -- scalar types -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kind:
    float: Any = None  # numpy scalar type of a float
    width: int = 0  # integer width (index: 64)

    def of(self, v: Any) -> Any:
        if self.float is not None:
            return self.float(v)
        return int(v) & ((1 << self.width) - 1)

    def signed(self, v: int) -> int:
        return v - (1 << self.width) if v >> (self.width - 1) & 1 else v


def kind_of(t: ir.Type) -> Kind:
    if isinstance(t, ir.VectorType):
        t = t.element_type
    s = str(t)
    if s in FLOATS:
        return Kind(float=FLOATS[s])
    if s == "index":
        return Kind(width=64)
    if s.startswith("i"):
        return Kind(width=int(s[1:]))
    raise EmulationError(f"no scalar kind for {s}")


def maybe_kind(t: ir.Type) -> Kind | None:
    """The scalar kind of a scalar or vector type; None for memrefs and others."""
    try:
        return kind_of(t)
    except EmulationError:
        return None


def storage_dtype(t: ir.Type) -> Any:
    s = str(t)
    if s in FLOATS:
        return FLOATS[s]
    if s in _INTS:
        return _INTS[s]
    if s == "i1":
        return np.bool_
    raise EmulationError(f"no storage for {s}")


# -- memrefs ------------------------------------------------------------------------------------
@dataclass
class MemRef:
    data: np.ndarray  # flat storage shared by views
    address: int  # the aligned pointer (bytes) of data[0]
    offset: int
    sizes: list[int]
    strides: list[int]
    host: bool = False  # host memory (a memref.global, a host memref.alloc): no kernel may read or write it
    device: bool = False  # device memory (gpu.alloc): host code may not read or write it

    def at(self, idx: list[int]) -> int:
        if self.host and IN_KERNEL[0]:
            raise EmulationError("a kernel (or memset) accesses host memory (a memref.global or memref.alloc of "
                                 "the host code): on a GPU an illegal address")
        if self.device and not IN_KERNEL[0]:
            raise EmulationError("host code accesses device memory (a gpu.alloc buffer): on a GPU the host "
                                 "process faults")
        return self.element(idx)

    def element(self, idx: list[int]) -> int:
        """The place of `idx` in `data`, bounds-checked; no access (a subview's offset)."""
        if len(idx) != len(self.sizes):
            raise EmulationError(f"{len(idx)} indices for a rank-{len(self.sizes)} memref")
        for i, n in zip(idx, self.sizes):
            if not 0 <= i < n:
                raise EmulationError(f"index {idx} out of bounds of sizes {self.sizes}")
        return self.offset + sum(i * s for i, s in zip(idx, self.strides))

    def view(self, sizes: list[int], strides: list[int] | None = None, offset: int | None = None) -> "MemRef":
        return MemRef(self.data, self.address, self.offset if offset is None else offset, list(sizes),
                      contiguous_strides(sizes) if strides is None else list(strides), self.host, self.device)


def contiguous_strides(sizes: list[int]) -> list[int]:
    strides, step = [], 1
    for n in reversed(sizes):
        strides.append(step)
        step *= n
    return list(reversed(strides))


_next_address = [1 << 20]
IN_KERNEL = [False]  # set while a gpu.launch runs


class Races:
    """Data races within a launch: accesses to one element of global or shared memory by two
    threads, at least one a write, with nothing ordering them. The emulator runs a block's
    threads in lockstep (or, per thread, one after another between barriers), so a race gives
    it one of the orders a GPU may take and no wrong value to show (GPU fuzz seed 780106:
    threads loaded a row's argmax before the row's lane 0 had stored it, which the emulator's
    order hid). Ordered: accesses of one thread; accesses of one block on either side of a
    barrier (`epoch`); accesses of one warp's lanes on either side of a shuffle of the whole
    warp (`warp_epochs`: the values shuffled carry what the lanes read before it, as a
    reduction's lanes read its initial value, which its lane 0 then overwrites); another
    block's writes read by a block that has done an atomic since (the column reductions' last
    block, which reads the others' partials after their fences and its counter's increment).
    Atomics are not tracked (they do not race with each other).

    Per buffer and element, the last write and the last read are kept as (block, thread,
    epoch, warp epoch) in numpy arrays (block -1: none; thread `-1 - warp`: several threads
    of that warp read it in that epoch, `SEVERAL_WARPS`: several warps), and an access of
    many threads (a lockstep op) is checked at once."""

    def __init__(self) -> None:
        self.on = True
        self.launch()

    def launch(self) -> None:
        self.block, self.thread, self.epoch = 0, 0, 0
        self.warp_epochs = np.zeros(1, np.int64)  # warp -> full-warp shuffles so far (this block)
        self.state: dict[int, np.ndarray] = {}  # id(storage) -> [8, elements]: write then read records
        self.acquired: set[int] = set()  # blocks that did an atomic
        self.buffers: dict[int, np.ndarray] = {}  # kept alive: their ids name them for the launch

    def start_block(self, block: int, threads: int = 1) -> None:
        self.block, self.epoch = block, 0
        self.warp_epochs = np.zeros(max(1, -(-threads // 32)), np.int64)

    def read(self, m: "MemRef", elements: Any) -> None:
        """One thread's (`self.thread`) read of `elements` of `m`'s storage."""
        self.access(m, np.asarray(elements, np.int64), np.full(len(elements), self.thread, np.int64), False)

    def write(self, m: "MemRef", elements: Any) -> None:
        self.access(m, np.asarray(elements, np.int64), np.full(len(elements), self.thread, np.int64), True)

    def _records(self, m: "MemRef") -> np.ndarray:
        key = id(m.data)
        if key not in self.state:
            self.buffers[key] = m.data
            records = np.zeros((8, m.data.size), np.int64)
            records[0] = records[4] = -1
            self.state[key] = records
        return self.state[key]

    def _unordered(self, then: np.ndarray, threads: np.ndarray, warp_epochs: np.ndarray) -> np.ndarray:
        """Which earlier accesses (`then`: [4, n] records) race with this block's threads' now:
        by another thread of this block between the same barriers, not on either side of a
        shuffle of their warp; or another block's where this block has done no atomic since."""
        block, who, epoch, warp_epoch = then
        present = block >= 0
        if not present.any():  # (nothing of this launch accessed these elements)
            return present
        other = present & (block != self.block) & (self.block not in self.acquired)
        now = (block == self.block) & (epoch == self.epoch)  # this block's, since its last barrier
        if not now.any():
            return other
        warp = np.where(who >= 0, who // 32, np.where(who == SEVERAL_WARPS, -1, -1 - who))
        same = now & (who != threads) & ((warp != threads // 32) | (warp_epoch == warp_epochs))
        return same | other

    def access(self, m: "MemRef", elements: np.ndarray, threads: np.ndarray, writing: bool) -> None:
        """Check the accesses (element `elements[k]` by thread `threads[k]`, in the threads'
        order) against the last write (and, writing, the last read, and each other), then
        record them."""
        if not (IN_KERNEL[0] and self.on) or not len(elements):
            return
        records = self._records(m)
        warp_epochs = self.warp_epochs[threads // 32]
        bad = self._unordered(records[0:4, elements], threads, warp_epochs)
        what = "writes" if writing else "reads"
        if writing:
            bad_read = self._unordered(records[4:8, elements], threads, warp_epochs)
            twice = np.zeros(len(elements), bool)  # a later thread of this access writes it again
            order = np.argsort(elements, kind="stable")
            again = np.flatnonzero(elements[order][1:] == elements[order][:-1])
            twice[order[again + 1]] = threads[order[again + 1]] != threads[order[again]]
            for k in np.flatnonzero(bad | bad_read | twice)[:1]:
                if bad[k]:
                    self._race(int(threads[k]), what, int(elements[k]), records[0:2, elements[k]])
                if bad_read[k]:
                    self._race(int(threads[k]), what, int(elements[k]), records[4:6, elements[k]], "read")
                earlier = order[again[order[again + 1] == k][0]]
                self._race(int(threads[k]), what, int(elements[k]), (self.block, threads[earlier]))
            records[0, elements], records[1, elements] = self.block, threads
            records[2, elements], records[3, elements] = self.epoch, warp_epochs
            return
        for k in np.flatnonzero(bad)[:1]:
            self._race(int(threads[k]), what, int(elements[k]), records[0:2, elements[k]])
        self._record_reads(records, elements, threads, warp_epochs)

    def _record_reads(self, records: np.ndarray, elements: np.ndarray, threads: np.ndarray,
                      warp_epochs: np.ndarray) -> None:
        """The last read of each element, as reading it one thread after another would leave
        it: one thread; several threads of one warp (`-1 - warp`); several warps."""
        places, lowest, highest, first = self._readers(elements, threads)
        block, who, epoch = records[4, places], records[5, places], records[6, places]
        fresh = (block != self.block) | (epoch != self.epoch)
        one = lowest == highest
        if fresh.all() and one.all():  # (most reads: each element by one thread, first in this epoch)
            records[4, places], records[5, places], records[6, places] = self.block, lowest, self.epoch
            records[7, places] = warp_epochs[first]
            return
        warp = lowest // 32
        then = np.where(who >= 0, who // 32, np.where(who == SEVERAL_WARPS, -2, -1 - who))
        single = fresh & one | (who == lowest) & one
        one_warp = ~single & (highest // 32 == warp) & (fresh | (then == warp))
        who = np.where(single, lowest, np.where(one_warp, -1 - warp, SEVERAL_WARPS))
        records[4, places], records[5, places], records[6, places] = self.block, who, self.epoch
        records[7, places] = np.where(single | one_warp, warp_epochs[first], 0)

    @staticmethod
    def _readers(elements: np.ndarray, threads: np.ndarray) -> tuple[np.ndarray, ...]:
        """The distinct elements read, the lowest and highest thread reading each, and the
        position of its first read: each lane its own element, or all one (a broadcast read),
        without np.unique's sort."""
        if len(elements) > 1:
            ordered = np.sort(elements)
            if ordered[0] == ordered[-1]:  # one element
                return elements[:1], threads.min(keepdims=True), threads.max(keepdims=True), np.zeros(1, np.int64)
            if not (ordered[1:] == ordered[:-1]).any():  # distinct elements
                return elements, threads, threads, np.arange(len(elements))
        elif len(elements) == 1:
            return elements, threads, threads, np.zeros(1, np.int64)
        places, first, inverse = np.unique(elements, return_index=True, return_inverse=True)
        lowest = np.full(len(places), np.iinfo(np.int64).max)
        highest = np.full(len(places), -1)
        np.minimum.at(lowest, inverse, threads)
        np.maximum.at(highest, inverse, threads)
        return places, lowest, highest, first

    def _race(self, thread: int, what: str, i: int, other: Any, did: str = "wrote") -> None:
        block, who = int(other[0]), int(other[1])
        warp = -1 - who if who != SEVERAL_WARPS else -1
        them = f"thread {who} of block {block}" if who >= 0 else f"several threads of block {block}"
        them += f" (warp {warp})" if who < 0 and who != SEVERAL_WARPS else ""
        raise EmulationError(f"data race: thread {thread} of block {self.block} {what} element {i} of a buffer "
                             f"that {them} {did} with nothing ordering the two (a barrier, a shuffle of their "
                             "warp, or an atomic after the other block's)")


SEVERAL_WARPS = -(1 << 30)  # `Races` reads: readers in several warps
RACES = Races()


def fresh(element: ir.Type, sizes: list[int]) -> MemRef:
    """An allocation holding garbage: NaN for floats, a pattern for integers."""
    dtype = storage_dtype(element)
    n = max(1, int(np.prod(sizes)) if sizes else 1)
    data = np.full(n, np.nan, dtype) if dtype in FLOATS.values() else np.full(n, 0x5A, dtype)
    _next_address[0] += (n * np.dtype(dtype).itemsize + 511) // 256 * 256
    return MemRef(data, _next_address[0], 0, list(sizes), contiguous_strides(sizes))


def of_array(a: np.ndarray, misalign_bytes: int = 0) -> MemRef:
    """A memref over a numpy array (its own storage; written back by the caller)."""
    _next_address[0] += (a.nbytes + 511) // 256 * 256
    return MemRef(a.reshape(-1) if a.flags.c_contiguous else a.copy().reshape(-1), _next_address[0] + misalign_bytes,
                  0, list(a.shape), contiguous_strides(list(a.shape)) if a.ndim else [])


def of_view(a: np.ndarray) -> MemRef | None:
    """A memref with the strides of a strided view of a C-contiguous array (a permuted or
    sliced input, as torch passes one), over that array's storage; None for other arrays."""
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    if base is a or not base.flags.c_contiguous or any(s < 0 or s % a.itemsize for s in a.strides):
        return None
    _next_address[0] += (base.nbytes + 511) // 256 * 256
    offset = (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // a.itemsize
    return MemRef(base.reshape(-1).view(a.dtype), _next_address[0], offset, list(a.shape),
                  [s // a.itemsize for s in a.strides])


# -- memory ops ---------------------------------------------------------------------------------
def _get_global(p, vals):
    """A constant global's value (a reshape's shape): read from its memref.global."""
    name = ir.FlatSymbolRefAttr(p.op.attributes["name"]).value
    module = p.op.parent
    while module.name != "builtin.module":
        module = module.parent
    found = next(op for op in (o.operation for o in module.regions[0].blocks[0].operations)
                 if op.name == "memref.global" and ir.StringAttr(op.attributes["sym_name"]).value == name)
    t = ir.MemRefType(p.op.results[0].type)
    initial = found.attributes["initial_value"]
    dtype = storage_dtype(t.element_type)
    if ir.DenseElementsAttr(initial).is_splat:
        splat = ir.DenseElementsAttr(initial).get_splat_value()
        integer = isinstance(t.element_type, (ir.IntegerType, ir.IndexType))
        scalar = ir.IntegerAttr(splat).value if integer else ir.FloatAttr(splat).value
        values = np.full(t.shape, scalar, np.float64 if dtype in FLOATS.values() else np.int64).astype(dtype)
    else:
        values = np.array(list(ir.DenseIntElementsAttr(initial)), dtype)
    m = of_array(values.reshape(t.shape))
    m.host = True
    return [m]


def _alloc(p, vals):
    t = ir.MemRefType(p.op.results[0].type)
    dynamic = iter(vals)
    m = fresh(t.element_type, [next(dynamic) if t.is_dynamic_dim(d) else t.shape[d] for d in range(t.rank)])
    m.device = p.name == "gpu.alloc" and not IN_KERNEL[0]
    # the host's own allocations (shape buffers): no kernel or memset may touch them (a
    # workspace left a memref.alloc in host code nested in an scf.if, session 84: memset on
    # the H200 failed with CUDA_ERROR_INVALID_VALUE, which the emulator ran as if on the device)
    m.host = p.name in ("memref.alloc", "memref.alloca") and not IN_KERNEL[0]
    return [m]


def _load(p, vals):
    m, *idx = vals
    kind = p.kind
    at = m.at(idx)
    RACES.read(m, (at,))
    return [kind.of(m.data[at])]


def _store(p, vals):
    value, m, *idx = vals
    at = m.at(idx)
    RACES.write(m, (at,))
    m.data[at] = _to_storage(value, m.data.dtype)
    return []


def _to_storage(value: Any, dtype: np.dtype) -> Any:
    if dtype.kind in "iu":  # (np.issubdtype was a tenth of an emulated kernel's time)
        bits = dtype.itemsize * 8
        value = int(value) & ((1 << bits) - 1)
        return value - (1 << bits) if value >> (bits - 1) else value
    return value


def _vector_access(p: Any, m: MemRef, idx: list[int], n: int) -> list[int]:
    if m.strides and m.strides[-1] != 1:
        raise EmulationError("vector access along a strided dim")
    first = m.at(idx)
    m.at(idx[:-1] + [idx[-1] + n - 1])  # the last element is in bounds too
    align = p.attr("alignment") or 1
    address = m.address + first * m.data.itemsize
    if address % align:
        raise EmulationError(f"vector access at address {address:#x} is not {align}-byte aligned")
    return list(range(first, first + n))


def _vload(p, vals):
    m, *idx = vals
    t = ir.VectorType(p.op.results[0].type)
    kind = p.kind
    elements = _vector_access(p, m, idx, t.shape[0])
    RACES.read(m, elements)
    return [tuple(kind.of(m.data[i]) for i in elements)]


def _vstore(p, vals):
    value, m, *idx = vals
    elements = _vector_access(p, m, idx, len(value))
    RACES.write(m, elements)
    for i, v in zip(elements, value):
        m.data[i] = _to_storage(v, m.data.dtype)
    return []


def _collapse(p, vals):
    m = vals[0]
    groups = [[ir.IntegerAttr(i).value for i in g] for g in ir.ArrayAttr(p.op.attributes["reassociation"])]
    sizes = [int(np.prod([m.sizes[i] for i in g])) for g in groups]
    for g in groups:
        for a, b in zip(g, g[1:]):
            if m.sizes[b] > 1 and m.strides[a] != m.strides[b] * m.sizes[b]:
                raise EmulationError("collapse_shape of non-contiguous dims")
    return [m.view(sizes, [m.strides[g[-1]] if g else 1 for g in groups])]


def _expand(p, vals):
    m, *dynamic = vals
    t = ir.MemRefType(p.op.results[0].type)
    dyn = iter(dynamic)
    sizes = [next(dyn) if t.is_dynamic_dim(d) else t.shape[d] for d in range(t.rank)]
    if m.strides != contiguous_strides(m.sizes):
        raise EmulationError("expand_shape of a strided memref")
    return [m.view(sizes)]


def _reshape(p, vals):
    m, shape = vals
    t = ir.MemRefType(p.op.results[0].type)
    sizes = [int(shape.data[shape.at([d])]) for d in range(t.rank)]
    if int(np.prod(sizes)) != int(np.prod(m.sizes)):
        raise EmulationError(f"reshape of {m.sizes} to {sizes}")
    return [m.view(sizes)]


def _subview(p, vals):
    """memref.subview: the offsets, sizes and strides (static, or the operands in order)."""
    m, *dynamic = vals
    dyn = iter(dynamic)
    DYNAMIC = -(1 << 63)

    def mixed(name: str) -> list[int]:
        return [next(dyn) if v == DYNAMIC else int(v) for v in ir.DenseI64ArrayAttr(p.op.attributes[name])]
    offsets, sizes, steps = mixed("static_offsets"), mixed("static_sizes"), mixed("static_strides")
    if len(sizes) != len(m.sizes):
        raise EmulationError("a rank-reducing subview is not emulated")
    for o, n, s, full in zip(offsets, sizes, steps, m.sizes):
        if n and not (0 <= o and o + (n - 1) * s < full):
            raise EmulationError(f"subview at {offsets} of sizes {sizes} out of bounds of {m.sizes}")
    # (the offset's place: host code takes subviews of device buffers without reading them)
    return [m.view(sizes, [st * s for st, s in zip(m.strides, steps)],
                   m.element(offsets) if all(m.sizes) else m.offset)]


MEMSETS: list[int] = []  # the elements each gpu.memset of the last `emulate` set


def _memset(p, vals):
    """gpu.memset (async: its dependencies first): every element of the destination."""
    m, value = vals[-2], vals[-1]
    MEMSETS.append(int(np.prod(m.sizes)))
    was, IN_KERNEL[0] = IN_KERNEL[0], True  # the device writes it
    try:
        for idx in np.ndindex(*m.sizes):
            m.data[m.at(list(idx))] = _to_storage(value, m.data.dtype)
    finally:
        IN_KERNEL[0] = was
    return [None] * len(p.op.results)


def _atomic_rmw(p, vals):
    """memref.atomic_rmw: the blocks of a launch run one after another here, so the
    read-modify-write is atomic by construction; returns the old value."""
    value, m, *idx = vals
    kind = ir.IntegerAttr(p.op.attributes["kind"]).value  # arith::AtomicRMWKind: 0 addf, 1 addi
    at = m.at(idx)
    RACES.acquired.add(RACES.block)
    old = p.kind.of(m.data[at])
    if kind not in (0, 1):
        raise EmulationError(f"atomic_rmw of kind {kind} is not emulated")
    new = old + value
    m.data[at] = _to_storage(p.kind.of(new), m.data.dtype)
    return [old]


# PTX cvt to and from float8 (gpu-float8-conversions): round to nearest even; `satfinite`
# clamps to the largest finite value (NaN stays NaN); from float8 to float16 is exact.
_FLOAT8_LARGEST = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}


def _cvt_to_float8(p: Any, vals: list[Any]) -> list[Any]:
    to = ir.TypeAttr(p.op.attributes["dstTy"]).value
    if "sat" not in p.op.attributes or "satfinite" not in str(p.op.attributes["sat"]):
        raise EmulationError(f"the emulator has cvt to float8 with satfinite only: {p.op}")
    largest = _FLOAT8_LARGEST[str(to)]

    def code(v: Any) -> int:
        f = float(v)
        f = f if math.isnan(f) else min(max(f, -largest), largest)
        return int(np.array([f], np.float32).astype(FLOATS[str(to)]).view(np.uint8)[0])
    return [p.kind.of(code(vals[0]) << 8 | code(vals[1]))]


def _cvt_from_float8(p: Any, vals: list[Any]) -> list[Any]:
    src = FLOATS[str(ir.TypeAttr(p.op.attributes["srcType"]).value)]
    return [tuple(np.float16(np.array([b], np.uint8).view(src).astype(np.float32)[0]) for b in vals[0])]


def _assert(p: Any, vals: list[Any]) -> list[Any]:
    """cf.assert: CUDA's device-side assert (`__assertfail`) where it fails."""
    if not vals[0]:
        raise DeviceAssert(ir.StringAttr(p.op.attributes["msg"]).value)
    return []


_HANDLERS: dict[str, Callable] = {
    "cf.assert": _assert,
    "nvvm.convert.f32x2.to.f8x2": _cvt_to_float8, "nvvm.convert.f8x2.to.f16x2": _cvt_from_float8,
    "memref.alloc": _alloc, "gpu.alloc": _alloc, "memref.alloca": _alloc, "memref.get_global": _get_global,
    "memref.dealloc": lambda p, vals: [], "gpu.dealloc": lambda p, vals: [],
    "memref.load": _load, "memref.store": _store, "vector.load": _vload, "vector.store": _vstore,
    "memref.dim": lambda p, vals: [vals[0].sizes[vals[1]]],
    "memref.collapse_shape": _collapse, "memref.expand_shape": _expand, "memref.reshape": _reshape,
    "memref.subview": _subview,
    "memref.extract_aligned_pointer_as_index": lambda p, vals: [vals[0].address],
    "memref.extract_strided_metadata": lambda p, vals: [
        MemRef(vals[0].data, vals[0].address, 0, [], [], vals[0].host, vals[0].device),
        vals[0].offset, *vals[0].sizes, *vals[0].strides],
    "vector.extract": lambda p, vals: [vals[0][position(p)]],
    "vector.from_elements": lambda p, vals: [tuple(vals)],
    "vector.broadcast": lambda p, vals: [(vals[0],) * ir.VectorType(p.op.results[0].type).shape[0]],
    "gpu.thread_id": lambda p, vals: _fail("gpu.thread_id outside a launch's arguments"),
    "gpu.memset": _memset, "gpu.wait": lambda p, vals: [None] * len(p.op.results),
    "memref.atomic_rmw": _atomic_rmw, "nvvm.memory.barrier": lambda p, vals: [],
}


def position(p: Any) -> int:
    """vector.extract's static position (cached)."""
    if "position" not in p.cache:
        p.cache["position"] = ir.DenseI64ArrayAttr(p.op.attributes["static_position"])[0]
    return p.cache["position"]


def _fail(message: str):
    raise EmulationError(message)


# -- arith and math -----------------------------------------------------------------------------
def _constant(p, vals):
    if "value" in p.cache:
        return [p.cache["value"]]
    attr = p.op.attributes["value"]
    t = p.op.results[0].type
    kind = p.kind
    if isinstance(attr, ir.DenseElementsAttr) or str(attr).startswith("dense"):
        scalar = ir.DenseElementsAttr(attr).get_splat_value()
        v = ir.FloatAttr(scalar).value if kind.float else ir.IntegerAttr(scalar).value
        value = (kind.of(v),) * ir.VectorType(t).shape[0]
    else:
        value = kind.of(ir.FloatAttr(attr).value if kind.float is not None else ir.IntegerAttr(attr).value)
    p.cache["value"] = value
    return [value]


def _binary_int(fn: Callable[[Kind, int, int], int]) -> Callable:
    def handler(p, vals):
        kind = p.kind
        return [kind.of(fn(kind, vals[0], vals[1]))]
    return handler


def _div(a: int, b: int) -> int:
    if b == 0:
        raise EmulationError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _binary_float(fn: Callable[[Any, Any], Any]) -> Callable:
    def handler(p, vals):
        kind = p.kind
        return [kind.of(fn(vals[0], vals[1]))]
    return handler


_INLINE_ASM = {"sqrt.rn.f32 $0, $1;": lambda x: math.sqrt(x) if x >= 0 else math.nan}


def _inline_asm(p, vals):
    """The PTX the lowering writes as inline asm (float32 sqrt.rn, correctly rounded)."""
    asm = ir.StringAttr(p.op.attributes["asm_string"]).value
    if asm not in _INLINE_ASM:
        raise EmulationError(f"inline asm not emulated: {asm!r}")
    return _unary_math(_INLINE_ASM[asm])(p, vals)


def _unary_math(fn: Callable[[float], float]) -> Callable:
    def handler(p, vals):
        kind = p.kind
        x = float(vals[0])
        try:
            y = fn(x) if not math.isnan(x) else math.nan
        except (OverflowError, ValueError):
            y = math.inf if x > 0 else (0.0 if fn is math.exp else math.nan)
        return [kind.of(y)]
    return handler


_CMPI = {0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: "slt", 3: "sle", 4: "sgt", 5: "sge",
         6: lambda a, b: a < b, 7: lambda a, b: a <= b, 8: lambda a, b: a > b, 9: lambda a, b: a >= b}
_SIGNED = {"slt": lambda a, b: a < b, "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b,
           "sge": lambda a, b: a >= b}


def _cmpi(p, vals):
    rule = _CMPI[p.attr("predicate")]
    a, b = vals
    if isinstance(rule, str):
        kind = p.src
        return [int(_SIGNED[rule](kind.signed(a), kind.signed(b)))]
    return [int(rule(a, b))]


def _cmpf(p, vals):
    p = p.attr("predicate")
    a, b = float(vals[0]), float(vals[1])
    unordered = math.isnan(a) or math.isnan(b)
    base = {1: a == b, 2: a > b, 3: a >= b, 4: a < b, 5: a <= b, 6: a != b, 7: True,
            8: a == b, 9: a > b, 10: a >= b, 11: a < b, 12: a <= b, 13: a != b, 14: False}
    if p == 0 or p == 15:
        return [int(p == 15)]
    if p <= 7:
        return [int(not unordered and base[p])]
    return [int(unordered or base[p])]


def _cast(fn: Callable[[Kind, Kind, Any], Any]) -> Callable:
    def handler(p, vals):
        src, dst = p.src, p.kind
        return [dst.of(fn(src, dst, vals[0]))]
    return handler


def _mului_extended(p, vals):
    kind = p.kind
    product = vals[0] * vals[1]
    return [kind.of(product), kind.of(product >> kind.width)]


def _call_intrinsic(p, vals):
    """The LLVM intrinsics kernels call: `llvm.nvvm.mulhi.ui` (high word of a 32-bit product)."""
    name = ir.StringAttr(p.op.attributes["intrin"]).value
    if name == "llvm.nvvm.mulhi.ui":
        return [p.kind.of((vals[0] * vals[1]) >> p.kind.width)]
    raise EmulationError(f"the emulator has no rule for intrinsic {name}")


def _float_to_int(src: Kind, dst: Kind, v: Any) -> int:
    """Truncation toward zero (NaN and infinities, undefined in MLIR, give 0)."""
    f = float(v)
    return 0 if math.isnan(f) or math.isinf(f) else int(f)


_ARITH: dict[str, Callable] = {
    "arith.constant": _constant,
    "arith.addi": _binary_int(lambda k, a, b: a + b),
    "arith.subi": _binary_int(lambda k, a, b: a - b),
    "arith.muli": _binary_int(lambda k, a, b: a * b),
    "arith.divui": _binary_int(lambda k, a, b: _div(a, b)),
    "arith.remui": _binary_int(lambda k, a, b: a - _div(a, b) * b),
    "arith.divsi": _binary_int(lambda k, a, b: _div(k.signed(a), k.signed(b))),
    "arith.remsi": _binary_int(lambda k, a, b: k.signed(a) - _div(k.signed(a), k.signed(b)) * k.signed(b)),
    "arith.ceildivui": _binary_int(lambda k, a, b: -(-a // b) if b else _div(a, b)),
    "arith.ceildivsi": _binary_int(lambda k, a, b: -(-k.signed(a) // k.signed(b))),
    "arith.floordivsi": _binary_int(lambda k, a, b: k.signed(a) // k.signed(b)),
    "arith.andi": _binary_int(lambda k, a, b: a & b),
    "arith.ori": _binary_int(lambda k, a, b: a | b),
    "arith.xori": _binary_int(lambda k, a, b: a ^ b),
    "arith.shli": _binary_int(lambda k, a, b: a << b if b < k.width else 0),
    "arith.shrui": _binary_int(lambda k, a, b: a >> b if b < k.width else 0),
    "arith.shrsi": _binary_int(lambda k, a, b: k.signed(a) >> min(b, k.width - 1)),
    "arith.maxui": _binary_int(lambda k, a, b: max(a, b)),
    "arith.minui": _binary_int(lambda k, a, b: min(a, b)),
    "arith.maxsi": _binary_int(lambda k, a, b: max(k.signed(a), k.signed(b))),
    "arith.minsi": _binary_int(lambda k, a, b: min(k.signed(a), k.signed(b))),
    "arith.mului_extended": _mului_extended,
    "llvm.call_intrinsic": _call_intrinsic,
    "arith.cmpi": _cmpi,
    "arith.cmpf": _cmpf,
    "arith.select": lambda p, vals: [vals[1] if vals[0] else vals[2]],
    "arith.index_cast": _cast(lambda s, d, v: s.signed(v) if s.width < d.width else v),
    "arith.index_castui": _cast(lambda s, d, v: v),
    "arith.extsi": _cast(lambda s, d, v: s.signed(v)),
    "arith.extui": _cast(lambda s, d, v: v),
    "arith.trunci": _cast(lambda s, d, v: v),
    "arith.sitofp": _cast(lambda s, d, v: s.signed(v)),
    "arith.uitofp": _cast(lambda s, d, v: v),
    "arith.fptosi": _cast(_float_to_int),
    "arith.fptoui": _cast(_float_to_int),
    "arith.extf": _cast(lambda s, d, v: v),
    "arith.truncf": _cast(lambda s, d, v: v),
    "arith.bitcast": lambda p, vals: [_bitcast(p, vals[0])],
    "arith.addf": _binary_float(lambda a, b: a + b),
    "arith.subf": _binary_float(lambda a, b: a - b),
    "arith.mulf": _binary_float(lambda a, b: a * b),
    "arith.divf": _binary_float(lambda a, b: a / b),
    "arith.remf": _binary_float(lambda a, b: np.fmod(a, b)),
    "arith.maximumf": _binary_float(lambda a, b: a if np.isnan(a) else (b if np.isnan(b) else max(a, b))),
    "arith.minimumf": _binary_float(lambda a, b: a if np.isnan(a) else (b if np.isnan(b) else min(a, b))),
    "arith.maxnumf": _binary_float(lambda a, b: b if np.isnan(a) else (a if np.isnan(b) else max(a, b))),
    "arith.minnumf": _binary_float(lambda a, b: b if np.isnan(a) else (a if np.isnan(b) else min(a, b))),
    "arith.negf": lambda p, vals: [-vals[0]],
    "math.absf": lambda p, vals: [abs(vals[0])],
    "math.fma": lambda p, vals: [p.kind.of(
        float(vals[0]) * float(vals[1]) + float(vals[2]))],
    "math.exp": _unary_math(math.exp),
    "math.exp2": _unary_math(lambda x: 2.0 ** x),
    "math.expm1": _unary_math(math.expm1),
    "math.log": _unary_math(lambda x: math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)),
    "math.log1p": _unary_math(lambda x: math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan)),
    "math.tanh": _unary_math(math.tanh),
    "math.erf": _unary_math(math.erf),
    "math.sqrt": _unary_math(lambda x: math.sqrt(x) if x >= 0 else math.nan),
    "llvm.inline_asm": lambda p, vals: _inline_asm(p, vals),
    "math.rsqrt": _unary_math(lambda x: 1 / math.sqrt(x) if x > 0 else (math.inf if x == 0 else math.nan)),
    "math.sin": _unary_math(math.sin),
    "math.cos": _unary_math(math.cos),
    "math.floor": _unary_math(math.floor),
    "math.log2": _unary_math(lambda x: math.log2(x) if x > 0 else (-math.inf if x == 0 else math.nan)),
    "math.roundeven": _unary_math(lambda x: float(np.round(x)) if math.isfinite(x) else x),
    "math.atan2": _binary_float(lambda a, b: np.arctan2(np.float64(a), np.float64(b))),
    "math.powf": _binary_float(lambda a, b: np.power(np.float64(a), np.float64(b))),
    "math.copysign": _binary_float(lambda a, b: np.copysign(np.float64(a), np.float64(b))),
    "math.ceil": _unary_math(math.ceil),
    "math.trunc": _unary_math(math.trunc),
    "math.tan": _unary_math(math.tan),
    "math.asin": _unary_math(lambda x: math.asin(x) if -1 <= x <= 1 else math.nan),
    "math.acos": _unary_math(lambda x: math.acos(x) if -1 <= x <= 1 else math.nan),
    "math.atan": _unary_math(math.atan),
    "math.sinh": _unary_math(lambda x: float(np.sinh(np.float64(x)))),
    "math.cosh": _unary_math(lambda x: float(np.cosh(np.float64(x)))),
    "math.asinh": _unary_math(math.asinh),
    "math.acosh": _unary_math(lambda x: math.acosh(x) if x >= 1 else math.nan),
    "math.atanh": _unary_math(lambda x: float(np.arctanh(np.float64(x)))),
    "math.log10": _unary_math(lambda x: math.log10(x) if x > 0 else (-math.inf if x == 0 else math.nan)),
    "math.erfc": _unary_math(math.erfc),
}


def _bitcast(p: Any, value: Any) -> Any:
    src, dst = p.src, p.kind
    storage = storage_dtype_of(src)
    raw = np.array(_to_storage(value, storage), storage)
    return dst.of(raw.view(storage_dtype_of(dst))[()])


def storage_dtype_of(kind: Kind) -> np.dtype:
    return np.dtype(kind.float if kind.float is not None else {8: np.int8, 16: np.int16, 32: np.int32,
                                                               64: np.int64}[kind.width])


RULES: dict[str, Callable] = {**_HANDLERS, **_ARITH}
