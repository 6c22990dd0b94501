"""torch.compile(backend="mlirfuse"): outputs and gradients vs eager, the partition around
unsupported ops, recompiles over dynamic sizes, dropout RNG, dumps and the entry point."""

from __future__ import annotations

import copy
import math
import operator
import random
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
import torch._dynamo as dynamo  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import mlirfuse  # noqa: E402
from mlirfuse import torch_backend  # noqa: E402
from mlirfuse.reference_philox import uniform as philox_uniform  # noqa: E402
from mlirfuse.torch_backend.backend import compile_graph, partition_and_trace  # noqa: E402
from mlirfuse.torch_backend.runtime import draw_seed  # noqa: E402

P = 0.1
TOL = {torch.float64: {"rtol": 1e-9, "atol": 1e-9}, torch.float32: {"rtol": 2e-4, "atol": 2e-4}}


# -- the workloads (the tutorial's definitions; `drop` is F.dropout or a replayed mask) --------
def composite(drop):
    def f(input1, input2, weight, bias1, bias2):
        norm_input = drop(input1 + bias1) + input2
        return F.layer_norm(norm_input, (input1.size(2),), weight, bias2)
    return f


def primitive(drop):
    def f(input1, input2, weight, bias1, bias2):
        norm_input = drop(input1 + bias1) + input2
        mean = norm_input.mean(2, keepdim=True)
        diff = norm_input - mean
        var = (diff * diff).mean(2, keepdim=True)
        return weight * ((norm_input - mean) / torch.sqrt(var + 1e-12)) + bias2
    return f


def rms_norm(drop):
    def f(input1, input2, weight, bias):
        norm_input = drop(input1 + bias) + input2
        var = norm_input.mul(norm_input).mean(2, True)
        return weight * (norm_input / torch.sqrt(var + 1e-12))
    return f


def gelu(drop):
    return lambda x: F.gelu(x)


def gelu_tanh(drop):
    return lambda x: F.gelu(x, approximate="tanh")


def softmax(drop):
    return lambda x: torch.softmax(x, -1)


class MLPBlock(torch.nn.Module):
    """linear -> GELU -> linear -> dropout -> residual add -> LayerNorm."""

    def __init__(self, hidden: int, drop, dtype):
        super().__init__()
        self.l1 = torch.nn.Linear(hidden, 4 * hidden, dtype=dtype)
        self.l2 = torch.nn.Linear(4 * hidden, hidden, dtype=dtype)
        self.ln = torch.nn.LayerNorm(hidden, dtype=dtype)
        self.drop = drop

    def forward(self, x):
        return self.ln(x + self.drop(self.l2(F.gelu(self.l1(x)))))


SHAPE = (3, 5, 64)


def _inputs(name, shape, dtype, device):
    def t(*s):
        return torch.randn(*s, dtype=dtype, device=device, requires_grad=True)
    h = shape[-1]
    if name in ("composite", "primitive"):
        return [t(*shape), t(*shape), t(h), t(h), t(h)]
    if name == "rms_norm":
        return [t(*shape), t(*shape), t(h), t(h)]
    return [t(*shape)]


WORKLOADS = {"composite": composite, "primitive": primitive, "rms_norm": rms_norm, "gelu": gelu,
             "gelu_tanh": gelu_tanh, "softmax": softmax, "mlp_block": None}


def _dropout(x):
    return F.dropout(x, P, training=True)


def _replayed_dropout(seed):
    """Eager dropout with the mask mlirfuse draws: region seed `seed`, Philox stream 0."""
    def drop(x):
        np_dtype = np.float64 if x.dtype == torch.float64 else np.float32
        u = torch.from_numpy(philox_uniform(tuple(x.shape), seed, 0, 0.0, 1.0, np_dtype)).to(x.device)
        return x * (u > P).to(x.dtype) * (1.0 / (1.0 - P))
    return drop


def _check_against_eager(name: str, dtype, device: str) -> None:
    torch.manual_seed(0)
    if name == "mlp_block":
        model = MLPBlock(SHAPE[-1], _dropout, dtype).to(device)
        compiled_fn, params = torch.compile(model, backend="mlirfuse"), list(model.parameters())
        inputs = [torch.randn(*SHAPE, dtype=dtype, device=device, requires_grad=True)]

        def eager(drop):
            model.drop = drop
            try:
                return model(*inputs)
            finally:
                model.drop = _dropout
    else:
        compiled_fn = torch.compile(WORKLOADS[name](_dropout), backend="mlirfuse")
        inputs, params = _inputs(name, SHAPE, dtype, device), []

        def eager(drop):
            return WORKLOADS[name](drop)(*inputs)
    leaves = inputs + params
    grad_out = torch.rand(SHAPE, dtype=dtype, device=device)
    compiled_fn(*inputs).backward(grad_out)  # compile (and warm up) once
    for t in leaves:
        t.grad = None
    torch.manual_seed(7)
    seed = int(draw_seed(torch.device(device)))
    torch.manual_seed(7)
    out = compiled_fn(*inputs)
    out.backward(grad_out)
    grads = [t.grad for t in leaves]
    for t in leaves:
        t.grad = None
    expected = eager(_replayed_dropout(seed))
    expected.backward(grad_out)
    torch.testing.assert_close(out, expected, **TOL[dtype], msg=lambda m: f"{name} output: {m}")
    for i, (g, t) in enumerate(zip(grads, leaves)):
        torch.testing.assert_close(g, t.grad, **TOL[dtype], msg=lambda m, i=i: f"{name} grad {i}: {m}")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    dynamo.reset()
    dynamo.utils.counters.clear()
    torch_backend.reset()
    yield
    dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_forward_backward_vs_eager_cpu(name: str, dtype) -> None:
    _check_against_eager(name, dtype, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_forward_backward_vs_eager_gpu(name: str, dtype) -> None:
    _check_against_eager(name, dtype, "cuda")


def test_forward_fuses_into_one_group_and_backward_too() -> None:
    """The tutorial's bias-dropout-add-LayerNorm: one fused group forward, one backward."""
    groups = {}

    def capture(gm, example_inputs, kind):
        groups[kind] = partition_and_trace(gm)[0]
        return compile_graph(gm, example_inputs, kind)

    from functools import partial

    from torch._dynamo.backends.common import aot_autograd
    backend = aot_autograd(fw_compiler=partial(capture, kind="forward"), bw_compiler=partial(capture, kind="backward"),
                           decompositions=torch_backend.decompositions())
    inputs = _inputs("composite", SHAPE, torch.float32, "cpu")
    torch.compile(composite(_dropout), backend=backend)(*inputs).sum().backward()
    assert len(groups["forward"].groups) == 1 and not groups["forward"].left
    assert len(groups["backward"].groups) == 1
    assert all("view" in reason for reason in groups["backward"].left.values())


# -- the partition around unsupported ops ------------------------------------------------------
def _aten_graph(fn, *args):
    return make_fx(fn, decomposition_table=torch_backend.decompositions(), tracing_mode="fake")(*args)


def test_matmul_between_pointwise_chains_makes_two_groups() -> None:
    def fn(x, w):
        a = torch.exp(x * 2.0) + 1.0
        b = a @ w
        return torch.relu(b + 1.0) * 3.0
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    gm = _aten_graph(fn, x, w)
    partition, _ = partition_and_trace(gm)
    assert len(partition.groups) == 2
    names = [{n.target for n in g.nodes} for g in partition.groups]
    assert torch.ops.aten.exp.default in names[0] and torch.ops.aten.relu.default in names[1]
    mm = [n for n in partition.left if n.target is torch.ops.aten.mm.default]
    assert mm and partition.left[mm[0]] == "library op, runs in torch"
    compiled = torch.compile(fn, backend="mlirfuse")
    torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-5, atol=1e-5)


def test_no_cycle_through_a_torch_op() -> None:
    """c reads a (fusible) and b = mm(a) (torch): c must not join a's group."""
    def fn(x, w):
        a = torch.tanh(x) * 2.0
        b = a @ w
        return (a + b).sigmoid() * a
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    gm = _aten_graph(fn, x, w)
    partition, _ = partition_and_trace(gm)
    group_of = {n: i for i, g in enumerate(partition.groups) for n in g.nodes}
    add = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.add.Tensor)
    tanh = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.tanh.default)
    assert group_of.get(add) != group_of.get(tanh)
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(x, w), fn(x, w), rtol=1e-5, atol=1e-5)


def test_unsupported_op_stays_in_torch_with_reason() -> None:
    def fn(x):
        return torch.cumsum(torch.exp(x) * 2.0, 1).sin() * 3.0 + 1.0
    x = torch.randn(4, 8)
    partition, _ = partition_and_trace(_aten_graph(fn, x))
    cumsum = next(n for n in partition.left if n.target is torch.ops.aten.cumsum.default)
    assert partition.left[cumsum].startswith("no scan schedule")
    assert len(partition.groups) == 2
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(x), fn(x), rtol=1e-5, atol=1e-5)
    partition, _ = partition_and_trace(_aten_graph(lambda x: torch.erfinv(x.tanh()).exp() * 2.0, x))
    erfinv = next(n for n in partition.left if n.target is torch.ops.aten.erfinv.default)
    assert partition.left[erfinv] == "no mlirfuse lowering"


def test_true_divide_is_fused_as_div() -> None:
    """aten.true_divide (GPT-2's attention scaled by a size's square root under dynamic shapes)
    is div; it was left to torch with "no mlirfuse lowering". Found by a black-box run."""
    def fn(x, y):
        return torch.exp(x) / y + x / 3.0
    x, y = torch.randn(4, 8), torch.rand(4, 8) + 0.5
    gm = _aten_graph(fn, x, y)  # tracing decomposes true_divide; dynamo's size arithmetic keeps it
    for node in gm.graph.nodes:
        if node.target in (torch.ops.aten.div.Tensor, torch.ops.aten.div.Scalar):
            node.target = getattr(torch.ops.aten.true_divide, node.target._overloadname)
    gm.recompile()
    assert sum("true_divide" in str(n.target) for n in gm.graph.nodes) == 2, gm.code
    partition, _ = partition_and_trace(gm)
    assert not any("true_divide" in str(n.target) for n in partition.left), partition.describe()
    compiled = compile_graph(gm, [x, y])
    torch.testing.assert_close(compiled([x, y]), gm(x, y))


@pytest.mark.parametrize("codegen", ["boxed", "torch without boxed codegen"])
def test_a_compiled_graph_takes_its_inputs_boxed_and_lets_them_go(codegen: str, monkeypatch) -> None:
    """The boxed convention of AOTAutograd's compiled graphs: the graph empties the list it is
    called with, so that an input (a backward's saved activation) is freed after its last use
    in the graph, not kept by the caller's list to the end (and the CUDA graph trees require
    it). The input here dies inside the call, once its only reader has run. A torch without
    FX's boxed codegen (before 2.10) gets the list emptied too."""
    import weakref

    if codegen != "boxed":
        monkeypatch.delattr(torch.fx.graph, "_BoxedCodeGen")

    def fn(x, y):
        return torch.sin(x * 2.0).sum() + torch.cos(y * 3.0)

    x, y = torch.randn(64), torch.randn(64)
    compiled = compile_graph(_aten_graph(fn, x, y), [x, y])
    want = fn(x, y)
    args = [x.clone(), y]
    gone = weakref.ref(args[0])
    del x
    got = compiled(args)
    assert args == [] and gone() is None
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, want)


@pytest.mark.parametrize("case", ["normalize", "clip norms", "inf keepdim", "half dtype"])
def test_linalg_vector_norm_is_fused(case: str) -> None:
    """aten.linalg_vector_norm (F.normalize, clip_grad_norm_'s per-tensor and total norms,
    x.norm()) was left to torch ("no mlirfuse lowering"). Found by a black-box run."""
    fns = {
        "normalize": lambda x: F.normalize(x.tanh(), dim=-1) * 3.0,
        "clip norms": lambda x: torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(x * 2.0, 2.0), torch.linalg.vector_norm(x.exp(), 2.0)]), 2.0),
        "inf keepdim": lambda x: x / torch.linalg.vector_norm(x.sin(), float("inf"), dim=(0, 1), keepdim=True),
        "half dtype": lambda x: torch.linalg.vector_norm(x.to(torch.bfloat16).exp(), 3.0, -1, dtype=torch.float32),
    }
    fn = fns[case]
    x = torch.randn(4, 6, 8, requires_grad=case != "half dtype")
    with torch_backend.capture_partitions() as captured:
        got = torch.compile(fn, backend="mlirfuse")(x)
    left = [str(n.target) for _, p in captured for n in p.left]
    assert not any("vector_norm" in t for t in left), left
    want = fn(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    if x.requires_grad:
        (gx,) = torch.autograd.grad(got.sum(), x)
        (wx,) = torch.autograd.grad(want.sum(), x)
        torch.testing.assert_close(gx, wx, rtol=1e-5, atol=1e-6)


def test_single_op_groups_follow_the_single_node_knob() -> None:
    def fn(x):
        return torch.exp(x).cumsum(0)
    x = torch.randn(4, 8)
    partition, _ = partition_and_trace(_aten_graph(fn, x))
    assert not partition.groups and "single op" in next(iter(partition.left.values()))
    previous = mlirfuse.set_options(single_node=True)
    try:
        partition, _ = partition_and_trace(_aten_graph(fn, x))
        assert len(partition.groups) == 1
    finally:
        mlirfuse.restore_options(previous)


def test_single_ops_on_graph_inputs_are_fused_side_by_side() -> None:
    """Autocast's weight casts (each a single op on a graph input, some through a transpose
    left to torch) become one group, one region call, instead of a torch call each; a single
    op reading a computed value (relu after the matmul) stays in torch."""
    def fn(x, w1, w2, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.relu(x @ w1.t()) @ w2.t() + b
    args = [torch.randn(4, 8), torch.randn(16, 8), torch.randn(8, 16), torch.randn(8)]
    partition, _ = partition_and_trace(_aten_graph(fn, *args))
    assert [[n.target for n in g.nodes] for g in partition.groups] == [[torch.ops.aten._to_copy.default] * 3]
    assert {n.name: r for n, r in partition.left.items()}["relu"].startswith("group of a single op")
    dynamo.reset()
    w1, w2 = (a.clone().requires_grad_() for a in args[1:3])
    out = torch.compile(fn, backend="mlirfuse")(args[0], w1, w2, args[3])
    out.sum().backward()
    ew1, ew2 = (a.clone().requires_grad_() for a in args[1:3])
    expected = fn(args[0], ew1, ew2, args[3])
    expected.sum().backward()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(w1.grad, ew1.grad, rtol=0, atol=0)
    torch.testing.assert_close(w2.grad, ew2.grad, rtol=0, atol=0)


@pytest.mark.parametrize("sink_bytes", [None, 1], ids=["one-group", "byte-bound"])
def test_single_ops_read_only_as_graph_results_are_fused_side_by_side(sink_bytes, monkeypatch) -> None:
    """A bfloat16 backward's weight gradients cast back to float32 (each a single op on a
    matmul's result, read only as the graph's result) become one group, one region call,
    instead of a torch call each; a group holds at most SINK_BYTES of their inputs (the
    earlier ones live until it runs), so with 1 byte no two casts share a group: each stays
    in torch or joins the nearest group it makes no cycle with (a lone op's rule)."""
    from mlirfuse.torch_backend import partition as P

    if sink_bytes is not None:
        monkeypatch.setattr(P, "SINK_BYTES", sink_bytes)

    def fn(x, w1, w2, w3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return (torch.relu(torch.relu(x @ w1.t()) @ w2.t()) @ w3.t()).float().sum()
    x = torch.randn(4, 8)
    ws = [torch.randn(16, 8), torch.randn(12, 16), torch.randn(8, 12)]
    dynamo.reset()
    got = [w.clone().requires_grad_() for w in ws]
    with torch_backend.capture_partitions() as captured:
        torch.compile(fn, backend="mlirfuse")(x, *got).backward()
    expected = [w.clone().requires_grad_() for w in ws]
    fn(x, *expected).backward()
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.grad, e.grad, rtol=0, atol=0)
    backward = next(p for kind, p in captured if kind == "backward")
    casts = [g for g in backward.groups if all(n.target is torch.ops.aten._to_copy.default for n in g.nodes)]
    left = [n for n, why in backward.left.items() if n.target is torch.ops.aten._to_copy.default
            and why.startswith("group of a single op")]
    # (The output gradient's cast to bfloat16, a single op of a graph input, stays in torch.)
    if sink_bytes is None:
        assert [len(g.nodes) for g in casts] == [3] and len(left) == 1
    else:
        joined = [n for g in backward.groups for n in g.nodes if n.target is torch.ops.aten._to_copy.default]
        assert not casts and len(left) + len(joined) == 4


def test_embeddings_fuse_with_the_layer_norm_that_reads_them() -> None:
    """GPT-2's input: token and position embeddings added, then LayerNorm. The embeddings are
    gathers of the tables' rows in the same group (torch ran each as its own kernel); their
    backward (embedding_dense_backward, a scatter-add) stays torch's. Forward and gradients
    are eager's."""
    torch.manual_seed(0)
    wte, wpe = torch.randn(50, 16), torch.randn(12, 16)
    w, b = torch.randn(16), torch.randn(16)

    def fn(ids, wte, wpe, w, b):
        h = F.embedding(ids, wte) + F.embedding(torch.arange(ids.shape[1]), wpe)
        return F.layer_norm(h, (16,), w, b)
    ids = torch.randint(0, 50, (2, 12))
    partition, _ = partition_and_trace(_aten_graph(fn, ids, wte, wpe, w, b))
    assert len(partition.groups) == 1
    assert sum(n.target is torch.ops.aten.embedding.default for n in partition.groups[0].nodes) == 2
    dynamo.reset()
    got = [t.clone().requires_grad_() for t in (wte, wpe, w, b)]
    want = [t.clone().requires_grad_() for t in (wte, wpe, w, b)]
    out, expected = torch.compile(fn, backend="mlirfuse")(ids, *got), fn(ids, *want)
    torch.testing.assert_close(out, expected, **TOL[torch.float32])
    g = torch.randn_like(out)
    for a, e in zip(torch.autograd.grad(out, got, g), torch.autograd.grad(expected, want, g)):
        torch.testing.assert_close(a, e, **TOL[torch.float32])


@pytest.mark.parametrize("conv", ["conv1d", "conv2d", "conv_transpose2d", "conv3d"])
def test_convolution_bias_gradients_are_fused_sums(conv: str) -> None:
    """A convolution's bias gradient is the sum of its output's gradient over all dims but the
    channels: computed in the region that computes that gradient (a BatchNorm's or ReLU's
    backward), not by the library convolution backward (aten's own reduce kernel after cuDNN,
    a launch per convolution), as Inductor's decomposition does. Gradients as eager's."""
    make = {"conv1d": lambda: torch.nn.Conv1d(3, 8, 3, padding=1), "conv2d": lambda: torch.nn.Conv2d(3, 8, 3),
            "conv_transpose2d": lambda: torch.nn.ConvTranspose2d(3, 8, 3, stride=2),
            "conv3d": lambda: torch.nn.Conv3d(3, 8, 3, groups=1)}[conv]
    torch.manual_seed(0)
    model = torch.nn.Sequential(make(), torch.nn.ReLU(), make().__class__(8, 4, 3) if conv != "conv_transpose2d"
                                else torch.nn.ConvTranspose2d(8, 4, 3))
    shape = {"conv1d": (2, 3, 17), "conv2d": (2, 3, 9, 11), "conv_transpose2d": (2, 3, 5, 6),
             "conv3d": (2, 3, 6, 7, 5)}[conv]
    x = torch.randn(*shape)
    twin = copy.deepcopy(model)
    with torch_backend.capture_partitions() as captured:
        torch.compile(model, backend="mlirfuse")(x).square().sum().backward()
    twin(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5, msg=name)
    backward = [p for kind, p in captured if kind == "backward"][0]
    masks = [n.args[-1] for n in backward.left if "convolution_backward" in str(n.target)]
    assert masks and all(not mask[2] for mask in masks), masks


@pytest.mark.parametrize("fn,fused", [
    (lambda x: x.sum(0), True), (lambda x: x.sum(1), True), (lambda x: x.amax((0, 1)), True),
    (lambda x: x.sum(-1), False), (lambda x: x.sum(), False), (lambda x: x.transpose(0, 2).sum(0), False),
], ids=["sum(0)", "sum(1)", "amax((0,1))", "sum(-1)", "sum()", "sum(0)-of-a-transpose"])
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_lone_reduction_over_leading_or_middle_dims_of_a_cuda_tensor_is_a_region(fn, fused, device) -> None:
    """Alone, ATen's reduce_kernel sums the leading or middle dims of a CUDA tensor well below
    mlirfuse's column kernel (sum(0) of [32768, 1024] float32 59.5 us against 35.3, H200): a
    region of its own. Reductions of the last dim, of everything, of a permuted view, or on
    the CPU stay in torch, as any single op. (Traced with fake CUDA tensors: no GPU needed.)"""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from mlirfuse.torch_backend.partition import SINGLE_OP, partition_graph

    with FakeTensorMode(allow_non_fake_inputs=True):
        gm = _aten_graph(fn, torch.empty(64, 32, 16, device=device))
    partition = partition_graph(gm.graph)
    reductions = [n for n in gm.graph.nodes if n.target in (torch.ops.aten.sum.dim_IntList,
                                                            torch.ops.aten.sum.default, torch.ops.aten.amax.default)]
    assert len(reductions) == 1
    if fused and device == "cuda":
        assert [g.nodes for g in partition.groups] == [reductions]
    else:
        assert not partition.groups and partition.left[reductions[0]] == SINGLE_OP


def test_a_lone_pad_is_a_region() -> None:
    """constant_pad_nd alone (a padded matmul's weight, padded every call): torch runs a fill
    and a copy, a region one kernel. A lone relu beside it joins its group (a lone op's rule:
    the nearest group it makes no cycle with), where alone it would stay in torch."""
    def fn(w, x):
        return F.pad(w, (0, 3, 0, 5)), torch.relu(x)
    w, x = torch.randn(6, 7), torch.randn(4)
    partition, _ = partition_and_trace(_aten_graph(fn, w, x))
    assert [[n.target for n in g.nodes] for g in partition.groups] == [[torch.ops.aten.constant_pad_nd.default,
                                                                         torch.ops.aten.relu.default]]
    alone, _ = partition_and_trace(_aten_graph(lambda x: torch.relu(x), x))
    assert not alone.groups
    dynamo.reset()
    for got, expected in zip(torch.compile(fn, backend="mlirfuse")(w, x), fn(w, x)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_a_mask_from_constants_only_is_one_region_on_its_inputs_device() -> None:
    """A causal mask built from arange (no tensor input) for a library op (attention) is one
    fused region, not a torch call (and kernel) per op; a graph input on the mask's device,
    unread, carries the device."""
    def fn(q, k, v):
        n = q.shape[-2]
        i = torch.arange(n, device=q.device)
        mask = torch.where(i[None, :] <= i[:, None], 0.0, float("-inf")).to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.expand(q.shape[0], 1, n, n))
    q, k, v = (torch.randn(2, 3, 8, 4) for _ in range(3))
    partition, regions = partition_and_trace(_aten_graph(fn, q, k, v))
    assert len(partition.groups) == 1 and "where" in [n.name for n in partition.groups[0].nodes]
    assert [n.name for n in regions[0].inputs] == ["q_1"] and regions[0].n_donors == 1
    dynamo.reset()
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(q, k, v), fn(q, k, v), **TOL[torch.float32])


def test_slices_of_a_tensor_the_group_also_reads_stay_in_the_group() -> None:
    """Rotary embedding reads q whole and its two halves: the halves stay in the group (index
    arithmetic on the one q operand) instead of going to torch as two more strided operands
    of the same buffer; views whose source only they read still go to torch."""
    def fn(x, w, cos, sin):
        q = (x @ w).view(2, 8, 4, 16).transpose(1, 2)
        return q * cos + torch.cat((-q[..., 8:], q[..., :8]), -1) * sin
    args = [torch.randn(16, 32), torch.randn(32, 64), torch.randn(8, 16), torch.randn(8, 16)]
    partition, regions = partition_and_trace(_aten_graph(fn, *args))
    (group,) = partition.groups
    assert [n.target for n in group.nodes].count(torch.ops.aten.slice.Tensor) == 2
    assert [n.target for n in regions[0].inputs[:1]] == [torch.ops.aten.permute.default]  # q, once
    dynamo.reset()
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(*args), fn(*args), **TOL[torch.float32])


@pytest.mark.parametrize("start", [0, 5], ids=["leading-columns", "middle-columns"])
def test_inputs_that_are_the_leading_columns_of_dense_rows_are_read_in_place(start, monkeypatch) -> None:
    """An input that is the first columns of a dense tensor's rows (logits sliced from a padded
    product, as they cross a graph break) reaches its region as those whole rows, a view of its
    memory, and the region slices it. A slice from the middle of the rows is copied into new
    rows instead: the storage does not hold a whole row past its last element. Both give
    eager's results and gradients."""
    from mlirfuse.frontend.jit import JitFunction

    seen = []
    call = JitFunction.__call__

    def record(self, *args):
        seen.append([(tuple(a.shape), a.data_ptr()) for a in args if isinstance(a, torch.Tensor)])
        return call(self, *args)
    monkeypatch.setattr(JitFunction, "__call__", record)

    def fn(x, w):
        return torch.softmax(x.float() * w, -1).sum(0)
    base = torch.randn(3, 4, 40, dtype=torch.float64)
    x = base[..., start:start + 33].detach().requires_grad_()
    w = torch.randn(33, dtype=torch.float64, requires_grad=True)
    expected = fn(x, w)
    expected.backward(torch.ones_like(expected))
    grads = [x.grad, w.grad]
    x.grad = w.grad = None
    got = torch.compile(fn, backend="mlirfuse")(x, w)
    got.backward(torch.ones_like(got))
    torch.testing.assert_close(got, expected, **TOL[torch.float64])
    for a, b in zip([x.grad, w.grad], grads):
        torch.testing.assert_close(a, b, **TOL[torch.float64])
    forward = seen[0][0]
    assert forward[0] == (3, 4, 40)  # the whole rows
    assert (forward[1] == x.data_ptr()) == (start == 0)  # in place where the storage holds them


# -- dynamic shapes: the tutorial's 20 random sizes --------------------------------------------
def _random_sizes(count=20, base=(8, 12, 64)):
    rng = random.Random(42)
    return [(base[0] + rng.randrange(-2, 3), base[1] + rng.randrange(-2, 3), base[2]) for _ in range(count)]


def _run_sizes(fn, sizes, device="cpu", dtype=torch.float32):
    weight, bias = (torch.randn(sizes[0][-1], dtype=dtype, device=device, requires_grad=True) for _ in range(2))
    after = []
    for shape in sizes:
        x = torch.randn(*shape, dtype=dtype, device=device, requires_grad=True)
        y = torch.rand(*shape, dtype=dtype, device=device)
        fn(x, y, weight, bias).backward(torch.rand(*shape, dtype=dtype, device=device))
        after.append(torch_backend.stats()["compiles"])
    return after


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_twenty_random_sizes_compile_once_per_rank_and_dtype(device: str) -> None:
    compiled = torch.compile(rms_norm(_dropout), backend="mlirfuse")
    sizes = _random_sizes()
    compiles = _run_sizes(compiled, sizes, device)
    distinct = sorted(set(sizes), key=sizes.index)
    second = sizes.index(distinct[1])
    # dynamo compiles a static graph for the first size, then one dynamic graph for all others
    assert dynamo.utils.counters["stats"]["unique_graphs"] == 2
    assert compiles[second] == compiles[-1], compiles  # no compile per size after that
    stats = torch_backend.stats()
    assert stats["compiles"] == stats["fusions"] <= 4, stats  # one per region; none per size


def test_dynamic_true_compiles_one_graph() -> None:
    compiled = torch.compile(rms_norm(_dropout), backend="mlirfuse", dynamic=True)
    compiles = _run_sizes(compiled, _random_sizes(6))
    assert dynamo.utils.counters["stats"]["unique_graphs"] == 1
    assert compiles[0] == compiles[-1] == 2  # forward and backward region, once


def _shared_jitted() -> list[mlirfuse.frontend.jit.JitFunction]:
    """The torch backend's jitted functions, shared by regions of equal fusion IR."""
    from mlirfuse.torch_backend.backend import _REGISTRY

    return list(_REGISTRY.jitted.values())


@pytest.mark.parametrize("dynamic", [None, True])
def test_rows_of_a_static_last_size_are_compiled_for_that_length(dynamic: bool | None) -> None:
    """Dynamo keeps a model's hidden size static when batch and sequence become symbolic: the
    region is compiled for rows of that length (on the GPU, a normalization's threads per row
    are chosen at compile time, its block size is a constant, and it has no run-time tier
    branches), and the static and dynamic graphs still share one compile. A last dim Dynamo
    makes symbolic (dynamic=True) stays dynamic."""
    def f(x):
        return torch.softmax(x * 2.0, -1)

    compiled = torch.compile(f, backend="mlirfuse", dynamic=dynamic)
    for rows in (8, 6, 10):
        x = torch.randn(rows, 3, 64)
        torch.testing.assert_close(compiled(x), f(x), **TOL[torch.float32])
    (jitted,) = _shared_jitted()
    (signature,) = jitted._cache  # one compile for all three sizes
    spec, backend = signature
    assert spec.shape == ((None, None, 64) if dynamic is None else (None, None, None)), spec
    launches = jitted.compile(torch.randn(8, 3, 64), backend="gpu", arch="sm_90").stages["launch_params"]
    assert "normalization" in launches
    assert ("blockDim=(128, 1, 1)" in launches) == (dynamic is None), launches


def test_dynamic_quotients_that_round_down_leave_their_node_to_torch() -> None:
    """Found by a black-box run of FalconMamba / Jamba (torch's associative scan slices x[1::2]
    and x[0:-1:2]) and JetMoe (a head dim that is a SymInt) under dynamic=True: a step-2 slice
    of an odd dynamic dim has S // 2 elements, which was taken as the exact S / 2 (the region
    raised "not an integer" at odd sizes); a slice ending at 32 // (32 // h) raised a TypeError
    in the lowering. Those nodes now run in torch; the rest stays fused and every size is right."""
    def scan_like(x):
        return (x[1::2] * 2).sin() + x[0:-1:2].cos()

    def heads(x, h):
        y = x.view(x.shape[0], -1, h)
        half = (32 // (32 // h)) // 2
        return torch.cat([-y[..., half:], y[..., :half]], -1) * 2.0

    previous = mlirfuse.set_options(fallback=False)
    try:
        f = torch.compile(scan_like, backend="mlirfuse", dynamic=True)
        for n in (8, 9, 10, 11, 13):
            x = torch.randn(n, 4)
            torch.testing.assert_close(f(x), scan_like(x))
        g = torch.compile(heads, backend="mlirfuse", dynamic=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no "internal error ... please report it"
            for b, h in ((2, 8), (3, 16)):
                x = torch.randn(b, 32)
                torch.testing.assert_close(g(x, h), heads(x, h))
    finally:
        mlirfuse.restore_options(previous)


# -- dropout: determinism and statistics -------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_dropout_is_deterministic_under_manual_seed(device: str) -> None:
    f = torch.compile(lambda x: F.dropout(x, 0.5, training=True) * 2.0, backend="mlirfuse")
    x = torch.ones(64, 64, device=device)
    torch.manual_seed(3)
    a, b = f(x), f(x)
    torch.manual_seed(3)
    c = f(x)
    assert torch.equal(a, c) and not torch.equal(a, b)


@pytest.mark.parametrize("p", [0.1, 0.5])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_dropout_keep_rate_and_scaling(p: float, device: str) -> None:
    f = torch.compile(lambda x: F.dropout(x, p, training=True) + 0.0, backend="mlirfuse")
    n = 1 << 18
    out = f(torch.ones(n, device=device)).cpu()
    kept = out != 0
    rate = kept.double().mean().item()
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(rate - (1 - p)) < 5 * sigma, (rate, 1 - p)
    torch.testing.assert_close(out[kept], torch.full_like(out[kept], 1 / (1 - p)))


def test_identical_layers_with_dropout_share_one_compile() -> None:
    """Each seeded region's Philox streams start at an offset of its own, an argument of the
    region's call, not a constant of its fusion: identical layers with dropout keep one fusion
    and one compile between them (found in review: a constant made each layer's IR differ)."""
    layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(4))

    def fn(x):
        for layer in layers:
            x = F.dropout(torch.tanh(layer(x)) * 2.0 + 1.0, 0.1, training=True)
        return x

    with torch.no_grad():
        out = torch.compile(fn, backend="mlirfuse")(torch.randn(8, 32))
    assert torch_backend.stats()["regions"] == 4
    assert torch_backend.stats()["fusions"] == 1 and torch_backend.stats()["compiles"] == 1, torch_backend.stats()
    assert 0.8 < float((out != 0).double().mean()) < 1.0


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_dropouts_in_regions_of_one_graph_draw_independent_masks(device: str) -> None:
    """Two fused regions of one graph (a matmul between them), each a dropout of the same
    shape: the graph draws one seed per call and the regions' random ops take Philox streams
    of their own, so their masks differ; each region's keep rate is 1 - p."""
    def fn(x, w):
        a = F.dropout(x * 1.0, 0.5, training=True)
        b = F.dropout((a @ w) * 0.0 + 1.0, 0.5, training=True)
        return a, b

    x, w = torch.ones(256, 256, device=device), torch.eye(256, device=device)
    f = torch.compile(fn, backend="mlirfuse")
    torch_backend.reset()
    a, b = f(x, w)
    assert torch_backend.stats()["regions"] >= 2
    ka, kb = a != 0, b != 0
    assert not torch.equal(ka, kb)
    for kept in (ka, kb):
        assert abs(kept.double().mean().item() - 0.5) < 0.01
    # independent: the two masks agree on about half of the elements, not all
    assert abs((ka == kb).double().mean().item() - 0.5) < 0.01


# -- observability and packaging ---------------------------------------------------------------
def test_dump_fx_graph_and_partition(capfd) -> None:
    previous = mlirfuse.set_options(dump="fx_graph,partition")
    try:
        def fn(x, w):
            return torch.relu(torch.exp(x) * 2.0 + 1.0) @ w
        torch.compile(fn, backend="mlirfuse")(torch.randn(4, 8), torch.randn(8, 3))
    finally:
        mlirfuse.restore_options(previous)
    err = capfd.readouterr().err
    assert "===== mlirfuse fx_graph" in err and "torch.ops.aten.mm.default" in err
    assert "===== mlirfuse partition" in err
    assert "group fused_0 (4 nodes): exp, mul, add, relu" in err
    assert "torch mm = aten.mm.default: library op, runs in torch" in err
    assert "the compiled graph:" in err


def test_views_left_to_torch_are_reinterpreted_or_tensor_methods(capfd) -> None:
    """Views between groups and library ops: taken from a value of known layout (a region's
    dense output, a matmul's result), one `_reinterpret_tensor` with the metadata's sizes and
    strides, however many views lead there (the view, permute and slice after the matmul);
    from a graph input, Tensor methods (x.view(...)); never torch.ops.aten.view.default's
    Python layer. The results are eager's."""
    dynamo.reset()
    previous = mlirfuse.set_options(dump="partition")
    try:
        def fn(x, w):
            h = torch.relu(x * 2.0 + 1.0).view(-1, 8) @ w.view(8, 3)
            return torch.tanh(h.view(4, 2, 3).permute(1, 0, 2)[:, 1:] * 3.0 + 1.0)
        x, w = torch.randn(4, 2, 8), torch.randn(24)
        out = torch.compile(fn, backend="mlirfuse")(x, w)
    finally:
        mlirfuse.restore_options(previous)
    code = capfd.readouterr().err.split("the compiled graph:")[1]
    assert code.count("_reinterpret_tensor(") == 2, code
    assert ".view([8, 3])" in code and "aten.view.default" not in code and ".permute(" not in code, code
    torch.testing.assert_close(out, fn(x, w), **TOL[torch.float32])


def test_a_value_read_through_one_view_by_several_ops_is_reinterpreted_once(capfd) -> None:
    """A region's output read by three matmuls through the same view (a normalized
    activation and the q, k and v projections): one `_reinterpret_tensor` call, not three."""
    dynamo.reset()
    previous = mlirfuse.set_options(dump="partition")
    try:
        def fn(x, wq, wk, wv):
            h = torch.relu(x * 2.0 + 1.0)
            return h.view(-1, 8) @ wq, h.view(-1, 8) @ wk, h.view(-1, 8) @ wv
        args = (torch.randn(4, 2, 8), torch.randn(8, 3), torch.randn(8, 3), torch.randn(8, 3))
        out = torch.compile(fn, backend="mlirfuse")(*args)
    finally:
        mlirfuse.restore_options(previous)
    code = capfd.readouterr().err.split("the compiled graph:")[1]
    assert code.count("_reinterpret_tensor(") == 1 and code.count("torch.mm(") == 3, code
    for got, want in zip(out, fn(*args)):
        torch.testing.assert_close(got, want, **TOL[torch.float32])


def test_views_of_an_attention_output_and_of_split_pieces_are_checked_then_reinterpreted(capfd) -> None:
    """GPT-2's attention on the host: the fused qkv product split into three pieces, each
    viewed as [B, S, H, D] and permuted to [B, H, S, D]; the attention's output permuted and
    viewed back as [B * S, H * D] for the next matmul. Each piece is one `_reinterpret_tensor`
    of the product (no split, view or permute call), and the attention's output, whose layout
    only its metadata tells, is checked once (`assert_size_stride`) and then one
    `_reinterpret_tensor`. The results are eager's."""
    dynamo.reset()
    previous = mlirfuse.set_options(dump="partition")
    try:
        def fn(x, w_qkv, w_out):
            b, s, e = x.shape
            q, k, v = (torch.relu(x * 2.0) @ w_qkv).split(e, dim=2)
            q, k, v = (t.view(b, s, 2, e // 2).permute(0, 2, 1, 3) for t in (q, k, v))
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return torch.tanh(att.permute(0, 2, 1, 3).reshape(b * s, e) @ w_out + 1.0)
        args = (torch.randn(2, 8, 16), torch.randn(16, 48), torch.randn(16, 16))
        out = torch.compile(fn, backend="mlirfuse")(*args)
    finally:
        mlirfuse.restore_options(previous)
    code = capfd.readouterr().err.split("the compiled graph:")[1]
    assert "split" not in code and ".view(" not in code and ".permute(" not in code, code
    assert code.count("assert_size_stride(") == 1, code
    assert code.count("_reinterpret_tensor(") >= 4, code
    torch.testing.assert_close(out, fn(*args), **TOL[torch.float32])


def test_an_op_result_of_another_layout_than_its_metadata_raises_instead_of_being_misread() -> None:
    """Two views of an aten op's result left to torch (a cumsum) become one
    `_reinterpret_tensor` after a check of that result's sizes and strides against the
    graph's metadata. Where the metadata is wrong (planted here: a transposed layout, as a
    wrong fake kernel would give), the check raises; the result is not read as the layout
    the metadata had. With the metadata right, the result is eager's."""
    def fn(x):
        return torch.exp(torch.cumsum(x, 1).view(4, 2, 4).permute(1, 0, 2) * 2.0)
    x = torch.randn(4, 8)
    compiled = compile_graph(_aten_graph(fn, x), [x])
    torch.testing.assert_close(compiled([x]), fn(x), **TOL[torch.float32])

    gm = _aten_graph(fn, x)
    cumsum = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.cumsum.default)
    val = cumsum.meta["val"]
    cumsum.meta["val"] = val.new_empty_strided(val.shape, (1, 4))
    compiled = compile_graph(gm, [x])
    with pytest.raises(AssertionError, match="stride"):
        compiled([x])


def test_only_results_computed_in_the_graph_are_layout_checked_bases() -> None:
    """The values whose views may become one reinterpret after a layout check: a new tensor
    an aten op computes (cumsum), not a graph input, a view (select) or an in-place op's
    result (copy_): those have their input's layout, which may differ from the metadata."""
    from mlirfuse.torch_backend.runtime import _checkable

    def fn(x, y):
        return torch.cumsum(x, 1), x.select(1, 2), y.copy_(x)
    gm = make_fx(fn)(torch.randn(4, 8), torch.randn(4, 8))
    kinds = {n.target: _checkable(n) for n in gm.graph.nodes if n.op == "call_function"}
    placeholder = next(n for n in gm.graph.nodes if n.op == "placeholder")
    assert kinds == {torch.ops.aten.cumsum.default: True, torch.ops.aten.select.int: False,
                     torch.ops.aten.copy_.default: False}, kinds
    assert not _checkable(placeholder)


def test_views_of_a_graph_input_stay_views() -> None:
    """Views of a graph input run as views (Tensor methods), whatever its layout: a saved
    activation may arrive in another layout than the graph's metadata (the leading columns
    of a padded matmul's rows). Such an input, traced dense: the results are eager's."""
    def fn(x):
        return torch.exp(x.view(4, 2, 4).permute(1, 0, 2) * 2.0)

    def column(x):  # a view op's result (select) is not checked either: its layout is its input's
        return torch.cumsum(x.select(1, 2).view(2, 2).t().unsqueeze(0), 1)
    x = torch.randn(4, 8)
    pitched = torch.randn(4, 12)[:, :8]
    for f in (fn, column):
        compiled = compile_graph(_aten_graph(f, x), [x])
        torch.testing.assert_close(compiled([pitched]), f(pitched), **TOL[torch.float32])


def test_a_biased_linear_left_to_torch_is_one_call(capfd) -> None:
    """Inference through linear layers with biases (BERT's projections): each addmm(b, x, w.t())
    the regions leave to torch runs as linear(x, w, b), the same addmm in torch's C++ without a
    Python call for the weight's transpose. Not for half precision on the CPU, where torch's
    linear takes a slower path than addmm. The logits are eager's."""

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

        def forward(self, x):
            return self.down(F.gelu(self.up(x)) * 2.0)

    for dtype, fused in ((torch.float32, True), (torch.bfloat16, False)):
        dynamo.reset()
        torch.manual_seed(0)
        model, x = Block().to(dtype).eval(), torch.randn(4, 8, 16, dtype=dtype)
        previous = mlirfuse.set_options(dump="partition")
        try:
            with torch.no_grad():
                got = torch.compile(model, backend="mlirfuse")(x)
        finally:
            mlirfuse.restore_options(previous)
        graph = capfd.readouterr().err.split("the compiled graph:")[1]
        if fused:
            assert graph.count("torch._C._nn.linear(") == 2 and ".permute(" not in graph \
                and "addmm" not in graph, graph
        else:
            assert graph.count("torch.addmm(") == 2 and "linear" not in graph, graph
        with torch.no_grad():
            torch.testing.assert_close(got, model(x), **(TOL[dtype] if fused else {"rtol": 2e-2, "atol": 2e-2}))


def test_views_and_matmuls_left_to_torch_cost_the_least_calls(capfd) -> None:
    """In a training step: the forward's x @ w.t() is linear(x, w) (no Python call for the
    view); in the backward, an alias the graph does not return is its value (no call), a
    weight's t() of a t() is no view at all, and matmuls run through torch's Python bindings
    (torch.mm), not torch.ops.aten.mm.default's Python layer. Gradients are eager's."""

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(16))
            self.lin = torch.nn.Linear(16, 32, bias=False)

        def forward(self, x):
            h = x.to(torch.float32)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
            return self.lin(self.weight * h.to(x.dtype)).sum()

    dynamo.reset()
    torch.manual_seed(0)
    model, x = Block(), torch.randn(4, 8, 16, requires_grad=True)
    reference = copy.deepcopy(model)
    previous = mlirfuse.set_options(dump="partition")
    try:
        torch.compile(model, backend="mlirfuse")(x).backward()
    finally:
        mlirfuse.restore_options(previous)
    err = capfd.readouterr().err
    forward = err.split("forward graph:")[1].split("the compiled graph:")[1].split("=====")[0]
    assert "torch._C._nn.linear(" in forward and ".permute(" not in forward and "aten.mm" not in forward, forward
    backward = err.split("backward graph:")[1].split("the compiled graph:")[1]
    assert "aten.alias" not in backward and "aten.mm" not in backward, backward
    assert backward.count("torch.mm(") == 2 and backward.count(".permute(") == 2, backward
    assert ", primals_3)" in backward, backward  # w.t().t(): w itself
    x_ref = x.detach().clone().requires_grad_()
    reference(x_ref).backward()
    torch.testing.assert_close(x.grad, x_ref.grad, **TOL[torch.float32])
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **TOL[torch.float32])


def test_regions_are_named_ranges_under_the_profiler() -> None:
    """torch.profiler traces show each fused region's call as "mlirfuse <group> <fusion key>"
    (the key names the region's MLIRFUSE_DUMP files), so its kernels can be attributed."""
    from torch.profiler import ProfilerActivity, profile

    dynamo.reset()

    def fn(x, w):
        return torch.relu(torch.exp(x) * 2.0 + 1.0) @ w

    compiled = torch.compile(fn, backend="mlirfuse")
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    compiled(x, w)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = compiled(x, w)
    labels = [e.name for e in prof.events() if e.name.startswith("mlirfuse ")]
    assert len(labels) == 1 and labels[0].split()[1] == "fused_0" and len(labels[0].split()[2]) == 12, labels
    torch.testing.assert_close(out, fn(x, w), **TOL[torch.float32])


def test_backend_registered_by_entry_point() -> None:
    from importlib.metadata import entry_points

    if "mlirfuse" not in entry_points(group="torch_dynamo_backends").names:
        pytest.skip("mlirfuse is not pip-installed here (no entry point metadata)")
    code = ("import sys, torch; y = torch.compile(lambda x: (x + 1).relu() * 2, backend='mlirfuse')(torch.ones(3)); "
            "assert y.tolist() == [4.0, 4.0, 4.0], y")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_getitem_of_multi_output_op_goes_with_its_op() -> None:
    def fn(x):
        v, m = torch.var_mean(x, -1, keepdim=True)
        return (x - m) * torch.rsqrt(v + 1e-5)
    x = torch.randn(6, 32, dtype=torch.float64)
    partition, _ = partition_and_trace(_aten_graph(fn, x))
    getitems = [n for g in partition.groups for n in g.nodes if n.target is operator.getitem]
    assert len(partition.groups) == 1 and len(getitems) == 2
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(x), fn(x), rtol=1e-9, atol=1e-9)


def _first_call_failing(monkeypatch, fn, x):
    """fn's aten graph compiled, its regions made to fail: the compiled graph, and its first
    call's result (which warns that the region runs in torch from then on)."""
    from mlirfuse.errors import FusionError
    from mlirfuse.frontend.jit import JitFunction

    compiled = compile_graph(_aten_graph(fn, x), [x])

    def broken(self, *args):
        raise FusionError("planted failure")
    monkeypatch.setattr(JitFunction, "__call__", broken)
    with pytest.warns(RuntimeWarning, match="planted failure"):
        return compiled, compiled([x])


def test_failing_region_falls_back_to_torch(monkeypatch) -> None:
    def fn(x):
        return (torch.exp(x) * 2.0).sum(-1)
    x = torch.randn(4, 8)
    compiled, out = _first_call_failing(monkeypatch, fn, x)
    torch.testing.assert_close(out, fn(x))
    again = compiled([x])  # the region stays with torch, without another warning
    torch.testing.assert_close(again, fn(x))


def test_failing_region_with_random_ops_falls_back_to_torch(monkeypatch) -> None:
    """A region with a dropout takes the graph's seed after its inputs; run by torch after a
    failure, its nodes get their own inputs (not the seed) and draw from torch's generator."""
    def fn(x):
        return F.dropout(torch.exp(x), 0.5, training=True) * 2.0
    x = torch.randn(64, 64)
    _, out = _first_call_failing(monkeypatch, fn, x)
    kept = out != 0
    torch.testing.assert_close(out[kept], torch.exp(x)[kept] * 4.0)
    assert 0.4 < kept.double().mean().item() < 0.6


def _exp_row_sums(x):
    return (torch.exp(x) * 2.0).sum(-1)


def _one_region(monkeypatch, fn, x):
    """fn's aten graph compiled by the backend, and the FusedRegion it makes (one)."""
    from mlirfuse.torch_backend import backend, runtime

    made = []

    class Recording(runtime.FusedRegion):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)
    monkeypatch.setattr(backend, "FusedRegion", Recording)
    compiled = compile_graph(_aten_graph(fn, x), [x])
    (region,) = made
    return compiled, region


def test_a_region_called_with_another_layout_is_profiled_under_its_dump_key(monkeypatch, tmp_path) -> None:
    """A region's named range carries the key of the fusion it ran, as its dump files are named:
    the graph's metadata says contiguous, the call passes a transposed tensor, so the fusion
    compiled (and dumped) is not the one the metadata predicted. The range kept the predicted
    key, and bench/models.py's region table could not join the two."""
    fn = _exp_row_sums
    compiled, region = _one_region(monkeypatch, fn, torch.randn(4, 8))
    x = torch.randn(8, 4).t()
    previous = mlirfuse.set_options(dump="eff_bandwidth", dump_dir=str(tmp_path))
    try:
        torch.testing.assert_close(compiled([x]), fn(x))
    finally:
        mlirfuse.restore_options(previous)
    keys = {f.name.split("-")[0] for f in tmp_path.iterdir()}
    assert len(keys) == 1 and region.label.endswith(next(iter(keys))), (keys, region.label)
    with torch.profiler.profile() as prof:
        torch.testing.assert_close(compiled([x]), fn(x))
    assert any(e.name == region.label for e in prof.events())


def test_check_regions_compares_every_region_with_torch(monkeypatch) -> None:
    """MLIRFUSE_CHECK_REGIONS=1 (`check_regions=True`): each fused region also runs in torch;
    a region that agrees passes (a LayerNorm whose mean cancels to near zero, a mask of
    finfo.min), one whose output is wrong raises FusionError naming the region."""
    from mlirfuse.torch_backend import runtime

    def fn(x, mask):
        y = F.layer_norm(torch.tanh(x) + mask.clamp(min=-1.0), x.shape[-1:])
        return y * 2.0, y.mean(-1)
    x = torch.randn(8, 64)
    mask = torch.where(torch.rand(8, 64) > 0.5, 0.0, torch.finfo(torch.float32).min)
    previous = mlirfuse.set_options(check_regions=True, fallback=False)
    try:
        for got, want in zip(torch.compile(fn, backend="mlirfuse")(x, mask), fn(x, mask)):
            torch.testing.assert_close(got, want)
        dynamo.reset()
        call = runtime.FusedRegion._call

        def wrong(self, args):
            jitted = self.jitted
            self.jitted = lambda *a: tuple(r + 1e-3 if r.is_floating_point() else r for r in jitted(*a))
            try:
                return call(self, args)
            finally:
                self.jitted = jitted
        monkeypatch.setattr(runtime.FusedRegion, "_call", wrong)
        with pytest.raises(mlirfuse.FusionError, match="check_regions: mlirfuse fused_0 .* output 0: differs"):
            torch.compile(fn, backend="mlirfuse")(x, mask)
    finally:
        mlirfuse.restore_options(previous)


def test_transposes_of_0d_and_1d_tensors_are_no_permutation() -> None:
    """A transpose of a 0-d tensor (dims 0 and -1) leaves it as it is: the permute chains of the
    compiled graph read it as no permutation rather than failing (found by review)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from mlirfuse.torch_backend.runtime import _permutation

    def fn(s, v):
        return torch.ops.aten.transpose.int(s, 0, -1), torch.ops.aten.transpose.int(v, 0, -1)
    gm = make_fx(fn, tracing_mode="fake")(torch.tensor(2.0), torch.randn(3))
    transposes = [n for n in gm.graph.nodes if n.target is torch.ops.aten.transpose.int]
    assert [_permutation(n) for n in transposes] == [[], [0]]
