"""Vector-Jacobian products of the ops whose rule is more than a line (the op table's `vjp`).

A rule is `vjp(ops, g, y, *xs, **attrs)`: `ops` the ops module (mlirfuse.frontend.ops, passed in
so that the op table need not import the frontend), `g` the cotangent of the result (a tuple,
entries None where absent, for ops of several results), `y` the result (likewise), `xs` the
operands and `attrs` the op's attributes. It returns one gradient per operand, None where the
operand gets none. Every value is a traced tensor of the backward fusion, so a rule is written
with fusion ops and fuses like any other code. Formulas follow torch's derivatives.yaml, so
that gradients match torch.autograd's, ties and zeros included.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from mlirfuse.frontend.symbolic import ConcreteSizeNeeded, product

LN2 = math.log(2.0)
LN10 = math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# -- helpers ------------------------------------------------------------------------------
def keep_dims(ops: Any, t: Any, axes: Sequence[int], keepdim: bool) -> Any:
    """A reduction's result (or its cotangent) with the reduced axes kept as size 1."""
    if keepdim:
        return t
    for a in sorted(axes):
        t = ops.unsqueeze(t, a)
    return t


def expand_back(ops: Any, t: Any, x: Any, axes: Sequence[int], keepdim: bool) -> Any:
    """A reduction's cotangent broadcast back over the reduced axes of its operand x."""
    return ops.expand(keep_dims(ops, t, axes, keepdim), list(x.shape))


def sum_to(ops: Any, t: Any, shape: Sequence[Any]) -> Any:
    """t summed down to `shape` by numpy broadcasting's rules (leading dims, size-1 dims)."""
    lead = t.ndim - len(shape)
    axes = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and t.shape[lead + i] != 1]
    if axes:
        t = ops.sum(t, axes, keepdim=True)
    return ops.reshape(t, list(shape)) if lead else t


def count(x: Any, axes: Sequence[int], what: str) -> int:
    """How many elements a reduction over `axes` of x combines (a static number)."""
    n = 1
    for a in axes:
        size = x.fusion.canonical(x.shape[a])
        if not isinstance(size, int):
            raise ConcreteSizeNeeded(f"the gradient of {what} over the dynamic size {size} divides by it; "
                                     "it needs concrete sizes")
        n *= size
    return n


def _axes(x: Any, axes: Sequence[int]) -> list[int]:
    return list(axes) if x.ndim else []


def zero(ops, g, y, x):
    """Piecewise constant ops (floor, ceil, round, trunc, sign): torch's zero gradient. Their
    results require grad as torch's do; zeros, not g * 0, which an infinite g makes NaN."""
    return (ops.full(list(x.shape), 0, x.dtype),)


# -- reductions ---------------------------------------------------------------------------
def sum_(ops, g, y, x, axes, keepdim):
    return (expand_back(ops, g, x, _axes(x, axes), keepdim),)


def mean(ops, g, y, x, axes, keepdim):
    axes = _axes(x, axes)
    return (ops.div(expand_back(ops, g, x, axes, keepdim), count(x, axes, "mean")),)


def prod(ops, g, y, x, axes, keepdim):
    """torch's prod_backward: y / x where the whole tensor holds no zero; otherwise each
    element's product of the others along the axes (prod_safe_zeros_backward), and, for a
    whole-tensor prod with two zeros or more, zeros. The product of the others is counted,
    not divided: the other elements' regular product (finite, nonzero), times 0 if a zero is
    among them, times a signed inf if infs are, NaN if a NaN is (or a zero and an inf)."""
    axes = _axes(x, axes)
    yk, gk = keep_dims(ops, y, axes, keepdim), keep_dims(ops, g, axes, keepdim)
    zero, nan, inf = ops.eq(x, 0), ops.isnan(x), ops.isinf(x)
    regular = ops.logical_not(ops.logical_or(zero, ops.logical_or(nan, inf)))

    def others(mask):  # per element: how many of the others along the axes the mask holds
        m = ops.cast(mask, x.dtype)
        return ops.sub(ops.sum(m, axes, keepdim=True), m)

    plain = ops.prod(ops.where(regular, x, 1), axes, keepdim=True)
    product = ops.where(regular, ops.div(plain, x), plain)
    product = ops.mul(product, ops.where(ops.gt(others(zero), 0), 0, 1))
    negative_infs = others(ops.logical_and(inf, ops.lt(x, 0)))
    infs = ops.where(ops.eq(ops.remainder(negative_infs, 2), 1), -math.inf, math.inf)
    product = ops.mul(product, ops.where(ops.gt(others(inf), 0), infs, 1))
    product = ops.where(ops.gt(others(nan), 0), math.nan, product)
    zeros = ops.sum(ops.cast(zero, x.dtype), list(range(len(x.shape))), keepdim=True)
    local = ops.where(ops.gt(zeros, 0), product, ops.div(yk, x))
    if len(axes) == len(x.shape):
        local = ops.where(ops.gt(zeros, 1), 0, local)
    return (ops.mul(local, gk),)


def extreme(ops, g, y, x, axes, keepdim):
    """amax/amin: the cotangent shared evenly among the elements equal to the result. Over the
    whole tensor (torch's max()/min(), evenly_distribute_backward) a NaN result is shared among
    the NaNs; along dims a NaN result's share is NaN (0 of 0 elements), as torch's amax/amin."""
    axes = _axes(x, axes)
    kept = keep_dims(ops, y, axes, keepdim)
    hit = ops.eq(x, kept)
    if len(axes) == len(x.shape) and x.dtype.is_float:
        hit = ops.logical_or(hit, ops.logical_and(ops.isnan(x), ops.isnan(kept)))
    hit = ops.cast(hit, x.dtype)
    share = ops.div(keep_dims(ops, g, axes, keepdim), ops.sum(hit, axes, keepdim=True))
    return (ops.mul(hit, share),)


def _var_part(ops, g, x, m, axes, keepdim, correction):
    dof = count(x, axes, "var") - correction  # 0: an infinite scale, NaN gradients, as torch's
    scale = 2.0 / dof if dof else math.inf
    return ops.mul(ops.mul(keep_dims(ops, g, axes, keepdim), scale), ops.sub(x, m))


def var(ops, g, y, x, axes, keepdim, correction):
    axes = _axes(x, axes)
    return (_var_part(ops, g, x, ops.mean(x, axes, keepdim=True), axes, keepdim, correction),)


def var_mean(ops, g, y, x, axes, keepdim, correction):
    axes = _axes(x, axes)
    g_var, g_mean = g
    parts = []
    if g_var is not None:
        parts.append(_var_part(ops, g_var, x, keep_dims(ops, y[1], axes, keepdim), axes, keepdim, correction))
    if g_mean is not None:
        parts.append(ops.div(expand_back(ops, g_mean, x, axes, keepdim), count(x, axes, "mean")))
    return (parts[0] if len(parts) == 1 else ops.add(*parts),)


# -- shapes -------------------------------------------------------------------------------
def broadcast_in_dim(ops, g, y, x, broadcast_dims, **_):
    """Summed over the dims the broadcast added and the size-1 dims it stretched."""
    bdims = list(broadcast_dims)
    added = [d for d in range(y.ndim) if d not in bdims]
    stretched = [d for i, d in enumerate(bdims) if x.shape[i] == 1 and y.shape[d] != 1]
    if added or stretched:
        g = ops.sum(g, sorted(added + stretched), keepdim=True)
    return (ops.squeeze(g, added) if added else g,)


def expand(ops, g, y, x, **_):
    stretched = [d for d in range(x.ndim) if x.shape[d] == 1 and y.shape[d] != 1]
    return (ops.sum(g, stretched, keepdim=True) if stretched else g,)


def reshape(ops, g, y, x, **_):
    return (ops.reshape(g, list(x.shape)),)


def permute(ops, g, y, x, dims):
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return (ops.permute(g, inverse),)


def squeeze(ops, g, y, x, dims):
    return (ops.reshape(g, list(x.shape)),)


def unsqueeze(ops, g, y, x, dim):
    return (ops.squeeze(g, [dim]),)


def cast(ops, g, y, x):
    return (ops.cast(g, x.dtype) if x.dtype.is_float else None,)


# -- indexing -----------------------------------------------------------------------------
def _pad(ops, t, low, high, shape):
    """t padded with zeros (negative widths crop) to `shape`."""
    if all(lo == 0 for lo in low) and all(hi == 0 for hi in high):
        return t
    zero = ops.constant(0, t.dtype, t.fusion)
    return t.fusion.add_node("pad", [t, zero], {"low": list(low), "high": list(high)},
                             [(t.dtype, tuple(shape))])[0]


def _static_difference(a, b, what):
    try:
        d = a - b
    except TypeError:  # two unrelated symbolic sizes
        d = None
    if not isinstance(d, int):
        raise ConcreteSizeNeeded(f"the gradient of {what} needs concrete sizes")
    return d


def slice_(ops, g, y, x, starts, steps, **_):
    """Each element of g put back where the slice read it; zeros elsewhere."""
    f = x.fusion
    for d, step in enumerate(steps):
        if step != 1:  # interleave step - 1 zeros after each element along d
            n = g.shape[d]
            spread = _pad(ops, ops.unsqueeze(g, d + 1), [0] * (g.ndim + 1),
                          [0] * (d + 1) + [step - 1] + [0] * (g.ndim - d - 1),
                          g.shape[:d + 1] + (step,) + g.shape[d + 1:])
            g = ops.reshape(spread, list(g.shape[:d]) + [n * step] + list(g.shape[d + 1:]))
    high = [_static_difference(f.canonical(x.shape[d]), f.canonical(g.shape[d]) + starts[d], "slice")
            for d in range(x.ndim)]
    return (_pad(ops, g, starts, high, x.shape),)


def cat(ops, g, y, lhs, rhs, dim):
    f = g.fusion
    split = f.canonical(lhs.shape[dim])
    if not isinstance(split, int):
        raise ConcreteSizeNeeded("the gradient of cat splits at a dynamic size; it needs concrete sizes")
    zeros = [0] * g.ndim
    rhs_low = [0] * g.ndim
    rhs_low[dim] = -split
    lhs_high = [0] * g.ndim
    lhs_high[dim] = -_static_difference(f.canonical(y.shape[dim]), split, "cat")
    return _pad(ops, g, zeros, lhs_high, lhs.shape), _pad(ops, g, rhs_low, zeros, rhs.shape)


def pad(ops, g, y, x, value, low, high):
    inner = _pad(ops, g, [-w for w in low], [-w for w in high], x.shape)
    if not value.dtype.is_float:
        return inner, None
    outer = ops.sub(ops.sum(g), ops.sum(inner))
    return inner, ops.cast(outer, value.dtype)


def gather(ops, g, y, x, index, dim):
    """Scatter-add of g into x's shape: input[.., k, ..] gets the g[.., j, ..] whose index
    is k (a reduction over j of a comparison with an iota along k: no scatter op needed)."""
    shape = index.shape[:dim] + (x.shape[dim],) + index.shape[dim:]
    positions = ops._indexing._iota(shape, dim, 0, 1, index.dtype, g.fusion)
    hits = ops.eq(positions, ops.unsqueeze(index, dim))
    summed = ops.sum(ops.where(hits, ops.unsqueeze(g, dim), 0), [dim + 1])
    f = g.fusion
    high = [0 if d == dim else _static_difference(f.canonical(x.shape[d]), f.canonical(index.shape[d]), "gather")
            for d in range(x.ndim)]
    return _pad(ops, summed, [0] * x.ndim, high, x.shape), None


# -- library ops --------------------------------------------------------------------------
def _mT(ops, t):
    perm = list(range(t.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return ops.permute(t, perm)


def matmul(ops, g, y, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return ops.mul(g, b), ops.mul(g, a)
    a2 = ops.unsqueeze(a, 0) if a.ndim == 1 else a
    b2 = ops.unsqueeze(b, 1) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = ops.unsqueeze(g2, g2.ndim - (1 if b.ndim > 1 else 0))
    if b.ndim == 1:
        g2 = ops.unsqueeze(g2, g2.ndim)
    ga = sum_to(ops, ops.matmul(g2, _mT(ops, b2)), a2.shape)
    gb = sum_to(ops, ops.matmul(_mT(ops, a2), g2), b2.shape)
    return ops.reshape(ga, list(a.shape)), ops.reshape(gb, list(b.shape))


def linear(ops, g, y, x, w, b=None):
    if w.ndim == 1:
        gx = ops.mul(ops.unsqueeze(g, g.ndim), w)
        gw = sum_to(ops, ops.mul(x, ops.unsqueeze(g, g.ndim)), w.shape)
    else:
        gx = ops.matmul(g, w)
        rows = product(list(x.shape[:-1]))
        rows_g = ops.reshape(g, [rows, w.shape[0]]) if g.ndim != 2 else g
        rows_x = ops.reshape(x, [rows, w.shape[1]]) if x.ndim != 2 else x
        gw = ops.matmul(_mT(ops, rows_g), rows_x)
    grads = (gx, gw)
    return grads + ((sum_to(ops, g, b.shape),) if b is not None else ())


def cumsum(ops, g, y, x, dim, reverse):
    """torch: the gradient of an inclusive sum is the inclusive sum of g the other way."""
    return (ops.cumsum_library(g, dim, reverse=not reverse),)


def cumprod(ops, g, y, x, dim):
    return (ops.scan_grad_library("cumprod_grad", g, x, y, dim),)


def cummax(ops, g, y, x, dim):
    return (ops.scan_grad_library("cummaxmin_grad", g, x, y, dim, max=True),)


def cummin(ops, g, y, x, dim):
    return (ops.scan_grad_library("cummaxmin_grad", g, x, y, dim, max=False),)


def scan_gradient(ops, g, y, *xs, **attrs):
    """The library scans' gradients have no derivative here: a second derivative through
    one raises (a zero would be a silent wrong answer)."""
    from mlirfuse.errors import FusionError

    raise FusionError("no second derivative through a library scan's gradient (cumprod_grad, cummaxmin_grad)")


# -- elementwise rules longer than a line -------------------------------------------------
def trunc(ops, t):
    """Rounding toward zero (torch's rounding_mode='trunc')."""
    return ops.where(ops.lt(t, 0), ops.ceil(t), ops.floor(t))


def silu(ops, g, y, x):
    s = ops.sigmoid(x)
    return (ops.mul(g, ops.mul(s, ops.add(ops.mul(x, ops.sub(1, s)), 1))),)


def pow_(ops, g, y, a, b):
    """torch's pow_backward_self / pow_backward_exponent: no gradient where the exponent is 0
    (for the base) or the base is 0 with a non-negative exponent (for the exponent)."""
    ga = ops.where(ops.eq(b, 0), 0, ops.mul(g, ops.mul(b, ops.pow(a, ops.sub(b, 1)))))
    gb = ops.where(ops.logical_and(ops.eq(a, 0), ops.ge(b, 0)), 0, ops.mul(g, ops.mul(y, ops.log(a))))
    return ga, gb


def extreme_of_two(sign: int):
    """maximum (sign +1) / minimum (-1): the cotangent to the larger (smaller) operand, half to
    each on ties (torch's max/min of two tensors)."""
    def vjp(ops, g, y, a, b):
        half = ops.where(ops.eq(a, b), ops.mul(g, 0.5), g)
        a_wins, b_wins = (ops.gt(a, b), ops.lt(a, b)) if sign > 0 else (ops.lt(a, b), ops.gt(a, b))
        return ops.where(b_wins, 0, half), ops.where(a_wins, 0, half)
    return vjp


def atan2(ops, g, y, a, b):
    """torch's atan2_backward: at the origin (a reciprocal of 0) the gradients are 0."""
    norm = ops.add(ops.mul(a, a), ops.mul(b, b))
    scale = ops.where(ops.eq(norm, 0), 0, ops.div(g, norm))
    return ops.mul(scale, b), ops.mul(ops.neg(scale), a)


def clamp(ops, g, y, x, lo, hi):
    """torch's clamp_backward and clamp_backward_min_max (when lo > hi the result is hi)."""
    inside = ops.logical_and(ops.ge(x, lo), ops.le(x, hi))
    below = ops.logical_and(ops.lt(x, lo), ops.lt(lo, hi))
    above = ops.logical_or(ops.gt(x, hi), ops.lt(hi, lo))
    return ops.where(inside, g, 0), ops.where(below, g, 0), ops.where(above, g, 0)
