"""The normalization kernel: a chain of inner reductions and row-wise pointwise generics over
the same rows (LayerNorm's mean, centring, variance and scaling; softmax's max, exp, sum and
division) run as one kernel, each row read from global memory once and kept in registers.

A chain is a run of consecutive generics (host-only ops such as allocations may sit between
them) that all iterate the same rows and the same row elements: inner reductions
([rows, row] -> [rows]), tile ops ([rows, row] -> [rows, row]) and row ops ([rows] ->
[rows], e.g. the fills that initialize reductions). Equal extents are proved from the IR,
not assumed: loop dims that index one buffer's dims, allocations sized by `memref.dim` of
another buffer, equal static sizes (`LoopExtents`).

`threads` threads per row (a tier picked on the host from the row length), each holding
`slots` vectors of every row-sized value of its row; blocks of max(threads, min_block)
threads, also chosen on the host, so the kernel carries a register cap (`.maxnreg`) that
lets its largest block run. Each member runs in program order:
a tile op computes its slots from its inputs' slots (loaded on first use, or computed by
an earlier member), a reduction accumulates its slots, then `gpu.shuffle xor` butterflies
and shared memory give every thread of the row the total, a row op computes per row.
Buffers that only the chain uses (its temporaries) are neither stored nor, once the chain
is emitted, allocated (`drop_dead_buffers`). Rows too long to hold, or not aligned to the
vector, take the looping variant (rows of at most `loop_threads` threads): a pass over the
row per reduction, recomputing tile values from global memory, and a last pass writing the
outputs; a sum of exp(u - r) after a reduction giving r (softmax's after its maximum) is
accumulated in that reduction's pass (`online_sums`); in vectors from each row's
first element aligned in memory (`Variant.shifted`: the elements before and after them one
to a lane), or an element at a time where the buffers are not aligned alike. A static row
length that fits but is not a multiple of the vector is held with the same shift; or, where
that moves more in whole vectors (`_from_first_element`: sliced logits, read in the bodies,
and buffers whose rows start at multiples of the vector), its vectors start at each row's
first element, its last elements one a lane (`Variant.tail`), a buffer whose rows start
elsewhere in narrower vectors (`_narrow_widths`). The
variants are kernels of their own (the host picks one per call,
`gpu_kernels.ALTERNATIVE_ATTR`): ptxas compiles them in parallel, and the held rows do not
share a register budget with the looping code (bias-dropout-add-LayerNorm: 68 bytes of
spills in one kernel, none in the held variant's). H200, vocabulary rows (bench/models.py,
session 39): GPT-2 bf16-autocast cross-entropy backward 808 -> 497 us, GPT-2 f32 forward
550 -> 467 us, BERT f32 forward 398 -> 336 us.
Float32 exp is computed as Triton computes it, ex2.approx of x * log2(e)
(`exps_as_triton_does`): libdevice's expf, ten instructions an element, made bfloat16 rows
bound by instructions rather than memory.
Parameters come from `heuristics.normalization_heuristic`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from mlir import ir
from mlir.dialects import arith, memref

from mlirfuse.lowering.gpu import column_sums
from mlirfuse.lowering.gpu import heuristics as S
from mlirfuse.lowering.gpu.body_reads import BodyReads, host_conditions
from mlirfuse.lowering.gpu.kernels import (
    ZERO,
    Generic,
    LoopExtents,
    aligned,
    analyze,
    base_buffer,
    collapse,
    divisible,
    element_bytes,
    flat,
    guarded_launch,
    in_order,
    nested_ops,
    passive,
    product,
    set_kernel_attrs,
)
from mlirfuse.lowering.gpu.normalization_kernel import (
    COL,
    REDUCE,
    ROW,
    SCALAR,
    TILE,
    NormalizationKernel,
    exps_as_triton_does,
    row_reads,
)
from mlirfuse.lowering.gpu.online_sums import OnlineSum
from mlirfuse.lowering.gpu.reduction import match_inner_reduction, static_product
from mlirfuse.lowering.linalg_builders import index_const


# -- matching ---------------------------------------------------------------------------------
@dataclass
class Member:
    generic: Generic
    kind: str  # REDUCE, TILE or ROW
    rows: list[int]  # the loop dims numbering rows, in order
    cols: list[int]  # the loop dims within a row (none for a row op)
    roles: dict[int, str]  # id(operand) -> TILE, COL, ROW or SCALAR, for memref operands
    combiners: list[ir.Operation] = field(default_factory=list)  # a reduction's, per output
    # id(operand) -> positions in `rows` of the row loops it has, where it is broadcast over
    # the others (a [1, S, H] tile of [B, S, H] rows: GPT-2's position embeddings)
    broadcast: dict[int, list[int]] = field(default_factory=dict)
    # body op position (pre-order, `nested_ops`) -> the row buffer it loads at the member's
    # row, computed by an earlier member: given from registers (`_body_rows`)
    body_rows: dict[int, ir.Value] = field(default_factory=dict)


@dataclass
class Chain:
    members: list[Member]
    indices: list[int]  # the members' positions among the function's operations
    row_classes: list[Any]
    col_classes: list[Any]
    extents: "LoopExtents"

    def broadcast_rows(self) -> dict[ir.Value, list[int]]:
        """Buffer -> the positions of the row loops it has, for buffers broadcast over others."""
        return {o.value: m.broadcast[id(o)] for m in self.members for o in m.generic.operands if id(o) in m.broadcast}

    @property
    def reductions(self) -> list[Member]:
        return [m for m in self.members if m.kind == REDUCE]

    def static_row(self) -> int | None:
        return static_product(self.reductions[0].generic, self.reductions[0].cols)

    def static_rows(self) -> int | None:
        return static_product(self.reductions[0].generic, self.reductions[0].rows)

    def temporaries(self) -> set[ir.Value]:
        """Buffers only the chain's generics write and read: kept in registers, never stored."""
        chain_ops = {m.generic.op for m in self.members}
        written = {o.value for m in self.members for o in m.generic.outputs}
        return {v for v in written if not _escapes(v, chain_ops)}

    def held_bytes(self) -> int:
        """Bytes a thread holds per element of its row at the chain's fullest point: the tiles
        and columns (loaded, or computed by a member) live across a reduction, as the float32
        (or wider) values the members compute with, or, after the last reduction, those and
        the buffers first read there, as loaded (a buffer's slots load at once). The kernel's
        registers grow with it (`heuristics.normalization_heuristic`)."""
        produced: dict[ir.Value, int] = {}  # tile buffer -> the member writing it
        first: dict[ir.Value, int] = {}
        last: dict[ir.Value, int] = {}
        size: dict[ir.Value, int] = {}
        for i, m in enumerate(self.members):
            for o in m.generic.inputs:
                if o.is_memref and m.roles.get(id(o)) in (TILE, COL):
                    first.setdefault(o.value, produced.get(o.value, i))
                    last[o.value] = i
                    size[o.value] = max(size.get(o.value, 0), o.element_bytes)
            if m.kind == TILE:
                for o in m.generic.outputs:
                    produced[o.value] = i
        reductions = [i for i, m in enumerate(self.members) if m.kind == REDUCE]

        def across(r: int) -> int:
            return sum(max(4, size[v]) for v in first if first[v] <= r < last[v])

        fresh = sum(size[v] for v in first if first[v] > reductions[-1])
        return max(max(across(r) for r in reductions), across(reductions[-1]) + fresh)

    def vector_bytes(self) -> list[int]:
        """Element sizes of the operands read or written a vector at a time (not the
        temporaries, which registers hold: a bfloat16 LayerNorm's float32 sum is no reason
        for 8-byte loads of its bfloat16 inputs), and of the sources the members' bodies read
        along their rows (`row_reads`: bfloat16 logits sliced from a padded product, cast to
        float32 in registers, are the one access of a cross-entropy forward, whose rows were
        read 8 bytes at a time for want of any other operand; figures at
        `heuristics.LOOP_SLOTS`)."""
        temporaries = self.temporaries()
        return [o.element_bytes for m in self.members for o in m.generic.operands
                if o.is_memref and m.roles[id(o)] in (TILE, COL) and o.value not in temporaries] + \
            [element_bytes(ir.MemRefType(r.source.type).element_type)
             for found in row_reads(self, 2).values() for r in found.reads]


def _member(g: Generic, extents: LoopExtents, row_classes: list[Any], col_classes: list[Any]) -> Member | None:
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
    roles, broadcast = {}, {}
    for o in g.operands:
        if not o.is_memref:
            continue
        dims = [r for r in o.results if r != ZERO and r not in unit]
        role = {tuple(rows + cols): TILE, tuple(cols): COL, tuple(rows): ROW, (): SCALAR}.get(tuple(dims))
        if role is None and not o.is_output:  # broadcast over some row loops
            prefix = dims[:len(dims) - len(cols)] if cols and dims[len(dims) - len(cols):] == cols else dims
            if prefix and in_order(prefix, rows):
                role = TILE if prefix is not dims else ROW
                broadcast[id(o)] = [rows.index(d) for d in prefix]
        if role is None or (o.is_output and role != (TILE if kind == TILE else ROW)):
            return None
        if o.row_strided and (role != TILE or id(o) in broadcast):
            return None  # a row-strided buffer is viewed as [rows, row] only
        if o.is_output and kind != REDUCE and list(o.arg.uses):
            return None  # the body reads the old output value
        roles[id(o)] = role
    if kind == ROW and any(r in (TILE, COL) for r in roles.values()):
        return None
    return Member(g, kind, rows, cols, roles, combiners, broadcast)


# Not taken: a chain whose reductions read no tile from memory (a cross-entropy's one-hot row
# sums, from the labels) leaving its last tile op to the column reduction that sums it, as that
# kernel's prologue (BERT's masked-LM gradient and decoder bias sum, [4096, 30522]). H200,
# session 57, bench/models.py region us, chain + column reduction -> row chain + column kernel
# computing the gradient: float32 519.8 -> 602.7 (the column kernel's threads, each walking rows
# of three streams, read slower than the chain's); under bf16 autocast the region's gradient is
# two generics, and 474.5 -> 606.0 with one of them a kernel of its own.
def find_chains(ops: list[ir.Operation]) -> list[Chain]:
    """Maximal runs of consecutive generics around each inner reduction that iterate its rows
    and row elements; kept where they hold a tile op or several reductions."""
    generics = {}
    for i, op in enumerate(ops):
        if op.name == "linalg.generic":
            g = analyze(op, row_strided=True)  # (tiles of a padded buffer's interior)
            if not isinstance(g, str):
                generics[i] = g
    extents = LoopExtents(ops, generics)
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
                elif not passive(ops[j]):
                    break
                j += step
        indices = sorted(found)
        members = [found[k] for k in indices]
        # the members before the first that is not row-local (it runs after the kernel, as a
        # kernel of its own, reading what the chain stored)
        local = next(k for k in range(len(members), -1, -1) if _row_local(members[:k]))  # (prefixes of one stay one)
        indices, members = indices[:local], members[:local]
        kinds = [m.kind for m in members]
        if REDUCE not in kinds or (TILE not in kinds and kinds.count(REDUCE) < 2) or _aliased(members) \
                or _row_read_then_written(members):
            continue  # a lone reduction (its fill folded in) keeps the inner-reduction kernel
        body_rows = _body_rows(members)
        if body_rows is None:
            continue
        for m, rows_read in zip(members, body_rows):
            m.body_rows = rows_read
        taken.update(range(indices[0], indices[-1] + 1))
        chains.append(Chain(members, indices, rows, cols, extents))
    return chains


def _aliased(members: list[Member]) -> bool:
    """A member reads or writes, through another view, a buffer a member writes: the chain
    passes values between members by buffer, so that access would bypass it (and race
    with the other threads of the row)."""
    written = {o.value for m in members for o in m.generic.outputs}
    bases = {base_buffer(v) for v in written}
    return any(o.is_memref and o.value not in written and base_buffer(o.value) in bases
               for m in members for o in m.generic.operands)


def _row_read_then_written(members: list[Member]) -> bool:
    """A row or tile member writes a buffer of row values that it or a member after the last
    reduction read from memory: lane 0 of the row stores it while the row's other lanes may
    still load it (a row op updating a row buffer in place, which the chain did not compute).
    A reduction's combine orders its lanes' earlier loads before its store (the barrier or the
    warp's shuffles), and a reduction reads its own initial value before it."""
    read: set = set()  # buffers of row values read from memory since the last reduction
    computed: set = set()  # buffers the chain wrote: members read them from registers
    for m in members:
        if m.kind == REDUCE:
            read.clear()
        else:
            read |= {o.value for o in m.generic.inputs
                     if o.is_memref and m.roles.get(id(o)) == ROW and o.value not in computed}
            if any(o.value in read for o in m.generic.outputs):
                return True
        computed |= {o.value for o in m.generic.outputs}
    return False


def _body_rows(members: list[Member]) -> list[dict[int, ir.Value]] | None:
    """Per member, its body's reads of buffers the chain writes (a gather, or a recomputed
    log_softmax, reading its row's maximum at computed indices), by place in the body
    (`Member.body_rows`): each must be of a row value a member before it computed, at the
    reading member's own row, which the kernel then gives the body from registers. None
    where another such read makes the chain unfit: the chain keeps
    values in registers and stores a row value once, from the row's lane 0, with nothing
    ordering that store before another thread's load, so the body would read memory another
    thread writes (or, for a temporary, memory no one writes). Fuzz seed 780106 on the H200:
    x.gather(2, x.argmax(2, keepdim=True)) over rows of one element, 128 rows a block, read
    its index from memory; the threads past the last row, computing on row 0, read row 0's
    index before thread 0 had stored it, and the gather's check asserted."""
    writers: dict[ir.Value, list[int]] = {}
    for i, m in enumerate(members):
        for o in m.generic.outputs:
            writers.setdefault(o.value, []).append(i)
    bases = {base_buffer(v) for v in writers}
    found: list[dict[int, ir.Value]] = []
    for i, m in enumerate(members):
        found.append({})
        for position, op, v in _captured_memrefs(m.generic.body):
            if base_buffer(v) not in bases:
                continue
            if not (op.name == "memref.load" and _reads_own_row(op, m)
                    and writers.get(v) and max(writers[v]) < i
                    and all(members[w].kind != TILE for w in writers[v])):
                return None
            found[-1][position] = v
    return found


def _reads_own_row(load: ir.Operation, m: Member) -> bool:
    """`memref.load %buffer[...]` in m's body reads the element of m's row: its indices are
    m's row loops in order (`linalg.index`), and 0 where the buffer's dim is 1."""
    buffer, indices = load.operands[0], list(load.operands)[1:]
    shape = ir.MemRefType(buffer.type).shape
    rows = []
    for size, v in zip(shape, indices):
        owner = v.owner
        op = None if isinstance(owner, ir.Block) else owner.operation
        if op is not None and op.name == "linalg.index":
            rows.append(ir.IntegerAttr(op.attributes["dim"]).value)
        elif not (size == 1 and op is not None and op.name == "arith.constant"
                  and ir.IntegerAttr(op.attributes["value"]).value == 0):
            return False
    return rows == m.rows


def _independent(g: Generic, members: list[Member]) -> bool:
    """A generic after some chain members that the chain may skip: the chain's kernel runs
    where its last member is, so `g` then runs before the members found so far. Allowed
    where it reads nothing they write and writes nothing they read or write; an inner
    reduction is not skipped (it would start a chain of its own)."""
    if not isinstance(match_inner_reduction(g), str):
        return False
    written = {base_buffer(o.value) for m in members for o in m.generic.outputs}
    touched = written | {base_buffer(o.value) for m in members for o in m.generic.inputs if o.is_memref}
    reads = {base_buffer(o.value) for o in g.inputs if o.is_memref} | \
        {base_buffer(o.value) for o in g.outputs if list(o.arg.uses)} | _read_in_body(g)
    return not reads & written and not {base_buffer(o.value) for o in g.outputs} & touched


def _read_in_body(g: Generic) -> set:
    """The buffers `g`'s body reads at computed indices (a cat's or gather's sources, captured
    from outside the body: not operands). Fuzz seed 782456 on the H200: log_softmax(x, 1)
    catted with itself, and its exp (saved for the backward) after the cat; the chain skipped
    the cat, whose body reads the chain's row maximum and log-sum, and so ran it first, on
    memory nothing had written yet (2.4e3 off)."""
    return {base_buffer(v) for _, _, v in _captured_memrefs(g.body)}


def _captured_values(body: ir.Block) -> set[ir.Value]:
    """The values the body's ops (nested ones too) use that are defined outside the body."""
    return {v for _, _, v in _captured(body)}


def _captured_memrefs(body: ir.Block) -> list[tuple[int, ir.Operation, ir.Value]]:
    """(position in pre-order, op, memref) for each operand of the body's ops (nested ones
    too) that is a memref defined outside the body."""
    return [(p, op, v) for p, op, v in _captured(body) if isinstance(v.type, ir.MemRefType)]


def _captured(body: ir.Block) -> list[tuple[int, ir.Operation, ir.Value]]:
    found = []
    inside = set(body.arguments)
    for position, op in enumerate(nested_ops(body)):
        for region in op.regions:
            for block in region.blocks:
                inside.update(block.arguments)
        found += [(position, op, v) for v in op.operands if v not in inside]
        inside.update(op.results)
    return found


def _row_local(members: list[Member]) -> bool:
    """No member writes a buffer that a member reads as a column vector or a scalar (those
    are read by every row: a write by one row would race with the others), or broadcast over
    some row loops (the values of other rows: a row sum read at [b, c, j], j along the row,
    emulator fuzz seed 920938; the kernel holds its own row's alone)."""
    written = {o.value for m in members for o in m.generic.outputs}
    return not any(o.value in written for m in members for o in m.generic.inputs
                   if o.is_memref and (m.roles[id(o)] in (COL, SCALAR) or id(o) in m.broadcast))


# -- emission --------------------------------------------------------------------------------
def emit_chain(ops: list[ir.Operation], chain: Chain, params: S.NormalizationParams,
               online: dict[int, OnlineSum], sums: Sequence[column_sums.ColumnSum] = ()) -> list[Variant]:
    """Replace the chain's generics with one kernel, placed where the last one was (every
    buffer the chain uses is defined by then): variants, each launched under its guard, rows
    held in registers or (too long, unaligned) the looping variant, which sums the chain's
    `online_sums(chain)` online. `sums`: column reductions over the chain's rows that a
    held kernel computes (`column_sums`: launched first, and the held kernel without them
    after it, where the grid is smaller; the column reductions apart where another kernel
    runs). Returns the variants launched, in order."""
    last = chain.members[-1].generic.op
    first_reduction = chain.reductions[0]
    with ir.InsertionPoint(last), last.location:
        g = first_reduction.generic
        ext = g.extents()
        row_ext = [ext[d] for d in first_reduction.rows]
        col_ext = [ext[d] for d in first_reduction.cols]
        rows, row_len = product(row_ext), product(col_ext)
        written = {o.value for m in chain.members for o in m.generic.outputs}
        temporaries = chain.temporaries()  # kept in registers: no view, no alignment check
        live_out = written - temporaries
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
        laid = _row_laid(chain, views, vectored)
        found = row_reads(chain, vec)  # in the members' bodies
        reads = bool(found)  # a lead where no tile is laid
        # rows of more threads loop where the looping variant reads them once too, in vectors
        single = _single_pass(chain, online, live_out) and (vec == 1 or bool(laid) or reads)
        if single:
            persistent = arith.andi(persistent, arith.cmpi(arith.CmpIPredicate.ule, threads,
                                                           index_const(params.loop_threads)))
        if vec > 1:
            persistent = arith.andi(persistent, arith.andi(divisible(row_len, vec), aligned(
                list(vectored), [vec * o.element_bytes for o in vectored.values()])))
        # the bodies' reads along rows, checked on the host for the variants whose rows start
        # at vector boundaries: those load them a vector at a time, unconditionally
        reads_ok = _body_reads_aligned(found, vec, row_len) if reads else None
        if reads_ok is not None:
            persistent = arith.andi(persistent, reads_ok)
        block = arith.maxui(threads, index_const(params.min_block))  # params.block_for, on the host
        rows_per_block = arith.divui(block, threads)
        grid = arith.ceildivui(rows, rows_per_block)
        workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
        # a buffer a reduction output, then one an online sum (its rescaled total)
        shared = [ir.MemRefType.get([params.block // S.WARP], o.type.element_type, memory_space=workgroup)
                  for m in chain.reductions for o in m.generic.outputs] + \
                 [ir.MemRefType.get([params.block // S.WARP], s.member.generic.outputs[0].type.element_type,
                                    memory_space=workgroup) for s in online.values()]
        nonempty = arith.cmpi(arith.CmpIPredicate.ugt, rows, index_const(0))
        # Kernels of which the host launches one: compiled apart (ptxas compiles them in
        # parallel, and the held rows' registers are not the looping variant's).
        plan = _plan(chain.static_row(), params, single)
        if plan and plan[0].shifted and not laid and not reads:
            plan = [LOOPING]  # no tile laid out as the rows to align them by
        true = arith.constant(ir.IntegerType.get_signless(1), 1)
        widths: dict[ir.Value, int] = {}  # the tail variant's narrower buffers
        if plan is None and (vec == 1 or not laid and not reads):
            variants = [(HELD, persistent), (LOOPING, arith.xori(persistent, true))]
        elif plan is None:  # held rows; else vectors from each row's first aligned element; else scalars
            fits = true  # (rows aligned by a body's read: the kernel checks them)
            if laid:
                persistent = arith.andi(persistent, _rows_aligned(chain, views, vectored, vec, False))
                fits = arith.andi(aligned(list(vectored), [vec * o.element_bytes for o in vectored.values()]),
                                  _rows_aligned(chain, views, vectored, vec, True))
            other = arith.xori(persistent, true)
            shifted = arith.andi(arith.andi(other, fits), arith.andi(
                arith.cmpi(arith.CmpIPredicate.uge, threads, index_const(2 * vec)),
                arith.cmpi(arith.CmpIPredicate.ugt, row_len, index_const(0))))
            variants = [(HELD, persistent), (Variant(True, True, True), shifted),
                        (LOOPING, arith.andi(other, arith.xori(shifted, true)))]
        elif len(plan) == 1:
            variants = [(plan[0], None)]
        else:
            narrow = _narrow_widths(views, vectored, vec)
            if plan[0].shifted and _from_first_element(vectored, views, laid, found, narrow, vec):
                widths = narrow
                plan[0] = Variant(plan[0].looping, True, True, True, tuple(sorted(widths.values())))
            vector_ok = arith.andi(aligned(list(vectored), [widths.get(v, vec) * o.element_bytes
                                                            for v, o in vectored.items()]),
                                   _rows_aligned(chain, views, vectored, vec, plan[0].shifted and not plan[0].tail,
                                                 widths if plan[0].tail else {}))
            if reads_ok is not None and (plan[0].tail or not plan[0].shifted):
                vector_ok = arith.andi(vector_ok, reads_ok)
            variants = [(plan[0], vector_ok), (plan[1], arith.xori(vector_ok, true))]
        # the looping variants' rows: at most `loop_threads` threads each (more rows a block)
        loop_threads = arith.minui(threads, index_const(params.loop_threads))
        loop_block = arith.maxui(loop_threads, index_const(params.min_block))
        loop_rows_per_block = arith.divui(loop_block, loop_threads)
        loop_grid = arith.ceildivui(rows, loop_rows_per_block)
        layouts = {False: (threads, rows_per_block, grid, block),
                   True: (loop_threads, loop_rows_per_block, loop_grid, loop_block)}
        fused = 0 if column_sums.in_held(list(sums), params, variants[0][0]) else None  # the launch computing them
        sums_registers = column_sums.registers(list(sums), params)[0]
        if fused is not None:  # blocks looping over the row groups, each block's partials a row
            target = min(s.params.target_blocks for s in sums)
            sums_grid = arith.minui(grid, index_const(target))
            # where the blocks loop over enough row groups: else the held kernel without them
            many = arith.cmpi(arith.CmpIPredicate.uge, grid, index_const(column_sums.GROUPS_PER_BLOCK * target))
            when = variants[0][1]
            held_when = arith.andi(many, when) if when is not None else many
            variants = [(HELD, held_when), (HELD, arith.andi(arith.xori(many, true), when) if when is not None
                                             else arith.xori(many, true))] + variants[1:]
            fused_when = arith.andi(nonempty, held_when)
            # (no rows where another kernel runs: an unused workspace of long rows is large)
            spaces = column_sums.workspaces(list(sums), arith.select(fused_when, sums_grid, index_const(0)), row_len)
        launches = []
        for k, (variant, when) in enumerate(variants):
            _, _, grid_v, block_v = layouts[variant.looping]
            if k == fused:
                grid_v = sums_grid
            extra = column_sums.shared_types(list(sums), params) if k == fused else []  # (after the chain's)
            body, _ = guarded_launch(chain.members[-1].generic, "normalization",
                                     arith.andi(nonempty, when) if when is not None else nonempty,
                                     grid_v, block_v, shared + extra, alternative=k > 0)
            # The block size is the host's choice: the kernel must fit `params.block` threads (the
            # sums' kernel, the largest block its registers allow: `column_sums.in_held`).
            set_kernel_attrs(body.owner, {"nvvm.maxnreg": ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), sums_registers if k == fused else params.max_registers)})
            launches.append((body, variant))
    for k, (body, variant) in enumerate(launches):
        threads_v, rows_per_block_v, _, _ = layouts[variant.looping]
        with ir.InsertionPoint(body.operations[len(body.operations) - 1]), last.location:
            def make(bx: ir.Value, body: ir.Block = body, threads_v: ir.Value = threads_v,
                     rows_per_block_v: ir.Value = rows_per_block_v) -> NormalizationKernel:
                return NormalizationKernel(chain, params, views, live_out, row_ext, col_ext, rows, row_len,
                                           threads_v, rows_per_block_v, list(body.arguments)[12:],
                                           bx, body.arguments[3], online)

            width = vec if variant.vectors else 1
            slots = params.loop_slots if variant.looping else params.slots

            def run(kernel: NormalizationKernel, variant: Variant = variant, width: int = width,
                    slots: int = slots) -> None:
                kernel.run(width, slots, looping=variant.looping, reads=found if variant.vectors else {},
                           lead=(laid[0] if laid else True) if variant.shifted and not variant.tail else None,
                           reads_checked=reads_ok is not None and (variant.tail or not variant.shifted),
                           tail=variant.tail, widths=widths if variant.tail else {})

            if k == fused:
                column_sums.run_held(make, run, list(sums), rows, rows_per_block_v, threads_v, row_len,
                                     [w for per_sum in spaces for w in per_sum],
                                     list(body.arguments)[12 + len(shared):], body.arguments[0], body.arguments[3],
                                     body.arguments[6], slots, width)
            else:
                run(make(body.arguments[0]))
        exps_as_triton_does(body.owner)
    for k, s in enumerate(sums):  # (after the kernels: the sums' bodies were cloned into one)
        if fused is None:  # a kernel of its own, where it was
            column_sums.apart(s)
            continue
        if s.position < chain.indices[-1]:
            s.match.generic.op.move_before(last)
        column_sums.finish(s, fused_when, spaces[k])  # (by position: comparing sums reads erased ops)
    for m in reversed(chain.members):
        m.generic.op.erase()
    return [variant for _, variant in launches]


def _body_reads_aligned(found: dict[int, BodyReads], vec: int, row_len: ir.Value) -> ir.Value:
    """Host: every read along rows in the members' bodies (`found`: `row_reads`) is aligned to the
    vector and inside its source's rows at any row (`body_reads.host_conditions`). Checked in
    the kernel instead, row by row, a read is a branch between a vector load and scalar loads
    of the same elements, which LLVM merged into the scalar loads: GPT-2's embedding rows,
    gathered in its first LayerNorm's kernel, were 2-byte loads. H200, session 60, that
    kernel over [8, 512, 768] bfloat16 rows: 15.8 -> 10.7 us from a 1024-row table; from
    GPT-2's 50257 rows 19.0 -> 18.4 us, most of which is the write-back of the 77 MB padded
    table the region's other kernel writes just before it (all ids equal take as long)."""
    ok = arith.constant(ir.IntegerType.get_signless(1), 1)
    for reads in found.values():
        ok = arith.andi(ok, host_conditions(reads, vec, row_len))
    return ok


def _row_laid(chain: Chain, views: dict, vectored: dict) -> list[ir.Value]:
    """The [rows, row] views of the vectored tiles not broadcast over rows (their rows are
    the chain's rows), inputs first."""
    return [views[(v, TILE)] for v in _row_laid_buffers(chain, views, vectored)]


def _row_laid_buffers(chain: Chain, views: dict, vectored: dict) -> list[ir.Value]:
    broadcast = chain.broadcast_rows()
    laid = [(o.is_output, k, v) for k, (v, o) in enumerate(vectored.items())
            if (v, TILE) in views and v not in broadcast]
    return [v for _, _, v in sorted(laid, key=lambda t: t[:2])]


def _rows_aligned(chain: Chain, views: dict, vectored: dict, vec: int, shifted: bool,
                  widths: dict[ir.Value, int] | None = None) -> ir.Value:
    """Host: every vector the kernel reads or writes is aligned, given aligned base pointers.
    Unshifted: every view's offset and row stride are multiples of the vector (of the buffer's
    narrower one in `widths`). Shifted (a row's vectors start at the first tile's first aligned
    element): the tiles laid out as the rows have offsets and row strides congruent to the
    first's (their rows are misaligned alike); column vectors and broadcast tiles are read an
    element at a time."""
    widths = widths or {}
    broadcast = chain.broadcast_rows()
    laid = [(v, views[(v, TILE)]) for v in _row_laid_buffers(chain, views, vectored)]
    others = [] if shifted else [(v, view) for (v, role), view in views.items()
                                 if v in vectored and (role == COL or v in broadcast)]
    ok = arith.constant(ir.IntegerType.get_signless(1), 1)

    def layout(view: ir.Value) -> tuple[ir.Value, ir.Value | None]:
        rank = ir.MemRefType(view.type).rank
        meta = memref.ExtractStridedMetadataOp(view).results
        return meta[1], (meta[2 + rank] if rank == 2 else None)  # offset, row stride

    def same(a: ir.Value, b: ir.Value, width: int) -> ir.Value:
        w = index_const(width)
        return arith.cmpi(arith.CmpIPredicate.eq, arith.remui(a, w), arith.remui(b, w))

    zero = index_const(0)
    reference = layout(laid[0][1]) if shifted and laid else None
    for v, view in (laid[1:] if shifted else laid) + others:
        offset, stride = layout(view)
        width = widths.get(v, vec)
        ok = arith.andi(ok, same(offset, reference[0] if reference else zero, width))
        if stride is not None:
            ok = arith.andi(ok, same(stride, reference[1] if reference else zero, width))
    return ok


def _static_starts(view: ir.Value) -> list[int | None]:
    """The view's offset and (a [rows, row] view) row stride where static, else None."""
    t = ir.MemRefType(view.type)
    strides, offset = t.get_strides_and_offset()
    known = [offset] + (strides[:1] if t.rank == 2 else [])
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    return [None if x == dynamic else x for x in known]


def _narrow_widths(views: dict, vectored: dict, vec: int) -> dict[ir.Value, int]:
    """The buffers whose rows, by their static layout, cannot all start at a multiple of the
    vector: buffer -> the widest power of two dividing the vector that they do start at (BERT's
    bfloat16 rows of 30522, 61044 bytes apart: vectors of 2). Dynamic offsets and strides
    are left to the host's check."""
    widths: dict[ir.Value, int] = {}
    for (v, _), view in views.items():
        if v not in vectored:
            continue
        w = vec
        for x in _static_starts(view):
            while x is not None and x % w:
                w //= 2
        if w < vec:
            widths[v] = min(w, widths.get(v, vec))
    return widths


def _from_first_element(vectored: dict, views: dict, laid: list[ir.Value], found: dict, widths: dict,
                        vec: int) -> bool:
    """A static row that is not a multiple of the vector long is better read in vectors from
    each row's first element (the last elements one a lane, `Variant.tail`) than from the
    first tile's first aligned element (`Variant.shifted`), by the bytes of a row element
    that each moves in whole vectors, a store's counted twice (an element-at-a-time store
    writes part of each sector: the cross-entropy backward of bench/cross_entropy_micro.py,
    its gradient stored an element at a time and its logits read in vectors, took 1945 us for
    the step's backward where the other way round took 1179). The tail variant moves the
    bodies' reads along rows (checked on the host, as the vectors start at row starts) and
    the tiles whose rows start at multiples of the vector; the shifted one, no body read (its
    check, row by row in the kernel, became scalar loads: LLVM merged the vector branch into
    the other) and the tiles only where all of them start alike (else its element-at-a-time
    twin runs). On a tie, the tail variant where every start is static (it also reads column
    vectors and broadcast tiles in vectors; the shifted one, an element at a time)."""
    by_view = {view: v for (v, _), view in views.items()}
    starts = [_static_starts(view) for view in laid]
    static = all(x is not None for s in starts for x in s)
    alike = not static or len({tuple(x % vec for x in s) for s in starts}) <= 1

    def moved(v: ir.Value) -> int:
        o = vectored[v]
        return o.element_bytes * (2 if o.is_output else 1)
    shifted = sum(moved(by_view[view]) for view in laid) if alike else 0
    tail = sum(moved(by_view[view]) for view in laid if by_view[view] not in widths)
    tail += sum(element_bytes(ir.MemRefType(r.source.type).element_type) for reads in found.values()
                for r in reads.reads)
    return tail > shifted or tail == shifted and static


@dataclass(frozen=True)
class Variant:
    """One kernel of a chain: rows held in registers or `looping` over chunks, in vectors or
    an element at a time, `shifted` (rows whose length is not a multiple of the vector:
    vectors from each row's first vector boundary, the elements around them one a lane)."""

    looping: bool
    vectors: bool
    shifted: bool = False
    tail: bool = False  # shifted: vectors from each row's first element, the last elements one a lane
    narrow: tuple[int, ...] = ()  # tail: the widths of the buffers read or written in narrower vectors

    def describe(self) -> str:
        if self.tail:
            narrow = ", ".join(f"a buffer in vectors of {w}" if w > 1 else "a buffer an element at a time"
                               for w in self.narrow)
            return ("rows held" if not self.looping else "the looping variant") + \
                ", vectors from each row's first element, its last elements one a lane" + \
                (f" ({narrow})" if narrow else "")
        if not self.looping:
            return "rows held" + (", vectors from each row's first aligned element" if self.shifted else "")
        if not self.vectors:
            return "the looping variant, for rows too long to hold or unaligned"
        return "the looping variant in vectors" + (" from each row's first aligned element" if self.shifted else "")


HELD, LOOPING = Variant(False, True), Variant(True, False)


def _plan(static: int | None, params: S.NormalizationParams, single: bool) -> list[Variant] | None:
    """The kernels for a row of `static` elements (its tier known): the first where the
    buffers are aligned to the vector, the second (if any) otherwise. None for a row length
    known at run time only (`emit_chain`: rows held where the length is a multiple of the
    vector and the buffers aligned; else the looping variant in vectors from each row's
    first aligned element; else an element at a time). `single`: the looping variant reads
    the row once (`_single_pass`), so it takes the rows of more than `loop_threads` threads."""
    if static is None:
        return None
    vec = params.vector
    threads = params.tiers[0].threads
    held = 0 < static <= threads * vec * params.slots and not (single and threads > params.loop_threads)
    if static == 0:
        return [LOOPING]
    if vec == 1:
        return [HELD] if held else [LOOPING]
    shifted = static % vec != 0
    if shifted and threads < 2 * vec:  # too few lanes for the elements around the vectors
        return [LOOPING]
    return [Variant(not held, True, shifted), LOOPING]


def _single_pass(chain: Chain, online: dict[int, OnlineSum], live_out: set) -> bool:
    """The looping variant reads each row once: one reduction with a pass of its own (the
    others summed online in it, `OnlineSum`) and no tile output (no last pass), as a
    cross-entropy's forward (max, sum of exp; row values out). Such rows need not be held: a
    row of 1024 threads held, one block an SM, left the SM idle through each row's barriers
    and tail, where rows of 256 threads loop with 4 blocks an SM in flight."""
    partners = {id(s.member) for s in online.values()}
    passes = sum(1 for m in chain.reductions if id(m) not in partners and _pass_reads(chain, m))
    stores = any(o.value in live_out for m in chain.members if m.kind == TILE for o in m.generic.outputs)
    return passes + stores <= 1


def _pass_reads(chain: Chain, member: Member) -> bool:
    """The looping variant's pass for `member` reads memory along the row: it, or a tile
    member before it whose output it reads (recomputed in the pass), reads a tile or column
    operand that no member before it writes, or a source at indices its body computes (not a
    row value an earlier member gives from registers). A pass that reads nothing costs no pass
    over memory: the sum of a cross-entropy backward's one-hot term (iota compared with each
    row's target, times the row's scale) before the last pass writes the gradient. BERT's
    bfloat16 rows of 30522 were held in blocks of 1024 threads, one block an SM, for want of
    it (`_single_pass`). (H200, session 81: its backward kernel took 262 us either way; its
    buffers' rows are not aligned alike, 61044 and 61056 bytes apart, so both variants read
    them an element at a time.)"""
    position = {id(m): k for k, m in enumerate(chain.members)}

    def reads(m: Member) -> bool:
        if any(p not in m.body_rows for p, _, _ in _captured_memrefs(m.generic.body)):
            return True
        earlier = chain.members[:position[id(m)]]
        for o in m.generic.inputs:
            if not o.is_memref or m.roles.get(id(o)) not in (TILE, COL):
                continue
            producer = next((k for k in reversed(earlier) if k.kind == TILE
                             and any(out.value == o.value for out in k.generic.outputs)), None)
            if producer is None or reads(producer):
                return True
        return False
    return reads(member)


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


def describe(chain: Chain) -> str:
    """The members' kinds in order, e.g. `row, reduce, tile, reduce, tile`."""
    return ", ".join(m.kind for m in chain.members)
