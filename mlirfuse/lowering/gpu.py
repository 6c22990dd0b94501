"""GPU backend: fusion IR -> linalg -> scheduled kernels (or parallel loops) -> guarded gpu.launch
-> NVVM -> PTX/cubin.

Generics a schedule matches (`schedules` decides the parameters; `gpu_pointwise`,
`gpu_reduction` and `gpu_column` build the kernels, on `gpu_kernels`' shared pieces) become
kernels straight from linalg on memrefs; the rest take the naive path: parallel loops, one
thread per iteration (`parallel_to_launch`).

The host side stays MLIR (sizes, grids and launches, compiled by the ExecutionEngine), but
its stream and allocation calls are redirected (`host_overrides`) so that kernels run on
the caller's stream and scratch memory comes from the caller's allocator.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from mlir import ir
from mlir.dialects import arith, gpu, linalg, llvm, memref, scf

from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import InputSpec
from mlirfuse.lowering import (
    gpu_column,
    gpu_kernels,
    gpu_normalization,
    gpu_pointwise,
    gpu_reduction,
    gpu_transpose,
    schedules,
    toolchain,
)
from mlirfuse.lowering import linalg_builders as B
from mlirfuse.lowering import schedule_attrs as A
from mlirfuse.lowering.cpu import BUFFERIZE, INLINE, run_pipeline
from mlirfuse.lowering.host_abi import ENTRY, launches_line

BLOCK_SIZE = 256

TO_LINALG = ("builtin.module(fusion-to-linalg{target=gpu}, canonicalize, "
             "resolve-shaped-type-result-dims, canonicalize, cse, "
             "func.func(linalg-fuse-elementwise-ops), canonicalize, cse, "
             "math-expand-constant-powers, linalg-recompute-producers, func.func(linalg-fuse-elementwise-ops), "
             "canonicalize, cse, "
             "linalg-merge-siblings, linalg-reciprocal-divisors)")
TO_LOOPS = "builtin.module(func.func(convert-linalg-to-parallel-loops))"  # no canonicalize: it folds unit loops
# Fills and copies as generics: the schedules then take them too.
GENERALIZE = "builtin.module(func.func(linalg-generalize-named-ops))"
log = logging.getLogger("mlirfuse.schedules")


OUTLINE = "builtin.module(gpu-kernel-outlining)"


def merge_kernel_modules(module: ir.Module) -> None:
    """Move every outlined kernel into the first gpu.module (renamed `<entry>_kernel_<k>`)
    and point the launches at it. Outlining makes one gpu.module per launch; each would be
    linked with libdevice, optimized and compiled (ptxas) on its own and loaded on its own at
    run time: one module does each of these once. Kernels given attributes by
    `gpu_kernels.set_kernel_attrs` get them here."""
    requested = gpu_kernels.requested_kernel_attrs(module.operation)
    modules = [op.operation for op in module.body.operations if op.operation.name == "gpu.module"]
    if not modules:
        return
    target = modules[0]
    target_name = f"{ENTRY}_kernel"  # outlining names modules after their launches' kernel names
    target_block = target.regions[0].blocks[0]
    renamed: dict[tuple[str, str], str] = {}
    for k, m in enumerate(modules):
        m_name = ir.StringAttr(m.attributes["sym_name"]).value
        for fn in list(m.regions[0].blocks[0].operations):
            fn = fn.operation
            if fn.name != "gpu.func":
                continue
            old = ir.StringAttr(fn.attributes["sym_name"]).value
            for name, value in requested.get(old, {}).items():
                fn.attributes[name] = value
            new = f"{target_name}_{k}"
            renamed[(m_name, old)] = new
            fn.attributes["sym_name"] = ir.StringAttr.get(new)
            if m is not target:
                fn.detach_from_parent()
                target_block.append(fn)
    for op in gpu_kernels.walk_ops(module.operation):
        if op.name == "gpu.launch_func":
            m_name, fn_name = ir.SymbolRefAttr(op.attributes["kernel"]).value  # @module::@kernel
            op.attributes["kernel"] = ir.SymbolRefAttr.get([target_name, renamed[(m_name, fn_name)]])
    for m in modules[1:]:
        m.erase()
    target.attributes["sym_name"] = ir.StringAttr.get(target_name)


def nvvm_pipeline(chip: str, features: str, fmt: str, toolkit: str | None, ptxas_options: str = "") -> str:
    """The stages of upstream's gpu-lower-to-nvvm-pipeline after kernel outlining (and
    `merge_kernel_modules`), with our toolkit path and ptxas options, the kernels converted
    before the host's arith, and memref.reshape (shape buffers) lowered on the host."""
    tk = (f" toolkit={toolkit}" if toolkit else "") + (f" opts={ptxas_options}" if ptxas_options else "")
    return ("builtin.module(func.func(gpu-async-region), convert-scf-to-cf, convert-nvvm-to-llvm, "
            "convert-func-to-llvm, expand-strided-metadata, "
            f"nvvm-attach-target{{chip={chip} features={features} O=3}}, lower-affine, "
            # Kernels first: convert-gpu-to-nvvm maps arith.remf to libdevice's fmod, which a
            # module-wide convert-arith-to-llvm would have turned into llvm.frem (illegal there).
            "gpu.module(strip-debuginfo, convert-gpu-to-nvvm, canonicalize, cse, reconcile-unrealized-casts), "
            "convert-arith-to-llvm, convert-index-to-llvm, canonicalize, cse, "
            f"finalize-memref-to-llvm, gpu-to-llvm, gpu-module-to-binary{{format={fmt}{tk}}}, convert-math-to-llvm, "
            "canonicalize, cse, reconcile-unrealized-casts)")


# -- linalg-on-memrefs -> gpu.launch ----------------------------------------------------------
def _entry(module: ir.Module) -> ir.Operation:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == ENTRY:
            return op.operation
    raise FusionError("GPU backend: entry function missing")


def _as_rank1(value: ir.Value) -> ir.Value:
    """A 0-d memref viewed as memref<1xT>."""
    t = ir.MemRefType(value.type)
    out = ir.MemRefType.get([1], t.element_type)
    return memref.expand_shape(out, value, ir.ArrayAttr.get([]), [], ir.DenseI64ArrayAttr.get([1]))


def add_unit_loops(func: ir.Operation) -> None:
    """Give loop-less linalg ops (0-d results, full reductions) one unit parallel loop.

    Otherwise their loops stay on the host, which cannot touch device memory.
    """
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
                    linalg.fill(operands[0], outs=[_as_rank1(out)])
                else:
                    linalg.copy(_as_rank1(operands[0]), outs=[_as_rank1(out)])
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
                    new_operands.append(_as_rank1(v))
                    new_maps.append(ir.AffineMap.get(n + 1, 0, [ir.AffineDimExpr.get(0)]))
                else:
                    new_operands.append(v)
                    shifted = [e.shift_dims(n, 1) for e in m.results]  # the unit loop is d0
                    new_maps.append(ir.AffineMap.get(n + 1, 0, shifted))
            n_in = len(operands) - 1
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
    for op in list(func.regions[0].blocks[0].operations):
        op = op.operation
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


def _block_ops(func: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in func.regions[0].blocks[0].operations]


def _operand_bytes(g: gpu_kernels.Generic) -> list[int]:
    return [o.element_bytes for o in g.operands if o.is_memref]


def _scheduled_kind(op: ir.Operation) -> str | None:
    """The kind of the op's schedule (None where it has none, or a malformed one: the applier
    reports that at the op)."""
    try:
        return A.read(op.attributes[A.ATTR])[0] if A.ATTR in op.attributes else None
    except A.ScheduleError:
        return None


def plan_schedules(func: ir.Operation, device: schedules.DeviceProperties) -> None:
    """Run the heuristics and record each kernel's schedule on its linalg op (`mlirfuse.schedule`;
    a normalization chain's on its last op). An op that already has one keeps it."""
    ops = _block_ops(func)
    chains = {c.indices[-1]: c for c in gpu_normalization.find_chains(ops)}
    in_chains = {k for c in chains.values() for k in c.indices}
    for i, op in enumerate(ops):
        if A.ATTR in op.attributes or not op.name.startswith("linalg.") or i in in_chains and i not in chains:
            continue
        op.attributes[A.ATTR] = _heuristic_schedule(ops, i, chains.get(i), device)


def _heuristic_schedule(ops: list[ir.Operation], i: int, chain: Any,
                        device: schedules.DeviceProperties) -> ir.DictAttr:
    if chain is not None:
        return A.to_attr("normalization", schedules.normalization_heuristic(
            chain.static_row(), chain.static_rows(), chain.vector_bytes(), device))
    g = gpu_kernels.analyze(ops[i])
    if isinstance(g, str):
        return A.to_attr("naive", reason=g)
    pointwise = gpu_pointwise.match_pointwise(g)
    if isinstance(pointwise, gpu_pointwise.PointwiseMatch):
        return A.to_attr("pointwise", schedules.pointwise_heuristic(
            g.static_numel(), _vector_bytes("pointwise", g, pointwise), device, g.body_ops()))
    transpose = gpu_transpose.match_transpose(g)
    if isinstance(transpose, gpu_transpose.TransposeMatch):
        return A.to_attr("transpose", schedules.transpose_heuristic(
            _vector_bytes("transpose", g, transpose), transpose.permuted_bytes(), device))
    reduction = gpu_reduction.match_inner_reduction(g)
    if isinstance(reduction, gpu_reduction.InnerReductionMatch):
        return A.to_attr("inner_reduction", schedules.inner_reduction_heuristic(
            reduction.static_row(), reduction.static_rows(), _vector_bytes("inner_reduction", g, reduction),
            device, g.body_ops()))
    column = gpu_column.match_column_reduction(g)
    if isinstance(column, gpu_column.ColumnReductionMatch):
        return A.to_attr("column_reduction", schedules.column_reduction_heuristic(
            column.static_columns(), column.static_rows(), _vector_bytes("column_reduction", g, column),
            device, g.body_ops()))
    log.debug("no schedule: %s; %s; %s; %s", pointwise, transpose, reduction, column)
    return A.to_attr("naive", reason=f"{pointwise}; {transpose}; {reduction}; {column}")


def _fail(op: ir.Operation, message: str) -> None:
    op.location.emit_error(f"{A.ATTR}: {message}")
    raise A.ScheduleError(message)


def apply_schedules(func: ir.Operation) -> list[str]:
    """Replace every linalg op by the kernel its `mlirfuse.schedule` names (a naive one stays a
    loop nest). Returns one line per schedule: its parameters, or why it is naive. A schedule
    that does not fit its op is an error at that op."""
    ops = _block_ops(func)
    chains = {c.indices[-1]: c for c in gpu_normalization.find_chains(ops)}
    for i, chain in list(chains.items()):  # a chain scheduled naive runs op by op
        if _scheduled_kind(ops[i]) == "naive":
            del chains[i]
    in_chains = {k for c in chains.values() for k in c.indices}
    schedule: dict[int, tuple[str, Any]] = {}
    for i, op in enumerate(ops):
        if op.name.startswith("linalg.") and (i not in in_chains or i in chains):
            if A.ATTR not in op.attributes:
                _fail(op, "no schedule (run gpu-schedule first)")
            try:
                schedule[i] = A.read(op.attributes[A.ATTR])
            except A.ScheduleError as e:
                _fail(op, str(e))
    generics = {i: g for i, op in enumerate(ops) if i not in in_chains and op.name == "linalg.generic"
                for g in [gpu_kernels.analyze(op)] if not isinstance(g, str)}

    position = {id(g): i for i, g in generics.items()}

    def takes_inits(g: gpu_kernels.Generic) -> bool:  # a reduction starting from given initial values
        return schedule[position[id(g)]][0] in ("inner_reduction", "column_reduction")

    folds = gpu_reduction.fold_fills(ops, generics, takes_inits)
    inits: dict[int, dict] = {}
    for fold in folds.values():
        inits.setdefault(fold["reduction"], {})[fold["buffer"]] = fold["value"]
    notes = []
    for i, op in enumerate(ops):
        if i in folds:
            ops[i].erase()
        elif i in schedule:
            notes += _apply(ops, i, schedule[i], chains.get(i), inits.get(i, {}))
    return notes


def _apply(ops: list[ir.Operation], i: int, schedule: tuple[str, Any], chain: Any, inits: dict) -> list[str]:
    kind, params = schedule
    op = ops[i]
    if kind == "naive":
        return [f"naive: {params}"]
    if chain is not None:
        if kind != "normalization":
            _fail(op, f"the last op of a normalization chain takes a normalization (or naive) schedule, not {kind}")
        _check_vector(op, kind, params, chain.vector_bytes())
        note = f"normalization ({gpu_normalization.describe(chain)}): {params}"
        if gpu_normalization.emit_chain(ops, chain, params) == [True]:  # a static row known not to be held
            return [f"{note}; the looping variant only (rows of this length are not held)"]
        return [note, "normalization: the looping variant, for rows too long to hold or unaligned"]
    g = gpu_kernels.analyze(op)
    match = _MATCHERS.get(kind, _no_match)(g) if not isinstance(g, str) else g
    if isinstance(match, str):
        _fail(op, f"a {kind} schedule does not fit this op: {match}")
    _check_vector(op, kind, params, _vector_bytes(kind, g, match))
    if kind == "pointwise":
        gpu_pointwise.emit_pointwise(match, params)
        return [f"pointwise: {params}"]
    if kind == "transpose":
        gpu_transpose.emit_transpose(match, params)
        return [f"transpose: {params}"]
    if kind == "inner_reduction":
        match.inits = inits
        gpu_reduction.emit_inner_reduction(match, params)
        return [f"inner reduction: {params}"] + (
            ["inner reduction: chunk partials combined in chunk order (where rows were cut)"]
            if params.split_blocks else [])
    match.inits = inits
    gpu_column.emit_column_reduction(match, params)
    return [f"column reduction: {params}", "column reduction: partials combined in a fixed order (8 threads a column)"]


def _check_vector(op: ir.Operation, kind: str, params: Any, element_bytes: list[int]) -> None:
    try:
        A.check_vector(kind, params, element_bytes)
    except A.ScheduleError as e:
        _fail(op, str(e))


def _vector_bytes(kind: str, g: gpu_kernels.Generic, match: Any) -> list[int]:
    """The element sizes of the operands a schedule reads or writes in vectors (those its
    heuristic sizes the vector for)."""
    if kind == "inner_reduction":
        return [o.element_bytes for o in match.row_operands]
    if kind == "column_reduction":
        return [o.element_bytes for o in match.column_operands + match.column_invariant]
    return _operand_bytes(g)


def _no_match(g: gpu_kernels.Generic) -> str:
    return "a normalization schedule belongs on the last op of a chain of row reductions and row-wise ops"


_MATCHERS = {"pointwise": gpu_pointwise.match_pointwise, "transpose": gpu_transpose.match_transpose,
             "inner_reduction": gpu_reduction.match_inner_reduction,
             "column_reduction": gpu_column.match_column_reduction}


def drop_dead_buffers(func: ir.Operation) -> None:
    """Erase allocations whose only uses are their deallocations and size queries
    (temporaries a kernel now keeps in registers); a `memref.dim` of one is answered from
    the allocation's size operands."""
    for op in list(func.regions[0].blocks[0].operations):
        op = op.operation
        if op.name != "memref.alloc":
            continue
        users = [u.owner.operation for u in op.results[0].uses]
        if not all(u.name in ("memref.dealloc", "memref.dim") for u in users):
            continue
        sizes = [_alloc_size(op, u) for u in users if u.name == "memref.dim"]
        if any(size is None for size in sizes):
            continue
        dims = [u for u in users if u.name == "memref.dim"]
        for dim, size in zip(dims, sizes):
            dim.results[0].replace_all_uses_with(size)
        for u in users:
            u.erase()
        op.erase()


def _alloc_size(alloc: ir.Operation, dim: ir.Operation) -> ir.Value | None:
    """The size `dim` (a memref.dim of `alloc` at a constant index) asks for, as a value
    available where the allocation is; None where the index is not constant."""
    index = dim.operands[1].owner
    if isinstance(index, ir.Block) or index.operation.name != "arith.constant":
        return None
    d = ir.IntegerAttr(index.operation.attributes["value"]).value
    t = ir.MemRefType(alloc.results[0].type)
    if not t.is_dynamic_dim(d):
        with ir.InsertionPoint(alloc), alloc.location:
            return B.index_const(t.shape[d])
    return list(alloc.operands)[sum(t.is_dynamic_dim(k) for k in range(d))]


def sink_index_constants(func: ir.Operation) -> None:
    """Copy the function's `index` constants into the launches that use them.

    Folding hoists constants to the function; kernel outlining would make them kernel
    parameters, hiding loop bounds, strides and divisors from LLVM. Other constants stay
    parameters: inlined, Philox's keys turn its 32-bit multiplies into 64-bit ones.
    """
    entry = func.regions[0].blocks[0]
    for launch in _launches(func):
        body = launch.regions[0].blocks[0]
        copies: dict = {}
        for op in gpu_kernels.walk_ops(launch)[1:]:  # not the launch's own sizes
            for v in list(op.operands):
                owner = v.owner
                if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant" \
                        or not isinstance(v.type, ir.IndexType) or owner.operation.block != entry:
                    continue
                if v not in copies:
                    copies[v] = owner.operation.clone(ip=ir.InsertionPoint.at_block_begin(body)).results[0]
                op.replace_uses_of_with(v, copies[v])


def high_multiplies(func: ir.Operation) -> None:
    """Each 32-bit `arith.mului_extended` in a kernel (Philox's rounds) as `mul.lo` and
    `mul.hi` (`llvm.nvvm.mulhi.ui`).

    The upstream lowering multiplies the zero-extended operands in 64 bits; once LLVM folds a
    `zext(trunc x)` operand into `and x, 0xffffffff` (every round after the first), NVPTX no
    longer sees a widening multiply and emits `mul.lo.s64` plus shifts and conversions: about
    4x the instructions of a round, in the kernel's run time and in LLVM's and ptxas' time."""
    i32 = ir.IntegerType.get_signless(32)
    for launch in _launches(func):
        for op in gpu_kernels.walk_ops(launch):
            if op.name != "arith.mului_extended" or op.operands[0].type != i32:
                continue
            with ir.InsertionPoint(op), op.location:
                a, b = op.operands
                low = arith.muli(a, b)
                high = llvm.call_intrinsic(i32, "llvm.nvvm.mulhi.ui", [a, b], [], [])
            op.results[0].replace_all_uses_with(low)
            op.results[1].replace_all_uses_with(high)
            op.erase()


def launch_dims(func: ir.Operation) -> list[str]:
    """One line per gpu.launch: its gridDim and blockDim, `?` where a size is computed
    from the arguments' extents at run time."""
    def size(v: ir.Value) -> str:
        owner = v.owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "arith.constant":
            return str(ir.IntegerAttr(owner.operation.attributes["value"]).value)
        return "?"

    lines, k = [], -1
    for launch in _launches(func):
        grid, block = launch.operands[0:3], launch.operands[3:6]  # no async dependencies
        alternative = _is_alternative(launch)
        k += not alternative
        lines.append(f"launch {k}{' (or)' if alternative else ''} gridDim=({', '.join(map(size, grid))}) "
                     f"blockDim=({', '.join(map(size, block))})")
    return lines


def launch_counts(func: ir.Operation) -> tuple[int, int]:
    """(kernels, launches a call makes: a kernel's alternative variants count once)."""
    launches = _launches(func)
    return len(launches), sum(not _is_alternative(launch) for launch in launches)


def _launches(func: ir.Operation) -> list[ir.Operation]:
    return [op for op in gpu_kernels.walk_ops(func) if op.name == "gpu.launch"]


def _is_alternative(launch: ir.Operation) -> bool:
    """The launch runs instead of the one before it (`gpu_kernels.ALTERNATIVE_ATTR` on its guard)."""
    guard = launch.parent
    return guard is not None and gpu_kernels.ALTERNATIVE_ATTR in guard.operation.attributes


def loops_to_gpu(func: ir.Operation) -> None:
    for op in list(func.regions[0].blocks[0].operations):
        op = op.operation
        if op.name == "scf.parallel":
            parallel_to_launch(op)
        elif op.name == "scf.if" and gpu_kernels.SCHEDULE_ATTR in op.attributes:
            continue  # a scheduled kernel's guard
        elif op.name in ("scf.for", "scf.if"):
            raise FusionError(f"GPU backend: unexpected host loop {op.name} (a 0-d linalg op?)")


@dataclass
class GpuModule:
    """A compiled fusion for the GPU: host LLVM module (not yet JIT-ed) plus artifacts."""

    module: ir.Module
    context: ir.Context
    arch: str
    binary_format: str
    binary: bytes
    stages: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0
    n_kernels: int = 0  # kernel functions
    n_launches: int = 0  # launches a call makes at most (a kernel's variants count once)

    @property
    def host_llvm(self) -> str:
        """The host module's text (what the disk cache keeps), after a first line saying the
        number of launches (`gpu_runtime.CachedGpuModule` reads it back)."""
        return launches_line(self.n_launches) + str(self.module)

    @property
    def ptx(self) -> str:
        if self.binary_format != "isa":
            raise FusionError("PTX text is kept only for format 'isa' (compile with ptx=True)")
        return self.binary.decode(errors="replace").rstrip("\0")


def _join(*pipelines: str) -> str:
    """One `builtin.module(...)` pipeline of the elements of several."""
    return "builtin.module(" + ", ".join(p.strip()[len("builtin.module("):-1] for p in pipelines if p) + ")"


def gpu_stages(arch: str = "sm_90", fmt: str = "isa", toolkit: str | None = None, ptxas_options: str = "",
               use_schedules: bool = True) -> list[tuple[str, str]]:
    """The GPU path from fusion IR, as (stage name, pipeline of registered passes) in order:
    what `compile_gpu` runs, what its `stages` dump holds after each, and what
    `mlirfuse-gpu-pipeline` (mlirfuse-opt) runs in one go."""
    stages = [("linalg", TO_LINALG),
              ("inlined", _join("builtin.module(entry-point)", INLINE, "builtin.module(inline-scalar-operands)")),
              ("bufferized", _join(BUFFERIZE, "builtin.module(memref-copies-to-linalg, gpu-unit-loops)"))]
    if use_schedules:
        stages += [("generalized", GENERALIZE),
                   ("scheduled", f"builtin.module(gpu-schedule{{arch={arch}}})"),
                   ("loops", _join("builtin.module(gpu-apply-schedules)", TO_LOOPS))]
    else:
        stages += [("loops", TO_LOOPS)]
    return stages + [("gpu", "builtin.module(gpu-loops-to-launches)"),
                     ("outlined", _join(OUTLINE, "builtin.module(gpu-merge-kernel-modules)")),
                     ("llvm", llvm_stage(arch, fmt, toolkit, ptxas_options))]


def llvm_stage(arch: str, fmt: str, toolkit: str | None, ptxas_options: str = "") -> str:
    """The last stage: NVVM, the binary (PTX or a fatbin through ptxas), the host overrides."""
    features = "+ptx" + str(toolchain.ptx_version(arch))
    return _join(nvvm_pipeline(arch, features, fmt, toolkit, ptxas_options), "builtin.module(gpu-host-overrides)")


def _entry_type(module: ir.Module) -> str:
    return str(ir.TypeAttr(_entry(module).attributes["function_type"]).value)


def binary_objects(module: ir.Module) -> list[bytes]:
    """The bytes of every gpu.binary's object (PTX text where compiled with format isa)."""
    return [bytes(gpu.ObjectAttr(op.attributes["objects"][0]).object)
            for op in module.body.operations if op.operation.name == "gpu.binary"]


def _edited_schedules(module: ir.Module, scheduled_ir: str) -> ir.Module:
    """The given `scheduled` stage in place of this fusion's own, if its entry point takes the
    same arguments (launched with another signature's, its kernels would run out of bounds)."""
    try:
        edited = ir.Module.parse(scheduled_ir)
        edited_type = _entry_type(edited)
    except (ir.MLIRError, StopIteration) as e:
        raise FusionError(f"scheduled_ir: not a scheduled stage with @{ENTRY}: {e}") from None
    if edited_type != _entry_type(module):
        raise FusionError(f"scheduled_ir: its @{ENTRY} takes {edited_type}; this fusion's takes "
                          f"{_entry_type(module)}")
    return edited


def compile_gpu(fusion_ir: str, specs: Sequence[InputSpec], arch: str = "sm_90",
                binary_format: str | None = None, keep_stages: bool = False,
                use_schedules: bool = True, scheduled_ir: str | None = None) -> GpuModule:
    """Lower fusion IR to a host module whose gpu.binary holds PTX (isa) or a fatbin, through
    the stages of `gpu_stages`. `use_schedules=False` lowers every op the naive way (for
    comparisons); `scheduled_ir` (a `scheduled` stage, its schedules perhaps edited by hand)
    is compiled from instead of fusion_ir's own."""
    from mlirfuse.passes.entry_point import INPUTS_ATTR, input_kinds
    from mlirfuse.passes.gpu_loops_to_launches import launch_params

    start = time.perf_counter()
    tk = toolchain.find()
    fmt = binary_format or ("fatbin" if tk.ptxas else "isa")
    if tk.libdevice is None:
        raise FusionError(toolchain.MISSING_LIBDEVICE)
    stages: dict[str, str] = {}
    ctx = fusion_dialect.new_context()
    with ctx, ir.Location.unknown():
        module = fusion_dialect.parse(fusion_ir, ctx)
        fusion_func = next(op for op in module.body.operations if op.operation.name == "func.func")
        fusion_func.attributes[INPUTS_ATTR] = input_kinds(list(specs))
        if keep_stages:
            stages["fusion"] = str(module)
        n_kernels = n_launches = 0
        for name, pipeline in gpu_stages(arch, fmt, tk.root, use_schedules=use_schedules):
            if name == "llvm":  # several kernels: ptxas compiles them in parallel (10-25% off the compile)
                options = toolchain.ptxas_options(toolchain.ptxas_of(tk)) if fmt != "isa" and n_kernels > 1 else ""
                pipeline = llvm_stage(arch, fmt, tk.root, options)
            run_pipeline(module, pipeline, name)
            if name == "scheduled" and scheduled_ir is not None:
                module = _edited_schedules(module, scheduled_ir)
            if name == "gpu":  # one line per launch: its schedule (or why naive), grid and block
                lines, n_launches, n_kernels = launch_params(module.operation)
                if keep_stages:
                    stages["launch_params"] = "\n".join(lines)
            if keep_stages:
                stages[name] = str(module)
        # One gpu.binary holding every kernel (PTX texts of several would be kept together).
        objects = binary_objects(module)
        binary = b"\n".join(o.rstrip(b"\0") for o in objects) if fmt == "isa" else (objects or [b""])[-1]
        if fmt == "isa" and keep_stages:
            stages["ptx"] = binary.decode(errors="replace")
    return GpuModule(module, ctx, arch, fmt, binary, stages, time.perf_counter() - start, n_kernels, n_launches)
