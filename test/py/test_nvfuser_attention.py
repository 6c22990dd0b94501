"""nvFuser's `sdpfa_fwd` / `sdpfa_bwd` against torch's scaled_dot_product_attention and its
autograd: dtypes, causal masks, scales, runtime-scalar arguments, and dropout (the backward
draws the mask the forward drew)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from mlirfuse import DataType, FusionDefinition  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
TOL = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-5, atol=1e-5),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def _attention(q, k, v, g, dropout_p, is_causal, scale, runtime_scalars: bool):
    """sdpfa_fwd then sdpfa_bwd in one definition: (out, log_sumexp, grad_q, grad_k, grad_v)."""
    extra = []
    with FusionDefinition() as fd:
        tq, tk, tv, tg = (fd.from_pytorch(t) for t in (q, k, v, g))
        args = []
        for value, dtype in ((dropout_p, DataType.Double), (is_causal, DataType.Bool), (scale, DataType.Double)):
            if value is None:
                args.append(None)
            elif runtime_scalars:
                args.append(fd.define_scalar(None, dtype=dtype))
                extra.append(value)
            else:
                args.append(fd.define_scalar(value, dtype=dtype))
        p, causal, sc = args
        out, lse, seed, offset = fd.ops.sdpfa_fwd(tq, tk, tv, p, causal, sc)
        gq, gk, gv = fd.ops.sdpfa_bwd(tg, tq, tk, tv, out, lse, p, causal, seed, offset, sc)
        for t in (out, lse, gq, gk, gv):
            fd.add_output(t)
    return fd.execute([q, k, v, g, *extra])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["f64", "f32", "bf16"])
@pytest.mark.parametrize("is_causal", [None, True])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_sdpfa_matches_torch(device, dtype, is_causal, scale) -> None:
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 8, 16, dtype=dtype, device=device), torch.randn(2, 3, 12, 16, dtype=dtype, device=device)
    v, g = torch.randn(2, 3, 12, 8, dtype=dtype, device=device), torch.randn(2, 3, 8, 8, dtype=dtype, device=device)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    want = F.scaled_dot_product_attention(*leaves, is_causal=bool(is_causal), scale=scale)
    want_grads = torch.autograd.grad(want, leaves, g)
    out, lse, *grads = _attention(q, k, v, g, None, is_causal, scale, runtime_scalars=dtype is torch.float32)
    torch.testing.assert_close(out, want.detach(), **TOL[dtype])
    for got, expected in zip(grads, want_grads):
        torch.testing.assert_close(got, expected, **TOL[dtype])
    s = (q.double() @ k.double().transpose(-1, -2)) * (scale or 16 ** -0.5)
    if is_causal:
        s = s.masked_fill(torch.ones(8, 12, dtype=torch.bool, device=device).triu(1), float("-inf"))
    assert lse.dtype == (torch.float64 if dtype is torch.float64 else torch.float32)
    torch.testing.assert_close(lse.double(), s.logsumexp(-1), rtol=1e-4 if dtype is torch.bfloat16 else 1e-6,
                               atol=1e-4 if dtype is torch.bfloat16 else 1e-6)


@pytest.mark.parametrize("runtime_scalars", [False, True], ids=["constant", "runtime"])
def test_sdpfa_dropout_backward_draws_the_forward_mask(runtime_scalars) -> None:
    """With v the identity, the forward's output is the dropped probabilities themselves: the
    mask it drew. The gradients equal torch's for attention with that mask fixed."""
    torch.manual_seed(1)
    q, k = torch.randn(2, 2, 16, 8, dtype=torch.float64), torch.randn(2, 2, 32, 8, dtype=torch.float64)
    v, g = torch.eye(32, dtype=torch.float64).expand(2, 2, 32, 32).contiguous(), torch.randn(2, 2, 16, 32,
                                                                                               dtype=torch.float64)
    out, lse, gq, gk, gv = _attention(q, k, v, g, 0.25, True, None, runtime_scalars)
    keep = out != 0
    causal = torch.ones(16, 32, dtype=torch.bool).triu(1)
    assert not keep[..., causal].any()
    rate = keep[..., ~causal].double().mean()
    assert 0.65 < rate < 0.85, rate  # 1 - dropout_p
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    s = (leaves[0] @ leaves[1].transpose(-1, -2) * 8 ** -0.5).masked_fill(causal, float("-inf"))
    want = (torch.softmax(s, -1) * keep / 0.75) @ leaves[2]
    torch.testing.assert_close(out, want.detach())
    for got, expected in zip((gq, gk, gv), torch.autograd.grad(want, leaves, g)):
        torch.testing.assert_close(got, expected)
    again = _attention(q, k, v, g, 0.25, True, None, runtime_scalars)[0]
    assert not torch.equal(again != 0, keep)  # each call draws new numbers, as nvFuser's
