"""The normalization kernel's body (`normalization` finds the chain and builds the launch
around it): per thread, a row's chunks of every member held in registers, reductions
combined by shuffles and shared memory, the looping variant's passes over the row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, gpu, math, memref, scf, vector

from mlirfuse.lowering.gpu import heuristics as S
from mlirfuse.lowering.gpu.body_reads import BodyReads, Hoisted, contiguous_reads
from mlirfuse.lowering.gpu.combiners import MAXIMUM, butterfly, identity
from mlirfuse.lowering.gpu.kernels import (
    clone_body,
    combine,
    delinearize,
    element,
    element_bytes,
    load,
    store,
)
from mlirfuse.lowering.gpu.philox_sharing import philox_linear_in, share_philox
from mlirfuse.lowering.linalg_builders import index_const
from mlirfuse.passes.common import walk_ops

if TYPE_CHECKING:
    from mlirfuse.lowering.gpu.kernels import Operand
    from mlirfuse.lowering.gpu.normalization import Chain, Member
    from mlirfuse.lowering.gpu.online_sums import OnlineSum

# A member's kind (REDUCE, TILE, ROW) and an operand's role (TILE, COL, ROW, SCALAR).
REDUCE, TILE, ROW, COL, SCALAR = "reduce", "tile", "row", "col", "scalar"
UNKNOWN = object()  # an input's value not known yet (`inputs`): left out of a body's mapping


def row_reads(chain: Chain, width: int) -> dict[int, BodyReads]:
    """id(member) -> its body's reads along the rows that `width` consecutive elements take
    as one vector (`body_reads`: a slice, pad or gather of a source the body captures), for
    the members whose loop runs along the row; empty where `width` is 1."""
    found = {}
    for m in chain.members if width > 1 else []:
        if m.kind != ROW and m.cols == [m.generic.n_loops - 1]:
            reads = contiguous_reads(m.generic, width)
            if reads:
                found[id(m)] = reads
    return found


@dataclass
class Chunk:
    """The row elements a thread handles at once: per slot, the column of its first element
    and whether it is inside the row; `memo` holds what was loaded or computed for them."""

    width: int
    cols: list[ir.Value]
    valid: list[ir.Value]
    memo: dict = field(default_factory=dict)


class NormalizationKernel:
    def __init__(self, chain: Chain, params: S.NormalizationParams, views: dict, live_out: set,
                 row_ext: list[ir.Value], col_ext: list[ir.Value], rows: ir.Value, row_len: ir.Value,
                 threads: ir.Value, rows_per_block: ir.Value, shared: list[ir.Value], bx: ir.Value, tx: ir.Value,
                 online: dict[int, OnlineSum]):
        self.chain, self.p, self.views, self.live_out = chain, params, views, live_out
        self.written = {o.value for m in chain.members for o in m.generic.outputs}  # buffers the chain writes
        self.col_ext, self.row_len, self.threads, self.tx = col_ext, row_len, threads, tx
        self.online = online
        # the shared buffers: each reduction's, one an output, then each online sum's extra one
        buffers = iter(shared)
        self.shared = {id(m): [next(buffers) for _ in m.generic.outputs] for m in chain.reductions}
        self.online_shared = {k: next(buffers) for k in online}
        self.lane = arith.remui(tx, threads)
        self.row = arith.addi(arith.muli(bx, rows_per_block), arith.divui(tx, threads))
        self.row_ok = arith.cmpi(arith.CmpIPredicate.ult, self.row, rows)
        self.safe_row = arith.select(self.row_ok, self.row, index_const(0))  # rows > 0: in bounds
        # The row's loop indices as the members' bodies see them: a thread past the last row
        # computes on row 0 (nothing it computes is stored), so what a body reads at its
        # indices (a slice's source, a gathered label) stays in bounds.
        self.row_ivs = delinearize(self.safe_row, row_ext)
        # Buffers broadcast over some row loops: their row at this (safe) row, once per thread.
        self.broadcast_rows: dict[ir.Value, ir.Value] = {}
        safe_ivs = None
        for buffer, positions in chain.broadcast_rows().items():
            safe_ivs = safe_ivs or delinearize(self.safe_row, row_ext)
            linear = index_const(0)
            for p in positions:
                linear = arith.addi(arith.muli(linear, row_ext[p]), safe_ivs[p])
            self.broadcast_rows[buffer] = linear

    # -- the chain, member by member
    def run(self, width: int, slots: int, looping: bool, reads: dict[int, BodyReads],
            lead: ir.Value | bool | None = None, reads_checked: bool = False, tail: bool = False,
            widths: dict[ir.Value, int] | None = None) -> None:
        """Emit the chain: `slots` vectors of `width` elements a thread, the whole row held
        (or, `looping`, a chunk at a time). `lead`: rows are shifted (their length is not a
        multiple of `width`): a row's vectors start at the first element of the [rows, row]
        view `lead` that is a multiple of `width` in memory (`start` < width elements in; the
        host checked that the other tiles laid out as rows are misaligned alike); the `start`
        elements before and the fewer than `width` after the vectors go one to a lane of an
        edge chunk (the kernel then needs threads >= 2 width). `lead` True: no tile is in memory
        as rows; the first of the bodies' reads along rows (`reads`: `row_reads` at `width`)
        sets the start. `tail` (`Variant.tail`, no `lead`): the vectors start at each row's first
        element (the host checked that every row of every buffer starts at a multiple of its
        width: `widths` gives the buffers read or written in narrower vectors than `width`).
        Reads along rows in the members' bodies are vector loads: unconditionally where the
        host found them aligned at every row (`reads_checked`), else where their row is
        aligned to the vectors (checked in the kernel, row by row), else `width` scalar loads."""
        self.width, self.slots, self.looping, self.shifted = width, slots, looping, lead is not None or tail
        self.tail = tail
        self.reads_checked = reads_checked
        self.widths = widths or {}
        self.start, self.end, self.edge = index_const(0), self.row_len, None
        self.reads = reads  # id(member) -> its body's reads along rows (vector chunks only)
        if self.tail:
            w = index_const(width)
            self.end = arith.muli(arith.divui(self.row_len, w), w)
            self.edge = self.edge_chunk()
        elif lead is not None:
            w = index_const(width)
            if lead is True:
                m = next(m for m in self.chain.members if id(m) in self.reads)
                first = self.read_row_start(m, self.reads[id(m)].reads[0], Hoisted(
                    self.reads[id(m)], lambda d, m=m: self.row_index(m, d)))
            else:
                meta = memref.ExtractStridedMetadataOp(lead).results  # base, offset, sizes, strides
                first = arith.addi(meta[1], arith.muli(self.safe_row, meta[4]))
            self.start = arith.remui(arith.subi(w, arith.remui(first, w)), w)
            self.end = arith.addi(self.start, arith.muli(arith.divui(arith.subi(self.row_len, self.start), w), w))
            self.edge = self.edge_chunk()
        self.row_values: dict[ir.Value, ir.Value] = {}  # [rows] buffers: this row's value
        self.row_loads: dict[tuple[ir.Value, str], ir.Value] = {}
        self.producer: dict[ir.Value, tuple[Member, int]] = {}  # tile buffer -> member, output
        self.env: dict[int, dict] = {}  # id(member) -> its inputs as of its place in the chain
        self.whole_row = None if looping else self.chunk(index_const(0))
        row_chunks = [] if looping else [self.whole_row] + ([self.edge] if self.edge else [])
        # id(member) -> (its online sum, the row's maximum of u, the sum rescaled to it)
        self.online_totals: dict[int, tuple[OnlineSum, ir.Value, ir.Value]] = {}
        stored: list[Member] = []
        for m in self.chain.members:
            self.env[id(m)] = self.inputs(m)
            if m.kind == ROW:
                self.row_op(m)
            elif m.kind == REDUCE and id(m) in self.online_totals:
                self.rescale_online(m)
            elif m.kind == REDUCE:
                self.reduce(m)
            else:
                for k, o in enumerate(m.generic.outputs):
                    self.producer[o.value] = (m, k)
                if any(o.value in self.live_out for o in m.generic.outputs):
                    if looping:
                        stored.append(m)
                    else:
                        for chunk in row_chunks:
                            self.store_tiles(m, chunk)
        if stored:  # the looping variant's last pass: every output tile
            self.over_chunks([], lambda chunk, accs: self.store_all(stored, chunk))

    def store_all(self, members: list[Member], chunk: Chunk) -> list[ir.Value]:
        for m in members:
            self.store_tiles(m, chunk)
        return []

    def inputs(self, m: Member, unknown: Operand | None = None) -> dict:
        """Each input operand's source at the member's place: a tile's producer (or None:
        memory), a row value, a scalar; captured values as they are. `unknown` (an online
        sum's r, before the chain computes it): `UNKNOWN`, which no body may read."""
        env = {}
        for o in m.generic.inputs:
            if o is unknown:
                env[id(o)] = UNKNOWN
                continue
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
        return self.row_load(buffer, ROW, [self.broadcast_rows.get(buffer, self.safe_row)])

    def body_rows(self, m: Member) -> dict[int, ir.Value]:
        """The row values m's body reads from memory at its row (`Member.body_rows`), from
        registers: lane 0 of the row stores them, unordered with the other lanes' loads."""
        return {p: self.row_values[buffer] for p, buffer in m.body_rows.items()}

    def row_load(self, buffer: ir.Value, role: str, index: list[ir.Value]) -> ir.Value:
        """A row's (or the one) value of `buffer` from memory. Of a buffer the chain writes (a
        reduction's initial value, which lane 0 then overwrites with the total), threads past
        the last row load nothing (a zero: nothing they compute is kept): at row 0, where
        they compute, they would race with row 0's lane 0, in another block, storing it
        (found by the emulator's race check: a variance over 42 rows, 32 a block)."""
        key = (buffer, role)
        if key not in self.row_loads:
            view = self.views[key]
            t = ir.MemRefType(view.type).element_type
            if buffer in self.written and role == ROW and isinstance(t, (ir.FloatType, ir.IntegerType, ir.IndexType)):
                load = scf.IfOp(self.row_ok, [t], has_else=True)
                with ir.InsertionPoint(load.then_block):
                    scf.YieldOp([memref.load(view, index)])
                with ir.InsertionPoint(load.else_block):
                    scf.YieldOp([arith.constant(t, 0.0 if isinstance(t, ir.FloatType) else 0)])
                self.row_loads[key] = load.results[0]
            else:
                self.row_loads[key] = memref.load(view, index)
        return self.row_loads[key]

    def row_op(self, m: Member) -> None:
        g = m.generic
        mapping = {o.arg: self.env[id(m)][id(o)] for o in g.inputs}
        results = clone_body(g.body, mapping, lambda d: self.row_index(m, d), replaced=self.body_rows(m),
                             valid=self.row_ok)
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

    def reduce(self, m: Member) -> None:
        g = m.generic
        types = [o.type.element_type for o in g.outputs]
        start = [identity(c.name, t) for c, t in zip(m.combiners, types)]
        # The initial values first: where one is read from memory (a fill the chain does not
        # hold), lane 0 writes the total into the same buffer after the row's combine; every
        # lane reading it before that combine's barrier or shuffles is what orders the read
        # before the write (read after it, lanes 1.. took lane 0's total as their start:
        # GPT-2's LayerNorm after its embeddings, a rare wrong variance on the H200).
        inits = [self.row_value(o.value) for o in g.outputs]
        online = self.online.get(id(m)) if self.looping else None
        if online is None:
            accs = self.over_chunks(start, lambda chunk, accs: self.accumulate(m, chunk, accs))
        else:
            accs = self.reduce_online(m, start, online)
        totals = self.across_row(m.combiners, accs, self.shared[id(m)])
        self.set_rows(m, [combine(c, i, t) for c, i, t in zip(m.combiners, inits, totals)])

    def reduce_online(self, m: Member, start: list[ir.Value], online: OnlineSum) -> list[ir.Value]:
        """m's pass accumulating the online sum too (against a running maximum of its u, see
        `online_sums`): m's accumulators; the sum's row maximum of u and its total, rescaled
        to that maximum, kept for `rescale_online`."""
        n, s = len(start), online.member
        self.env[id(online.source)] = self.inputs(online.source, unknown=online.rescaled)
        # The sum's initial value where it is in memory (no member up to the sum writes it):
        # read before the combines below, as `reduce` reads its own; `rescale_online` combines
        # it with the total where lane 0 then writes that total.
        init = s.generic.outputs[0].value
        members = self.chain.members
        if not any(o.value == init for w in members[:members.index(s)] for o in w.generic.outputs):
            self.row_value(init)
        t = s.generic.outputs[0].type.element_type
        accs = self.over_chunks(start + [identity(MAXIMUM.name, t), identity("arith.addf", t)],
                                lambda chunk, accs: self.accumulate(m, chunk, accs[:n])
                                + self.accumulate_online(online, chunk, *accs[n:]))
        high, total = accs[n:]
        row_high = self.across_row([MAXIMUM], [high], self.shared[id(s)])[0]
        total = arith.mulf(total, _rescale(high, row_high))
        self.online_totals[id(s)] = (online, row_high,
                                     self.across_row(s.combiners, [total], [self.online_shared[id(m)]])[0])
        return accs[:n]

    def accumulate_online(self, online: OnlineSum, chunk: Chunk, high: ir.Value, total: ir.Value) -> list[ir.Value]:
        """The chunk's exp(u - high') added to `total`, high' the maximum of `high` and the
        chunk's u, `total` first rescaled from `high` to it: (high', total')."""
        m, g = online.source, online.source.generic
        slots = []  # per slot, its elements' u (a slot past the row's end holds values it discards)
        rows = self.body_rows(m)
        for j in range(len(chunk.cols)):
            read = self.read_elements(m, chunk, j)
            slots.append([clone_body(g.body, self.mapping(m, chunk, j, e),
                                     lambda d, j=j, e=e: self.index(m, chunk, j, e, d),
                                     replaced={**rows, **{p: elements[e] for p, elements in read.items()}},
                                     until=online.exponent, valid=chunk.valid[j])[0] for e in range(chunk.width)])
        # a slot's maximum and sum are taken whole, then kept or not (one select a slot, not
        # one an element: the online sum's pass is bound by instructions in 16-bit rows)
        new = high
        for valid, us in zip(chunk.valid, slots):
            most = us[0]
            for u in us[1:]:
                most = arith.maximumf(most, u)
            new = arith.select(valid, arith.maximumf(new, most), new)
        add = online.member.combiners[0]
        total = arith.mulf(total, _rescale(high, new))
        # Each element's exp(u - new) unguarded; where `new` is infinite (every u so far -inf,
        # or a u of +inf) a slot counts its elements instead, as `_rescale` counts each 1
        infinite = arith.cmpf(arith.CmpFPredicate.OEQ, math.absf(new), arith.constant(new.type, float("inf")))
        count = arith.constant(new.type, float(chunk.width))
        for valid, us in zip(chunk.valid, slots):
            part = math.exp(arith.subf(us[0], new))
            for u in us[1:]:
                part = combine(add, part, math.exp(arith.subf(u, new)))
            part = arith.select(infinite, count, part)
            total = arith.select(valid, combine(add, total, part), total)
        return [new, total]

    def rescale_online(self, m: Member) -> None:
        """An online sum where the chain reaches it: its total, summed against the row's
        maximum of u, rescaled to the row value r its body subtracts."""
        online, high, total = self.online_totals[id(m)]
        r = online.row_value(self.env[id(online.source)][id(online.rescaled)])
        # exp(high - r) unguarded: a row of u = -inf and r = -inf sums to NaN, as exp(u - r)
        # does; a sum of no element stays 0
        zero = arith.cmpf(arith.CmpFPredicate.OEQ, total, arith.constant(total.type, 0.0))
        total = arith.select(zero, total, arith.mulf(total, math.exp(arith.subf(high, r))))
        # The sum was combined across the row in the maximum's pass, not here: a barrier orders
        # the lanes' loads since then (a row buffer that a later member writes) before lane 0's
        # stores from here on, as a reduction's combine does (`normalization._row_read_then_written`).
        gpu.barrier()
        self.set_rows(m, [combine(m.combiners[0], self.row_value(m.generic.outputs[0].value), total)])

    def accumulate(self, m: Member, chunk: Chunk, accs: list[ir.Value]) -> list[ir.Value]:
        g = m.generic
        rows = self.body_rows(m)
        for j in range(len(chunk.cols)):
            before = accs
            read = self.read_elements(m, chunk, j)
            for e in range(chunk.width):
                mapping = self.mapping(m, chunk, j, e)
                mapping.update({o.arg: a for o, a in zip(g.outputs, accs)})
                accs = clone_body(g.body, mapping, lambda d, e=e: self.index(m, chunk, j, e, d),
                                  replaced={**rows, **{p: elements[e] for p, elements in read.items()}},
                                  valid=chunk.valid[j])
            accs = [arith.select(chunk.valid[j], a, b) for a, b in zip(accs, before)]
        return accs

    # -- row-sized values, a chunk at a time
    def chunk(self, base: ir.Value) -> Chunk:
        """Slots j < slots of the chunk starting at element `base` of the vectors' span:
        slot j of lane l starts at start + base + (j * threads + l) * width (a warp's slot j is
        one contiguous span), valid where its whole vector is inside the span."""
        cols, valid = [], []
        first = arith.addi(self.start, base) if self.shifted else base
        for j in range(self.slots):
            vectors = arith.addi(arith.muli(index_const(j), self.threads), self.lane) if j else self.lane
            col = arith.addi(first, arith.muli(vectors, index_const(self.width)))
            cols.append(col)
            valid.append(arith.andi(self.row_ok, arith.cmpi(arith.CmpIPredicate.ult, col, self.end)))
        return Chunk(self.width, cols, valid)

    def edge_chunk(self) -> Chunk:
        """The elements outside the vectors' span, one a lane: lane l < start takes column l,
        the next lanes the columns from `end` on."""
        head = arith.cmpi(arith.CmpIPredicate.ult, self.lane, self.start)
        col = arith.select(head, self.lane, arith.addi(self.end, arith.subi(self.lane, self.start)))
        count = arith.addi(self.start, arith.subi(self.row_len, self.end))
        valid = arith.andi(self.row_ok, arith.cmpi(arith.CmpIPredicate.ult, self.lane, count))
        return Chunk(1, [col], [valid])

    def over_chunks(self, accs: list[ir.Value], body) -> list[ir.Value]:
        """`body(chunk, accs)` on the whole row (held in registers), or in the looping variant
        on each chunk in turn, carrying `accs`; then on the edge chunk of a shifted row."""
        if not self.looping:
            accs = body(self.whole_row, accs)
        else:
            per_chunk = arith.muli(self.threads, index_const(self.slots * self.width))
            span = arith.subi(self.end, self.start) if self.shifted else self.row_len
            loop = scf.ForOp(index_const(0), arith.ceildivui(span, per_chunk), index_const(1), accs)
            with ir.InsertionPoint(loop.body):
                chunk = self.chunk(arith.muli(loop.induction_variable, per_chunk))
                scf.YieldOp(body(chunk, list(loop.inner_iter_args)))
            accs = list(loop.results)
        return body(self.edge, accs) if self.edge is not None else accs

    def tiles(self, m: Member, chunk: Chunk) -> list[list[list[ir.Value]]]:
        """The tile member's outputs on the chunk: [output][slot][element]."""
        key = ("member", id(m))
        if key not in chunk.memo:
            g = m.generic
            outs: list[list[list[ir.Value]]] = [[[] for _ in chunk.cols] for _ in g.outputs]
            # (a shifted row's vectors do not start at multiples of 4 of the random index; a
            # tail variant's do)
            along = self.chain.col_classes[0]
            shared_calls = chunk.width % 4 == 0 and (self.tail or not self.shifted) and len(m.cols) == 1 and \
                philox_linear_in(g.body, m.cols[0], lambda v: self.chain.extents.class_of(v) == along)
            rows = self.body_rows(m)
            for j in range(len(chunk.cols)):
                cloned: list[list[ir.Operation]] = []
                read = self.read_elements(m, chunk, j)
                for e in range(chunk.width):
                    cloned.append([])
                    values = clone_body(g.body, self.mapping(m, chunk, j, e),
                                        lambda d, e=e: self.index(m, chunk, j, e, d), cloned[-1],
                                        replaced={**rows, **{p: elements[e] for p, elements in read.items()}},
                                        valid=chunk.valid[j])
                    for k, v in enumerate(values):
                        outs[k][j].append(v)
                if shared_calls:  # the row is aligned to the vector: so are the random indices
                    share_philox(cloned)
            chunk.memo[key] = outs
        return chunk.memo[key]

    def read_elements(self, m: Member, chunk: Chunk, j: int) -> dict[int, list[ir.Value]]:
        """Slot j's elements of each read along rows in m's body (`body_reads`), by the read's
        place in the body: one vector load where the host checked the reads (`run`) or the
        row is aligned to the vector (the kernel checks, row by row), else a load an element."""
        found = self.reads.get(id(m)) if chunk.width > 1 else None
        if not found:
            return {}
        key = ("reads", id(m), j)
        if key not in chunk.memo:
            width = chunk.width
            at = Hoisted(found, lambda d: self.safe_col(chunk, j) if d in m.cols else self.row_index(m, d))
            elements = {}
            for r in found.reads:
                source = r.load.operands[0]
                row, col = at.row(r), at.column(r, self.safe_col(chunk, j))
                if self.reads_checked:
                    loaded = load(source, row + [col], width)
                    elements[r.position] = [element(loaded, e) for e in range(width)]
                    continue
                t = ir.MemRefType(source.type)
                ok = self.read_aligned(m, r, at, chunk)
                choice = scf.IfOp(ok, [ir.VectorType.get([width], t.element_type)], has_else=True)
                with ir.InsertionPoint(choice.then_block):
                    scf.YieldOp([load(source, row + [col], width)])
                with ir.InsertionPoint(choice.else_block):
                    scalars = [memref.load(source, row + [arith.addi(col, index_const(e)) if e else col])
                               for e in range(width)]
                    scf.YieldOp([vector.from_elements(ir.VectorType.get([width], t.element_type), scalars)])
                elements[r.position] = [element(choice.results[0], e) for e in range(width)]
            chunk.memo[key] = elements
        return chunk.memo[key]

    def read_row_start(self, m: Member, r, at: Hoisted) -> ir.Value:
        """The element of the read's source, in memory order from its aligned pointer, that
        this row's column 0 reads."""
        source = r.load.operands[0]
        rank = ir.MemRefType(source.type).rank
        meta = memref.ExtractStridedMetadataOp(source).results  # base, offset, sizes, strides
        first = meta[1]
        for d, i in enumerate(at.row(r)):
            first = arith.addi(first, arith.muli(i, meta[2 + rank + d]))
        return arith.addi(first, index_const(r.offset)) if r.offset else first

    def read_aligned(self, m: Member, r, at: Hoisted, chunk: Chunk) -> ir.Value:
        """The read's vectors are aligned in this row (its pointer, and the row's first vector
        column) and inside the source's row."""
        key = ("read ok", id(m), r.position)
        if key not in chunk.memo:
            source = r.load.operands[0]
            t = ir.MemRefType(source.type)
            vector_bytes = self.width * element_bytes(t.element_type)
            w = index_const(self.width)
            first = arith.addi(self.read_row_start(m, r, at), self.start)
            ptr = memref.extract_aligned_pointer_as_index(source)
            ok = arith.andi(arith.cmpi(arith.CmpIPredicate.eq, arith.remui(ptr, index_const(vector_bytes)),
                                       index_const(0)),
                            arith.cmpi(arith.CmpIPredicate.eq, arith.remui(first, w), index_const(0)))
            row = memref.dim(source, index_const(t.rank - 1))
            inside = arith.cmpi(arith.CmpIPredicate.ule, arith.addi(self.row_len, index_const(r.offset)), row)
            chunk.memo[key] = arith.andi(ok, inside)
        return chunk.memo[key]

    def mapping(self, m: Member, chunk: Chunk, j: int, e: int) -> dict:
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
            elif env[id(o)] is not UNKNOWN:
                mapping[o.arg] = env[id(o)]
        return mapping

    def load(self, buffer: ir.Value, role: str, chunk: Chunk) -> list[list[ir.Value]]:
        """The buffer's slots on the chunk, every slot loaded at once (invalid ones at the
        span's first column of a valid row, their values unused: the loads need no branch).
        In a shifted row, buffers not laid out as the rows (column vectors, tiles broadcast
        over rows) start their vectors elsewhere: they are read an element at a time. In a
        tail variant's, a buffer in `widths` is read in vectors of its width."""
        key = ("load", buffer, role)
        if key not in chunk.memo:
            view = self.views[(buffer, role)]
            row = self.broadcast_rows.get(buffer, self.safe_row)
            apart = self.shifted and not self.tail and (role == COL or buffer in self.broadcast_rows)
            width = 1 if apart else self.width_of(buffer, chunk)
            slots = []
            for j in range(len(chunk.cols)):
                col = self.safe_col(chunk, j)
                elements = []
                for e in range(0, chunk.width, width):
                    c = arith.addi(col, index_const(e)) if e else col
                    loaded = load(view, [row, c] if role == TILE else [c], width,
                                  role == TILE and "normalization" in S.STREAMING_LOADS)
                    elements += [element(loaded, k) for k in range(width)]
                slots.append(elements)
            chunk.memo[key] = slots
        return chunk.memo[key]

    def width_of(self, buffer: ir.Value, chunk: Chunk) -> int:
        """The vector a buffer is read or written in on the chunk."""
        return min(chunk.width, self.widths.get(buffer, chunk.width))

    def store_tiles(self, m: Member, chunk: Chunk) -> None:
        outs = self.tiles(m, chunk)
        for o, slots in zip(m.generic.outputs, outs):
            if o.value not in self.live_out:
                continue
            view = self.views[(o.value, TILE)]
            width = self.width_of(o.value, chunk)
            for j, values in enumerate(slots):
                write = scf.IfOp(chunk.valid[j])
                with ir.InsertionPoint(write.then_block):
                    for e in range(0, chunk.width, width):
                        col = arith.addi(chunk.cols[j], index_const(e)) if e else chunk.cols[j]
                        store(values[e:e + width] if width > 1 else values[e], view, [self.row, col])
                    scf.YieldOp([])

    # -- indices and the row's totals
    def row_index(self, m: Member, d: int) -> ir.Value:
        return self.row_ivs[m.rows.index(d)] if d in m.rows else index_const(0)

    def index(self, m: Member, chunk: Chunk, j: int, e: int, d: int) -> ir.Value:
        if d in m.cols:
            col = self.safe_col(chunk, j)
            col = arith.addi(col, index_const(e)) if e else col
            return delinearize(col, self.col_ext)[m.cols.index(d)]
        return self.row_index(m, d)

    def safe_col(self, chunk: Chunk, j: int) -> ir.Value:
        """Slot j's first column, or the vectors' first column where the slot is past the
        row's end (its values are discarded; the body's reads at its indices stay in bounds,
        and a vector there is aligned)."""
        key = ("col", j)
        if key not in chunk.memo:
            chunk.memo[key] = arith.select(chunk.valid[j], chunk.cols[j], self.start)
        return chunk.memo[key]

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


def _rescale(old: ir.Value, new: ir.Value) -> ir.Value:
    """exp(old - new): the factor taking a sum of exp(u - old) to one of exp(u - new). 1 where
    they are equal, infinities included: a thread's elements of -inf while its maximum is -inf
    count 1 each (not NaN; `accumulate_online` counts a slot's elements then), and vanish
    (times exp(-inf)) once a larger maximum comes; if none comes, `rescale_online`'s
    exp(-inf - r) gives the sum torch's two passes give."""
    one = arith.constant(old.type, 1.0)
    return arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, old, new), one, math.exp(arith.subf(old, new)))


def exps_as_triton_does(op: ir.Operation) -> None:
    """Every float32 `math.exp` in `op` as 2**(x * log2(e)): a multiply and `ex2.approx`, as
    Triton's (Inductor's) exp, where libdevice's expf takes about ten instructions. A
    normalization kernel takes one an element (softmax, an online sum, the cross-entropy
    backward's exp(logp)), and with bfloat16 rows that made it bound by instructions, not
    memory. Error: ex2's 2 ulp plus the rounding of x * log2(e), |x| * 2**-24 * ln 2
    relative: 3 ulp for |x| <= 1, 1.2e-6 at |x| = 20 (where exp(x - max) is below float32's
    resolution of a sum holding exp(0) = 1). -inf gives 0, +inf inf, NaN NaN."""
    for e in walk_ops(op):
        if e.name != "math.exp" or not isinstance(e.operands[0].type, ir.F32Type):
            continue
        with ir.InsertionPoint(e), e.location:
            x = e.operands[0]
            fast = math.exp2(arith.mulf(x, arith.constant(x.type, 1.4426950408889634)))
        e.results[0].replace_all_uses_with(fast)
        e.erase()
