"""Reads inside a generic's body that a kernel can take a vector at a time.

Slices, pads, cats and gathers read their sources at computed indices inside the body of the
generic that `lowering/indexing.py` builds for them: `memref.load %source[i0, ..., iK]` of a
buffer captured from outside the body. Cloned once per element of a vector, such a read is
one scalar load per element (a 2-byte load for the bf16 weight padded to a multiple of 8
rows before GPT-2's and BERT's output projection, or for logits sliced from a padded product).

A `ContiguousRead` is one whose last index is the innermost loop's index plus a constant and
whose other indices do not depend on the innermost loop: the elements of a vector along the
innermost loop read consecutive elements of one row of the source. A kernel loads them with
one `vector.load` before the body's copies (`hoist`): the other indices computed once, each
clamped into the source (the read may sit in a branch not taken, a pad's rows past the end:
its vector is then read from the last row and not used), and each element's copy of the
body takes its element of the vector. The pointwise kernel has the host check what the
vector needs (`host_conditions`): the source aligned to the vector, its rows a multiple of
the vector long, the constant too, and the innermost loop's extent plus the constant within
the row. The normalization kernel checks a row at a time in the kernel (`Hoisted` gives it
the row's indices), its vectors starting where the row's own alignment puts them.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, memref

from mlirfuse.lowering.gpu.kernels import Generic, aligned, divisible, element, element_bytes, load, nested_ops
from mlirfuse.lowering.linalg_builders import index_const


@dataclass
class ContiguousRead:
    position: int  # the load's place among the body's operations, in pre-order (`nested_ops`)
    load: ir.Operation
    source: ir.Value  # the buffer read, captured from outside the body
    offset: int  # the last index is the innermost loop index plus this
    clamped: bool = False  # in a branch taken for whole vectors only: its column is clamped into the row


@dataclass
class BodyReads:
    reads: list[ContiguousRead]
    inside: set  # the values the body defines (results, block arguments)

    def __bool__(self) -> bool:
        return bool(self.reads)


def contiguous_reads(g: Generic, width: int, whole_vectors: bool = False) -> BodyReads:
    """The body's reads that `width` consecutive elements of the innermost loop take as one
    vector of their source (offsets that are multiples of `width`, sources of contiguous
    layout). With `whole_vectors` (the kernel's vectors start at innermost indices that are
    multiples of `width`), also reads in branches whose condition compares the innermost
    index with a bound that is a multiple of `width` away from a vector's start, e.g. a
    cat's halves or a rotation's (`j < 64 ? -x[j + 64] : x[j - 64]`): such a branch is taken
    by all of a vector's elements or none, so its read is one vector, loaded whichever way
    the branch goes, at a column clamped into the row (`clamped`)."""
    inside: set = set(g.body.arguments)
    ops = nested_ops(g.body)
    for op in ops:
        inside.update(op.results)
        for region in op.regions:
            for block in region.blocks:
                inside.update(block.arguments)
    if width <= 1 or g.n_loops == 0:
        return BodyReads([], inside)
    inner = g.n_loops - 1
    top_level = {_key(op) for op in g.body.operations}
    uniform: dict = {}

    def is_uniform(v: ir.Value) -> bool:
        """`v` is the same for every element along the innermost loop, and computable ahead
        of the body's branches (pure ops, or loads the body runs unconditionally)."""
        if v not in inside:
            return True
        if v not in uniform:
            uniform[v] = False  # (SSA has no cycles; this only guards the recursion)
            owner = v.owner
            if isinstance(owner, ir.Block):
                return False  # an element of an operand, or a block argument of a branch
            op = owner.operation
            if op.name == "linalg.index":
                ok = ir.IntegerAttr(op.attributes["dim"]).value != inner
            elif op.name.startswith("arith.") or op.name == "memref.dim":
                ok = all(is_uniform(x) for x in op.operands)
            elif op.name == "memref.load":
                ok = _key(op) in top_level and all(is_uniform(x) for x in op.operands)
            else:
                ok = False
            uniform[v] = ok
        return uniform[v]

    def innermost_plus(v: ir.Value) -> int | None:
        """c where `v` is the innermost loop's index plus the constant c."""
        owner = v.owner
        if isinstance(owner, ir.Block):
            return None
        op = owner.operation
        if op.name == "linalg.index":
            return 0 if ir.IntegerAttr(op.attributes["dim"]).value == inner else None
        if op.name == "arith.addi":
            for a, b in (list(op.operands), list(op.operands)[::-1]):
                c = _constant(b)
                if c is not None and innermost_plus(a) == 0:
                    return c
        if op.name == "arith.subi":
            c = _constant(op.operands[1])
            if c is not None and innermost_plus(op.operands[0]) == 0:
                return -c
        return None

    def whole_vector(condition: ir.Value) -> bool:
        """The condition is the same for a vector's elements: the innermost index plus a
        constant compared with a constant, their difference a multiple of `width` (or such
        conditions combined)."""
        if is_uniform(condition):
            return True
        owner = condition.owner
        if not whole_vectors or isinstance(owner, ir.Block):
            return False
        op = owner.operation
        if op.name in ("arith.andi", "arith.ori"):
            return all(whole_vector(x) for x in op.operands)
        if op.name != "arith.cmpi":
            return False
        predicate = ir.IntegerAttr(op.attributes["predicate"]).value
        for a, b, swapped in ((*op.operands, False), (*list(op.operands)[::-1], True)):
            c, bound = innermost_plus(a), _constant(b)
            if c is None or bound is None or predicate not in _FLIP_AT:
                continue
            # the innermost index where the condition changes: bound - c for <, >=; one more
            # for <=, > (bound cmp j + c swapped: j + c > bound is bound < j + c); an unsigned
            # compare of j + c < 0 also changes where j + c wraps, at j = -c
            flip = bound - c + (1 if _FLIP_AT[predicate] != swapped else 0)
            return flip % width == 0 and c % width == 0
        return False

    reads = []
    for position, op in enumerate(ops):
        if op.name != "memref.load":
            continue
        source, *indices = op.operands
        t = ir.MemRefType(source.type)
        if source in inside or not indices or not _contiguous(t) or isinstance(t.element_type, ir.IndexType):
            continue
        offset = innermost_plus(indices[-1])
        if offset is None or offset % width or not all(is_uniform(i) for i in indices[:-1]):
            continue
        guards = _guards(op, g.body)
        clamped = not all(is_uniform(c) for c in guards)
        if clamped and not all(whole_vector(c) for c in guards):
            continue  # taken for some elements of a vector only (a pad of the innermost dim)
        if offset < 0 and not clamped:
            continue
        reads.append(ContiguousRead(position, op, source, offset, clamped))
    return BodyReads(reads, inside)


def host_conditions(found: BodyReads, width: int, inner_extent: ir.Value) -> ir.Value:
    """Host: the reads' vectors are aligned and inside their sources (see the module)."""
    reads = found.reads
    ok = aligned([r.source for r in reads], [width * element_bytes(ir.MemRefType(r.source.type).element_type)
                                             for r in reads])
    for r in reads:
        rank = ir.MemRefType(r.source.type).rank
        row = memref.dim(r.source, index_const(rank - 1))
        ok = arith.andi(ok, divisible(row, width))
        if r.clamped:  # a vector to clamp into
            ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.uge, row, index_const(width)))
        else:
            ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.ule, arith.addi(inner_extent, index_const(r.offset)),
                                           row))
        for d in range(rank - 1):  # a clamped index needs a row to clamp into
            ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.ugt, memref.dim(r.source, index_const(d)),
                                           index_const(0)))
    return ok


class Hoisted:
    """The reads' indices computed ahead of the body's copies, at the current insertion
    point: `index_of(d)` gives the value of `linalg.index d` (the innermost loop's: that of
    a vector's first element)."""

    def __init__(self, found: BodyReads, index_of) -> None:
        self.found, self.index_of = found, index_of
        self.computed: dict = {}

    def value(self, v: ir.Value) -> ir.Value:
        """A uniform value of the body (`contiguous_reads`), computed here."""
        if v not in self.found.inside:
            return v
        if v not in self.computed:
            op = v.owner.operation
            if op.name == "linalg.index":
                self.computed[v] = self.index_of(ir.IntegerAttr(op.attributes["dim"]).value)
            else:
                operands = [self.value(x) for x in op.operands]
                new = op.clone()
                for k, x in enumerate(operands):
                    new.operands[k] = x
                for old, result in zip(op.results, new.results):
                    self.computed[old] = result
        return self.computed[v]

    def row(self, r: ContiguousRead) -> list[ir.Value]:
        """The read's indices but the last, each clamped into its source (a read in a branch
        not taken, a pad's row past the end, stays inside)."""
        source, *indices = r.load.operands
        return [arith.minui(self.value(i), arith.subi(memref.dim(source, index_const(d)), index_const(1)))
                for d, i in enumerate(indices[:-1])]

    def column(self, r: ContiguousRead, first: ir.Value, width: int = 1) -> ir.Value:
        """The source column of the element whose innermost loop index is `first` (for a
        clamped read, clamped to [0, row - width]: where its branch is taken the vector is
        in the row, so clamping changes nothing there)."""
        column = arith.addi(first, index_const(r.offset)) if r.offset else first
        if not r.clamped:
            return column
        source = r.load.operands[0]
        last = arith.subi(memref.dim(source, index_const(ir.MemRefType(source.type).rank - 1)), index_const(width))
        return arith.maxsi(arith.minsi(column, last), index_const(0))


def hoist(found: BodyReads, width: int, ivs: list[ir.Value]) -> dict[int, list[ir.Value]]:
    """Load each read's vector at the current insertion point, for the elements from loop
    indices `ivs` on along the innermost loop: position -> the vector's elements. Two reads
    of one row of a source in the two branches of one whole-vector condition (a cat's
    halves, a rotation's `j < 64 ? -x[j + 64] : x[j - 64]`) are one load at the column of
    the branch the vector takes (both were loaded, one unused)."""
    at = Hoisted(found, lambda d: ivs[d])
    elements = {}
    for reads, condition in _branch_pairs(found.reads):
        columns = [at.column(r, ivs[-1], width) for r in reads]
        column = columns[0] if condition is None else arith.select(at.value(condition), *columns)
        vec = load(reads[0].load.operands[0], at.row(reads[0]) + [column], width)
        for r in reads:
            elements[r.position] = [element(vec, e) for e in range(width)]
    return elements


def _branch_pairs(reads: list[ContiguousRead]) -> list[tuple[list[ContiguousRead], ir.Value | None]]:
    """The reads, one at a time ([read], None), but for pairs ([then's, else's], condition):
    clamped reads of one source at the same row, each the only read of its branch of one
    scf.if (whose condition `contiguous_reads` found to be the same along a vector)."""
    by_branch: dict = {}
    for r in reads:
        parent = r.load.parent
        if r.clamped and parent is not None and parent.name == "scf.if":
            in_then = any(_key(op) == _key(r.load) for op in parent.regions[0].blocks[0].operations)
            by_branch.setdefault((_key(parent), in_then), []).append(r)
    paired: dict = {}
    for (parent, in_then), rs in by_branch.items():
        others = by_branch.get((parent, not in_then), [])
        if in_then and len(rs) == 1 and len(others) == 1:
            a, b = rs[0], others[0]
            if a.source == b.source and list(a.load.operands)[1:-1] == list(b.load.operands)[1:-1]:
                paired[a.position] = paired[b.position] = ([a, b], parent.operands[0])
    out, seen = [], set()
    for r in reads:
        if r.position in paired:
            if r.position not in seen:
                pair = paired[r.position]
                seen.update(x.position for x in pair[0])
                out.append(pair)
        else:
            out.append(([r], None))
    return out


# arith.cmpi's predicates that hold on one side of a bound (eq and ne not: they hold at one
# index) -> whether the bound's own index is on the side after the change (<=, >).
# slt, sle, sgt, sge, ult, ule, ugt, uge:
_FLIP_AT = {2: False, 3: True, 4: True, 5: False, 6: False, 7: True, 8: True, 9: False}


def _guards(op: ir.Operation, body: ir.Block) -> list[ir.Value]:
    """The conditions of the branches `op` sits in, within `body`."""
    conditions = []
    parent = op.parent
    while parent is not None and parent.name != "linalg.generic":
        if parent.name == "scf.if":
            conditions.append(parent.operands[0])
        parent = parent.parent
    return conditions


def _key(op: ir.Operation) -> ir.Operation:
    return op.operation if isinstance(op, ir.OpView) else op


def _constant(v: ir.Value) -> int | None:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    attr = owner.operation.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


def _contiguous(t: ir.MemRefType) -> bool:
    layout = t.layout
    return (t.memory_space is None and isinstance(layout, ir.AffineMapAttr)
            and layout.value == ir.AffineMap.get_identity(t.rank))
