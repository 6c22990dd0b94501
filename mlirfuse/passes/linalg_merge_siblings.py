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
kernel and one combining launch fewer; but not two that each read a pointwise generic's
result (`_computes_a_read`): apart, each computes its producer in its kernel (the GPU
backend's prologue, one a reduction), where merged they read both results back. A pointwise
generic reading a pointwise one's results through the identity map merges with it too,
taking the values instead of reading them back: elementwise fusion leaves a producer with
other users apart (a result the function returns in float32 and its bfloat16 cast; a mask
returned for the backward and the labels selected by it). Otherwise the later generic must
not use the earlier one's results, and nothing between them may (the merged op takes the
later one's place); the bodies move into the merged op whole, regions included.
Reductions along the innermost dim are left alone where they keep a loop: normalization
chains take them. Whole-tensor reductions (every loop reduced) merge: no chain takes them,
and one kernel then reads the shared input once (a cross-entropy's count of labels kept and
its loss sum, both over the labels).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

from mlir import ir
from mlir.dialects import linalg

from mlirfuse.passes.common import DimClasses, body_ops, defining_op, functions, users

NAME = "linalg-merge-siblings"
OPTIONS: dict = {}


class _Facts:
    """Per generic: its iterator types, indexing maps and number of inputs, read from its
    attributes once. A function of some thousand generics (RWKV's recurrence, unrolled over
    the sequence) asks for them millions of times: read each time, they took most of its
    compile time. A merged pair's entries are dropped (`forget`) before the two are erased."""

    def __init__(self) -> None:
        self._of: dict[ir.Operation, tuple[tuple[str, ...], list[ir.AffineMap], int]] = {}

    def __call__(self, op: ir.Operation) -> tuple[tuple[str, ...], list[ir.AffineMap], int]:
        facts = self._of.get(op)
        if facts is None:
            facts = self._of[op] = (tuple(str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])),
                                    [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])],
                                    ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0])
        return facts

    def iterators(self, op: ir.Operation) -> tuple[str, ...]:
        return self(op)[0]

    def maps(self, op: ir.Operation) -> list[ir.AffineMap]:
        return self(op)[1]

    def n_inputs(self, op: ir.Operation) -> int:
        return self(op)[2]

    def forget(self, *ops: ir.Operation) -> None:
        for op in ops:
            self._of.pop(op, None)


def _shared_domain(a: ir.Operation, b: ir.Operation, facts: _Facts) -> bool:
    """Both read one tensor through the same map naming every loop, innermost parallel."""
    iterators = facts.iterators(a)
    if iterators != facts.iterators(b):
        return False
    whole = all("reduction" in it for it in iterators)
    ins_a = list(zip(list(a.operands)[:facts.n_inputs(a)], facts.maps(a)))
    ins_b = list(zip(list(b.operands)[:facts.n_inputs(b)], facts.maps(b)))
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

    def __init__(self, ops: list[ir.Operation], facts: _Facts):
        super().__init__()
        self.facts = facts
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
        n_in = self.facts.n_inputs(op)
        maps = self.facts.maps(op)
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


def _column_reduction(op: ir.Operation, facts: _Facts) -> bool:
    """Reduces loops, and no input's innermost dim is a reduced loop: the inputs are read
    along their columns (a per-row input, innermost dim broadcast, is read once per row)."""
    iterators = facts.iterators(op)
    if "reduction" not in " ".join(iterators):
        return False
    columns = False
    for m in facts.maps(op)[:facts.n_inputs(op)]:
        if not m.results:
            continue
        last = m.results[-1]
        if isinstance(last, ir.AffineDimExpr):
            if "reduction" in iterators[last.position]:
                return False
            columns = True
    return columns


def _computes_a_read(op: ir.Operation, facts: _Facts) -> bool:
    """A column reduction reading, along its columns, the result of a pointwise generic (one
    that elementwise fusion left apart: the result has other users). The GPU backend computes
    such a producer in the reduction's kernel (a prologue), for one producer a reduction."""
    for v in _column_reads(op, facts):
        producer = defining_op(v)
        if producer is not None and producer.name == "linalg.generic" and \
                all("parallel" in it for it in facts.iterators(producer)):
            return True
    return False


def _column_reads(op: ir.Operation, facts: _Facts) -> list[ir.Value]:
    """The inputs a reduction reads along its columns (the innermost dim a parallel loop)."""
    iterators = facts.iterators(op)
    return [v for v, m in zip(list(op.operands)[:facts.n_inputs(op)], facts.maps(op))
            if m.results and isinstance(m.results[-1], ir.AffineDimExpr)
            and "parallel" in iterators[m.results[-1].position]]


def _top(op: ir.Operation, position: dict) -> int:
    while op not in position:
        op = op.parent.operation
    return position[op]


def _consumes(a: ir.Operation, b: ir.Operation, facts: _Facts) -> bool:
    """b is pointwise over a's (pointwise) results: it reads some of them, each through the
    identity map, so the two domains are one. A producer with other users too (a result of
    the function, a reduction's input) is left apart by elementwise fusion."""
    iterators = facts.iterators(a)
    if iterators != facts.iterators(b) or any("parallel" not in it for it in iterators):
        return False
    n = len(iterators)
    identity = ir.AffineMap.get_identity(n)
    if any(m != identity for m in facts.maps(a)[facts.n_inputs(a):]):
        return False
    results = set(a.results)
    n_b = facts.n_inputs(b)
    operands = list(b.operands)
    reads = [(v, m) for v, m in zip(operands[:n_b], facts.maps(b)) if v in results]
    return bool(reads) and all(m == identity for _, m in reads) and not any(v in results for v in operands[n_b:])


def _mergeable(a: ir.Operation, b: ir.Operation, position: dict, dims: Callable[[], _Dims], facts: _Facts) -> bool:
    """Whether b (after a, with a's iterator types) takes a's work: `dims` builds the
    domains' dim classes, needed only for column reductions without a shared input."""
    consumes = _consumes(a, b, facts)
    if not consumes and not _shared_domain(a, b, facts) and not (
            _column_reduction(a, facts) and _column_reduction(b, facts) and dims().same_domain(a, b)
            and not (_computes_a_read(a, facts) and _computes_a_read(b, facts))):
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


def _merge(a: ir.Operation, b: ir.Operation, position: dict, facts: _Facts) -> None:
    """One generic at b's place computing a's and b's results (users of a's results between
    them moved after it, in their order)."""
    between = sorted({u for r in a.results for u in users(r) if u in position and position[u] < position[b]},
                     key=position.__getitem__)
    for u in reversed(between):
        u.move_after(b)
    na, nb = facts.n_inputs(a), facts.n_inputs(b)
    ma, mb = facts.maps(a), facts.maps(b)
    operands_a, operands_b = list(a.operands), list(b.operands)
    produced = {r: k for k, r in enumerate(a.results)}  # b's reads of these take a's values (`_consumes`)
    ins: dict[tuple[ir.Value, ir.AffineMap], int] = {}  # each distinct (input, map) read once
    for v, m in list(zip(operands_a[:na], ma[:na])) + list(zip(operands_b[:nb], mb[:nb])):
        if v not in produced:
            ins.setdefault((v, m), len(ins))
    outs = list(zip(operands_a[na:], ma[na:])) + list(zip(operands_b[nb:], mb[nb:]))
    read = list(ins)
    with ir.InsertionPoint(b), b.location:
        merged = linalg.GenericOp([r.type for r in list(a.results) + list(b.results)],
                                  [v for v, _ in read], [v for v, _ in outs],
                                  ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for _, m in read + outs]),
                                  b.attributes["iterator_types"])
    # The larger body (by operands and results) becomes the merged one whole, its arguments
    # replaced; the other's ops move into it. A body that grows merge after merge (RWKV's
    # recurrence, unrolled over the sequence, is one generic of some thousand ops) is not
    # moved op by op each time: that made compile time quadratic in it.
    bodies = {a: a.regions[0].blocks[0], b: b.regions[0].blocks[0]}
    keep = a if len(a.operands) + len(a.results) >= len(b.operands) + len(b.results) else b
    block = bodies[keep]
    n_kept = len(block.arguments)
    block.append_to(merged.regions[0])
    args = [block.add_argument(ir.RankedTensorType(v.type).element_type, b.location) for v, _ in read + outs]
    yields: dict[ir.Operation, ir.Operation] = {}
    out_base = len(read)
    for op, operands, n, maps, first_out in ((a, operands_a, na, ma, out_base),
                                             (b, operands_b, nb, mb, out_base + len(a.results))):
        body = bodies[op]
        for k, arg in enumerate(list(body.arguments)[:n_kept] if op == keep else body.arguments):
            if k < n and op == b and operands[k] in produced:
                new = list(yields[a].operands)[produced[operands[k]]]
            elif k < n:
                new = args[ins[(operands[k], maps[k])]]
            else:
                new = args[first_out + k - n]
            arg.replace_all_uses_with(new)
        body_ops = body.operations
        yields[op] = body_ops[len(body_ops) - 1].operation  # linalg.yield
    values = list(yields[a].operands) + list(yields[b].operands)
    other = b if keep == a else a
    # a's ops before b's (b may read a's values): b's after a's last, or a's before b's first
    anchor = yields[a] if keep == a else block.operations[0].operation
    for inner in list(bodies[other].operations)[:-1]:
        inner.operation.move_before(anchor)
    for y in yields.values():
        y.erase()
    for _ in range(n_kept):
        block.erase_argument(0)
    with ir.InsertionPoint(block):
        linalg.YieldOp(values)
    for old, new in zip(list(a.results) + list(b.results), merged.results):
        old.replace_all_uses_with(new)
    facts.forget(a, b)
    b.erase()
    a.erase()


def run(module: ir.Operation) -> None:
    for func in functions(module):
        facts = _Facts()
        # Each scan looks for the first generic with a later sibling, from `start` on; after a
        # merge it goes on from the merged pair's first generic (those before it had no
        # sibling in this scan); a scan from a later generic that reaches the end is followed
        # by one from the first, and a scan from the first that finds none ends the pass: the
        # fixpoint of scanning from the start after every merge, without rescanning the
        # function's head each time (a recurrence unrolled over the sequence merges hundreds
        # of pairs, each scan over some thousand generics).
        start = 0
        while True:
            ops = body_ops(func)
            position = {op: i for i, op in enumerate(ops)}
            generics = [op for op in ops if op.name == "linalg.generic"]
            # Only generics of the same iterator types merge: each looks at the later ones of its kind.
            kinds: dict[tuple[str, ...], list[ir.Operation]] = {}
            for op in generics:
                kinds.setdefault(facts.iterators(op), []).append(op)
            place = {op: (kind, k) for kind in kinds.values() for k, op in enumerate(kind)}
            built: list[_Dims] = []

            def dims() -> _Dims:
                if not built:
                    built.append(_Dims(ops, facts))
                return built[0]
            merged_at = None
            for i in range(start, len(generics)):
                a = generics[i]
                kind, k = place[a]
                b = next((b for b in itertools.islice(kind, k + 1, None)
                          if _mergeable(a, b, position, dims, facts)), None)
                if b is not None:
                    _merge(a, b, position, facts)
                    merged_at = i
                    break
            if merged_at is not None:
                start = merged_at
            elif start == 0:
                break
            else:  # the scan reached the end without a merge: once more from the first generic
                start = 0
