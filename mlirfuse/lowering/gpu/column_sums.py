"""Column sums in a normalization kernel (nvFuser's inner-outer persistent schedule): a column
reduction over the rows of a normalization chain, out[c] = combine over rows r of f(t[r, c],
..., s[r], w[c]), whose tiles the chain holds in registers (LayerNorm's backward: the weight
and bias gradients, sums over rows of dy * x_hat and dy, beside the input gradient the
chain computes from the same dy and x_hat). Run apart, the column reduction reads those
tiles from memory a second time: H200, bench/models.py (session 83), GPT-2's LayerNorm
backward regions moved their bytes at 37-47% of the copy bandwidth.

The chain's held kernel (`normalization.HELD`) takes the sums: its blocks (at most the column
reduction's `target_blocks`) loop over the row groups (block b takes groups b, b + grid, ...),
each thread accumulating, for the columns its slots hold, the body's value at each of its
rows (the same columns at every row: a thread's slots are fixed by its lane). After the loop
the block's row groups combine their accumulators through shared memory (group 1's, then
2's, ..., then group 0 adds them to its own) into a row of a float workspace [blocks,
columns], and a column reduction (the original's schedule) combines those rows, in a fixed
order, into the outputs from their initial values (folded fills): deterministic. Where the
host launches another variant (rows too long, unaligned) or the grid is too small for the
loop to pay (`GROUPS_PER_BLOCK`), the column reduction runs as it was, after the chain's
kernel. Taken where the reduction reads tiles of 4 bytes or wider and nothing the chain does not hold
(tiles it reads or computes, its column vectors, row values), writes outputs of floats
combined by known combiners, and may move to the chain's kernel (`movable`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, gpu, linalg, memref, scf

from mlirfuse.lowering.gpu import column as gpu_column
from mlirfuse.lowering.gpu import heuristics as S
from mlirfuse.lowering.gpu.combiners import identity
from mlirfuse.lowering.gpu.kernels import (
    ALTERNATIVE_ATTR,
    SCHEDULE_ATTR,
    Generic,
    analyze,
    base_buffer,
    clone_body,
    combine,
    flat,
    passive,
    store,
)
from mlirfuse.lowering.gpu.normalization_kernel import COL, ROW, TILE
from mlirfuse.lowering.linalg_builders import index_const

if TYPE_CHECKING:
    from mlirfuse.lowering.gpu.normalization import Chain, Member, Variant
    from mlirfuse.lowering.gpu.normalization_kernel import NormalizationKernel


BRANCH = "column-sums"  # the host's scf.if choosing between the partials' combine and the sum apart


@dataclass(eq=False)  # (compared, its fields would read ops that emission erases)
class ColumnSum:
    match: gpu_column.ColumnReductionMatch  # its inits set (the folded fills)
    member: Member  # the generic as the chain's kernel reads it: rows its reduced loops, cols its kept ones
    params: S.ColumnReductionParams  # its own schedule: run apart, and the partials' combine
    position: int  # among the function's ops: before the chain's last, it moves after the chain's kernel


def column_member(chain: Chain, g: Generic) -> tuple[gpu_column.ColumnReductionMatch, Member] | str:
    """The column reduction `g` over the chain's rows and row elements, as the chain's kernel
    would read it; else why not."""
    from mlirfuse.lowering.gpu.normalization import Member, _captured_memrefs

    m = gpu_column.match_column_reduction(g)
    if isinstance(m, str):
        return m
    if m.outer or m.broadcast_rows or m.column_trailing or m.column_leading or m.row_leading:
        return "reads operands broadcast over rows or columns"
    ext = chain.extents
    if [ext.loop(g, d) for d in m.reduced] != chain.row_classes or \
            [ext.loop(g, d) for d in m.kept] != chain.col_classes:
        return "not over the chain's rows and row elements"
    if any(not isinstance(o.type.element_type, (ir.F32Type, ir.F64Type)) for o in g.outputs):
        return "outputs not float32 or float64"
    if _captured_memrefs(g.body) or any(o.row_strided for o in g.operands if o.is_memref):
        return "reads memory in its body, or rows of their own stride"
    roles = {}
    for o in m.column_operands:
        roles[id(o)] = TILE
    for o in m.column_invariant:
        roles[id(o)] = COL
    for o in m.row_operands:
        roles[id(o)] = ROW
    if any(o.is_memref and not o.is_output and id(o) not in roles for o in g.operands):
        return "reads an operand the chain's kernel cannot"
    return m, Member(g, TILE, m.reduced, m.kept, roles)


def held(chain: Chain, member: Member) -> bool:
    """Every tile, column vector and row value the sum reads is one the chain's kernel reads
    alike (not broadcast) or computes: its views and the host's alignment checks cover it (and
    it is defined where the kernel is)."""
    read = {(o.value, m.roles[id(o)]) for m in chain.members for o in m.generic.inputs
            if o.is_memref and id(o) not in m.broadcast}
    written = {(o.value, TILE if m.kind == TILE else ROW) for m in chain.members for o in m.generic.outputs}
    return all((o.value, member.roles[id(o)]) in read | written for o in member.generic.inputs if o.is_memref)


def apart(s: ColumnSum) -> None:
    """The sum as it was: its own kernel, where it was."""
    gpu_column.emit_column_reduction(s.match, s.params)


def movable(ops: list[ir.Operation], position: int, chain: Chain, g: Generic, folded: set[int]) -> bool:
    """The reduction at `position` may run where the chain's kernel does (its last member's
    position): no generic in between (the chain's members included) writes what it reads or
    reads or writes what it writes, but fills folded into it (`folded`), only host ops that
    touch no buffer's contents sit in between, and the scalars its body uses are defined
    before the chain's kernel."""
    last = chain.indices[-1]
    if position > last:  # its body is cloned into the chain's kernel: what it uses must be defined there
        from mlirfuse.lowering.gpu.normalization import _captured_values

        later = {r for k in range(last, position) for r in ops[k].results}
        if any(not o.is_memref and o.value in later for o in g.inputs) or _captured_values(g.body) & later:
            return False
    reads = {base_buffer(o.value) for o in g.inputs if o.is_memref}
    writes = {base_buffer(o.value) for o in g.outputs}
    between = range(position + 1, last + 1) if position < last else range(last + 1, position)
    for k in between:
        op = ops[k]
        if k in folded:
            continue
        if op.name != "linalg.generic":
            if not passive(op):
                return False
            continue
        n_out = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[1]
        operands = list(op.operands)
        others_read = {base_buffer(v) for v in operands[:len(operands) - n_out] if isinstance(v.type, ir.MemRefType)}
        others_write = {base_buffer(v) for v in operands[len(operands) - n_out:]}
        if others_write & (reads | writes) or others_read & writes:
            return False
    return True


def accumulate(kernel: NormalizationKernel, sums: list[ColumnSum], accs: list[ir.Value]) -> list[ir.Value]:
    """After the chain on a held row: each sum's body at each element the thread holds, combined
    into its accumulators (per sum, output, slot and element, flat)."""
    chunk = kernel.whole_row
    found, at = [], 0
    for s in sums:
        m, g = s.member, s.member.generic
        kernel.env[id(m)] = kernel.inputs(m)
        n = len(chunk.cols) * chunk.width
        current = [accs[at + k * n: at + (k + 1) * n] for k in range(len(g.outputs))]
        at += n * len(g.outputs)
        for j in range(len(chunk.cols)):
            for e in range(chunk.width):
                mapping = kernel.mapping(m, chunk, j, e)
                slot = j * chunk.width + e
                mapping.update({o.arg: current[k][slot] for k, o in enumerate(g.outputs)})
                values = clone_body(g.body, mapping, lambda d, j=j, e=e: kernel.index(m, chunk, j, e, d),
                                    valid=chunk.valid[j])
                for k, v in enumerate(values):
                    current[k][slot] = arith.select(chunk.valid[j], v, current[k][slot])
        found += [a for per_output in current for a in per_output]
    return found


def registers(sums: list[ColumnSum], params: S.NormalizationParams) -> tuple[int, int]:
    """(the held kernel's register cap with the sums' accumulators, the largest block that
    cap lets run): its own cap and a register a float32 accumulator (two a float64). Where the
    held rows may take a larger block (a row length known at run time: tiers up to the largest
    block), the sums run apart (`in_held`). GPT-2's LayerNorm backward over rows of 768, held
    in 3 slots of 4, spilled 180 bytes under the chain's own 64."""
    accumulators = sum(max(1, o.element_bytes // 4) for s in sums for o in s.match.generic.outputs) \
        * params.slots * params.vector
    cap = min(S.MAX_REGISTERS, -(-(params.max_registers + accumulators) // 8) * 8)
    block = 1
    while block * 2 * cap <= S.REGISTER_FILE:
        block *= 2
    return cap, block


def in_held(sums: list[ColumnSum], params: S.NormalizationParams, first: Variant) -> bool:
    """A kernel of the chain takes the sums: the chain holds its rows (`normalization.HELD`
    first), in blocks (at most its largest tier's threads, or `min_block`) that fit their
    registers and shared memory, and the sums read tiles of 4 bytes or wider (those of 2
    lost, `GROUPS_PER_BLOCK`). A row length known at run time is held by tiers of up to
    `params.block` threads: taken where that block fits too."""
    from mlirfuse.lowering.gpu.normalization import HELD

    narrow = any(o.element_bytes < 4 for s in sums for o in s.match.column_operands)  # (`GROUPS_PER_BLOCK`)
    return bool(sums) and first == HELD and not narrow and shared_types(sums, params) is not None and \
        max(params.tiers[-1].threads, params.min_block) <= registers(sums, params)[1]


# The held kernel takes the sums where its blocks loop over at least this many row groups each
# (the grid before the loop at least this many times the column reduction's `target_blocks`);
# else the chain's held kernel without them runs, and the column reduction after it. H200,
# session 84, bench/normalization_micro.py (fwd+bwd kernel us, fused / apart): LayerNorm float32
# 8192x768 45.1 / 50.1 and 4096x4096 105.2 / 120.5 (7.8 row groups a block); RMSNorm float32
# 4096x1024 34.5 / 30.1 (3.9); bfloat16 tiles lost at both: LayerNorm 8192x768 34.5 / 28.8
# (3.9), 4096x4096 82.4 / 72.3 (7.8), RMSNorm 4096x1024 17.7 / 16.5: the sums' re-read they
# save is half as many bytes, and the loop's blocks (4 an SM) hide less latency than the
# chain's own grid.
GROUPS_PER_BLOCK = 6


def identities(sums: list[ColumnSum], slots: int, width: int) -> list[ir.Value]:
    return [identity(c.name, o.type.element_type) for s in sums
            for c, o in zip(s.match.combiners, s.match.generic.outputs) for _ in range(slots * width)]


def _columns(lane: ir.Value, threads: ir.Value, slots: int, width: int) -> list[ir.Value]:
    """Slot j's first column: (j * threads + lane) * width, as the held row's chunk has it."""
    return [arith.muli(arith.addi(arith.muli(index_const(j), threads), lane) if j else lane, index_const(width))
            for j in range(slots)]


def _each_slot(cols: list[ir.Value], row_len: ir.Value, emit) -> None:
    """`emit(j, col)` for each slot inside the row."""
    for j, col in enumerate(cols):
        inside = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, col, row_len))
        with ir.InsertionPoint(inside.then_block):
            emit(j, col)
            scf.YieldOp([])


def write_partials(sums: list[ColumnSum], accs: list[ir.Value], workspaces: list[ir.Value], shared: list[ir.Value],
                   bx: ir.Value, tx: ir.Value, threads: ir.Value, rows_per_block: ir.Value, row_len: ir.Value,
                   slots: int, width: int) -> None:
    """The block's partials, a row of each workspace: its row groups' accumulators combined
    through shared memory (a row of each output), group 1's, then 2's, ... in turn, then group 0
    adds that to its own and stores it."""
    combiners = [c for s in sums for c in s.match.combiners]
    n = slots * width
    per_output = [accs[k * n:(k + 1) * n] for k in range(len(workspaces))]
    group, lane = arith.divui(tx, threads), arith.remui(tx, threads)
    cols = _columns(lane, threads, slots, width)
    one = index_const(1)
    turns = scf.ForOp(one, rows_per_block, one)
    with ir.InsertionPoint(turns.body):
        r = turns.induction_variable
        mine = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, group, r))
        with ir.InsertionPoint(mine.then_block):
            first = arith.cmpi(arith.CmpIPredicate.eq, r, one)

            def add(j: int, col: ir.Value) -> None:
                for values, sh, c in zip(per_output, shared, combiners):
                    for e in range(width):
                        at = arith.addi(col, index_const(e)) if e else col
                        v = values[j * width + e]
                        memref.store(arith.select(first, v, combine(c, memref.load(sh, [at]), v)), sh, [at])
            _each_slot(cols, row_len, add)
            scf.YieldOp([])
        gpu.barrier()
        scf.YieldOp([])
    several = arith.cmpi(arith.CmpIPredicate.ugt, rows_per_block, one)
    leader = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, group, index_const(0)))
    with ir.InsertionPoint(leader.then_block):
        def write(j: int, col: ir.Value) -> None:
            for values, sh, ws, c in zip(per_output, shared, workspaces, combiners):
                part = []
                for e in range(width):
                    v = values[j * width + e]
                    others = scf.IfOp(several, [v.type], has_else=True)
                    with ir.InsertionPoint(others.then_block):
                        at = arith.addi(col, index_const(e)) if e else col
                        scf.YieldOp([combine(c, v, memref.load(sh, [at]))])
                    with ir.InsertionPoint(others.else_block):
                        scf.YieldOp([v])
                    part.append(others.results[0])
                store(part if width > 1 else part[0], ws, [bx, col])
        _each_slot(cols, row_len, write)
        scf.YieldOp([])


def run_held(make_kernel, run, sums: list[ColumnSum], rows: ir.Value, rows_per_block: ir.Value,
             threads: ir.Value, row_len: ir.Value, workspaces: list[ir.Value], shared: list[ir.Value],
             bx: ir.Value, tx: ir.Value, grid: ir.Value, slots: int, width: int) -> None:
    """The held variant's body with the sums: a loop over row groups b, b + grid, ...,
    accumulating; then the block's partials written (in the launch's body)."""
    groups = arith.ceildivui(rows, rows_per_block)
    loop = scf.ForOp(bx, groups, grid, identities(sums, slots, width))
    with ir.InsertionPoint(loop.body):
        kernel = make_kernel(loop.induction_variable)
        run(kernel)
        accs = accumulate(kernel, sums, list(loop.inner_iter_args))
        # the next row's totals go through the same shared memory, where a row has several warps
        several = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ugt, threads, index_const(S.WARP)))
        with ir.InsertionPoint(several.then_block):
            gpu.barrier()
            scf.YieldOp([])
        scf.YieldOp(accs)
    write_partials(sums, list(loop.results), workspaces, shared, bx, tx, threads, rows_per_block, row_len,
                   slots, width)


def shared_types(sums: list[ColumnSum], params: S.NormalizationParams) -> list[ir.Type] | None:
    """The workgroup buffers combining a block's row groups: a held row of each output (at
    most its largest tier's threads x the vector x the slots), None where they would take
    more than `SHARED_BYTES`."""
    elements = params.tiers[-1].threads * params.vector * params.slots
    types = [o.type.element_type for s in sums for o in s.match.generic.outputs]
    if elements * sum(ir.FloatType(t).width // 8 for t in types) > SHARED_BYTES:
        return None
    workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
    return [ir.MemRefType.get([elements], t, memory_space=workgroup) for t in types]


SHARED_BYTES = 32 * 1024  # of the 48 KB a block may take statically, with the chain's own


def workspaces(sums: list[ColumnSum], partial_rows: ir.Value, row_len: ir.Value) -> list[list[ir.Value]]:
    """Host: per sum, a [partial rows, row] workspace per output (an empty row is one column)."""
    dyn = ir.ShapedType.get_dynamic_size()
    return [[memref.alloc(ir.MemRefType.get([dyn, dyn], o.type.element_type),
                          [partial_rows, arith.maxui(row_len, index_const(1))], [])
             for o in s.match.generic.outputs] for s in sums]


def finish(s: ColumnSum, fused: ir.Value, spaces: list[ir.Value]) -> None:
    """Host, where the sum was (or after the chain's launches, where it was before them): where
    the held variant ran (`fused`), its partials combined into its outputs by a column
    reduction; else the sum as it was (an alternative launch). Its workspaces freed after."""
    op = s.match.generic.op
    with ir.InsertionPoint(op), op.location:
        choice = scf.IfOp(fused, has_else=True)
        choice.operation.attributes[SCHEDULE_ATTR] = ir.StringAttr.get(BRANCH)
        with ir.InsertionPoint(choice.then_block):
            _combine_partials(s, spaces)
            scf.YieldOp([])
        with ir.InsertionPoint(choice.else_block):
            end = scf.YieldOp([])
        for ws in spaces:
            memref.dealloc(ws)
    op.move_before(end)
    guard = gpu_column.emit_column_reduction(s.match, s.params)
    guard.attributes[ALTERNATIVE_ATTR] = ir.UnitAttr.get()


def partials_params(s: ColumnSum) -> S.ColumnReductionParams:
    """The schedule of the column reduction combining a sum's partials: the sum's own, its
    vector cut to the float partials, one geometry."""
    widest = max(ir.FloatType(o.type.element_type).width // 8 for o in s.match.generic.outputs)
    return replace(s.params, vector=max(1, min(s.params.vector, S.VECTOR_BYTES // widest)),
                   narrow_block_x=0, narrow_unroll=0)


def _combine_partials(s: ColumnSum, spaces: list[ir.Value]) -> None:
    """out = combine over partial rows p of ws[p, c], from the outputs' initial values: a
    column reduction generic, emitted at once with the sum's own schedule (its vector cut to
    the partials' float elements)."""
    g = s.match.generic
    outs = [o.value if o.type.rank == 1 else flat(o.value) for o in g.outputs]
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    read = ir.AffineMapAttr.get(ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(1), ir.AffineDimExpr.get(0)]))
    write = ir.AffineMapAttr.get(ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(0)]))
    op = linalg.GenericOp([], spaces, outs, ir.ArrayAttr.get([read] * len(spaces) + [write] * len(outs)),
                          ir.ArrayAttr.get([parallel, reduction]))
    types = [o.type.element_type for o in g.outputs]
    body = op.regions[0].blocks.append(*(types + types))
    n = len(types)
    with ir.InsertionPoint(body):
        linalg.YieldOp([combine(c, body.arguments[n + k], body.arguments[k])
                        for k, c in enumerate(s.match.combiners)])
    partials = gpu_column.match_column_reduction(analyze(op.operation))
    assert not isinstance(partials, str), partials
    partials.inits = {new: s.match.inits[o.value] for o, new in zip(g.outputs, outs) if o.value in s.match.inits}
    gpu_column.emit_column_reduction(partials, partials_params(s))
