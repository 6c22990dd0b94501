"""An addmm whose bias the region after it can add: the product alone, then the add in that
region (Inductor's `unfuse_bias_add_to_pointwise`).

cuBLAS adds an addmm's bias in the product's epilogue, and in float32 that epilogue costs:
on the H200, BERT's MLP down projection ([4096, 3072] x [3072, 768], float32) took 497 us as
an addmm and 408 us as an mm, its attention output projection ([4096, 768] x [768, 768])
129 us against 118 us. The region that reads the product (dropout, the residual add,
LayerNorm) adds the bias for nothing, and where the product is only viewed and transposed
for attention's batched products, the add makes that copy a region instead of a lone torch
copy.

`unfuse_addmms` rewrites, before partitioning, each `addmm(bias, x, w)` (beta and alpha 1)
into `add(mm(x, w), bias)` where every user of the result (through views) is an op mlirfuse
fuses or a copy (BERT's value heads, copied contiguous for attention's batched product: torch's
strided copy kernel otherwise), not one left to torch (another product would leave the add a
kernel of its own).
Half precision keeps its addmm: there the epilogue adds the bias to the float32
accumulator, and an mm would round the product to bf16/fp16 before the add (Inductor keeps
those too, `keep_addmm_fused_for_half_dtypes`). The `unfuse_addmm` knob: "auto" rewrites
CUDA products only (the epilogue's cost is cuBLAS's), "always" any device, "off" none.
"""

from __future__ import annotations

import torch
from torch import fx

from mlirfuse import config
from mlirfuse.torch_backend import aten_table as A
from mlirfuse.torch_backend.graph_edit import new_node
from mlirfuse.torch_backend.pad_matmul import HALF
from mlirfuse.torch_backend.partition import kind, support

aten = torch.ops.aten


def unfuse_addmms(gm: fx.GraphModule) -> int:
    """Rewrite the addmms of `gm` that `_wanted` takes; returns how many."""
    mode = config.options().unfuse_addmm
    if mode == "off":
        return 0
    count = 0
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten.addmm.default and _wanted(node, mode):
            bias, x, w = node.args[:3]
            with gm.graph.inserting_before(node):
                product = new_node(gm.graph, aten.mm.default, (x, w))
                out = new_node(gm.graph, aten.add.Tensor, (product, bias))
            node.replace_all_uses_with(out)
            gm.graph.erase_node(node)
            count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def _wanted(node: fx.Node, mode: str) -> bool:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype in HALF or not val.dtype.is_floating_point:
        return False
    if mode == "auto" and val.device.type != "cuda":
        return False
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1 or len(node.args) > 3:
        return False
    if not all(isinstance(a, fx.Node) and isinstance(a.meta.get("val"), torch.Tensor) for a in node.args[:3]):
        return False
    return bool(node.users) and all(_fused_use(u) for u in node.users)


def _fused_use(node: fx.Node) -> bool:
    """mlirfuse computes `node` in a region: a compute op it supports, a copy (torch's kernel
    otherwise, so the add and it are a region: `partition` counts a copy beside a compute op),
    or a view whose users all are."""
    if node.op != "call_function" or support(node)[0] is not None:
        return False
    if node.target in A.COPIES:  # a kernel in torch too (the value heads' copy): one region with the add
        return True
    if kind(node) == A.VIEW:
        return bool(node.users) and all(_fused_use(u) for u in node.users)
    return kind(node) in (A.COMPUTE, A.RANDOM)
