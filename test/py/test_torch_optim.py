"""Compiled optimizer steps: torch.optim's multi-tensor (foreach) updates fused per parameter,
results as eager's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mlirfuse.torch_backend import capture_partitions  # noqa: E402

optim = torch.optim
CASES = [
    (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (optim.Adam, dict(lr=0.01)),
    (optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)),
    (optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    (optim.RMSprop, dict(lr=0.01, centered=True, momentum=0.9, weight_decay=0.1)),
    (optim.Adagrad, dict(lr=0.1, weight_decay=0.1)),
    (optim.Adamax, dict(lr=0.01, weight_decay=0.1)),
    (optim.NAdam, dict(lr=0.01, weight_decay=0.1)),
    (optim.RAdam, dict(lr=0.01, weight_decay=0.1)),
    (optim.Adadelta, dict(lr=1.0, weight_decay=0.1)),
    (optim.ASGD, dict(lr=0.01, weight_decay=0.1)),
    (optim.Rprop, dict(lr=0.01)),
]


def _parameters(device: str, dtype: torch.dtype) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(shape, generator=g, dtype=dtype).to(device).requires_grad_()
            for shape in [(64, 48), (48,), (3, 5, 7), ()]]


def _steps(optimizer: type, kwargs: dict, device: str, dtype: torch.dtype, compiled: bool) -> list[torch.Tensor]:
    params = _parameters(device, dtype)
    opt = optimizer(params, foreach=True, **kwargs)
    step = torch.compile(opt.step, backend="mlirfuse") if compiled else opt.step
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g, dtype=dtype).to(device)
        step()
    return [p.detach() for p in params] + [s.detach() for state in opt.state.values() for s in state.values()
                                           if isinstance(s, torch.Tensor) and s.is_floating_point()]


def _check(optimizer: type, kwargs: dict, device: str) -> None:
    torch._dynamo.reset()
    with capture_partitions() as parts:
        got = _steps(optimizer, kwargs, device, torch.float32, compiled=True)
    want = _steps(optimizer, kwargs, device, torch.float32, compiled=False)
    left = [str(n.target) for _, part in parts for n in part.left]
    assert not [t for t in left if "_foreach" in t], left
    assert len(got) == len(want)
    for g, w in zip(got, want):  # compiled steps keep `step` on the parameter's device (Inductor's too)
        torch.testing.assert_close(g.cpu(), w.cpu(), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("optimizer,kwargs", CASES, ids=[f"{o.__name__}-{k}" for k, (o, _) in enumerate(CASES)])
def test_foreach_optimizer_steps_fuse_and_match_eager(optimizer, kwargs) -> None:
    """foreach=True (torch's default on CUDA): every `_foreach_*` op was left to torch, nothing
    fused; they are now per-parameter ops in fused groups, and the parameters and the state after
    three steps are eager's."""
    _check(optimizer, kwargs, "cpu")


def _sample(arg) -> object:
    kind = str(arg.type)
    if kind == "List[Tensor]":
        return [torch.rand(3, 4) + 0.5, torch.rand(5) + 0.5]
    if kind in ("List[number]", "List[Scalar]"):
        return [0.5, 2.0]
    if kind in ("number", "Scalar"):
        return 0.5
    if kind == "Tensor":
        return torch.tensor(0.75)
    return arg.default_value if arg.has_default_value() else None


def test_every_foreach_decomposition_is_the_foreach_op() -> None:
    """Each decomposed overload, called eagerly on samples built from its schema (lists of two
    tensors, scalars, scalar lists), returns what the foreach op returns: same values, dtypes."""
    from mlirfuse.torch_backend.foreach import foreach_decompositions

    table = foreach_decompositions()
    assert len(table) > 60 and torch.ops.aten._foreach_lerp.Scalar in table
    for op, decomposition in table.items():
        args = [_sample(a) for a in op._schema.arguments if not a.kwarg_only]
        want, got = op(*args), decomposition(*args)
        assert got is not NotImplemented and len(got) == len(want), op
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and torch.allclose(g, w, equal_nan=True), op


def test_foreach_clip_grad_norm_fuses_and_matches_eager() -> None:
    """clip_grad_norm_(foreach=True): _foreach_norm and _foreach_mul_ per gradient."""
    def clip(params):
        return torch.nn.utils.clip_grad_norm_(params, 0.5, foreach=True)

    params = _parameters("cpu", torch.float32)
    copies = [p.detach().clone().requires_grad_() for p in params]
    for p, q in zip(params, copies):
        p.grad = torch.randn(p.shape) * 3
        q.grad = p.grad.clone()
    torch._dynamo.reset()
    with capture_partitions() as parts:
        norm = torch.compile(clip, backend="mlirfuse")(params)
    torch.testing.assert_close(norm, clip(copies))
    for p, q in zip(params, copies):
        torch.testing.assert_close(p.grad, q.grad)
    assert not [n for _, part in parts for n in part.left if "_foreach" in str(n.target)]


@pytest.mark.gpu
@pytest.mark.parametrize("optimizer,kwargs", CASES[:4], ids=[f"{o.__name__}-{k}" for k, (o, _) in enumerate(CASES[:4])])
def test_foreach_optimizer_steps_on_cuda(optimizer, kwargs) -> None:
    """On CUDA, where foreach is the default: the step counters are CPU tensors beside the
    CUDA parameters."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    _check(optimizer, kwargs, "cuda")
