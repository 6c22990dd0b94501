"""The pointwise kernel: a linalg.generic with only parallel loops whose memrefs are
contiguous and indexed by the identity or by a broadcast (a subset of the loops, in order),
or are of any strided layout (inputs: a permuted view, attention's heads; outputs: the
border of a padded buffer), read or written element by element at their multi-dimensional
indices (so are transposed inputs of such a generic, which the transpose kernel cannot take
for the strided one), or in vectors along their rows where those are contiguous (a padded
interior of another shape: `_rows_contiguous`).

Thread t of block b handles vectors (b * unroll + u) * block + t, u < unroll, of `vector`
elements each: 128-bit `vector.load`/`vector.store` with `alignment = 16` (4 x f32, 8 x
f16/bf16), every load of a full block issued before its first store. Operands indexed by
the identity are read through a 1-D view at the linear index; broadcast operands at their
own indices: a vector where they run along the innermost loop, one scalar per vector where
they do not. The vector variant needs every vector-accessed pointer 16-byte aligned and the
size (or the inner extent, with broadcasts) a multiple of the vector: the host checks and
passes the choice in; otherwise the kernel runs its scalar variant. Reads inside the body
along a row of a captured source (slices, pads, cats, gathers: `body_reads`) are vector loads
in the vector variant where the host finds their sources fit (aligned, rows a multiple of the
vector), else the vector variant reads them element by element. Parameters come from
`heuristics.pointwise_heuristic`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, memref, scf

from mlirfuse.lowering.gpu import heuristics as S
from mlirfuse.lowering.gpu.body_reads import BodyReads, contiguous_reads, hoist, host_conditions
from mlirfuse.lowering.gpu.kernels import (
    Generic,
    LoopExtents,
    Operand,
    aligned,
    clone_body,
    delinearize,
    divisible,
    element,
    flat,
    guarded_launch,
    load,
    monotone,
    product,
    store,
    variants,
)
from mlirfuse.lowering.gpu.philox_sharing import philox_linear_in, share_philox
from mlirfuse.lowering.linalg_builders import ZERO, index_const


@dataclass
class PointwiseMatch:
    generic: Generic
    flat: bool  # every memref indexed by identity and no linalg.index: one linear index
    elementwise: list[Operand]  # strided memrefs (and transposed inputs beside them): element by element


def match_pointwise(g: Generic) -> PointwiseMatch | str:
    if any(g.reduction) or g.n_loops == 0:
        return "not all loops are parallel"
    identity = list(range(g.n_loops))
    memrefs = [o for o in g.operands if o.is_memref]
    elementwise = [o for o in memrefs if o.strided]
    for i, o in enumerate(g.operands):
        if not o.is_memref:
            continue
        if o.is_output and o.results != identity:
            return f"output {i} is not indexed by the identity"
        if not monotone(o.results) and not _vector_access(o, g.n_loops) and not o.strided:
            if not elementwise or o.is_output:
                return f"operand {i} is transposed ({o.results})"
            elementwise.append(o)
    is_flat = all(o.results == identity for o in memrefs) and not g.has_index_ops() and not elementwise
    return PointwiseMatch(g, is_flat, elementwise)


def emit_pointwise(m: PointwiseMatch, params: S.PointwiseParams) -> ir.Operation:
    """Replace the generic with a vectorized pointwise kernel (scalar variant when unaligned)."""
    g = m.generic
    with ir.InsertionPoint(g.op), g.op.location:
        extents = g.extents()
        total = product(extents)
        views = {id(o): (flat(o.value) if o.results == list(range(g.n_loops)) and not o.strided else o.value)
                 for o in g.operands if o.is_memref}
        vec = params.vector
        vector_ok = None
        reads = contiguous_reads(g, vec, whole_vectors=True)  # the vector variant needs extents[-1] % vec == 0
        if vec > 1:
            vectored = [o for o in g.operands if o.is_memref and _vector_access(o, g.n_loops)
                        and (not any(o is e for e in m.elementwise) or _rows_contiguous(o, g.n_loops))]
            vector_ok = arith.andi(divisible(total if m.flat else extents[-1], vec),
                                   aligned([o.value for o in vectored], [vec * o.element_bytes for o in vectored]))
            reads_ok = host_conditions(reads, vec, extents[-1]) if reads else None
        per_block = params.unroll * params.block
        grid = arith.ceildivui(total, index_const(per_block))
        if vector_ok is not None:
            grid = arith.select(vector_ok, arith.ceildivui(arith.divui(total, index_const(vec)),
                                                           index_const(per_block)), grid)
        nonempty = arith.cmpi(arith.CmpIPredicate.ugt, total, index_const(0))
        body, guard = guarded_launch(g, "pointwise", nonempty, grid, index_const(params.block))
    with ir.InsertionPoint(body.operations[len(body.operations) - 1]), g.op.location:
        shared_philox = vec % 4 == 0 and not m.flat and _random_indices_along_rows(g)
        kernel = _PointwiseKernel(m, params, views, extents, total, body.arguments[0], body.arguments[3], reads,
                                  shared_philox)
        if vector_ok is not None and reads:  # the body's reads in vectors too where they allow it
            variants(vector_ok, vec, lambda width: kernel.variant(1) if width == 1 else variants(
                reads_ok, 2, lambda reads_fit: kernel.variant(width, vector_reads=reads_fit > 1)))
        else:
            variants(vector_ok, vec, kernel.variant)
    g.op.erase()
    return guard.operation


def _random_indices_along_rows(g: Generic) -> bool:
    """Consecutive elements of a row take consecutive random indices, and the rows' starts
    are multiples of the inner extent (which the vector variant keeps a multiple of the
    vector): a vector's elements then share Philox calls 4 at a time (`share_philox`)."""
    classes = LoopExtents([], {0: g})
    inner = classes.loop(g, g.n_loops - 1)
    return philox_linear_in(g.body, g.n_loops - 1, lambda v: classes.class_of(v) == inner)


def _element(loaded: ir.Value | list[ir.Value], e: int) -> ir.Value:
    """Element e of what was loaded: a vector, a scalar (any e), or a strided input's list."""
    return loaded[e] if isinstance(loaded, list) else element(loaded, e)


def _vector_access(o: Operand, n_loops: int) -> bool:
    """The operand's elements along the innermost loop are contiguous (a vector access)."""
    return bool(o.results) and o.results[-1] == n_loops - 1


def _rows_contiguous(o: Operand, n_loops: int) -> bool:
    """A view of another layout whose innermost dim has stride 1 (a padded buffer's interior,
    a slice of rows), indexed along the innermost loop: read or written in vectors along its
    rows, where the host finds its first element and each row's start aligned (`aligned`).
    The interior of [2, 512, 32000] bfloat16 padded after its 511th row was written an
    element at a time: 610 us for 262 MB on the H200."""
    if not (o.strided and _vector_access(o, n_loops)):
        return False
    layout = ir.MemRefType(o.value.type).layout
    return isinstance(layout, ir.StridedLayoutAttr) and layout.strides[-1] == 1


class _PointwiseKernel:
    """Thread t of block b handles vectors (b * unroll + u) * block + t, u < unroll: each
    iteration u of a warp touches one contiguous span. Full blocks issue every load first."""

    def __init__(self, m: PointwiseMatch, params: S.PointwiseParams, views: dict, extents: list[ir.Value],
                 total: ir.Value, bx: ir.Value, tx: ir.Value, reads: BodyReads, shared_philox: bool):
        self.m, self.g, self.p, self.views = m, m.generic, params, views
        self.extents, self.total, self.bx, self.tx = extents, total, bx, tx
        self.reads = reads  # the body's reads of vectors along the innermost loop (`body_reads`)
        self.shared_philox = shared_philox  # a vector's elements share Philox calls (`share_philox`)

    def variant(self, width: int, vector_reads: bool = True) -> None:
        """Vectors of `width` elements; width 1 is the scalar variant (one body per thread and
        step: it only runs on unaligned data). `vector_reads`: the body's reads along rows
        (`self.reads`) too, where the host found their sources aligned."""
        self.vector_reads = vector_reads
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
            zero = index_const(0)
            indices = None if self.m.flat else [zero if r == ZERO else ivs[r] for r in o.results]
            if _rows_contiguous(o, g.n_loops):  # a view of another layout, its rows contiguous: vectors along them
                values[id(o)] = load(o.value, indices, width)
            elif any(o is e for e in self.m.elementwise):  # element by element: a run-time layout, or transposed
                inner = g.n_loops - 1
                values[id(o)] = [memref.load(o.value, [arith.addi(i, index_const(e)) if e and r == inner else i
                                                       for i, r in zip(indices, o.results)]) for e in range(width)]
            elif o.results == list(range(g.n_loops)):
                values[id(o)] = load(view, [linear], width, "pointwise" in S.STREAMING_LOADS)
            else:
                values[id(o)] = load(o.value, indices, width if _vector_access(o, g.n_loops) else 1)
        return linear, ivs, values

    def compute_and_store(self, chunk: ir.Value, width: int, loaded) -> None:
        g = self.g
        linear, ivs, values = loaded
        results: list[list[ir.Value]] = [[] for _ in g.outputs]
        hoisted = hoist(self.reads, width, ivs) if width > 1 and self.reads and self.vector_reads else {}
        cloned: list[list[ir.Operation]] = []
        for e in range(width):
            mapping = {o.arg: (_element(values[id(o)], e) if id(o) in values else o.value)
                       for o in g.operands if id(o) in values or not o.is_memref}

            def index_of(d: int, e: int = e) -> ir.Value:
                iv = ivs[d]
                return arith.addi(iv, index_const(e)) if e and d == g.n_loops - 1 else iv

            replaced = {position: elements[e] for position, elements in hoisted.items()}
            cloned.append([])
            for k, v in enumerate(clone_body(g.body, mapping, index_of, cloned[-1], replaced=replaced)):
                results[k].append(v)
        if width > 1 and self.shared_philox:  # the vector starts at a multiple of the vector along its row
            share_philox(cloned)
        for o, elems in zip(g.outputs, results):
            if _rows_contiguous(o, g.n_loops):  # (a padded buffer's interior): vectors along its rows
                store(elems if width > 1 else elems[0], o.value, ivs)
            elif o.strided:  # a view of another layout (a padded buffer's border): element by element
                inner = g.n_loops - 1
                for e, v in enumerate(elems):
                    memref.store(v, o.value, [arith.addi(iv, index_const(e)) if e and d == inner else iv
                                              for d, iv in enumerate(ivs)])
            else:
                store(elems if width > 1 else elems[0], self.views[id(o)], [linear])
