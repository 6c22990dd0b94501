"""Runs the GPU backend's `gpu` stage (host code with `gpu.launch` regions, before outlining) on
the CPU, so that CI checks the scheduled kernels' numerics where there is no GPU.

Not a simulator of timing or of the memory model: the host code runs op by op; a launch runs
its blocks one after another, and a block's threads in lockstep (`emulator_lanes`: each value
a numpy array over the threads, branches and loops by mask; a barrier or shuffle must be
reached by every thread of the block or lane of the warp). With the race check off, a block's
threads run instead as Python generators, one after another between barriers and shuffles
(as do all with EMULATOR_PER_THREAD=1). What it catches: wrong indices (every memref access
is bounds-checked), reads of memory nothing wrote (fresh buffers hold NaN or a garbage
pattern), missing or misplaced barriers and other data races (`emulator_rules.Races`: two
threads' accesses to an element, one a write, that no barrier, shuffle or atomic orders;
threads one after another, a thread reading shared memory another writes only after the
barrier sees the garbage), wrong guards, vector/scalar variant mistakes (the host's alignment
checks see the addresses given here, misaligned ones included).

    out = emulate(compiled.stages["gpu"], [x, w, 0.5], [np.empty(...)], misalign={0: 4})

The values and the rule of each op are in `emulator_rules.py` (their lockstep forms in
`emulator_lanes.py`); this file is the interpreter: ops prepared once, threads, barriers,
shuffles, launches.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
from emulator_lanes import run_op, spread, uniform, where
from emulator_rules import (IN_KERNEL, MEMSETS, RACES, RULES, EmulationError, Kind, MemRef,
                            fresh, kind_of, maybe_kind, of_array, of_view)
from mlir import ir

from mlirfuse.dialects import fusion as fusion_dialect

WARP = 32
__all__ = ["EmulationError", "Emulator", "MemRef", "Kind", "emulate", "of_array"]


class _Sync:
    def __init__(self, what: str, *payload: Any):
        self.what, self.payload = what, payload


class Op:
    """An operation prepared once: its handler, value ids, result kinds, attributes."""

    def __init__(self, emu: "Emulator", op: ir.Operation):
        self.op, self.name = op, op.name
        self.ins = tuple(emu.id_of(v) for v in op.operands)
        self.outs = tuple(emu.id_of(v) for v in op.results)
        self.kind = maybe_kind(op.results[0].type) if len(op.results) else None
        self.src = maybe_kind(op.operands[0].type) if len(op.operands) else None
        self.regions = [[emu.prepare(b) for b in r.blocks] for r in op.regions]
        self.syncing = _SYNCING.get(self.name)
        self.handler = RULES.get(self.name)
        self.ends = self.name in ("scf.yield", "scf.condition", "scf.reduce", "gpu.terminator", "func.return")
        if self.handler is None and self.syncing is None and not self.ends and not self.regions:
            raise EmulationError(f"the emulator has no rule for {self.name}")
        self.cache: dict[str, Any] = {}

    def attr(self, name: str) -> Any:
        """An integer attribute's value (cached)."""
        if name not in self.cache:
            self.cache[name] = ir.IntegerAttr(self.op.attributes[name]).value if name in self.op.attributes else None
        return self.cache[name]


@dataclass
class Block:
    args: tuple[int, ...]
    ops: list[Op]


class Emulator:
    def __init__(self, text: str):
        self.ctx = fusion_dialect.new_context()
        self._ids: dict[ir.Value, int] = {}
        # Every `arith.constant` of the module (host code and kernels, loop bodies included),
        # evaluated once here rather than by each thread at each step (four fifths of the ops
        # a kernel's threads ran were constants): value id -> value, the start of every
        # environment.
        self.constants: dict[int, Any] = {}
        with self.ctx:
            self.module = ir.Module.parse(text)
            self.entry = next(op.operation for op in self.module.body.operations
                              if op.operation.name == "func.func"
                              and ir.StringAttr(op.attributes["sym_name"]).value == "mlirfuse_entry")
            self.body = self.prepare(self.entry.regions[0].blocks[0])

    def id_of(self, value: ir.Value) -> int:
        return self._ids.setdefault(value, len(self._ids))

    def prepare(self, block: ir.Block) -> Block:
        ops = []
        for op in block.operations:
            p = Op(self, op.operation)
            if p.name == "arith.constant":
                self.constants[p.outs[0]] = p.handler(p, [])[0]
            else:
                ops.append(p)
        return Block(tuple(self.id_of(a) for a in block.arguments), ops)

    def run(self, args: list[Any]) -> None:
        env = dict(self.constants)
        env.update(zip(self.body.args, args))
        with np.errstate(all="ignore"):
            for _ in self.block(self.body, env):
                raise EmulationError("host code reached a barrier or shuffle")

    # Every op handler returns its results (a list); ops that may synchronize are generators
    # (`yield from`) returning them.
    def block(self, block: Block, env: dict) -> Iterator[_Sync]:
        for p in block.ops:
            if p.ends:
                return [env[v] for v in p.ins]
            if p.syncing is not None:
                results = yield from p.syncing(self, p, env)
            else:
                results = p.handler(p, [env[v] for v in p.ins])
            for r, v in zip(p.outs, results):
                env[r] = v
        return []


PER_THREAD = bool(os.environ.get("EMULATOR_PER_THREAD"))  # every launch thread by thread (slow)
LAUNCHED: list[tuple[tuple[int, ...], tuple[int, ...]]] = []  # (grid, block) of each launch of the last `emulate`
RUN_KERNELS = [True]  # False: `emulate(kernels=False)`, launches recorded but not run


def _launch(emu: Emulator, p: Op, env: dict) -> Iterator[_Sync]:
    sizes = [env[v] for v in p.ins]
    grid, block = sizes[-6:-3], sizes[-3:]
    LAUNCHED.append((tuple(grid), tuple(block)))
    if not RUN_KERNELS[0]:
        return []
    body = p.regions[0][0]
    n_threads = block[0] * block[1] * block[2]
    shared_types = [ir.MemRefType(a.type) for a in list(p.op.regions[0].blocks[0].arguments)[12:]]
    # Each thread starts from the values its body reads from outside (host values, constants),
    # not from a copy of the whole host environment.
    if "captured" not in p.cache:
        p.cache["captured"] = _captured(body)
    outside = {v: env[v] for v in p.cache["captured"]}
    RACES.launch()
    # In lockstep (the block's threads together, `emulator_lanes`) unless the race check is
    # off: the per-thread order then shows what a missing barrier reads (garbage).
    lockstep = RACES.on and not PER_THREAD
    if lockstep:
        spread_outside = {v: spread(x, n_threads) for v, x in outside.items()}
        t = np.arange(n_threads, dtype=np.uint64)
        thread_ids = [t % np.uint64(block[0]), t // np.uint64(block[0]) % np.uint64(block[1]),
                      t // np.uint64(block[0] * block[1])]
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                RACES.start_block(bx + grid[0] * (by + grid[1] * bz), n_threads)
                shared = [fresh(t.element_type, list(t.shape)) for t in shared_types]
                if lockstep:
                    env = dict(spread_outside)
                    env.update(zip(body.args, [spread(i, n_threads) for i in (bx, by, bz)] + thread_ids
                                   + [spread(i, n_threads) for i in (*grid, *block)] + shared))
                    IN_KERNEL[0] = True
                    try:
                        _run_lanes(emu, body, env, None, n_threads)
                    finally:
                        IN_KERNEL[0] = False
                    continue
                threads = []
                for t in range(n_threads):
                    tx, ty, tz = t % block[0], t // block[0] % block[1], t // (block[0] * block[1])
                    local = dict(outside)
                    local.update(zip(body.args, [bx, by, bz, tx, ty, tz, *grid, *block, *shared]))
                    threads.append(emu.block(body, local))
                IN_KERNEL[0] = True
                try:
                    _run_block(threads)
                finally:
                    IN_KERNEL[0] = False
    return []
    yield  # a generator


def _captured(body: Block) -> set[int]:
    """The values a region's ops read that it does not define (its block arguments or results)."""
    defined, read = set(), set()

    def visit(block: Block) -> None:
        defined.update(block.args)
        for q in block.ops:
            read.update(q.ins)
            defined.update(q.outs)
            for region in q.regions:
                for b in region:
                    visit(b)
    visit(body)
    return read - defined


def _run_block(threads: list[Iterator[_Sync]]) -> None:
    """Run the threads of a block to completion, releasing barriers and warp shuffles."""
    waiting: dict[int, _Sync] = {}
    live = set(range(len(threads)))
    runnable = list(range(len(threads)))
    replies: dict[int, Any] = {}
    while live:
        for t in runnable:
            RACES.thread = t
            try:
                sync = threads[t].send(replies.pop(t, None)) if t in replies else next(threads[t])
                waiting[t] = sync
            except StopIteration:
                live.discard(t)
        runnable = []
        if not live:
            break
        barrier = [t for t in live if waiting[t].what == "barrier"]
        if len(barrier) == len(live):
            runnable = sorted(barrier)
            waiting.clear()
            RACES.epoch += 1
            continue
        for warp in {t // WARP for t in live}:
            lanes = [t for t in range(warp * WARP, min(len(threads), (warp + 1) * WARP))]
            if not all(t in live and waiting[t].what == "shuffle" for t in lanes):
                continue
            values = {t % WARP: waiting[t].payload[1] for t in lanes}
            RACES.warp_epochs[warp] += 1
            for t in lanes:
                mode, value, offset, width = waiting[t].payload
                lane = t % WARP
                src = {"xor": lane ^ offset, "down": lane + offset, "up": lane - offset, "idx": offset}[mode]
                ok = 0 <= src < width and src in values
                replies[t] = (values[src] if ok else value, 1 if ok else 0)
                runnable.append(t)
                del waiting[t]
        if not runnable:
            raise EmulationError(f"deadlock: {len(barrier)} of {len(live)} live threads at a barrier, "
                                 "the rest at full-warp shuffles of warps some of whose lanes exited or wait elsewhere")


def _barrier(emu: Emulator, p: Op, env: dict) -> Iterator[_Sync]:
    yield _Sync("barrier")
    return []


def _shuffle_mode(p: Op) -> str:
    """xor, down, up or idx (cached): #gpu<shuffle_mode xor>."""
    if "mode" not in p.cache:
        p.cache["mode"] = str(p.op.attributes["mode"]).rstrip(">").split()[-1]
    return p.cache["mode"]


def _shuffle(emu: Emulator, p: Op, env: dict) -> Iterator[_Sync]:
    value, offset, width = (env[v] for v in p.ins)
    mode = _shuffle_mode(p)
    reply = yield _Sync("shuffle", mode, value, offset, width)
    return list(reply)


def _for(emu: Emulator, p: Op, env: dict) -> Iterator[_Sync]:
    lb, ub, step, *carried = (env[v] for v in p.ins)
    body = p.regions[0][0]
    iv = lb
    while iv < ub:
        env.update(zip(body.args, [iv, *carried]))
        carried = yield from emu.block(body, env)
        iv += step
    return carried


def _parallel(emu: Emulator, p: Op, env: dict) -> Iterator[_Sync]:
    """scf.parallel without reductions (a naive kernel's loop over an output's unit dims): its
    iterations one after another, as any order is valid for it; `scf.reduce` ends each."""
    body = p.regions[0][0]
    n = len(body.args)
    bounds = [env[v] for v in p.ins]
    if len(bounds) != 3 * n:
        raise EmulationError("scf.parallel with reductions: the emulator has no rule for it")
    lbs, ubs, steps = bounds[:n], bounds[n:2 * n], bounds[2 * n:]
    for ivs in itertools.product(*[range(lb, ub, step) for lb, ub, step in zip(lbs, ubs, steps)]):
        env.update(zip(body.args, ivs))
        yield from emu.block(body, env)
    return []


def _while(emu: Emulator, p: Op, env: dict) -> Iterator[_Sync]:
    """scf.while: the before region ends in scf.condition(flag, values...)."""
    before, after = p.regions[0][0], p.regions[1][0]
    carried = [env[v] for v in p.ins]
    while True:
        env.update(zip(before.args, carried))
        flag, *carried = yield from emu.block(before, env)
        if not flag:
            return carried
        env.update(zip(after.args, carried))
        carried = yield from emu.block(after, env)


def _if(emu: Emulator, p: Op, env: dict) -> Iterator[_Sync]:
    region = p.regions[0] if env[p.ins[0]] else p.regions[1]
    if not region:
        return []
    return (yield from emu.block(region[0], env))


_SYNCING: dict[str, Callable] = {"gpu.launch": _launch, "gpu.barrier": _barrier, "gpu.shuffle": _shuffle,
                                 "scf.for": _for, "scf.if": _if, "scf.while": _while, "scf.parallel": _parallel}


# -- lockstep: a block's threads together -------------------------------------------------------
def _run_lanes(emu: Emulator, block: Block, env: dict, mask: np.ndarray | None, lanes: int) -> list[Any]:
    """Run `block` for the lanes in `mask` (None: all), each value an array over the lanes."""
    for p in block.ops:
        if p.ends:
            return [env[v] for v in p.ins]
        structured = _LOCKSTEP.get(p.name)
        if structured is not None:
            results = structured(emu, p, env, mask, lanes)
        else:
            results = run_op(p, [env[v] for v in p.ins], mask, lanes)
        for r, v in zip(p.outs, results):
            env[r] = v
    return []


def _all(mask: np.ndarray | None, lanes: int) -> np.ndarray:
    return np.ones(lanes, bool) if mask is None else mask


def _for_lanes(emu: Emulator, p: Op, env: dict, mask: np.ndarray | None, lanes: int) -> list[Any]:
    """scf.for: bounds alike on every active lane, one loop; else each lane until its own end."""
    lb, ub, step, *carried = (env[v] for v in p.ins)
    body = p.regions[0][0]
    bounds = [uniform(x, mask) for x in (lb, ub, step)]
    if all(b is not None for b in bounds):
        iv, end, inc = (int(b) for b in bounds)
        while iv < end:
            env.update(zip(body.args, [np.full(lanes, iv, np.uint64), *carried]))
            carried = _run_lanes(emu, body, env, mask, lanes)
            iv += inc
        return carried
    on, iv = _all(mask, lanes), lb
    while True:
        going = on & (iv < ub)
        if not going.any():
            return carried
        env.update(zip(body.args, [iv, *carried]))
        carried = [where(going, new, old) for new, old in zip(_run_lanes(emu, body, env, going, lanes), carried)]
        iv = np.where(going, iv + step, iv)


def _if_lanes(emu: Emulator, p: Op, env: dict, mask: np.ndarray | None, lanes: int) -> list[Any]:
    """scf.if: a branch every active lane takes runs for them all; else each branch for its
    lanes, the results merged."""
    taken = env[p.ins[0]] != 0
    then, other = p.regions
    on, off = taken & _all(mask, lanes), ~taken & _all(mask, lanes)
    if not off.any():
        return _run_lanes(emu, then[0], env, mask, lanes)
    if not on.any():
        return _run_lanes(emu, other[0], env, mask, lanes) if other else []
    first = _run_lanes(emu, then[0], env, on, lanes)
    if not other:
        return first
    second = _run_lanes(emu, other[0], env, off, lanes)
    return [where(taken, a, b) for a, b in zip(first, second)]


def _while_lanes(emu: Emulator, p: Op, env: dict, mask: np.ndarray | None, lanes: int) -> list[Any]:
    """scf.while: each lane until its own condition fails; a lane's results are the
    condition's values when it does."""
    before, after = p.regions[0][0], p.regions[1][0]
    carried, on, final = [env[v] for v in p.ins], _all(mask, lanes), None
    while True:
        env.update(zip(before.args, carried))
        flag, *values = _run_lanes(emu, before, env, on, lanes)
        going = on & (flag != 0)
        final = values if final is None else [where(on & ~going, v, f) for v, f in zip(values, final)]
        if not going.any():
            return final
        env.update(zip(after.args, values))
        carried, on = _run_lanes(emu, after, env, going, lanes), going


def _parallel_lanes(emu: Emulator, p: Op, env: dict, mask: np.ndarray | None, lanes: int) -> list[Any]:
    """scf.parallel without reductions, bounds alike on every active lane."""
    body = p.regions[0][0]
    n = len(body.args)
    bounds = [uniform(env[v], mask) for v in p.ins]
    if len(bounds) != 3 * n or any(b is None for b in bounds):
        raise EmulationError("scf.parallel with reductions or bounds that differ across threads: not emulated")
    bounds = [int(b) for b in bounds]
    for ivs in itertools.product(*[range(lb, ub, step) for lb, ub, step in zip(bounds[:n], bounds[n:2 * n],
                                                                               bounds[2 * n:])]):
        env.update(zip(body.args, [np.full(lanes, iv, np.uint64) for iv in ivs]))
        _run_lanes(emu, body, env, mask, lanes)
    return []


def _barrier_lanes(emu: Emulator, p: Op, env: dict, mask: np.ndarray | None, lanes: int) -> list[Any]:
    if mask is not None and not mask.all():
        raise EmulationError(f"deadlock: a barrier that {int(mask.sum())} of the block's {lanes} threads reach "
                             "(in a branch or loop the others do not take)")
    RACES.epoch += 1
    return []


def _shuffle_lanes(emu: Emulator, p: Op, env: dict, mask: np.ndarray | None, lanes: int) -> list[Any]:
    """gpu.shuffle: the warps with an active lane, all of whose lanes must be active."""
    value, offset, width = (env[v] for v in p.ins)
    mode = _shuffle_mode(p)
    t = np.arange(lanes)
    warp, lane = t // WARP, t % WARP
    warps = np.unique(warp[_all(mask, lanes)])
    if mask is not None and not mask[np.isin(warp, warps)].all():
        raise EmulationError("deadlock: a full-warp shuffle that some lanes of a warp do not reach")
    offset, width = offset.astype(np.int64), width.astype(np.int64)
    source = {"xor": lane ^ offset, "down": lane + offset, "up": lane - offset, "idx": offset}[mode]
    ok = (source >= 0) & (source < width) & (warp * WARP + source < lanes)
    RACES.warp_epochs[warps] += 1
    return [value[np.where(ok, warp * WARP + source, t)], ok.astype(np.uint64)]


_LOCKSTEP: dict[str, Callable] = {"gpu.barrier": _barrier_lanes, "gpu.shuffle": _shuffle_lanes, "scf.for": _for_lanes,
                                  "scf.if": _if_lanes, "scf.while": _while_lanes, "scf.parallel": _parallel_lanes}


# -- the entry point ----------------------------------------------------------------------------
def emulate(gpu_stage: str, inputs: list[Any], outputs: list[np.ndarray],
            misalign: dict[int, int] | None = None, kernels: bool = True) -> list[np.ndarray]:
    """Run the compiled fusion on `inputs` (numpy arrays, Python scalars for scalar inputs)
    into `outputs` (numpy arrays of the result shapes, overwritten). `misalign` gives argument
    positions (inputs then outputs) whose addresses are that many bytes past a 256-byte
    boundary. `kernels=False`: the host code alone, each launch recorded in `LAUNCHED` but
    not run (a launch geometry at sizes too large to emulate; the outputs are not written)."""
    misalign = misalign or {}
    RUN_KERNELS[0] = kernels
    LAUNCHED.clear()
    MEMSETS.clear()
    args, written = [], []
    for i, a in enumerate(list(inputs) + list(outputs)):
        if isinstance(a, np.ndarray):
            view = of_view(a) if i < len(inputs) and not a.flags.c_contiguous else None
            # (np.ascontiguousarray makes a 0-d array 1-d: reshaped back)
            m = view or of_array(np.ascontiguousarray(a).reshape(a.shape), misalign.get(i, 0))
            args.append(m)
            if i >= len(inputs):
                written.append((a, m))
        else:
            args.append(a)
    emu = Emulator(gpu_stage)
    with emu.ctx:
        block = emu.entry.regions[0].blocks[0]
        args = [a if isinstance(a, MemRef) else kind_of(b.type).of(a) for a, b in zip(args, block.arguments)]
    emu.run(args)
    for out, m in written:
        out[...] = m.data[:out.size].reshape(out.shape)
    return outputs
