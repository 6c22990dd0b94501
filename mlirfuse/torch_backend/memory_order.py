"""Library calls moved down to their first use where that lowers the memory held, before
partitioning (a small part of what Inductor's `reorder_for_peak_memory` does).

AOTAutograd emits a backward in the autograd engine's order: a linear's weight gradient comes
with its input gradient, where the layer's backward runs. A weight tied to another use (GPT-2's
and BERT's output projection, tied to the token embedding) is summed with that use's gradient at
the end of the backward, so the product's result was held through all of it: GPT-2 float32,
[50257, 768], 147 MB held under every later peak; the H200's step peak 2111 MB against
Inductor's 1938 (session 78, torch.cuda.memory history of one step), which computes it late.

`sink_library_calls` moves each matmul-like call (`aten_table.LIBRARY`, one tensor result)
together with the views of its result to just before the first other use of the result, where
the graph's memory, simulated, then peaks no higher and holds fewer bytes summed over the
graph's steps. The simulation: each result's storage lives from the op that makes it to the last
use of any view of it; the graph's inputs live throughout, except a backward's saved activations,
which the boxed call frees after their last use (its incoming gradients are held by the autograd
engine for the whole call). Moving a call down lengthens its inputs' lives and, where they die
with it, can raise the peak at its new place: the simulation is what keeps those moves out.

Not moved across an op that writes into what it reads (a mutation's copy_, an in-place op,
the embedding gradient's in-place scatter-add; a Python function that does not say what it
writes stops it), which it would then read after the write. Random ops are not library calls,
so the order of their draws does not change. Fusible ops stay where they are: where a region
runs is the partition's business.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx

from mlirfuse.torch_backend.aten_table import LIBRARY


def sink_library_calls(gm: fx.GraphModule, kind: str = "forward") -> int:
    """Move the library calls of `gm` (a graph of `kind`: "forward", "backward" or "inference")
    down as described above; returns how many moved."""
    model = _Model.of(gm, kind)
    if model is None:
        return 0
    moved = 0
    peak, area = model.simulate(list(gm.graph.nodes))  # of the order as it stands
    for node in reversed(list(gm.graph.nodes)):
        if not _candidate(node):
            continue
        plan = _plan(list(gm.graph.nodes), node)
        if plan is None:
            continue
        new_order, first, moving = plan
        new_peak, new_area = model.simulate(new_order)
        if new_peak <= peak and new_area < area:
            for n in moving:
                first.prepend(n)
            peak, area = new_peak, new_area
            moved += 1
    if moved:
        gm.graph.lint()
        gm.recompile()
    return moved


def simulated_peak(gm: fx.GraphModule, kind: str = "forward") -> int | None:
    """The most bytes the simulation holds at once over the graph (None: sizes unknown)."""
    model = _Model.of(gm, kind)
    return None if model is None else model.simulate(list(gm.graph.nodes))[0]


def _candidate(node: fx.Node) -> bool:
    return (node.op == "call_function" and getattr(node.target, "overloadpacket", None) in LIBRARY
            and isinstance(node.meta.get("val"), torch.Tensor))


def _plan(order: list[fx.Node], node: fx.Node) -> tuple[list[fx.Node], fx.Node, list[fx.Node]] | None:
    """(the order with `node` and the views of its result moved before the first other use of
    them, that use, the nodes moved in order), or None where nothing would move or an op that
    writes is in the way."""
    pos = {n: i for i, n in enumerate(order)}
    group = _with_views(node)  # the result and the views of it, moved with it
    users = {u for v in group for u in v.users} - group
    if not users:
        return None
    first = min(users, key=pos.__getitem__)
    between = order[pos[node]:pos[first]]
    moving = [n for n in between if n in group]
    if len(moving) == len(between):
        return None
    read = {_root(a) for a in node.all_input_nodes}
    for n in between:
        written = _written(n)
        if written is None or written & read:
            return None
    staying = [n for n in between if n not in group]
    return order[:pos[node]] + staying + moving + order[pos[first]:], first, moving


class _Model:
    """The storages of a graph: per root (a node whose result is not a view) its bytes, and
    which graph inputs die with their last use (a backward's saved activations)."""

    def __init__(self, roots: dict[fx.Node, fx.Node], sizes: dict[fx.Node, int], freed: set[fx.Node]):
        self.roots, self.sizes, self.freed = roots, sizes, freed

    @classmethod
    def of(cls, gm: fx.GraphModule, kind: str) -> _Model | None:
        nodes = list(gm.graph.nodes)
        roots = {n: _root(n) for n in nodes}
        sizes = {n: _nbytes(n) for n in nodes if roots[n] is n}
        if any(size is None for size in sizes.values()):
            return None  # sizes without hints: no simulation
        freed = {n for n in nodes if n.op == "placeholder" and kind == "backward"
                 and not n.name.startswith("tangents")}
        return cls(roots, sizes, freed)  # type: ignore[arg-type]

    def simulate(self, order: list[fx.Node]) -> tuple[int, int]:
        """(peak, bytes summed over the steps) of the storages live at each step of `order`."""
        end = len(order) - 1
        pos = {n: i for i, n in enumerate(order)}
        death = {root: (pos[root] if root.op != "placeholder" or root in self.freed else end) for root in self.sizes}
        for n in order:
            for a in n.all_input_nodes:
                root = self.roots[a]
                if death[root] < pos[n]:
                    death[root] = pos[n]
        change = [0] * (len(order) + 1)
        for root, size in self.sizes.items():
            change[0 if root.op == "placeholder" else pos[root]] += size
            change[death[root] + 1] -= size
        held = peak = area = 0
        for step in change[:-1]:
            held += step
            peak = max(peak, held)
            area += held
        return peak, area


def _with_views(node: fx.Node) -> set[fx.Node]:
    group, todo = {node}, [node]
    while todo:
        for user in todo.pop().users:
            if _is_view(user) and user.args and user.args[0] in group and user not in group:
                group.add(user)
                todo.append(user)
    return group


def _root(node: fx.Node) -> fx.Node:
    """The node whose result's storage `node` reads (through views)."""
    while _is_view(node) and node.args and isinstance(node.args[0], fx.Node):
        node = node.args[0]
    return node


def _is_view(node: fx.Node) -> bool:
    schema = _schema(node)
    return schema is not None and bool(schema.returns) and schema.returns[0].alias_info is not None \
        and not schema.returns[0].alias_info.is_write


def _written(node: fx.Node) -> set[fx.Node] | None:
    """The storages (roots) the node writes into; None where that is not known (a Python
    function that does not say: assumed to write anything)."""
    if node.op != "call_function" or node.target is operator.getitem:
        return set()
    schema = _schema(node)
    if schema is not None:
        if not schema.is_mutable:
            return set()
        written = [a for a, arg in zip(node.args, schema.arguments) if arg.alias_info is not None
                   and arg.alias_info.is_write]
        written += [node.kwargs[arg.name] for arg in schema.arguments if arg.name in node.kwargs
                    and arg.alias_info is not None and arg.alias_info.is_write]
        return {_root(a) for a in written if isinstance(a, fx.Node)}
    writes = getattr(node.target, "writes_into", None)  # the backend's own calls say what they write
    if writes is not None:
        return {_root(a) for a in writes(*node.args, **node.kwargs) if isinstance(a, fx.Node)}
    return None if not getattr(node.target, "__module__", "").startswith(("_operator", "math")) else set()


def _schema(node: fx.Node) -> Any:
    return getattr(node.target, "_schema", None) if node.op == "call_function" else None


def _nbytes(node: fx.Node) -> int | None:
    """Bytes of the node's tensor result, 0 for anything else (sizes' hints where symbolic;
    None without one)."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return 0
    n = val.numel()
    if isinstance(n, torch.SymInt):
        n = n.node.hint
        if n is None:
            return None
    return int(n) * val.element_size()
