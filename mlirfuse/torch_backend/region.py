"""A fused group as an mlirfuse function: its inputs, outputs, and the traced definition.

`build_region` turns a partition group into a `Region`: the group's external inputs
(tensors and symbolic scalars, in first-use order), size donors (graph inputs that carry a
symbolic size the group needs but none of its inputs has), a runtime seed where the group
draws random numbers, and its outputs (members read outside the group). `Region.trace` is a
plain function over mlirfuse ops, for `mlirfuse.jit`: it lowers every member through the
aten table, resolving symbolic sizes (sympy expressions over dynamo's size symbols) to the
symbolic extents of the traced inputs. The region is traced once at graph-compile time
(`dry_trace`), so a node that cannot be lowered is known, and left to torch, before anything
runs; the fusion IR of that trace identifies the region (equal IR, one shared compile).
Members read outside that are only views of the group's inputs, views the graph returns
of another of its outputs, or reshapes of another (dense) output, are not region outputs
(`view_outputs`: torch takes them again, free, and they alias what they view as in eager).
An input laid out as the leading columns of a dense tensor's rows (`row_pitch`: logits
sliced from a padded matmul) is taken as those whole rows and sliced in the region, so its
kernels read it in place instead of a dense copy.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
from torch import fx
from torch.utils._sympy.functions import FloorDiv

from mlirfuse import ops
from mlirfuse.dtypes import DataType, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import Fusion, InputSpec, Tensor, tracing
from mlirfuse.frontend.indexing import slice_length
from mlirfuse.frontend.symbolic import SymSize
from mlirfuse.torch_backend import aten_table as A
from mlirfuse.torch_backend.partition import Group, data_inputs, kind, tensor_vals

SCALARS = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)
aten = torch.ops.aten


class LoweringFailed(Exception):
    """A member of a group cannot be lowered; the partitioner leaves it to torch."""

    def __init__(self, node: fx.Node, reason: str):
        super().__init__(f"{node.name}: {reason}")
        self.node = node
        self.reason = reason


class _MissingSize(Exception):
    def __init__(self, node: fx.Node, symbols: set[sympy.Symbol], expr: Any):
        super().__init__(f"{node.name}: size {expr} needs {sorted(map(str, symbols))}")
        self.node, self.symbols, self.expr = node, symbols, expr


def size_expr(s: Any) -> sympy.Expr:
    return s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(int(s))


def _arg_size_exprs(arg: Any) -> list[tuple[sympy.Expr, ...]]:
    """torch's symbolic sizes (sympy) of the tensors of an argument, one tuple per tensor."""
    args = arg if isinstance(arg, (list, tuple)) else [arg]
    return [tuple(size_expr(s) for s in v.meta["val"].shape) for v in args
            if isinstance(v, fx.Node) and isinstance(v.meta.get("val"), torch.Tensor)]


def _scalar_dtype(val: Any) -> DataType:
    if isinstance(val, (bool, torch.SymBool)):
        return DataType.Bool
    if isinstance(val, (int, torch.SymInt)):
        return DataType.Int
    return DataType.Double


@dataclass
class Region:
    name: str
    nodes: list[fx.Node]
    inputs: list[fx.Node]  # external data inputs, then size donors
    outputs: list[fx.Node]  # members read outside the group (graph order), computed by the region
    n_donors: int = 0
    # Philox streams (offsets): the graph's regions share one seed per call, and the graph's
    # k-th random op in graph order takes stream k, the same in a model's training forward
    # and inference graphs, which group the ops differently (reentrant checkpointing runs one
    # and recomputes with the other). `first_offset`, the region's lowest stream, is an argument
    # of its call; its ops' streams above it (`streams`) are constants of its fusion, so
    # identical layers keep one fusion and one compile.
    first_offset: int = 0
    streams: dict[fx.Node, int] = field(default_factory=dict)  # random op -> its stream - first_offset
    fusion_ir: str = ""
    output_index: list[int] = field(default_factory=list)  # output k -> result position (or -1 - input)
    # output k -> the permute back to torch's order (its memory order where k is an input's copy)
    output_layout: list[tuple[int, ...] | None] = field(default_factory=list)
    size_args: list[fx.Node] = field(default_factory=list)  # symbolic sizes the members' torch calls read
    # Input k -> the rows of a dense tensor it is the first columns of (see `row_pitch`): the
    # region takes those whole rows and slices them itself, reading the columns in place.
    widened: dict[int, RowPitch] = field(default_factory=dict)
    # Members read outside the group that are views of its inputs (the logits sliced from a
    # padded product, which the model returns and the loss reads): torch takes the views
    # from the inputs again (free), and the region does not write a copy.
    view_outputs: list[fx.Node] = field(default_factory=list)
    # Result position -> the input it is written into (an input mutation, `mutations.py`).
    into: dict[int, int] = field(default_factory=dict)

    @property
    def seeded(self) -> bool:
        return bool(self.streams)

    def specs(self) -> list[InputSpec]:
        """The jit signature the graph's metadata predicts (sizes 1 stay static)."""
        specs = []
        for k, node in enumerate(self.inputs):
            val = node.meta["val"]
            if isinstance(val, torch.Tensor):
                sizes = self.widened[k].wide_sizes if k in self.widened else val.shape
                shape = tuple(1 if size_expr(s) == 1 else None for s in sizes)
                specs.append(InputSpec(to_dtype(val.dtype), shape))
            else:
                specs.append(InputSpec(_scalar_dtype(val), (), scalar=True))
        if self.seeded:  # the seed, a 0-d int64 tensor on the region's device (drawn there by
            # the graph), and the first op's Philox offset, an int
            specs += [InputSpec(DataType.Int, ()), InputSpec(DataType.Int, (), scalar=True)]
        return specs

    def static_last(self) -> tuple[int, ...]:
        """The inputs whose last size is static in the graph (an integer in Dynamo's metadata,
        as the hidden size and the vocabulary stay where batch and sequence become symbolic):
        their kernels are compiled for that row length (`JitFunction.static_last`). Only the
        last dim, so that a graph's static and dynamic versions still share a compile."""
        return tuple(k for k, node in enumerate(self.inputs)
                     if isinstance(val := node.meta["val"], torch.Tensor) and val.dim()
                     and (k in self.widened or size_expr(val.shape[-1]).is_Integer))

    # -- the traced definition -----------------------------------------------------------
    def trace(self, *args: Any) -> tuple[Tensor, ...]:
        """The region over mlirfuse ops: args are the inputs (then, if seeded, the 0-d seed and
        the first random op's offset)."""
        env: dict[fx.Node, Any] = dict(zip(self.inputs, args))
        for k, pitch in self.widened.items():
            env[self.inputs[k]] = slice_length(args[k], len(pitch.sizes) - 1, 0, 1, pitch.sizes[-1])
        seed, base = args[len(self.inputs):len(self.inputs) + 2] if self.seeded else (None, None)
        sizes: dict[sympy.Expr, Any] = {}
        widened_nodes = {self.inputs[k] for k in self.widened}
        for node, t in zip(self.inputs, args):
            val = node.meta["val"]
            if isinstance(val, torch.Tensor) and node not in widened_nodes:
                for d, s in enumerate(val.shape):
                    if not size_expr(s).is_Integer:  # static sizes stay constants
                        sizes.setdefault(size_expr(s), t.shape[d])
        for node in self.nodes:
            if node.target is operator.getitem:
                env[node] = env[node.args[0]][node.args[1]]
                continue
            row = A.lookup(node.target)
            bound = A.bind(node.target, node.args, node.kwargs)
            args_ = {k: _substitute(v, env) for k, v in bound.items()}
            val = node.meta["val"]
            first = tensor_vals(val)[0]
            ctx = A.LoweringContext(to_dtype(first.dtype), lambda n=node, v=first: self._shape(n, v, sizes),
                                    seed, _stream(base, self.streams.get(node, 0)),
                                    lambda name, n=node, b=bound: self._arg_shapes(n, b[name], sizes),
                                    lambda name, b=bound: _arg_size_exprs(b[name]), first.device.type)
            try:
                result = row.lower(ctx, args_)
            except FusionError as e:
                raise LoweringFailed(node, str(e)) from None
            except (_MissingSize, LoweringFailed):  # (a size the region cannot compute: a sum of two)
                raise
            except Exception as e:  # noqa: BLE001 - a lowering's own bug: the node runs in torch, said aloud
                reason = f"internal error in its lowering ({type(e).__name__}: {e})"
                warnings.warn(f"mlirfuse: {node.target} ({node.name}) runs in torch: {reason}; please report it",
                              RuntimeWarning, stacklevel=2)
                raise LoweringFailed(node, reason) from None
            env[node] = _conform(node, result, val)
        results: list[Tensor] = []
        made: dict[tuple[int, tuple[int, ...] | None], int] = {}
        self.output_index, self.output_layout = [], []
        inputs = {id(a): i for i, a in enumerate(args)}
        copies: dict[int, Tensor] = {}
        storage: dict[tuple[int, tuple[int, ...] | None], Any] = {}
        for out in self.outputs:
            t = env[out]
            order = physical_order(out.meta["val"])
            if id(t) in inputs:
                # An identity of an input (a cat of it and empty tensors, a contiguous clone):
                # a copy in torch's memory order. The kernels write it where that order is
                # known (one launch with the region's other work: GPT-2's KV-cache cats of
                # keys and values); else the caller copies (see `copy_in_order`).
                if memory_order(out.meta["val"]) is None:
                    self.output_index.append(-1 - inputs[id(t)])
                    self.output_layout.append(None)
                    continue
                if id(t) not in copies:
                    copies[id(t)] = ops.copy(t)
                t = copies[id(t)]
            # Outputs that trace to one value share a result only where torch's are one tensor
            # too (an alias or detach of the other); a clone, a copying `to` or a cat of one
            # tensor is memory of its own (returned as one, writing into the copy changed the
            # original, and autograd lost it).
            if (id(t), order) in made and storage[(id(t), order)] != _storage(out):
                t = ops.copy(t)
            # Written in torch's memory order: the kernel stores the permuted tensor densely
            # and the caller permutes it back, a view with the strides torch's metadata has.
            if (id(t), order) not in made:
                made[(id(t), order)] = len(results)
                storage[(id(t), order)] = _storage(out)
                results.append(t if order is None else ops.permute(t, list(order)))
            self.output_index.append(made[(id(t), order)])
            self.output_layout.append(None if order is None else inverse_permutation(order))
        return tuple(results)

    def _shape(self, node: fx.Node, val: torch.Tensor, sizes: dict[sympy.Expr, Any]) -> tuple:
        return tuple(_resolve(node, size_expr(s), sizes) for s in val.shape)

    def _arg_shapes(self, node: fx.Node, arg: Any, sizes: dict[sympy.Expr, Any]) -> list[tuple]:
        args = arg if isinstance(arg, (list, tuple)) else [arg]
        return [self._shape(node, v.meta["val"], sizes) for v in args
                if isinstance(v, fx.Node) and isinstance(v.meta.get("val"), torch.Tensor)]

    def dry_trace(self) -> str:
        """Trace with the signature the metadata predicts; returns the fusion IR."""
        fusion = Fusion()
        with tracing(fusion):
            traced = [fusion.add_input(spec) for spec in self.specs()]
            for t in self.trace(*traced):
                fusion.add_output(t)
        return fusion.to_mlir()


@dataclass(frozen=True)
class RowPitch:
    """A tensor laid out as the first columns of the rows of a dense tensor: static `sizes`
    and `strides`, unit inner stride, rows `pitch` elements apart (the logits sliced from a
    matmul padded to aligned rows: [8, 512, 50257] with strides [512 * 50264, 50264, 1])."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    pitch: int

    @property
    def wide_sizes(self) -> tuple[int, ...]:
        return self.sizes[:-1] + (self.pitch,)

    @property
    def wide_strides(self) -> tuple[int, ...]:
        strides, step = [], 1
        for n in reversed(self.wide_sizes):
            strides.append(step)
            step *= n
        return tuple(reversed(strides))


def row_pitch(val: Any) -> RowPitch | None:
    """The tensor's layout as the first columns of a dense tensor's rows, where it is one
    (static sizes and strides, not contiguous itself); else None."""
    if not isinstance(val, torch.Tensor) or val.dim() < 2:
        return None
    sizes, strides = tuple(val.shape), tuple(val.stride())
    if not all(type(x) is int for x in sizes + strides) or 0 in sizes or strides[-1] != 1 or sizes[-2] == 1:
        return None
    pitch = strides[-2]
    if pitch <= sizes[-1]:
        return None
    step = pitch
    for d in range(len(sizes) - 2, -1, -1):
        if sizes[d] != 1 and strides[d] != step:
            return None
        step *= sizes[d]
    return RowPitch(sizes, strides, pitch)


def _hint(s: Any) -> int | None:
    """A size or stride as the int it had when the graph was traced (None if unknown)."""
    if isinstance(s, torch.SymInt):
        return s.node.hint
    return int(s)


def physical_order(val: torch.Tensor) -> tuple[int, ...] | None:
    """The dims of a dense tensor from outermost to innermost in memory, where that is not
    their logical order (None: row-major, or not a permutation of a dense layout). Size-1
    dims keep their place: any stride serves them."""
    order = memory_order(val)
    return None if order == tuple(range(val.dim())) else order


def memory_order(val: torch.Tensor) -> tuple[int, ...] | None:
    """The dims of a dense tensor from outermost to innermost in memory (None: not a
    permutation of a dense layout, or not known from the hints)."""
    sizes = [_hint(s) for s in val.shape]
    strides = [_hint(s) for s in val.stride()]
    if None in sizes or None in strides or 0 in sizes:
        return None
    order = tuple(sorted(range(len(sizes)), key=lambda d: -strides[d]))  # stable: ties keep their place
    expected = 1
    for d in reversed(order):
        if sizes[d] != 1 and strides[d] != expected:
            return None
        expected *= sizes[d]
    return order


def copy_in_order(t: torch.Tensor, order: tuple[int, ...] | None) -> torch.Tensor:
    """A dense copy of `t` laid out in `order` (outermost dim first); None: `t`'s own order."""
    if order is None:
        return t.clone()
    if order == tuple(range(t.dim())):
        return t.clone(memory_format=torch.contiguous_format)
    return t.permute(order).clone(memory_format=torch.contiguous_format).permute(inverse_permutation(order))


def inverse_permutation(order: tuple[int, ...]) -> tuple[int, ...]:
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return tuple(inverse)


def _substitute(value: Any, env: dict[fx.Node, Any]) -> Any:
    if isinstance(value, fx.Node):
        return env.get(value, value)
    if isinstance(value, (list, tuple)):
        return type(value)(_substitute(v, env) for v in value)
    return value


def _conform(node: fx.Node, result: Any, val: Any) -> Any:
    """Cast the lowering's result(s) to the dtypes torch's metadata says; check ranks."""
    if isinstance(result, (tuple, list)):
        return tuple(_conform(node, r, v) for r, v in zip(result, val))
    if not isinstance(result, Tensor):
        result = ops.cast(result, to_dtype(val.dtype))
    # Every value of the graph is a tensor: never weakly typed in promotion as a Python number
    # is (GPT-2's causal mask `where(m, full([], 0.), scalar_tensor(finfo(float64).min))` was
    # computed in float32 and overflowed to -inf).
    result = ops.as_tensor(result)
    if result.ndim != val.dim():
        raise LoweringFailed(node, f"lowered to rank {result.ndim}, torch says rank {val.dim()}")
    want = to_dtype(val.dtype)
    return result if result.dtype is want else ops.cast(result, want)


def _storage(node: fx.Node) -> Any:
    """The identity of the memory torch's value of `node` is in (views share it)."""
    from torch.multiprocessing.reductions import StorageWeakRef

    return StorageWeakRef(node.meta["val"].untyped_storage())


def _resolve(node: fx.Node, expr: sympy.Expr, sizes: dict[sympy.Expr, Any]) -> Any:
    """A size expression as an mlirfuse size: an input extent, or a product (or exact
    quotient) of them."""
    if expr in sizes:
        return sizes[expr]
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        raise _MissingSize(node, {expr}, expr)
    if expr.is_Mul:
        result: Any = 1
        for f in expr.args:
            v = _resolve(node, f, sizes)
            result = v * result if not isinstance(v, int) else result * v
        return result
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
        base = _resolve(node, expr.base, sizes)
        result = base
        for _ in range(int(expr.exp) - 1):
            result = result * base
        return result
    if expr.is_Add:  # a dynamic size plus a constant (pads and slices of a dynamic dim)
        result = 0
        for term in expr.args:
            try:
                result = result + _resolve(node, term, sizes)
            except TypeError:
                raise LoweringFailed(node, f"size {expr} is not a product of input sizes plus a constant") from None
        return result
    if isinstance(expr, FloorDiv):
        num, den = _resolve(node, expr.args[0], sizes), _resolve(node, expr.args[1], sizes)
        if isinstance(num, int) and isinstance(den, int):
            return num // den
        if node.target in EXACT_QUOTIENTS and isinstance(num, SymSize):
            # A view's inferred dim: torch checked that it divides (a size's `//` is exact
            # division, checked at run time). Kept for the view's readers, which see it too.
            sizes[expr] = num // den
            return sizes[expr]
        # Elsewhere a quotient rounds down (x[1::2] of an odd dim: S // 2), which a size
        # (a product of input sizes plus a constant) cannot say: the node runs in torch.
        raise LoweringFailed(node, f"size {expr} rounds a quotient of dynamic sizes down")
    raise LoweringFailed(node, f"size {expr} is not a product of input sizes")


def _stream(base: Any, above: int) -> Any:
    """A random op's Philox offset: the region's first (traced), plus its own above that."""
    return base + above if above else base


def build_region(group: Group, placeholders: list[fx.Node], streams: dict[fx.Node, int]) -> Region:
    """The group's inputs, outputs and size donors; dry-traced (raises LoweringFailed). Its
    random ops take their Philox streams from `streams` (the graph's random ops numbered in
    graph order)."""
    inside = set(group.nodes)
    inputs: list[fx.Node] = []
    for n in group.nodes:
        for d in data_inputs(n):
            if d not in inside and d not in inputs:
                val = d.meta.get("val")
                if not isinstance(val, (torch.Tensor,) + SCALARS):
                    raise LoweringFailed(n, f"input {d.name} is neither a tensor nor a scalar")
                inputs.append(d)
    outputs = [n for n in group.nodes if any(u not in inside for u in n.users)]
    view_outputs = [n for n in outputs if _view_of_inputs(n, inside)]
    # Views of another output: taken again by torch from that output. Those the graph returns,
    # so that they alias it as in eager (a zeros tensor and its view, both returned); reshapes
    # of a dense output read by other ops, because they are free there and a second output
    # would be a copy (GPT-2's LayerNorm gradient, also viewed as [tokens, hidden]).
    computed = {n for n in outputs if n not in view_outputs}
    view_outputs += [n for n in outputs if n not in view_outputs
                     and (any(u.op == "output" for u in n.users) or _dense_reshape_of(n, computed))
                     and any(b in computed for b in _view_bases(n))]
    if len(view_outputs) < len(outputs):  # (a region computing nothing read outside stays whole)
        outputs = [n for n in outputs if n not in view_outputs]
    else:
        view_outputs = []
    for n in outputs:
        if not isinstance(n.meta.get("val"), torch.Tensor):
            raise LoweringFailed(n, "a multi-result op read whole outside the group")
    mine = {n: streams[n] for n in group.nodes if kind(n) == A.RANDOM}
    first = min(mine.values(), default=0)
    region = Region(group.name, group.nodes, inputs, outputs, 0, first, {n: k - first for n, k in mine.items()})
    region.view_outputs = view_outputs
    region.widened = {k: pitch for k, d in enumerate(inputs) if (pitch := row_pitch(d.meta["val"])) is not None}
    region.size_args = [d for n in group.nodes for d in n.all_input_nodes if d not in inside and d not in inputs]
    region.size_args = list(dict.fromkeys(region.size_args))
    if not any(isinstance(d.meta["val"], torch.Tensor) for d in inputs):
        # Computed from constants only (a causal mask): a graph input on the group's device,
        # unread, makes the region run there.
        device = outputs[0].meta["val"].device
        carrier = next((p for p in placeholders if isinstance(p.meta.get("val"), torch.Tensor)
                        and p.meta["val"].device == device), None)
        if carrier is None:
            raise LoweringFailed(group.nodes[0], f"computed from constants only, and no graph input is on {device}")
        region.inputs.append(carrier)
        region.n_donors += 1
    while True:
        try:
            region.fusion_ir = region.dry_trace()
            return region
        except _MissingSize as e:
            donor = _donor(e.symbols, placeholders, region.inputs)
            if donor is None:
                raise LoweringFailed(e.node, f"size {e.expr} cannot be computed from the group's inputs") from None
            region.inputs.append(donor)
            region.n_donors += 1
        except FusionError as e:
            raise LoweringFailed(group.nodes[0], f"tracing the group failed: {e}") from None


# Ops whose result is always a view of their first argument (no copy, whatever the layout).
VIEW_OPS = (aten.view.default, aten._unsafe_view.default, aten.permute.default, aten.unsqueeze.default,
            aten.squeeze.dim, aten.squeeze.dims, aten.expand.default, aten.t.default, aten.transpose.int,
            aten.slice.Tensor, aten.select.int, aten.alias.default)


def _view_of_inputs(node: fx.Node, inside: set[fx.Node]) -> bool:
    """`node` is a view, of a view ..., of a value from outside the group."""
    return any(b not in inside for b in _view_bases(node))


def _view_bases(node: fx.Node) -> Iterator[fx.Node]:
    """The values `node` is a view of, through its chain of views, nearest first."""
    while node.op == "call_function" and node.target in VIEW_OPS and isinstance(node.args[0], fx.Node):
        node = node.args[0]
        yield node


# Views that keep a dense tensor dense, in the same element order.
# Ops whose sizes' quotients are exact (torch's view checked the inferred dim divides).
EXACT_QUOTIENTS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
RESHAPES = (aten.view.default, aten._unsafe_view.default, aten.unsqueeze.default, aten.squeeze.dim,
            aten.squeeze.dims, aten.alias.default)


def _dense_reshape_of(node: fx.Node, computed: set[fx.Node]) -> bool:
    """`node` is reshapes, through reshapes only, of a computed output whose value is dense
    (contiguous in its metadata, as the region writes it): torch's view of that output is
    then dense too, as the region would have written it."""
    for base in _view_bases(node):
        if base in computed:
            val = base.meta.get("val")
            return isinstance(val, torch.Tensor) and val.is_contiguous() and _reshapes_only(node, base)
    return False


def _reshapes_only(node: fx.Node, base: fx.Node) -> bool:
    """Every view from `node` (included) back to its view base `base` is a reshape."""
    while node is not base:
        if node.target not in RESHAPES:
            return False
        node = node.args[0]
    return True


def _donor(symbols: set[sympy.Symbol], placeholders: list[fx.Node], taken: list[fx.Node]) -> fx.Node | None:
    """A graph input tensor with one of `symbols` as an extent."""
    for p in placeholders:
        val = p.meta.get("val")
        if p in taken or not isinstance(val, torch.Tensor):
            continue
        if any(size_expr(s) in symbols for s in val.shape):
            return p
    return None
