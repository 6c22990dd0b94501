"""Online sums in the normalization kernel's looping variant: a reduction summing exp(u - r),
r a row value the chain computes before it (softmax's sum after its maximum), accumulated in
the pass of the reduction before it instead of a pass of its own.

Each thread sums exp(u - m) against its running maximum m of u, rescaling its sum by
exp(m_old - m_new) as m grows (once a chunk); the row's threads then agree on the maximum M
and rescale their sums to it; where the chain reaches the reduction, its total is rescaled
by exp(M - r). The same sum up to rounding, one pass over the row fewer (Milakov and
Gimelshein, "Online normalizer calculation for softmax"). Numerically safe for any r: the
terms are computed against the maximum of u, whatever r is (a maximum, a mean, an input).
`normalization_kernel.NormalizationKernel.reduce_online` emits it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlir import ir

from mlirfuse.lowering.gpu.kernels import Operand
from mlirfuse.lowering.gpu.normalization_kernel import REDUCE, ROW, TILE

if TYPE_CHECKING:
    from mlirfuse.lowering.gpu.normalization import Chain, Member


@dataclass(frozen=True)
class OnlineSum:
    """A reduction summing exp(u - r), computed in its body or by the tile member before it
    whose output it sums (softmax's exp, also divided by the sum): the `source`."""

    member: Member
    source: Member  # the member whose body computes exp(u - r): `member` or a tile op
    rescaled: Operand  # the source's row input r is (or is computed from), read for r only
    exponent: ir.Value  # u: an argument of the source's body or a result of one of its top-level ops
    # r where the body computes it from the row input (log_softmax's finite maximum,
    # where(isinf(m), 0, m)): its ops come after u's and serve r alone; None: r is the input
    subtracted: ir.Value | None = None

    def row_value(self, rescaled: ir.Value) -> ir.Value:
        """r, emitted from the row input's value `rescaled` (the ops computing it, copied)."""
        if self.subtracted is None:
            return rescaled
        body = self.source.generic.body
        mapping = {self.rescaled.arg: rescaled}
        needed = set(_slice(self.subtracted, body)[0])
        for k, op in enumerate(body.operations):
            if k in needed:
                new = op.operation.clone().operation
                for v in list(new.operands):
                    if v in mapping:
                        new.replace_uses_of_with(v, mapping[v])
                for old, value in zip(op.operation.results, new.results):
                    mapping[old] = value
        return mapping[self.subtracted]


def online_sums(chain: Chain) -> dict[int, OnlineSum]:
    """id(reduction) -> the online sum accumulated in its pass: the next reduction of the
    chain, where it sums exp(u - r) for a row input r and the source reads no other value
    that the members from this reduction on write (each reduction in one pair at most)."""
    found: dict[int, OnlineSum] = {}
    reductions = [k for k, m in enumerate(chain.members) if m.kind == REDUCE]
    partners: set[int] = set()
    for i, j in itertools.pairwise(reductions):
        first, online = chain.members[i], _online_sum(chain.members[i:j + 1])
        if online is None or id(first) in partners:
            continue
        before = chain.members[i:chain.members.index(online.source)]
        written = {o.value for m in before for o in m.generic.outputs}
        if any(o.is_memref and o is not online.rescaled and o.value in written for o in online.source.generic.inputs):
            continue
        found[id(first)] = online
        partners.add(id(online.member))
    return found


def _online_sum(members: list[Member]) -> OnlineSum | None:
    """The last member as an `OnlineSum`: one output, summed (arith.addf) from exp(u - r)
    with r the argument of a row input used by that subtraction alone, in its body or as the
    output of the tile member among `members` that last writes the input it reads."""
    m = members[-1]
    g = m.generic
    if len(g.outputs) != 1 or m.combiners[0].name != "arith.addf":
        return None
    out = g.outputs[0].arg
    term = [v for v in m.combiners[0].operands if v != out]
    if len(term) != 1:
        return None
    source, value = m, term[0]
    read = next((o for o in g.inputs if o.is_memref and o.arg == value and m.roles[id(o)] == TILE), None)
    if read is not None:  # exp(u - r) computed by the tile member writing this input last
        source = next((t for t in reversed(members[:-1])
                       if any(o.value == read.value for o in t.generic.outputs)), None)
        if source is None or source.kind != TILE:
            return None
        k = next(k for k, o in enumerate(source.generic.outputs) if o.value == read.value)
        body = source.generic.body
        value = body.operations[len(body.operations) - 1].operands[k]
    exp = _defined_by(value, "math.exp")
    sub = _defined_by(exp.operands[0], "arith.subf") if exp is not None else None
    if sub is None:
        return None
    u, r = sub.operands
    body = source.generic.body
    if u == r or len(list(r.uses)) != 1 or not _of_body(u, body):
        return None
    rows = [o for o in source.generic.inputs if o.is_memref and source.roles[id(o)] == ROW]
    rescaled = next((o for o in rows if o.arg == r), None)
    if rescaled is not None:
        return OnlineSum(m, source, rescaled, u)
    # r computed in the body from one row input (and constants) by ops that serve it alone,
    # after u's definition (the pass clones the body up to u, r not known yet)
    positions, args = _slice(r, body)
    if not positions or len(args) != 1:
        return None  # (none: r is itself an argument, and not a row value's; GPU fuzz seed 781432 crashed here)
    rescaled = next((o for o in rows if o.arg == args[0]), None)
    values = {v for k in positions for v in body.operations[k].results} | {args[0]}
    users_ok = all(_position(use.owner, body) in positions for v in values - {r} for use in v.uses)
    after_u = isinstance(u.owner, ir.Block) or min(positions) > _position(u.owner, body)
    if rescaled is None or not users_ok or not after_u:
        return None
    return OnlineSum(m, source, rescaled, u, subtracted=r)


def _position(op: ir.Operation, body: ir.Block) -> int | None:
    """The place of `op` among the body's top-level ops (None: not one of them)."""
    return next((k for k, top in enumerate(body.operations) if top.operation == op.operation), None)


def _slice(v: ir.Value, body: ir.Block) -> tuple[list[int] | None, list[ir.Value]]:
    """The top-level ops of `body` that `v` is computed by (their places; None where one has
    regions) and the body's arguments they read (values from outside the body are constants
    to it)."""
    positions: set[int] = set()
    args: list[ir.Value] = []
    todo = [v]
    while todo:
        v = todo.pop()
        owner = v.owner
        if isinstance(owner, ir.Block):
            if owner == body and v not in args:
                args.append(v)
            continue
        k = _position(owner, body)
        if k is None or k in positions:
            continue
        if len(owner.operation.regions):
            return None, args
        positions.add(k)
        todo.extend(owner.operation.operands)
    return sorted(positions), args


def _defined_by(v: ir.Value, name: str) -> ir.Operation | None:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != name:
        return None
    return owner.operation


def _of_body(v: ir.Value, body: ir.Block) -> bool:
    """v is an argument of the body or a result of one of its top-level ops (not a value
    captured from outside, which `clone_body(until=...)` would never reach)."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return owner == body
    return any(op.operation == owner.operation for op in body.operations)
