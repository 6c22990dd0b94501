"""Helpers for the rewrites of aten graphs done before partitioning (pad_matmul.py,
embedding_grad.py): new nodes carry the fake values the partitioner reads."""

from __future__ import annotations

from typing import Any

from torch import fx


def new_node(graph: fx.Graph, target: Any, args: tuple, kwargs: dict | None = None) -> fx.Node:
    """A new node calling `target`, with its fake value computed from its arguments'."""
    from torch._guards import detect_fake_mode

    node = graph.call_function(target, args, kwargs or {})
    values = fx.node.map_arg(args, lambda a: a.meta["val"])  # nested lists too (cat's tensors)
    # The inputs' fake mode; for a node of none (a scalar_tensor), the graph's inputs'.
    mode = detect_fake_mode([a.meta.get("val") for a in node.all_input_nodes or graph.find_nodes(op="placeholder")])
    if mode is None:
        node.meta["val"] = target(*values, **(kwargs or {}))
    else:
        with mode:
            node.meta["val"] = target(*values, **(kwargs or {}))
    return node
