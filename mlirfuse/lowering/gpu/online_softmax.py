"""The online max and sum of exponentials (Milakov & Gimelshein, "Online normalizer calculation
for softmax", 2018) in the normalization kernel's looping variant.

A softmax, log-softmax or cross-entropy forward reduces its row twice: M = max(x), then
S = sum(exp(x - M)). Held in registers, the second pass is free; in the looping variant (rows
too long to hold, or unaligned: a 30522- or 50257-wide vocabulary) each pass reads the row from
global memory again. `find_online_pairs` finds such a pair of consecutive reductions of one
chain, and the kernel reduces both in one pass: each thread keeps (m, s), the largest element so
far and the sum of exp(x - m), and scales s by exp(m - m') when m grows to m'; threads and warps
merge their pairs the same way. Only the exact pattern is taken: M's body is
`maximumf(out, x)`, S's is `out + exp(x - M)` (or `out + e`, a tile member computing
e = exp(x - M): softmax's numerator) reading the same tile `x` and M's result (or a row copy
of it), so the pass computes what the two did, up to rounding (exp(x - m) exp(m - M)
against exp(x - M)). Rows of -inf only give NaN, as the two passes do (exp(-inf - -inf)).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, math

from mlirfuse.lowering.gpu import normalization_kernel as K  # (a cycle: used at call time only)

if TYPE_CHECKING:
    from mlirfuse.lowering.gpu.normalization import Chain, Member

FLOATS = ("f32", "f64")
# Elements a thread takes at a time (in flight, and under one rescale of its sum): a chunk of
# this many, in vectors of the kernel's width.
ONLINE_ELEMENTS = 8


@dataclass
class OnlinePair:
    """A max reduction and the sum of exponentials after it, reduced in one pass."""

    max_member: Member
    sum_member: Member
    x: ir.Value  # the max's block argument reading the tile both reduce
    widened: bool  # whose elements both reduce widened to the output's type (bf16 logits)


def find_online_pairs(chain: Chain) -> dict[int, OnlinePair]:
    """id(max member) -> its pair, for each max reduction followed (as the chain's next
    reduction) by the sum of exp(x - max) over the same tile."""
    pairs: dict[int, OnlinePair] = {}
    reductions = chain.reductions
    for m, s in itertools.pairwise(reductions):
        read = _max_of(m)
        if read is not None and _sums_exp_below(s, m, read, chain):
            pairs[id(m)] = OnlinePair(m, s, read[0], read[2])
    return pairs


def chunk_step(m: ir.Value, s: ir.Value, xs: list[tuple[ir.Value, ir.Value]]) -> list[ir.Value]:
    """(m, s) after the elements x of `xs` that are valid: m' = max(m, max x),
    s' = s exp(m - m') + sum exp(x - m'), one exp an element and one for the rescale."""
    lowest = arith.constant(m.type, float("-inf"))
    seen = [arith.select(valid, x, lowest) for x, valid in xs]
    grown = m
    for x in seen:
        grown = arith.maximumf(grown, x)
    zero = arith.constant(s.type, 0.0)
    total = arith.mulf(s, _scale(m, grown))
    for x, (_, valid) in zip(seen, xs):
        total = arith.addf(total, arith.select(valid, _scale(x, grown), zero))
    return [grown, total]


def merge(mine: list[ir.Value], theirs: list[ir.Value]) -> list[ir.Value]:
    """Two threads' (m, s) as one: both sums scaled to the larger maximum."""
    (m1, s1), (m2, s2) = mine, theirs
    m = arith.maximumf(m1, m2)
    return [m, arith.addf(arith.mulf(s1, _scale(m1, m)), arith.mulf(s2, _scale(m2, m)))]


def total(m: ir.Value, s: ir.Value, final_max: ir.Value, row_len: ir.Value) -> ir.Value:
    """The sum of exp(x - final_max) (final_max: the max reduction's result, its initial
    value combined in); NaN for a non-empty row of -inf, as exp(-inf - -inf) made it."""
    t = s.type
    scaled = arith.mulf(s, _scale(m, final_max))
    nonempty = arith.cmpi(arith.CmpIPredicate.ugt, row_len, arith.constant(row_len.type, 0))
    all_inf = arith.andi(nonempty, arith.cmpf(arith.CmpFPredicate.OEQ, final_max,
                                               arith.constant(t, float("-inf"))))
    return arith.select(all_inf, arith.constant(t, float("nan")), scaled)


def _scale(a: ir.Value, m: ir.Value) -> ir.Value:
    """exp(a - m) for a <= m, with exp(-inf - -inf) taken as 1 (a = m): no NaN from two
    infinities where nothing was seen yet; NaN stays NaN (a NaN m equals nothing)."""
    one = arith.constant(a.type, 1.0)
    return arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, a, m), one, math.exp(arith.subf(a, m)))


def _ops(member: Member) -> list[ir.Operation]:
    return [op.operation for op in member.generic.body.operations]


def _tile_read(member: Member, value: ir.Value) -> tuple[ir.Value, ir.Value, bool] | None:
    """(block argument, buffer, widened) where `value` is a tile input's element, or its
    `arith.extf` (bf16 logits reduced in float32)."""
    widened = False
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.name == "arith.extf":
        value, widened = owner.operands[0], True
    tile = next((o for o in member.generic.inputs if o.is_memref and o.arg == value), None)
    if tile is None or member.roles.get(id(tile)) != K.TILE:
        return None
    return tile.arg, tile.value, widened


def _names(ops: list[ir.Operation], *expected: str) -> bool:
    """The ops are `expected`, after an optional `arith.extf`."""
    names = [op.name for op in ops]
    return names == list(expected) or names == ["arith.extf", *expected]


def _max_of(m: Member) -> tuple[ir.Value, ir.Value, bool] | None:
    """(block argument, buffer, widened) of the tile a reduction takes the max of: a body of
    just `yield maximumf(out, x)` (x perhaps widened) over one tile input, one float32 or
    float64 output."""
    g = m.generic
    ops = _ops(m)
    if len(g.outputs) != 1 or str(g.outputs[0].type.element_type) not in FLOATS or len(g.inputs) != 1 \
            or not _names(ops, "arith.maximumf", "linalg.yield"):
        return None
    top, yielded = ops[-2:]
    out = g.outputs[0].arg
    if yielded.operands[0] != top.results[0] or out not in list(top.operands):
        return None
    return _tile_read(m, next(v for v in top.operands if v != out))


def _sums_exp_below(s: Member, m: Member, read: tuple[ir.Value, ir.Value, bool], chain: Chain) -> bool:
    """`s` sums exp(x - r) over the tile `m` takes the max of (`read`), r being m's result (or
    a row op's copy of it): in its body, or as the sum of a tile member's exp(x - r)
    (softmax's numerator); its output of m's type."""
    g = s.generic
    if len(g.outputs) != 1 or g.outputs[0].type.element_type != m.generic.outputs[0].type.element_type \
            or s.combiners[0].name != "arith.addf":
        return False
    ops = _ops(s)
    if len(ops) < 2:
        return False
    add, yielded = ops[-2:]
    out = g.outputs[0].arg
    if add.name != "arith.addf" or yielded.operands[0] != add.results[0] or out not in list(add.operands):
        return False
    term = next(v for v in add.operands if v != out)
    if _names(ops, "arith.subf", "math.exp", "arith.addf", "linalg.yield"):  # out + exp(x - r)
        return _exp_of_shifted(s, term, m, read, chain)
    summed = next((o for o in g.inputs if o.is_memref and o.arg == term and s.roles.get(id(o)) == K.TILE), None)
    if len(ops) != 2 or summed is None:
        return False
    producer = next((p for p in chain.members if p.kind == K.TILE and len(p.generic.outputs) == 1
                     and p.generic.outputs[0].value == summed.value), None)
    if producer is None:
        return False
    body = _ops(producer)
    return _names(body, "arith.subf", "math.exp", "linalg.yield") and \
        _exp_of_shifted(producer, body[-1].operands[0], m, read, chain)


def _exp_of_shifted(member: Member, value: ir.Value, m: Member, read: tuple[ir.Value, ir.Value, bool],
                    chain: Chain) -> bool:
    """`value` is exp(x - r) in the member's body: x the tile `read` reads (widened alike), r
    m's result."""
    exp = value.owner
    if isinstance(exp, ir.Block) or exp.name != "math.exp":
        return False
    sub = exp.operands[0].owner
    if isinstance(sub, ir.Block) or sub.name != "arith.subf":
        return False
    x = _tile_read(member, sub.operands[0])
    by_arg = {o.arg: o for o in member.generic.inputs if o.is_memref}
    r = by_arg.get(sub.operands[1])
    return (x is not None and x[1:] == read[1:] and r is not None and member.roles.get(id(r)) == K.ROW
            and _is_result_of(r.value, m, chain))


def _is_result_of(row: ir.Value, m: Member, chain: Chain) -> bool:
    """The row buffer holds m's result: m's output, or a row op's plain copy of it."""
    result = m.generic.outputs[0].value
    if row == result:
        return True
    for member in chain.members:
        g = member.generic
        if member.kind == K.ROW and any(o.value == row for o in g.outputs):
            ops = _ops(member)
            sources = [o for o in g.inputs if o.is_memref]
            return (len(g.outputs) == 1 and len(sources) == 1 and sources[0].value == result
                    and [op.name for op in ops] == ["linalg.yield"] and ops[0].operands[0] == sources[0].arg)
    return False
