"""Embedding gradients as row scatter-adds (embedding_grad.py): the gradients equal eager's for
a weight shared with an output projection (added into the matmul's gradient in place), a
weight whose other gradient may not be written (added into a copy), padding rows, and with the
rewrite off; a table of few rows (token types) as a masked sum; frequency scaling and
deterministic algorithms on the GPU keep torch's op."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mlirfuse  # noqa: E402
from mlirfuse import torch_backend  # noqa: E402
from mlirfuse.torch_backend.embedding_grad import SMALL_TABLE, scatter_embedding_grad  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_torch_backend")
aten = torch.ops.aten
VOCAB, POSITIONS, DIM, PAD = 40, 24, 16, 3


def _tied_lm(ids, wte, wpe, wtt, scale_grad_by_freq=False):
    """A language model's ends (BERT's): token, position and token-type embeddings, the output
    projection reading the token embedding's weight (tied), and a loss; padding_idx PAD."""
    h = F.embedding(ids, wte, padding_idx=PAD, scale_grad_by_freq=scale_grad_by_freq)
    h = h + F.embedding(torch.arange(ids.shape[1], device=ids.device), wpe) + F.embedding(ids % 2, wtt)
    return F.cross_entropy((torch.tanh(h) @ wte.t()).flatten(0, 1), ids.flatten())


def _weight_read_elsewhere(ids, wte, wpe, wtt):
    """The token weight's other gradient is a pointwise result (weight decay in the loss)."""
    return torch.tanh(F.embedding(ids, wte)).sum() + (wte * wte).sum() * 0.5 + wpe.sum() + wtt.sum()


def _steps(fn, device="cpu", dtype=torch.float64, **kwargs):
    """(eager gradients, compiled gradients, the calls left to torch in the backward)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (4, 12), generator=g)
    ids[0, :4] = PAD  # padding rows, and a repeated index
    weights = [torch.randn(rows, DIM, generator=g, dtype=dtype) for rows in (VOCAB, POSITIONS, 2)]
    ids, weights = ids.to(device), [w.to(device) for w in weights]
    grads = []
    with torch_backend.capture_partitions() as captured:
        for run in (fn, torch.compile(fn, backend="mlirfuse")):
            params = [w.clone().requires_grad_() for w in weights]
            run(ids, *params, **kwargs).backward()
            grads.append([p.grad for p in params])
    left = [n for kind, p in captured if kind == "backward" for n in p.left]
    return grads[0], grads[1], left


def _scatters(left):
    return [n for n in left if n.target is scatter_embedding_grad]


def test_a_tied_weight_gets_its_rows_added_into_the_matmul_gradient_in_place() -> None:
    """GPT-2's and BERT's word embedding: its gradient is the output projection's matmul
    gradient plus the embedding's. The rows are added into the matmul's result in place (no
    zeroed tensor, no sum); the position embedding's into zeros; the two token types' are a
    masked sum in a fused group (4096 tokens' atomic adds on two rows would wait on each
    other). Padding rows get nothing from the embedding, as eager's."""
    eager, compiled, left = _steps(_tied_lm)
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, rtol=1e-12, atol=1e-12)
    assert not [n for n in left if n.target is aten.embedding_dense_backward.default]
    scatters = _scatters(left)
    assert sorted((n.args[0] is not None, n.args[4]) for n in scatters) == [(False, False), (True, True)]
    assert all(n.args[3] > SMALL_TABLE for n in scatters)


def test_a_gradient_read_elsewhere_is_added_into_a_copy() -> None:
    """The weight's other gradient is a fused region's result, which may alias its input: the
    rows go into a copy, and the gradients are still eager's."""
    eager, compiled, left = _steps(_weight_read_elsewhere)
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, rtol=1e-12, atol=1e-12)
    into = [n for n in _scatters(left) if n.args[0] is not None]
    assert into and not any(n.args[4] for n in into)


def test_frequency_scaling_and_the_knob_off_keep_torchs_op() -> None:
    eager, compiled, left = _steps(_tied_lm, scale_grad_by_freq=True)
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, rtol=1e-12, atol=1e-12)
    assert [n.target for n in left].count(aten.embedding_dense_backward.default) == 1
    assert len(_scatters(left)) == 1  # the position embedding's (the token types': a masked sum)
    torch._dynamo.reset()
    previous = mlirfuse.set_options(scatter_embedding_grads=False)
    try:
        eager, compiled, left = _steps(_tied_lm)
    finally:
        mlirfuse.restore_options(previous)
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, rtol=1e-12, atol=1e-12)
    assert not _scatters(left) and [n.target for n in left].count(aten.embedding_dense_backward.default) == 3


@pytest.mark.gpu
@pytest.mark.parametrize("deterministic", [False, True])
def test_embedding_gradients_on_the_gpu(deterministic: bool, monkeypatch) -> None:
    """Atomic adds on the GPU (float32: the sums' order varies, within rounding); under
    deterministic algorithms torch's sorted op, and two runs agree bit for bit."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS, else matmuls raise
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(deterministic)
    try:
        eager, compiled, left = _steps(_tied_lm, "cuda", torch.float32)
        _, again, _ = _steps(_tied_lm, "cuda", torch.float32)
    finally:
        torch.use_deterministic_algorithms(previous)
    assert len(_scatters(left)) == 2
    for e, c, a in zip(eager, compiled, again):
        torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-6)
        if deterministic:
            assert torch.equal(c, a)


def test_a_token_type_gradient_is_one_region_of_scheduled_kernels() -> None:
    """BERT's token types: two rows, indices one row expanded over the batch. The masked sums
    join the group that computes the output gradient, which reads the indices unexpanded
    (an expand left to torch handed the kernels a stride-0 operand: the column reductions of
    the sums ran on the naive path, 715 us of a bf16 step on the H200), and every launch of
    the region has a schedule."""
    import numpy as np
    from torch.fx.experimental.proxy_tensor import make_fx

    from mlirfuse.torch_backend.backend import partition_and_trace
    from mlirfuse.torch_backend.embedding_grad import scatter_embedding_grads

    def fn(g, types):
        return aten.embedding_dense_backward(g * 2.0, types.expand(8, 16), 2, -1, False)
    g, types = torch.randn(8, 16, DIM), torch.randint(0, 2, (1, 16))
    gm = make_fx(fn, decomposition_table=torch_backend.decompositions(), tracing_mode="fake")(g, types)
    assert scatter_embedding_grads(gm) == 1
    partition, regions = partition_and_trace(gm)
    assert len(regions) == 1 and not any(n.target is aten.expand.default for n in partition.left)
    args = [np.zeros(tuple(n.meta["val"].shape), torch.empty(0, dtype=n.meta["val"].dtype).numpy().dtype)
            for n in regions[0].inputs]
    compiled = mlirfuse.jit(regions[0].trace).compile(*args, backend="gpu", arch="sm_90")
    assert "naive" not in compiled.stages["launch_params"], compiled.stages["launch_params"]
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(g, types), fn(g, types))
