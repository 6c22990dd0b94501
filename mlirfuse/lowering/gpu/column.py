"""The outer (column) reduction kernel: a linalg.generic whose reduced loops index the outer
dims of its inputs and whose kept loops their contiguous inner dims (x.sum(0), a bias
gradient's sum over (0, 1)): out[c] = combine over rows r of f(x[r, c], ..., s[r], ...),
where per-row operands s (an RMSNorm backward's rstd) are read once per row as scalars, and
operands broadcast over some columns once per column (or, where they also vary with the row,
once per row and vector).

One launch. The rows are cut into `splits` slices (the columns alone give too few blocks to
fill the device); a block covers `block_x * vector` adjacent columns of one slice with
`block_y` rows of threads, each accumulating every `block_y`-th row of the slice (`unroll`
rows in flight, 128-bit loads along the columns). The block's rows of threads are combined
through shared memory in a fixed order and the slice's partial goes to a workspace
[splits, columns]. Then the block counts itself done on its columns' counter (an atomic add
after a device-wide fence; the counters are zeroed by a memset before the launch, not a
kernel): the last of the column block's `splits` blocks combines the partials of its
columns, every `block_y`-th slice per row of threads and those rows in order, into the
output (which keeps its linalg meaning: it was filled with the initial value). Whichever
block comes last, the combination order is the same: deterministic, the output written
once, no floating-point atomics. Where the rows make one slice (too few for two: a sum over
a batch of 8), each block writes its columns' totals itself: no workspace, no counters, no
memset (a uniform branch on the host's count). The vector variant needs the column count a
multiple of the vector and the pointers 16-byte aligned (checked on the host), else the
scalar one runs. Parameters come from `heuristics.column_reduction_heuristic`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, gpu, memref, nvvm, scf

from mlirfuse.lowering.gpu import heuristics as S
from mlirfuse.lowering.gpu.combiners import identity, output_combiners
from mlirfuse.lowering.gpu.epilogue import Epilogue, emit_epilogue
from mlirfuse.lowering.gpu.kernels import (
    SCHEDULE_ATTR,
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
    set_kernel_attrs,
    store,
    variants,
    zeroed_counters,
)
from mlirfuse.lowering.gpu.reduction import static_product
from mlirfuse.lowering.linalg_builders import index_const

if TYPE_CHECKING:
    from mlirfuse.lowering.gpu.prologue import Prologue


@dataclass
class ColumnReductionMatch:
    generic: Generic
    kept: list[int]  # the loops numbering the columns, in the operands' memory order
    reduced: list[int]  # the loops numbering the rows, in the operands' memory order
    column_operands: list[Operand]  # inputs read at [row, column]
    column_invariant: list[Operand]  # inputs read at [column], the same for every row
    combiners: list[ir.Operation]  # per output: the op combining its accumulator with a value
    inits: dict = field(default_factory=dict)  # output buffer -> its initial value (a folded fill)
    row_operands: list[Operand] = field(default_factory=list)  # inputs read at [row] (per-row scalars)
    # id(operand) -> the reduced loops picking its row, where it is broadcast over the others
    broadcast_rows: dict[int, list[int]] = field(default_factory=dict)
    # Kept loops outside the reduced ones in memory order (x.sum(1) of [B, R, C]: B), a batch of
    # column reductions of the inner kept loops; empty for a reduction over the outer dims.
    outer: list[int] = field(default_factory=list)
    epilogue: list[Epilogue] = field(default_factory=list)  # pointwise generics after it (`epilogue`)
    prologue: Prologue | None = None  # the pointwise generic computed at each element (`prologue`)
    computed: dict[int, int] = field(default_factory=dict)  # id(input) -> the prologue's output it reads
    # Inputs read at the last kept loops only ((x * w).sum(0) of [B, R, C], w [C]): at the column
    # modulo the product of their extents; at the first kept loops only (h [R, 1]): at the column
    # divided by the product of the others'. The same for every row, as the invariant ones.
    column_trailing: list[Operand] = field(default_factory=list)
    column_leading: list[Operand] = field(default_factory=list)
    # Inputs read at the row and the first kept loops only (T5's softmax-backward row sums
    # [B, H, S] in the position bias's gradient, a sum over B of [B, H, S, S]): at [row, the
    # column divided by the product of the other kept extents]; one value for a vector.
    row_leading: list[Operand] = field(default_factory=list)

    def take(self, o: Operand) -> bool:
        """File an input under the way the kernel reads it; False where it cannot."""
        how = classify(operand_dims(self.generic, o), self.kept, self.reduced)
        if how is None:
            return False
        kind, rows = how
        {"invariant": self.column_invariant, "column": self.column_operands, "row": self.row_operands,
         "trailing": self.column_trailing, "leading": self.column_leading,
         "row_leading": self.row_leading}[kind].append(o)
        if rows is not None:
            self.broadcast_rows[id(o)] = rows
        return True

    def static_columns(self) -> int | None:
        """The columns of one batch (all of them without outer loops)."""
        return static_product(self.generic, self.kept[len(self.outer):])

    def static_batch(self) -> int | None:
        return static_product(self.generic, self.outer)

    def static_rows(self) -> int | None:
        return static_product(self.generic, self.reduced)


def operand_dims(g: Generic, o: Operand) -> list[int]:
    """The loops an operand's dims are indexed by, in memory order (constant and extent-1 ones left out)."""
    return [r for r in o.results if r != ZERO and g.static[r] != 1]


def read_at(o: Operand) -> list[int]:
    """The loops an operand is read at, in memory order (its constant indices left out)."""
    return [r for r in o.results if r != ZERO]


def classify(ds: list[int], kept: list[int], reduced: list[int]) -> tuple[str, list[int] | None] | None:
    """How the kernel reads an input whose dims are indexed by loops `ds`: "invariant" (at the
    column), "trailing" or "leading" (at the column's last or first kept indices: broadcast
    over the others), "column" (at [row, column]) or "row" (at the row), with the reduced loops
    picking its row where it is broadcast over the others (else None); None where it cannot."""
    n_kept = len(kept)
    if ds == kept:
        return "invariant", None
    if ds and ds == kept[n_kept - len(ds):]:
        return "trailing", None
    if ds and ds == kept[:len(ds)]:
        return "leading", None
    rows = ds[:len(ds) - n_kept]
    if ds[len(ds) - n_kept:] == kept and in_order(rows, reduced):
        return "column", (None if rows == reduced else rows)
    if in_order(ds, reduced):
        return "row", (None if ds == reduced else ds)
    for k in range(n_kept - 1, 0, -1):  # the row, then the first k kept loops
        if ds[len(ds) - k:] == kept[:k] and ds[:len(ds) - k] and in_order(ds[:len(ds) - k], reduced):
            rows = ds[:len(ds) - k]
            return "row_leading", (None if rows == reduced else rows)
    return None


def match_column_reduction(g: Generic) -> ColumnReductionMatch | str:
    m = _match_column_reduction(g)
    if isinstance(m, ColumnReductionMatch):  # a row-strided buffer is viewed as [rows, columns] only
        strided = [i for i, o in enumerate(g.operands) if o.row_strided]
        if strided and (m.outer or any(all(g.operands[i] is not o for o in m.column_operands) for i in strided)):
            return f"operand {strided[0]} has rows of their own stride, not read as [row, column]"
    return m


def _match_column_reduction(g: Generic) -> ColumnReductionMatch | str:
    reduced_loops = sorted(d for d in range(g.n_loops) if g.reduction[d] and g.static[d] != 1)
    kept_loops = sorted(d for d in range(g.n_loops) if not g.reduction[d] and g.static[d] != 1)
    unit_rows = not reduced_loops and any(g.reduction)  # a sum over dims of extent 1 (a batch of one)
    if not (reduced_loops or unit_rows) or not kept_loops:
        return "not a reduction that keeps some loops"
    kept = operand_dims(g, g.outputs[0])
    if sorted(kept) != kept_loops or any(operand_dims(g, o) != kept for o in g.outputs):
        return "the outputs are not indexed by the kept loops alike"
    inputs = [(i, o) for i, o in enumerate(g.operands) if o.is_memref and not o.is_output]
    if unit_rows:  # one row: every input is read at its column (or broadcast over some), once
        return _filed(g, kept, [d for d in range(g.n_loops) if g.reduction[d]], inputs)
    n_red = len(reduced_loops)
    # The rows' order: the operands read at every row say it (all alike).
    orders = {tuple(operand_dims(g, o)[:n_red]) for _, o in inputs
              if operand_dims(g, o)[n_red:] == kept and sorted(operand_dims(g, o)[:n_red]) == reduced_loops}
    if len(orders) > 1:
        return "operands order the reduced loops differently"
    if not orders:
        batched = _match_batched(g, inputs, kept, reduced_loops)
        if not isinstance(batched, str):
            return batched
        i, o = next(((i, o) for i, o in inputs if operand_dims(g, o) != kept), (None, None))
        reason = f"operand {i} is not read by column ({o.results})" if o else "no operand is read by column"
        return f"{reason}; as a batch of column reductions: {batched}"
    return _filed(g, kept, list(orders.pop()), inputs)


def _filed(g: Generic, kept: list[int], reduced: list[int], inputs: list) -> ColumnReductionMatch | str:
    """The match with every input filed under the way the kernel reads it, and the outputs'
    combiners; why not, where an input or a combiner does not fit."""
    m = ColumnReductionMatch(g, kept, reduced, [], [], [])
    for i, o in inputs:
        if not m.take(o):
            return f"operand {i} is not read by column ({o.results})"
    combiners = output_combiners(g)
    if isinstance(combiners, str):
        return combiners
    m.combiners = combiners
    return m


def take_prologue(m: ColumnReductionMatch, p: Prologue) -> None:
    """The kernel computes `p`'s generic at each element (`prologue`): its inputs are read as
    the reduction's own, and the reduction's reads of its outputs take the computed values."""
    m.prologue = p
    m.computed = {id(o): k for o in m.column_operands for v, k in p.reads if o.value == v}
    m.column_operands = [o for o in m.column_operands if id(o) not in m.computed]
    for o in p.inputs:
        if not m.take(o):
            raise ValueError("take_prologue: an input find_prologue accepted is not read by column")


def _match_batched(g: Generic, inputs: list, kept: list[int],
                   reduced_loops: list[int]) -> ColumnReductionMatch | str:
    """Reduced loops between kept ones in every operand's memory order ([outer, rows, inner]):
    a column reduction of the inner kept loops for each index of the outer ones. Operands are
    read at [outer, row, inner] or at the output's index."""
    n_red = len(reduced_loops)
    layouts, columns, invariant = set(), [], []
    broadcast = {"trailing": [], "leading": []}
    for i, o in inputs:
        ds = operand_dims(g, o)
        if ds == kept:
            invariant.append(o)
            continue
        if ds and ds == kept[len(kept) - len(ds):]:
            broadcast["trailing"].append(o)
            continue
        if ds and ds == kept[:len(ds)]:
            broadcast["leading"].append(o)
            continue
        start = next((k for k, d in enumerate(ds) if d in reduced_loops), None)
        if start is None or len(ds) != len(kept) + n_red or sorted(ds[start:start + n_red]) != reduced_loops \
                or ds[:start] + ds[start + n_red:] != kept:
            return f"operand {i} is not read at [outer, row, inner] ({o.results})"
        layouts.add((start, tuple(ds[start:start + n_red])))
        columns.append(o)
    if len(layouts) != 1:
        return "operands order the loops differently" if layouts else "no operand is read by row"
    start, reduced = layouts.pop()
    if start == 0 or start == len(kept):
        return "no kept loops on both sides of the reduced ones"
    combiners = output_combiners(g)
    if isinstance(combiners, str):
        return combiners
    return ColumnReductionMatch(g, kept, list(reduced), columns, invariant, combiners, outer=kept[:start],
                                column_trailing=broadcast["trailing"], column_leading=broadcast["leading"])


def emit_column_reduction(m: ColumnReductionMatch, params: S.ColumnReductionParams) -> ir.Operation:
    """Replace the generic with the launch (and its workspace and counters); with an epilogue,
    where its last generic was (those generics, and a prologue's, are erased too)."""
    g, p = m.generic, params
    anchor = m.epilogue[-1].generic.op if m.epilogue else g.op
    with ir.InsertionPoint(anchor), g.op.location:
        ext = g.extents()
        one = index_const(1)
        inner = m.kept[len(m.outer):]
        columns = product([ext[d] for d in inner])  # of one batch
        batch = product([ext[d] for d in m.outer]) if m.outer else one
        rows = product([ext[d] for d in m.reduced])
        views = {}
        for o in m.column_operands + m.row_leading:
            if m.outer:  # [outer, rows, inner]
                first = next(pos for pos, r in enumerate(o.results) if r in m.reduced)
                split = next(pos for pos in range(first, o.type.rank) if o.results[pos] in inner)
                groups = [list(range(first)), list(range(first, split)), list(range(split, o.type.rank))]
            else:
                split = next(pos for pos, r in enumerate(o.results) if r in m.kept)
                groups = [list(range(split)), list(range(split, o.type.rank))]
            views[id(o)] = collapse(o.value, groups)
        written = m.prologue.outputs if m.prologue else []
        linear = written + m.prologue.full if m.prologue and m.prologue.linear else []  # read at row * columns + column
        for o in written:
            if not m.prologue.linear:  # [row, column], as the column operands
                split = next(pos for pos, r in enumerate(o.results) if r in m.kept)
                views[id(o)] = collapse(o.value, [list(range(split)), list(range(split, o.type.rank))])
        for o in m.column_invariant + m.column_trailing + m.column_leading + m.row_operands + g.outputs + linear:
            views[id(o)] = flat(o.value) if o.type.rank else o.value  # (a 0-d one read as it is)
        indexed = m.prologue.indexed() if m.prologue else []
        vectored = m.column_operands + m.column_invariant + m.column_trailing + written + (
            m.prologue.full + indexed if m.prologue else [])
        # a trailing input's period, a leading one's stride (in columns): a vector stays within one
        periods = {id(o): product([ext[d] for d in operand_dims(g, o)]) for o in m.column_trailing}
        periods.update({id(o): product([ext[d] for d in m.kept[len(operand_dims(g, o)):]]) for o in m.column_leading})
        periods.update({id(o): product([ext[d] for d in m.kept[len([r for r in operand_dims(g, o) if r in m.kept]):]])
                        for o in m.row_leading})  # (its row, then its leading kept loops)
        # a permuted or trailing input's vectors stay within its innermost dim (of the outputs' last extent)
        dims = [memref.dim(written[0].value, index_const(k)) for k in range(written[0].type.rank)] if indexed else []
        for o in m.prologue.trailing + m.prologue.leading if m.prologue else []:
            views[id(o)] = flat(o.value)
        vector_ok = None
        width = index_const(1)
        if p.vector > 1:
            vector_ok = arith.andi(divisible(columns, p.vector), aligned(
                [o.value for o in vectored], [p.vector * o.element_bytes for o in vectored]))
            if dims:
                vector_ok = arith.andi(vector_ok, divisible(dims[-1], p.vector))
            for period in periods.values():
                vector_ok = arith.andi(vector_ok, divisible(period, p.vector))
            width = arith.select(vector_ok, index_const(p.vector), one)

        def geometry(q: S.ColumnReductionParams, width: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
            """Column blocks, blocks, and slices of `q`: the target's nearest multiple of the
            blocks (512 blocks against 528 make one slice, not two), but the multiple below
            where that fills at least `S.COLUMN_WAVE_FILL` of the target (32 blocks: 16
            slices, not 17: 544 blocks, 16 past what the SMs hold at once); at most a slice
            per `min_rows_per_thread` rows of each row of threads. An empty batch has no
            blocks: divided by one, not zero, a trap on the host."""
            col_blocks = arith.maxui(arith.ceildivui(columns, arith.muli(width, index_const(q.block_x))), one)
            blocks = arith.muli(col_blocks, batch)
            most = arith.ceildivui(rows, index_const(q.block_y * q.min_rows_per_thread))
            some = arith.maxui(blocks, one)
            target = index_const(q.target_blocks)
            nearest = arith.divui(arith.addi(target, arith.shrui(some, one)), some)
            below = arith.divui(target, some)
            numerator, denominator = S.COLUMN_WAVE_FILL.as_integer_ratio()
            full = arith.cmpi(arith.CmpIPredicate.uge, arith.muli(arith.muli(below, some), index_const(denominator)),
                              arith.muli(target, index_const(numerator)))
            chosen = arith.select(full, below, nearest)
            return col_blocks, blocks, arith.maxui(arith.minui(chosen, most), one)

        col_blocks, blocks, splits = geometry(p, width)
        narrow = None  # the host's choice of the narrow geometry: vectors, one slice, no row short
        if p.narrow_block_x and vector_ok is not None:
            q = p.narrowed()
            n_col_blocks, n_blocks, n_splits = geometry(q, index_const(p.vector))
            narrow = arith.andi(vector_ok, arith.cmpi(arith.CmpIPredicate.eq, n_splits, one))
            narrow = arith.andi(narrow, arith.cmpi(arith.CmpIPredicate.uge, rows,
                                                   index_const(q.block_y * q.min_rows_per_thread)))
            col_blocks = arith.select(narrow, n_col_blocks, col_blocks)
            blocks = arith.select(narrow, n_blocks, blocks)
            splits = arith.select(narrow, one, splits)
        rows_per_split = arith.ceildivui(rows, splits)
        all_columns = arith.muli(columns, batch)  # the outputs' elements
        types = [o.type.element_type for o in g.outputs]
        dyn = ir.ShapedType.get_dynamic_size()
        # One slice: no workspace, no counters (empty: no allocation), no memset.
        cut = arith.cmpi(arith.CmpIPredicate.ugt, splits, one)
        workspaces = [memref.alloc(ir.MemRefType.get([dyn, dyn], t), [
            arith.select(cut, splits, index_const(0)), arith.maxui(all_columns, one)], []) for t in types]
        i32 = ir.IntegerType.get_signless(32)
        counters = zeroed_counters(arith.select(cut, blocks, index_const(0)), cut,
                                   "column-reduction")  # one per column block
        workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
        shared = [ir.MemRefType.get([p.block * p.vector], t, memory_space=workgroup) for t in types]
        shared.append(ir.MemRefType.get([1], i32, memory_space=workgroup))  # "this block is the last"
        nonempty = arith.cmpi(arith.CmpIPredicate.ugt, all_columns, index_const(0))
        body, guard = guarded_launch(g, "column-reduction", nonempty, arith.muli(blocks, splits),
                                     index_const(p.block), shared)
        if p.registers:
            set_kernel_attrs(body.owner, {"nvvm.maxnreg": ir.IntegerAttr.get(ir.IntegerType.get_signless(32),
                                                                             p.registers)})
    with ir.InsertionPoint(body.operations[len(body.operations) - 1]), g.op.location:
        arguments = list(body.arguments)[12:]

        def kernel(q: S.ColumnReductionParams, one_slice: bool = False) -> _ColumnKernel:
            k = _ColumnKernel(m, q, views, ext, columns, rows, col_blocks, splits, rows_per_split, workspaces,
                              arguments[:-1], body.arguments[0], body.arguments[3], counters, arguments[-1])
            k.dims, k.periods, k.one_slice = dims, periods, one_slice
            return k

        if narrow is None:
            variants(vector_ok, p.vector, kernel(p).variant)
        else:  # (a uniform branch: the host's choice)
            choice = scf.IfOp(narrow, has_else=True)
            choice.operation.attributes[SCHEDULE_ATTR] = ir.StringAttr.get("column-reduction-narrow")
            with ir.InsertionPoint(choice.then_block):
                kernel(p.narrowed(), one_slice=True).variant(p.vector)
                scf.YieldOp([])
            with ir.InsertionPoint(choice.else_block):
                variants(vector_ok, p.vector, kernel(p).variant)
                scf.YieldOp([])
    with ir.InsertionPoint(anchor), g.op.location:
        for ws in workspaces + [counters]:
            memref.dealloc(ws)
    for e in m.epilogue:
        e.generic.op.erase()
    g.op.erase()
    if m.prologue:
        m.prologue.generic.op.erase()
    return guard.operation


class _ColumnKernel:
    def __init__(self, m: ColumnReductionMatch, params: S.ColumnReductionParams, views: dict,
                 extents: list[ir.Value], columns: ir.Value, rows: ir.Value, col_blocks: ir.Value,
                 splits: ir.Value, rows_per_split: ir.Value, workspaces: list[ir.Value], shared: list[ir.Value],
                 bx: ir.Value, tx: ir.Value, counters: ir.Value, last_flag: ir.Value):
        """Block bx: column block bx % col_blocks of slice (bx / col_blocks) % splits of batch
        bx / (col_blocks * splits) (a batch of one without outer loops)."""
        self.m, self.g, self.p, self.views, self.extents = m, m.generic, params, views, extents
        self.columns, self.rows, self.workspaces, self.shared, self.tx = columns, rows, workspaces, shared, tx
        self.splits, self.counters, self.last_flag = splits, counters, last_flag
        self.dims: list[ir.Value] = []  # the prologue's outputs' extents, where it reads permuted inputs
        self.periods: dict[int, ir.Value] = {}  # id(trailing input) -> its period; id(leading one) -> its stride
        self.one_slice = False  # the host launches this geometry with one slice only
        self.types = [o.type.element_type for o in self.g.outputs]
        self.col_block = arith.remui(bx, col_blocks)
        self.split = arith.divui(bx, col_blocks)
        self.batch = None
        self.counter = self.col_block  # the blocks of this column block and batch count here
        if m.outer:
            self.batch = arith.divui(self.split, splits)
            self.split = arith.remui(self.split, splits)
            self.counter = arith.addi(arith.muli(self.batch, col_blocks), self.col_block)
        self.lane = arith.remui(tx, index_const(params.block_x))
        self.ty = arith.divui(tx, index_const(params.block_x))
        begin = arith.minui(arith.muli(self.split, rows_per_split), rows)
        self.row_begin = begin
        self.row_end = arith.minui(rows, arith.addi(begin, rows_per_split))

    def flat(self, col: ir.Value) -> ir.Value:
        """The output element of this batch's column `col`."""
        return col if self.batch is None else arith.addi(arith.muli(self.batch, self.columns), col)

    def identities(self) -> list[ir.Value]:
        return [identity(c.name, t) for c, t in zip(self.m.combiners, self.types)]

    def variant(self, width: int) -> None:
        """Columns col0 .. col0 + width - 1 of this thread (width 1: the scalar variant)."""
        p, n_out = self.p, len(self.types)
        col0 = arith.muli(arith.addi(arith.muli(self.col_block, index_const(p.block_x)), self.lane),
                          index_const(width))
        valid = arith.cmpi(arith.CmpIPredicate.ult, col0, self.columns)
        flat_types = [t for t in self.types for _ in range(width)]
        partial = scf.IfOp(valid, flat_types, has_else=True)
        with ir.InsertionPoint(partial.then_block):
            scf.YieldOp(self.rows_loop(col0, width))
        with ir.InsertionPoint(partial.else_block):
            scf.YieldOp([i for i in self.identities() for _ in range(width)])
        accs = list(partial.results)
        # The block's rows of threads, combined in shared memory in row order.
        slot = arith.muli(self.tx, index_const(width))
        for k, sh in enumerate(self.shared):
            for e in range(width):
                memref.store(accs[k * width + e], sh, [arith.addi(slot, index_const(e)) if e else slot])
        gpu.barrier()
        if self.one_slice:
            self.write_outputs(col0, width, valid, one_slice=True)
            return
        # One slice (a uniform branch): the block's total is the output's, no workspace.
        single = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, self.splits, index_const(1)), has_else=True)
        with ir.InsertionPoint(single.then_block):
            self.write_outputs(col0, width, valid, one_slice=True)
            scf.YieldOp([])
        with ir.InsertionPoint(single.else_block):
            first = scf.IfOp(arith.andi(valid, arith.cmpi(arith.CmpIPredicate.eq, self.ty, index_const(0))))
            with ir.InsertionPoint(first.then_block):
                for k in range(n_out):
                    totals = [self.rows_of_threads(k, e, width, None) for e in range(width)]
                    store(totals, self.workspaces[k], [self.split, self.flat(col0)])  # (a vector: aligned)
                scf.YieldOp([])
            last = self.arrive()
            finishing = scf.IfOp(last)
            with ir.InsertionPoint(finishing.then_block):
                self.finish(col0, width, valid)
                scf.YieldOp([])
            scf.YieldOp([])

    def rows_of_threads(self, k: int, e: int, width: int, start: ir.Value | None) -> ir.Value:
        """Output k's element e of this lane's vector over the block's rows of threads (their
        values in shared memory), combined in row order onto `start` (None: from the first)."""
        lane_slot = arith.muli(self.lane, index_const(width))
        total = start
        for y in range(self.p.block_y):
            value = memref.load(self.shared[k], [arith.addi(lane_slot, index_const(y * self.p.block_x * width + e))])
            total = value if total is None else combine(self.m.combiners[k], total, value)
        return total

    def arrive(self) -> ir.Value:
        """Count this block done on its column block's counter; whether it came last (the
        same answer for all its threads). Every thread fences (its partial stores before
        anything after), then the barrier, then one thread counts: the pattern of ATen's
        and CUB's last-block reductions."""
        i32 = ir.IntegerType.get_signless(32)
        nvvm.MembarOp(ir.Attribute.parse("#nvvm.mem_scope<gpu>"))
        gpu.barrier()
        first = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, self.tx, index_const(0)))
        with ir.InsertionPoint(first.then_block):
            before = memref.AtomicRMWOp(arith.AtomicRMWKind.addi, arith.constant(i32, 1), self.counters,
                                        [self.counter]).result
            done = arith.index_cast(ir.IndexType.get(), before)
            last = arith.cmpi(arith.CmpIPredicate.eq, arith.addi(done, index_const(1)), self.splits)
            memref.store(arith.extui(i32, last), self.last_flag, [index_const(0)])
            scf.YieldOp([])
        gpu.barrier()
        return arith.cmpi(arith.CmpIPredicate.ne, memref.load(self.last_flag, [index_const(0)]),
                          arith.constant(i32, 0))

    def finish(self, col0: ir.Value, width: int, valid: ir.Value) -> None:
        """In the last block: out[c] = combine(out[c], partials of column c) for its columns
        (out[c]: the initial value where a fill was folded in). Row of threads ty combines
        slices ty, ty + block_y, ...; the rows are combined through shared memory in order."""
        nvvm.MembarOp(ir.Attribute.parse("#nvvm.mem_scope<gpu>"))
        flat_types = [t for t in self.types for _ in range(width)]
        partial = scf.IfOp(valid, flat_types, has_else=True)
        with ir.InsertionPoint(partial.then_block):
            scf.YieldOp(self.slices_loop(col0, width))
        with ir.InsertionPoint(partial.else_block):
            scf.YieldOp([i for i in self.identities() for _ in range(width)])
        slot = arith.muli(self.tx, index_const(width))
        for k, sh in enumerate(self.shared):
            for e in range(width):
                memref.store(partial.results[k * width + e], sh, [arith.addi(slot, index_const(e)) if e else slot])
        gpu.barrier()
        self.write_outputs(col0, width, valid, one_slice=False)

    def write_outputs(self, col0: ir.Value, width: int, valid: ir.Value, one_slice: bool) -> None:
        """The first row of threads: out[c] = combine(out[c] or the initial value, the column's
        total), then the epilogue. The rows of threads' values in shared memory: with one slice,
        the block's own rows, combined first and then onto the initial value (as the slices'
        combine would); else the combined slices, each combined onto it in row order."""
        first = scf.IfOp(arith.andi(valid, arith.cmpi(arith.CmpIPredicate.eq, self.ty, index_const(0))))
        with ir.InsertionPoint(first.then_block):
            for e in range(width):
                col = self.flat(arith.addi(col0, index_const(e)) if e else col0)
                finals = {}
                for k, o in enumerate(self.g.outputs):
                    view = self.views[id(o)]
                    init = memref.load(view, [col]) if self.m.inits.get(o.value) is None else self.m.inits[o.value]
                    total = combine(self.m.combiners[k], init, self.rows_of_threads(k, e, width, None)) \
                        if one_slice else self.rows_of_threads(k, e, width, init)
                    memref.store(total, view, [col])
                    finals[o.value] = total
                if self.m.epilogue:
                    emit_epilogue(self.m.epilogue, finals, delinearize(col, [self.extents[d] for d in self.m.kept]))
            scf.YieldOp([])

    def slices_loop(self, col0: ir.Value, width: int) -> list[ir.Value]:
        """The partials of slices ty, ty + block_y, ... of columns col0 .. col0 + width - 1,
        combined in that order, a vector a slice. The vectors, against an element's store and
        load each (H200, session 69, bench/column_reductions.py, us): [8192, 768] bfloat16
        x.sum(0), 64 slices, 9.9 -> 8.3; x.float().sum(0) of [4096, 4096] 11.1 -> 9.4. Not
        taken: four slices loaded before they are combined (one round, 7.0 -> 7.6)."""
        n_out, at = len(self.types), self.flat(col0)
        loop = scf.ForOp(self.ty, self.splits, index_const(self.p.block_y),
                         [i for i in self.identities() for _ in range(width)])
        with ir.InsertionPoint(loop.body):
            accs = list(loop.inner_iter_args)
            values = [load(ws, [loop.induction_variable, at], width) for ws in self.workspaces]
            for k in range(n_out):
                for e in range(width):
                    accs[k * width + e] = combine(self.m.combiners[k], accs[k * width + e], element(values[k], e))
            scf.YieldOp(accs)
        return list(loop.results)

    def rows_loop(self, col0: ir.Value, width: int) -> list[ir.Value]:
        """Rows row_begin + ty, + block_y, ... of the slice, `unroll` at a time, then the rest
        one by one. Returns the accumulators, output-major ([k * width + e])."""
        p = self.p
        at = self.flat(col0)
        invariant = {id(o): load(self.views[id(o)], [at], width) for o in self.m.column_invariant}
        invariant.update({id(o): load(self.views[id(o)], [arith.remui(at, self.periods[id(o)])], width)
                          for o in self.m.column_trailing})
        invariant.update({id(o): memref.load(self.views[id(o)], [arith.divui(at, self.periods[id(o)])])
                          for o in self.m.column_leading})  # (one value for the vector)
        accs = [i for i in self.identities() for _ in range(width)]
        step = index_const(p.block_y * p.unroll)
        trips = arith.divui(arith.subi(self.row_end, self.row_begin), step)
        main = scf.ForOp(index_const(0), trips, index_const(1), accs)
        with ir.InsertionPoint(main.body):
            base = arith.addi(arith.addi(self.row_begin, arith.muli(main.induction_variable, step)), self.ty)
            rows = [arith.addi(base, index_const(u * p.block_y)) if u else base for u in range(p.unroll)]
            loaded = [self.loads(r, col0, width) for r in rows]
            accs = list(main.inner_iter_args)
            for r, values in zip(rows, loaded):
                accs = self.accumulate(accs, r, col0, width, values, invariant)
            scf.YieldOp(accs)
        done = arith.addi(self.row_begin, arith.muli(trips, step))
        tail = scf.ForOp(arith.addi(done, self.ty), self.row_end, index_const(p.block_y), list(main.results))
        with ir.InsertionPoint(tail.body):
            r = tail.induction_variable
            scf.YieldOp(self.accumulate(list(tail.inner_iter_args), r, col0, width,
                                        self.loads(r, col0, width), invariant))
        return list(tail.results)

    def loads(self, row: ir.Value, col0: ir.Value, width: int) -> dict:
        """The column operands' vectors of this row, and the per-row operands' scalars (of the
        row an operand broadcast over some reduced loops has there)."""
        rows = self.broadcast_rows(row)
        at = [] if self.batch is None else [self.batch]
        stream = "column" in S.STREAMING_LOADS
        loaded = {id(o): load(self.views[id(o)], at + [rows.get(id(o), row), col0], width,
                              stream and width * o.element_bytes == S.VECTOR_BYTES)
                  for o in self.m.column_operands}
        loaded.update({id(o): memref.load(self.views[id(o)], [rows.get(id(o), row)] if o.type.rank else [])
                       for o in self.m.row_operands})
        loaded.update({id(o): memref.load(self.views[id(o)], [rows.get(id(o), row),
                                                              arith.divui(col0, self.periods[id(o)])])
                       for o in self.m.row_leading})  # (one value for the vector: its period is a multiple)
        p = self.m.prologue
        if p and p.linear:
            place = self.place(row, col0)
            loaded.update({id(o): load(self.views[id(o)], [place], width) for o in p.full})
            if p.permuted:
                ivs = delinearize(place, self.dims)
                loaded.update({id(o): load(o.value, [ivs[r] for r in o.results], width) for o in p.permuted})
            for o in p.trailing:  # a vector stays within the innermost dim: the operand's too
                at = arith.remui(place, product(self.dims[len(self.dims) - len(read_at(o)):]))
                loaded[id(o)] = load(self.views[id(o)], [at], width)
            for o in p.leading:  # one value for the vector (within the innermost dim)
                at = arith.divui(place, product(self.dims[len(read_at(o)):]))
                loaded[id(o)] = memref.load(self.views[id(o)], [at])
        return loaded

    def place(self, row: ir.Value, col: ir.Value) -> ir.Value:
        """The element's place in a contiguous buffer of the reduction's rows and columns."""
        return arith.addi(arith.muli(row, self.columns), col)

    def broadcast_rows(self, row: ir.Value) -> dict[int, ir.Value]:
        """id(operand) -> its row index at `row`, for operands broadcast over some reduced loops."""
        if not self.m.broadcast_rows:
            return {}
        ivs = delinearize(row, [self.extents[r] for r in self.m.reduced])
        found: dict[tuple[int, ...], ir.Value] = {}
        for loops in map(tuple, self.m.broadcast_rows.values()):
            if loops not in found:
                linear = index_const(0)
                for d in loops:
                    linear = arith.addi(arith.muli(linear, self.extents[d]), ivs[self.m.reduced.index(d)])
                found[loops] = linear
        return {key: found[tuple(loops)] for key, loops in self.m.broadcast_rows.items()}

    def accumulate(self, accs: list[ir.Value], row: ir.Value, col0: ir.Value, width: int,
                   loaded: dict, invariant: dict) -> list[ir.Value]:
        g, accs = self.g, list(accs)
        computed = self.prologue(row, col0, width, loaded, invariant) if self.m.prologue else []
        for e in range(width):
            mapping = {o.arg: o.value for o in g.operands if not o.is_memref}
            mapping.update({o.arg: computed[self.m.computed[id(o)]][e] for o in g.inputs if id(o) in self.m.computed})
            mapping.update({o.arg: element(invariant[id(o)], e)
                            for o in self.m.column_invariant + self.m.column_trailing + self.m.column_leading})
            mapping.update({o.arg: element(loaded[id(o)], e)
                            for o in self.m.column_operands + self.m.row_operands + self.m.row_leading})
            mapping.update({o.arg: accs[k * width + e] for k, o in enumerate(g.outputs)})
            col = arith.addi(col0, index_const(e)) if e else col0
            for k, v in enumerate(clone_body(g.body, mapping, lambda d, col=col: self.index_of(d, row, col))):
                accs[k * width + e] = v
        return accs

    def prologue(self, row: ir.Value, col0: ir.Value, width: int, loaded: dict, invariant: dict) -> list[list]:
        """The prologue's generic at this row's `width` columns, written; per output, its values."""
        p = self.m.prologue
        values: list[list[ir.Value]] = [[] for _ in p.outputs]
        for e in range(width):
            mapping = {o.arg: o.value for o in p.generic.operands if not o.is_memref}
            mapping.update({o.arg: element(invariant[id(o)] if id(o) in invariant else loaded[id(o)], e)
                            for o in p.inputs + p.full + p.indexed()})
            col = arith.addi(col0, index_const(e)) if e else col0

            def at(d: int, col=col) -> ir.Value:  # (a linear prologue's body has no linalg.index)
                return index_const(0) if p.loops[d] == ZERO else self.index_of(p.loops[d], row, col)
            for k, y in enumerate(clone_body(p.generic.body, mapping, at)):
                values[k].append(y)
        at = [self.place(row, col0)] if p.linear else [row, col0]
        for o, ys in zip(p.outputs, values):
            store(ys, self.views[id(o)], at)
        return values

    def index_of(self, d: int, row: ir.Value, col: ir.Value) -> ir.Value:
        if d in self.m.reduced:
            return delinearize(row, [self.extents[r] for r in self.m.reduced])[self.m.reduced.index(d)]
        if d in self.m.kept:
            return delinearize(self.flat(col), [self.extents[k] for k in self.m.kept])[self.m.kept.index(d)]
        return index_const(0)  # a loop of extent 1
