"""Attention masks laid out for torch's fused attention kernels (attention_masks.py): a GPU mask
whose last dim is not at stride 1 sends scaled_dot_product_attention down its float32 math
path (HuggingFace BERT's padding mask under torch.compile)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.nn.attention import SDPBackend, sdpa_kernel

import mlirfuse
from mlirfuse import dump
from mlirfuse.torch_backend.attention_masks import dense_attention_masks

SDPA = torch._C._nn.scaled_dot_product_attention


def _graph(mask_sizes, mask_view, device: str, positional: bool = False,
           dtype: torch.dtype = torch.bfloat16) -> fx.GraphModule:
    """q, k, v [2, 3, 16, 8] of `dtype` and a bool mask `mask_view(empty(mask_sizes))` into one
    attention call, the inputs' example values fake tensors on `device` (as Dynamo records them)."""
    graph = fx.Graph()
    names = ("q", "k", "v", "mask")
    nodes = [graph.placeholder(n) for n in names]
    with FakeTensorMode():
        vals = [torch.empty(2, 3, 16, 8, device=device, dtype=dtype) for _ in range(3)]
        vals.append(mask_view(torch.empty(mask_sizes, dtype=torch.bool, device=device)))
    for node, val in zip(nodes, vals):
        node.meta["example_value"] = val
    q, k, v, mask = nodes
    if positional:
        out = graph.call_function(SDPA, (q, k, v, mask), {"scale": 0.5})
    else:
        out = graph.call_function(SDPA, (q, k, v), {"attn_mask": mask, "scale": 0.5})
    graph.output(out)
    return fx.GraphModule(torch.nn.Module(), graph)


def test_query_given_by_keyword_is_read_there() -> None:
    """scaled_dot_product_attention(query=q, key=k, value=v, attn_mask=m): all by keyword."""
    gm = _graph((16,), _padding_mask, "cuda")
    sdpa = next(n for n in gm.graph.nodes if n.op == "call_function")
    q, k, v = sdpa.args
    sdpa.args = ()
    sdpa.kwargs = dict(sdpa.kwargs, query=q, key=k, value=v)
    gm.recompile()
    assert dense_attention_masks(gm) == 1


def _padding_mask(t: torch.Tensor) -> torch.Tensor:
    """[16] query positions -> [2, 1, 16, 16], strides (0, 16, 1, 0): BERT's mask under compile."""
    return t.view(1, 1, 16, 1).expand(2, 1, 16, 16)


@pytest.mark.parametrize("positional", [False, True], ids=["kwarg", "positional"])
def test_a_gpu_mask_broadcast_along_its_last_dim_becomes_dense_rows(positional: bool) -> None:
    gm = _graph((16,), _padding_mask, "cuda", positional)
    assert dense_attention_masks(gm) == 1
    code = gm.code
    # the batch dim (stride 0) narrowed to one, the rest copied densely, expanded back
    assert "mask.narrow(0, 0, 1)" in code and ".contiguous()" in code and ".expand_as(" in code, code
    sdpa = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is SDPA)
    passed = sdpa.args[3] if positional else sdpa.kwargs["attn_mask"]
    assert passed.target == "expand_as" and passed.args[1].name == "mask"
    # the result kept only in rows that keep a key
    (where,) = sdpa.users
    assert where.target is torch.where and where.args[1] is sdpa and list(where.users)[0].op == "output"

    # The rewritten graph computes what torch's math path does with the original mask (run
    # here on CPU tensors), rows that keep no key included (zeros).
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 16, 8, generator=g) for _ in range(3))
    keep = torch.rand(16, generator=g) > 0.3
    keep[:2] = torch.tensor([True, False])
    mask = _padding_mask(keep)
    with sdpa_kernel([SDPBackend.MATH]):
        want = SDPA(q, k, v, attn_mask=mask, scale=0.5)
    assert not want[:, :, 1].any()
    torch.testing.assert_close(gm(q, k, v, mask), want, rtol=1e-6, atol=1e-6)


def test_a_float_mask_keeps_rows_with_a_value_above_minus_infinity() -> None:
    gm = _graph((16,), _padding_mask, "cuda")
    mask_node = next(n for n in gm.graph.nodes if n.name == "mask")
    with FakeTensorMode():
        mask_node.meta["example_value"] = _padding_mask(torch.empty(16, device="cuda"))
    assert dense_attention_masks(gm) == 1
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 16, 8, generator=g) for _ in range(3))
    bias = torch.randn(16, generator=g)
    bias[3] = -math.inf  # a row that keeps nothing: zeros, as torch's math path gives
    mask = _padding_mask(bias)
    with sdpa_kernel([SDPBackend.MATH]):
        want = SDPA(q, k, v, attn_mask=mask, scale=0.5)
    torch.testing.assert_close(gm(q, k, v, mask), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["dense rows", "cpu", "no mask", "float32"])
def test_masks_the_fused_kernels_take_are_left_alone(case: str) -> None:
    if case == "dense rows":  # GPT-2's and Llama's: [batch, 1, q, k] expanded over the batch only
        gm = _graph((1, 1, 16, 16), lambda t: t.expand(2, 1, 16, 16), "cuda")
    elif case == "cpu":  # torch's CPU kernels take any strides
        gm = _graph((16,), _padding_mask, "cpu")
    elif case == "float32":  # the math path's float32 matmuls are no slower than the fused kernels
        gm = _graph((16,), _padding_mask, "cuda", dtype=torch.float32)
    else:
        gm = _graph((16,), _padding_mask, "cuda")
        sdpa = next(n for n in gm.graph.nodes if n.op == "call_function")
        sdpa.update_kwarg("attn_mask", None)
    before = gm.code
    assert dense_attention_masks(gm) == 0
    assert gm.code == before


def _attention(q, k, v, keep):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_padding_mask_of(keep, q), scale=0.125)


def _padding_mask_of(keep: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    b, _, s, _ = q.shape
    return keep[None, None, :, None].expand(b, 1, s, s)


@pytest.mark.gpu
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "f16", "f32"])
def test_attention_with_a_padding_mask_runs_a_fused_kernel_forward_and_backward(dtype, dynamic: bool,
                                                                                fresh_torch_backend) -> None:
    """Half precision: a fused kernel. float32 stays on the math path (its float32 matmuls
    were no slower than the fused kernels in BERT's step); the results are torch's either way."""
    g = torch.Generator(device="cuda").manual_seed(0)
    seq = 200 if dynamic else 256
    q, k, v = (torch.randn(4, 12, seq, 64, device="cuda", dtype=dtype, generator=g).requires_grad_() for _ in range(3))
    keep = torch.rand(seq, device="cuda", generator=g) > 0.1
    keep[:2] = torch.tensor([True, False])  # query row 1 keeps no key: zeros, no gradient (torch's math path)
    previous = mlirfuse.set_options(dump="fx_graph")
    try:
        with dump.capture() as texts:
            out = torch.compile(_attention, backend="mlirfuse", dynamic=dynamic)(q, k, v, keep)
            out.float().sum().backward()
    finally:
        mlirfuse.restore_options(previous)
    graphs = "\n".join(texts)
    fused = "_scaled_dot_product_cudnn_attention" in graphs or "_scaled_dot_product_efficient_attention" in graphs
    if dtype == torch.float32:
        assert "aten.bmm" in graphs and not fused, graphs
    else:  # a fused kernel (cuDNN or memory-efficient attention), not the math path's batched matmuls
        assert fused and "aten.bmm" not in graphs, graphs
    got = (out, *(t.grad for t in (q, k, v)))
    exact = [t.detach().double().requires_grad_() for t in (q, k, v)]  # (float64: torch's math path)
    want_out = _attention(*exact, keep)
    want_out.sum().backward()
    want = (want_out, *(t.grad for t in exact))
    tol = {torch.bfloat16: 3e-2, torch.float16: 4e-3}.get(dtype, 1e-4)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, rtol=tol, atol=tol)


def test_a_mask_of_symbolic_sizes_is_rewritten_without_guards() -> None:
    """Dynamic shapes (a second sequence length): the mask's sizes and strides are symbols."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    shape_env = ShapeEnv()
    s = shape_env.create_symintnode(shape_env.create_symbol(16, ConstantSource("s")), hint=16)
    graph = fx.Graph()
    q, k, v, mask = (graph.placeholder(n) for n in ("q", "k", "v", "mask"))
    with FakeTensorMode(shape_env=shape_env):
        for node in (q, k, v):
            node.meta["example_value"] = torch.empty(2, 3, s, 8, device="cuda", dtype=torch.bfloat16)
        mask.meta["example_value"] = torch.empty(s, dtype=torch.bool, device="cuda").view(1, 1, s, 1).expand(2, 1, s, s)
    graph.output(graph.call_function(SDPA, (q, k, v), {"attn_mask": mask}))
    gm = fx.GraphModule(torch.nn.Module(), graph)
    assert dense_attention_masks(gm) == 1
    assert "mask.narrow(0, 0, 1)" in gm.code and "narrow(3" not in gm.code
    assert not shape_env.guards  # nothing specialized on the sizes


def test_a_mask_that_every_layer_reads_is_copied_once() -> None:
    gm = _graph((16,), _padding_mask, "cuda")
    graph = gm.graph
    first = next(n for n in graph.nodes if n.op == "call_function")
    output = next(n for n in graph.nodes if n.op == "output")
    first.meta["example_value"] = first.args[0].meta["example_value"]  # (as Dynamo records it)
    with graph.inserting_before(output):  # a second layer: the first one's result as its query
        second = graph.call_function(SDPA, (first, first.args[1], first.args[2]), dict(first.kwargs))
    output.args = ((first, second),)
    gm.recompile()
    assert dense_attention_masks(gm) == 2
    assert gm.code.count(".contiguous()") == 1 and gm.code.count(".any(") == 1, gm.code
    assert second.kwargs["attn_mask"] is first.kwargs["attn_mask"]
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 3, 16, 8, generator=g) for _ in range(3))
    mask = _padding_mask(torch.rand(16, generator=g) > 0.3)
    with sdpa_kernel([SDPBackend.MATH]):
        a = SDPA(q, k, v, attn_mask=mask, scale=0.5)
        want = (a, SDPA(a, k, v, attn_mask=mask, scale=0.5))
    for got, expected in zip(gm(q, k, v, mask), want):
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
