"""Attention masks laid out for torch's fused attention kernels.

On the GPU, `scaled_dot_product_attention` runs a fused kernel (cuDNN, Flash or memory-
efficient attention) only where the mask's last dim has stride 1; otherwise it runs the math
path, which upcasts half-precision inputs to float32 and materializes the [batch, heads,
queries, keys] scores. HuggingFace's BERT under torch.compile passes a padding mask expanded
over the keys (sizes [8, 1, 512, 512], strides (0, 512, 1, 0)): its attention ran the math
path, in Inductor too, 656 us a layer on an H200 where cuDNN's kernel takes 59 (bfloat16; the
efficient kernel: 250 against 543 in float32).

`dense_attention_masks` gives such a mask the layout the fused kernels take before AOTAutograd
traces the graph: dims broadcast at stride 0 are narrowed to one element, the rest copied
densely (the padding mask above: [1, 1, 512, 512], 256 KB), then expanded back to the mask's
sizes. The values are the same; torch then picks the fused kernel, forward and backward.

Only for attention in bfloat16 or float16 (autocast's included). In float32 the fused kernels
(the memory-efficient one: cuDNN and Flash take half precision only) are no faster than the
math path's float32 matmuls: BERT's float32 training step on the H200 ran 1448 us of them a
step where the math path's matmuls and softmax took about 1390, and the mask's copy and the
result's `where` below cost 4 more kernels (47 us).

One thing differs between the paths: a query row that the mask hides entirely. The math path's
softmax (`_safe_softmax`) gives it zero weights, so its output row is 0 and it passes no
gradient; the fused kernels give it other values (cuDNN and the efficient kernel: finite, not
0). So the attention's result is taken only where its row keeps a key (`where(row kept,
result, 0)`, the rows from the dense mask), which is the math path's answer, gradients too.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
from torch import fx

# scaled_dot_product_attention as Dynamo records it (the torch function, or the aten op).
SDPA = (torch._C._nn.scaled_dot_product_attention, torch.ops.aten.scaled_dot_product_attention.default)
MASK_POSITION = 3


def dense_attention_masks(gm: fx.GraphModule) -> int:
    """Rewrite the masks of `gm`'s attention calls on the GPU whose last dim is not at stride 1;
    returns how many calls. A mask that several calls read (one for every layer) is copied once."""
    graph = gm.graph
    made: dict[fx.Node, tuple[fx.Node, fx.Node]] = {}  # mask -> (its dense rows, rows that keep a key)
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in SDPA:
            continue
        mask = node.kwargs.get("attn_mask", node.args[MASK_POSITION] if len(node.args) > MASK_POSITION else None)
        if not isinstance(mask, fx.Node) or not _needs_dense_rows(mask.meta.get("example_value")) \
                or not _half_precision(node.kwargs.get("query", node.args[0] if node.args else None)):
            continue
        if mask not in made:  # before the mask's first attention call, so before every other
            with graph.inserting_before(node):
                made[mask] = _dense_rows(graph, mask)
        dense, kept = made[mask]
        if "attn_mask" in node.kwargs:
            node.update_kwarg("attn_mask", dense)
        else:
            node.update_arg(MASK_POSITION, dense)
        with graph.inserting_after(node):
            result = graph.call_function(torch.where, (kept, node, 0.0))
        if "example_value" in node.meta:  # (the same tensor's metadata, for later rewrites)
            result.meta["example_value"] = node.meta["example_value"]
        node.replace_all_uses_with(result, delete_user_cb=lambda user: user is not result)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten


def _dense_rows(graph: fx.Graph, mask: fx.Node) -> tuple[fx.Node, fx.Node]:
    """The mask in dense rows, its stride-0 dims narrowed to one element and expanded back, and
    whether each query row keeps some key (a True, or a value above -inf), as new nodes."""
    val = mask.meta["example_value"]
    small = mask
    for d in range(val.dim() - 1):
        stride = val.stride(d)
        if type(stride) is int and stride == 0:  # (a dim of one element: narrowed to itself)
            small = graph.call_method("narrow", (small, d, 0, 1))
    small = graph.call_method("contiguous", (small,))
    dense = graph.call_method("expand_as", (small, mask))
    keeps = small if val.dtype == torch.bool else graph.call_function(operator.gt, (small, -math.inf))
    return dense, graph.call_method("any", (keeps, -1), {"keepdim": True})


def _half_precision(query: Any) -> bool:
    """The attention computes in bfloat16 or float16 (its query's dtype, autocast's included)."""
    val = query.meta.get("example_value") if isinstance(query, fx.Node) else None
    return isinstance(val, torch.Tensor) and val.dtype in (torch.bfloat16, torch.float16)


def _needs_dense_rows(val: Any) -> bool:
    """A CUDA mask whose last dim is not at stride 1 and with no dim of 0 elements. Sizes may be
    symbolic (dynamic shapes: Dynamo's symbolic sizes are at least 2, so are strides made of
    them); this reads them without a guard."""
    if not isinstance(val, torch.Tensor) or not val.is_cuda or val.dim() == 0:
        return False
    if any(type(n) is int and n == 0 for n in val.shape):
        return False
    last = val.stride(-1)
    return not (type(last) is int and last == 1)
