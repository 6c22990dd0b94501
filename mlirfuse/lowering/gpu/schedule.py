"""Schedules on IR: `plan_schedules` records the heuristics' choice on each linalg op of the
bufferized entry point (gpu-schedule); `apply_schedules` replaces each op by the kernel its
`mlirfuse.schedule` names (gpu-apply-schedules), reporting a schedule that does not fit its op
at that op. The heuristics themselves are pure functions (`heuristics`); the attribute's
format is `schedule_attrs`; each kernel is built by its schedule's module.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from mlir import ir

from mlirfuse.lowering import linalg_builders as B
from mlirfuse.lowering.gpu import column as gpu_column
from mlirfuse.lowering.gpu import column_sums
from mlirfuse.lowering.gpu import combiners
from mlirfuse.lowering.gpu import epilogue as gpu_epilogue
from mlirfuse.lowering.gpu import heuristics as schedules
from mlirfuse.lowering.gpu import kernels as gpu_kernels
from mlirfuse.lowering.gpu import normalization as gpu_normalization
from mlirfuse.lowering.gpu import pointwise as gpu_pointwise
from mlirfuse.lowering.gpu import prologue as gpu_prologue
from mlirfuse.lowering.gpu import reduction as gpu_reduction
from mlirfuse.lowering.gpu import schedule_attrs as A
from mlirfuse.lowering.gpu import transpose as gpu_transpose
from mlirfuse.lowering.gpu.online_sums import online_sums

log = logging.getLogger("mlirfuse.schedules")


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
    planned = set()
    for i, op in enumerate(ops):
        if A.ATTR in op.attributes or not op.name.startswith("linalg.") or i in in_chains and i not in chains:
            continue
        op.attributes[A.ATTR] = _heuristic_schedule(ops, i, chains.get(i), device)
        planned.add(i)
        kind, reason = A.read(op.attributes[A.ATTR])
        if kind == "naive":  # a performance cliff the user should hear of, with what to report
            log.warning("%s (op %d of the entry function) runs on the naive path, one thread an element: %s",
                        op.name, i, reason)
    _unroll_with_prologues(ops, planned)


def _unroll_with_prologues(ops: list[ir.Operation], planned: set[int]) -> None:
    """A column reduction that will compute a pointwise prologue at each element loads that
    prologue's inputs at each row too: the rows it has in flight (`column_unroll`) are chosen
    again for all the vectors a row loads (the code budget still its own body's: a GELU
    backward's prologue, counted, took GPT-2's bias gradient to one row in flight: 28.5 ->
    37.4 us, measured with another change). Such a kernel's register cap is
    `COLUMN_PROLOGUE_REGISTERS` (none: ptxas spilled some under the column reductions' own).
    Only for schedules planned here (one given stays as given)."""
    if not any(_scheduled_kind(ops[i]) == "column_reduction" for i in planned):
        return
    chains = _scheduled_chains(ops)
    schedule = {i: A.read(op.attributes[A.ATTR]) for i, op in enumerate(ops)
                if A.ATTR in op.attributes and _scheduled_kind(op) is not None}
    generics, _, _, prologues = _fused(ops, chains, schedule)
    for i, (_, prologue) in prologues.items():
        kind, params = schedule[i]
        if i not in planned or kind != "column_reduction":
            continue
        match = gpu_column.match_column_reduction(generics[i])
        read = {v for v, _ in prologue.reads}
        loads = len([o for o in match.column_operands if o.value not in read]) + len(match.column_invariant) \
            + len(match.column_trailing) + len(match.column_leading) + len(match.row_leading) \
            + len(prologue.inputs) + len(prologue.full) + len(prologue.indexed())
        unroll = schedules.column_unroll(params.vector, loads, generics[i].body_ops())
        registers = schedules.COLUMN_PROLOGUE_REGISTERS
        if (unroll, registers) != (params.unroll, params.registers):
            ops[i].attributes[A.ATTR] = A.to_attr("column_reduction",
                                                  replace(params, unroll=unroll, registers=registers))


def _heuristic_schedule(ops: list[ir.Operation], i: int, chain: Any,
                        device: schedules.DeviceProperties) -> ir.DictAttr:
    if chain is not None:
        return A.to_attr("normalization", schedules.normalization_heuristic(
            chain.static_row(), chain.static_rows(), chain.vector_bytes(), device, chain.held_bytes()))
    g = gpu_kernels.analyze(ops[i])
    if isinstance(g, str):  # strided inputs: the pointwise kernel reads them element by element
        strided = gpu_kernels.analyze(ops[i], strided_inputs=True)
        if isinstance(strided, str) or isinstance(gpu_pointwise.match_pointwise(strided), str):
            rows = gpu_kernels.analyze(ops[i], row_strided=True)  # a padded buffer's interior
            found = _reduction_schedule(rows, device) if not isinstance(rows, str) else None
            return found if isinstance(found, ir.DictAttr) else A.to_attr("naive", reason=g)
        return A.to_attr("pointwise", schedules.pointwise_heuristic(
            strided.static_numel(), _operand_bytes(strided), device, strided.body_ops()))
    pointwise = gpu_pointwise.match_pointwise(g)
    if isinstance(pointwise, gpu_pointwise.PointwiseMatch):
        return A.to_attr("pointwise", schedules.pointwise_heuristic(
            g.static_numel(), _vector_bytes("pointwise", g, pointwise), device, g.body_ops()))
    transpose = gpu_transpose.match_transpose(g)
    if isinstance(transpose, gpu_transpose.TransposeMatch):
        return A.to_attr("transpose", schedules.transpose_heuristic(
            _vector_bytes("transpose", g, transpose), transpose.permuted_bytes(), device))
    found = _reduction_schedule(g, device)
    if isinstance(found, ir.DictAttr):
        return found
    reduction, column = found
    return A.to_attr("naive", reason=f"{pointwise}; {transpose}; {reduction}; {column}")


def _reduction_schedule(g: gpu_kernels.Generic, device: schedules.DeviceProperties) -> ir.DictAttr | tuple[str, str]:
    """The inner or column reduction schedule of `g`, else why neither fits."""
    reduction = gpu_reduction.match_inner_reduction(g)
    if isinstance(reduction, gpu_reduction.InnerReductionMatch):
        return A.to_attr("inner_reduction", schedules.inner_reduction_heuristic(
            reduction.static_row(), reduction.static_rows(), _vector_bytes("inner_reduction", g, reduction),
            device, g.body_ops()))
    column = gpu_column.match_column_reduction(g)
    if isinstance(column, gpu_column.ColumnReductionMatch):
        return A.to_attr("column_reduction", schedules.column_reduction_heuristic(
            column.static_columns(), column.static_rows(), _vector_bytes("column_reduction", g, column),
            device, g.body_ops(), column.static_batch(), [o.element_bytes for o in g.outputs]))
    return reduction, column


def _fail(op: ir.Operation, message: str) -> None:
    op.location.emit_error(f"{A.ATTR}: {message}")
    raise A.ScheduleError(message)


def _scheduled_chains(ops: list[ir.Operation]) -> dict:
    """Normalization chains by their last op's position, but those scheduled naive (their ops
    then run one by one)."""
    chains = {c.indices[-1]: c for c in gpu_normalization.find_chains(ops)}
    return {i: c for i, c in chains.items() if _scheduled_kind(ops[i]) != "naive"}


def apply_schedules(func: ir.Operation) -> list[str]:
    """Replace every linalg op by the kernel its `mlirfuse.schedule` names (a naive one stays a
    loop nest). Returns one line per schedule: its parameters, or why it is naive. A schedule
    that does not fit its op is an error at that op."""
    ops = _block_ops(func)
    chains = _scheduled_chains(ops)
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
    generics, folds, epilogues, prologues = _fused(ops, chains, schedule)
    inits: dict[int, dict] = {}
    for fold in folds.values():
        inits.setdefault(fold["reduction"], {})[fold["buffer"]] = fold["value"]
    in_epilogues = {j for found in epilogues.values() for j, _ in found}
    in_prologues = {j for j, _ in prologues.values()}
    sums = _column_sums(ops, chains, generics, schedule, folds, inits,
                        set(epilogues) | set(prologues) | in_epilogues)
    in_sums = {id(s.match.generic.op) for found in sums.values() for s in found}
    notes: dict[int, list[str]] = {}  # by the position of the launches they describe
    for i, op in enumerate(ops):
        if i in folds:
            ops[i].erase()
        elif i in schedule and i not in in_epilogues | in_prologues and id(op) not in in_sums:
            # (epilogues and prologues are erased with their reduction; column sums, emitted with their chain)
            notes.setdefault(i, []).extend(_apply(ops, i, schedule[i], chains.get(i), inits.get(i, {}),
                                                  [e for _, e in epilogues.get(i, [])],
                                                  prologues.get(i, (None, None))[1], sums.get(i, []), notes))
    return [n for i in sorted(notes) for n in notes[i]]


def _column_sums(ops: list[ir.Operation], chains: dict, generics: dict[int, gpu_kernels.Generic],
                 schedule: dict[int, tuple[str, Any]], folds: dict, inits: dict[int, dict],
                 taken: set[int]) -> dict[int, list[column_sums.ColumnSum]]:
    """Chain's last position -> the column reductions its held kernel computes (`column_sums`):
    scheduled as column reductions, without an epilogue or prologue (`taken`), over the chain's
    rows, reading what the chain holds, free to move to the chain's kernel; each taken once."""
    found: dict[int, list[column_sums.ColumnSum]] = {}
    used: set[int] = set()
    for last, chain in chains.items():
        for j, g in generics.items():  # (`_fused`'s: the chains' own generics left out)
            if j in used or j in taken or schedule.get(j, ("",))[0] != "column_reduction":
                continue
            taken_member = column_sums.column_member(chain, g)
            if isinstance(taken_member, str):
                continue
            match, member = taken_member
            _check_vector(ops[j], "column_reduction", schedule[j][1], _vector_bytes("column_reduction", g, match))
            folded = {f for f, fold in folds.items() if fold["reduction"] == j}
            if not column_sums.held(chain, member) or not column_sums.movable(ops, j, chain, g, folded):
                continue
            match.inits = inits.get(j, {})
            found.setdefault(last, []).append(column_sums.ColumnSum(match, member, schedule[j][1], j))
            used.add(j)
    return found


def _fused(ops: list[ir.Operation], chains: dict,
           schedule: dict[int, tuple[str, Any]]) -> tuple[dict, dict, dict, dict]:
    """What the kernels of `schedule` take in besides their own op: (the analyzed generics
    outside normalization chains, the fills folded into reductions, each reduction's pointwise
    epilogue, each column reduction's pointwise prologue), by position."""
    in_chains = {k for c in chains.values() for k in c.indices}
    generics = {i: g for i, op in enumerate(ops) if i not in in_chains and op.name == "linalg.generic"
                for g in [gpu_kernels.analyze(op, row_strided=True)] if not isinstance(g, str)}

    position = {id(g): i for i, g in generics.items()}

    def takes_inits(g: gpu_kernels.Generic) -> bool:  # a reduction starting from given initial values
        return schedule.get(position[id(g)], ("",))[0] in ("inner_reduction", "column_reduction")

    folds = combiners.fold_fills(ops, generics, takes_inits)
    epilogues = _epilogues(ops, generics, schedule)
    in_epilogues = {j for found in epilogues.values() for j, _ in found}
    prologues = _prologues(ops, generics, schedule, in_epilogues, set(folds))
    for i, (_, prologue) in prologues.items():
        # A column block's last block runs the epilogue while other column blocks may still run
        # the prologue: the epilogue must not write what it reads, nor read what it writes (a
        # gather of the summed rows at other columns: found in review).
        if i in epilogues:
            epilogue = [e for _, e in epilogues[i]]
            if gpu_prologue.read_buffers(prologue) & gpu_epilogue.written_buffers(epilogue) or \
                    gpu_prologue.written_buffers(prologue) & gpu_epilogue.read_buffers(epilogue):
                epilogues.pop(i)
    return generics, folds, epilogues, prologues


def _epilogues(ops: list[ir.Operation], generics: dict[int, gpu_kernels.Generic],
               schedule: dict[int, tuple[str, Any]]) -> dict[int, list]:
    """Inner or column reduction's position -> its epilogue (`gpu_epilogue`): positions and generics."""
    pointwise = {i for i, (kind, _) in schedule.items() if kind == "pointwise"}
    found = {}
    for i, g in generics.items():
        kind = schedule.get(i, ("",))[0]
        if kind not in ("inner_reduction", "column_reduction"):
            continue
        m = gpu_reduction.match_inner_reduction(g) if kind == "inner_reduction" \
            else gpu_column.match_column_reduction(g)
        epilogue = [] if isinstance(m, str) else gpu_epilogue.find_epilogue(ops, i, m, generics, pointwise)
        if epilogue:
            found[i] = epilogue
    return found


def _prologues(ops: list[ir.Operation], generics: dict[int, gpu_kernels.Generic],
               schedule: dict[int, tuple[str, Any]], taken: set[int], erased: set[int]) -> dict[int, tuple]:
    """Column reduction's position -> its prologue (`gpu_prologue`): position and generic."""
    pointwise = {i for i, (kind, _) in schedule.items() if kind == "pointwise"} - taken
    found = {}
    for i, g in generics.items():
        if schedule.get(i, ("",))[0] != "column_reduction":
            continue
        m = gpu_column.match_column_reduction(g)
        prologue = None if isinstance(m, str) else gpu_prologue.find_prologue(ops, i, m, generics, pointwise, erased)
        if prologue is not None:
            found[i] = prologue
            pointwise.discard(prologue[0])  # (computed by one kernel)
    return found


def _apply(ops: list[ir.Operation], i: int, schedule: tuple[str, Any], chain: Any, inits: dict,
           epilogue: list, prologue: gpu_prologue.Prologue | None = None,
           sums: list[column_sums.ColumnSum] | None = None, notes: dict[int, list[str]] | None = None) -> list[str]:
    """The kernels of op i's schedule, in place of it; returns their notes. A chain's column
    sums (`sums`) launch after its kernel where they were before it, else where they were:
    their notes go to `notes` at that position."""
    kind, params = schedule
    op = ops[i]
    if kind == "naive":
        return [f"naive: {params}"]
    if chain is not None:
        if kind != "normalization":
            _fail(op, f"the last op of a normalization chain takes a normalization (or naive) schedule, not {kind}")
        _check_vector(op, kind, params, chain.vector_bytes())
        note = f"normalization ({gpu_normalization.describe(chain)}): {params}"
        online_found = online_sums(chain)
        online = "; sums of exp(u - r) in the pass before" if online_found else ""
        variants = gpu_normalization.emit_chain(ops, chain, params, online_found, sums or [])
        fused = column_sums.in_held(sums or [], params, variants[0])
        if fused:
            note += (f"; with the column sums of {len(sums)} column reduction{'s' * (len(sums) > 1)}: blocks loop "
                     f"over the rows, a block's partials a row of a workspace, where the grid is at least "
                     f"{column_sums.GROUPS_PER_BLOCK} x the column reduction's target blocks")

        after = []  # the notes of the sums launched after the chain's kernel
        for s in sums or []:
            found = [f"{_COLUMN_NOTE.format(column_sums.partials_params(s))}; of the column sums' partials",
                     f"{_COLUMN_NOTE.format(s.params)}; the column sum apart, where rows are not held"] if fused \
                else [_COLUMN_NOTE.format(s.params)]  # (its own kernel, where it was)
            if fused and s.position < i:
                after += found
            elif notes is not None:
                notes.setdefault(s.position, []).extend(found)
        if variants == [gpu_normalization.LOOPING]:  # a static row known not to be held
            return [f"{note}; the looping variant only (rows of this length are not held){online}"] + after

        def text(v: gpu_normalization.Variant) -> str:
            return v.describe() + (online if v.looping else "")

        if variants[0] != gpu_normalization.HELD:
            note = f"{note}; {text(variants[0])}"
        others = [f"normalization: {text(v)}" for v in variants[1:]]
        if fused:  # (emit_chain's second kernel: the held one without the sums)
            others[0] += ", without the column sums (a grid of fewer row groups)"
        return [note] + others + after
    g = gpu_kernels.analyze(op, strided_inputs=kind == "pointwise",
                            row_strided=kind in ("column_reduction", "inner_reduction"))
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
        match.inits, match.epilogue = inits, epilogue
        gpu_reduction.emit_inner_reduction(match, params)
        return [f"inner reduction: {params}" + ("; where rows are cut into chunks, the last block of each row "
                                                "combines its partials in chunk order" if params.split_blocks else "")
                + (f"; with its pointwise epilogue ({len(epilogue)} generic{'s' * (len(epilogue) > 1)})"
                   if epilogue else "")]
    match.inits, match.epilogue = inits, epilogue
    if prologue is not None:
        gpu_column.take_prologue(match, prologue)
    gpu_column.emit_column_reduction(match, params)
    return [_COLUMN_NOTE.format(params)
            + ("; computing its pointwise prologue at each element" if prologue is not None else "")
            + (f"; with its pointwise epilogue ({len(epilogue)} generic{'s' * (len(epilogue) > 1)})"
               if epilogue else "")]


_COLUMN_NOTE = "column reduction: {}; the last block of each column block combines its partials in a fixed order"


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
        return [o.element_bytes for o in match.column_operands + match.column_invariant + match.column_trailing]
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
    dead = []  # found first, erased after: the deallocation erased with an allocation comes later in the block
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
        dead.append((op, users, sizes))
    for op, users, sizes in dead:
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


