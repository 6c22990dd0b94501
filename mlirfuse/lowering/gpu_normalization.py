"""The normalization kernel: a chain of inner reductions and row-wise pointwise generics over
the same rows (LayerNorm's mean, centring, variance and scaling; softmax's max, exp, sum and
division) run as one kernel, each row read from global memory once and kept in registers.

A chain is a run of consecutive generics (host-only ops such as allocations may sit between
them) that all iterate the same rows and the same row elements: inner reductions
([rows, row] -> [rows]), tile ops ([rows, row] -> [rows, row]) and row ops ([rows] ->
[rows], e.g. the fills that initialize reductions). Equal extents are proved from the IR,
not assumed: loop dims that index one buffer's dims, allocations sized by `memref.dim` of
another buffer, equal static sizes (`_Extents`).

`threads` threads per row (a tier picked on the host from the row length), each holding
`slots` vectors of every row-sized value of its row; blocks of max(threads, min_block)
threads, also chosen on the host, so the kernel carries a register cap (`.maxnreg`) that
lets its largest block run. Each member runs in program order:
a tile op computes its slots from its inputs' slots (loaded on first use, or computed by
an earlier member), a reduction accumulates its slots, then `gpu.shuffle xor` butterflies
and shared memory give every thread of the row the total, a row op computes per row.
Buffers that only the chain uses (its temporaries) are neither stored nor, once the chain
is emitted, allocated (`drop_dead_buffers`). Rows too long to hold, or not aligned to the
vector, take the looping variant: a pass over the row per reduction, recomputing tile
values from global memory, and a last pass writing the outputs. The two variants are two
kernels (the host picks one per call, `gpu_kernels.ALTERNATIVE_ATTR`): ptxas compiles them
in parallel, and the held rows do not share a register budget with the looping code
(bias-dropout-add-LayerNorm: 68 bytes of spills in one kernel, none in the held variant's).
Parameters come from `schedules.normalization_heuristic`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from mlirfuse.lowering import schedules as S
from mlirfuse.lowering.gpu_kernels import (
    ZERO,
    Generic,
    aligned,
    analyze,
    clone_body,
    collapse,
    combine,
    delinearize,
    divisible,
    element,
    flat,
    guarded_launch,
    host_only,
    load,
    philox_linear_in,
    product,
    set_kernel_attrs,
    share_philox,
    store,
)
from mlirfuse.lowering.gpu_reduction import butterfly, identity, match_inner_reduction, static_product
from mlirfuse.lowering.linalg_builders import index_const
from mlirfuse.passes.common import DimClasses

REDUCE, TILE, ROW, COL, SCALAR = "reduce", "tile", "row", "col", "scalar"


# -- which loop extents are equal ---------------------------------------------------------------
class _Extents(DimClasses):
    """Union-find over buffer dims `(value, position)`, static sizes and host index values:
    two dims in one class have equal extents whenever the function runs."""

    def __init__(self, ops: list[ir.Operation], generics: dict[int, Generic]):
        super().__init__()
        for op in ops:
            if op.name == "memref.alloc":
                result = op.results[0]
                t = ir.MemRefType(result.type)
                dynamic = iter(op.operands)
                for pos in range(t.rank):
                    if t.is_dynamic_dim(pos):
                        self.union(self.dim(result, pos), self._size(next(dynamic)))
                    else:
                        self.dim(result, pos)
        for g in generics.values():
            for d in range(g.n_loops):
                dims = [self.dim(o.value, pos) for o in g.operands if o.is_memref
                        for pos, r in enumerate(o.results) if r == d]
                for a in dims[1:]:
                    self.union(dims[0], a)

    def class_of(self, v: ir.Value) -> Any:
        """The class of a host index value (an extent)."""
        return self.find(self._size(v))

    def _size(self, v: ir.Value) -> Any:
        owner = v.owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "memref.dim":
            index = owner.operation.operands[1].owner
            if not isinstance(index, ir.Block) and index.operation.name == "arith.constant":
                return self.dim(owner.operation.operands[0], ir.IntegerAttr(index.operation.attributes["value"]).value)
        return ("value", v)

    def loop(self, g: Generic, d: int) -> Any:
        o, pos = next((o, p) for o in g.operands if o.is_memref for p, r in enumerate(o.results) if r == d)
        return self.find(self.dim(o.value, pos))


# -- matching ---------------------------------------------------------------------------------
@dataclass
class Member:
    generic: Generic
    kind: str  # REDUCE, TILE or ROW
    rows: list[int]  # the loop dims numbering rows, in order
    cols: list[int]  # the loop dims within a row (none for a row op)
    roles: dict[int, str]  # id(operand) -> TILE, COL, ROW or SCALAR, for memref operands
    combiners: list[ir.Operation] = field(default_factory=list)  # a reduction's, per output


@dataclass
class Chain:
    members: list[Member]
    indices: list[int]  # the members' positions among the function's operations
    row_classes: list[Any]
    col_classes: list[Any]
    extents: "_Extents"

    @property
    def reductions(self) -> list[Member]:
        return [m for m in self.members if m.kind == REDUCE]

    def static_row(self) -> int | None:
        return static_product(self.reductions[0].generic, self.reductions[0].cols)

    def static_rows(self) -> int | None:
        return static_product(self.reductions[0].generic, self.reductions[0].rows)

    def vector_bytes(self) -> list[int]:
        """Element sizes of the operands read or written a vector at a time (temporaries
        included: the vector width is chosen before they are known)."""
        return [o.element_bytes for m in self.members for o in m.generic.operands
                if o.is_memref and m.roles[id(o)] in (TILE, COL)]


def _member(g: Generic, extents: _Extents, row_classes: list[Any], col_classes: list[Any]) -> Member | None:
    """`g` as a member of a chain over these rows, or None."""
    loops = [d for d in range(g.n_loops) if g.static[d] != 1]
    classes = [extents.loop(g, d) for d in loops]
    n_rows = len(row_classes)
    if any(g.reduction):
        m = match_inner_reduction(g)
        if isinstance(m, str) or [extents.loop(g, d) for d in m.kept] != row_classes \
                or [extents.loop(g, d) for d in m.reduced] != col_classes:
            return None
        kind, rows, cols, combiners = REDUCE, m.kept, m.reduced, m.combiners
    elif classes == row_classes + col_classes:
        kind, rows, cols, combiners = TILE, loops[:n_rows], loops[n_rows:], []
    elif classes == row_classes:
        kind, rows, cols, combiners = ROW, loops, [], []
    else:
        return None
    unit = {d for d in range(g.n_loops) if g.static[d] == 1}
    roles = {}
    for o in g.operands:
        if not o.is_memref:
            continue
        dims = [r for r in o.results if r != ZERO and r not in unit]
        role = {tuple(rows + cols): TILE, tuple(cols): COL, tuple(rows): ROW, (): SCALAR}.get(tuple(dims))
        if role is None or (o.is_output and role != (TILE if kind == TILE else ROW)):
            return None
        if o.is_output and kind != REDUCE and list(o.arg.uses):
            return None  # the body reads the old output value
        roles[id(o)] = role
    if kind == ROW and any(r in (TILE, COL) for r in roles.values()):
        return None
    return Member(g, kind, rows, cols, roles, combiners)


def find_chains(ops: list[ir.Operation]) -> list[Chain]:
    """Maximal runs of consecutive generics around each inner reduction that iterate its rows
    and row elements; kept where they hold a tile op or several reductions."""
    generics = {}
    for i, op in enumerate(ops):
        if op.name == "linalg.generic":
            g = analyze(op)
            if not isinstance(g, str):
                generics[i] = g
    extents = _Extents(ops, generics)
    chains: list[Chain] = []
    taken: set[int] = set()
    for i, g in generics.items():
        if i in taken or not any(g.reduction):
            continue
        m = match_inner_reduction(g)
        if isinstance(m, str) or not m.kept:
            continue
        rows = [extents.loop(g, d) for d in m.kept]
        cols = [extents.loop(g, d) for d in m.reduced]
        found = {i: _member(g, extents, rows, cols)}
        if found[i] is None:
            continue
        for step in (-1, 1):
            j = i + step
            while 0 <= j < len(ops) and j not in taken:
                if j in generics:
                    member = _member(generics[j], extents, rows, cols)
                    if member is None:
                        if step == 1 and _independent(generics[j], list(found.values())):
                            j += step  # runs before the chain's kernel, as it would have
                            continue
                        break
                    found[j] = member
                elif not _passive(ops[j]):
                    break
                j += step
        indices = sorted(found)
        members = [found[k] for k in indices]
        kinds = [m.kind for m in members]
        if (TILE not in kinds and kinds.count(REDUCE) < 2) or not _row_local(members) or _aliased(members):
            continue  # a lone reduction (its fill folded in) keeps the inner-reduction kernel
        taken.update(range(indices[0], indices[-1] + 1))
        chains.append(Chain(members, indices, rows, cols, extents))
    return chains


_VIEWS = ("memref.reshape", "memref.collapse_shape", "memref.expand_shape", "memref.subview", "memref.cast")


def _passive(op: ir.Operation) -> bool:
    """Host ops a chain may span: sizes and allocations (`host_only`), views, and stores to
    the host's shape buffers (`index` elements, read by memref.reshape). They touch no
    device buffer's contents; `_aliased` keeps members from meeting through a view."""
    if host_only(op) or op.name in _VIEWS:
        return True
    return op.name == "memref.store" and isinstance(ir.MemRefType(op.operands[1].type).element_type, ir.IndexType)


def _aliased(members: list[Member]) -> bool:
    """A member reads or writes, through another view, a buffer a member writes: the chain
    passes values between members by buffer, so that access would bypass it (and race
    with the other threads of the row)."""
    written = {o.value for m in members for o in m.generic.outputs}
    bases = {_base(v) for v in written}
    return any(o.is_memref and o.value not in written and _base(o.value) in bases
               for m in members for o in m.generic.operands)


def _base(buffer: ir.Value) -> ir.Value:
    """The buffer a view is of (views alias it)."""
    while not isinstance(buffer.owner, ir.Block) and buffer.owner.operation.name in _VIEWS:
        buffer = buffer.owner.operation.operands[0]
    return buffer


def _independent(g: Generic, members: list[Member]) -> bool:
    """A generic after some chain members that the chain may skip: the chain's kernel runs
    where its last member is, so `g` then runs before the members found so far. Allowed
    where it reads nothing they write and writes nothing they read or write; an inner
    reduction is not skipped (it would start a chain of its own)."""
    if not isinstance(match_inner_reduction(g), str):
        return False
    written = {_base(o.value) for m in members for o in m.generic.outputs}
    touched = written | {_base(o.value) for m in members for o in m.generic.inputs if o.is_memref}
    reads = {_base(o.value) for o in g.inputs if o.is_memref} | \
        {_base(o.value) for o in g.outputs if list(o.arg.uses)}
    return not reads & written and not {_base(o.value) for o in g.outputs} & touched


def _row_local(members: list[Member]) -> bool:
    """No member writes a buffer that a member reads as a column vector or a scalar (those
    are read by every row: a write by one row would race with the others)."""
    written = {o.value for m in members for o in m.generic.outputs}
    return not any(o.value in written for m in members for o in m.generic.inputs
                   if o.is_memref and m.roles[id(o)] in (COL, SCALAR))


# -- emission --------------------------------------------------------------------------------
def emit_chain(ops: list[ir.Operation], chain: Chain, params: S.NormalizationParams) -> list[bool]:
    """Replace the chain's generics with one kernel, placed where the last one was (every
    buffer the chain uses is defined by then): two variants, each launched under its guard,
    rows held in registers or (too long, unaligned) the looping variant. Returns, per launch
    emitted, whether it is the looping variant."""
    last = chain.members[-1].generic.op
    first_reduction = chain.reductions[0]
    chain_ops = {ops[k] for k in chain.indices}
    with ir.InsertionPoint(last), last.location:
        g = first_reduction.generic
        ext = g.extents()
        row_ext = [ext[d] for d in first_reduction.rows]
        col_ext = [ext[d] for d in first_reduction.cols]
        rows, row_len = product(row_ext), product(col_ext)
        written = {o.value for m in chain.members for o in m.generic.outputs}
        live_out = {v for v in written if _escapes(v, chain_ops)}
        temporaries = written - live_out  # kept in registers: no view, no alignment check
        views = _views(chain, temporaries)
        vec = params.vector
        vectored = {o.value: o for m in chain.members for o in m.generic.operands
                    if o.is_memref and m.roles[id(o)] in (TILE, COL) and o.value not in temporaries}
        threads = index_const(params.tiers[-1].threads)
        for tier in reversed(params.tiers[:-1]):
            fits = arith.cmpi(arith.CmpIPredicate.ule, row_len, index_const(tier.max_row))
            threads = arith.select(fits, index_const(tier.threads), threads)
        held = arith.muli(threads, index_const(vec * params.slots))
        persistent = arith.andi(arith.cmpi(arith.CmpIPredicate.ugt, row_len, index_const(0)),
                                arith.cmpi(arith.CmpIPredicate.ule, row_len, held))
        if vec > 1:
            persistent = arith.andi(persistent, arith.andi(divisible(row_len, vec), aligned(
                list(vectored), [vec * o.element_bytes for o in vectored.values()])))
        block = arith.maxui(threads, index_const(params.min_block))  # params.block_for, on the host
        rows_per_block = arith.divui(block, threads)
        grid = arith.ceildivui(rows, rows_per_block)
        workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
        shared = [ir.MemRefType.get([params.block // S.WARP], o.type.element_type, memory_space=workgroup)
                  for m in chain.reductions for o in m.generic.outputs]
        nonempty = arith.cmpi(arith.CmpIPredicate.ugt, rows, index_const(0))
        # Two kernels, the host launching one: compiled apart (ptxas compiles them in parallel,
        # and the held rows' registers are not the looping variant's).
        looping = arith.xori(persistent, arith.constant(ir.IntegerType.get_signless(1), 1))
        variants = [(False, persistent), (True, looping)]
        static = chain.static_row()  # (one tier then) a row known not to be held: only the looping variant
        if static is not None and (static == 0 or static > params.tiers[0].threads * vec * params.slots
                                   or static % vec):
            variants = [(True, None)]
        launches = []
        for variant, when in variants:
            body, _ = guarded_launch(chain.members[-1].generic, "normalization",
                                     arith.andi(nonempty, when) if when is not None else nonempty,
                                     grid, block, shared, alternative=len(variants) > 1 and variant)
            # The block size is the host's choice: the kernel must fit `params.block` threads.
            set_kernel_attrs(body.owner, {"nvvm.maxnreg": ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), params.max_registers)})
            launches.append((body, variant))
    for body, variant in launches:
        with ir.InsertionPoint(body.operations[len(body.operations) - 1]), last.location:
            kernel = _NormalizationKernel(chain, params, views, live_out, row_ext, col_ext, rows, row_len,
                                          threads, rows_per_block, list(body.arguments)[12:],
                                          body.arguments[0], body.arguments[3])
            if variant:
                kernel.run(1, params.loop_slots, looping=True)
            else:
                kernel.run(vec, params.slots, looping=False)
    for m in reversed(chain.members):
        m.generic.op.erase()
    return [variant for _, variant in launches]


def _escapes(buffer: ir.Value, chain_ops: set) -> bool:
    """The buffer is seen outside the chain (an argument, or used by another op than the
    chain's generics, deallocations and size queries): its values must reach memory. Size
    queries (`memref.dim`, e.g. the chain's own extents) read no data: `drop_dead_buffers`
    answers them from the allocation's sizes."""
    owner = buffer.owner
    if isinstance(owner, ir.Block) or owner.operation.name not in ("memref.alloc", "gpu.alloc"):
        return True
    metadata = ("memref.dealloc", "gpu.dealloc", "memref.dim")
    return any(u.owner.operation not in chain_ops and u.owner.name not in metadata for u in buffer.uses)


def _views(chain: Chain, temporaries: set) -> dict[tuple[ir.Value, str], ir.Value]:
    """(buffer, role) -> the buffer viewed as [rows, row] (tile), [row] (column vector),
    [rows] (row values) or [1] (one value), for the buffers in memory."""
    views: dict[tuple[ir.Value, str], ir.Value] = {}
    for m in chain.members:
        for o in m.generic.operands:
            if not o.is_memref or o.value in temporaries or (o.value, m.roles[id(o)]) in views:
                continue
            role, rank = m.roles[id(o)], o.type.rank
            if role == TILE:
                split = next(p for p, r in enumerate(o.results) if r != ZERO and r in m.cols)
                view = collapse(o.value, [list(range(split)), list(range(split, rank))])
            else:
                view = flat(o.value) if rank else o.value
            views[(o.value, role)] = view
    return views


@dataclass
class _Chunk:
    """The row elements a thread handles at once: per slot, the column of its first element
    and whether it is inside the row; `memo` holds what was loaded or computed for them."""

    width: int
    cols: list[ir.Value]
    valid: list[ir.Value]
    memo: dict = field(default_factory=dict)


class _NormalizationKernel:
    def __init__(self, chain: Chain, params: S.NormalizationParams, views: dict, live_out: set,
                 row_ext: list[ir.Value], col_ext: list[ir.Value], rows: ir.Value, row_len: ir.Value,
                 threads: ir.Value, rows_per_block: ir.Value, shared: list[ir.Value], bx: ir.Value, tx: ir.Value):
        self.chain, self.p, self.views, self.live_out = chain, params, views, live_out
        self.col_ext, self.row_len, self.threads, self.tx = col_ext, row_len, threads, tx
        self.shared = shared
        self.lane = arith.remui(tx, threads)
        self.row = arith.addi(arith.muli(bx, rows_per_block), arith.divui(tx, threads))
        self.row_ok = arith.cmpi(arith.CmpIPredicate.ult, self.row, rows)
        self.safe_row = arith.select(self.row_ok, self.row, index_const(0))  # rows > 0: in bounds
        self.row_ivs = delinearize(self.row, row_ext)

    # -- the chain, member by member
    def run(self, width: int, slots: int, looping: bool) -> None:
        self.width, self.slots, self.looping = width, slots, looping
        self.row_values: dict[ir.Value, ir.Value] = {}  # [rows] buffers: this row's value
        self.row_loads: dict[tuple[ir.Value, str], ir.Value] = {}
        self.producer: dict[ir.Value, tuple[Member, int]] = {}  # tile buffer -> member, output
        self.env: dict[int, dict] = {}  # id(member) -> its inputs as of its place in the chain
        self.whole_row = None if looping else self.chunk(index_const(0))
        shared = iter(self.shared)
        stored: list[Member] = []
        for m in self.chain.members:
            self.env[id(m)] = self.inputs(m)
            if m.kind == ROW:
                self.row_op(m)
            elif m.kind == REDUCE:
                self.reduce(m, [next(shared) for _ in m.generic.outputs])
            else:
                for k, o in enumerate(m.generic.outputs):
                    self.producer[o.value] = (m, k)
                if any(o.value in self.live_out for o in m.generic.outputs):
                    if looping:
                        stored.append(m)
                    else:
                        self.store_tiles(m, self.whole_row)
        if stored:  # the looping variant's last pass: every output tile
            self.over_chunks([], lambda chunk, accs: self.store_all(stored, chunk))

    def store_all(self, members: list[Member], chunk: _Chunk) -> list[ir.Value]:
        for m in members:
            self.store_tiles(m, chunk)
        return []

    def inputs(self, m: Member) -> dict:
        """Each input operand's source at the member's place: a tile's producer (or None:
        memory), a row value, a scalar; captured values as they are."""
        env = {}
        for o in m.generic.inputs:
            if not o.is_memref:
                env[id(o)] = o.value
                continue
            role = m.roles[id(o)]
            if role == TILE:
                env[id(o)] = self.producer.get(o.value)
            elif role == ROW:
                env[id(o)] = self.row_value(o.value)
            elif role == SCALAR:
                env[id(o)] = self.row_load(o.value, SCALAR, [index_const(0)] if o.type.rank else [])
        return env

    def row_value(self, buffer: ir.Value) -> ir.Value:
        if buffer in self.row_values:
            return self.row_values[buffer]
        return self.row_load(buffer, ROW, [self.safe_row])

    def row_load(self, buffer: ir.Value, role: str, index: list[ir.Value]) -> ir.Value:
        key = (buffer, role)
        if key not in self.row_loads:
            self.row_loads[key] = memref.load(self.views[key], index)
        return self.row_loads[key]

    def row_op(self, m: Member) -> None:
        g = m.generic
        mapping = {o.arg: self.env[id(m)][id(o)] for o in g.inputs}
        results = clone_body(g.body, mapping, lambda d: self.row_index(m, d))
        self.set_rows(m, results)

    def set_rows(self, m: Member, results: list[ir.Value]) -> None:
        """The member's row outputs; lane 0 of a valid row writes those seen outside."""
        outs = m.generic.outputs
        for o, v in zip(outs, results):
            self.row_values[o.value] = v
        escaping = [(o, v) for o, v in zip(outs, results) if o.value in self.live_out]
        if escaping:
            first = arith.cmpi(arith.CmpIPredicate.eq, self.lane, index_const(0))
            write = scf.IfOp(arith.andi(self.row_ok, first))
            with ir.InsertionPoint(write.then_block):
                for o, v in escaping:
                    memref.store(v, self.views[(o.value, ROW)], [self.row])
                scf.YieldOp([])

    def reduce(self, m: Member, shared: list[ir.Value]) -> None:
        g = m.generic
        types = [o.type.element_type for o in g.outputs]
        start = [identity(c.name, t) for c, t in zip(m.combiners, types)]
        accs = self.over_chunks(start, lambda chunk, accs: self.accumulate(m, chunk, accs))
        totals = self.across_row(m.combiners, accs, shared)
        inits = [self.row_value(o.value) for o in g.outputs]
        self.set_rows(m, [combine(c, i, t) for c, i, t in zip(m.combiners, inits, totals)])

    def accumulate(self, m: Member, chunk: _Chunk, accs: list[ir.Value]) -> list[ir.Value]:
        g = m.generic
        for j in range(self.slots):
            before = accs
            for e in range(chunk.width):
                mapping = self.mapping(m, chunk, j, e)
                mapping.update({o.arg: a for o, a in zip(g.outputs, accs)})
                accs = clone_body(g.body, mapping, lambda d, e=e: self.index(m, chunk, j, e, d))
            accs = [arith.select(chunk.valid[j], a, b) for a, b in zip(accs, before)]
        return accs

    # -- row-sized values, a chunk at a time
    def chunk(self, base: ir.Value) -> _Chunk:
        """Slots j < slots of the chunk starting at element `base`: slot j of lane l starts at
        base + (j * threads + l) * width (a warp's slot j is one contiguous span)."""
        cols, valid = [], []
        for j in range(self.slots):
            vectors = arith.addi(arith.muli(index_const(j), self.threads), self.lane) if j else self.lane
            col = arith.addi(base, arith.muli(vectors, index_const(self.width)))
            cols.append(col)
            valid.append(arith.andi(self.row_ok, arith.cmpi(arith.CmpIPredicate.ult, col, self.row_len)))
        return _Chunk(self.width, cols, valid)

    def over_chunks(self, accs: list[ir.Value], body) -> list[ir.Value]:
        """`body(chunk, accs)` on the whole row (held in registers), or in the looping variant
        on each chunk in turn, carrying `accs`."""
        if not self.looping:
            return body(self.whole_row, accs)
        per_chunk = arith.muli(self.threads, index_const(self.slots))
        loop = scf.ForOp(index_const(0), arith.ceildivui(self.row_len, per_chunk), index_const(1), accs)
        with ir.InsertionPoint(loop.body):
            chunk = self.chunk(arith.muli(loop.induction_variable, per_chunk))
            scf.YieldOp(body(chunk, list(loop.inner_iter_args)))
        return list(loop.results)

    def tiles(self, m: Member, chunk: _Chunk) -> list[list[list[ir.Value]]]:
        """The tile member's outputs on the chunk: [output][slot][element]."""
        key = ("member", id(m))
        if key not in chunk.memo:
            g = m.generic
            outs: list[list[list[ir.Value]]] = [[[] for _ in range(self.slots)] for _ in g.outputs]
            shared_calls = chunk.width % 4 == 0 and len(m.cols) == 1 and philox_linear_in(
                g.body, m.cols[0], lambda v: self.chain.extents.class_of(v) == self.chain.col_classes[0])
            for j in range(self.slots):
                cloned: list[list[ir.Operation]] = []
                for e in range(chunk.width):
                    cloned.append([])
                    values = clone_body(g.body, self.mapping(m, chunk, j, e),
                                        lambda d, e=e: self.index(m, chunk, j, e, d), cloned[-1])
                    for k, v in enumerate(values):
                        outs[k][j].append(v)
                if shared_calls:  # the row is aligned to the vector: so are the random indices
                    share_philox(cloned)
            chunk.memo[key] = outs
        return chunk.memo[key]

    def mapping(self, m: Member, chunk: _Chunk, j: int, e: int) -> dict:
        """The body's input arguments for element e of slot j."""
        mapping = {}
        env = self.env[id(m)]
        for o in m.generic.inputs:
            role = m.roles.get(id(o))
            if role == TILE:
                source = env[id(o)]
                slot = (self.load(o.value, TILE, chunk)[j] if source is None
                        else self.tiles(source[0], chunk)[source[1]][j])
                mapping[o.arg] = slot[e]
            elif role == COL:
                mapping[o.arg] = self.load(o.value, COL, chunk)[j][e]
            else:
                mapping[o.arg] = env[id(o)]
        return mapping

    def load(self, buffer: ir.Value, role: str, chunk: _Chunk) -> list[list[ir.Value]]:
        """The buffer's slots on the chunk, every slot loaded at once (invalid ones at column
        0 of a valid row, their values unused: the loads need no branch)."""
        key = ("load", buffer, role)
        if key not in chunk.memo:
            view = self.views[(buffer, role)]
            slots = []
            for col, ok in zip(chunk.cols, chunk.valid):
                col = arith.select(ok, col, index_const(0))
                loaded = load(view, [self.safe_row, col] if role == TILE else [col], chunk.width)
                slots.append([element(loaded, e) for e in range(chunk.width)])
            chunk.memo[key] = slots
        return chunk.memo[key]

    def store_tiles(self, m: Member, chunk: _Chunk) -> None:
        outs = self.tiles(m, chunk)
        for o, slots in zip(m.generic.outputs, outs):
            if o.value not in self.live_out:
                continue
            view = self.views[(o.value, TILE)]
            for j, values in enumerate(slots):
                write = scf.IfOp(chunk.valid[j])
                with ir.InsertionPoint(write.then_block):
                    store(values if chunk.width > 1 else values[0], view, [self.row, chunk.cols[j]])
                    scf.YieldOp([])

    # -- indices and the row's totals
    def row_index(self, m: Member, d: int) -> ir.Value:
        return self.row_ivs[m.rows.index(d)] if d in m.rows else index_const(0)

    def index(self, m: Member, chunk: _Chunk, j: int, e: int, d: int) -> ir.Value:
        if d in m.cols:
            col = arith.addi(chunk.cols[j], index_const(e)) if e else chunk.cols[j]
            return delinearize(col, self.col_ext)[m.cols.index(d)]
        return self.row_index(m, d)

    def across_row(self, combiners: list[ir.Operation], accs: list[ir.Value],
                   shared: list[ir.Value]) -> list[ir.Value]:
        """Every thread of the row gets the row's totals: butterflies within each warp (or
        group of lanes), then, where a row has several warps, their totals through shared
        memory, combined by every thread in warp order (the same order everywhere)."""
        accs = butterfly(combiners, accs, self.threads)
        warps = arith.divui(self.threads, index_const(S.WARP))
        several = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ugt, warps, index_const(1)),
                           [a.type for a in accs], has_else=True)
        with ir.InsertionPoint(several.then_block):
            warp = arith.divui(self.tx, index_const(S.WARP))
            lane0 = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, arith.remui(self.tx, index_const(S.WARP)),
                                        index_const(0)))
            with ir.InsertionPoint(lane0.then_block):
                for a, sh in zip(accs, shared):
                    memref.store(a, sh, [warp])
                scf.YieldOp([])
            gpu.barrier()
            first = arith.muli(arith.divui(self.tx, self.threads), warps)
            start = [identity(c.name, a.type) for c, a in zip(combiners, accs)]
            loop = scf.ForOp(index_const(0), warps, index_const(1), start)
            with ir.InsertionPoint(loop.body):
                w = arith.addi(first, loop.induction_variable)
                scf.YieldOp([combine(c, t, memref.load(sh, [w]))
                             for c, t, sh in zip(combiners, loop.inner_iter_args, shared)])
            scf.YieldOp(list(loop.results))
        with ir.InsertionPoint(several.else_block):
            scf.YieldOp(accs)
        return list(several.results)


def describe(chain: Chain) -> str:
    """The members' kinds in order, e.g. `row, reduce, tile, reduce, tile`."""
    return ", ".join(m.kind for m in chain.members)
