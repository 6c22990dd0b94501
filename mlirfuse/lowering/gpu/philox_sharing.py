"""Random numbers in vector kernels: where consecutive elements take consecutive Philox
indices (`philox_linear_in`), the elements of a group of 4 share one Philox call
(`share_philox`): each call yields 4 words, so a vector kernel makes a quarter of the calls.
"""

from __future__ import annotations

from typing import Callable

from mlir import ir

from mlirfuse.lowering.gpu.kernels import nested_ops


def share_philox(elements: list[list[ir.Operation]]) -> None:
    """One Philox call for each 4 consecutive elements instead of one each (a call makes 4
    words: element i takes word i % 4 of call i // 4). `elements[e]`: the ops cloned for
    element e of a vector, in order. The caller guarantees that element e's random index is
    element 0's plus e and that element 0's is a multiple of 4 (`philox_linear_in`); element
    e's word is then word e % 4 of element e - e % 4's call (its own call becomes dead)."""
    calls = [_philox_words(ops) for ops in elements]
    for e in range(len(elements)):
        lane = e % 4
        if lane == 0 or len(calls[e]) != len(calls[e - lane]):
            continue
        for mine, first in zip(calls[e], calls[e - lane]):
            if mine is not None and first is not None:
                mine[0].replace_all_uses_with(first[1 + lane])


def _philox_words(ops: list[ir.Operation]) -> list[list[ir.Value] | None]:
    """Per Philox call among `ops`: [selected word, w0, w1, w2, w3], or None where the
    selection select(=3, w3, select(=2, w2, select(=1, w1, w0))) is not recognized."""
    from mlirfuse.lowering.philox import WORD_TAG

    found: list[list[ir.Value] | None] = []
    for word in (op for op in ops if WORD_TAG in op.attributes):
        picked, op, rest = [], word, None
        for lane in (3, 2, 1):
            if op.name != "arith.select" or not _is_lane_test(op.operands[0], lane):
                break
            picked.append(op.operands[1])  # w3, w2, w1
            rest = op.operands[2]
            if lane > 1:
                if isinstance(rest.owner, ir.Block):
                    break
                op = rest.owner.operation
        found.append([word.results[0], rest, picked[2], picked[1], picked[0]] if len(picked) == 3 else None)
    return found


def _is_lane_test(cond: ir.Value, lane: int) -> bool:
    """`cond` is `arith.cmpi eq, %lane, <lane>`."""
    owner = cond.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.cmpi":
        return False
    op = owner.operation
    if ir.IntegerAttr(op.attributes["predicate"]).value != 0:  # eq
        return False
    rhs = op.operands[1].owner
    return not isinstance(rhs, ir.Block) and rhs.operation.name == "arith.constant" \
        and ir.IntegerAttr(rhs.operation.attributes["value"]).value == lane


def philox_linear_in(body: ir.Block, last: int, extent_of: Callable[[ir.Value], bool]) -> bool:
    """Every Philox index in `body` is `linalg.index last` plus terms that each have a factor
    `extent_of` accepts (an extent that vector variants keep a multiple of the vector):
    consecutive elements along loop `last` then take consecutive random indices."""
    from mlirfuse.lowering.philox import INDEX_TAG

    tagged = [op for op in nested_ops(body) if INDEX_TAG in op.attributes]
    if not tagged:
        return False
    inside = {op.results[0] for op in nested_ops(body) if len(op.results) == 1}
    for op in tagged:
        poly = _polynomial(op.operands[0], inside)
        if poly is None or poly.get((("i", last),)) != 1:
            return False
        for monomial, coeff in poly.items():
            if monomial == (("i", last),) or coeff % 4 == 0:
                continue
            if any(f == ("i", last) for f in monomial) or \
                    not any(f[0] == "v" and extent_of(f[1]) for f in monomial):
                return False
    return True


def _polynomial(v: ir.Value, inside: set) -> dict | None:
    """`v` as a polynomial over `linalg.index` values and values from outside the body:
    {sorted factors: coefficient}; None past an op other than add, mul, casts, constants.
    Constants are numbers wherever they are defined (static sizes' strides, hoisted out of
    the body, are multiples of 4 or not as numbers, not as extents)."""
    op = None if isinstance(v.owner, ir.Block) else v.owner.operation
    if v not in inside and (op is None or op.name != "arith.constant"):
        return {(("v", v),): 1}
    if op.name == "linalg.index":
        return {(("i", ir.IntegerAttr(op.attributes["dim"]).value),): 1}
    if op.name == "arith.constant":
        return {(): ir.IntegerAttr(op.attributes["value"]).value}
    if op.name in ("arith.index_cast", "arith.index_castui"):
        return _polynomial(op.operands[0], inside)
    if op.name not in ("arith.addi", "arith.muli"):
        return None
    a, b = (_polynomial(x, inside) for x in op.operands)
    if a is None or b is None:
        return None
    out: dict = {}
    if op.name == "arith.addi":
        for m, c in list(a.items()) + list(b.items()):
            out[m] = out.get(m, 0) + c
    else:
        for (ma, ca), (mb, cb) in ((x, y) for x in a.items() for y in b.items()):
            m = tuple(sorted(ma + mb, key=repr))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}
