"""Which FX nodes of an aten graph mlirfuse fuses, in which groups, and why the rest stay torch.

The graph fuser of nvFuser's TorchScript integration, on FX: every call the op table
supports (with dtypes and devices mlirfuse handles) may join a group; groups grow from
producers to consumers in graph order, and a node joins (or merges) the groups of its
producers only where that creates no cycle, i.e. where none of its inputs outside those
groups depends on them; groups reading a common tensor then merge likewise (horizontal
fusion, mlirfuse's `horizontal` knob). Then, as `fusion-strip-bookend-views` does for fusion IR, views at
a group's edges go back to torch (they are free there), and groups without at least
`min_compute` compute ops (2 by default; 1 with mlirfuse's `single_node` knob; a copy torch
would run counts as one, beside at least one compute op, where no group adopts the ops as it
adopts a lone op) or without a tensor input are dissolved, with exceptions: a group computed
from constants only (a causal mask) stays where a graph input on its device can carry the
device to the region; single ops reading only graph inputs (autocast's weight casts) or read
only as the graph's results (their gradients' casts back to float32) are fused side by side,
one group for many; a lone op that torch runs as several kernels (constant_pad_nd) is a
group, and so is a lone reduction over the leading or middle dims of a CUDA tensor, which
torch runs more slowly (`OUTER_REDUCTIONS`). A leading slice of a tensor the group also
reads stays in the group. A constant made from scalars alone that compute ops of several
groups read is made again in each (no region writes it for another to read).
Every node left to torch carries its reason.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from mlirfuse import config
from mlirfuse.dtypes import to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.torch_backend import aten_table as A

aten = torch.ops.aten

DEVICES = ("cpu", "cuda")
CONSTANT_ONLY = "computed from constants only (no tensor input): torch creates it"
SINGLE_OP = "group of a single op (MLIRFUSE_SINGLE_NODE=1 fuses it)"
MAX_SINGLES = 32  # single ops of graph inputs fused side by side in one group at most
# Single ops whose results the graph only returns (the float32 casts of a bfloat16 backward's
# weight gradients) are fused side by side too; the group runs once its last input is ready,
# so the inputs of its earlier members live until then: at most this many bytes of them.
SINK_BYTES = 256 << 20
# Ops that torch runs as several kernels (constant_pad_nd: a fill, then a copy into the
# middle: a padded matmul's weight) but one region runs as one: fused even alone.
SEVERAL_KERNELS_IN_TORCH = (aten.constant_pad_nd.default,)
# Reductions that keep a tensor's last dim (over its leading or middle dims) on the GPU:
# ATen's reduce_kernel runs them well below mlirfuse's column kernel (H200, session 69, us,
# torch.profiler: x.sum(0) of [32768, 1024] float32 59.5 against 35.3, Inductor 34.1; of
# [8192, 768] bfloat16 13.7 against 8.3; x.sum(1) of [64, 1024, 256] float32 24.5 against
# 20.0): such a reduction that no group adopts is a region of its own, not left to torch.
OUTER_REDUCTIONS = (aten.sum.dim_IntList, aten.amax.default, aten.amin.default)
COPY_AT_EDGE = "copy at the end of a group of a value it does not hold alone (read from or also written outside)"


@dataclass
class Group:
    name: str
    nodes: list[fx.Node]  # members, in graph order


@dataclass
class Partition:
    groups: list[Group]
    left: dict[fx.Node, str] = field(default_factory=dict)  # call nodes left to torch -> reason

    def describe(self) -> str:
        """The partition dump: members of every group, and each torch node with its reason."""
        lines = [f"{len(self.groups)} fused group(s), {len(self.left)} node(s) left to torch"]
        for g in self.groups:
            lines.append(f"group {g.name} ({len(g.nodes)} nodes): " + ", ".join(n.name for n in g.nodes))
        for node, reason in self.left.items():
            lines.append(f"torch {node.name} = {_target_name(node)}: {reason}")
        return "\n".join(lines)


def _target_name(node: fx.Node) -> str:
    t = node.target
    return getattr(t, "__name__", str(t)) if not isinstance(t, torch._ops.OpOverload) else str(t)


def tensor_vals(val: Any) -> list[Any]:
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        return [v for x in val for v in tensor_vals(x)]
    return []


def _is_tensor_result(val: Any) -> bool:
    if isinstance(val, torch.Tensor):
        return True
    return isinstance(val, (tuple, list)) and len(val) > 0 and all(isinstance(v, torch.Tensor) for v in val)


def data_inputs(node: fx.Node) -> list[fx.Node]:
    """The nodes whose values a node reads. For a supported call, sizes (`int`/`SymInt`
    arguments) are not read: its lowering takes shapes from the output's symbolic sizes."""
    if node.op != "call_function" or A.lookup(node.target) is None:
        return node.all_input_nodes
    deps: list[fx.Node] = []
    bound = A.bind(node.target, node.args, node.kwargs)
    for a in node.target._schema.arguments:
        value = bound[a.name]
        for arg in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(arg, fx.Node) and not _is_size(arg, str(a.type)) and arg not in deps:
                deps.append(arg)
    return deps


def _is_size(arg: fx.Node, type_: str) -> bool:
    return "int" in type_ and not isinstance(arg.meta.get("val"), torch.Tensor)


def support(node: fx.Node) -> tuple[str | None, str | None]:
    """(reason to leave the node to torch or None, the device it computes on)."""
    if node.target is operator.getitem:
        source = node.args[0]
        if isinstance(source, fx.Node) and isinstance(source.meta.get("val"), (tuple, list)):
            reason, device = support(source)
            return (None, device) if reason is None else ("getitem of an op that runs in torch", None)
        return "getitem of a non-tensor value", None
    val = node.meta.get("val")
    if isinstance(val, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return "scalar (size) arithmetic, runs in Python", None
    row = A.lookup(node.target)
    if row is None:
        return A.unsupported_reason(node.target), None
    if not _is_tensor_result(val):
        return "no tensor metadata (meta['val'])", None
    tensors = tensor_vals(val)
    devices = set()
    for arg in node.all_input_nodes:
        aval = arg.meta.get("val")
        if isinstance(aval, torch.Tensor):
            tensors.append(aval)
        elif not isinstance(aval, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
            return f"argument {arg.name} is not a tensor or a scalar", None
    for t in tensors:
        try:
            dt = to_dtype(t.dtype)
        except FusionError:
            return f"dtype {t.dtype} not supported by mlirfuse", None
        if dt.is_complex:
            return f"dtype {t.dtype}: complex values are pairs of real tensors in FusionDefinition only", None
        if dt.is_float8:  # torch 2.11 gives NaN where torch 2.13 (and mlirfuse) saturate
            return f"dtype {t.dtype}: float8 overflow differs between torch versions; left to torch", None
        if t.device.type not in DEVICES:
            return f"device {t.device} not supported by mlirfuse", None
        devices.add(str(t.device))
    if len(devices) > 1:
        return f"mixes devices {sorted(devices)}", None
    if row.check is not None:
        reason = row.check(A.bind(node.target, node.args, node.kwargs))
        if reason:
            return reason, None
    return None, devices.pop()


def kind(node: fx.Node) -> str:
    if node.target is operator.getitem:
        return A.VIEW
    return A.lookup(node.target).kind


class _Grouping:
    """Groups as union-find sets of ids, each with its device, members and the position of
    its last member. A group runs as one unit: whatever one member reads, all its results
    wait for, so dependencies are followed group by group (the contracted graph)."""

    def __init__(self, deps: dict[fx.Node, list[fx.Node]], position: dict[fx.Node, int]) -> None:
        self.deps = deps  # what each node reads, sizes included (the order the rewrite keeps)
        self.position = position
        self.parent: list[int] = []
        self.device: list[str] = []
        self.members: list[list[fx.Node]] = []
        self.last: list[int] = []
        # Per group: the position of its first member, and what its members read from outside
        # it (a superset: pruned at merges), so that a cycle check walks a big group's few
        # external inputs, not every input of its thousand members (an unrolled recurrence).
        self.first: list[int] = []
        self.external: list[set[fx.Node]] = []
        self.group_of: dict[fx.Node, int] = {}

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def add(self, node: fx.Node, device: str) -> None:
        """Put `node` in its producers' groups, merged as far as no cycle arises, or a new one."""
        chosen: set[int] = set()
        for d in self.deps[node]:
            if d in self.group_of:
                g = self.find(self.group_of[d])
                if g not in chosen and self.device[g] == device and self._acyclic(chosen | {g}, node):
                    chosen.add(g)
        if chosen:
            g = self._merge(chosen)
        else:
            g = len(self.parent)
            self.parent.append(g)
            self.device.append(device)
            self.members.append([])
            self.last.append(-1)
            self.first.append(self.position[node])
            self.external.append(set())
        self.group_of[node] = g
        self.members[g].append(node)
        self.last[g] = max(self.last[g], self.position[node])
        self.external[g].update(d for d in self.deps[node] if not self._in(d, g))

    def merge_siblings(self, node: fx.Node) -> None:
        """Horizontal fusion: the groups reading tensor `node` merge where no cycle arises."""
        readers: list[int] = []
        for u in node.users:
            if u in self.group_of and node in self.deps[u]:
                g = self.find(self.group_of[u])
                if g not in readers:
                    readers.append(g)
        chosen: set[int] = set()
        for g in readers:
            if not chosen or (self.device[g] == self.device[next(iter(chosen))] and self._acyclic(chosen | {g})):
                chosen.add(g)
        if len(chosen) > 1:
            self._merge(chosen)

    def _merge(self, chosen: set[int]) -> int:
        g, *rest = sorted(chosen)
        external = self.external[g]
        for other in rest:
            self.parent[other] = g
            self.members[g].extend(self.members[other])
            self.members[other] = []
            self.last[g] = max(self.last[g], self.last[other])
            self.first[g] = min(self.first[g], self.first[other])
            external |= self.external[other]
            self.external[other] = set()
        self.external[g] = {d for d in external if not self._in(d, g)}
        return g

    def _in(self, n: fx.Node, g: int) -> bool:
        return n in self.group_of and self.find(self.group_of[n]) == g

    def _acyclic(self, candidate: set[int], node: fx.Node | None = None) -> bool:
        """Merging `candidate` (and `node`) makes no cycle iff no input from outside the merged
        set depends on any part of it. The search walks producers backward; reaching a group
        it goes on from that group's inputs from outside it. Nothing placed before the set's first
        member can depend on it, which bounds the walk."""
        first = min([self.first[g] for g in candidate] + ([self.position[node]] if node is not None else []))

        def inside(n: fx.Node) -> bool:
            return n is node or (n in self.group_of and self.find(self.group_of[n]) in candidate)

        stack = [d for g in candidate for d in self.external[g] if not inside(d)]
        if node is not None:
            stack += [d for d in self.deps[node] if not inside(d)]
        seen_nodes: set[fx.Node] = set()
        seen_groups: set[int] = set()
        while stack:
            d = stack.pop()
            if d in seen_nodes or self.position[d] < first and d not in self.group_of:
                continue
            seen_nodes.add(d)
            if d not in self.group_of:
                stack.extend(self.deps[d])
                continue
            g = self.find(self.group_of[d])
            if g in candidate:
                return False
            if g in seen_groups or self.last[g] < first:
                continue
            seen_groups.add(g)
            stack.extend(self.external[g])
        return True

    def roots(self) -> list[int]:
        return [g for g, ms in enumerate(self.members) if self.find(g) == g and ms]


def partition_graph(graph: fx.Graph, forced: dict[fx.Node, str] | None = None,
                    min_compute: int | None = None) -> Partition:
    """Group the supported nodes of `graph`; `forced` leaves given nodes to torch (with reasons)."""
    forced = forced or {}
    if min_compute is None:
        min_compute = 1 if config.options().single_node else 2
    nodes = list(graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    deps = {n: data_inputs(n) for n in nodes}
    grouping = _Grouping({n: n.all_input_nodes for n in nodes}, position)
    left: dict[fx.Node, str] = {}
    for node in nodes:
        if node.op != "call_function":
            continue
        reason, device = (forced[node], None) if node in forced else support(node)
        if reason is not None:
            left[node] = reason
        else:
            grouping.add(node, device)
    if config.options().horizontal:
        for node in nodes:
            if isinstance(node.meta.get("val"), torch.Tensor):
                grouping.merge_siblings(node)
    carriers = {str(n.meta["val"].device) for n in nodes
                if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)}
    final: list[list[fx.Node]] = []
    singles: dict[str, list[list[fx.Node]]] = {}  # device -> single-op groups of graph inputs
    lone: list[list[fx.Node]] = []  # single-op groups fused with no other
    copying: list[list[fx.Node]] = []  # a compute op short of min_compute, and copies
    sinks: dict[str, list[list[fx.Node]]] = {}  # device -> single-op groups the graph only returns
    apart: dict[str, list[list[fx.Node]]] = {}  # device -> groups of graph inputs the graph only returns
    for g in grouping.roots():
        members = _strip_edges(sorted(grouping.members[g], key=position.__getitem__), deps, left)
        if not members:
            continue
        inside = set(members)
        n_compute = sum(kind(n) in (A.COMPUTE, A.RANDOM) for n in members)
        # Copies are kernels in torch too: a cast and the copy of its transpose are two there,
        # one in a region.
        n_copies = sum(n.target in A.COPIES for n in members)
        outside = [d for n in members for d in deps[n] if d not in inside]
        has_tensor_input = any(isinstance(d.meta.get("val"), torch.Tensor) for d in outside)
        if n_compute >= min_compute and has_tensor_input and all(_of_graph_inputs(d, left) for d in outside) \
                and _only_returned(members, inside, left):
            apart.setdefault(grouping.device[g], []).append(members)
            continue
        if n_compute >= min_compute and (has_tensor_input or grouping.device[g] in carriers):
            final.append(members)  # without tensor inputs, a graph input gives it its device
            continue
        if n_compute and n_compute + n_copies >= min_compute and has_tensor_input:
            copying.append(members)  # a region of its own, unless a group adopts it (below)
            continue
        if n_compute == 1 and has_tensor_input and any(n.target in SEVERAL_KERNELS_IN_TORCH for n in members):
            final.append(members)
            continue
        if n_compute == 1 and has_tensor_input and all(_of_graph_inputs(d, left) for d in outside):
            singles.setdefault(grouping.device[g], []).append(members)
            continue
        if n_compute == 1 and has_tensor_input and _only_returned(members, inside, left):
            sinks.setdefault(grouping.device[g], []).append(members)
            continue
        if n_compute == 1 and has_tensor_input:
            lone.append(members)
            continue
        why = CONSTANT_ONLY if not has_tensor_input else "group without compute (views only)"
        for n in members:
            left[n] = why
    # Single ops on graph inputs (autocast's weight casts, 31 in a Llama training step) are
    # fused side by side: one region call instead of a torch call each, their kernels packed
    # in one launch (gpu-pack-launches). Nothing in the graph feeds them, so no merge makes a
    # cycle; nor for the single ops only the graph's output reads (sinks), which nothing
    # waits for.
    for groups in singles.values():
        if len(groups) == 1:
            lone.append(groups[0])
            continue
        for k in range(0, len(groups), MAX_SINGLES):
            final.append(sorted((n for ms in groups[k:k + MAX_SINGLES] for n in ms), key=position.__getitem__))
    # Groups that read graph inputs only and whose results the graph only returns (a compiled
    # optimizer step: one group per parameter, of its parameter, gradient and state) are
    # independent of everything else in the graph: fused side by side, one region call for
    # MAX_SINGLES of them, their kernels packed (gpu-pack-launches), no result held longer.
    for groups in apart.values():
        for k in range(0, len(groups), MAX_SINGLES):
            final.append(sorted((n for ms in groups[k:k + MAX_SINGLES] for n in ms), key=position.__getitem__))
    for groups in sinks.values():
        for batch in _sink_batches(groups, deps):
            if len(batch) == 1:
                lone.append(batch[0])
            else:
                final.append(sorted((n for ms in batch for n in ms), key=position.__getitem__))
    if config.options().horizontal:
        kept = {id(ms) for ms in _adopt_lone_ops(final, lone + copying, position)}
        copying = [ms for ms in copying if id(ms) in kept]
        lone = [ms for ms in lone if id(ms) in kept]
    final.extend(copying)
    _remake_shared_constants(graph, final, position)
    for members in lone:
        if _outer_reduction_on_gpu(members):
            final.append(members)
            continue
        for n in members:
            left[n] = SINGLE_OP
    final.sort(key=lambda ms: position[ms[0]])
    left = {n: left[n] for n in nodes if n in left}
    return Partition([Group(f"fused_{i}", ms) for i, ms in enumerate(final)], left)


def _remake_shared_constants(graph: fx.Graph, final: list[list[fx.Node]], position: dict[fx.Node, int]) -> None:
    """A constant made from scalars alone (`full`, `scalar_tensor`, `arange`: no tensor input)
    in one group and read by compute ops of other groups is made again in each of those, just
    before its first reader there: not written by one region for others to read back. Shared
    (AOTAutograd's CSE makes one zeros tensor of the slice backwards of Llama's rotary q and
    k gradients), it was 8 MB a layer written and read twice. Views of it keep reading it (a
    view the graph returns aliases the constant, as in eager)."""
    group_of = {n: k for k, members in enumerate(final) for n in members}
    for k, members in enumerate(final):
        for node in list(members):
            if node.op != "call_function" or kind(node) != A.CREATION or \
                    any(isinstance(a.meta.get("val"), torch.Tensor) for a in node.all_input_nodes):
                continue
            readers: dict[int, list[fx.Node]] = {}
            for user in node.users:
                g = group_of.get(user)
                if g is not None and g != k:
                    readers.setdefault(g, []).append(user)
            for g, users in readers.items():
                if not all(kind(u) == A.COMPUTE for u in users):
                    continue
                first = min(users, key=position.__getitem__)
                with graph.inserting_before(first):
                    copy = graph.node_copy(node)
                copy.meta = dict(node.meta)
                position[copy] = position[first] - 0.5  # before its first reader, after the one before
                for user in users:
                    user.replace_input_with(node, copy)
                final[g].append(copy)
                final[g].sort(key=position.__getitem__)
                group_of[copy] = g


def _adopt_lone_ops(final: list[list[fx.Node]], lone: list[list[fx.Node]],
                    position: dict[fx.Node, int]) -> list[list[fx.Node]]:
    """Single ops no group took (Llama's KV-cache cat of the values: a copy torch runs as a
    kernel and a call of its own) join the nearest group, in graph order, of their device
    where that makes no cycle among the groups: one region call instead of a torch call, their
    kernel packed with the region's (gpu-pack-launches). Only ops that make no tensor smaller
    than one they read (copies, casts, cats, pointwise work), not reductions, which torch may
    schedule better alone. Returns the ops left lone."""
    unit: dict[fx.Node, int] = {n: g for g, ms in enumerate(final) for n in ms}
    device_of = [_device(ms) for ms in final]
    kept: list[list[fx.Node]] = []
    for members in lone:
        here = _device(members)
        if not _no_smaller(members) or here is None:
            kept.append(members)
            continue
        before, after = _reach(members, unit, final, up=True), _reach(members, unit, final, up=False)
        spot = position[members[0]]
        candidates = [g for g, ms in enumerate(final) if device_of[g] == here and g not in before and g not in after]
        if not candidates:
            kept.append(members)
            continue
        g = min(candidates, key=lambda g: min(abs(position[final[g][0]] - spot), abs(position[final[g][-1]] - spot)))
        final[g] = sorted(final[g] + members, key=position.__getitem__)
        for n in members:
            unit[n] = g
    return kept


def _outer_reduction_on_gpu(members: list[fx.Node]) -> bool:
    """A lone reduction (`OUTER_REDUCTIONS`) of a contiguous CUDA tensor of two dims or more
    over some of its dims, its last kept."""
    computed = [n for n in members if kind(n) in (A.COMPUTE, A.RANDOM)]
    if len(computed) != 1 or computed[0].target not in OUTER_REDUCTIONS:
        return False
    node = computed[0]
    source = node.args[0].meta.get("val") if isinstance(node.args[0], fx.Node) else None
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if not isinstance(source, torch.Tensor) or source.device.type != "cuda" or source.dim() < 2 or not dims:
        return False
    rank = source.dim()
    return source.is_contiguous() and rank - 1 not in {d % rank for d in dims}


def _device(members: list[fx.Node]) -> str | None:
    vals = [v for n in members for v in tensor_vals(n.meta.get("val"))]
    return str(vals[0].device) if vals else None


def _no_smaller(members: list[fx.Node]) -> bool:
    """No compute member's result has fewer elements than a tensor it reads."""
    for n in members:
        if kind(n) not in (A.COMPUTE, A.RANDOM):
            continue
        out = sum(_numel(v) for v in tensor_vals(n.meta.get("val")))
        if any(_numel(v) > out for d in n.all_input_nodes for v in tensor_vals(d.meta.get("val"))):
            return False
    return True


def _numel(val: torch.Tensor) -> int:
    """Elements, by the sizes' hints (an unknown size counts 1)."""
    n = 1
    for s in val.shape:
        hint = s.node.hint if isinstance(s, torch.SymInt) else int(s)
        n *= hint if hint is not None else 1
    return n


def _reach(members: list[fx.Node], unit: dict[fx.Node, int], final: list[list[fx.Node]], up: bool) -> set[int]:
    """The groups `members` depend on (up) or that depend on them (down), following nodes and
    groups as units: reaching one member of a group reaches all of it."""
    seen: set[fx.Node] = set(members)
    found: set[int] = set()
    stack = list(members)
    while stack:
        n = stack.pop()
        for m in (n.all_input_nodes if up else n.users):
            if m in seen:
                continue
            seen.add(m)
            g = unit.get(m)
            if g is not None and g not in found:
                found.add(g)
                for other in final[g]:
                    if other not in seen:
                        seen.add(other)
                        stack.append(other)
            stack.append(m)
    return found


def _only_returned(members: list[fx.Node], inside: set[fx.Node], left: dict[fx.Node, str]) -> bool:
    """The group's values leave it only as results of the graph (perhaps through views left
    to torch: a weight gradient computed transposed) or as new values of its inputs (an
    inference graph's `copy_` into an input, at its end)."""
    def returned(node: fx.Node) -> bool:
        if node.op == "output" or node.target is aten.copy_.default and node.args[0].op == "placeholder":
            return True
        row = A.lookup(node.target) if node.op == "call_function" and node in left else None
        return (row is not None and row.kind == A.VIEW and node.target is not operator.getitem
                and all(returned(u) for u in node.users))
    return all(returned(u) for n in members for u in n.users if u not in inside)


def _sink_batches(groups: list[list[fx.Node]], deps: dict[fx.Node, list[fx.Node]]) -> list[list[list[fx.Node]]]:
    """Consecutive single-op groups (in graph order) taken together while they hold at most
    MAX_SINGLES groups and SINK_BYTES of inputs."""
    batches: list[list[list[fx.Node]]] = []
    held = 0
    for members in groups:
        inside = set(members)
        size = sum(_nbytes(d) for n in members for d in deps[n] if d not in inside)
        if not batches or len(batches[-1]) == MAX_SINGLES or held + size > SINK_BYTES:
            batches.append([])
            held = 0
        batches[-1].append(members)
        held += size
    return batches


def _nbytes(node: fx.Node) -> int:
    val = node.meta.get("val")
    return val.element_size() * _numel(val) if isinstance(val, torch.Tensor) else 0


def _of_graph_inputs(node: fx.Node, left: dict[fx.Node, str]) -> bool:
    """A graph input, or a view left to torch of graph inputs only."""
    if node.op in ("placeholder", "get_attr"):
        return True
    row = A.lookup(node.target) if node.op == "call_function" and node in left else None
    return (row is not None and row.kind == A.VIEW and node.target is not operator.getitem
            and all(_of_graph_inputs(d, left) for d in node.all_input_nodes))


def _source_read_again(n: fx.Node, inside: set[fx.Node], deps: dict[fx.Node, list[fx.Node]]) -> bool:
    """A leading slice whose source the group reads elsewhere too (rotary embedding reads q
    whole and its two halves): inside, the group reads the source once and the view is index
    arithmetic; given to torch, the group would read overlapping strided views of one buffer,
    each its own operand (and, as for `rotate_half`'s negated half, its own kernel)."""
    if n.target is not aten.slice.Tensor:
        return False
    sources = [d for d in deps[n] if isinstance(d.meta.get("val"), torch.Tensor)]
    return any(m is not n and m in inside and any(d in sources for d in deps[m]) for m in inside)


def _hands_strided_rows(n: fx.Node) -> bool:
    """A view that makes a contiguous tensor strided: a slice cutting rows (a padded matmul's
    result cut back to its true width) or an expand (BERT's token types, one row for the
    batch). The group reads the contiguous tensor and slices or broadcasts it as index
    arithmetic, where given the view its kernels would read an operand of runtime strides,
    which only the pointwise schedule takes (a reduction of it ran on the naive path)."""
    if n.target not in (aten.slice.Tensor, aten.expand.default) or not isinstance(n.args[0], fx.Node):
        return False
    source, result = n.args[0].meta.get("val"), n.meta.get("val")
    return (isinstance(source, torch.Tensor) and isinstance(result, torch.Tensor)
            and source.is_contiguous() and not result.is_contiguous())


def _strip_edges(members: list[fx.Node], deps: dict[fx.Node, list[fx.Node]],
                 left: dict[fx.Node, str]) -> list[fx.Node]:
    """Views whose inputs all come from outside the group (leading) or whose users are all
    outside (trailing) run in torch, where they cost nothing; repeated until none is left.
    A getitem goes with the op it reads; a slice or an expand that would hand the group a
    strided operand stays in it. Copies (clone) are identities inside a group but a kernel in torch: one leaves a
    group only at its end, and only where the value it copies is read from or also written
    outside the group anyway."""
    inside = set(members)
    changed = True
    while changed:
        changed = False
        for n in members:
            if n not in inside or kind(n) != A.VIEW:
                continue
            if n.target is operator.getitem:
                strip, why = n.args[0] not in inside, "getitem of an op that runs in torch"
            elif n.target in A.COPIES:  # a copy kernel in torch; inside, an identity
                # Left to torch only where the group would have to write its input as well.
                source = n.args[0]
                strip = source not in inside or any(u not in inside and u is not n for u in source.users)
                strip = strip and all(u not in inside for u in n.users)
                why = COPY_AT_EDGE
            else:
                leading = all(d not in inside for d in deps[n])
                strip = (leading and not _hands_strided_rows(n) and not _source_read_again(n, inside, deps)) \
                    or all(u not in inside for u in n.users)
                why = "view at the edge of a group (free in torch)"
            if strip:
                inside.discard(n)
                left[n] = why
                changed = True
    return [n for n in members if n in inside]
