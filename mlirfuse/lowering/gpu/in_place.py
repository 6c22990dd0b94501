"""Which outputs of a GPU entry point may be written into which of its inputs (in place).

An optimizer step reads each parameter and its state and writes their new values; written
into fresh buffers, every one is copied back into the parameter afterwards (a kernel and a
host call per tensor). Written into the input's own memory, the copies vanish, but only
where no thread can read an element of the input after another thread (or an earlier
statement of its own) wrote the output over it.

Read from the `gpu` stage (the entry function with its `gpu.launch` kernels inline, after
packing). An input A may hold an output B (same element type, rank >= 1) where:
- every kernel storing into B is one launch L, and nothing else touches B but views, sizes
  and loads by launches after L;
- A is only loaded (through views), by launches before L or by L itself; and
- in L, each load of A is followed, in the same block, by a store into B through the same
  chain of views at the same indices, which depend on the thread's id. Each element of an
  output is stored by one thread, so the only thread reading that element of A is the one
  that then overwrites it.
Anything else (A or B handed to a library call, copied, loaded on the host, or read where no
store follows) keeps the pair apart. 0-d buffers are never paired: a scalar is read by every
thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from mlirfuse.lowering.gpu.kernels import VIEWS, base_buffer
from mlirfuse.passes.common import walk_ops

_LOADS = {"memref.load": 0, "vector.load": 0}  # op -> position of the buffer it reads
_STORES = {"memref.store": 1, "vector.store": 1}  # op -> position of the buffer it writes
_NEUTRAL = VIEWS + ("memref.dim", "memref.extract_aligned_pointer_as_index", "memref.extract_strided_metadata")
_THREAD_ID_X = 3  # position of threadIdx.x among a gpu.launch body's arguments


@dataclass
class _Uses:
    loads: list[ir.Operation] = field(default_factory=list)
    stores: list[ir.Operation] = field(default_factory=list)
    other: bool = False  # used by anything but views, sizes, loads and stores


def in_place_pairs(entry: ir.Operation, n_inputs: int) -> frozenset[tuple[int, int]]:
    """(input position, output position) pairs of the entry point `entry` (inputs first, then
    outputs) where the output may be written into the input's memory (module docstring)."""
    args = list(entry.regions[0].blocks[0].arguments)
    uses = {k: _Uses() for k, a in enumerate(args) if _pairable(a.type)}
    position_of = {args[k]: k for k in uses}
    for op in walk_ops(entry)[1:]:
        for position, v in enumerate(op.operands):
            if not isinstance(v.type, ir.MemRefType):
                continue
            k = position_of.get(base_buffer(v))
            if k is None or op.name in VIEWS and position == 0:
                continue
            if _LOADS.get(op.name) == position:
                uses[k].loads.append(op)
            elif _STORES.get(op.name) == position:
                uses[k].stores.append(op)
            elif op.name not in _NEUTRAL:
                uses[k].other = True
    top = entry.regions[0].blocks[0]
    order = {o.operation: n for n, o in enumerate(top.operations)}
    pairs = set()
    for i in (k for k in uses if k < n_inputs):
        for j in (k for k in uses if k >= n_inputs):
            if args[i].type.element_type == args[j].type.element_type and \
                    args[i].type.rank == args[j].type.rank and _may_share(uses[i], uses[j], top, order):
                pairs.add((i, j - n_inputs))
    return frozenset(pairs)


def _pairable(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType) and t.rank >= 1


def _may_share(a: _Uses, b: _Uses, top: ir.Block, order: dict) -> bool:
    if a.other or b.other or a.stores or not b.stores:
        return False
    writers = {_launch(s) for s in b.stores}
    if len(writers) != 1 or None in writers:
        return False
    writer = writers.pop()
    at = _position(writer, top, order)
    for load in b.loads:  # the output read back: only by later launches
        launch = _launch(load)
        if launch is None or _position(launch, top, order) <= at:
            return False
    for load in a.loads:
        launch = _launch(load)
        if launch is None:
            return False
        if launch != writer:
            if _position(launch, top, order) >= at:
                return False
            continue
        if not any(_overwrites(store, load, launch) for store in b.stores):
            return False
    return True


def _launch(op: ir.Operation) -> ir.Operation | None:
    """The gpu.launch `op` runs in (None: on the host)."""
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "gpu.launch":
            return parent.operation
        parent = parent.parent
    return None


def _position(op: ir.Operation, top: ir.Block, order: dict) -> int:
    """Where the top-level op holding `op` sits in the entry's block (`order`: the block's
    ops by position)."""
    while op.parent is not None and op.block != top:
        op = op.parent.operation
    return order[op]


def _overwrites(store: ir.Operation, load: ir.Operation, launch: ir.Operation) -> bool:
    """`store` writes, after `load` read it and in the same thread, the element `load` read
    (same block, same view chain, same indices depending on the thread's id)."""
    if store.block != load.block or not load.is_before_in_block(store):
        return False
    if load.results[0].type != store.operands[0].type:  # a vector of the same width, or a scalar
        return False
    load_indices, store_indices = list(load.operands)[1:], list(store.operands)[2:]
    if not load_indices or load_indices != store_indices:
        return False
    if not _same_views(load.operands[0], store.operands[1]):
        return False
    thread = launch.regions[0].blocks[0].arguments[_THREAD_ID_X]
    return any(_depends_on(v, thread) for v in load_indices)


def _same_views(a: ir.Value, b: ir.Value) -> bool:
    """The two buffers are the same chain of views (same ops, attributes, result types and
    other operands) of their roots."""
    while True:
        a_root, b_root = isinstance(a.owner, ir.Block), isinstance(b.owner, ir.Block)
        if a_root or b_root:
            return a_root and b_root
        x, y = a.owner.operation, b.owner.operation
        if x.name not in VIEWS or y.name not in VIEWS:
            return False
        if x.name != y.name or a.type != b.type or list(x.operands)[1:] != list(y.operands)[1:] or \
                _attributes(x) != _attributes(y):
            return False
        a, b = x.operands[0], y.operands[0]


def _attributes(op: ir.Operation) -> dict[str, str]:
    return {name: str(op.attributes[name]) for name in op.attributes}


def _depends_on(value: ir.Value, source: ir.Value) -> bool:
    """Whether `value` is computed (through any ops) from `source`."""
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if v == source:
            return True
        if isinstance(v.owner, ir.Block):
            continue
        op = v.owner.operation
        if op in seen:
            continue
        seen.add(op)
        stack.extend(op.operands)
    return False
