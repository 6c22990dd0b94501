"""fusion-reshapes-past-reductions: a column reduction of a reshape reduces the reshape's
operand, and the reshape moves to its (smaller) result.

Expects and leaves fusion IR (static or dynamic sizes). A reshape keeps the row-major order of
the elements: it splits and merges runs of dims, so its operand's and result's dims fall into
groups of equal element counts (`dim_groups`: [B, S, H] -> [B*S, H] is ({B, S}, {B*S}),
({H}, {H})). Where the reduction reduces each group wholly or not at all, reducing the operand
over the groups' operand dims combines the same elements into the same outputs; a reshape of
that result gives the original result's shape. Sum, prod, max, min, mean and var (their
element counts are the same) move; argmax-like reductions (none in the dialect) would not.

Why: the torch backend's graphs view a [batch, seq, hidden] value as [tokens, hidden] for a
linear's bias gradient, sum over dim 0, beside a LayerNorm backward computed over [batch,
seq, hidden]. Through the reshape, the bias gradient's column reduction runs over other loops
than the LayerNorm's rows and its weight and bias gradients: the normalization kernel cannot
take its column sums (`column_sums`), and linalg-merge-siblings cannot make the gradients one
column reduction, so the region read the rows once more, in a launch of its own. Reduced over
the value's own dims, the three are one domain.

Moved only for column reductions (the operand's innermost dim kept) of a value computed in
the function (not an argument), through a reshape that merges the reduced dims (`_merges`):
a row reduction of a reshape may be a normalization chain's member over the reshaped rows,
which the move would split from the chain; a reshape of an argument is a view whose reduction
has no producer to meet; a reshape that only makes dynamic sizes static may be the one the
region's chain reads through; and a value computed from a view of one in the reduction's
shape (`_round_trip`) belongs to that shape.

A reduction reading the reshape through a cast (CUDA autocast's bias gradient: dx cast to
bfloat16 for the linear before it, viewed as rows and widened to sum it in float32) moves
with the cast, which then widens the reshape's operand: the same elements, so the same sums.
Only where each other reduction over the same dims of a value of that shape (the ones it will
merge with: the LayerNorm's weight and bias gradients) reads narrow elements too
(`_siblings_read_narrow`: a bfloat16 dy). Those the normalization kernel does not sum
(`column_sums.in_held`: columns of 4 bytes or wider), so their column reduction runs after
the chain and the bias gradient joins it: GPT-2's and BERT's autocast LayerNorm-backward
regions go from 3 launches to 2 (each region compiled for sm_90 from the H200 step's fusion
IR, session 95). Beside a float32 dy's gradients, which the normalization kernel sums, the
bias gradient's bfloat16 column would take them out of it (compiled: the held kernel with its
combine, then the bias gradient's column reduction, became a normalization without the sums
and a column reduction reading dy and x_hat again), so there it stays.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.passes.common import body_ops, defining_op, functions
from mlirfuse.passes.extents import Extents

NAME = "fusion-reshapes-past-reductions"
OPTIONS: dict = {}

REDUCTIONS = ("fusion.sum", "fusion.prod", "fusion.max", "fusion.min", "fusion.mean", "fusion.var",
              "fusion.var_mean")

Group = tuple[list[int], list[int]]  # (operand dims, result dims) of equal element counts


Size = int | tuple  # a static size, or a symbol: equal symbols are equal sizes


def _sizes(reshape: ir.Operation, extents: Extents) -> tuple[list[Size], list[Size]]:
    """The reshape's operand and result sizes: static ones as ints, dynamic ones as their
    extent classes (`Extents`: a result dim whose index operand is a size of the operand's dim
    d, as the tracer writes [b * s, h] of a [b, s, h] value, is that dim's class)."""
    def size(sym: tuple) -> Size:
        return sym[1] if sym[0] == "c" else sym

    src = [size(sym) for sym in extents.dims(reshape.operands[0])]
    given = [int(v) for v in ir.DenseI64ArrayAttr(reshape.attributes["shape"])]
    operands = iter(list(reshape.operands)[1:])
    tgt = [n if n != -1 else size(extents.find(extents.index_of[next(operands)])) for n in given]
    return src, tgt


def dim_groups(source: list[Size], target: list[Size]) -> list[Group] | None:
    """The reshape of `source` to `target` (`Size`s) as groups of dims with equal element
    counts, in order: from each end, equal symbols one to one and the shortest runs of static
    sizes with equal products; the dims between them one group (its counts are equal because
    the totals are). None where a static size is 0 (every grouping holds)."""
    if 0 in source or 0 in target:
        return None

    def ends(src: list[Size], tgt: list[Size]) -> list[Group]:
        """The groups from the start of `src` and `tgt`, while their counts are known equal."""
        found: list[Group] = []
        i = j = 0
        while i < len(src) and j < len(tgt):
            na, nb = src[i], tgt[j]
            if not isinstance(na, int) or not isinstance(nb, int):
                if na != nb:
                    return found
                found.append(([i], [j]))
                i, j = i + 1, j + 1
                continue
            a, b = [i], [j]
            while na != nb:
                side, dims = (src, a) if na < nb else (tgt, b)
                if dims[-1] + 1 >= len(side) or not isinstance(side[dims[-1] + 1], int):
                    return found
                dims.append(dims[-1] + 1)
                if side is src:
                    na *= src[a[-1]]
                else:
                    nb *= tgt[b[-1]]
            found.append((a, b))
            i, j = a[-1] + 1, b[-1] + 1
        return found

    front = ends(source, target)
    i = front[-1][0][-1] + 1 if front else 0
    j = front[-1][1][-1] + 1 if front else 0
    back_rev = ends(source[i:][::-1], target[j:][::-1])
    back = [([len(source) - 1 - k for k in reversed(a)], [len(target) - 1 - k for k in reversed(b)])
            for a, b in reversed(back_rev)]
    stop_i = back[0][0][0] if back else len(source)
    stop_j = back[0][1][0] if back else len(target)
    middle = [(list(range(i, stop_i)), list(range(j, stop_j)))] if stop_i > i or stop_j > j else []
    return front + middle + back


def _reduced_dims(groups: list[Group], axes: set[int]) -> list[int] | None:
    """The operand dims to reduce: those of the groups whose result dims the reduction
    reduces (a group without result dims holds one element: reduced); None where a group
    is reduced only in part."""
    dims = []
    for src, tgt in groups:
        reduced = [d in axes for d in tgt]
        if any(reduced) and not all(reduced):
            return None
        if all(reduced):
            dims += src
    return dims


def _merges(groups: list[Group], axes: set[int]) -> bool:
    """The reshape merges dims that the reduction reduces (tokens of [batch, seq]), and
    splits none of them: the reduction over the operand then has the loops of the operand's
    producer. A reshape that only gives dynamic dims static sizes ([?, ?, H] -> [B, S, H],
    the torch backend's view of a gradient as the graph's sizes) is left: the values after
    it are the ones a normalization chain runs over."""
    reduced = [(src, tgt) for src, tgt in groups if tgt and all(d in axes for d in tgt)]
    return all(len(src) >= len(tgt) for src, tgt in reduced) and any(len(src) > len(tgt) for src, tgt in reduced)


def _round_trip(source: ir.Value, viewed: ir.Type) -> bool:
    """`source` is computed by an elementwise op reading a reshape
    of a computed value of the `viewed` type: the graph viewed that value into the source's
    shape for this op alone (BERT's cross-entropy gradient, [tokens, vocab] viewed as [batch,
    seq, vocab] to add another gradient, viewed back for the bias gradient).
    linalg-reshape-elementwise moves such an op into the viewed shape, where its producer's
    normalization kernel writes it; the reduction stays there too (moved, it split the two:
    a [tokens, vocab] float32 temporary, 374 MB more at BERT's peak)."""
    op = defining_op(source)
    if op is None or not op.name.startswith("fusion.") or op.name in REDUCTIONS:
        return False
    for v in op.operands:
        view = defining_op(v)
        if view is not None and view.name == "fusion.reshape" and view.operands[0].type == viewed and \
                defining_op(view.operands[0]) is not None:
            return True
    return False


def _move(func: ir.Operation, op: ir.Operation, extents: Extents) -> bool:
    reshape, cast = defining_op(op.operands[0]), None
    if reshape is not None and reshape.name == "fusion.cast":  # (CUDA autocast: a bfloat16 dx widened)
        cast, reshape = reshape, defining_op(reshape.operands[0])
    if reshape is None or reshape.name != "fusion.reshape":
        return False
    source = reshape.operands[0]
    if defining_op(source) is None or not isinstance(source.type, ir.RankedTensorType) or \
            _round_trip(source, reshape.results[0].type):
        return False
    src, tgt = _sizes(reshape, extents)
    if not src or not tgt:
        return False
    axes = {int(a) % len(tgt) for a in ir.DenseI64ArrayAttr(op.attributes["axes"])}
    groups = dim_groups(src, tgt)
    if not axes or groups is None or len(tgt) - 1 in axes:
        return False
    dims = _reduced_dims(groups, axes)
    if dims is None or len(src) - 1 in dims or not _merges(groups, axes):
        return False
    if cast is not None and not _siblings_read_narrow(func, op, source.type, dims):
        return False
    keep = [d for d in range(len(src)) if d not in dims]
    attributes = {name: op.attributes[name] for name in op.attributes}
    attributes["axes"] = ir.DenseI64ArrayAttr.get(sorted(dims))
    attributes["keepdim"] = ir.BoolAttr.get(False)
    with ir.InsertionPoint(op), op.location:
        if cast is not None:  # the cast of the reshape's operand: elementwise, so the same elements
            widened = ir.RankedTensorType.get(ir.RankedTensorType(source.type).shape,
                                              ir.RankedTensorType(cast.results[0].type).element_type)
            source = ir.Operation.create("fusion.cast", results=[widened], operands=[source],
                                         attributes={a.name: a.attr for a in cast.attributes}).results[0]
        kept_types = [ir.RankedTensorType.get([ir.RankedTensorType(source.type).shape[d] for d in keep],
                                              ir.RankedTensorType(r.type).element_type) for r in op.results]
        reduced = ir.Operation.create(op.name, results=kept_types, operands=[source], attributes=attributes)
        for old, new in zip(op.results, reduced.results):
            old.replace_all_uses_with(_reshaped(new, old.type, reshape, axes))
    op.erase()
    return True


def _narrow(t: ir.Type) -> bool:
    """Elements of fewer than 4 bytes (bfloat16, a mask)."""
    element = ir.RankedTensorType(t).element_type if isinstance(t, ir.RankedTensorType) else t
    return hasattr(element, "width") and element.width < 32


def _reads_narrow(value: ir.Value) -> bool:
    """`value` is computed from an argument of narrow elements, through ops that are not
    reductions (a row's sum is the chain's own value, held in registers)."""
    seen, stack = set(), [value]
    while stack:
        v = stack.pop()
        op = defining_op(v)
        if op is None:
            if _narrow(v.type):
                return True
            continue
        if op.name in REDUCTIONS:
            continue
        for operand in op.operands:
            if isinstance(operand.type, ir.RankedTensorType) and operand not in seen:
                seen.add(operand)
                stack.append(operand)
    return False


def _siblings_read_narrow(func: ir.Operation, op: ir.Operation, shape: ir.Type, dims: list[int]) -> bool:
    """Each other reduction over `dims` of a value of `shape` (those `op`, moved, would merge
    with) reads narrow elements: none of them is one the normalization kernel sums."""
    sizes = ir.RankedTensorType(shape).shape
    for other in body_ops(func):
        if other == op or other.name not in REDUCTIONS or not isinstance(other.operands[0].type, ir.RankedTensorType) \
                or ir.RankedTensorType(other.operands[0].type).shape != sizes:
            continue
        if sorted(int(a) % len(sizes) for a in ir.DenseI64ArrayAttr(other.attributes["axes"])) != sorted(dims):
            continue
        if not _reads_narrow(other.operands[0]):
            return False
    return True


def _reshaped(value: ir.Value, want: ir.Type, reshape: ir.Operation, axes: set[int]) -> ir.Value:
    """`value` reshaped to `want` (the original result): its dynamic sizes are the reshape's
    own, of the dims the reduction keeps."""
    if value.type == want:
        return value
    given = [int(s) for s in ir.DenseI64ArrayAttr(reshape.attributes["shape"])]  # -1: an index operand
    keepdim_rank = ir.RankedTensorType(want).rank == len(given)
    sizes = iter(list(reshape.operands)[1:])
    dynamic = {d: next(sizes) for d in range(len(given)) if given[d] == -1}
    shape, operands = [], [value]
    for d in range(len(given)):
        if d in axes:
            if keepdim_rank:
                shape.append(1)
            continue
        shape.append(given[d])
        if given[d] == -1:
            operands.append(dynamic[d])
    return ir.Operation.create("fusion.reshape", results=[want], operands=operands,
                               attributes={"shape": ir.DenseI64ArrayAttr.get(shape)}).results[0]


def run(module: ir.Operation) -> None:
    extents = Extents(module)  # (of the ops as they were: a move reads only ops it leaves)
    for func in functions(module):
        for op in body_ops(func):
            if op.name in REDUCTIONS:
                _move(func, op, extents)
