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
    return [torch.randn(shape, generator=g).to(device, dtype).requires_grad_()
            for shape in [(64, 48), (48,), (3, 5, 7), ()]]


def _steps(optimizer: type, kwargs: dict, device: str, dtype: torch.dtype, compiled: bool) -> list[torch.Tensor]:
    params = _parameters(device, dtype)
    opt = optimizer(params, foreach=True, **kwargs)
    step = torch.compile(opt.step, backend="mlirfuse") if compiled else opt.step
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g).to(device, dtype)
        step()
    return [p.detach() for p in params] + [s.detach() for state in opt.state.values() for s in state.values()
                                           if isinstance(s, torch.Tensor) and s.is_floating_point()]


def _check(optimizer: type, kwargs: dict, device: str) -> None:
    torch._dynamo.reset()
    with capture_partitions() as parts:
        got = _steps(optimizer, kwargs, device, torch.float32, compiled=True)
    want = _steps(optimizer, kwargs, device, torch.float32, compiled=False)
    exact = _steps(optimizer, kwargs, device, torch.float64, compiled=False)  # the same data, in float64
    left = [str(n.target) for _, part in parts for n in part.left]
    assert not [t for t in left if "_foreach" in t], left
    assert len(got) == len(want) == len(exact)
    eps = torch.finfo(torch.float32).eps
    for k, (g, w, x) in enumerate(zip(got, want, exact)):
        # compiled steps keep `step` on the parameter's device (Inductor's too). Each element is
        # eager's to 2e-6, or (where eager's own float32 rounding differs: three steps of
        # RMSprop's centered sqrt(E[g^2] - E[g]^2) cancel, and ATen's CPU kernels round as the
        # machine's vector unit does) as close to the float64 result as eager's is.
        g, w, x = g.cpu().double(), w.cpu().double(), x.cpu()
        as_eager = (g - w).abs() <= 2e-6 * (1 + w.abs())
        as_exact = (g - x).abs() <= 2 * (w - x).abs() + 8 * eps * x.abs()
        bad = ~(as_eager | as_exact)
        assert not bad.any(), (f"result {k}: {int(bad.sum())} elements, e.g. mlirfuse {g[bad][:3].tolist()} eager "
                               f"{w[bad][:3].tolist()} float64 {x[bad][:3].tolist()}")


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


def _adamw_step(device: str, shapes: list[tuple[int, ...]]) -> tuple:
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(s, generator=g).to(device).requires_grad_() for s in shapes]
    opt = optim.AdamW(params, lr=0.01, weight_decay=0.1, foreach=True)
    step = torch.compile(opt.step, backend="mlirfuse")
    for p in params:
        p.grad = torch.randn(p.shape, generator=g).to(device)
    return params, opt, step


def test_compiled_step_is_one_region_writing_parameters_and_state_in_place() -> None:
    """The step's inference graph mutates every parameter and its state: each per-parameter
    group reads graph inputs only and only writes inputs back, so all of them are one region,
    and that region writes the new values into the inputs (no `copy_` left to torch, no
    tensor of the optimizer replaced)."""
    torch._dynamo.reset()
    params, opt, step = _adamw_step("cpu", [(64, 48), (48,), (3, 5, 7)])
    with capture_partitions() as parts:
        step()  # compiled (the state is created first)
    memory = [t.data_ptr() for t in params] + [s.data_ptr() for st in opt.state.values() for s in st.values()]
    step()
    step()
    assert [(kind, len(part.groups)) for kind, part in parts] == [("inference", 1)]
    assert not [n for _, part in parts for n in part.left if "copy_" in str(n.target)]
    assert memory == [t.data_ptr() for t in params] + [s.data_ptr() for st in opt.state.values() for s in st.values()]


@pytest.mark.gpu
def test_compiled_step_on_cuda_copies_nothing_but_0d_values() -> None:
    """On CUDA the region's kernels write the parameters and their moments in place (its
    kernels read each element just before overwriting it): the only copy left is one
    multi-tensor copy of the 0-d step counters, which every thread of a kernel reads. Results
    as eager's."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    shapes = [(640, 480), (480,), (3, 5, 7)]
    torch._dynamo.reset()
    params, opt, step = _adamw_step("cuda", shapes)
    step()
    step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
        torch.cuda.synchronize()
    copies = {e.key: e.count for e in prof.key_averages() if "copy" in e.key}
    assert copies == {"aten::_foreach_copy_": 1}, prof.key_averages().table(max_name_column_width=40)
    want, want_opt, _ = _adamw_step("cuda", shapes)
    for _ in range(3):
        want_opt.step()
    for p, q in zip(params, want):  # (as in _check)
        torch.testing.assert_close(p, q, rtol=2e-6, atol=2e-6)
