"""Input mutations written by the regions that compute them.

AOTAutograd compiles a graph that mutates its inputs (an optimizer step updates every
parameter and its state; a static KV cache is written in place) as a functional graph
whose new values are copied into the inputs: by its runtime wrapper after the compiled
graph (a torch `copy_` call per tensor), or, with `keep_inference_input_mutations` (the
backend's inference graphs), by `aten.copy_(input, value)` nodes at the graph's end.

Where a region computes the value and the input is one of the region's own inputs that
nothing else in the graph reads, the region writes the value into the input
(`JitFunction.into`): on the GPU's hot path its kernels write it there in place when
their accesses allow (`mlirfuse.lowering.gpu.in_place`), else the region copies it there,
and the `copy_` node goes. Any other `copy_` stays a torch call.
"""

from __future__ import annotations

import torch
from torch import fx

from mlirfuse.torch_backend.partition import Partition
from mlirfuse.torch_backend.region import Region

aten = torch.ops.aten


def write_mutations_in_regions(graph: fx.Graph, partition: Partition, regions: list[Region]) -> None:
    """Give each `copy_(input, value)` whose value a region computes to that region (its
    `into`), and remove the node."""
    producer = {out: r for r in regions for out in r.outputs}
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.copy_.default or len(node.args) != 2 or node.kwargs:
            continue
        dest, value = node.args
        region = producer.get(value) if isinstance(value, fx.Node) else None
        if region is None or not isinstance(dest, fx.Node) or dest.op != "placeholder" or dest not in region.inputs:
            continue
        members = set(region.nodes)
        if any(u is not node and u not in members for u in dest.users) or not _same_layout(dest, value):
            continue
        j, k = region.inputs.index(dest), region.outputs.index(value)
        result = region.output_index[k]
        if result < 0 or region.output_layout[k] is not None or j in region.widened \
                or result in region.into or j in region.into.values():
            continue
        region.into[result] = j
        node.replace_all_uses_with(dest)
        graph.erase_node(node)
        partition.left.pop(node, None)


def _same_layout(dest: fx.Node, value: fx.Node) -> bool:
    """Same dtype and sizes, the input dense (the region writes contiguous results)."""
    d, v = dest.meta.get("val"), value.meta.get("val")
    if not isinstance(d, torch.Tensor) or not isinstance(v, torch.Tensor) or d.dtype != v.dtype or d.ndim != v.ndim:
        return False
    return all(str(a) == str(b) for a, b in zip(d.shape, v.shape)) and d.is_contiguous()
