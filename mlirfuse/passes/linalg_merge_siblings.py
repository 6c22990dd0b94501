"""linalg-merge-siblings: sibling generics reading one input over the same domain become one
multi-result linalg.generic.

Expects linalg on tensors (after elementwise fusion); leaves it with each such pair merged.
Two `linalg.generic`s of one block are siblings when they have the same iterator types and
both read one tensor with the same indexing map, which names every loop (so the two
iteration domains are equal) and whose innermost result is a parallel loop: pointwise work
on one input (exp(x) and sin(x) * y, which elementwise fusion leaves apart), or a column
reduction, e.g. a LayerNorm backward's weight and bias gradients, sum(g * xhat) and sum(g)
over the rows. The merged generic reads each distinct input once and computes both bodies:
one kernel (one pass over the input) instead of two. Column reductions also merge without a
shared input where their domains are provably equal (`_Dims`: the extents that generics,
tensor.empty and tensor.dim tie together), e.g. a LayerNorm backward's weight gradient
sum(g * xhat) and the dropout input's bias gradient sum(dx): one pass over the rows, one
kernel and one combining launch fewer. A pointwise generic reading a pointwise one's
results through the identity map merges with it too, taking the values instead of reading
them back: elementwise fusion leaves a producer with other users apart (a result the
function returns in float32 and its bfloat16 cast; a mask returned for the backward and the
labels selected by it). Otherwise the later generic must not use the earlier one's results,
and nothing between them may (the merged op takes the later one's place); the bodies move
into the merged op whole, regions included.
Reductions along the innermost dim are left alone where they keep a loop: normalization
chains take them. Whole-tensor reductions (every loop reduced) merge: no chain takes them,
and one kernel then reads the shared input once (a cross-entropy's count of labels kept and
its loss sum, both over the labels).
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import linalg

from mlirfuse.passes.common import DimClasses, body_ops, defining_op, functions, users

NAME = "linalg-merge-siblings"
OPTIONS: dict = {}


def _n_inputs(op: ir.Operation) -> int:
    return ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _iterators(op: ir.Operation) -> list[str]:
    return [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]


def _shared_domain(a: ir.Operation, b: ir.Operation) -> bool:
    """Both read one tensor through the same map naming every loop, innermost parallel."""
    iterators = _iterators(a)
    if iterators != _iterators(b):
        return False
    whole = all("reduction" in it for it in iterators)
    ins_a = list(zip(list(a.operands)[:_n_inputs(a)], _maps(a)))
    ins_b = list(zip(list(b.operands)[:_n_inputs(b)], _maps(b)))
    for value, m in ins_a:
        dims = [e.position for e in m.results if isinstance(e, ir.AffineDimExpr)]
        if not dims or len(m.results) != m.n_dims or sorted(dims) != list(range(m.n_dims)) \
                or ("reduction" in iterators[dims[-1]] and not whole):
            continue
        if any(value == v and m == n for v, n in ins_b):
            return True
    return False


class _Dims(DimClasses):
    """Union-find over tensor dims `(value, position)`, static sizes and index values: two
    dims in one class have equal extents whenever the function runs (a generic's loop has
    one extent, so every operand dim and result dim it indexes is equal; tensor.empty's
    dims are its size operands, tensor.dim's result the dim it reads)."""

    def __init__(self, ops: list[ir.Operation]):
        super().__init__()
        for op in ops:
            if op.name == "tensor.empty":
                t = ir.RankedTensorType(op.results[0].type)
                sizes = iter(op.operands)
                for pos in range(t.rank):
                    if t.is_dynamic_dim(pos):
                        self.union(self.dim(op.results[0], pos), ("index", next(sizes)))
            elif op.name == "tensor.dim" and isinstance(op.operands[0].type, ir.RankedTensorType):
                index = defining_op(op.operands[1])
                if index is not None and index.name == "arith.constant":
                    pos = ir.IntegerAttr(index.attributes["value"]).value
                    self.union(("index", op.results[0]), self.dim(op.operands[0], pos))
            elif op.name == "linalg.generic":
                for keys in self.loop_dims(op):
                    for k in keys[1:]:
                        self.union(keys[0], k)

    def loop_dims(self, op: ir.Operation) -> list[list[Any]]:
        """Per loop of a generic, the operand and result dims it indexes."""
        n_in = _n_inputs(op)
        maps = _maps(op)
        values = list(op.operands) + list(op.results)
        value_maps = maps + maps[n_in:]
        found: list[list[Any]] = [[] for _ in range(maps[0].n_dims)]
        for v, m in zip(values, value_maps):
            if not isinstance(v.type, ir.RankedTensorType):
                continue
            for pos, e in enumerate(m.results):
                if isinstance(e, ir.AffineDimExpr):
                    found[e.position].append(self.dim(v, pos))
        return found

    def same_domain(self, a: ir.Operation, b: ir.Operation) -> bool:
        da, db = self.loop_dims(a), self.loop_dims(b)
        return len(da) == len(db) and all(x and y and self.find(x[0]) == self.find(y[0]) for x, y in zip(da, db))


def _column_reduction(op: ir.Operation) -> bool:
    """Reduces loops, and no input's innermost dim is a reduced loop: the inputs are read
    along their columns (a per-row input, innermost dim broadcast, is read once per row)."""
    iterators = _iterators(op)
    if "reduction" not in " ".join(iterators):
        return False
    columns = False
    for m in _maps(op)[:_n_inputs(op)]:
        if not m.results:
            continue
        last = m.results[-1]
        if isinstance(last, ir.AffineDimExpr):
            if "reduction" in iterators[last.position]:
                return False
            columns = True
    return columns


def _top(op: ir.Operation, position: dict) -> int:
    while op not in position:
        op = op.parent.operation
    return position[op]


def _consumes(a: ir.Operation, b: ir.Operation) -> bool:
    """b is pointwise over a's (pointwise) results: it reads some of them, each through the
    identity map, so the two domains are one. A producer with other users too (a result of
    the function, a reduction's input) is left apart by elementwise fusion."""
    iterators = _iterators(a)
    if iterators != _iterators(b) or any("parallel" not in it for it in iterators):
        return False
    n = len(iterators)
    identity = ir.AffineMap.get_identity(n)
    if any(m != identity for m in _maps(a)[_n_inputs(a):]):
        return False
    results = set(a.results)
    reads = [(v, m) for v, m in zip(list(b.operands)[:_n_inputs(b)], _maps(b)) if v in results]
    return bool(reads) and all(m == identity for _, m in reads) \
        and not any(v in results for v in list(b.operands)[_n_inputs(b):])


def _mergeable(a: ir.Operation, b: ir.Operation, position: dict, dims: _Dims) -> bool:
    consumes = _consumes(a, b)
    if not consumes and not _shared_domain(a, b) and not (
            _iterators(a) == _iterators(b) and _column_reduction(a) and _column_reduction(b)
            and dims.same_domain(a, b)):
        return False
    results = set(a.results)
    if not consumes and any(v in results for v in b.operands):
        return False
    return all(u == b or _top(u, position) > position[b] or _movable(u, b, position)
               for r in a.results for u in users(r))


def _movable(user: ir.Operation, b: ir.Operation, position: dict) -> bool:
    """A top-level generic between a and b using a's results (a copy into a differently
    shaped output, say) that can move after b: b does not use it and nothing before b does."""
    return user in position and user.name == "linalg.generic" and position[user] < position[b] and \
        all(_top(u, position) > position[b] for r in user.results for u in users(r))


def _merge(a: ir.Operation, b: ir.Operation, position: dict) -> None:
    """One generic at b's place computing a's and b's results (users of a's results between
    them moved after it, in their order)."""
    between = sorted({u for r in a.results for u in users(r) if u in position and position[u] < position[b]},
                     key=position.__getitem__)
    for u in reversed(between):
        u.move_after(b)
    na, nb = _n_inputs(a), _n_inputs(b)
    ma, mb = _maps(a), _maps(b)
    produced = list(a.results)  # b's reads of these take a's values (`_consumes`)
    ins: list[tuple[ir.Value, ir.AffineMap]] = []
    for v, m in list(zip(list(a.operands)[:na], ma[:na])) + list(zip(list(b.operands)[:nb], mb[:nb])):
        if v not in produced and not any(v == w and m == n for w, n in ins):
            ins.append((v, m))
    outs = list(zip(list(a.operands)[na:], ma[na:])) + list(zip(list(b.operands)[nb:], mb[nb:]))
    with ir.InsertionPoint(b), b.location:
        merged = linalg.GenericOp([r.type for r in list(a.results) + list(b.results)],
                                  [v for v, _ in ins], [v for v, _ in outs],
                                  ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for _, m in ins + outs]),
                                  b.attributes["iterator_types"])
    block = merged.regions[0].blocks.append(*[ir.RankedTensorType(v.type).element_type for v, _ in ins + outs])
    args = list(block.arguments)
    yields: list[ir.Value] = []
    out_base = len(ins)
    for op, n, maps, first_out in ((a, na, ma, out_base), (b, nb, mb, out_base + len(a.results))):
        old = op.regions[0].blocks[0]  # its ops move into the merged body (nested regions and all)
        for k, arg in enumerate(old.arguments):
            if k < n and op == b and list(op.operands)[k] in produced:
                new = yields[produced.index(list(op.operands)[k])]
            elif k < n:
                v, m = list(op.operands)[k], maps[k]
                new = args[next(i for i, (w, p) in enumerate(ins) if w == v and p == m)]
            else:
                new = args[first_out + k - n]
            arg.replace_all_uses_with(new)
        for inner in list(old.operations):
            inner = inner.operation
            if inner.name == "linalg.yield":
                yields += list(inner.operands)
                continue
            inner.detach_from_parent()
            block.append(inner)
    with ir.InsertionPoint(block):
        linalg.YieldOp(yields)
    for old, new in zip(list(a.results) + list(b.results), merged.results):
        old.replace_all_uses_with(new)
    b.erase()
    a.erase()


def run(module: ir.Operation) -> None:
    for func in functions(module):
        changed = True
        while changed:
            changed = False
            ops = body_ops(func)
            position = {op: i for i, op in enumerate(ops)}
            generics = [op for op in ops if op.name == "linalg.generic"]
            dims = _Dims(ops)
            for i, a in enumerate(generics):
                b = next((b for b in generics[i + 1:] if _mergeable(a, b, position, dims)), None)
                if b is not None:
                    _merge(a, b, position)
                    changed = True
                    break
