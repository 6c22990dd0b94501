"""Where an element of a reshape is in its source: indices through a row-major view.

A reshape keeps the row-major order of the elements, so element `(i0, .., in)` of the result
is the source's element at the same row-major position. Linearizing over the whole shape and
splitting by every source size costs a division per dim per element, and a division by a size
read at run time hides from later analyses (`body_reads`) that a column index is the loop's
own. Dims are therefore matched in groups of equal products (`groups`): a group of one dim on
each side maps an index to itself, and only merged or split dims are recombined.

Sizes known only at run time are fixed where the other side is static (`fixed`): a reshape's
element counts are equal (the fusion op requires it; torch's view checked it), so with one
dynamic size against a static shape, that size is the quotient. BERT's position embeddings,
a [512, ?] gather viewed as [1, 512, 768], then read their columns at the loop's own index.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith

from mlirfuse.lowering.linalg_builders import index_const

Groups = list[tuple[list[int], list[int]]]


def fixed(old: list[int], new: list[int]) -> tuple[list[int], list[int]]:
    """`old` and `new` (sizes, negative where dynamic) with a lone dynamic size on one side
    filled in where the other side is all static and the quotient is whole; else unchanged."""
    def product(sizes: list[int]) -> int:
        p = 1
        for s in sizes:
            p *= s
        return p

    def fill(side: list[int], other: list[int]) -> list[int]:
        unknown = [d for d, s in enumerate(side) if s < 0]
        if len(unknown) != 1 or any(s < 0 for s in other):
            return side
        known = product([s for s in side if s >= 0])
        total = product(other)
        if known == 0 or total % known:
            return side
        return [total // known if d == unknown[0] else s for d, s in enumerate(side)]

    return fill(list(old), new), fill(list(new), old)


def groups(old: list[int], new: list[int]) -> Groups:
    """The reshape from `old` to `new` as groups of consecutive dims of equal products
    ([2, 3, 300] -> [6, 300]: ([0, 1], [0]) and ([2], [1])). Equal static dims at either end
    are groups of their own; what lies between them is split by static products, or is one
    group where a size there is dynamic (-1) or 0, so a row's dynamic extents never mix with the
    columns' static ones. Size-1 dims join a neighbouring group."""
    head: Groups = []
    tail: Groups = []
    i, j, m, n = 0, 0, len(old), len(new)
    while i < m - 1 and j < n - 1 and old[i] == new[j] >= 0:
        head.append(([i], [j]))
        i, j = i + 1, j + 1
    while m - 1 > i and n - 1 > j and old[m - 1] == new[n - 1] >= 0:
        tail.insert(0, ([m - 1], [n - 1]))
        m, n = m - 1, n - 1
    a, b = old[i:m], new[j:n]
    if any(s <= 0 for s in a + b) or not a or not b:
        return head + [(list(range(i, m)), list(range(j, n)))] + tail
    middle: Groups = []
    x = y = 0
    while x < len(a) and y < len(b):
        ga, gb = [i + x], [j + y]
        pa, pb = a[x], b[y]
        x, y = x + 1, y + 1
        while pa != pb:
            if pa < pb:
                pa, x = pa * a[x], x + 1
                ga.append(i + x - 1)
            else:
                pb, y = pb * b[y], y + 1
                gb.append(j + y - 1)
        middle.append((ga, gb))
    middle[-1][0].extend(range(i + x, m))  # trailing size-1 dims
    middle[-1][1].extend(range(j + y, n))
    return head + middle + tail


def source_indices(new_ivs: list[ir.Value], new_dim: Callable[[int], ir.Value], old_dim: Callable[[int], ir.Value],
                   old: list[int], new: list[int]) -> list[ir.Value]:
    """The indices in the source (sizes `old`, extent of dim d `old_dim(d)`) of the element at
    `new_ivs` of the reshape (sizes `new`, extents `new_dim(d)`): per group, the row-major
    position in the group split by the source's sizes, static where `fixed` knows them."""
    old_sizes, new_sizes = fixed(old, new)

    def extent(sizes: list[int], given: list[int], dim: Callable[[int], ir.Value], d: int) -> ir.Value:
        """A size `fixed` filled in as a constant; any other as the caller gives it."""
        return index_const(sizes[d]) if given[d] < 0 <= sizes[d] else dim(d)

    old_ivs: list[ir.Value | None] = [None] * len(old)
    for a, b in groups(old_sizes, new_sizes):
        if len(a) == 1 and len(b) == 1:
            old_ivs[a[0]] = new_ivs[b[0]]
            continue
        linear = new_ivs[b[0]] if b else index_const(0)
        for d in b[1:]:
            linear = arith.addi(arith.muli(linear, extent(new_sizes, new, new_dim, d)), new_ivs[d])
        for d in reversed(a[1:]):
            size = extent(old_sizes, old, old_dim, d)
            old_ivs[d] = arith.remui(linear, size)
            linear = arith.divui(linear, size)
        if a:
            old_ivs[a[0]] = linear
    return old_ivs
