"""Applying schedules to IR: linalg.generic ops on memrefs -> one guarded gpu.launch each.

The dumb half of the heuristics/mechanics split (`schedules` is the other): given a
generic's loop nest and a schedule's parameters, build the kernel. What this file knows:
  - `analyze`: a generic as data (operands, their indexing as loop dims, the body);
  - `match_pointwise` / `match_inner_reduction` (`gpu_reduction`): which schedule applies,
    or why none does (the naive path then lowers the op);
  - body cloning (`clone_body`): the generic's scalar body emitted once per element, with
    block arguments mapped to loaded (vector) elements and `linalg.index` to loop indices;
  - the pointwise kernel (`emit_pointwise`).

Every kernel is one `gpu.launch` under a host `scf.if` (nothing to do for empty tensors)
tagged `mlirfuse.schedule`; run-time variants (vector or scalar) are uniform branches inside
it, so the number of `gpu.launch` ops is the number of launches per call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from mlirfuse.lowering import schedules as S
from mlirfuse.lowering.linalg_builders import ZERO, index_const

log = logging.getLogger("mlirfuse.schedules")
SCHEDULE_ATTR = "mlirfuse.schedule"


# -- a generic as data ----------------------------------------------------------------------
@dataclass
class Operand:
    value: ir.Value  # a memref, or a scalar captured by value (generalized linalg.fill)
    arg: ir.Value  # the body's block argument
    results: list[int]  # per map result: the loop dim, or ZERO (a constant 0 on a size-1 dim)
    is_output: bool

    @property
    def is_memref(self) -> bool:
        return isinstance(self.value.type, ir.MemRefType)

    @property
    def type(self) -> ir.MemRefType:
        return ir.MemRefType(self.value.type)

    @property
    def element_bytes(self) -> int:
        return element_bytes(self.type.element_type)


@dataclass
class Generic:
    op: ir.Operation
    operands: list[Operand]
    reduction: list[bool]  # per loop
    static: list[int | None]  # per loop: its static extent, if any
    body: ir.Block
    _extents: list[ir.Value] = field(default_factory=list)

    @property
    def n_loops(self) -> int:
        return len(self.reduction)

    @property
    def inputs(self) -> list[Operand]:
        return [o for o in self.operands if not o.is_output]

    @property
    def outputs(self) -> list[Operand]:
        return [o for o in self.operands if o.is_output]

    def extents(self) -> list[ir.Value]:
        """Loop extents as host index values (emitted at the current insertion point, once)."""
        if not self._extents:
            for d in range(self.n_loops):
                if self.static[d] is not None:
                    self._extents.append(index_const(self.static[d]))
                    continue
                o, pos = next((o, p) for o in self.operands if o.is_memref
                              for p, r in enumerate(o.results) if r == d)
                self._extents.append(memref.dim(o.value, index_const(pos)))
        return self._extents

    def body_ops(self) -> int:
        """Operations one copy of the body costs (the yield not counted)."""
        return len(nested_ops(self.body)) - 1

    def has_index_ops(self) -> bool:
        return any(op.name == "linalg.index" for op in nested_ops(self.body))


def element_bytes(t: ir.Type) -> int:
    if isinstance(t, ir.IndexType):
        return 8
    return max(1, t.width // 8) if hasattr(t, "width") else 4


def nested_ops(block: ir.Block) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        found.append(op)
        return ir.WalkResult.ADVANCE

    for op in block.operations:
        op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _identity_layout(t: ir.MemRefType) -> bool:
    layout = t.layout
    return (t.memory_space is None and isinstance(layout, ir.AffineMapAttr)
            and layout.value == ir.AffineMap.get_identity(t.rank))


def analyze(op: ir.Operation) -> Generic | str:
    """The generic as data, or why no schedule can take it."""
    if op.name != "linalg.generic":
        return f"{op.name} is not a linalg.generic"
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    body = op.regions[0].blocks[0]
    values = list(op.operands)
    n_in = len(values) - _n_outputs(op)
    operands, static = [], [None] * len(iterators)
    for i, (v, m, arg) in enumerate(zip(values, maps, body.arguments)):
        results = []
        for e in m.results:
            if isinstance(e, ir.AffineDimExpr):
                results.append(e.position)
            elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
                results.append(ZERO)
            else:
                return f"indexing map {m} is not a projection"
        operand = Operand(v, arg, results, i >= n_in)
        if operand.is_memref:
            t = operand.type
            if not _identity_layout(t):
                return f"operand {i} ({t}) is not contiguous"
            if isinstance(t.element_type, (ir.IndexType, ir.ComplexType)):
                return f"operand {i} has {t.element_type} elements"
            for pos, r in enumerate(results):
                if r == ZERO and t.shape[pos] != 1:
                    return f"operand {i}: a constant index on a dim that is not 1"
                if r != ZERO and not t.is_dynamic_dim(pos):
                    static[r] = t.shape[pos]
        elif operand.is_output:
            return "an output is not a memref"
        operands.append(operand)
    reduction = ["reduction" in it for it in iterators]
    return Generic(op, operands, reduction, static, body)


def _n_outputs(op: ir.Operation) -> int:
    sizes = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
    return sizes[1]


def _monotone(results: Sequence[int]) -> bool:
    dims = [r for r in results if r != ZERO]
    return all(a < b for a, b in zip(dims, dims[1:]))


# -- body cloning -------------------------------------------------------------------------
def clone_body(body: ir.Block, mapping: dict, index_of: Callable[[int], ir.Value]) -> list[ir.Value]:
    """Emit the body at the current insertion point; `mapping` gives the block arguments'
    values, `index_of(d)` the value of `linalg.index d`. Returns the yielded values."""
    mapping = dict(mapping)
    for op in body.operations:
        op = op.operation
        if op.name == "linalg.yield":
            return [mapping.get(v, v) for v in op.operands]
        if op.name == "linalg.index":
            mapping[op.results[0]] = index_of(ir.IntegerAttr(op.attributes["dim"]).value)
            continue
        new = op.clone()
        for inner in _walk(new):
            for v in list(inner.operands):
                if v in mapping:
                    inner.replace_uses_of_with(v, mapping[v])
        for old, value in zip(op.results, new.results):
            mapping[old] = value
    raise ValueError("linalg.generic body without linalg.yield")


def _walk(op: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []
    op.walk(lambda o: (found.append(o), ir.WalkResult.ADVANCE)[1], ir.WalkOrder.PRE_ORDER)
    return found


def combine(template: ir.Operation, a: ir.Value, b: ir.Value) -> ir.Value:
    """`template`'s operation (a binary combiner, e.g. arith.addf with its fastmath) on a, b."""
    attrs = {name: template.attributes[name] for name in template.attributes}
    return ir.Operation.create(template.name, results=[a.type], operands=[a, b], attributes=attrs).result


# -- host-side helpers ----------------------------------------------------------------------
def product(values: Sequence[ir.Value]) -> ir.Value:
    total = index_const(1)
    for v in values:
        total = arith.muli(total, v)
    return total


def collapse(value: ir.Value, groups: Sequence[Sequence[int]]) -> ir.Value:
    """A contiguous memref viewed with its dims grouped (`groups` partition the dims)."""
    t = ir.MemRefType(value.type)
    if len(groups) == t.rank:
        return value
    shape = []
    for g in groups:
        sizes = [t.shape[i] for i in g]
        shape.append(ir.ShapedType.get_dynamic_size() if any(t.is_dynamic_dim(i) for i in g)
                     else _prod(sizes))
    out = ir.MemRefType.get(shape, t.element_type)
    return memref.collapse_shape(out, value, ir.ArrayAttr.get([
        ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), i) for i in g]) for g in groups]))


def flat(value: ir.Value) -> ir.Value:
    t = ir.MemRefType(value.type)
    return collapse(value, [list(range(t.rank))]) if t.rank != 1 else value


def aligned(values: Sequence[ir.Value], align: Sequence[int]) -> ir.Value:
    """Host: every memref's base pointer is a multiple of its alignment (bytes)."""
    ok = arith.constant(ir.IntegerType.get_signless(1), 1)
    for v, a in zip(values, align):
        if a <= 1:
            continue
        ptr = memref.extract_aligned_pointer_as_index(v)
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, arith.remui(ptr, index_const(a)), index_const(0)))
    return ok


def divisible(value: ir.Value, by: int) -> ir.Value:
    return arith.cmpi(arith.CmpIPredicate.eq, arith.remui(value, index_const(by)), index_const(0))


def delinearize(linear: ir.Value, extents: Sequence[ir.Value]) -> list[ir.Value]:
    ivs, rest = [], linear
    for k in reversed(range(len(extents))):
        if k == 0:
            ivs.append(rest)
            break
        ivs.append(arith.remui(rest, extents[k]))
        rest = arith.divui(rest, extents[k])
    return list(reversed(ivs))


def load(view: ir.Value, indices: Sequence[ir.Value], width: int) -> ir.Value:
    """A vector of `width` elements (16-byte-or-less aligned access) or a scalar."""
    t = ir.MemRefType(view.type)
    if width == 1:
        return memref.load(view, list(indices))
    vt = ir.VectorType.get([width], t.element_type)
    return vector.load(vt, view, list(indices), alignment=width * element_bytes(t.element_type))


def store(value: ir.Value | list[ir.Value], view: ir.Value, indices: Sequence[ir.Value]) -> None:
    t = ir.MemRefType(view.type)
    if not isinstance(value, list):
        memref.store(value, view, list(indices))
        return
    if len(value) == 1:
        memref.store(value[0], view, list(indices))
        return
    vt = ir.VectorType.get([len(value)], t.element_type)
    vector.store(vector.from_elements(vt, value), view, list(indices),
                 alignment=len(value) * element_bytes(t.element_type))


def element(loaded: ir.Value, e: int) -> ir.Value:
    if isinstance(loaded.type, ir.VectorType):
        return vector.extract(loaded, [], [e])
    return loaded


def guarded_launch(generic: Generic, kind: str, nonempty: ir.Value, grid: ir.Value,
                   block: ir.Value, shared: Sequence[ir.Type] = ()) -> tuple[ir.Block, scf.IfOp]:
    """`scf.if nonempty { gpu.launch }` in place of the generic; returns the launch body
    (insert before its terminator) and the guard."""
    guard = scf.IfOp(nonempty)
    guard.operation.attributes[SCHEDULE_ATTR] = ir.StringAttr.get(kind)
    with ir.InsertionPoint(guard.then_block):
        one = index_const(1)
        launch = gpu.LaunchOp((grid, one, one), (block, one, one))
        body = launch.regions[0].blocks[0]
        for t in shared:
            body.add_argument(t, generic.op.location)
        if shared:
            launch.attributes["workgroup_attributions"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), len(shared))
        with ir.InsertionPoint(body):
            gpu.TerminatorOp()
        scf.YieldOp([])
    return body, guard


def _prod(values: Sequence[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


# -- pointwise ------------------------------------------------------------------------------
@dataclass
class PointwiseMatch:
    generic: Generic
    flat: bool  # every memref indexed by identity and no linalg.index: one linear index


def match_pointwise(g: Generic) -> PointwiseMatch | str:
    if any(g.reduction) or g.n_loops == 0:
        return "not all loops are parallel"
    identity = list(range(g.n_loops))
    for i, o in enumerate(g.operands):
        if not o.is_memref:
            continue
        if o.is_output and o.results != identity:
            return f"output {i} is not indexed by the identity"
        if not _monotone(o.results):
            return f"operand {i} is transposed ({o.results})"
    memrefs = [o for o in g.operands if o.is_memref]
    is_flat = all(o.results == identity for o in memrefs) and not g.has_index_ops()
    return PointwiseMatch(g, is_flat)


def emit_pointwise(m: PointwiseMatch, params: S.PointwiseParams) -> ir.Operation:
    """Replace the generic with a vectorized pointwise kernel (scalar variant when unaligned)."""
    g = m.generic
    with ir.InsertionPoint(g.op), g.op.location:
        extents = g.extents()
        total = product(extents)
        views = {id(o): (flat(o.value) if o.results == list(range(g.n_loops)) else o.value)
                 for o in g.operands if o.is_memref}
        vec = params.vector
        vector_ok = None
        if vec > 1:
            vectored = [o for o in g.operands if o.is_memref and _vector_access(o, g.n_loops)]
            vector_ok = arith.andi(divisible(total if m.flat else extents[-1], vec),
                                   aligned([o.value for o in vectored], [vec * o.element_bytes for o in vectored]))
        per_block = params.unroll * params.block
        grid = arith.ceildivui(total, index_const(per_block))
        if vector_ok is not None:
            grid = arith.select(vector_ok, arith.ceildivui(arith.divui(total, index_const(vec)),
                                                           index_const(per_block)), grid)
        nonempty = arith.cmpi(arith.CmpIPredicate.ugt, total, index_const(0))
        body, guard = guarded_launch(g, "pointwise", nonempty, grid, index_const(params.block))
    with ir.InsertionPoint(body.operations[len(body.operations) - 1]), g.op.location:
        kernel = _PointwiseKernel(m, params, views, extents, total, body.arguments[0], body.arguments[3])
        if vector_ok is None:
            kernel.variant(1)
        else:
            choice = scf.IfOp(vector_ok, has_else=True)
            with ir.InsertionPoint(choice.then_block):
                kernel.variant(vec)
                scf.YieldOp([])
            with ir.InsertionPoint(choice.else_block):
                kernel.variant(1)
                scf.YieldOp([])
    g.op.erase()
    return guard.operation


def _vector_access(o: Operand, n_loops: int) -> bool:
    """The operand's elements along the innermost loop are contiguous (a vector access)."""
    return bool(o.results) and o.results[-1] == n_loops - 1


class _PointwiseKernel:
    """Thread t of block b handles vectors (b * unroll + u) * block + t, u < unroll: each
    iteration u of a warp touches one contiguous span. Full blocks issue every load first."""

    def __init__(self, m: PointwiseMatch, params: S.PointwiseParams, views: dict, extents: list[ir.Value],
                 total: ir.Value, bx: ir.Value, tx: ir.Value):
        self.m, self.g, self.p, self.views = m, m.generic, params, views
        self.extents, self.total, self.bx, self.tx = extents, total, bx, tx

    def variant(self, width: int) -> None:
        """Vectors of `width` elements; width 1 is the scalar variant (one body per thread and
        step: it only runs on unaligned data)."""
        p = self.p
        per_block = p.unroll * p.block
        if width == 1:
            self.elements(arith.muli(self.bx, index_const(per_block)), p.unroll)
            return
        chunks = arith.divui(self.total, index_const(width))
        first = arith.addi(arith.muli(self.bx, index_const(per_block)), self.tx)
        end_of_block = arith.muli(arith.addi(self.bx, index_const(1)), index_const(per_block))
        full = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ule, end_of_block, chunks), has_else=True)
        with ir.InsertionPoint(full.then_block):
            starts = [arith.addi(first, index_const(u * p.block)) if u else first for u in range(p.unroll)]
            loaded = [self.loads(c, width) for c in starts]
            for c, values in zip(starts, loaded):
                self.compute_and_store(c, width, values)
            scf.YieldOp([])
        with ir.InsertionPoint(full.else_block):  # the last block: element by element
            self.elements(arith.muli(self.bx, index_const(per_block * width)), p.unroll * width)
            scf.YieldOp([])

    def elements(self, start: ir.Value, steps: int) -> None:
        """Elements start + k * block + t, k < steps, that are in bounds, one at a time."""
        loop = scf.ForOp(index_const(0), index_const(steps), index_const(1))
        with ir.InsertionPoint(loop.body):
            e = arith.addi(arith.addi(start, arith.muli(loop.induction_variable, index_const(self.p.block))), self.tx)
            inside = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, e, self.total))
            with ir.InsertionPoint(inside.then_block):
                self.compute_and_store(e, 1, self.loads(e, 1))
                scf.YieldOp([])
            scf.YieldOp([])

    def loads(self, chunk: ir.Value, width: int) -> tuple[ir.Value, list[ir.Value] | None, dict]:
        g = self.g
        linear = arith.muli(chunk, index_const(width)) if width > 1 else chunk
        ivs = None if self.m.flat else delinearize(linear, self.extents)
        values = {}
        for o in g.operands:
            if not o.is_memref:
                continue
            if o.is_output and not list(o.arg.uses):
                continue
            view = self.views[id(o)]
            if o.results == list(range(g.n_loops)):
                values[id(o)] = load(view, [linear], width)
                continue
            zero = index_const(0)
            indices = [zero if r == ZERO else ivs[r] for r in o.results]
            values[id(o)] = load(o.value, indices, width if _vector_access(o, g.n_loops) else 1)
        return linear, ivs, values

    def compute_and_store(self, chunk: ir.Value, width: int, loaded) -> None:
        g = self.g
        linear, ivs, values = loaded
        results: list[list[ir.Value]] = [[] for _ in g.outputs]
        for e in range(width):
            mapping = {o.arg: (element(values[id(o)], e) if id(o) in values else o.value)
                       for o in g.operands if id(o) in values or not o.is_memref}

            def index_of(d: int, e: int = e) -> ir.Value:
                iv = ivs[d]
                return arith.addi(iv, index_const(e)) if e and d == g.n_loops - 1 else iv

            for k, v in enumerate(clone_body(g.body, mapping, index_of)):
                results[k].append(v)
        for o, elems in zip(g.outputs, results):
            store(elems if width > 1 else elems[0], self.views[id(o)], [linear])
