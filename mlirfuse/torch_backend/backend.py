"""The torch.compile backend: AOTAutograd, then mlirfuse on each aten graph.

Dynamo hands the backend a torch-level FX graph, whose attention masks get the layout torch's
fused attention kernels take (attention_masks.py); AOTAutograd (with the decompositions below,
so that layer_norm, softmax, GELU, dropout and their backwards become primitive aten ops)
splits it into forward and backward aten graphs, recomputing cheap ops in the backward
instead of saving them (the min-cut partitioner, as the tutorial's memory_efficient_fusion).
`compile_graph` then leaves float32 addmms' bias to the region after them (unfuse_addmm.py),
pads half-precision matmuls of misaligned sizes (pad_matmul.py), makes
embedding gradients scatter-adds (embedding_grad.py), moves library calls down to their first
use where that holds less memory (memory_order.py), partitions each graph (partition.py),
makes every group a region traced for `mlirfuse.jit` (region.py) and returns the rewritten
graph (runtime.py).

Regions whose traced fusion IR is equal share one jitted function, so one compile serves
repeated layers and the static and dynamic versions of a graph alike; each jitted function
compiles once per signature (dtype, rank, size-1 dims, contiguity, and the last size of each
input whose last size Dynamo holds static: the hidden size, the vocabulary), never per batch
or sequence length.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import fx

from mlirfuse import dump
from mlirfuse.frontend.jit import JitFunction
from mlirfuse.torch_backend.aten_table import LIBRARY, RANDOM, lookup
from mlirfuse.torch_backend.attention_masks import dense_attention_masks
from mlirfuse.torch_backend.cuda_graphs import GraphCompilers, check_mode
from mlirfuse.torch_backend.embedding_grad import scatter_embedding_grads
from mlirfuse.torch_backend.foreach import foreach_decompositions
from mlirfuse.torch_backend.memory_order import sink_library_calls
from mlirfuse.torch_backend.mutations import write_mutations_in_regions
from mlirfuse.torch_backend.pad_matmul import pad_matmuls
from mlirfuse.torch_backend.partition import partition_graph
from mlirfuse.torch_backend.region import LoweringFailed, Region, build_region
from mlirfuse.torch_backend.runtime import FusedRegion, region_module, rewrite
from mlirfuse.torch_backend.unfuse_addmm import unfuse_addmms

aten = torch.ops.aten

# Ops mlirfuse lowers itself, kept whole: core ATen would make the embedding advanced
# indexing (aten.index), which stays in torch, and lerp, addcmul and addcdiv separate
# multiplies and adds, rounded otherwise than torch's kernels round them.
KEPT = {aten.embedding, aten.lerp, aten.lerp_, aten.addcmul, aten.addcmul_, aten.addcdiv, aten.addcdiv_}
# Ops whose Python decomposition torch registers as their autograd kernel (used while
# AOTAutograd traces, whatever the decomposition table says) and which computes something
# else than the op: multilabel_margin_loss_forward's does not end a row's targets at its first
# -1 (3.57 where eager and the definition give 2.02; Inductor and aot_eager give 3.57 too).
# They are left out of the table, and while mlirfuse traces they keep torch's own autograd
# kernel (`_without_wrong_decompositions`): they stay torch calls, their backward the op's own.
WRONG_DECOMPOSITIONS = (aten.multilabel_margin_loss_forward.default,)
# Composite ops decomposed into primitives mlirfuse fuses, on top of the core aten set.
DECOMPOSED = ("native_layer_norm", "_softmax", "_log_softmax", "gelu", "native_dropout", "native_group_norm",
              "native_batch_norm", "_native_batch_norm_legit_functional", "hardtanh", "leaky_relu", "elu")


@functools.cache
def decompositions() -> dict[Any, Callable[..., Any]]:
    """Core ATen's decompositions and DECOMPOSED, less every library op's: those stay library
    calls (a convolution's backward leaves its bias gradient to a fused sum,
    `_convolution_backward`). Decomposing one is not only slower but can be wrong: core ATen decomposes
    `_scaled_dot_product_flash_attention_for_cpu` into math that returns the attention matrix
    where the op returns its logsumexp, and the op's own backward, which AOTAutograd keeps,
    then reads that matrix as the logsumexp (wrong gradients for every CPU attention)."""
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    table.update(get_decompositions([getattr(aten, name) for name in DECOMPOSED if hasattr(aten, name)]))
    table.update(foreach_decompositions())
    table = {op: fn for op, fn in table.items()
             if getattr(op, "overloadpacket", op) not in LIBRARY | KEPT and op not in WRONG_DECOMPOSITIONS}
    table[aten.convolution_backward.default] = _convolution_backward
    table[aten.native_dropout.default] = _native_dropout
    for op in (aten.index_fill.int_Scalar, aten.index_fill.int_Tensor):
        table[op] = functools.partial(_index_fill, table.get(op))
    for op, checked in ((aten.binary_cross_entropy.default, _binary_cross_entropy),
                        (aten.index_add.default, _index_add), (aten.index_add_.default, _index_add)):
        if op in table:  # torch's decomposition, after the check it leaves out
            table[op] = functools.partial(checked, table[op])
    return table


def _binary_cross_entropy(decomposed: Callable[..., Any], input: Any, target: Any, weight: Any = None,
                          reduction: int = 1) -> Any:
    """Eager's kernel rejects an input outside [0, 1] (or NaN); torch's decomposition cannot
    (data-dependent) and returned nan, with grad mode a gradient of 2.5e11 for [1.5, 0.5]
    (found by an OpInfo sweep; Inductor's answer is as wrong). The check runs with the loss:
    a fused all() and torch's `_assert_async` (a RuntimeError on the CPU; on the GPU a
    device-side assert, as eager's CUDA kernel asserts)."""
    inside = torch.logical_and(input >= 0, input <= 1).all()
    torch.ops.aten._assert_async.msg(inside, "all elements of input should be between 0 and 1")
    return decomposed(input, target, weight, reduction)


def _index_add_shapes(x: Any, dim: int, source: Any) -> None:
    """Eager's index_add check that torch's decomposition leaves out: the source's shape is
    the input's outside `dim` (the decomposition broadcast a [2] source over [3, 2] rows;
    found by an OpInfo sweep, Inductor's answer as wrong). Shapes only: raised while tracing."""
    d = dim % max(x.dim(), 1)
    outside = [s for k, s in enumerate(x.shape) if k != d]
    source_outside = [s for k, s in enumerate(source.shape) if k != d]
    if outside != source_outside:
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(x.shape)} source.shape = {list(source.shape)}")


def _index_add(decomposed: Callable[..., Any], x: Any, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
    """index_add or index_add_ (`decomposed`: torch's), after eager's shape check."""
    _index_add_shapes(x, dim, source)
    return decomposed(x, dim, index, source, alpha=alpha)


def _index_fill(decomposed: Callable[..., Any] | None, x: Any, dim: int, index: Any, value: Any) -> Any:
    """index_fill as a select between `value` and `x` where the index along `dim` is one of
    `index` (a pointwise op mlirfuse fuses), after eager's range check (an `_assert_async`, as
    `_binary_cross_entropy`'s). torch's decomposition copies its result into `x`'s strides
    with `prims.copy_strided`, which AOTAutograd rejected on CUDA for a strided `x` (a slice
    with a step: "n=copy_, n.args[0]=empty_permuted", under Inductor too; fuzzing with the
    model ops), and which stayed a torch call on the CPU. A 0-d `x` keeps torch's."""
    if x.dim() == 0 and decomposed is not None:
        return decomposed(x, dim, index, value)
    if index.dtype != torch.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    d = dim % max(x.dim(), 1)
    n = x.shape[d] if x.dim() else 1
    index = index.reshape(-1).to(x.device)
    torch.ops.aten._assert_async.msg(torch.logical_and(index >= -n, index < n).all(),
                                     "index_fill(): index out of range")
    index = torch.where(index < 0, index + n, index)
    hit = (torch.arange(n, device=x.device).unsqueeze(1) == index.unsqueeze(0)).any(1)
    shape = [1] * x.dim()
    if x.dim():
        shape[d] = n
    fill = value.to(x.dtype) if isinstance(value, torch.Tensor) else torch.scalar_tensor(value, dtype=x.dtype,
                                                                                          device=x.device)
    return torch.where(hit.view(shape), fill, x)


def _native_dropout(input: Any, p: float, train: bool | None) -> Any:
    """torch's decomposition, with the uniform numbers in float32, as eager's kernel draws
    them. The decomposition's `rand_like(input)` is bfloat16 for a bfloat16 input, and torch's
    bfloat16 uniforms take the values k/256 in [0.5, 1): `> p` then dropped 129/256 of the
    elements at p = 0.5 (0.5039 over 4.1M samples, eager 0.5000; found by black-box review)."""
    if train and p != 0:
        if p == 1:
            return torch.zeros_like(input), torch.zeros_like(input, dtype=torch.bool)
        if not input.dtype.is_floating_point:
            raise RuntimeError("result type Float can't be cast to the desired output type Long")
        mask = torch.rand_like(input, dtype=torch.float32) > p
        return mask * input * float(1.0 / (1.0 - p)), mask
    return input, torch.ones_like(input, dtype=torch.bool)


def _convolution_backward(grad_output: Any, input: Any, weight: Any, bias_sizes: Any, stride: Any, padding: Any,
                          dilation: Any, transposed: bool, output_padding: Any, groups: int,
                          output_mask: list[bool]) -> Any:
    """The bias gradient of a convolution's backward as a sum over every dim of the output's
    gradient but the channels (a fused reduction, in the region that computes that gradient),
    the rest by the library op (Inductor's decomposition: the library computed it with a
    reduce kernel of its own after cuDNN's, a launch a convolution)."""
    if not output_mask[2]:
        return NotImplemented  # the library op, as it is
    grad_bias = aten.sum.dim_IntList(grad_output, [0, *range(2, grad_output.dim())])
    grad_input, grad_weight, _ = aten.convolution_backward.default(
        grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
        [output_mask[0], output_mask[1], False])
    return grad_input, grad_weight, grad_bias


class _Registry:
    """The explicit caches of this module: jitted functions by fusion IR, and counters."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jitted: dict[tuple, JitFunction] = {}  # by fusion IR and results written into inputs
        self.graphs: Counter[str] = Counter()
        self.regions = 0
        self.captured: list[tuple[str, Any]] | None = None  # (graph kind, Partition) while capturing

    def jit_for(self, region: Region) -> JitFunction:
        with self.lock:
            self.regions += 1
            static_last = region.static_last()
            key = (region.fusion_ir, tuple(sorted(region.into.items())), static_last)
            jitted = self.jitted.get(key)
            if jitted is None:
                jitted = self.jitted[key] = JitFunction(region.trace, into=region.into, static_last=static_last)
            return jitted


_REGISTRY = _Registry()


def stats() -> dict[str, Any]:
    """Graphs compiled (per kind), regions built, distinct fusions, and mlirfuse compiles
    (summed over the fusions' jit caches)."""
    with _REGISTRY.lock:
        jitted = list(_REGISTRY.jitted.values())
        return {"graphs": dict(_REGISTRY.graphs), "regions": _REGISTRY.regions, "fusions": len(jitted),
                "compiles": sum(j.cache_info().compiles for j in jitted)}


def reset() -> None:
    """Forget the shared jitted functions and counters (tests; compiled graphs keep theirs)."""
    with _REGISTRY.lock:
        _REGISTRY.jitted.clear()
        _REGISTRY.graphs.clear()
        _REGISTRY.regions = 0


@contextlib.contextmanager
def capture_partitions() -> Iterator[list[tuple[str, Any]]]:
    """Collect `(graph kind, Partition)` for every graph compiled inside the block: what each
    graph fused and what it left to torch, with the reasons (`Partition.left`)."""
    captured: list[tuple[str, Any]] = []
    with _REGISTRY.lock:
        previous, _REGISTRY.captured = _REGISTRY.captured, captured
    try:
        yield captured
    finally:
        with _REGISTRY.lock:
            _REGISTRY.captured = previous


def partition_and_trace(gm: fx.GraphModule) -> tuple[Any, list[Region]]:
    """Partition the graph; a node whose lowering fails goes to torch and the graph is
    partitioned again, until every group traces."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # random ops: a Philox stream each, numbered in graph order (see `Region.streams`)
    streams = {n: k for k, n in enumerate(n for n in gm.graph.nodes if _random(n))}
    forced: dict[fx.Node, str] = {}
    while True:
        partition = partition_graph(gm.graph, forced)
        try:
            return partition, [build_region(g, placeholders, streams) for g in partition.groups]
        except LoweringFailed as e:
            if e.node in forced:  # cannot happen: a forced node is in no group
                raise
            forced[e.node] = f"lowering failed: {e.reason}"


def _random(node: fx.Node) -> bool:
    row = lookup(node.target) if node.op == "call_function" else None
    return row is not None and row.kind == RANDOM


def compile_graph(gm: fx.GraphModule, example_inputs: Any, kind: str = "forward") -> Callable[..., Any]:
    """AOTAutograd's compiler: the aten graph with its fusible groups run by mlirfuse."""
    return _compile_graph(gm, kind)[0]


def _compile_graph(gm: fx.GraphModule, kind: str) -> tuple[Callable[[list[Any]], Any], list[FusedRegion]]:
    """The rewritten graph (`_boxed`) and its fused regions."""
    with _REGISTRY.lock:
        _REGISTRY.graphs[kind] += 1
        key = f"{kind}{_REGISTRY.graphs[kind] - 1}"
    unfuse_addmms(gm)
    pad_matmuls(gm)
    scatter_embedding_grads(gm)
    sink_library_calls(gm, kind)
    dump.emit("fx_graph", f"{kind} graph:\n" + gm.print_readable(print_output=False), key)
    partition, regions = partition_and_trace(gm)
    if kind == "inference":
        write_mutations_in_regions(gm.graph, partition, regions)
    with _REGISTRY.lock:
        if _REGISTRY.captured is not None:
            _REGISTRY.captured.append((kind, partition))
    fused = [FusedRegion(r, _REGISTRY.jit_for(r), region_module(gm, r), _REGISTRY.jit_for) for r in regions]
    compiled = rewrite(gm, partition, fused)
    if dump.enabled("partition"):
        lines = [f"{kind} graph: " + partition.describe()]
        for r in regions:
            donors = r.inputs[len(r.inputs) - r.n_donors:]
            lines.append(f"{r.name}: inputs {[n.name for n in r.inputs[:len(r.inputs) - r.n_donors]]}"
                         + (f", size donors {[n.name for n in donors]}" if donors else "")
                         + (f", a seed for {len(r.streams)} random op(s)" if r.seeded else "")
                         + f"; outputs {[n.name for n in r.outputs]}")
        lines.append("the compiled graph:" + compiled.code)
        dump.emit("partition", "\n".join(lines), key)
    return _boxed(compiled), fused


def _boxed(compiled: fx.GraphModule) -> Callable[[list[Any]], Any]:
    """The graph under the boxed convention (AOTAutograd's and Inductor's compiled graphs'):
    called with a list of its inputs, which it empties, so that each input the graph reads is
    freed after its last use, as the graph's own values are: a backward's saved activations as
    the graph goes, not all at its end (a plain call keeps them in the caller's list)."""
    try:
        from torch.fx.graph import _BoxedCodeGen
    except ImportError:  # torch before 2.10: the list emptied, the inputs kept to the end
        forward = compiled.forward

        def run(args: list[Any]) -> Any:
            inputs = list(args)
            args.clear()
            return forward(*inputs)
    else:
        compiled.graph.set_codegen(_BoxedCodeGen())
        compiled.recompile()
        forward = compiled.forward

        def run(args: list[Any]) -> Any:
            return forward(args)
    run._boxed_call = True  # type: ignore[attr-defined]
    return run


COMPARISONS = (aten.eq.Tensor, aten.ne.Tensor)


def partition_joint_graph(joint: fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
    """AOTAutograd's min-cut partitioner (recompute cheap ops in the backward instead of saving
    them), except for forward values that the backward compares for equality: those are saved.

    amax/amin/max's backward compares the saved result with the op's input (`x == amax`) and
    divides by the number of matches. Recomputed in the backward by another kernel, the input
    need not be bit-identical to what the forward's kernel reduced (vectorization, contraction,
    another fusion): a row matching nothing gave 0 / 0 (NaN gradients, found by the fuzzer on
    one host's CPU). Saved, both sides come from the forward, as in eager."""
    from functorch.compile import min_cut_rematerialization_partition
    from torch.utils.checkpoint import CheckpointPolicy

    backward = _depends_on_tangents(joint.graph)
    for node in joint.graph.nodes:
        if node.op == "call_function" and node.target in COMPARISONS:
            for arg in node.all_input_nodes:
                if arg.op == "call_function" and arg not in backward:
                    arg.meta["recompute"] = CheckpointPolicy.MUST_SAVE
    return min_cut_rematerialization_partition(joint, joint_inputs, **kwargs)


def _depends_on_tangents(graph: fx.Graph) -> set[fx.Node]:
    """The nodes of a joint graph computed from the output gradients (the backward's own)."""
    found: set[fx.Node] = set()
    for node in graph.nodes:
        if node.op == "placeholder" and node.name.startswith("tangents") or \
                any(a in found for a in node.all_input_nodes):
            found.add(node)
    return found


def mlirfuse_backend(gm: fx.GraphModule, example_inputs: Any, mode: str | None = None,
                     options: Any = None) -> Callable[..., Any]:
    """`torch.compile(fn, backend="mlirfuse")`: forward and backward graphs fused by mlirfuse.
    `mode="reduce-overhead"` replays each graph as a CUDA graph (cuda_graphs.py)."""
    from torch._dynamo.backends.common import aot_autograd

    if check_mode(mode, options):
        graphs = GraphCompilers(_compile_graph, len(example_inputs))
        compilers = {"fw_compiler": graphs.forward, "bw_compiler": graphs.backward,
                     "inference_compiler": graphs.inference}
    else:
        compilers = {"fw_compiler": functools.partial(compile_graph, kind="forward"),
                     "bw_compiler": functools.partial(compile_graph, kind="backward"),
                     "inference_compiler": functools.partial(compile_graph, kind="inference")}
    backend = aot_autograd(
        **compilers,
        decompositions=decompositions(),
        partition_fn=partition_joint_graph,
        # An inference graph's input mutations stay in it (`copy_` nodes): regions write them
        # (mutations.py) instead of AOTAutograd copying every one after the graph.
        keep_inference_input_mutations=True,
    )
    dense_attention_masks(gm)
    with _without_wrong_decompositions():
        return backend(gm, example_inputs)


_TRACING = threading.RLock()  # a compile inside a compile (same thread) takes it again


@contextlib.contextmanager
def _without_wrong_decompositions() -> Iterator[None]:
    from torch._C import DispatchKey

    with _TRACING:
        removed = {op: op.py_kernels.pop(DispatchKey.Autograd) for op in WRONG_DECOMPOSITIONS
                   if DispatchKey.Autograd in op.py_kernels}
        for op in removed:
            op._dispatch_cache.clear()
        try:
            yield
        finally:
            for op, kernel in removed.items():
                op.py_kernels[DispatchKey.Autograd] = kernel
                op._dispatch_cache.clear()
