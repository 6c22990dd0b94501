"""Loops no schedule took, on the device: unit loops for loop-less ops, one guarded launch per
parallel loop (one thread an iteration), scratch buffers in device memory.

Used by the passes gpu-unit-loops (`add_unit_loops`) and gpu-loops-to-launches (the rest).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, linalg, memref, scf

from mlirfuse.errors import FusionError
from mlirfuse.lowering import linalg_builders as B
from mlirfuse.lowering.gpu import kernels as gpu_kernels

BLOCK_SIZE = 256  # threads of a naive launch


def _as_rank1(value: ir.Value, views: dict) -> ir.Value:
    """A 0-d memref viewed as memref<1xT>: one view per buffer (made where it is first
    needed), so that the ops touching the buffer name it alike (a fill is folded into the
    reduction that accumulates into the same memref value)."""
    if value not in views:
        t = ir.MemRefType(value.type)
        out = ir.MemRefType.get([1], t.element_type)
        views[value] = memref.expand_shape(out, value, ir.ArrayAttr.get([]), [], ir.DenseI64ArrayAttr.get([1]))
    return views[value]


def add_unit_loops(func: ir.Operation) -> None:
    """Give loop-less linalg ops (0-d results, full reductions) one unit parallel loop.

    Otherwise their loops stay on the host, which cannot touch device memory.
    """
    views: dict = {}
    for op in list(func.regions[0].blocks[0].operations):
        op = op.operation
        if not op.name.startswith("linalg."):
            continue
        operands = list(op.operands)
        if op.name in ("linalg.fill", "linalg.copy"):
            out = operands[-1]
            if ir.MemRefType(out.type).rank != 0:
                continue
            with ir.InsertionPoint(op), op.location:
                if op.name == "linalg.fill":
                    linalg.fill(operands[0], outs=[_as_rank1(out, views)])
                else:
                    linalg.copy(_as_rank1(operands[0], views), outs=[_as_rank1(out, views)])
            op.erase()
            continue
        iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
        if any("parallel" in it for it in iterators):
            continue
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        n = len(iterators)
        new_operands, new_maps = [], []
        with ir.InsertionPoint(op), op.location:
            for v, m in zip(operands, maps):
                if ir.MemRefType(v.type).rank == 0:
                    new_operands.append(_as_rank1(v, views))
                    new_maps.append(ir.AffineMap.get(n + 1, 0, [ir.AffineDimExpr.get(0)]))
                else:
                    new_operands.append(v)
                    shifted = [e.shift_dims(n, 1) for e in m.results]  # the unit loop is d0
                    new_maps.append(ir.AffineMap.get(n + 1, 0, shifted))
            n_in = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]  # (several outputs: merged siblings)
            new = linalg.GenericOp(
                [], new_operands[:n_in], new_operands[n_in:],
                ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps]),
                ir.ArrayAttr.get([ir.Attribute.parse(B.PARALLEL)] + [ir.Attribute.parse(i) for i in iterators]))
        old_block = op.regions[0].blocks[0]
        block = new.regions[0].blocks.append(*[a.type for a in old_block.arguments])
        for old_arg, new_arg in zip(old_block.arguments, block.arguments):
            old_arg.replace_all_uses_with(new_arg)
        for inner in list(old_block.operations):
            inner_op = inner.operation
            inner_op.detach_from_parent()
            block.append(inner_op)
        _shift_index_ops(block)
        op.erase()


def _shift_index_ops(block: ir.Block) -> None:
    """`linalg.index d` -> `linalg.index d + 1` in a body given a unit loop d0."""
    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.index":
            d = ir.IntegerAttr(op.attributes["dim"]).value
            op.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d + 1)
        return ir.WalkResult.ADVANCE

    for op in block.operations:
        op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)


def _is_host_shape(op: ir.Operation) -> bool:
    value = op.results[0] if op.name == "memref.alloc" else op.operands[0]
    return isinstance(ir.MemRefType(value.type).element_type, ir.IndexType)


def allocs_to_gpu(func: ir.Operation) -> None:
    """Scratch buffers live on the device (allocation is redirected to the caller's allocator).
    Shape buffers (`index` elements, read by `memref.reshape` on the host) stay on the host."""
    _allocs_to_gpu(func.regions[0].blocks[0])


def _allocs_to_gpu(block: ir.Block) -> None:
    """In a block of host code, and the host branches (`scf.if`) in it: a column sum's kernels
    allocate their workspaces in the branch that launches them."""
    for op in list(block.operations):
        op = op.operation
        if op.name == "scf.if":
            for region in op.regions:
                for inner in region.blocks:
                    _allocs_to_gpu(inner)
            continue
        if op.name in ("memref.alloc", "memref.dealloc") and _is_host_shape(op):
            continue
        if op.name == "memref.alloc":
            with ir.InsertionPoint(op), op.location:
                new = gpu.AllocOp(op.results[0].type, None, [], list(op.operands), []).result
            op.results[0].replace_all_uses_with(new)
            op.erase()
        elif op.name == "memref.dealloc":
            with ir.InsertionPoint(op), op.location:
                gpu.DeallocOp(None, [], op.operands[0])
            op.erase()


def parallel_to_launch(par: ir.Operation) -> None:
    """One guarded 1-D launch per scf.parallel: thread i handles linear iteration i."""
    lbs, ubs, steps = _parallel_bounds(par)
    with ir.InsertionPoint(par), par.location:
        extents = [arith.ceildivsi(arith.subi(ub, lb), st) for lb, ub, st in zip(lbs, ubs, steps)]
        total = B.index_const(1)
        for e in extents:
            total = arith.muli(total, e)
        block = B.index_const(BLOCK_SIZE)
        grid = arith.ceildivsi(total, block)
        nonempty = arith.cmpi(arith.CmpIPredicate.sgt, total, B.index_const(0))
        guard = scf.IfOp(nonempty)
        with ir.InsertionPoint(guard.then_block):
            launch = gpu.LaunchOp((grid, B.index_const(1), B.index_const(1)),
                                  (block, B.index_const(1), B.index_const(1)))
            body = launch.regions[0].blocks[0]
            with ir.InsertionPoint(body):
                bx, tx = body.arguments[0], body.arguments[3]
                linear = arith.addi(arith.muli(bx, block), tx)
                inside = scf.IfOp(arith.cmpi(arith.CmpIPredicate.slt, linear, total))
                gpu.TerminatorOp()
            with ir.InsertionPoint(inside.then_block):
                ivs = []
                rest = linear
                for k in reversed(range(len(extents))):
                    ivs.append(arith.addi(lbs[k], arith.muli(arith.remsi(rest, extents[k]), steps[k])))
                    rest = arith.divsi(rest, extents[k])
                ivs.reverse()
                anchor = scf.YieldOp([])
            scf.YieldOp([])
    par_body = par.regions[0].blocks[0]
    for old, new in zip(par_body.arguments, ivs):
        old.replace_all_uses_with(new)
    for op in list(par_body.operations):
        op = op.operation
        if op.name in ("scf.reduce", "scf.yield"):
            continue
        op.move_before(anchor.operation)
    par.erase()


def _parallel_bounds(par: ir.Operation) -> tuple[list[ir.Value], list[ir.Value], list[ir.Value]]:
    n = len(par.regions[0].blocks[0].arguments)
    operands = list(par.operands)
    return operands[:n], operands[n:2 * n], operands[2 * n:3 * n]


def loops_to_gpu(func: ir.Operation) -> None:
    for op in list(func.regions[0].blocks[0].operations):
        op = op.operation
        if op.name == "scf.parallel":
            parallel_to_launch(op)
        elif op.name == "scf.if" and gpu_kernels.SCHEDULE_ATTR in op.attributes:
            continue  # a scheduled kernel's guard
        elif op.name in ("scf.for", "scf.if"):
            raise FusionError(f"GPU backend: unexpected host loop {op.name} (a 0-d linalg op?)")


