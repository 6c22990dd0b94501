"""A column reduction's prologue: a pointwise generic before it whose result it sums (a bias
gradient: y = gelu'(x) * g is a result, and y.sum(0) or its reshape's its bias's gradient)
runs in the reduction's kernel. The thread that sums an element computes it there, writes it and adds it;
the pointwise kernel no longer writes y for the reduction to read back.

The generic iterates the reduction's elements. This is proved from the buffers: the
reduction reads one of its outputs at every row and column, so each of its loops is one of
the reduction's (or of extent 1) through that buffer. All its outputs are indexed so, and the
column reduction visits each (row, column) exactly once, in one thread: its writes are
complete and no element is written twice. Every input is read, in the reduction's loops, as
the reduction may read its own (at [row, column], at the column, at the row, broadcast over
some rows), and the reduction reads the outputs only at the element. Nothing the kernel writes
is read otherwise (through another view, by the generic's inputs, in either body), and the
reduction's outputs are not the generic's inputs. A body that loads by itself (a cat) is left
to its own kernel. The generic moves to the reduction's place: no op in between may read what
it writes or write what it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from mlir import ir

from mlirfuse.lowering.gpu.column import ColumnReductionMatch, classify, operand_dims, read_at
from mlirfuse.lowering.gpu.kernels import ZERO, Generic, Operand, analyze, base_buffer, nested_ops, passive
from mlirfuse.passes.common import walk_ops


RESHAPES = ("memref.reshape", "memref.collapse_shape", "memref.expand_shape")


@dataclass
class Prologue:
    generic: Generic
    inputs: list[Operand]  # its memref inputs read as the reduction's own: indexed by the reduction's loops
    outputs: list[Operand]  # its outputs (indexed by the reduction's loops, unless `linear`)
    reads: list[tuple[ir.Value, int]]  # a buffer the reduction reads at the element -> the output it is
    # its loop -> the reduction's loop (ZERO: a loop of extent 1); None where `linear`
    loops: dict[int, int] | None = None
    # Its outputs and `full` inputs are reshapes of the buffer the reduction reads (its loops are
    # not the reduction's): each read and written at the element's place in memory.
    linear: bool = False
    full: list[Operand] = field(default_factory=list)
    # Inputs of a `linear` prologue read through a permutation that keeps the innermost dim in
    # place (attention's heads merged: [B, H, S, D] read as [B, S, H, D]): at the element's
    # indices, its place delinearized over the outputs' dims.
    permuted: list[Operand] = field(default_factory=list)
    # Inputs of a `linear` prologue read at its last loops only (a bias): at the element's place
    # modulo the product of their extents; at its first loops only (a row's statistics): at the
    # place divided by the product of the others'.
    trailing: list[Operand] = field(default_factory=list)
    leading: list[Operand] = field(default_factory=list)

    def indexed(self) -> list[Operand]:
        """Inputs read at indices computed from the element's place."""
        return self.permuted + self.trailing + self.leading


def find_prologue(ops: list[ir.Operation], i: int, m: ColumnReductionMatch, generics: dict[int, Generic],
                  pointwise: set[int], erased: set[int]) -> tuple[int, Prologue] | None:
    """The pointwise-scheduled generic (one of `pointwise`) before the column reduction at
    `ops[i]` that its kernel computes, and its position. It moves to the reduction's place:
    no op in between may read what it writes or write what it reads or writes (host ops and
    the fills `erased` with their fold into the reduction aside)."""
    if m.outer:
        return None  # a batch of column reductions: not taken
    between: list[tuple[set, set]] = []  # (read, written) buffers of the ops passed
    for j in range(i - 1, -1, -1):
        if j in erased or j not in generics and passive(ops[j]):
            continue
        p = _prologue(generics[j], m) if j in pointwise and j in generics else None
        if p is not None:
            reads, writes = read_buffers(p), written_buffers(p)
            if not any(w & (reads | writes) or r & writes for r, w in between):
                return j, p
        between.append(_touched(ops[j], generics.get(j)))
    return None


def _touched(op: ir.Operation, g: Generic | None) -> tuple[set, set]:
    """The buffers (at their roots) an op reads and writes: a generic's inputs (and what its
    body loads from) and outputs; any other op's every memref, both ways."""
    if g is None and op.name == "linalg.generic":  # (one of a normalization chain)
        g = analyze(op, strided_inputs=True)
        g = None if isinstance(g, str) else g
    if g is None:
        every = {base_buffer(v) for inner in walk_ops(op) for v in inner.operands
                 if isinstance(v.type, ir.MemRefType)}
        return every, every
    reads = {base_buffer(o.value) for o in g.inputs if o.is_memref} | {
        base_buffer(v) for inner in nested_ops(g.body) for v in inner.operands if isinstance(v.type, ir.MemRefType)}
    return reads, {base_buffer(o.value) for o in g.outputs}


def _remapped(o: Operand, loops: dict[int, int]) -> Operand:
    return Operand(o.value, o.arg, [ZERO if r == ZERO else loops[r] for r in o.results], o.is_output)


def _reshaped_from(v: ir.Value) -> ir.Value:
    """The buffer `v` is a (chain of) contiguous reshape(s) of."""
    while not isinstance(v.owner, ir.Block) and v.owner.operation.name in RESHAPES:
        v = v.owner.operation.operands[0]
    return v


def _prologue(p: Generic, m: ColumnReductionMatch) -> Prologue | None:
    g = m.generic
    if any(p.reduction) or any(o.strided or o.row_strided for o in p.operands) or \
            any(list(o.arg.uses) for o in p.outputs):
        return None  # (a body reading its output)
    if any(isinstance(v.type, ir.MemRefType) for op in nested_ops(p.body) for v in op.operands):
        # A body loading by itself (a cat's or gather's sources): the column kernel's few
        # threads, each walking rows, cannot issue those loads ahead. H200, GPT-2 f32's query,
        # key and value gradients concatenated and summed: 37.0 us as two launches, 48.6 as one.
        return None
    element = m.reduced + m.kept  # the dims of a buffer read at [row, column]
    at_element = [o for o in m.column_operands if id(o) not in m.broadcast_rows and operand_dims(g, o) == element]
    found = _at_loops(p, m, at_element) or _at_places(p, m, at_element)
    if found is None:
        return None
    computed = {v for v, _ in found.reads} | {o.value for o in found.outputs}
    written = {base_buffer(v) for v in computed} | {base_buffer(o.value) for o in g.outputs}
    for o in g.inputs:  # the reduction reads what the generic writes at the element only, as those buffers
        if o.is_memref and base_buffer(o.value) in written and not (
                o.value in computed and id(o) not in m.broadcast_rows and operand_dims(g, o) == element):
            return None
    if any(base_buffer(o.value) in written for o in found.inputs + found.full + found.indexed()):
        return None  # the generic reads a buffer the kernel writes
    for body in (p.body, g.body):
        if any(isinstance(v.type, ir.MemRefType) and base_buffer(v) in written
               for op in nested_ops(body) for v in op.operands):
            return None  # a body loads from a buffer the kernel writes
    return found


def _at_loops(p: Generic, m: ColumnReductionMatch, at_element: list[Operand]) -> Prologue | None:
    """The reduction reads one of the generic's outputs as that buffer: the generic's loops are
    the reduction's through it."""
    g = m.generic
    by_value = {o.value: o for o in at_element}
    read = next((o for o in p.outputs if o.value in by_value), None)
    if read is None:
        return None
    loops: dict[int, int] = {}
    for rp, rr in zip(read.results, by_value[read.value].results):
        if rp != ZERO and loops.setdefault(rp, rr) != rr:
            return None
    for d in range(p.n_loops):
        if d not in loops:
            if p.static[d] != 1:
                return None  # a loop its output does not index (not pointwise)
            loops[d] = ZERO
    outputs = [_remapped(o, loops) for o in p.outputs]
    if any(operand_dims(g, o) != m.reduced + m.kept for o in outputs):
        return None  # an output not written at the element
    inputs = [_remapped(o, loops) for o in p.inputs if o.is_memref]
    if any(classify(operand_dims(g, o), m.kept, m.reduced) is None for o in inputs):
        return None
    values = [o.value for o in p.outputs]
    return Prologue(p, inputs, outputs, [(o.value, values.index(o.value)) for o in at_element if o.value in values],
                    loops)


def _at_places(p: Generic, m: ColumnReductionMatch, at_element: list[Operand]) -> Prologue | None:
    """The reduction reads a reshape of the generic's output (GPT-2's MLP gradient, [B, S, H]
    written, [B * S, H] summed): where the generic is elementwise over whole buffers (every
    memref operand read at its loops, in order or permuted with the innermost in place, at its
    last or first loops only, or a single element), every element is computed at its place in
    memory, which is the reduction's element's."""
    full = list(range(p.n_loops))
    if any(o.results != full for o in p.outputs):
        return None
    inputs, whole, permuted, trailing, leading = [], [], [], [], []
    for o in p.inputs:
        if not o.is_memref:
            continue
        if o.results == full:
            whole.append(o)
        elif sorted(o.results) == full and o.results[-1] == full[-1]:
            permuted.append(o)
        elif len(read_at(o)) > 0 and read_at(o) == full[len(full) - len(read_at(o)):]:
            trailing.append(o)
        elif len(read_at(o)) > 0 and read_at(o) == full[:len(read_at(o))]:
            leading.append(o)
        elif all(r == ZERO or p.static[r] == 1 for r in o.results):
            inputs.append(Operand(o.value, o.arg, [ZERO] * len(o.results), False))  # one element, every row's
        else:
            return None
    if any(op.name == "linalg.index" for op in nested_ops(p.body)):
        return None  # (its loops are not the reduction's)
    sources = {_reshaped_from(o.value): k for k, o in enumerate(p.outputs)}
    reads = [(o.value, sources[_reshaped_from(o.value)]) for o in at_element if _reshaped_from(o.value) in sources]
    if not reads:
        return None
    return Prologue(p, inputs, list(p.outputs), reads, linear=True, full=whole, permuted=permuted,
                    trailing=trailing, leading=leading)


def written_buffers(p: Prologue) -> set:
    """The buffers (at their roots) the prologue's generic writes."""
    return {base_buffer(o.value) for o in p.outputs}


def read_buffers(p: Prologue) -> set:
    """The buffers (at their roots) the prologue's generic reads."""
    return {base_buffer(o.value) for o in p.inputs + p.full + p.indexed()} | {
        base_buffer(v) for op in nested_ops(p.generic.body) for v in op.operands if isinstance(v.type, ir.MemRefType)}
