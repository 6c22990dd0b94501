"""What the torch backend launches around library calls: copies it must not leave to torch,
and the padding of half-precision matmuls with misaligned sizes (cuBLAS's slow path)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import mlirfuse  # noqa: E402
from mlirfuse import torch_backend  # noqa: E402
from mlirfuse.torch_backend.aten_table import aten  # noqa: E402
from mlirfuse.torch_backend.partition import partition_graph  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_torch_backend")


def _aten_graph(fn, *args):
    return make_fx(fn, decomposition_table=torch_backend.decompositions(), tracing_mode="fake")(*args)


def test_a_clone_feeding_a_group_is_fused_not_copied_by_torch() -> None:
    """BERT under autocast trains with dropout p=0: a clone of each linear's output feeds the
    residual-add LayerNorm region. Classed as a view and stripped at the group's edge, it ran
    as a copy kernel of its own in torch; inside the group it is free."""
    def fn(x, w, b):
        h = aten.clone.default(x @ w)
        return torch.relu(h + b) * 2.0
    args = torch.randn(16, 8), torch.randn(8, 8), torch.randn(8)
    gm = _aten_graph(fn, *args)
    partition = partition_graph(gm.graph)
    clones = [n for n in gm.graph.nodes if n.target is aten.clone.default]
    assert clones and all(n not in partition.left for n in clones), partition.left
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(*args), fn(*args))


def test_a_cast_and_the_copy_of_its_transpose_are_one_group() -> None:
    """BERT's bfloat16 attention output: the float32 product cast to bfloat16, its heads
    transposed back and copied contiguous (`.transpose(1, 2).contiguous()`) before the output
    projection. Torch runs two kernels (the cast, the copy); as a group of one compute op
    they were left to it (a cast of 5 us and a copy of 10 us on the H200 where the first
    layer's group, which a padding joined, ran in 8 us). A copy torch would run counts
    toward the compute ops a group needs."""
    def fn(a, w):
        y = a.to(torch.bfloat16).permute(0, 2, 1, 3).contiguous().view(2, 16, 32)
        return y @ w
    args = torch.randn(2, 4, 16, 8), torch.randn(32, 32, dtype=torch.bfloat16)
    gm = _aten_graph(fn, *args)
    partition = partition_graph(gm.graph)
    assert len(partition.groups) == 1, partition.describe()
    targets = {n.target for n in partition.groups[0].nodes}
    assert aten._to_copy.default in targets and aten.clone.default in targets, partition.describe()
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(*args), fn(*args))


def test_a_lone_copy_of_a_transpose_stays_with_torch() -> None:
    """A copy alone is one kernel in torch and one in a region: left to torch."""
    def fn(a, w):
        return a.permute(0, 2, 1, 3).contiguous().view(2, 16, 32) @ w
    args = torch.randn(2, 4, 16, 8), torch.randn(32, 32)
    partition = partition_graph(_aten_graph(fn, *args).graph)
    assert not partition.groups, partition.describe()


def _padded_matmul_cases():
    """(name, fn, args): the output projection of a model with an odd vocabulary, forward
    and as the backward meets it (weight transposed, logits' gradient as K and as M), a
    bias, a batch."""
    g = torch.Generator().manual_seed(0)

    def r(*s):
        return torch.randn(*s, generator=g, dtype=torch.float64)
    return [
        ("lm_head", lambda x, w: torch.log_softmax(x @ w.t(), -1) * 2.0, (r(12, 16), r(37, 16))),
        ("addmm", lambda x, w, b: torch.relu(torch.nn.functional.linear(x, w, b)), (r(13, 20), r(30, 20), r(30))),
        ("bmm", lambda x, y: torch.tanh(torch.bmm(x, y)), (r(3, 9, 10), r(3, 10, 11))),
    ]


@pytest.mark.parametrize("case", _padded_matmul_cases(), ids=lambda c: c[0])
def test_padded_matmuls_give_eager_results_and_gradients(case) -> None:
    """With padding forced on every misaligned matmul (CPU, float64), outputs and gradients
    equal eager's: the zero rows and columns add nothing, the slices give the true sizes."""
    from mlirfuse.torch_backend.pad_matmul import ALIGN

    _, fn, args = case
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        leaves = [a.clone().requires_grad_() for a in args]
        out = torch.compile(fn, backend="mlirfuse")(*leaves)
        out.sum().backward()
        gm = _aten_graph(fn, *args)
        from mlirfuse.torch_backend.pad_matmul import pad_matmuls
        assert pad_matmuls(gm) >= 1
    finally:
        mlirfuse.restore_options(previous)
    for n in gm.graph.nodes:  # every matmul left reads operands of aligned sizes
        if n.target in (aten.mm.default, aten.addmm.default, aten.bmm.default):
            assert all(s % ALIGN == 0 for s in n.meta["val"].shape[-2:]), n.format_node()
    eager = [a.clone().requires_grad_() for a in args]
    want = fn(*eager)
    want.sum().backward()
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    for a, b in zip(leaves, eager):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=1e-12)


def test_padding_keeps_transposed_layouts_and_pads_a_tensor_once() -> None:
    """The logits' gradient feeds both the weight gradient (as M, transposed) and the input
    gradient (as K): one pad of it serves both, and the weight is padded before its transpose."""
    from mlirfuse.torch_backend.pad_matmul import pad_matmuls

    def fn(g, w, x):
        return g @ w, g.t() @ x
    gm = _aten_graph(fn, torch.randn(16, 37), torch.randn(37, 8), torch.randn(16, 8))
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        assert pad_matmuls(gm) == 2
    finally:
        mlirfuse.restore_options(previous)
    g, w, _ = [n for n in gm.graph.nodes if n.op == "placeholder"]
    pads = [n for n in gm.graph.nodes if n.target is aten.constant_pad_nd.default]
    assert [(n.args[0], list(n.args[1])) for n in pads] == [(g, [0, 3]), (w, [0, 0, 0, 3])]


def _padded_and_compiled(fn, args, padded: int):
    """fn's aten graph after pad_matmuls (forced on: `padded` matmuls rewritten), and fn's
    result through torch.compile(backend="mlirfuse") with padding forced on too."""
    from mlirfuse.torch_backend.pad_matmul import pad_matmuls

    gm = _aten_graph(fn, *args)
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        assert pad_matmuls(gm) == padded
        out = torch.compile(fn, backend="mlirfuse")(*args)
    finally:
        mlirfuse.restore_options(previous)
    return gm, out


def test_padding_leaves_no_dead_transpose_to_keep_the_unpadded_tensor_alive() -> None:
    """BERT's MLM head backward under autocast: both matmuls read the padded logits' gradient,
    one through a transpose. The transpose of the unpadded gradient that padding replaced
    stayed in the graph without users, so the cross-entropy region still wrote the unpadded
    gradient as an output nobody read (250 MB a step at 4096 x 30522 bf16)."""
    def fn(x, w, t):
        g = torch.softmax(x @ w.t(), -1) - t  # the logits' gradient, computed by a region
        return g @ w, g.t() @ x, g.sum(0)
    args = torch.randn(16, 8), torch.randn(37, 8), torch.randn(16, 37)
    gm, outs = _padded_and_compiled(fn, args, 3)
    assert all(n.users or n.op == "output" for n in gm.graph.nodes if n.op == "call_function"), gm.graph
    partition = partition_graph(gm.graph)
    sub = next(n for n in gm.graph.nodes if n.target is aten.sub.Tensor)
    group = next(g for g in partition.groups if sub in g.nodes)
    assert all(u in group.nodes for u in sub.users), [u.format_node() for u in sub.users]
    for got, want in zip(outs, fn(*args)):
        torch.testing.assert_close(got, want)


def test_a_value_padded_by_rows_is_written_once() -> None:
    """A computed value padded along its rows for a matmul and read elsewhere too (GPT-2's
    bf16 output-projection weight, a cast of the embeddings' weight, padded from 50257 rows
    to 50264 and saved for the backward): its other readers take the padded tensor's leading
    rows (a view with its layout), so that the region computing it writes one buffer, not the
    value and its padded copy."""
    def fn(h, w):
        x = w * 2.0
        return h @ x.t(), x + 0.0, x
    args = torch.randn(16, 8, dtype=torch.float64), torch.randn(37, 8, dtype=torch.float64)
    gm, outs = _padded_and_compiled(fn, args, 1)
    mul = next(n for n in gm.graph.nodes if n.target is aten.mul.Tensor)
    assert [u.target for u in mul.users] == [aten.constant_pad_nd.default], [u.format_node() for u in mul.users]
    partition = partition_graph(gm.graph)
    group = next(g for g in partition.groups if mul in g.nodes)
    outside = [n for n in group.nodes for u in n.users if u not in group.nodes]
    assert mul not in outside, partition.describe()
    for got, want in zip(outs, fn(*args)):
        torch.testing.assert_close(got, want)
    assert outs[2].stride() == (8, 1) and outs[2].storage_offset() == 0  # x's own layout


@pytest.mark.parametrize("transposed", [True, False], ids=["x@w.t()", "x@w"])
def test_a_weight_is_read_in_place_only_where_its_columns_are_aligned_rows(transposed) -> None:
    """`x @ w.t()` with w [N, K] (a Linear's weight): b = w.t()'s columns are w's rows, 16-byte
    aligned, and its aligned part is read in place. `x @ w` with w [K, N] and N odd: b's rows
    are N apart, misaligned for cuBLAS however N is cut, so w is padded as before."""
    from mlirfuse.torch_backend.pad_matmul import matmul_into_padded_width, pad_matmuls

    w = torch.randn(37, 16) if transposed else torch.randn(16, 37)

    def fn(x, w):
        return (x @ w.t() if transposed else x @ w) * 2.0
    gm = _aten_graph(fn, torch.randn(8, 16), w)
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        assert pad_matmuls(gm) == 1
        out = torch.compile(fn, backend="mlirfuse")(torch.ones(8, 16), w)
    finally:
        mlirfuse.restore_options(previous)
    split = [n for n in gm.graph.nodes if n.target is matmul_into_padded_width]
    pads = [n for n in gm.graph.nodes if n.target is aten.constant_pad_nd.default]
    assert (len(split), len(pads)) == ((1, 0) if transposed else (0, 1)), gm.graph
    torch.testing.assert_close(out, fn(torch.ones(8, 16), w))


def test_the_split_product_s_slice_is_a_reinterpret_not_an_aten_call(capfd) -> None:
    """The padded product `matmul_into_padded_width` writes is dense from offset 0, as an mm's
    is: the slice back to N columns and the view after it are one `_reinterpret_tensor`, not
    aten.slice through the op overload's Python layer (found in review)."""
    previous = mlirfuse.set_options(pad_matmuls="always", dump="partition")
    try:
        x, w = torch.randn(2, 8, 16, dtype=torch.bfloat16), torch.randn(37, 16, dtype=torch.bfloat16)
        out = torch.compile(lambda x, w: x @ w.t(), backend="mlirfuse")(x, w)
    finally:
        mlirfuse.restore_options(previous)
    code = capfd.readouterr().err.split("the compiled graph:")[-1]
    assert "matmul_into_padded_width" in code and "_reinterpret_tensor" in code, code
    assert "slice" not in code.replace("matmul_into_padded_width", ""), code
    torch.testing.assert_close(out, x @ w.t())


def test_auto_padding_is_for_large_half_precision_cuda_matmuls_only() -> None:
    from mlirfuse.torch_backend.pad_matmul import pad_matmuls

    gm = _aten_graph(lambda x, w: x @ w, torch.randn(64, 37, dtype=torch.bfloat16), torch.randn(37, 64,
                                                                                            dtype=torch.bfloat16))
    assert pad_matmuls(gm) == 0  # CPU (and small)
    with pytest.raises(mlirfuse.FusionError, match="pad_matmuls"):
        mlirfuse.set_options(pad_matmuls="sometimes")


def test_the_slice_back_to_the_true_width_is_read_inside_the_group() -> None:
    """BERT's MLM head under autocast: the padded logits cut back to 37 columns. Stripped to
    torch, the slice handed the cross-entropy region rows of runtime stride, which its
    pointwise kernels ran on the naive path (2 launches, 9.8 ms of a 16 ms step on the H100);
    inside, the region reads the contiguous padded logits."""
    def fn(x, w, b, t):
        return torch.nn.functional.cross_entropy(torch.nn.functional.linear(x, w, b), t)
    args = torch.randn(16, 8), torch.randn(37, 8), torch.randn(37), torch.randint(0, 37, (16,))
    gm, out = _padded_and_compiled(fn, args, 1)
    partition = partition_graph(gm.graph)
    slices = [n for n in gm.graph.nodes if n.target is aten.slice.Tensor]
    assert slices and all(n not in partition.left for n in slices), partition.left
    torch.testing.assert_close(out, fn(*args))


def _one_layer(family: str, hidden: int, vocab: int) -> torch.nn.Module:
    """A one-layer GPT-2 or BERT (no dropout) with this width and vocabulary, seeded."""
    import transformers as T

    torch.manual_seed(0)
    if family == "gpt2":
        return T.GPT2LMHeadModel(T.GPT2Config(n_layer=1, n_embd=hidden, n_head=4, vocab_size=vocab, n_positions=256,
                                              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    return T.BertForMaskedLM(T.BertConfig(num_hidden_layers=1, hidden_size=hidden, intermediate_size=2 * hidden,
                                          num_attention_heads=4, vocab_size=vocab, hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0))


def _nan_padded_products(monkeypatch) -> list[torch.Size]:
    """`matmul_into_padded_width` with its unwritten padding columns filled with NaN (a reader
    of them would spread NaN); returns the list of the products' shapes, filled as they run."""
    from mlirfuse.torch_backend import pad_matmul

    split, products = pad_matmul.matmul_into_padded_width, []

    def nan_padded(a, b):
        out = split(a, b)
        out[:, b.shape[1]:] = float("nan")
        products.append(out.shape)
        return out
    monkeypatch.setattr(pad_matmul, "matmul_into_padded_width", nan_padded)
    return products


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_a_model_with_an_odd_vocabulary_trains_as_eager_with_padded_matmuls(family, monkeypatch) -> None:
    """GPT-2 and BERT with a 509-word vocabulary (misaligned, as 50257 and 30522 are), padding
    forced on for the CPU in float64: one training step and one inference forward match eager,
    parameter by parameter (the output projection, its weight gradient through the tied
    embedding, and the sliced logits inside the cross-entropy region). GPT-2's output
    projection reads its weight in place (`matmul_into_padded_width`), whose padding columns,
    unwritten, are filled with NaN here: nothing reads them."""
    import copy

    from hf_models import Step, exact_float64, grad_errors

    products = _nan_padded_products(monkeypatch)

    def train_step(m, run, ids, _):  # the loss in float64 (HF's rounds the logits to float32)
        m.zero_grad(set_to_none=True)
        logits = run(input_ids=ids).logits
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
        return Step(None, logits.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None})

    model = exact_float64(_one_layer(family, 32, 509)).train()
    ids = torch.randint(0, 509, (2, 16), generator=torch.Generator().manual_seed(1))
    eager = copy.deepcopy(model)
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        with torch_backend.capture_partitions() as captured:
            got = train_step(model, torch.compile(model, backend="mlirfuse"), ids, None)
    finally:
        mlirfuse.restore_options(previous)
    pads = [n for _, p in captured for n in [*p.left, *(m for g in p.groups for m in g.nodes)]
            if n.target is aten.constant_pad_nd.default]
    assert len(pads) >= 2, "the forward's and the backward's matmuls were padded"
    want = train_step(eager, eager, ids, None)
    torch.testing.assert_close(got.logits, want.logits, rtol=1e-9, atol=1e-9)
    errors = {name: err for name, (err, norm) in grad_errors(want, got).items() if norm > 1e-12 and err > 1e-9}
    assert not errors, errors
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        with torch.no_grad():
            logits = torch.compile(model, backend="mlirfuse")(input_ids=ids).logits
    finally:
        mlirfuse.restore_options(previous)
    with torch.no_grad():
        torch.testing.assert_close(logits, eager(input_ids=ids).logits, rtol=1e-9, atol=1e-9)
    # training and inference: GPT-2's projection is an mm; BERT's decoder an addmm, whose weight is padded
    assert (len(products) >= 2 if family == "gpt2" else not products), products
    assert all(shape[-1] == 512 for shape in products), products


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_bf16_output_projections_read_their_weights_in_place_on_the_gpu(family, monkeypatch) -> None:
    """GPT-2 and BERT in bfloat16 (no autocast: the weights are graph inputs) at their real
    vocabularies (50257, 30522): GPT-2's output projection is computed into padded rows without
    a copy of its weight, the padding columns (filled with NaN here) read by no kernel (BERT's
    decoder, an addmm, pads its weight); a training step and an inference forward match eager
    within bfloat16's rounding."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    import copy

    from hf_models import grad_errors, train_step

    products = _nan_padded_products(monkeypatch)
    model = _one_layer(family, 128, {"gpt2": 50257, "bert": 30522}[family]).to("cuda", torch.bfloat16).train()
    eager = copy.deepcopy(model)
    ids = torch.randint(0, model.config.vocab_size, (4, 128), device="cuda")
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        compiled = torch.compile(model, backend="mlirfuse")
        got = train_step(model, compiled, ids, None)
        with torch.no_grad():
            logits = compiled(input_ids=ids).logits
    finally:
        mlirfuse.restore_options(previous)
    want = train_step(eager, eager, ids, None)
    # GPT-2's projection is an mm (the tied embedding); BERT's decoder an addmm, whose weight is padded
    assert len(products) >= 2 if family == "gpt2" else not products, products
    assert torch.isfinite(got.logits).all() and torch.isfinite(logits).all()
    torch.testing.assert_close(got.logits.float(), want.logits.float(), rtol=2e-2, atol=2e-2)
    with torch.no_grad():
        torch.testing.assert_close(logits.float(), eager(input_ids=ids).logits.float(), rtol=2e-2, atol=2e-2)
    worst = max(err for err, norm in grad_errors(want, got).values() if norm > 1e-6)
    assert worst < 5e-2, grad_errors(want, got)


def test_padded_logits_returned_and_read_by_the_loss_are_read_in_place(monkeypatch) -> None:
    """A padded output projection whose bf16 logits the function returns and a cross-entropy
    reads (BERT's masked-LM head): the forward region reads the padded product and does not
    write the logits (torch takes the slice again, a view); the backward region, whose saved
    logits arrive as the slice though AOTAutograd recorded them dense, takes the padded rows
    on its first call instead of a copy. Results and gradients are eager's."""
    from mlirfuse.frontend.jit import JitFunction

    calls = []
    call = JitFunction.__call__

    def record(self, *args):
        out = call(self, *args)
        calls.append(([tuple(a.shape) for a in args if isinstance(a, torch.Tensor)],
                      [tuple(o.shape) for o in (out if isinstance(out, (tuple, list)) else [out])]))
        return out
    monkeypatch.setattr(JitFunction, "__call__", record)
    v = 301

    def fn(h, w, labels):
        logits = (h @ w).view(2, 3, v)
        return logits, torch.nn.functional.cross_entropy(logits.float().view(-1, v), labels)
    torch.manual_seed(0)
    h, w = torch.randn(6, 16, dtype=torch.bfloat16), torch.randn(16, v, dtype=torch.bfloat16)
    labels = torch.randint(0, v, (6,))
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        leaves = [h.clone().requires_grad_(), w.clone().requires_grad_()]
        logits, loss = torch.compile(fn, backend="mlirfuse")(*leaves, labels)
        loss.backward()
    finally:
        mlirfuse.restore_options(previous)
    eager = [h.clone().requires_grad_(), w.clone().requires_grad_()]
    want_logits, want_loss = fn(*eager, labels)
    want_loss.backward()
    torch.testing.assert_close(logits, want_logits, rtol=0, atol=0)
    for got, want in [(loss, want_loss)] + [(a.grad, b.grad) for a, b in zip(leaves, eager)]:
        torch.testing.assert_close(got, want, rtol=1.6e-2, atol=1e-2)
    normalizing = [(i, o) for i, o in calls if {(6, 304), (2, 3, 304)} & set(i)]  # reading the padded rows
    assert len(normalizing) == 2  # forward and backward
    assert not any(s[-1:] == (v,) for s in normalizing[0][1])  # the forward writes no logits
    assert (6, v) not in normalizing[1][0]  # the backward reads no copy of them


def test_a_lone_copy_joins_the_nearest_group_it_makes_no_cycle_with() -> None:
    """Llama's bf16 inference (H100): the KV-cache cat of the values (a legacy empty tensor
    and the permuted values) was a group of its own op, left to torch: a CatArrayBatchedCopy
    kernel (28 us a layer) and a call of its own. Such a lone op joins the nearest group it
    makes no cycle with (the keys' rotary embedding); a lone reduction stays with torch, and
    so does a lone op between two matmuls (either group would then wait on itself)."""
    def fn(x, wk, wv, w2, empty_k, empty_v):
        k = (x @ wk).view(2, 8, 4, 4).permute(0, 2, 1, 3)
        v = (x @ wv).view(2, 8, 4, 4).permute(0, 2, 1, 3)
        kc = torch.cat([empty_k, k * 2.0 + 1.0], -2)
        vc = torch.cat([empty_v, v], -2)
        s = torch.softmax(kc @ vc.transpose(-1, -2), -1)
        between = (s.flatten(0, 1) @ w2).exp() @ w2  # exp: a lone op between two matmuls
        return s, (between * 3.0).tanh(), (x @ wk).sum(0)
    args = torch.randn(16, 16), torch.randn(16, 16), torch.randn(16, 16), torch.randn(8, 8), torch.tensor([]), \
        torch.tensor([])
    gm = _aten_graph(fn, *args)
    partition = partition_graph(gm.graph)
    cats = [n for n in gm.graph.nodes if n.target is aten.cat.default]
    assert len(cats) == 2 and all(n not in partition.left for n in cats), partition.describe()
    together = [g for g in partition.groups if any(n in g.nodes for n in cats)]
    assert len(together) == 1, partition.describe()
    lone = {n.target for n, why in partition.left.items() if why.startswith("group of a single op")}
    assert aten.sum.dim_IntList in lone and aten.exp.default in lone, partition.describe()
    for got, want in zip(torch.compile(fn, backend="mlirfuse")(*args), fn(*args)):
        torch.testing.assert_close(got, want)


def test_a_copy_and_a_lone_op_still_join_the_nearest_group() -> None:
    """Llama's KV-cache cat of the values, as transformers writes it: the empty tensor is made
    in the graph (`torch.tensor([])`: a constant and its `lift_fresh_copy`), so the cat comes
    with a copy. Counting that copy beside the cat made the pair a group of its own (one
    launch a layer more, H200 session 45: 31 -> 33 launches a step); it joins the nearest
    group, as the cat alone does."""
    def fn(x, wk, wv):
        k = (x @ wk).view(2, 8, 4, 4).permute(0, 2, 1, 3)
        v = (x @ wv).view(2, 8, 4, 4).permute(0, 2, 1, 3)
        kc = torch.cat([torch.tensor([]), k * 2.0 + 1.0], -2)
        vc = torch.cat([torch.tensor([]), v], -2)
        return torch.softmax(kc @ vc.transpose(-1, -2), -1)
    args = torch.randn(16, 16), torch.randn(16, 16), torch.randn(16, 16)
    gm = _aten_graph(fn, *args)
    partition = partition_graph(gm.graph)
    cats = [n for n in gm.graph.nodes if n.target is aten.cat.default]
    assert len(cats) == 2 and all(n not in partition.left for n in cats), partition.describe()
    assert len([g for g in partition.groups if any(n in g.nodes for n in cats)]) == 1, partition.describe()
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(*args), fn(*args))


def test_a_constant_two_groups_read_is_made_in_each() -> None:
    """Llama's rotary-embedding backward: one zeros tensor (AOTAutograd's CSE of the slice
    backwards' `full`) read by the q and k gradients' groups. Made in the first group, it was
    that region's output, 8 MB of zeros written to memory and read back by the other region
    (H200 session 46); each group now makes its own (a broadcast constant: free)."""
    def fn(x, w):
        z = torch.zeros(16, 8)
        a = torch.exp(x) * 2.0 + z
        b = a @ w
        return torch.tanh(b) * 3.0 + z
    args = torch.randn(16, 8), torch.randn(8, 8)
    gm = _aten_graph(fn, *args)
    partition = partition_graph(gm.graph)
    fulls = [n for n in gm.graph.nodes if n.target is aten.full.default]
    assert len(partition.groups) == 2, partition.describe()
    for group in partition.groups:
        made = [n for n in group.nodes if n.target is aten.full.default]
        assert len(made) == 1 and all(u in group.nodes for u in made[0].users), partition.describe()
    assert len(fulls) == 2 and not any(n in partition.left for n in fulls), partition.describe()
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(*args), fn(*args))


def test_a_constant_and_its_views_returned_still_share_memory() -> None:
    """Copying a shared constant for another reader must not copy it for a view the graph
    returns: that view aliases the constant, as in eager (an in-place update of one shows in
    the other). Found by review of the constant copies (session 46)."""
    def fn(x):
        z = torch.zeros(4)
        b = x + z
        a = z.view(2, 2)
        return z, a, b
    x = torch.randn(4)
    z, a, b = torch.compile(fn, backend="mlirfuse")(x)
    z.add_(1)
    assert a.data_ptr() == z.data_ptr()
    torch.testing.assert_close(a, torch.ones(2, 2))
    torch.testing.assert_close(b, x)


def test_a_returned_view_of_a_returned_region_output_aliases_it() -> None:
    """A group computing a value and a view of it that the graph both returns (the view read
    in the group too): the view is taken by torch from the region's output, so it aliases
    that output as in eager; it was a second output written by the region."""
    def fn(x):
        z = torch.zeros(4)
        a = z.view(2, 2)
        return z, a, x + z, a * 3.0
    x = torch.randn(4)
    z, a, b, c = torch.compile(fn, backend="mlirfuse")(x)
    z.add_(1)
    assert a.data_ptr() == z.data_ptr()
    torch.testing.assert_close(a, torch.ones(2, 2))
    torch.testing.assert_close(b, x)
    torch.testing.assert_close(c, torch.zeros(2, 2))


def test_a_reshaped_view_of_a_region_output_read_outside_is_taken_by_torch() -> None:
    """A group computing a value that is read outside both as it is and reshaped (GPT-2's
    LayerNorm backward: the gradient added to the residual's, returned, and viewed as
    [tokens, hidden] for the bias gradient and the next matmul): the reshape is taken by
    torch from the region's output (free), not written by the region as a second output (a
    copy kernel of 12.6 MB a layer in GPT-2's float32 step on the H200, 4.7 us)."""
    def fn(x, r, w):
        y = r + torch.relu(x) * 2.0
        rows = y.view(-1, 8)
        return y, rows @ w, rows.sum(0)
    args = torch.randn(2, 4, 8), torch.randn(2, 4, 8), torch.randn(8, 8)
    gm = _aten_graph(fn, *args)
    partition, regions = torch_backend.backend.partition_and_trace(gm)
    assert len(regions) == 1, partition.describe()
    outputs = {n.target for n in regions[0].outputs}
    assert aten.add.Tensor in outputs and aten.view.default not in outputs, [n.name for n in regions[0].outputs]
    assert [n.target for n in regions[0].view_outputs] == [aten.view.default]
    compiled = torch.compile(fn, backend="mlirfuse")(*args)
    for got, want in zip(compiled, fn(*args)):
        torch.testing.assert_close(got, want)


def test_a_permuted_view_of_a_region_output_read_outside_stays_an_output() -> None:
    """A permuted view read outside stays a dense output the region writes: taken by torch
    it would be a strided tensor, which a batched matmul copies contiguous itself."""
    def fn(x, w):
        y = torch.relu(x) * 2.0
        z = y.transpose(1, 2) @ w
        return y, z
    args = torch.randn(2, 4, 8), torch.randn(4, 4)
    gm = _aten_graph(fn, *args)
    _, regions = torch_backend.backend.partition_and_trace(gm)
    assert not any(n.target is aten.transpose.int or n.target is aten.permute.default
                   for r in regions for n in r.view_outputs)
    compiled = torch.compile(fn, backend="mlirfuse")(*args)
    for got, want in zip(compiled, fn(*args)):
        torch.testing.assert_close(got, want)


# -- addmm's bias added by the region after it ---------------------------------------------------
def _unfused(fn, args, mode: str = "always"):
    """fn's aten graph after unfuse_addmms (mode forced), its count, and fn through
    torch.compile(backend="mlirfuse") with the same mode."""
    from mlirfuse.torch_backend.unfuse_addmm import unfuse_addmms

    gm = _aten_graph(fn, *args)
    previous = mlirfuse.set_options(unfuse_addmm=mode)
    try:
        count = unfuse_addmms(gm)
        out = torch.compile(fn, backend="mlirfuse")(*args)
    finally:
        mlirfuse.restore_options(previous)
    return gm, count, out


def test_an_addmm_feeding_pointwise_work_becomes_mm_and_an_add_in_the_region() -> None:
    """BERT's attention output and MLP down projection (float32): `addmm(b, x, w)` then
    dropout, the residual add and LayerNorm. cuBLAS's bias epilogue made the H200's
    [4096, 3072] x [3072, 768] product 497 us where the plain one is 408 us; the bias add costs
    nothing in the region that reads the product anyway (Inductor does the same)."""
    def fn(x, w, b, r):
        h = torch.nn.functional.linear(x, w, b)
        return torch.nn.functional.layer_norm(h + r, (8,))
    args = torch.randn(16, 12), torch.randn(8, 12), torch.randn(8), torch.randn(16, 8)
    gm, count, out = _unfused(fn, args)
    assert count == 1
    assert not [n for n in gm.graph.nodes if n.target is aten.addmm.default]
    (mm,) = [n for n in gm.graph.nodes if n.target is aten.mm.default]
    partition = partition_graph(gm.graph)
    (add,) = mm.users
    assert add.target is aten.add.Tensor and add not in partition.left
    group = next(g for g in partition.groups if add in g.nodes)
    assert any(n.target is aten.native_layer_norm.default or "layer_norm" in str(n.target) or
               n.target is aten.var_mean.correction for n in group.nodes), group.nodes
    torch.testing.assert_close(out, fn(*args))


def test_an_addmm_whose_heads_torch_copies_becomes_mm_and_an_add_with_the_copy() -> None:
    """BERT's value projection (float32, eager attention): `addmm(b, x, w)` viewed as heads,
    transposed and copied contiguous (`clone`) for the batched product with the attention
    weights. The addmm was kept (the copy is no compute op), so torch ran cuBLAS's bias
    epilogue and then its strided copy kernel (H200: 9.5 us for the [8, 12, 512, 64] heads);
    the add and the copy make one region, as for the queries and keys."""
    def fn(x, w, b, p):
        v = torch.nn.functional.linear(x, w, b).view(2, 8, 3, 4).transpose(1, 2).contiguous()
        return (p @ v.view(6, 8, 4),)
    args = torch.randn(16, 12), torch.randn(12, 12), torch.randn(12), torch.randn(6, 8, 8)
    gm, count, out = _unfused(fn, args)
    assert count == 1
    (mm,) = [n for n in gm.graph.nodes if n.target is aten.mm.default]
    partition = partition_graph(gm.graph)
    (add,) = mm.users
    clones = [n for n in gm.graph.nodes if n.target is aten.clone.default]
    group = next(g for g in partition.groups if add in g.nodes)
    assert clones and all(c in group.nodes for c in clones), partition.describe()
    torch.testing.assert_close(out[0], fn(*args)[0])


def test_an_addmm_kept_where_the_add_would_run_alone() -> None:
    """An addmm whose result only another product reads (no region to add the bias in: the add
    would be a kernel of its own), one with beta or alpha, and (mode auto) on the CPU or in half
    precision: kept."""
    def chained(x, w, b, v):
        return (torch.nn.functional.linear(x, w, b) @ v,)

    def scaled(x, w, b):
        return (torch.relu(torch.addmm(b, x, w.t(), beta=0.5)),)
    x, w, b = torch.randn(16, 12), torch.randn(8, 12), torch.randn(8)
    assert _unfused(chained, (x, w, b, torch.randn(8, 4)))[1] == 0
    assert _unfused(scaled, (x, w, b))[1] == 0
    relu = lambda x, w, b: torch.relu(torch.nn.functional.linear(x, w, b))  # noqa: E731
    assert _unfused(relu, (x, w, b), "auto")[1] == 0  # CPU
    half = tuple(a.to(torch.bfloat16) for a in (x, w, b))
    assert _unfused(relu, half)[1] == 0  # half precision: the product is rounded before the add otherwise


@pytest.mark.gpu
def test_addmms_unfused_on_the_gpu_in_float32_only() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    relu = lambda x, w, b: torch.relu(torch.nn.functional.linear(x, w, b))  # noqa: E731
    args = [torch.randn(s, device="cuda") for s in ((64, 32), (16, 32), (16,))]
    gm, count, out = _unfused(relu, args, "auto")
    assert count == 1
    torch.testing.assert_close(out, relu(*args))
    assert _unfused(relu, [a.to(torch.bfloat16) for a in args], "auto")[1] == 0


def test_the_unfuse_addmm_knob_takes_auto_always_or_off() -> None:
    from mlirfuse.errors import FusionError

    with pytest.raises(FusionError, match="option unfuse_addmm: expected one of"):
        mlirfuse.set_options(unfuse_addmm="sometimes")
    with pytest.raises(FusionError, match="option unfuse_addmm: expected str"):
        mlirfuse.set_options(unfuse_addmm=True)


@pytest.mark.gpu
def test_a_region_returning_a_permuted_result_takes_the_hot_path() -> None:
    """Llama's rotary regions return q as a permute of what they compute (its [B, S, H, D]
    memory order read as [B, H, S, D]). Such a region took the general path on every call
    (its Python layers, a second guard); its calls after the first now take the jitted
    function's guarded launch and permute its result, as the general path does."""
    import gc

    from mlirfuse.torch_backend import runtime

    def fn(x, c):
        q = x.view(2, 16, 4, 8).transpose(1, 2)
        return q * c + 1.0
    def regions():
        return [o for o in gc.get_objects() if type(o) is runtime.FusedRegion]
    before = set(map(id, regions()))
    x, c = torch.randn(2, 16, 32, device="cuda"), torch.randn(16, 8, device="cuda")
    f = torch.compile(fn, backend="mlirfuse")
    for _ in range(3):
        x = torch.randn_like(x)
        got, want = f(x, c), fn(x, c)
        assert got.stride() == want.stride()
        torch.testing.assert_close(got, want)
    made = [r for r in regions() if id(r) not in before]
    assert made and all(r._layout != [None] and r._enter.__name__ == "entry" for r in made)


@pytest.mark.gpu
def test_a_region_reading_widened_rows_takes_the_hot_path() -> None:
    """The backward region of a padded output projection's cross-entropy reads the saved
    logits as the padded rows they are the first columns of (`Region.widened`). From its
    second call it widens them and takes the jitted function's guarded launch; every step's
    loss and gradients stay eager's."""
    import gc

    from mlirfuse.torch_backend import runtime

    def regions():
        return [o for o in gc.get_objects() if type(o) is runtime.FusedRegion]
    before = set(map(id, regions()))
    v = 301

    def fn(h, w, labels):
        logits = (h @ w).view(2, 3, v)
        return torch.nn.functional.cross_entropy(logits.float().view(-1, v), labels)
    torch.manual_seed(0)
    w = torch.randn(16, v, dtype=torch.bfloat16, device="cuda")
    labels = torch.randint(0, v, (6,), device="cuda")
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        compiled = torch.compile(fn, backend="mlirfuse")
        for _ in range(3):
            h = torch.randn(6, 16, dtype=torch.bfloat16, device="cuda")
            mine, eager = [h.clone().requires_grad_(), w.clone().requires_grad_()], \
                [h.clone().requires_grad_(), w.clone().requires_grad_()]
            loss, want = compiled(*mine, labels), fn(*eager, labels)
            loss.backward()
            want.backward()
            for got, expected in [(loss, want)] + [(a.grad, b.grad) for a, b in zip(mine, eager)]:
                torch.testing.assert_close(got, expected, rtol=1.6e-2, atol=1e-2)
    finally:
        mlirfuse.restore_options(previous)
    widened = [r for r in regions() if id(r) not in before and r._widen]
    assert widened and all(r._enter.__name__ == "entry" for r in widened)
