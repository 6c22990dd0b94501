"""A reduction's epilogue: the pointwise generics right after an inner reduction that compute
on its results row by row (a mean's division by the row length, a loss sum divided by the
count of labels kept, rsqrt(var + eps)) run in the reduction's kernel, by the thread that
writes each row's total, instead of in a launch of their own.

An epilogue generic iterates the reduction's rows: each of its loops of extent != 1 is, in
order, one of the reduction's kept loops. This is proved from the buffers, not assumed: the
generic reads some result of the reduction (or of an earlier epilogue generic) at the dims
the reduction writes it at, so their extents are that buffer's. Every other operand is read
or written at the row too, or is a scalar read by every row. Nothing the kernel writes is
read through another view or in the body, and no epilogue writes a buffer the kernel reads
(an input of the reduction or of an earlier epilogue generic, or a buffer a body loads from:
other blocks or rows may still be reading it). Only host ops (sizes, allocations, views,
stores to shape buffers: `passive`) may sit between the reduction and its epilogue: the
kernel runs where the last epilogue generic was. An epilogue generic whose own schedule is
not pointwise (a naive one, say) is not folded. The reduction still writes its results (other ops may read them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import memref

from mlirfuse.lowering.gpu.kernels import ZERO, Generic, base_buffer, clone_body, nested_ops, passive
from mlirfuse.lowering.linalg_builders import index_const

if TYPE_CHECKING:
    from mlirfuse.lowering.gpu.reduction import InnerReductionMatch


@dataclass
class Epilogue:
    generic: Generic
    loops: list[int]  # its loops of extent != 1: the i-th iterates the reduction's i-th kept loop


def find_epilogue(ops: list[ir.Operation], i: int, m: InnerReductionMatch, generics: dict[int, Generic],
                  pointwise: set[int]) -> list[tuple[int, Epilogue]]:
    """The generics after the reduction at `ops[i]` that its kernel computes (their positions
    and loops), each one pointwise-scheduled in `pointwise`; past host ops only."""
    # buffer written -> the dims its row loops are at (in the kept loops' order)
    written = {o.value: _row_dims(o, m.kept) for o in m.generic.outputs}
    read = _reads(m.generic)  # what the kernel reads before an epilogue's write (other blocks too)
    found: list[tuple[int, Epilogue]] = []
    j = i + 1
    while j < len(ops):
        if j not in generics and passive(ops[j]):
            j += 1
            continue
        if j not in pointwise or j not in generics:
            break
        e = _epilogue(generics[j], len(m.kept), written, read)
        if e is None:
            break
        found.append((j, e))
        written.update({o.value: _row_dims(o, e.loops) for o in e.generic.outputs})
        read |= _reads(e.generic)
        j += 1
    return found


def _reads(g: Generic) -> set:
    """The buffers (at their roots) a generic reads: its memref inputs and the buffers its
    body loads from (a gather's source)."""
    return {base_buffer(o.value) for o in g.inputs if o.is_memref} | {
        base_buffer(v) for op in nested_ops(g.body) for v in op.operands if isinstance(v.type, ir.MemRefType)}


def written_buffers(epilogue: list[Epilogue]) -> set:
    """The buffers (at their roots) the epilogue's generics write."""
    return {base_buffer(o.value) for e in epilogue for o in e.generic.outputs}


def read_buffers(epilogue: list[Epilogue]) -> set:
    """The buffers (at their roots) the epilogue's generics read (their bodies' loads too)."""
    return set().union(*(_reads(e.generic) for e in epilogue))


def _row_dims(o, loops: list[int]) -> list[int]:
    """The positions of an operand's dims indexed by these loops, in the loops' order."""
    return [p for d in loops for p, r in enumerate(o.results) if r == d]


def _epilogue(g: Generic, n_rows: int, written: dict, read: set) -> Epilogue | None:
    if any(g.reduction) or any(o.row_strided for o in g.operands):
        return None
    loops = [d for d in range(g.n_loops) if g.static[d] != 1]
    if len(loops) != n_rows:
        return None
    unit = set(range(g.n_loops)) - set(loops)
    bases = {base_buffer(v) for v in written}
    reads_result = False
    for o in g.operands:
        if not o.is_memref:
            continue
        dims = [r for r in o.results if r != ZERO and r not in unit]
        at_row = dims == loops
        if not at_row and (dims or o.is_output):
            return None  # neither at the row nor a scalar every row reads
        if o.value in written:
            if o.is_output or not at_row or _row_dims(o, loops) != written[o.value]:
                return None  # not read at the dims the kernel writes it at
            reads_result = True
        elif base_buffer(o.value) in bases:
            return None  # a buffer the kernel writes, through another view
        if o.is_output and base_buffer(o.value) in read:
            return None  # other blocks (or rows) of the kernel may still be reading it
    if not reads_result:
        return None
    touched = bases | {base_buffer(o.value) for o in g.outputs}
    if any(isinstance(v.type, ir.MemRefType) and base_buffer(v) in touched
           for op in nested_ops(g.body) for v in op.operands):
        return None  # the body reads a buffer the kernel writes
    return Epilogue(g, loops)


def emit_epilogue(epilogue: list[Epilogue], finals: dict, row_ivs: list[ir.Value]) -> None:
    """In the thread writing a row's totals (`finals`: buffer -> the value just written at the
    row; `row_ivs`: the kept loops' indices of the row): each epilogue generic's body on the
    row's values, its results stored at the row (and kept in `finals` for the next)."""
    for e in epilogue:
        g = e.generic

        def at(d: int, e=e) -> ir.Value:  # the row's index on a loop (0 on a unit loop or constant)
            return row_ivs[e.loops.index(d)] if d in e.loops else index_const(0)

        def index(o) -> list[ir.Value]:
            return [at(r) for r in o.results]

        mapping = {}
        for o in g.operands:
            if not o.is_memref:
                mapping[o.arg] = o.value
            elif o.value in finals:
                mapping[o.arg] = finals[o.value]
            elif not o.is_output or list(o.arg.uses):
                mapping[o.arg] = memref.load(o.value, index(o))
        yielded = clone_body(g.body, mapping, at)
        for o, value in zip(g.outputs, yielded):
            memref.store(value, o.value, index(o))
            finals[o.value] = value
