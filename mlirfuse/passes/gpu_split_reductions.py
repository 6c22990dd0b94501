"""gpu-split-reductions: a reduction whose reduced loops sit on both sides of kept ones in
memory (BatchNorm's statistics, x.sum((0, 2, 3)) of [N, C, H, W]; x.sum((0, 2)) of
[A, B, C, D]) becomes reductions that the GPU schedules take: first over its innermost run of
reduced loops (an inner reduction of rows of H * W elements into partials [N, C] where the
run is last; a batched column reduction where kept loops follow it: partials [A, B, D]), then
over the others (a column reduction of the partials into [C]), split again where they still
sit around kept ones (x.sum((0, 2, 4)) of a 5-d x: three reductions). No schedule reads such a
reduction in one kernel: it ran naive, a thread an output walking every reduced element.

Expects the GPU path's generalized entry point (memrefs). The first generic is the original
with its other reduced loops made parallel, writing float32 (the accumulator type) partials
that start at the combiner's identity (a fill the first reduction folds in); its body
combines into the partial as it did into the output. The second combines the partials into
the output, which keeps its initial value. Only where every output's combiner is known,
every operand read at all reduced loops orders the loops alike, the body reads no loop
index, and schedules take the reductions made (a run in the middle: the column reduction;
the second: a reduction schedule, or its own split): else the reduction stays whole.
Reductions reassociate, as the schedules' own split ones do.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg, memref

from mlirfuse.lowering.gpu import column as gpu_column
from mlirfuse.lowering.gpu import reduction as gpu_reduction
from mlirfuse.lowering.gpu.combiners import identity, output_combiners
from mlirfuse.lowering.gpu.kernels import ZERO, Generic, analyze, clone_body, combine, nested_ops
from mlirfuse.lowering.linalg_builders import index_const
from mlirfuse.passes.common import entry_functions

NAME = "gpu-split-reductions"
OPTIONS: dict = {}


def run(module: ir.Operation) -> None:
    for func in entry_functions(module):
        for op in list(func.regions[0].blocks[0].operations):
            op = op.operation
            if op.name == "linalg.generic":
                g = analyze(op)
                order = None if isinstance(g, str) else _split_order(g)
                if order is not None:
                    _split(g, *order)


def _split_order(g: Generic) -> tuple[list[int], list[int]] | None:
    """(the loops in memory order, the innermost run of reduced ones) where the reduction
    needs the split (reduced loops outside that run); None where a schedule takes it as it
    is, or it cannot be split."""
    if not any(g.reduction) or all(g.reduction):
        return None
    if not isinstance(gpu_reduction.match_inner_reduction(g), str) or \
            not isinstance(gpu_column.match_column_reduction(g), str):
        return None
    if isinstance(output_combiners(g), str) or any(op.name == "linalg.index" for op in nested_ops(g.body)):
        return None
    loops = [d for d in range(g.n_loops) if g.static[d] != 1]
    reduced = {d for d in loops if g.reduction[d]}
    orders = {tuple(r for r in o.results if r != ZERO and g.static[r] != 1) for o in g.inputs
              if o.is_memref and reduced <= set(o.results)}
    order = next(iter(orders)) if len(orders) == 1 else None
    if order is None or sorted(order) != loops:
        return None
    end = len(order)
    while end and order[end - 1] not in reduced:
        end -= 1
    start = end
    while start and order[start - 1] in reduced:
        start -= 1
    run = list(order[start:end])
    if not run or len(run) == len(reduced):
        return None
    return list(order), run


def _split(g: Generic, order: list[int], run: list[int]) -> bool:
    """Replace g by the two reductions (the second split again where it needs it), unless no
    schedule takes one of them: g then stays as it was (x.sum((0, 2, 4)) of a 5-d x left a sum
    over (0, 2) of [N0, K1, N2, K3] partials, which failed to compile naive, before the second
    was split again). Returns whether g was replaced."""
    op = g.op
    block = op.operation.block
    before = {o.operation for o in block.operations}
    first, second = _build(g, order, run)
    # (a run of trailing loops: an inner reduction, naive where unit loops sit among them, a
    # thread a row still; a run in the middle: a batched column reduction, or no split)
    trailing = run == order[len(order) - len(run):]
    if (trailing or _scheduled(first, column=True)) and (_scheduled(second) or _split_again(second)):
        op.erase()
        return True
    for new in reversed([o.operation for o in block.operations if o.operation not in before]):
        new.erase()
    return False


def _scheduled(op: ir.Operation, column: bool = False) -> bool:
    """A reduction schedule (only the column one, `column`) takes the op."""
    g = analyze(op)
    return not isinstance(g, str) and (not isinstance(gpu_column.match_column_reduction(g), str) or
                                       not column and not isinstance(gpu_reduction.match_inner_reduction(g), str))


def _split_again(op: ir.Operation) -> bool:
    g = analyze(op)
    order = None if isinstance(g, str) else _split_order(g)
    return order is not None and _split(g, *order)


def _build(g: Generic, order: list[int], run: list[int]) -> tuple[ir.Operation, ir.Operation]:
    """The two reductions, before g: over `run`, then over the other reduced loops."""
    op = g.op
    combiners = output_combiners(g)
    kept = [d for d in order if d not in run]  # the partials' loops, in memory order
    source = next(o for o in g.inputs if o.is_memref and [r for r in o.results if r in order] == order)
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    with ir.InsertionPoint(op), op.location:
        sizes = [memref.dim(source.value, index_const(source.results.index(d))) for d in kept]
        partials = []
        for out, c in zip(g.outputs, combiners):
            t = out.type.element_type
            partial = memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()] * len(kept), t), sizes, [])
            fill = linalg.GenericOp([], [identity(c.name, t)], [partial], ir.ArrayAttr.get([
                ir.AffineMapAttr.get(ir.AffineMap.get(len(kept), 0, [])),
                ir.AffineMapAttr.get(ir.AffineMap.get_identity(len(kept)))]), ir.ArrayAttr.get([parallel] * len(kept)))
            block = fill.regions[0].blocks.append(t, t)
            with ir.InsertionPoint(block):
                linalg.YieldOp([block.arguments[0]])
            partials.append(partial)
        # the original over partials: its loops renumbered in memory order (the inner reduction
        # reads rows in loop order), all but the trailing reduced ones parallel
        n_in = len(g.inputs)
        renumbered = order + [d for d in range(g.n_loops) if d not in order]
        at = {d: k for k, d in enumerate(renumbered)}
        maps = [ir.AffineMapAttr.get(ir.AffineMap.get(g.n_loops, 0, [
            ir.AffineDimExpr.get(at[e.position]) if isinstance(e, ir.AffineDimExpr) else e
            for e in ir.AffineMapAttr(a).value.results]))
            for a in list(ir.ArrayAttr(op.attributes["indexing_maps"]))[:n_in]]
        to_partial = ir.AffineMapAttr.get(ir.AffineMap.get(g.n_loops, 0, [ir.AffineDimExpr.get(at[d]) for d in kept]))
        # (a loop of extent 1 keeps its kind: one reduced stays with the trailing ones)
        iterators = ir.ArrayAttr.get([reduction if d in run or d not in order and g.reduction[d] else parallel
                                      for d in renumbered])
        first = linalg.GenericOp([], list(op.operands)[:n_in], partials,
                                 ir.ArrayAttr.get(maps + [to_partial] * len(partials)), iterators)
        body = first.regions[0].blocks.append(*[a.type for a in g.body.arguments])
        with ir.InsertionPoint(body):  # (the body reads no loop index: `_split_order`)
            linalg.YieldOp(clone_body(g.body, dict(zip(g.body.arguments, body.arguments)), lambda d: None))
        # the partials combined into the outputs over the other reduced loops
        out_maps = []
        for o in g.outputs:
            out_maps.append(ir.AffineMapAttr.get(ir.AffineMap.get(len(kept), 0, [
                ir.AffineConstantExpr.get(0) if r == ZERO or r not in kept else ir.AffineDimExpr.get(kept.index(r))
                for r in o.results])))
        identity_map = ir.AffineMapAttr.get(ir.AffineMap.get_identity(len(kept)))
        second = linalg.GenericOp([], partials, [o.value for o in g.outputs],
                                  ir.ArrayAttr.get([identity_map] * len(partials) + out_maps),
                                  ir.ArrayAttr.get([reduction if g.reduction[d] else parallel for d in kept]))
        types = [o.type.element_type for o in g.outputs]
        body2 = second.regions[0].blocks.append(*(types + types))
        with ir.InsertionPoint(body2):
            n = len(types)
            linalg.YieldOp([combine(c, body2.arguments[n + k], body2.arguments[k]) for k, c in enumerate(combiners)])
        for partial in partials:
            memref.dealloc(partial)
    return first.operation, second.operation
