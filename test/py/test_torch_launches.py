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
    from mlirfuse.torch_backend.pad_matmul import pad_matmuls

    def fn(x, w, b, t):
        return torch.nn.functional.cross_entropy(torch.nn.functional.linear(x, w, b), t)
    args = torch.randn(16, 8), torch.randn(37, 8), torch.randn(37), torch.randint(0, 37, (16,))
    gm = _aten_graph(fn, *args)
    previous = mlirfuse.set_options(pad_matmuls="always")
    try:
        assert pad_matmuls(gm) == 1
        out = torch.compile(fn, backend="mlirfuse")(*args)
    finally:
        mlirfuse.restore_options(previous)
    partition = partition_graph(gm.graph)
    slices = [n for n in gm.graph.nodes if n.target is aten.slice.Tensor]
    assert slices and all(n not in partition.left for n in slices), partition.left
    torch.testing.assert_close(out, fn(*args))
