"""Compiled functions that mutate their inputs under no_grad (inference graphs, which keep the
mutations as `copy_(input, value)` nodes): the region computing a value writes it into the
input where nothing else in the graph reads that input; every other mutation stays a torch
`copy_`. Results and inputs after the call are eager's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mlirfuse.torch_backend import capture_partitions  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_torch_backend")
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _device(name: str) -> str:
    if name == "cuda" and not torch.cuda.is_available():
        pytest.skip("no GPU")
    return name


def _update(buf, x):
    buf.mul_(0.5).add_(x * x)
    return buf.sum()


def _read_by_torch_after(buf, x, w):
    y = buf @ w  # torch reads the old buffer; its new value must not be written before
    buf.mul_(0.5).add_(x)
    return y


def _cache_write(cache, new, pos):
    cache[:, pos:pos + new.shape[1]] = new * 2.0  # a slice_scatter the region computes
    return cache.sum(-1)


def _index_copy(cache, new, pos):
    cache.index_copy_(1, pos, new)  # index_put stays in torch, and so does the copy_
    return (cache * 2.0).sum(-1)


def _transposed(xt, y):
    xt.add_(y * 2.0)  # not dense: the copy_ stays in torch
    return xt.sum()


def _other_dtype(buf, x):
    buf.copy_(x * 3.0 + 1.0)  # float32 into bfloat16: the conversion joins the region
    return buf


def _inputs(name: str, device: str) -> tuple:
    g = torch.Generator().manual_seed(0)

    def r(*shape, dtype=torch.float32):
        return torch.randn(shape, generator=g).to(device=device, dtype=dtype)

    if name == "update":
        return r(33, 40), r(33, 40)
    if name == "read_by_torch_after":
        return r(32, 32), r(32, 32), r(32, 16)
    if name == "cache_write":
        return r(2, 16, 8), r(2, 3, 8), 5
    if name == "index_copy":
        return r(2, 16, 8), r(2, 3, 8), torch.tensor([1, 5, 9], device=device)
    if name == "transposed":
        return r(40, 24).t(), r(24, 40)
    return r(8, 16, dtype=torch.bfloat16), r(8, 16)


FUNCTIONS = {"update": _update, "read_by_torch_after": _read_by_torch_after, "cache_write": _cache_write,
             "index_copy": _index_copy, "transposed": _transposed, "other_dtype": _other_dtype}
WRITTEN_BY_THE_REGION = {"update", "cache_write", "other_dtype"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_mutated_inputs_are_eagers(name: str, device: str) -> None:
    """Two calls (the second takes the GPU's hot path): results and inputs as eager's."""
    fn = FUNCTIONS[name]
    want_args, got_args = _inputs(name, _device(device)), _inputs(name, device)
    compiled = torch.compile(fn, backend="mlirfuse")
    with torch.no_grad(), capture_partitions() as parts:
        for _ in range(2):
            # results: sums and products, in another order than torch's
            torch.testing.assert_close(compiled(*got_args), fn(*want_args), rtol=1e-5, atol=1e-5)
            for got, want in zip(got_args, want_args):
                torch.testing.assert_close(got, want, rtol=0, atol=0)
    left = [str(n.target) for _, part in parts for n in part.left if "copy_" in str(n.target)]
    assert bool(left) != (name in WRITTEN_BY_THE_REGION), left


def test_a_returned_copy_of_a_mutated_input_is_memory_of_its_own() -> None:
    """x.mul_(2).add_(1); return x.detach().clone(): the clone traced to the same value as the
    input's new one, and the region handed back the input itself for both, so the copy returned
    by one call changed with the next (found by black-box review)."""
    def snap(x):
        x.mul_(2).add_(1)
        return x.detach().clone()

    x, want_x = torch.zeros(4, 5), torch.zeros(4, 5)
    compiled = torch.compile(snap, backend="mlirfuse")
    with torch.no_grad():
        first, want_first = compiled(x), snap(want_x)
        assert first.data_ptr() != x.data_ptr()
        compiled(x), snap(want_x)
    torch.testing.assert_close(first, want_first, rtol=0, atol=0)
    torch.testing.assert_close(x, want_x, rtol=0, atol=0)
