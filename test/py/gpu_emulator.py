"""Runs the GPU backend's `gpu` stage (host code with `gpu.launch` regions, before outlining) on
the CPU, so that CI checks the scheduled kernels' numerics where there is no GPU.

Not a simulator of timing or of the memory model: the host code runs op by op; a launch runs
its blocks one after another and a block's threads as Python generators that stop at
`gpu.barrier` (every live thread of the block must reach it) and `gpu.shuffle` (every live
lane of the warp must reach it). What it catches: wrong indices (every memref access is
bounds-checked), reads of memory nothing wrote (fresh buffers hold NaN or a garbage pattern),
missing or misplaced barriers (a thread reading shared memory another thread writes only after
the barrier sees the garbage), data races (`emulator_rules.Races`: two threads' accesses to an
element, one a write, that no barrier or atomic orders, though the order the emulator runs
them in gives the right value), wrong guards, vector/scalar variant mistakes (the host's
alignment checks see the addresses given here, misaligned ones included).

    out = emulate(compiled.stages["gpu"], [x, w, 0.5], [np.empty(...)], misalign={0: 4})

The values and the rule of each op are in `emulator_rules.py`; this file is the interpreter:
ops prepared once, threads, barriers, shuffles, launches.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
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
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                RACES.start_block(bx + grid[0] * (by + grid[1] * bz))
                shared = [fresh(t.element_type, list(t.shape)) for t in shared_types]
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
            RACES.warp_epochs[warp] = RACES.warp_epochs.get(warp, 0) + 1
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


def _shuffle(emu: Emulator, p: Op, env: dict) -> Iterator[_Sync]:
    value, offset, width = (env[v] for v in p.ins)
    mode = p.cache.get("mode") or p.cache.setdefault(
        "mode", str(p.op.attributes["mode"]).rstrip(">").split()[-1])  # #gpu<shuffle_mode xor>
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
