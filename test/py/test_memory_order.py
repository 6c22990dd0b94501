"""Library calls moved down to their first use where that holds less memory (memory_order.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from mlirfuse.torch_backend import backend  # noqa: E402
from mlirfuse.torch_backend.memory_order import simulated_peak, sink_library_calls  # noqa: E402

aten = torch.ops.aten


def tied_weight_backward(x, w, g, h):
    """A weight's gradient (x.T @ g: [256, 512]), needed only at the end, then a chain of
    products that hold their own temporaries, then the sum with the tied use's gradient."""
    weight_grad = torch.mm(x.t(), g).t()
    y = h
    for _ in range(3):
        y = torch.mm(y, w).relu()
    return y.sum() + weight_grad, y


TIED = ((64, 512), (128, 128), (64, 256), (2048, 128))  # the chain's temporaries, 1 MB each, make the peak


def traced(fn, *shapes):
    return make_fx(fn, tracing_mode="fake")(*[torch.randn(s) for s in shapes])


def test_a_weight_gradient_used_at_the_end_is_computed_there_and_the_peak_drops() -> None:
    gm = traced(tied_weight_backward, *TIED)
    before = simulated_peak(gm)
    mm = next(n for n in gm.graph.nodes if n.target is aten.mm.default)  # the weight gradient's
    assert sink_library_calls(gm) == 1
    nodes = list(gm.graph.nodes)
    at = nodes.index(mm)
    assert [n.target for n in nodes[at:at + 3]] == [aten.mm.default, aten.t.default, aten.add.Tensor]
    assert simulated_peak(gm) < before
    x, w, g, h = (torch.randn(s) for s in TIED)
    for got, want in zip(gm(x, w, g, h), tied_weight_backward(x, w, g, h)):
        torch.testing.assert_close(got, want)


def test_a_product_whose_big_input_dies_with_it_stays() -> None:
    """Moving it down would keep its input (8x its result) alive over the chain."""
    def fn(a, b, h, w):
        small = torch.mm(a.exp(), b)  # a.exp(): [256, 1024], the product [256, 8]
        y = h
        for _ in range(3):
            y = torch.mm(y, w).relu()
        return y.sum() + small
    gm = traced(fn, (256, 1024), (1024, 8), (32, 128), (128, 128))
    order = [n.name for n in gm.graph.nodes]
    assert sink_library_calls(gm) == 0
    assert [n.name for n in gm.graph.nodes] == order


def test_a_product_is_not_moved_past_a_write_into_its_input() -> None:
    def fn(x, w, h):
        p = torch.mm(x, w)
        q = torch.mm(h, w).relu()
        x.add_(1.0)
        return p + q.sum()
    gm = traced(fn, (64, 64), (64, 64), (8, 64))
    assert any(n.target is aten.add_.Tensor for n in gm.graph.nodes)
    order = [n.name for n in gm.graph.nodes]
    sink_library_calls(gm)
    nodes = [n.name for n in gm.graph.nodes]
    first_mm = next(n.name for n in gm.graph.nodes if n.target is aten.mm.default)
    assert nodes.index(first_mm) == order.index(first_mm)


@pytest.mark.parametrize("between", ["scatter_into_its_input", "unknown_function"])
def test_a_product_is_not_moved_past_a_python_call_that_writes_or_may_write(between) -> None:
    """The embedding gradient's scatter-add writes into its first argument in place (it says
    so: `writes_into`); a Python function that does not say what it writes may write anything."""
    from mlirfuse.torch_backend.embedding_grad import scatter_embedding_grad

    gm = traced(tied_weight_backward, *TIED)
    nodes = list(gm.graph.nodes)
    mm = next(n for n in nodes if n.target is aten.mm.default)
    x = nodes[0]
    chain_mm = [n for n in nodes if n.target is aten.mm.default][1]
    with gm.graph.inserting_before(chain_mm):
        if between == "scatter_into_its_input":
            g = nodes[2]
            idx = gm.graph.call_function(aten.zeros.default, ([64],), {"dtype": torch.int64})
            idx.meta["val"] = torch.zeros(64, dtype=torch.int64)
            gm.graph.call_function(scatter_embedding_grad, (x, g, idx, 64, True))
        else:
            gm.graph.call_function(print, ("hello",))
    at = list(gm.graph.nodes).index(mm)
    sink_library_calls(gm)
    assert list(gm.graph.nodes).index(mm) == at


def test_tied_output_projection_gradient_is_computed_late_in_a_model_backward(monkeypatch) -> None:
    """GPT-2's output projection, tied to the token embedding: in the compiled backward its
    weight gradient ([vocab, hidden]) comes right before its first use (the sum with the
    embedding's), the backward's simulated peak drops, and the gradients are eager's."""
    pytest.importorskip("transformers")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from hf_models import build

    graphs: list[tuple[str, int, int, torch.fx.GraphModule]] = []
    sink = backend.sink_library_calls

    def recording(gm, kind):
        before = simulated_peak(gm, kind)
        sink(gm, kind)
        graphs.append((kind, before, simulated_peak(gm, kind), gm))
        return 0
    monkeypatch.setattr(backend, "sink_library_calls", recording)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = build("gpt2").double()
    eager = build("gpt2").double()
    eager.load_state_dict(model.state_dict())
    ids = torch.randint(0, 512, (2, 24))

    def loss(run):  # in float64 (HF's `labels=` path casts the logits to float32)
        return torch.nn.functional.cross_entropy(run(input_ids=ids).logits.flatten(0, 1), ids.flatten())
    loss(torch.compile(model, backend="mlirfuse")).backward()
    loss(eager).backward()
    assert all(after <= before for _, before, after, _ in graphs)
    (_, before, after, gm), = [g for g in graphs if g[0] == "backward"]
    assert after < before
    nodes = list(gm.graph.nodes)
    vocab_grad, = [n for n in nodes
                   if n.target is aten.mm.default and tuple(n.meta["val"].shape) in ((512, 64), (64, 512))]
    group, at = {vocab_grad}, nodes.index(vocab_grad) + 1
    while nodes[at].target in (aten.t.default, aten.permute.default, aten.view.default):
        assert nodes[at].args[0] in group
        group.add(nodes[at])
        at += 1
    assert group & set(nodes[at].all_input_nodes)  # its first use, next
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-9, atol=1e-15, msg=lambda m, name=name: f"{name}: {m}")
