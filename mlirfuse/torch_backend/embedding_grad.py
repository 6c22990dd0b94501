"""Embedding gradients as row scatter-adds (`index_add_`), Inductor's decomposition of
`embedding_dense_backward`.

torch's CUDA `embedding_dense_backward` sorts the indices when there are more than 3072 of
them (8 x 512 tokens are 4096): about eleven launches per embedding. On the H100 a GPT-2 f32
training step spent 23 launches and 149 us of GPU time in its two embeddings' gradients, BERT's
three 50 launches and 273 us, where Inductor's atomic scatter takes 3-4 launches.

`scatter_embedding_grads` rewrites, before partitioning, each `embedding_dense_backward` (unless
it scales by frequency) into `scatter_embedding_grad`: the output gradient's rows added into the
weight's gradient at their indices, one `index_add_` (atomic adds on the GPU). Where the only
use of the gradient is a sum with another gradient of the same weight (GPT-2's and BERT's output
projection shares the word embedding's weight: `add(mm, embedding_dense_backward(...))`), the
rows are added into that gradient instead: in place where it is a fresh tensor read by nothing
else (a matmul's result or a cast of it, through views), else into a copy. The zeroed gradient
and the sum, two passes over a vocabulary-sized tensor, are gone.

A table of few rows (BERT's two token types) would make every atomic add of a batch wait on the
same few addresses: its gradient is instead a sum over the tokens of the gradient rows masked
by `index == row` (a column reduction per row, which mlirfuse fuses into one launch;
deterministic).

Rows of `padding_idx` get no gradient: the rewrite zeroes the output gradient's rows there with a
`where` that joins the group producing the gradient. Atomic adds make the order of the sums vary
from run to run on the GPU: under `torch.use_deterministic_algorithms(True)` the call is torch's
own (sorted, deterministic) `embedding_dense_backward` instead, as Inductor falls back.
"""

from __future__ import annotations

import torch
from torch import fx

from mlirfuse import config
from mlirfuse.torch_backend.graph_edit import new_node

aten, prims = torch.ops.aten, torch.ops.prims

MATMULS = (aten.mm.default, aten.addmm.default, aten.bmm.default)
CASTS = (aten._to_copy.default, prims.convert_element_type.default)
SMALL_TABLE = 16  # rows: up to this many, the gradient is a masked sum (no atomic contention)
# Views whose result writes through to their input (no expand: its elements share memory).
VIEWS = (aten.permute.default, aten.t.default, aten.transpose.int, aten.view.default, aten._unsafe_view.default,
         aten.slice.Tensor, aten.alias.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims)


def scatter_embedding_grad(into: torch.Tensor | None, grad: torch.Tensor, indices: torch.Tensor,
                           num_weights: int, in_place: bool) -> torch.Tensor:
    """The weight gradient of an embedding (plus `into`, where given): the rows of `grad`
    (indices.shape + [dim]) added at `indices`, whose padding rows the caller zeroed. `into` is
    written in place when `in_place`."""
    dim = grad.shape[-1]
    if grad.is_cuda and torch.are_deterministic_algorithms_enabled():
        weight_grad = aten.embedding_dense_backward(grad, indices, num_weights, -1, False)
        return weight_grad if into is None else into.add_(weight_grad) if in_place else into + weight_grad
    if into is None:
        out = grad.new_zeros(num_weights, dim)
    else:
        out = into if in_place else into.clone()
    return out.index_add_(0, indices.reshape(-1), grad.reshape(-1, dim))


scatter_embedding_grad.library_call = True  # type: ignore[attr-defined]  # stays a torch call
# what it writes into (`memory_order`: nothing that reads `into` moves past it)
scatter_embedding_grad.writes_into = lambda into, grad, indices, num_weights, in_place: \
    [into] if in_place else []  # type: ignore[attr-defined]


def scatter_embedding_grads(gm: fx.GraphModule) -> int:
    """Rewrite the embedding gradients of `gm` (mlirfuse's `scatter_embedding_grads` knob);
    returns how many were rewritten."""
    if not config.options().scatter_embedding_grads:
        return 0
    count = 0
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten.embedding_dense_backward.default:
            count += _rewrite(gm.graph, node)
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def _rewrite(graph: fx.Graph, node: fx.Node) -> int:
    if len(node.args) != 5 or node.kwargs:
        return 0
    grad, indices, num_weights, padding_idx, by_frequency = node.args
    if by_frequency or not all(isinstance(a, fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)
                               for a in (grad, indices)):
        return 0
    into = _sum_with(node)
    replaced = node if into is None else next(iter(node.users))
    with graph.inserting_before(replaced):
        val = grad.meta["val"]
        zero = None  # one 0-d zero of the gradient's dtype, for the padding mask and the masked sums
        if padding_idx >= 0 or num_weights <= SMALL_TABLE:
            zero = new_node(graph, aten.scalar_tensor.default, (0.0,), {"dtype": val.dtype, "device": val.device})
        if padding_idx >= 0:
            pad = new_node(graph, aten.unsqueeze.default, (new_node(graph, aten.eq.Scalar, (indices, padding_idx)), -1))
            grad = new_node(graph, aten.where.self, (pad, zero, grad))
        if num_weights <= SMALL_TABLE:
            out = _masked_sum(graph, grad, indices, num_weights, zero)
            if into is not None:
                out = new_node(graph, aten.add.Tensor, (into, out))
        else:
            in_place = into is not None and _fresh(into)
            out = new_node(graph, scatter_embedding_grad, (into, grad, indices, num_weights, in_place))
    replaced.replace_all_uses_with(out)
    graph.erase_node(replaced)
    if replaced is not node:
        graph.erase_node(node)
    return 1


def _masked_sum(graph: fx.Graph, grad: fx.Node, indices: fx.Node, num_weights: int, zero: fx.Node) -> fx.Node:
    """Row w of the table's gradient: the sum over the tokens of where(indices == w, grad, 0),
    one column reduction per row (siblings: one launch), stacked."""
    dims = list(range(grad.meta["val"].dim() - 1))
    rows = []
    for w in range(num_weights):
        hit = new_node(graph, aten.unsqueeze.default, (new_node(graph, aten.eq.Scalar, (indices, w)), -1))
        total = new_node(graph, aten.where.self, (hit, grad, zero))
        if dims:  # (0-d indices: one token, no sum; an empty dim list would sum every dim)
            total = new_node(graph, aten.sum.dim_IntList, (total, dims))
        rows.append(new_node(graph, aten.unsqueeze.default, (total, 0)))
    return rows[0] if num_weights == 1 else new_node(graph, aten.cat.default, (rows,))


def _sum_with(node: fx.Node) -> fx.Node | None:
    """X where the gradient's one use is `add(X, gradient)` (either order) with X of its shape
    and dtype: the sum is then the scatter into X."""
    if len(node.users) != 1:
        return None
    add = next(iter(node.users))
    if add.op != "call_function" or add.target is not aten.add.Tensor or add.kwargs or len(add.args) != 2:
        return None
    other = add.args[1] if add.args[0] is node else add.args[0]
    if other is node or not isinstance(other, fx.Node):
        return None
    val, mine, out = other.meta.get("val"), node.meta["val"], add.meta.get("val")
    if not isinstance(val, torch.Tensor) or not isinstance(out, torch.Tensor):
        return None
    same = {(v.shape, v.dtype, v.device) for v in (val, mine, out)}
    return other if len(same) == 1 else None


def _fresh(x: fx.Node) -> bool:
    """Whether `x` may be written in place: its memory is a matmul's result or a cast's (never
    an alias of another tensor, even where a fused region computes it), reached through views,
    each of them and the result read by nothing else."""
    while True:
        if len(x.users) != 1 or x.op != "call_function":
            return False
        if x.target in MATMULS:
            return True
        if x.target in CASTS:
            source = x.args[0]
            return isinstance(source, fx.Node) and source.meta["val"].dtype != x.meta["val"].dtype
        if x.target not in VIEWS or not isinstance(x.args[0], fx.Node):
            return False
        x = x.args[0]
