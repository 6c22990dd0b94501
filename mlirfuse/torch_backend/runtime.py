"""The compiled graph: torch calls and fused regions, in dependency order, as one FX module.

`rewrite` replaces every fused group of an aten graph by one call of a `FusedRegion` (and
`getitem`s for its outputs), keeping every other node as it was; FX generates the Python
that runs them, freeing each value after its last use. A `FusedRegion` calls mlirfuse's
jitted function for the region (CPU backend for CPU tensors, GPU kernels on the current
stream for CUDA tensors). A graph whose regions draw random numbers draws one seed per call,
a 0-d tensor on their device from torch's generator there (`torch.manual_seed` makes runs
repeatable; on the GPU the draw is a kernel, so a recorded CUDA graph draws anew at each
replay), as its first draw, which each such region reads from memory, its random ops on Philox
streams of their own (`Region.streams`). At its first call a
region checks its inputs' layouts against the graph's metadata: an input that arrives as the
leading columns of dense rows where the metadata says dense (a saved activation that a padded
matmul's slice became after AOTAutograd recorded it) makes it take those rows from then on.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from mlirfuse import config, dump
from mlirfuse.errors import FusionError, IndexOutOfRange
from mlirfuse.torch_backend.pad_matmul import matmul_into_padded_width
from mlirfuse.torch_backend.partition import Partition, tensor_vals
from mlirfuse.torch_backend.region import (LoweringFailed, Region, RowPitch, copy_in_order, memory_order,
                                           physical_order, row_pitch)

SEED_BOUND = 2 ** 62

# Views left to torch, called as Tensor methods: the same op, without the Python layer of
# `torch.ops.aten.<op>.<overload>` (on an H100 host, aten.view.default costs 6.2 us a call and
# Tensor.view 2.7 us; a GPT-2 training step leaves some 60 views to torch).
VIEW_METHODS = {torch.ops.aten.view.default: "view", torch.ops.aten.permute.default: "permute",
                torch.ops.aten.unsqueeze.default: "unsqueeze", torch.ops.aten.squeeze.dim: "squeeze",
                torch.ops.aten.expand.default: "expand", torch.ops.aten.t.default: "t",
                torch.ops.aten.transpose.int: "transpose", torch.ops.aten.split_with_sizes.default: "split_with_sizes"}


# Views taken from a value whose layout is known (a fused region's dense output, a matmul's
# result): one `_reinterpret_tensor` call (Inductor's `reinterpret_tensor`: 1.6 us on the H100
# host where Tensor.view takes 3.1), from that value, with the sizes, strides and offset of
# torch's metadata, however many views lead there (a view, then a permute, then a view; one
# piece of a split). From the result of another aten op, whose layout only its metadata tells
# (an attention's output, read back as [B, S, H * D] through four views):
# the same, where two or more views lead there, after a check of that value's sizes and
# strides against its metadata (Inductor's `assert_size_stride` after its library calls),
# which raises where they differ.
REINTERPRETED = tuple(VIEW_METHODS) + (torch.ops.aten._unsafe_view.default, torch.ops.aten.alias.default,
                                       torch.ops.aten.slice.Tensor)
SPLITS = (torch.ops.aten.split_with_sizes.default, torch.ops.aten.split.Tensor, torch.ops.aten.unbind.int)
KNOWN_LAYOUT = (torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default,
                matmul_into_padded_width)

# Matmuls left to torch, called through torch's Python bindings (as Inductor's extern kernels
# are), not the op overload's Python `__call__` and the dispatcher's generic argument parsing:
# the same op, same overload, without a few us a call (aten.addmm.default 5.4 us, torch.addmm
# 2.4 us on a CPU host; a Llama training step leaves some 45 matmuls to torch).
BOUND_CALLS = {torch.ops.aten.mm.default: torch.mm, torch.ops.aten.bmm.default: torch.bmm,
               torch.ops.aten.addmm.default: torch.addmm, torch.ops.aten.baddbmm.default: torch.baddbmm}

# Views that reorder dims, as permutations: a chain of them on one value is one permute (a
# weight's `t()` in the forward, and its `t()` again in the backward: no view at all).
PERMUTING = (torch.ops.aten.permute.default, torch.ops.aten.t.default, torch.ops.aten.transpose.int)


def _reinterpret() -> Any:
    """`(t, sizes, strides, offset)` -> the view of t's storage at t's offset + `offset`."""
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    fast = getattr(guards, "_reinterpret_tensor", None)
    return fast if fast is not None else \
        (lambda t, sizes, strides, offset: t.as_strided(sizes, strides, t.storage_offset() + offset))


def _layout_check() -> Any:
    """`(t, sizes, strides)`: raises AssertionError where t's sizes differ, or its strides
    (of dims longer than 1)."""
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    fast = getattr(guards, "assert_size_stride", None)
    if fast is not None:
        return fast

    def check(t: torch.Tensor, sizes: tuple[int, ...], strides: tuple[int, ...]) -> None:
        if tuple(t.shape) != sizes or any(n > 1 and a != b for n, a, b in zip(sizes, t.stride(), strides)):
            raise AssertionError(f"mlirfuse: expected sizes {sizes} and strides {strides}, got "
                                 f"{tuple(t.shape)} and {tuple(t.stride())} (an op's metadata is wrong)")
    return check


def _static_layout(val: Any) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """(sizes, strides, storage offset) of a tensor's metadata, where all are plain ints."""
    if not isinstance(val, torch.Tensor):
        return None
    layout = (tuple(val.shape), tuple(val.stride()), val.storage_offset())
    if not all(type(x) is int for x in (*layout[0], *layout[1], layout[2])):
        return None
    return layout


def _widener(pitch: RowPitch) -> Callable[[torch.Tensor], torch.Tensor]:
    """`widen(t)`: the dense rows whose first columns `t` is (a view of its memory, where `t`
    has the layout `pitch` describes and its storage holds the last row whole), else a copy
    of `t` into the first columns of new rows (whose other columns the region never reads)."""
    reinterpret = _reinterpret()
    sizes, strides, length = pitch.sizes, pitch.strides, pitch.sizes[-1]
    wide_sizes, wide_strides = pitch.wide_sizes, pitch.wide_strides
    needed = math.prod(wide_sizes)

    def widen(t: torch.Tensor) -> torch.Tensor:
        offset = t.storage_offset()
        if t.stride() == strides and t.shape == sizes and \
                offset + needed <= t.untyped_storage().nbytes() // t.element_size():
            return reinterpret(t, wide_sizes, wide_strides, 0)  # (at t's own offset)
        wide = t.new_empty(wide_sizes)
        wide.narrow(-1, 0, length).copy_(t)
        return wide

    return widen


def draw_seed(device: torch.device) -> torch.Tensor:
    """A Philox seed, 0-d int64 on `device`, from torch's default generator there: repeatable
    under torch.manual_seed; on a GPU no device sync, and graph-safe (a CUDA graph's replay
    draws a new one, as it advances the generator's offset)."""
    return torch.randint(SEED_BOUND, (), dtype=torch.int64, device=device)


class FusedRegion:
    """One fused group at run time, called with the region's inputs, its seed and first Philox
    offset where it is seeded, and then the symbolic sizes its nodes read (which only the torch
    fallback needs)."""

    def __init__(self, region: Region, jitted: Any, fallback: fx.GraphModule,
                 rejit: Callable[[Region], Any] | None = None):
        self.__name__ = region.name
        self.__qualname__ = region.name
        self.region = region
        self.jitted = jitted
        self.fallback = fallback  # the group's own aten nodes, run by torch if mlirfuse fails
        self.failed = False
        self._seeded = region.seeded
        self._n = len(region.inputs) + 2 * region.seeded  # the jitted function's arguments
        # The jitted function for the region traced again (after `widened` changed); None:
        # the first call does not check the inputs' layouts.
        self._rejit = rejit
        self._enter = self._general  # `_shortcut`'s function once the jitted one has a hot path
        self._hot = None
        self._set_up()

    def _set_up(self) -> None:
        region = self.region
        self._index = list(region.output_index)
        self._layout = list(region.output_layout)  # per output: its permute back (copies: memory order)
        # Inputs read as the first columns of dense rows: handed on as those whole rows.
        self._widen = [(k, _widener(pitch)) for k, pitch in region.widened.items()]
        # Each output is the jitted function's result of the same position: handed on as is.
        self._as_is = self._index == list(range(len(self._index))) and not any(self._layout)
        # Under torch.profiler the call is a named range ("mlirfuse <group> <fusion key>", the
        # key of the MLIRFUSE_DUMP files), so traces attribute kernels to their region.
        self.label = f"mlirfuse {region.name} {dump.key_of(region.fusion_ir)}"

    def _adapt(self, inputs: tuple[Any, ...]) -> None:
        """At the first call: inputs that are the leading columns of dense rows though the
        graph's metadata says they are dense (a saved activation that a padded matmul's slice
        became after AOTAutograd recorded it) make the region take those rows, as it would
        have with the metadata right. Only where the metadata's sizes are static and these."""
        rejit, self._rejit = self._rejit, None
        found = {}
        for k, (node, t) in enumerate(zip(self.region.inputs, inputs)):
            val = node.meta.get("val")
            if k in self.region.widened or not isinstance(t, torch.Tensor) or not isinstance(val, torch.Tensor) \
                    or _static_layout(val) is None or tuple(val.shape) != tuple(t.shape):
                continue
            pitch = row_pitch(t)
            if pitch is not None and row_pitch(val) is None:
                found[k] = pitch
        if not found:
            return
        before = (dict(self.region.widened), self.region.fusion_ir, self.region.output_index,
                  self.region.output_layout)
        self.region.widened.update(found)
        try:
            self.region.fusion_ir = self.region.dry_trace()
            self.jitted = rejit(self.region)
        except (FusionError, LoweringFailed):
            (self.region.widened, self.region.fusion_ir, self.region.output_index,
             self.region.output_layout) = before
        self._set_up()

    def __call__(self, *args: Any) -> tuple[Any, ...]:
        return self._enter(args)

    def _general(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        if torch.autograd._profiler_enabled():
            with torch.profiler.record_function(self.label):
                results = self._call(args)
        else:
            results = self._call(args)
        ran = getattr(self.jitted, "last_compiled", None)
        if ran is not None and not self.label.endswith(ran.key):
            # the fusion compiled for the inputs' actual layouts (not always the one the graph's
            # metadata predicted): profiles then name the region as its dump files do
            self.label = f"mlirfuse {self.region.name} {ran.key}"
        hot = getattr(self.jitted, "_hot", None)
        if hot is not self._hot or self.failed:  # other layouts now, or torch runs the region
            self._hot = hot
            self._enter = self._shortcut(hot) or self._general
        return results

    def _shortcut(self, hot: Callable[[tuple[Any, ...]], Any] | None) -> Callable[[tuple[Any, ...]], Any] | None:
        """Where the region takes its inputs as they are or widened (a seed and offset too;
        no sizes for the fallback) and each result is a result of the jitted function, permuted or
        not (no copies): the jitted function's guarded launch for the layouts it last saw
        (`hot`), made the region's own (its launcher's `entry`): one generated function checks
        the inputs, widens them, launches and permutes the results (a region is called some
        hundred times a training step; each Python layer of its call costs every one of them).
        Anything it does not serve (another layout, a dump, a profile, the check against torch,
        a failure) takes the general path."""
        launcher = getattr(hot, "launcher", None)
        if launcher is None or self.failed or self.region.size_args or any(i < 0 for i in self._index):
            return None
        if not launcher.result or launcher.result[0] not in "([":
            return None  # the jitted function's results are not a flat tuple or list of its outputs
        results = "".join(f"o{i}, " if p is None else f"o{i}.permute({tuple(p)}), "
                          for i, p in zip(self._index, self._layout))
        env: dict[str, Any] = {"general": self._general, "profiling": torch.autograd._profiler_enabled}
        env.update((f"widen{k}", widen) for k, widen in self._widen)
        # (inputs read as the first columns of dense rows, a padded matmul's logits: handed on widened)
        before = [f"    a{k} = widen{k}(a{k})" for k, _ in self._widen]
        return launcher.entry(f"({results})", "return general(args)", " or opts.check_regions or profiling()",
                              before, env)

    def _torch(self, args: tuple[Any, ...]) -> Any:
        """The group's own nodes run by torch (its random ops from torch's generator)."""
        if self._seeded:
            args = args[:self._n - 2] + args[self._n:]
        return self.fallback(*args)

    def _call(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        if self.failed:
            return self._written_into(args, self._torch(args))
        checking = config.options().check_regions and not self._seeded
        # Torch's results before the region writes into its inputs.
        want = tuple(self._torch(args)) if checking and self.region.into else None
        inputs = args[:self._n]
        if self._rejit is not None:
            self._adapt(inputs[:len(self.region.inputs)])
        if self._widen:
            inputs = list(inputs)
            for k, widen in self._widen:
                inputs[k] = widen(inputs[k])
        try:
            results = self.jitted(*inputs)
        except IndexOutOfRange:
            # an index out of range (the inputs' fault, not the region's): torch runs the ops,
            # raising its own error as eager does; the region stays fused for the next call
            return self._written_into(args, self._torch(args))
        except FusionError as e:
            if not config.options().fallback:
                raise
            warnings.warn(f"mlirfuse: fused region {self.__name__} failed ({e}); running its ops in torch "
                          "from now on (MLIRFUSE_DISABLE_FALLBACK=1 raises instead)", RuntimeWarning, stacklevel=3)
            self.failed = True
            return self._written_into(args, self._torch(args))
        if not self._as_is:
            results = tuple((results[i] if p is None else results[i].permute(p)) if i >= 0
                            else copy_in_order(args[-1 - i], p) for i, p in zip(self._index, self._layout))
        if checking:
            check_against_torch(self.label, results, want if want is not None else tuple(self._torch(args)),
                                args, self._check_tolerance())
        return results

    def _written_into(self, args: tuple[Any, ...], results: Any) -> tuple[Any, ...]:
        """Torch's results of the region's nodes, with those the region writes into its inputs
        (`Region.into`) copied there, as the region does."""
        results = list(results)
        for r, j in self.region.into.items():
            for k, index in enumerate(self._index):
                if index == r:
                    results[k] = args[j].copy_(results[k])
        return tuple(results)

    def _check_tolerance(self) -> float:
        """check_regions' tolerance: that of the narrowest float dtype the region computes in
        (a float64 result through a float32 softmax carries float32's rounding)."""
        dtypes = {v.dtype for n in self.region.inputs + self.region.nodes
                  for v in tensor_vals(n.meta.get("val")) if v.dtype.is_floating_point}
        return max((CHECK_TOLERANCE.get(d, 2e-2) for d in dtypes), default=0.0)

    def __repr__(self) -> str:
        return f"FusedRegion({self.__name__}, {len(self.region.nodes)} nodes)"


# check_regions: the largest error of a region's float output against torch's, relative to the
# larger of that output's and the region's inputs' magnitudes (a result that cancels to near
# zero carries the rounding errors of the values it came from).
CHECK_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def check_against_torch(label: str, got: tuple[Any, ...], want: tuple[Any, ...], inputs: tuple[Any, ...],
                        tolerance: float) -> None:
    """`MLIRFUSE_CHECK_REGIONS=1`: the outputs of a fused region (`got`) against the same
    nodes run by torch (`want`): dtypes, shapes, dense layouts' strides (but of size-1 dims),
    and values within `tolerance` (at least the output dtype's) of the magnitudes involved."""
    scale = max((_magnitude(t) for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()),
                default=0.0)
    for k, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, torch.Tensor):
            continue
        where = f"mlirfuse check_regions: {label}, output {k}"
        if g.dtype != w.dtype or g.shape != w.shape:
            raise FusionError(f"{where}: {g.dtype} {tuple(g.shape)}, torch gives {w.dtype} {tuple(w.shape)}")
        if memory_order(w) is not None and any(a != b for a, b, n in zip(g.stride(), w.stride(), w.shape) if n != 1):
            raise FusionError(f"{where}: strides {g.stride()}, torch gives {w.stride()}")
        if not w.numel():
            continue
        if not w.is_floating_point():
            if not torch.equal(g, w):
                raise FusionError(f"{where}: {int((g != w).sum())} of {w.numel()} elements differ from torch's")
            continue
        g64, w64 = g.detach().double(), w.detach().double()
        same = (g64 == w64) | (g64.isnan() & w64.isnan())  # (infinities and NaNs too)
        error = float(torch.where(same, 0.0, (g64 - w64).abs()).max())  # NaN: one side non-finite
        bound = max(tolerance, CHECK_TOLERANCE.get(w.dtype, 2e-2)) * max(scale, _magnitude(w))
        if not error <= bound:
            raise FusionError(f"{where}: differs from torch's by up to {error:.3g} (at most {bound:.3g} allowed "
                              f"for {w.dtype}); MLIRFUSE_DUMP=partition shows the region's nodes")


def _magnitude(t: torch.Tensor) -> float:
    """The largest magnitude among `t`'s values, but of infinities, NaNs and values near its
    dtype's largest (attention masks' `finfo.min`)."""
    a = t.detach().abs()
    a = a[a < torch.finfo(t.dtype).max / 2]
    return float(a.max()) if a.numel() else 0.0


def region_module(gm: fx.GraphModule, region: Region) -> fx.GraphModule:
    """The region's nodes as a torch module (inputs in region order, outputs as a tuple)."""
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in region.inputs + region.size_args:
        env[node] = graph.placeholder(node.name)
        env[node].meta = dict(node.meta)
    for node in region.nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[n] for n in region.outputs))
    return fx.GraphModule(gm, graph)


def rewrite(gm: fx.GraphModule, partition: Partition, fused: list[FusedRegion]) -> fx.GraphModule:
    """`gm` with each group replaced by one call of its FusedRegion."""
    nodes = list(gm.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    unit_of: dict[fx.Node, int] = {}
    units: list[Any] = []  # a node left as it is, or a FusedRegion
    for f in fused:
        for n in f.region.nodes:
            unit_of[n] = len(units)
        units.append(f)
    output = next(n for n in nodes if n.op == "output")
    for n in nodes:
        if n not in unit_of and n is not output:
            unit_of[n] = len(units)
            units.append(n)

    def reads(u: Any) -> list[fx.Node]:
        return u.region.inputs + u.region.size_args if isinstance(u, FusedRegion) else u.all_input_nodes

    def first(u: Any) -> int:
        return position[u.region.nodes[0]] if isinstance(u, FusedRegion) else position[u]

    # Kahn's algorithm, in original order where dependencies allow; the output node last.
    waiting = [len({unit_of[d] for d in reads(u)}) for u in units]
    users: list[set[int]] = [set() for _ in units]
    for i, u in enumerate(units):
        for d in {unit_of[d] for d in reads(u)}:
            users[d].add(i)
    ready = [(first(u), i) for i, u in enumerate(units) if waiting[i] == 0]
    heapq.heapify(ready)
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    emitted = 0
    layout_known = _layout_known(fused, nodes)
    in_region = {n for f in fused for n in f.region.nodes}
    reinterpret, check_layout = _reinterpret(), _layout_check()
    reinterpreted: dict[Any, fx.Node] = {}
    checked: set[fx.Node] = set()
    seeds: dict[torch.device, fx.Node] = {}  # one per device and call
    while ready:
        _, i = heapq.heappop(ready)
        u = units[i]
        emitted += 1
        if isinstance(u, FusedRegion):
            seeding: tuple[Any, ...] = ()  # the graph's seed, the region's first Philox offset
            if u.region.seeded:
                device = _device_of(u.region)
                if device not in seeds:  # the graph's first draw from the generator, whatever its order
                    head = next((n for n in graph.nodes if n.op != "placeholder"), None)
                    with graph.inserting_before(head) if head is not None else contextlib.nullcontext():
                        seeds[device] = graph.call_function(draw_seed, (device,))
                seeding = (seeds[device], u.region.first_offset)
            call = graph.call_function(u, tuple(env[d] for d in u.region.inputs) + seeding
                                       + tuple(env[d] for d in u.region.size_args))
            for k, out in enumerate(u.region.outputs):
                env[out] = graph.call_function(operator.getitem, (call, k))
                env[out].meta = dict(out.meta)
            for out in u.region.view_outputs:  # taken again by torch, from the region's inputs
                _emit_views(graph, out, env)
        elif _elided(u):  # an alias: the value itself
            env[u] = env[u.args[0]]
        elif (taken := _reinterpretable(u, layout_known, in_region)) is not None:
            # One call per value and layout (a normalized activation read by the q, k and v
            # projections: one reinterpret, not three); one check per value of unknown layout.
            base, layout, unverified = taken
            sizes, strides, _ = _static_layout(base.meta["val"])
            if layout == (sizes, strides, 0):  # views that undo each other
                env[u] = env[base]
            elif (same := reinterpreted.get((base, layout))) is not None:
                env[u] = same
            else:
                if unverified and base not in checked:
                    checked.add(base)
                    graph.call_function(check_layout, (env[base], sizes, strides))
                env[u] = reinterpreted[base, layout] = graph.call_function(reinterpret, (env[base], *layout))
                env[u].meta = dict(u.meta)
        elif (composed := _composed_permutation(u, in_region)) is not None:
            base, dims = composed
            if dims == sorted(dims):  # permutes that undo each other: the value itself
                env[u] = env[base]
            else:
                env[u] = graph.call_method("permute", (env[base], dims))
                env[u].meta = dict(u.meta)
        elif u.op == "call_function" and u.target in VIEW_METHODS and not u.kwargs:
            env[u] = graph.call_method(VIEW_METHODS[u.target], tuple(fx.node.map_arg(u.args, lambda n: env[n])))
            env[u].meta = dict(u.meta)
        elif (linear := _linear(u, in_region)) is not None:
            env[u] = graph.call_function(torch._C._nn.linear, tuple(env[a] for a in linear))
            env[u].meta = dict(u.meta)
        elif u.op == "call_function" and u.target in BOUND_CALLS:
            env[u] = graph.call_function(BOUND_CALLS[u.target], *fx.node.map_arg((u.args, u.kwargs), lambda n: env[n]))
            env[u].meta = dict(u.meta)
        else:
            env[u] = graph.node_copy(u, lambda n: env[n])
        for j in users[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (first(units[j]), j))
    if emitted != len(units):
        raise FusionError("mlirfuse torch backend: the partition has a cycle (a bug)")
    graph.node_copy(output, lambda n: env[n])
    for node in reversed(list(graph.nodes)):  # views that only led to reinterpreted ones
        if not node.users and (node.op == "call_method" and node.target in VIEW_METHODS.values()
                               or node.op == "call_function" and (node.target in REINTERPRETED
                                                                  or node.target is reinterpret
                                                                  or _piece_of_view(node))):
            graph.erase_node(node)
    graph.lint()
    return fx.GraphModule(gm, graph)


def _device_of(region: Region) -> torch.device:
    """Where the region runs: the device of the values it computes."""
    return next(v.device for n in region.nodes for v in tensor_vals(n.meta.get("val")))


def _piece_of_view(node: fx.Node) -> bool:
    """Whether `node` takes one piece of a split left to torch."""
    source = node.args[0] if node.target is operator.getitem else None
    return isinstance(source, fx.Node) and source.op == "call_method" and source.target in VIEW_METHODS.values()


def _elided(u: Any) -> bool:
    """Whether `u` is an alias the graph does not return: its users can read its input."""
    return isinstance(u, fx.Node) and u.op == "call_function" and u.target is torch.ops.aten.alias.default \
        and not u.kwargs and not any(user.op == "output" for user in u.users)


def _permutation(node: Any) -> list[int] | None:
    """The dims of its input that the view `node` lists, in its order; None for other nodes."""
    if not isinstance(node, fx.Node) or node.op != "call_function" or node.target not in PERMUTING or node.kwargs:
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    rank = val.dim()
    if node.target is torch.ops.aten.t.default:
        return [1, 0] if rank == 2 else list(range(rank))
    if node.target is torch.ops.aten.transpose.int:
        dims = list(range(rank))
        if rank < 2:  # a 0-d or 1-d tensor's transpose is the tensor (torch takes dim 0 or -1 there)
            return dims
        a, b = (d % rank for d in node.args[1:3])
        dims[a], dims[b] = dims[b], dims[a]
        return dims
    return [d % rank for d in node.args[1]]


def _permute_chain(node: Any, in_region: set[fx.Node]) -> tuple[fx.Node, list[int]] | None:
    """(value, dims) where `node` is one or more permuting views (outside regions) of that
    value, one permute by `dims` in all; None where `node` is no permuting view."""
    dims = _permutation(node)
    if dims is None:
        return None
    base = node.args[0]
    while base not in in_region and (inner := _permutation(base)) is not None:
        dims = [inner[d] for d in dims]
        base = base.args[0]
    return base, dims


def _composed_permutation(u: Any, in_region: set[fx.Node]) -> tuple[fx.Node, list[int]] | None:
    """`_permute_chain` of `u` where it is a view of a view; None otherwise. The graph's
    outputs keep their views (AOTAutograd regenerates aliases of its outputs from their bases)."""
    if not isinstance(u, fx.Node) or any(user.op == "output" for user in u.users):
        return None
    chain = _permute_chain(u, in_region)
    return chain if chain is not None and chain[0] is not u.args[0] else None


def _linear(u: Any, in_region: set[fx.Node]) -> tuple[fx.Node, ...] | None:
    """(x, w) where `u` is mm(x, w.t()), (x, w, b) where it is addmm(b, x, w.t()) (a linear
    layer's product, with its bias or not, the transpose being views left to torch): the
    product is then `linear(x, w[, b])`, the same matmul (torch's linear of a matrix is that
    mm or addmm) without a Python call for the view. Not an addmm of half precision on the
    CPU, where torch's linear takes a slower path than addmm (14 against 8 us a call on the
    CI host); nor a bias of other than one dimension, nor scaled products. None for other nodes."""
    if not isinstance(u, fx.Node) or u.op != "call_function" or u.kwargs:
        return None
    if u.target is torch.ops.aten.mm.default and len(u.args) == 2:
        bias, (x, weight) = None, u.args
    elif u.target is torch.ops.aten.addmm.default and len(u.args) == 3:
        bias, x, weight = u.args
        val, bias_val = u.meta.get("val"), getattr(bias, "meta", {}).get("val")
        if not isinstance(val, torch.Tensor) or not isinstance(bias_val, torch.Tensor) or bias_val.dim() != 1 \
                or val.device.type == "cpu" and val.dtype in (torch.float16, torch.bfloat16):
            return None
    else:
        return None
    if weight in in_region:
        return None
    chain = _permute_chain(weight, in_region)
    if chain is None or chain[1] != [1, 0]:
        return None
    return (x, chain[0]) if bias is None else (x, chain[0], bias)


def _emit_views(graph: fx.Graph, out: fx.Node, env: dict[fx.Node, fx.Node]) -> None:
    """The chain of views from a region's input to `out` (region members), as torch calls."""
    chain = [out]
    while chain[-1].args[0] not in env:
        chain.append(chain[-1].args[0])
    for node in reversed(chain):
        if node.target in VIEW_METHODS and not node.kwargs:
            args = tuple(fx.node.map_arg(node.args, lambda n: env[n]))
            env[node] = graph.call_method(VIEW_METHODS[node.target], args)
        else:
            env[node] = graph.node_copy(node, lambda n: env[n])
        env[node].meta = dict(node.meta)


def _layout_known(fused: list[FusedRegion], nodes: list[fx.Node]) -> set[fx.Node]:
    """Values whose runtime layout is their metadata's, with storage offset 0: matmul results
    and the fused regions' outputs written dense in torch's memory order."""
    known = {n for n in nodes if n.op == "call_function" and n.target in KNOWN_LAYOUT}
    for f in fused:
        for out, index in zip(f.region.outputs, f.region.output_index):
            val = out.meta.get("val")
            if index >= 0 and isinstance(val, torch.Tensor) and (val.is_contiguous() or physical_order(val)):
                known.add(out)
    return {n for n in known if (layout := _static_layout(n.meta.get("val"))) is not None and layout[2] == 0}


def _view_input(node: Any) -> fx.Node | None:
    """The value the view `node` is taken from (a view's input; a split's input, where `node`
    is one of its pieces); None for other nodes."""
    if not isinstance(node, fx.Node) or node.op != "call_function" or node.kwargs:
        return None
    source = node.args[0] if node.args else None
    if node.target is operator.getitem and isinstance(source, fx.Node) and source.op == "call_function" \
            and source.target in SPLITS and not source.kwargs:
        source = source.args[0]
    elif node.target not in REINTERPRETED:
        return None
    return source if isinstance(source, fx.Node) else None


def _replayed(view: fx.Node, value: torch.Tensor) -> torch.Tensor | None:
    """The view `view` taken from `value` (a meta tensor); None where its arguments are not
    plain ints (or lists of them)."""
    op, rest = view.target, view.args[1:]
    if op is operator.getitem:
        split, piece = view.args
        op, rest = split.target, split.args[1:]
    if not all(type(a) in (int, bool) or isinstance(a, (list, tuple)) and all(type(x) is int for x in a)
               for a in rest):
        return None
    value = op(value, *rest)
    return value[piece] if view.target is operator.getitem else value


def _checkable(node: fx.Node) -> bool:
    """Whether `node` is the result of an aten op computed in the graph (not a view, not an
    in-place op), whose layout its metadata gives and a check at run time confirms. Not a
    graph input, nor a view or in-place result of anything (`select`, `as_strided`, `copy_`):
    a saved activation may arrive in another layout than its metadata's (the leading columns
    of a padded matmul's rows, `FusedRegion._adapt`), which views serve and a check would
    refuse; an op computing a new tensor from it lays that out as its metadata says (dense
    where the input is not)."""
    if node.op != "call_function":
        return False
    op = node.target
    if op is operator.getitem and isinstance(node.args[0], fx.Node) and node.args[0].op == "call_function":
        op = node.args[0].target
    return isinstance(op, torch._ops.OpOverload) and op.namespace == "aten" and not op.is_view \
        and not op._schema.is_mutable  # an in-place op's result is its input


def _reinterpretable(u: Any, layout_known: set[fx.Node], in_region: set[fx.Node]) \
        -> tuple[fx.Node, tuple[tuple[int, ...], tuple[int, ...], int], bool] | None:
    """The value that the view `u` is taken from (through other views left to torch), the
    layout `u` has at run time, and whether that value's layout must be checked first (it is
    not a region's or a matmul's result, whose layouts are known); None where there is none,
    or sizes are not static. The layout comes from replaying the views on a meta tensor of the
    value's layout, not from `u`'s metadata, which a rewrite upstream may have left stale
    (pad_matmuls slices a padded product where the graph had a dense one: its users' metadata
    keeps the dense strides). Views the graph returns keep their op (AOTAutograd regenerates
    aliases of its outputs from their bases)."""
    if _view_input(u) is None or any(user.op == "output" for user in u.users) \
            or _static_layout(u.meta.get("val")) is None:
        return None
    chain = [u]
    base = _view_input(u)
    while base not in layout_known and base not in in_region and (source := _view_input(base)) is not None:
        chain.append(base)
        base = source
    unverified = base not in layout_known
    if unverified and (base in in_region or len(chain) < 2 or not _checkable(base)):
        return None
    layout = _static_layout(base.meta.get("val"))
    if layout is None:
        return None
    sizes, strides, _ = layout
    value = torch.empty_strided(sizes, strides, dtype=base.meta["val"].dtype, device="meta")
    for view in reversed(chain):
        value = _replayed(view, value)
        if value is None:
            return None
    layout = _static_layout(value)
    if layout is None or layout[0] != tuple(u.meta["val"].shape):
        return None
    return base, layout, unverified
