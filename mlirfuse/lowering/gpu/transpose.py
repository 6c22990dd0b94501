"""The transpose kernel: a linalg.generic with only parallel loops, outputs indexed by the
identity (contiguous along the innermost loop, `inner`) and inputs read contiguous along
another loop (`across`): `x.permute(1, 0) * 2`, a transpose between reshapes.

A block takes `squares` `tile` x `tile` squares of the loops `across` and `inner` (each
for one index of the other, batch, loops), each moved by its share of the block's threads,
and both global sides are coalesced:
  1. each permuted input's square is read along `across` (vectors of `vector` elements; 8
     lanes cover a 128-byte span of a row, a warp 4 rows; a thread's several vectors all
     loaded before any is stored) into shared memory laid out [inner][across], each row
     padded by one element so that neither phase's accesses hit one bank twice;
  2. after a barrier, each thread computes `vector` consecutive outputs along `inner`: the
     permuted inputs come from shared memory (a column of the square), the other inputs
     from global memory (vectors along `inner`, or one scalar where they do not vary along
     it), and each output is stored as one vector.
The vector variant needs both extents multiples of the vector and the vector-accessed
pointers aligned (checked on the host); the scalar variant reads and writes the same
positions element by element, each guarded. Parameters come from
`heuristics.transpose_heuristic`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from mlirfuse.lowering.gpu import heuristics as S
from mlirfuse.lowering.gpu.heuristics import LANES_ACROSS
from mlirfuse.lowering.gpu.kernels import (
    ZERO,
    Generic,
    Operand,
    aligned,
    clone_body,
    delinearize,
    divisible,
    element,
    guarded_launch,
    load,
    product,
    store,
    variants,
)
from mlirfuse.lowering.linalg_builders import index_const


@dataclass
class TransposeMatch:
    generic: Generic
    across: int  # the loop the permuted inputs are contiguous along
    permuted: list[Operand]  # inputs contiguous along `across` that vary along `inner`
    direct: list[Operand]  # inputs (and outputs the body reads) read from global memory

    @property
    def inner(self) -> int:
        return self.generic.n_loops - 1

    def permuted_bytes(self) -> list[int]:
        return [o.element_bytes for o in self.permuted]


def match_transpose(g: Generic) -> TransposeMatch | str:
    """The generic as a transpose, or why not."""
    if any(g.reduction):
        return "has reduction loops"
    if g.n_loops < 2:
        return "fewer than 2 loops"
    inner = g.n_loops - 1
    identity = list(range(g.n_loops))
    permuted, direct, across = [], [], set()
    for i, o in enumerate(g.operands):
        if not o.is_memref:
            continue
        if o.is_output:
            if o.results != identity:
                return f"output {i} is not indexed by the identity"
            if list(o.arg.uses):
                direct.append(o)
            continue
        last = o.results[-1] if o.results else None
        if last == inner or inner not in o.results:
            direct.append(o)  # contiguous along `inner`, or the same for all of it
            continue
        if last == ZERO:
            return f"input {i} ends in a unit dim and varies along the innermost loop elsewhere"
        permuted.append(o)
        across.add(last)
    if not permuted:
        return "no input is read across the innermost loop"
    if len(across) > 1:
        return f"permuted inputs are contiguous along different loops {sorted(across)}"
    return TransposeMatch(g, across.pop(), permuted, direct)


def emit_transpose(m: TransposeMatch, params: S.TransposeParams) -> ir.Operation:
    """Replace the generic with the tiled transpose kernel."""
    g, p = m.generic, params
    with ir.InsertionPoint(g.op), g.op.location:
        ext = g.extents()
        tiles_across = arith.ceildivui(ext[m.across], index_const(p.tile))
        tiles_inner = arith.ceildivui(ext[m.inner], index_const(p.tile))
        batch = product([ext[d] for d in _batch_loops(m)])
        total = product(ext)
        squares = arith.muli(arith.muli(batch, tiles_across), tiles_inner)
        grid = arith.ceildivui(squares, index_const(p.squares))
        vector_ok = None
        if p.vector > 1:
            vectored = m.permuted + [o for o in m.direct if _along_inner(o, m.inner)] + g.outputs
            vector_ok = arith.andi(
                arith.andi(divisible(ext[m.across], p.vector), divisible(ext[m.inner], p.vector)),
                aligned([o.value for o in vectored], [p.vector * o.element_bytes for o in vectored]))
        workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
        shared = [ir.MemRefType.get([p.squares * p.tile * (p.tile + 1)], o.type.element_type, memory_space=workgroup)
                  for o in m.permuted]
        nonempty = arith.cmpi(arith.CmpIPredicate.ugt, total, index_const(0))
        body, guard = guarded_launch(g, "transpose", nonempty, grid, index_const(p.block), shared)
    with ir.InsertionPoint(body.operations[len(body.operations) - 1]), g.op.location:
        kernel = _TransposeKernel(m, p, ext, tiles_across, tiles_inner, squares, list(body.arguments)[12:],
                                  body.arguments[0], body.arguments[3])
        variants(vector_ok, p.vector, kernel.variant)
    g.op.erase()
    return guard.operation


def _batch_loops(m: TransposeMatch) -> list[int]:
    return [d for d in range(m.generic.n_loops) if d not in (m.across, m.inner)]


def _along_inner(o: Operand, inner: int) -> bool:
    return bool(o.results) and o.results[-1] == inner


class _TransposeKernel:
    """Block b, threads of its square s (thread t / (block / squares)): square q = b * squares
    + s, tile (q % tiles_inner) along `inner`, (q / tiles_inner) % tiles_across along `across`,
    batch index q / (tiles_inner * tiles_across). Its thread t' (t % (block / squares)): the
    `vector` elements from (t' % 8) * vector of rows t' / 8, t' / 8 + block / squares / 8, ...
    of the square, in each phase. A square past the last (the last block's) stages the last
    one again and stores nothing: its threads still reach the barrier."""

    def __init__(self, m: TransposeMatch, params: S.TransposeParams, extents: list[ir.Value],
                 tiles_across: ir.Value, tiles_inner: ir.Value, squares: ir.Value, shared: list[ir.Value],
                 bx: ir.Value, tx: ir.Value):
        self.m, self.g, self.p, self.extents, self.shared = m, m.generic, params, extents, shared
        threads = index_const(params.block // params.squares)
        square = arith.addi(arith.muli(bx, index_const(params.squares)), arith.divui(tx, threads))
        self.square_in = arith.cmpi(arith.CmpIPredicate.ult, square, squares)
        square = arith.minui(square, arith.subi(squares, index_const(1)))
        self.shared_start = arith.muli(arith.divui(tx, threads), index_const(params.tile * (params.tile + 1)))
        tx = arith.remui(tx, threads)
        rest = arith.divui(square, tiles_inner)
        tile = index_const(params.tile)
        self.inner0 = arith.muli(arith.remui(square, tiles_inner), tile)
        self.across0 = arith.muli(arith.remui(rest, tiles_across), tile)
        batch_loops = _batch_loops(m)
        batch = delinearize(arith.divui(rest, tiles_across), [extents[d] for d in batch_loops]) \
            if batch_loops else []
        self.batch = dict(zip(batch_loops, batch))
        self.column = arith.muli(arith.remui(tx, index_const(LANES_ACROSS)), index_const(params.vector))
        self.row = arith.divui(tx, index_const(LANES_ACROSS))

    def rows(self) -> list[ir.Value]:
        """This thread's rows of the square (local indices)."""
        per_step = self.p.block // self.p.squares // LANES_ACROSS
        return [arith.addi(self.row, index_const(s * per_step)) if s else self.row
                for s in range(max(1, self.p.tile // per_step))]

    def ivs(self, across: ir.Value, inner: ir.Value) -> list[ir.Value]:
        return [across if d == self.m.across else inner if d == self.m.inner else self.batch[d]
                for d in range(self.g.n_loops)]

    def variant(self, width: int) -> None:
        """`width` = vector: vector accesses, a guard per vector; 1: scalar accesses of the
        same positions, a guard per element."""
        m, ext = self.m, self.extents
        # Phase 1: each permuted input's square into shared memory, [inner][across].
        self.stage(width)
        gpu.barrier()
        # Phase 2: the outputs along `inner`, the permuted inputs read from the squares.
        self.positions(self.across0, ext[m.across], self.inner0, ext[m.inner], width, self.compute_and_store)

    def positions(self, row0: ir.Value, rows: ir.Value, col0: ir.Value, cols: ir.Value, width: int,
                  emit: Callable[..., None]) -> None:
        """`emit(r, row, col, column, width)` for this thread's positions of the square whose rows
        start at `row0` (of `rows`) and columns at `col0` (of `cols`): `r` the local row,
        `row`/`col` the global indices of the position's first element, `column` its local
        column; under a guard that the position is inside (the `width` elements from `col`)."""
        for r in self.rows():
            row = arith.addi(row0, r)
            row_in = arith.andi(self.square_in, arith.cmpi(arith.CmpIPredicate.ult, row, rows))
            for start in range(0, self.p.vector, width):
                column = arith.addi(self.column, index_const(start)) if start else self.column
                col = arith.addi(col0, column)
                guard = scf.IfOp(arith.andi(row_in, arith.cmpi(arith.CmpIPredicate.ult, col, cols)))
                with ir.InsertionPoint(guard.then_block):
                    emit(r, row, col, column, width)
                    scf.YieldOp([])

    def stage(self, width: int) -> None:
        """The permuted inputs' elements at this thread's positions of the square into its
        rows [inner][across]: every load first (all of them in flight), then the shared
        stores. A position outside the extents loads the last inside one instead (its row or
        vector clamped), so no load needs a guard: the second phase reads only the positions
        inside."""
        m, ext, p = self.m, self.extents, self.p
        last_inner = arith.subi(ext[m.inner], index_const(1))
        last_across = arith.subi(ext[m.across], index_const(width))
        loaded = []
        for r in self.rows():
            inner = arith.minui(arith.addi(self.inner0, r), last_inner)
            for start in range(0, p.vector, width):
                column = arith.addi(self.column, index_const(start)) if start else self.column
                across = arith.minui(arith.addi(self.across0, column), last_across)
                ivs = self.ivs(across, inner)
                loaded.append((r, column, [load(o.value, self.indices(o, ivs), width) for o in m.permuted]))
        for r, column, values in loaded:
            slot = arith.addi(self.shared_start, arith.addi(arith.muli(r, index_const(p.tile + 1)), column))
            for value, sh in zip(values, self.shared):
                for e in range(width):
                    memref.store(element(value, e), sh, [arith.addi(slot, index_const(e)) if e else slot])

    def indices(self, o: Operand, ivs: list[ir.Value]) -> list[ir.Value]:
        return [index_const(0) if r == ZERO else ivs[r] for r in o.results]

    def compute_and_store(self, r: ir.Value, across: ir.Value, inner: ir.Value, column: ir.Value,
                          width: int) -> None:
        """Outputs at (across, inner .. inner + width - 1), across = across0 + r; `column`:
        inner's local index."""
        m, g, p = self.m, self.g, self.p
        ivs = self.ivs(across, inner)
        direct = {id(o): load(o.value, self.indices(o, ivs), width if _along_inner(o, m.inner) else 1)
                  for o in m.direct}
        results: list[list[ir.Value]] = [[] for _ in g.outputs]
        for e in range(width):
            mapping = {o.arg: o.value for o in g.operands if not o.is_memref}
            mapping.update({o.arg: element(direct[id(o)], e) for o in m.direct})
            slot = arith.addi(self.shared_start, arith.addi(arith.muli(
                arith.addi(column, index_const(e)) if e else column, index_const(p.tile + 1)), r))
            mapping.update({o.arg: memref.load(sh, [slot]) for o, sh in zip(m.permuted, self.shared)})

            def index_of(d: int, e: int = e) -> ir.Value:
                return arith.addi(ivs[d], index_const(e)) if e and d == m.inner else ivs[d]

            for k, v in enumerate(clone_body(g.body, mapping, index_of)):
                results[k].append(v)
        for o, elems in zip(g.outputs, results):
            store(elems if width > 1 else elems[0], o.value, ivs)
