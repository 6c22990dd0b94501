"""The inner-reduction kernel: a linalg.generic whose reduction loops are its innermost ones
and whose reduced operands are contiguous rows (x.sum(-1), max, var/mean over trailing axes).

`threads` threads per row (from one for tiny rows through a warp to a whole block for long
ones: the tier is picked on the host from the row length), each accumulating every
`threads`-th vector of the row with `unroll` vectors in flight, then `gpu.shuffle xor`
butterflies within each warp (or group of lanes), then shared memory across the warps of a
row. Lane 0 of the row writes
`out[row] = combine(out[row], total)`, so the output keeps its linalg meaning (it was
filled with the initial value before). Few long rows (a whole-tensor sum) are cut into
chunks, a block each: each block writes its chunk's partial, then counts itself done on its
row's counter (an atomic add after a device-wide fence; the counters zeroed by a memset
before the launch), and the row's last block combines the partials in chunk order: one
launch, deterministic whichever block comes last. Parameters come from `heuristics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import arith, gpu, memref, nvvm, scf

from mlirfuse.lowering.gpu import heuristics as S
from mlirfuse.lowering.gpu.combiners import butterfly, identity, output_combiners
from mlirfuse.lowering.gpu.epilogue import Epilogue, emit_epilogue
from mlirfuse.lowering.gpu.kernels import (
    ZERO,
    Generic,
    Operand,
    aligned,
    clone_body,
    collapse,
    combine,
    delinearize,
    divisible,
    element,
    flat,
    guarded_launch,
    in_order,
    load,
    product,
    zeroed_counters,
)
from mlirfuse.lowering.linalg_builders import index_const

@dataclass
class InnerReductionMatch:
    generic: Generic
    kept: list[int]  # parallel loops of extent != 1: they number the rows
    reduced: list[int]  # the reduction loops: they index within a row
    row_operands: list[Operand]  # inputs read along the row (their own, or one for all rows)
    row_invariant: list[Operand]  # inputs read once per row
    row_loops: dict[int, list[int]]  # id(operand) -> the kept loops that pick its row (a broadcast: fewer)
    combiners: list[ir.Operation]  # per output: the op combining its accumulator with a value
    inits: dict = field(default_factory=dict)  # output buffer -> its initial value (a folded fill)
    epilogue: list[Epilogue] = field(default_factory=list)  # pointwise generics after it (`epilogue`)

    def static_row(self) -> int | None:
        return static_product(self.generic, self.reduced)

    def static_rows(self) -> int | None:
        return static_product(self.generic, self.kept)


def static_product(g: Generic, loops: list[int]) -> int | None:
    total = 1
    for d in loops:
        if g.static[d] is None:
            return None
        total *= g.static[d]
    return total


def match_inner_reduction(g: Generic) -> InnerReductionMatch | str:
    m = _match_inner_reduction(g)
    if isinstance(m, InnerReductionMatch):  # a row-strided buffer is viewed as [rows, row] only
        for i, o in enumerate(g.operands):
            if o.row_strided and (all(o is not r for r in m.row_operands) or m.row_loops[id(o)] != m.kept[:1]
                                  or len(m.reduced) != 1 or o.results[-1] != m.reduced[0]):
                return f"operand {i} has rows of their own stride, not read as [row, element]"
    return m


def _match_inner_reduction(g: Generic) -> InnerReductionMatch | str:
    n_par = g.reduction.index(True) if any(g.reduction) else g.n_loops
    if n_par == g.n_loops or not all(g.reduction[n_par:]):
        return "not a reduction over the innermost loops"
    kept = [d for d in range(n_par) if g.static[d] != 1]
    reduced = list(range(n_par, g.n_loops))
    rows, invariant, row_loops = [], [], {}
    for i, o in enumerate(g.operands):
        if not o.is_memref:
            continue
        dims = [r for r in o.results if r != ZERO and not (r < n_par and g.static[r] == 1)]
        if o.is_output:
            if dims != kept:
                return f"output {i} is not indexed by the kept loops ({o.results})"
            row_loops[id(o)] = kept
        elif dims[len(dims) - len(reduced):] == reduced and in_order(dims[:len(dims) - len(reduced)], kept):
            rows.append(o)  # its row, or a row broadcast over some kept loops (all: weights)
            row_loops[id(o)] = dims[:len(dims) - len(reduced)]
        elif in_order(dims, kept):
            invariant.append(o)  # a value per row, or broadcast over some kept loops
            row_loops[id(o)] = dims
        else:
            return f"operand {i} is not a contiguous row ({o.results})"
    if not rows:
        return "no operand is read along the row"
    combiners = output_combiners(g)
    if isinstance(combiners, str):
        return combiners
    return InnerReductionMatch(g, kept, reduced, rows, invariant, row_loops, combiners)



def _threads_per_row(row_len: ir.Value, params: S.InnerReductionParams) -> ir.Value:
    """Threads per row of the first tier holding the row (on the host)."""
    threads = index_const(params.tiers[-1].threads)
    for tier in reversed(params.tiers[:-1]):
        fits = arith.cmpi(arith.CmpIPredicate.ule, row_len, index_const(tier.max_row))
        threads = arith.select(fits, index_const(tier.threads), threads)
    return threads


def emit_inner_reduction(m: InnerReductionMatch, params: S.InnerReductionParams) -> ir.Operation:
    """Replace the generic with its launch: rows spread over blocks by the tier of their length.
    Where `params.split_blocks` allows and the rows of a whole block are few, the host cuts
    each row into chunks, a block each, writing partials to a [rows, chunks] workspace, and
    each row's last block combines them in chunk order (deterministic); otherwise the
    workspace and counters are empty (no allocation, no memset). With an epilogue, the
    kernel runs where its last generic was, and those generics are erased too."""
    g = m.generic
    anchor = m.epilogue[-1].generic.op if m.epilogue else g.op
    with ir.InsertionPoint(anchor), g.op.location:
        ext = g.extents()
        rows = product([ext[d] for d in m.kept])
        row_len = product([ext[d] for d in m.reduced])
        views = {}  # id(operand) -> (its view, the kept loops picking its row, or None: no row index)
        for o in m.row_operands:
            split = next(p for p, r in enumerate(o.results) if r != ZERO and r >= m.reduced[0])
            rank = o.type.rank
            groups = [list(range(split)), list(range(split, rank))] if split else [list(range(rank))]
            views[id(o)] = (collapse(o.value, groups), m.row_loops[id(o)] if split else None)
        for o in m.row_invariant + g.outputs:
            views[id(o)] = (flat(o.value) if o.type.rank else o.value, m.row_loops[id(o)] if o.type.rank else None)
        threads = _threads_per_row(row_len, params)
        block = index_const(params.block)
        rows_per_block = arith.divui(block, threads)
        grid = arith.ceildivui(rows, rows_per_block)
        chunks = None
        if params.split_blocks:
            splits, chunk = _chunks(rows, row_len, params)
            cut = arith.cmpi(arith.CmpIPredicate.ugt, splits, index_const(1))
            dyn = ir.ShapedType.get_dynamic_size()
            ws_rows = arith.select(cut, rows, index_const(0))
            workspaces = [memref.alloc(ir.MemRefType.get([dyn, dyn], o.type.element_type), [ws_rows, splits], [])
                          for o in g.outputs]
            counters = zeroed_counters(ws_rows, cut, "inner-reduction")  # one per row
            grid = arith.select(cut, arith.muli(rows, splits), grid)
            chunks = (splits, chunk, workspaces, counters)
        vector_ok = None
        if params.vector > 1:
            vector_ok = arith.andi(divisible(row_len, params.vector), aligned(
                [o.value for o in m.row_operands], [params.vector * o.element_bytes for o in m.row_operands]))
        workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
        shared = [ir.MemRefType.get([params.block // S.WARP], o.type.element_type, memory_space=workgroup)
                  for o in g.outputs]
        nonempty = arith.cmpi(arith.CmpIPredicate.ugt, rows, index_const(0))
        body, guard = guarded_launch(g, "inner-reduction", nonempty, grid, block, shared)
    with ir.InsertionPoint(body.operations[len(body.operations) - 1]), g.op.location:
        _ReductionKernel(m, params, views, ext, rows, row_len, threads, rows_per_block,
                         list(body.arguments)[12:], body.arguments[0], body.arguments[3], chunks).emit(vector_ok)
    if chunks is not None:
        with ir.InsertionPoint(anchor), g.op.location:
            for buffer in workspaces + [counters]:
                memref.dealloc(buffer)
    for e in m.epilogue:
        e.generic.op.erase()
    g.op.erase()
    return guard.operation


def _chunks(rows: ir.Value, row_len: ir.Value, params: S.InnerReductionParams) -> tuple[ir.Value, ir.Value]:
    """(chunks per row, elements per chunk) on the host: 1 chunk of the whole row unless the
    rows take the whole-block tier and are fewer than `split_blocks`; chunks are a multiple
    of the vector (each starts aligned where its row does) and of `min_chunk` elements or more."""
    one = index_const(1)
    tiers = params.tiers
    long = arith.cmpi(arith.CmpIPredicate.ugt, row_len, index_const(tiers[-2].max_row)) if len(tiers) > 1 \
        else arith.constant(ir.IntegerType.get_signless(1), tiers[-1].threads == params.block)
    few = arith.cmpi(arith.CmpIPredicate.ult, rows, index_const(params.split_blocks))
    wanted = arith.ceildivui(index_const(params.split_blocks), arith.maxui(rows, one))
    most = arith.maxui(arith.divui(row_len, index_const(params.min_chunk)), one)
    splits = arith.select(arith.andi(long, few), arith.minui(wanted, most), one)
    vec = index_const(params.vector)
    chunk = arith.maxui(arith.muli(arith.ceildivui(arith.ceildivui(row_len, splits), vec), vec), one)
    return arith.maxui(arith.ceildivui(row_len, chunk), one), chunk  # empty rows: one (empty) chunk


def _initial(m: InnerReductionMatch, output: Operand, view: ir.Value, index: list[ir.Value]) -> ir.Value:
    """What an output's total combines with: its folded initial value, or its value in memory."""
    init = m.inits.get(output.value)
    return memref.load(view, index) if init is None else init


class _ReductionKernel:
    def __init__(self, m: InnerReductionMatch, params: S.InnerReductionParams, views: dict,
                 extents: list[ir.Value], rows: ir.Value, row_len: ir.Value, threads: ir.Value,
                 rows_per_block: ir.Value, shared: list[ir.Value], bx: ir.Value, tx: ir.Value,
                 chunks: tuple[ir.Value, ir.Value, list[ir.Value]] | None = None):
        """`chunks` = (chunks per row, elements per chunk, workspaces, counters), values of the
        host: with several chunks (then a row per block) block bx reduces chunk bx % chunks
        of row bx // chunks into workspace[row, chunk], the row's last block the partials
        into the outputs; with one, whole rows into the outputs."""
        self.m, self.g, self.p, self.views, self.extents = m, m.generic, params, views, extents
        self.rows, self.row_len, self.threads, self.shared = rows, row_len, threads, shared
        self.lane_in_row = arith.remui(tx, threads)
        self.tx = tx
        self.types = [o.type.element_type for o in self.g.outputs]
        self.chunks = chunks
        self.begin, self.end = index_const(0), row_len
        if chunks is not None:  # with one chunk per row: bx numbers blocks of rows as without
            splits, chunk, _, _ = chunks
            self.chunk = arith.remui(bx, splits)
            bx = arith.divui(bx, splits)
            self.begin = arith.minui(arith.muli(self.chunk, chunk), row_len)
            self.end = arith.minui(arith.addi(self.begin, chunk), row_len)
        self.row = arith.addi(arith.muli(bx, rows_per_block), arith.divui(tx, threads))
        self.row_indices: dict[tuple[int, ...], ir.Value] = {}  # broadcast rows' indices (`row_index`)

    def identities(self) -> list[ir.Value]:
        return [identity(c.name, t) for c, t in zip(self.m.combiners, self.types)]

    def emit(self, vector_ok: ir.Value | None) -> None:
        self.broadcast_rows()
        valid = arith.cmpi(arith.CmpIPredicate.ult, self.row, self.rows)
        partial = scf.IfOp(valid, self.types, has_else=True)
        with ir.InsertionPoint(partial.then_block):
            invariant = {id(o): load(self.views[id(o)][0], self.row_index(self.views[id(o)][1]), 1)
                         for o in self.m.row_invariant}
            if vector_ok is None:
                scf.YieldOp(self.row_loop(1, invariant))
            else:
                choice = scf.IfOp(vector_ok, self.types, has_else=True)
                with ir.InsertionPoint(choice.then_block):
                    scf.YieldOp(self.row_loop(self.p.vector, invariant))
                with ir.InsertionPoint(choice.else_block):
                    scf.YieldOp(self.row_loop(1, invariant))
                scf.YieldOp(list(choice.results))
        with ir.InsertionPoint(partial.else_block):
            scf.YieldOp(self.identities())
        accs = self.butterfly(list(partial.results), self.threads)
        self.across_warps(accs, valid)

    # -- one thread's share of its row
    def row_loop(self, width: int, invariant: dict) -> list[ir.Value]:
        """Vectors lane, lane + threads, ... of the row, `unroll` at a time, then the rest
        element by element (width 1: the scalar variant, all element by element)."""
        accs, done = self.identities(), self.begin
        if width > 1:
            unroll = self.p.unroll
            step = arith.muli(self.threads, index_const(unroll * width))  # elements per trip
            trips = arith.divui(arith.subi(self.end, self.begin), step)
            main = scf.ForOp(index_const(0), trips, index_const(1), accs)
            with ir.InsertionPoint(main.body):
                base = arith.addi(arith.addi(self.begin, arith.muli(main.induction_variable, step)),
                                  arith.muli(self.lane_in_row, index_const(width)))
                stride = arith.muli(self.threads, index_const(width))
                cols = [arith.addi(base, arith.muli(index_const(u), stride)) if u else base for u in range(unroll)]
                loaded = [self.loads(c, width) for c in cols]
                accs = list(main.inner_iter_args)
                for c, values in zip(cols, loaded):
                    accs = self.accumulate(accs, c, width, values, invariant)
                scf.YieldOp(accs)
            accs, done = list(main.results), arith.addi(self.begin, arith.muli(trips, step))
        tail = scf.ForOp(arith.addi(done, self.lane_in_row), self.end, self.threads, accs)
        with ir.InsertionPoint(tail.body):
            c = tail.induction_variable
            scf.YieldOp(self.accumulate(list(tail.inner_iter_args), c, 1, self.loads(c, 1), invariant))
        return list(tail.results)

    def loads(self, col: ir.Value, width: int) -> dict:
        out = {}
        for o in self.m.row_operands:
            view, loops = self.views[id(o)]
            out[id(o)] = load(view, self.row_index(loops) + [col], width)
        return out

    def accumulate(self, accs: list[ir.Value], col: ir.Value, width: int, loaded: dict,
                   invariant: dict) -> list[ir.Value]:
        g = self.g
        for e in range(width):
            mapping = {o.arg: o.value for o in g.operands if not o.is_memref}
            mapping.update({o.arg: invariant[id(o)] for o in self.m.row_invariant})
            mapping.update({o.arg: element(loaded[id(o)], e) for o in self.m.row_operands})
            mapping.update({o.arg: a for o, a in zip(g.outputs, accs)})
            accs = clone_body(g.body, mapping, lambda d, e=e: self.index_of(d, col, e))
        return accs

    def row_index(self, loops: list[int] | None) -> list[ir.Value]:
        """The index of the row an operand indexed by these kept loops reads ([] for none):
        the row itself where it has every kept loop, else its broadcast row's (0 for none)."""
        if loops is None:
            return []
        if loops == self.m.kept:
            return [self.row]
        return [self.row_indices[tuple(loops)]]

    def broadcast_rows(self) -> None:
        """The row index of every operand broadcast over some kept loops, computed once per
        thread at the kernel's top (a row past the last one computes garbage, never read)."""
        ivs = None
        for _, loops in self.views.values():
            if loops is None or loops == self.m.kept or tuple(loops) in self.row_indices:
                continue
            if ivs is None:
                ivs = delinearize(self.row, [self.extents[k] for k in self.m.kept])
            linear = index_const(0)
            for d in loops:
                linear = arith.addi(arith.muli(linear, self.extents[d]), ivs[self.m.kept.index(d)])
            self.row_indices[tuple(loops)] = linear

    def index_of(self, d: int, col: ir.Value, e: int) -> ir.Value:
        if d in self.m.reduced:
            j = arith.addi(col, index_const(e)) if e else col
            return delinearize(j, [self.extents[r] for r in self.m.reduced])[self.m.reduced.index(d)]
        if d in self.m.kept:
            return delinearize(self.row, [self.extents[k] for k in self.m.kept])[self.m.kept.index(d)]
        return index_const(0)  # a parallel loop of extent 1

    # -- across threads
    def butterfly(self, accs: list[ir.Value], lanes: ir.Value | None = None) -> list[ir.Value]:
        return butterfly(self.m.combiners, accs, lanes)

    def across_warps(self, accs: list[ir.Value], valid: ir.Value) -> None:
        """Lane 0 of a row's first warp ends with the row's total (through shared memory when
        the row has several warps: a uniform branch, every row of the block has as many)."""
        warps_per_row = arith.divui(self.threads, index_const(S.WARP))
        several = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ugt, warps_per_row, index_const(1)), has_else=True)
        with ir.InsertionPoint(several.then_block):
            warp = arith.divui(self.tx, index_const(S.WARP))
            lane = arith.remui(self.tx, index_const(S.WARP))
            lane0 = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, lane, index_const(0)))
            with ir.InsertionPoint(lane0.then_block):
                for a, sh in zip(accs, self.shared):
                    memref.store(a, sh, [warp])
                scf.YieldOp([])
            gpu.barrier()
            first_warp = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, self.lane_in_row, index_const(S.WARP)))
            with ir.InsertionPoint(first_warp.then_block):
                mine = arith.cmpi(arith.CmpIPredicate.ult, lane, warps_per_row)
                slot = arith.select(mine, arith.addi(warp, lane), warp)
                values = [arith.select(mine, memref.load(sh, [slot]), i)
                          for sh, i in zip(self.shared, self.identities())]
                self.write(self.butterfly(values), arith.andi(valid, arith.cmpi(
                    arith.CmpIPredicate.eq, lane, index_const(0))))
                scf.YieldOp([])
            scf.YieldOp([])
        with ir.InsertionPoint(several.else_block):
            self.write(accs, arith.andi(valid, arith.cmpi(arith.CmpIPredicate.eq, self.lane_in_row, index_const(0))))
            scf.YieldOp([])

    def write(self, totals: list[ir.Value], when: ir.Value) -> None:
        w = scf.IfOp(when)
        with ir.InsertionPoint(w.then_block):
            if self.chunks is not None:
                splits, _, workspaces, _ = self.chunks
                cut = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ugt, splits, index_const(1)), has_else=True)
                with ir.InsertionPoint(cut.then_block):  # a chunk's partial; the row's last block combines
                    for ws, total in zip(workspaces, totals):
                        memref.store(total, ws, [self.row, self.chunk])
                    self.finish_if_last()
                    scf.YieldOp([])
                with ir.InsertionPoint(cut.else_block):
                    self.write_outputs(totals)
                    scf.YieldOp([])
            else:
                self.write_outputs(totals)
            scf.YieldOp([])

    def finish_if_last(self) -> None:
        """The row's writing thread (one per block where rows are cut): count the block done
        on its row's counter, its partials fenced before; the last block's thread combines
        the row's partials in chunk order into the outputs (the pattern of ATen's and CUB's
        last-block reductions, one thread a row)."""
        splits, _, workspaces, counters = self.chunks
        i32 = ir.IntegerType.get_signless(32)
        gpu_scope = ir.Attribute.parse("#nvvm.mem_scope<gpu>")
        nvvm.MembarOp(gpu_scope)
        before = memref.AtomicRMWOp(arith.AtomicRMWKind.addi, arith.constant(i32, 1), counters, [self.row]).result
        done = arith.addi(arith.index_cast(ir.IndexType.get(), before), index_const(1))
        last = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, done, splits))
        with ir.InsertionPoint(last.then_block):
            nvvm.MembarOp(gpu_scope)  # the other blocks' partials, seen after their counts
            loop = scf.ForOp(index_const(0), splits, index_const(1), self.identities())
            with ir.InsertionPoint(loop.body):
                s = loop.induction_variable
                scf.YieldOp([combine(c, acc, memref.load(ws, [self.row, s]))
                             for c, acc, ws in zip(self.m.combiners, loop.inner_iter_args, workspaces)])
            self.write_outputs(list(loop.results))
            scf.YieldOp([])

    def write_outputs(self, totals: list[ir.Value]) -> None:
        """The row's totals combined with the outputs' initial values, stored; then the
        epilogue on them."""
        finals = {}
        for o, c, total in zip(self.g.outputs, self.m.combiners, totals):
            view, loops = self.views[id(o)]
            index = self.row_index(loops)
            finals[o.value] = combine(c, _initial(self.m, o, view, index), total)
            memref.store(finals[o.value], view, index)
        if self.m.epilogue:
            emit_epilogue(self.m.epilogue, finals, delinearize(self.row, [self.extents[k] for k in self.m.kept]))
