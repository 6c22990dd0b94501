"""Half-precision matmuls whose sizes are not multiples of 8, padded to them (Inductor's pad_mm).

cuBLAS's tensor-core kernels want 16-byte aligned rows: a bf16/fp16 matmul with a leading
dimension that is not a multiple of 8 elements takes a slow path. GPT-2's vocabulary (50257)
makes its output projection one: on the H100 at 4096 x 768 x 50257 bf16 it ran 3.3 ms
(`cutlass_75 ... align1`) where the padded one runs 0.44 ms, most of a bf16 inference step.
Float32 matmuls are not padded ("auto"): cuBLAS's float32 products (TF32 off, torch's default)
run as fast misaligned (`bench/matmul_padding.py`'s products, H200, session 92: GPT-2's three output
projection products 18.31 ms at 50257, 18.31 at 50260, 18.57 at 50264; BERT's 11.17 ms at
30522, 11.11 at 30528), and bf16 needs multiples of 8, not 4 (GPT-2's 7.90 ms at 50257,
3.77 at 50260, 1.27 at 50264).

`pad_matmuls` rewrites, before partitioning, each `mm`/`addmm`/`bmm` whose M, K or N is
misaligned into the same op on operands zero-padded to multiples of 8 (`constant_pad_nd`,
a fusible op: the padding joins the group that produces the operand, or is one small kernel)
followed by slices back to the true sizes (views). Zero rows and columns of K add nothing, so
the result is the unpadded one exactly. An operand that is a transpose is padded before it (the
padded tensor keeps the layout the matmul read), and a tensor padded alike for two matmuls
(the logits' gradient, in both of the output projection's weight and input gradients) is
padded once. The nodes the rewrite leaves unread (such a transpose of the unpadded tensor)
are removed, so that no region writes the unpadded tensor for them; a computed value padded
along its rows only is read by its other users as the padded tensor's leading rows (`_pad`),
so that no region writes both. A view of the product
that the slice does not give (flattening it: its rows are the padded ones) becomes a reshape.

Where only N of an `mm` is misaligned and the operand it pads is a graph input (a weight,
through its transpose: the output projection of a bf16 inference graph, whose weight no cast
or other region writes anyway), padding would copy that weight at every call (77 MB for
GPT-2's in bf16: 40 us, against 448 for the product, on the H200). `matmul_into_padded_width` computes the same
padded product without it: the aligned columns in one product into the leading columns of a
product buffer of padded rows (N and the rows' pitch multiples of 8: cuBLAS's aligned
kernels), the last N % 8 in a second, small one. The padding columns are left unwritten:
readers take the slice, never those columns.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx

from mlirfuse import config
from mlirfuse.torch_backend.graph_edit import new_node

aten = torch.ops.aten

ALIGN = 8  # elements of 2 bytes: 16-byte rows
HALF = (torch.float16, torch.bfloat16)
MIN_WORK = 1 << 30  # M*N*K (times the batch) below which the copies cost more than they save
MATMULS = (aten.mm.default, aten.addmm.default, aten.bmm.default)
TRANSPOSES = (aten.t.default, aten.permute.default, aten.transpose.int)
VIEWS = (aten.view.default, aten._unsafe_view.default)


def pad_matmuls(gm: fx.GraphModule) -> int:
    """Pad the matmuls of `gm` that need it (mlirfuse's `pad_matmuls` knob: "auto" pads CUDA
    half-precision matmuls of at least MIN_WORK, "always" every misaligned one, "off" none).
    Returns how many were rewritten."""
    mode = config.options().pad_matmuls
    if mode == "off":
        return 0
    padded: dict[tuple[fx.Node, tuple[int, ...]], fx.Node] = {}
    count = 0
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in MATMULS and _wanted(node, mode):
            _rewrite(gm.graph, node, padded)
            count += 1
    if count:
        # What the rewrites left unread (the transpose of an unpadded operand, now padded
        # before it) goes: its uses would keep the unpadded tensor a region output.
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
    return count


def _sizes(node: fx.Node) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of a matmul with static sizes, else None."""
    a, b = _operands(node)
    sa, sb = a.meta["val"].shape, b.meta["val"].shape
    sizes = (math.prod(sa[:-2]), sa[-2], sa[-1], sb[-1])
    return sizes if all(isinstance(s, int) for s in sizes) else None


def _operands(node: fx.Node) -> tuple[fx.Node, fx.Node]:
    return (node.args[1], node.args[2]) if node.target is aten.addmm.default else (node.args[0], node.args[1])


def _wanted(node: fx.Node, mode: str) -> bool:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not all(isinstance(a, fx.Node) and "val" in a.meta
                                                    for a in _operands(node)):
        return False
    sizes = _sizes(node)
    if sizes is None or all(s % ALIGN == 0 for s in sizes[1:]):
        return False
    if mode == "always":
        return True
    return val.device.type == "cuda" and val.dtype in HALF and math.prod(sizes) >= MIN_WORK


def matmul_into_padded_width(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a @ b` for b's N columns not a multiple of ALIGN, as the leading N columns of an
    [M, N rounded up to ALIGN] buffer, without copying b: the largest aligned part of N in one
    product, the rest in another. The buffer's last columns are not written."""
    n = b.shape[1]
    aligned = n - n % ALIGN
    out = a.new_empty((a.shape[0], aligned + ALIGN))
    with torch.no_grad():  # (in the compiled graph grad mode is off; also so for fake values)
        torch.mm(a, b[:, :aligned], out=out[:, :aligned])
        torch.mm(a, b[:, aligned:], out=out[:, aligned:n])
    return out


matmul_into_padded_width.library_call = True  # type: ignore[attr-defined]  # stays a torch call
matmul_into_padded_width.writes_into = lambda a, b: []  # type: ignore[attr-defined]  # a buffer of its own


def _input_weight(x: fx.Node) -> bool:
    """`x` is a graph input, or a transpose of one: padding it copies it at every call."""
    while _transpose_of(x) is not None:
        x = x.args[0]
    return x.op == "placeholder"


def _aligned_columns(b: fx.Node) -> bool:
    """b [K, N] is laid out by columns 16 bytes apart (a Linear's weight w [N, K] read as
    w.t()): any part of its columns is a matrix cuBLAS reads with an aligned leading dimension.
    Laid out by rows N apart, with N misaligned, no part of it is."""
    strides = b.meta["val"].stride()
    return strides[0] == 1 and strides[1] % ALIGN == 0


def _rewrite(graph: fx.Graph, node: fx.Node, padded: dict) -> None:
    _, m, k, n = _sizes(node)
    dm, dk, dn = (-m) % ALIGN, (-k) % ALIGN, (-n) % ALIGN
    a, b = _operands(node)
    # N alone misaligned, on a weight: the padded product without a padded copy of the weight.
    # Not for addmm: torch takes its bias into a strided output through a copy of the bias
    # broadcast to the output's size (BERT's decoder on the H200: 200 us against 41 for the
    # weight's pad).
    split = node.target is aten.mm.default and bool(dn) and not dk and _input_weight(b) and _aligned_columns(b)
    with graph.inserting_before(node):
        a2 = _padded(graph, a, {-2: dm, -1: dk}, padded)
        b2 = b if split else _padded(graph, b, {-2: dk, -1: dn}, padded)
        if split:
            out = new_node(graph, matmul_into_padded_width, (a2, b2))
        elif node.target is aten.addmm.default:
            bias = node.args[0]
            bias_pads = {d: p for d, p in ((-2, dm), (-1, dn))
                         if p and bias.meta["val"].dim() >= -d and bias.meta["val"].shape[d] != 1}
            args = (_padded(graph, bias, bias_pads, padded), a2, b2) + tuple(node.args[3:])
        else:
            args = (a2, b2) + tuple(node.args[2:])
        if not split:
            out = new_node(graph, node.target, args, node.kwargs)
        for dim, (size, pad) in ((-2, (m, dm)), (-1, (n, dn))):
            if pad:
                rank = out.meta["val"].dim()
                out = new_node(graph, aten.slice.Tensor, (out, rank + dim, 0, size))
    node.replace_all_uses_with(out)
    graph.erase_node(node)
    _reshape_views_it_does_not_give(out, out.meta["val"])


def _reshape_views_it_does_not_give(node: fx.Node, val: torch.Tensor) -> None:
    """The views of `node` (whose layout is `val`'s: a padded product's slice, rows wider than
    they are), and the views of those views, that the graph took of the dense product: one
    that the slice's layout does not give raised at run time (flattening the product, also a
    view later: [8, 2, 2] viewed as itself, then as [16, 2]; fuzz seed 900462), and reshapes
    (copies) instead."""
    for user in list(node.users):
        if user.target not in VIEWS:
            continue
        viewed = _view(val, user.args[1])
        if viewed is None:
            user.target = aten.reshape.default
        else:
            _reshape_views_it_does_not_give(user, viewed)


def _view(val: torch.Tensor, shape: Any) -> torch.Tensor | None:
    """`val`'s layout viewed as `shape` (a meta tensor), or None where it does not give that view."""
    try:
        return torch.empty_strided(tuple(val.shape), tuple(val.stride()), dtype=val.dtype, device="meta").view(shape)
    except (RuntimeError, TypeError, ValueError):  # (meta tensors raise ValueError)
        return None


def _padded(graph: fx.Graph, x: fx.Node, pads: dict[int, int], cache: dict) -> fx.Node:
    """`x` zero-padded at the end of the dims in `pads` (negative dims); through a transpose,
    its input padded (so that the result keeps `x`'s layout)."""
    rank = x.meta["val"].dim()
    after = tuple(pads.get(d - rank, 0) for d in range(rank))
    if not any(after):
        return x
    key = (x, after)
    if key not in cache:
        perm = _transpose_of(x)
        if perm is not None:
            source = x.args[0]
            inner = _padded(graph, source, {perm[d] - rank: p for d, p in enumerate(after) if p}, cache)
            cache[key] = new_node(graph, aten.permute.default, (inner, perm))
        else:
            widths = [w for p in reversed(after) for w in (0, p)]  # (before, after), last dim first
            while widths[-1] == 0:
                del widths[-2:]
            cache[key] = _pad(graph, x, widths, after)
    return cache[key]


def _pad(graph: fx.Graph, x: fx.Node, widths: list[int], after: tuple[int, ...]) -> fx.Node:
    """constant_pad_nd(x); where it pads only x's rows (dim 0) and x is a dense value the
    graph computes, x's other readers take the padded tensor's leading rows instead (a view
    with x's layout), so that the region computing x writes one buffer, not x and its padded
    copy: GPT-2's bf16 weight cast (its output projection's, tied to the embeddings), padded
    from 50257 rows to 50264, was written twice (two 77 MB outputs, 110 us on the H200 with
    the f32 weight read twice)."""
    val = x.meta["val"]
    rows_only = after[0] and not any(after[1:])
    if not rows_only or x.op == "placeholder" or not val.is_contiguous():
        return new_node(graph, aten.constant_pad_nd.default, (x, widths, 0.0))
    with graph.inserting_after(x):
        padded = new_node(graph, aten.constant_pad_nd.default, (x, widths, 0.0))
    with graph.inserting_after(padded):
        leading = new_node(graph, aten.slice.Tensor, (padded, 0, 0, val.shape[0]))
    x.replace_all_uses_with(leading, delete_user_cb=lambda user: user is not padded)
    return padded


def _transpose_of(x: fx.Node) -> list[int] | None:
    """The permutation a transpose node applies (x = source.permute(perm)), else None."""
    if x.op != "call_function" or x.target not in TRANSPOSES or not isinstance(x.args[0], fx.Node):
        return None
    rank = x.meta["val"].dim()
    if x.target is aten.permute.default:
        return [d % rank for d in x.args[1]]
    perm = list(range(rank))
    d0, d1 = (0, rank - 1) if x.target is aten.t.default else (x.args[1] % rank, x.args[2] % rank)
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return perm
