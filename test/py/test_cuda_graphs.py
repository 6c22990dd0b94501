"""torch.compile(backend="mlirfuse", mode="reduce-overhead"): each compiled graph recorded once
as a CUDA graph (torch's CUDA graph trees) and replayed; graphs that cannot be recorded run as
the default mode runs them, and torch's `cudagraph_skips` counter says so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch.nn.functional as F  # noqa: E402
from hf_models import build, grad_errors, train_step  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

from mlirfuse.torch_backend.runtime import FusedRegion  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_torch_backend")
TOLERANCE = {"f32": 1e-4, "bf16_autocast": 1.6e-2, "bf16": 1.6e-2}


def _skips() -> int:
    return counters["inductor"]["cudagraph_skips"]


def _block(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(F.layer_norm(x, x.shape[-1:], w, b)) * x


@pytest.mark.parametrize("mode,options,message", [
    ("max-autotune", None, "has no mode 'max-autotune': it has default, reduce-overhead"),
    (None, {"triton.cudagraphs": True}, "takes no options"),
])
def test_modes_and_options_mlirfuse_has_not_are_refused(mode, options, message) -> None:
    x = torch.randn(4, 8)
    with pytest.raises(Exception, match=message):
        torch.compile(_block, backend="mlirfuse", mode=mode, options=options)(x, x[0], x[0])


def test_reduce_overhead_on_the_cpu_runs_unrecorded_and_matches_eager() -> None:
    counters.clear()
    args = [torch.randn(s, requires_grad=True) for s in [(4, 16), (16,), (16,)]]
    compiled = torch.compile(_block, backend="mlirfuse", mode="reduce-overhead")
    got = compiled(*args)
    grads = torch.autograd.grad(got.sum(), args)
    want = _block(*args)
    for g, w in zip(grads, torch.autograd.grad(want.sum(), args)):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert _skips() == 1  # the forward (CPU tensors); its backward is then not tried


def test_the_trees_are_keyed_by_the_call_s_integers_not_the_compile_s_symbols(monkeypatch) -> None:
    """The trees key their recordings by the graph's integer inputs (sizes, Python ints) as the
    first call gives them: given the compile's inputs, these are SymInts, and one recording,
    n captured, would have served every later n (found in review). On the CPU, with torch's
    checks passed over and the trees replaced by a stand-in that records what it is given."""
    import torch._dynamo.backends.cudagraphs as dynamo_cudagraphs
    import torch._inductor.cudagraph_trees as cudagraph_trees

    from mlirfuse.torch_backend import cuda_graphs

    given = []

    def trees(model, inputs, static_input_idxs, **kwargs):
        given.append([v for v in inputs if not isinstance(v, torch.Tensor)])
        return model

    monkeypatch.setattr(cuda_graphs, "_skip_reason", lambda gm, static: None)
    monkeypatch.setattr(dynamo_cudagraphs, "get_device_index", lambda gm: 0)
    monkeypatch.setattr(cudagraph_trees, "cudagraphify_impl", trees)
    compiled = torch.compile(lambda x, n: x * n + 1, backend="mlirfuse", mode="reduce-overhead")
    x = torch.randn(8)
    for n in range(2, 7):
        torch.testing.assert_close(compiled(x, n), x * n + 1)
    assert given and any(given), given  # (n is an input once dynamo makes it dynamic)
    assert all(type(v) is int for values in given for v in values), given


def test_a_recorded_forward_whose_backward_is_not_recorded_still_trains(monkeypatch) -> None:
    """The forward recorded, its backward refused (here by a stand-in check): the backward runs
    as compiled, telling the trees' manager (where there is one) that it runs unrecorded. On the
    CPU, the trees replaced by a stand-in that notes what it is given."""
    import torch._dynamo.backends.cudagraphs as dynamo_cudagraphs
    import torch._inductor.cudagraph_trees as cudagraph_trees

    from mlirfuse.torch_backend import cuda_graphs

    recorded = []

    def trees(model, inputs, static_input_idxs, **kwargs):
        recorded.append("backward" if kwargs["is_backward"] else "forward")
        return model

    def refuse_backwards(gm, static):
        placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        return "a backward (stand-in)" if any(p.startswith("tangents") for p in placeholders) else None

    counters.clear()
    monkeypatch.setattr(cuda_graphs, "_skip_reason", refuse_backwards)
    monkeypatch.setattr(dynamo_cudagraphs, "get_device_index", lambda gm: 0)
    monkeypatch.setattr(cudagraph_trees, "cudagraphify_impl", trees)
    compiled = torch.compile(_block, backend="mlirfuse", mode="reduce-overhead")
    for _ in range(3):
        args = [torch.randn(s, requires_grad=True) for s in [(4, 16), (16,), (16,)]]
        got = torch.autograd.grad(compiled(*args).pow(2).sum(), args)
        want = torch.autograd.grad(_block(*args).pow(2).sum(), args)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert recorded == ["forward"] and _skips() == 1


def test_a_graph_with_dropout_is_handed_to_the_trees(monkeypatch) -> None:
    """Fused random ops do not keep a graph from being recorded: their seed is drawn in the
    graph, on the device, not on the host at each region's call. On the CPU, torch's checks
    passed over and the trees replaced by a stand-in that notes what it is given."""
    import torch._dynamo.backends.cudagraphs as dynamo_cudagraphs
    import torch._inductor.cudagraph_trees as cudagraph_trees

    from mlirfuse.torch_backend import cuda_graphs

    recorded = []

    def trees(model, inputs, static_input_idxs, **kwargs):
        recorded.append("backward" if kwargs["is_backward"] else "forward")
        return model

    counters.clear()
    monkeypatch.setattr(cuda_graphs, "_skip_reason", lambda gm, static: None)
    monkeypatch.setattr(dynamo_cudagraphs, "get_device_index", lambda gm: 0)
    monkeypatch.setattr(cudagraph_trees, "cudagraphify_impl", trees)
    compiled = torch.compile(lambda x: F.dropout(x * 2, 0.5) + 1, backend="mlirfuse", mode="reduce-overhead")
    x = torch.randn(64, 64, requires_grad=True)
    y = compiled(x)
    y.sum().backward()
    assert torch.equal(x.grad, (y != 1) * 4.0)
    assert recorded == ["forward", "backward"] and _skips() == 0


@pytest.mark.parametrize("setting,message", [
    ("cudagraph_trees", "cudagraph_trees off"),
    ("cudagraph_skip_dynamic_graphs", "dynamic shapes"),
])
def test_graphs_the_trees_could_replay_stale_or_torch_config_skips_are_not_recorded(setting, message) -> None:
    """With the trees off, torch's other recorder keys recordings by nothing (one would serve
    every size and integer); symbolic sizes are skipped where torch's config says so, as
    Inductor skips them."""
    from torch._inductor import config as inductor_config
    from torch.fx.experimental.proxy_tensor import make_fx

    from mlirfuse.torch_backend import cuda_graphs

    gm = make_fx(lambda x: x * 2 + 1, tracing_mode="symbolic")(torch.randn(4, 8))
    with inductor_config.patch({f"triton.{setting}": setting != "cudagraph_trees"}):
        assert message in cuda_graphs._skip_reason(gm, [])


class _CountedRegions:
    """Calls of fused regions' Python (none while a graph is replayed)."""

    def __init__(self, monkeypatch) -> None:
        self.calls = 0
        call = FusedRegion.__call__

        def counted(region, *args):
            self.calls += 1
            return call(region, *args)
        monkeypatch.setattr(FusedRegion, "__call__", counted)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / max(float(b.double().norm()), 1e-30))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["f32", "bf16_autocast", "bf16"])
@pytest.mark.parametrize("family", ["gpt2", "llama", "bert"])
def test_models_replayed_as_cuda_graphs_match_eager(family: str, mode: str, monkeypatch) -> None:
    """Four steps on new token ids each (the trees copy them, and only them, into the graphs' buffers): the
    first two run the regions (warm-up, recording), the last two only replay the graphs; each
    step's logits, loss and every gradient match eager's."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    counters.clear()
    torch.manual_seed(0)
    model = build(family, "tiny").cuda()
    if mode == "bf16":
        model = model.to(torch.bfloat16).eval()
    autocast = torch.bfloat16 if mode == "bf16_autocast" else None
    compiled = torch.compile(model, backend="mlirfuse", mode="reduce-overhead")
    regions = _CountedRegions(monkeypatch)
    calls = []
    for step in range(4):
        ids = torch.randint(0, model.config.vocab_size, (2, 32), device="cuda",
                            generator=torch.Generator("cuda").manual_seed(step))
        if mode == "bf16":
            with torch.no_grad():
                want, got = model(input_ids=ids).logits, compiled(input_ids=ids).logits.clone()
            assert _rel(got, want) <= TOLERANCE[mode], f"step {step}: logits {_rel(got, want):.3g}"
        else:
            want, got = train_step(model, model, ids, autocast), train_step(model, compiled, ids, autocast)
            assert _rel(got.loss, want.loss) <= TOLERANCE[mode], f"step {step}: loss {got.loss} vs {want.loss}"
            assert _rel(got.logits, want.logits) <= TOLERANCE[mode], f"step {step}: logits"
            errors = grad_errors(want, got)
            largest = max(norm for _, norm in errors.values())
            bad = {n: e for n, (e, norm) in errors.items()
                   if e * norm > TOLERANCE[mode] * max(norm, 1e-2 * largest)}
            assert not bad and set(got.grads) == set(want.grads), f"step {step}: {bad}"
        calls.append(regions.calls)
    assert _skips() == 0
    # the token ids (and labels) and a backward's output gradient are copied into the graphs'
    # buffers at each replay, not the weights (counted from the dynamo graph's inputs alone, all
    # 29 of GPT-2's were, at every inference replay: 0.2 ms a step at real widths, H200); the
    # count is over the recordings (the trees record the training forward twice: 7-8 here)
    copied = counters["inductor"]["cudagraph_recorded_non_static_inputs"]
    assert copied < len(list(model.parameters())) // 2, (copied, len(list(model.parameters())))
    assert calls[0] > 0 and calls[2] == calls[1] and calls[3] == calls[1], calls  # replays run no region


@pytest.mark.gpu
def test_integer_arguments_and_sizes_that_change_get_recordings_of_their_own() -> None:
    """A Python int and a size that dynamo makes symbolic: each value replays what it computes."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    compiled = torch.compile(lambda x, n: F.layer_norm(x * n, x.shape[-1:]) + n, backend="mlirfuse",
                             mode="reduce-overhead")
    for rows in (16, 24, 32):
        for n in (2, 3, 4, 3, 2):
            x = torch.randn(rows, 64, device="cuda")
            torch.testing.assert_close(compiled(x, n).clone(), F.layer_norm(x * n, (64,)) + n)


@pytest.mark.gpu
def test_a_graph_with_dropout_is_recorded_and_each_replay_draws_a_new_mask(monkeypatch) -> None:
    """A fused dropout reads its seed from device memory that the graph fills from torch's CUDA
    generator (graph-safe: a replay advances the generator's offset, as eager would): the
    forward and backward are recorded, every replay draws a new mask, and the gradient is
    the mask's; `torch.manual_seed` repeats the masks."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    counters.clear()

    def fn(x):
        return F.dropout(x * 2, 0.5) + 1

    x = torch.randn(64, 256, device="cuda", requires_grad=True)
    compiled = torch.compile(fn, backend="mlirfuse", mode="reduce-overhead")

    def masks(steps):
        drawn = []
        for _ in range(steps):
            y = compiled(x)
            y.sum().backward()
            drawn.append((y != 1).clone())
            assert torch.equal(x.grad, drawn[-1] * 4.0)  # 2 / (1 - p) where kept
            x.grad = None
        return drawn

    torch.manual_seed(5)
    masks(3)  # warm-up and recording
    counted = _CountedRegions(monkeypatch)
    torch.manual_seed(5)
    first = masks(6)
    assert _skips() == 0 and counted.calls == 0  # replayed, no region's Python
    assert all(not torch.equal(a, b) for k, a in enumerate(first) for b in first[k + 1:])
    assert 0.45 < float(torch.stack(first).float().mean()) < 0.55
    torch.manual_seed(5)
    assert all(torch.equal(a, b) for a, b in zip(first, masks(6)))


