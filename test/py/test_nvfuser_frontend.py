"""nvFuser's FusionDefinition surface, from its documented behaviour: inputs from tensors
(`from_pytorch`), vectors of sizes, in-place outputs (`add_output(t, alias_input=...)`),
`execute(device=..., **options)`, `validate`, `compute_tensor_descriptor`, and the ops with
nvFuser's names (`broadcast`, `truediv`, `signbit`, `welford`, `embedding_fwd`)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mlirfuse  # noqa: E402
from mlirfuse import DataType, FusionDefinition, FusionError, compute_tensor_descriptor  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2, torch.float16: 2e-3}


@pytest.mark.parametrize("device", DEVICES)
def test_from_pytorch_defines_inputs_like_the_tensor(device) -> None:
    x = torch.randn(3, 1, 5, device=device, dtype=torch.float64)
    y = torch.randn(5, 3, device=device).t()  # transposed: not contiguous
    with FusionDefinition() as fd:
        a, b = fd.from_pytorch(x), fd.from_pytorch(y)
        fd.add_output(fd.ops.add(a, fd.ops.cast(fd.ops.broadcast(b, [False, True, False]), DataType.Double)))
    assert a.dtype is DataType.Double and a.shape[1] == 1  # size-1 dims are broadcast dims
    (out,) = fd.execute([x, y])
    torch.testing.assert_close(out, x + y.double()[:, None, :])
    with FusionDefinition() as fd:
        s = fd.from_pytorch(x, static_sizes=True)
        fd.add_output(fd.ops.mul(s, 2.0))
    assert s.shape == (3, 1, 5)
    with pytest.raises(FusionError, match="expected a tensor"):
        with FusionDefinition() as fd:
            fd.from_pytorch([1, 2])


@pytest.mark.parametrize("device", DEVICES)
def test_an_output_aliased_to_an_input_updates_it_in_place_and_is_not_returned(device) -> None:
    x = torch.ones(4, 4, device=device)
    with FusionDefinition() as fd:
        t0 = fd.from_pytorch(x)
        t1 = fd.ops.add(t0, fd.define_scalar(1.0))
        t2 = fd.ops.add(t1, fd.define_scalar(2.0))
        fd.add_output(t1, alias_input=t0)
        fd.add_output(t2)
    out = fd.execute([x])
    assert len(out) == 1
    torch.testing.assert_close(out[0], torch.full((4, 4), 4.0, device=device))
    torch.testing.assert_close(x, torch.full((4, 4), 2.0, device=device))
    array = np.ones((2, 3), np.float32)  # numpy inputs are updated likewise
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1])
        fd.add_output(fd.ops.mul(t, 3.0), alias_input=t)
    assert fd.execute([array]) == [] and (array == 3.0).all()


def test_alias_input_must_be_a_matching_tensor_input() -> None:
    with pytest.raises(FusionError, match="alias_input must be a tensor input"):
        with FusionDefinition() as fd:
            t = fd.define_tensor([-1])
            fd.add_output(fd.ops.mul(t, 2.0), alias_input=fd.ops.mul(t, 1.0))
    with pytest.raises(FusionError, match="cannot write a float64"):
        with FusionDefinition() as fd:
            t = fd.define_tensor([-1])
            fd.add_output(fd.ops.cast(t, DataType.Double), alias_input=t)


def test_execute_honours_device_and_warns_once_per_nvfuser_option() -> None:
    x = torch.randn(8)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.exp(fd.from_pytorch(x)))
    with pytest.warns(UserWarning, match="'_enable_options' has no effect"):
        (out,) = fd.execute([x], device="cpu", _enable_options=["fast_math"])
    torch.testing.assert_close(out, x.exp())
    with pytest.raises(FusionError, match="unknown device"):
        fd.execute([x], device="tpu")


def test_validate_checks_against_the_reference_evaluator() -> None:
    x = torch.randn(4, 6, dtype=torch.float64)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.sum(fd.ops.tanh(t), [-1], False, DataType.Double))  # dtype positional
    fd.validate([x])
    fd.validate([x], [torch.tanh(x).sum(-1)])
    with pytest.raises(FusionError, match="output 0 differs"):
        fd.validate([x], [torch.tanh(x).sum(-1) + 1.0])


def test_define_vector_gives_shapes() -> None:
    x = torch.randn(2, 3, 4)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.reshape(t, fd.define_vector([6, 4])))
    (out,) = fd.execute([x])
    torch.testing.assert_close(out, x.reshape(6, 4))
    with pytest.raises(FusionError, match="define_vector"):
        with FusionDefinition() as fd:
            fd.define_vector([1.5])


@pytest.mark.parametrize("device", DEVICES)
def test_slices_with_constant_shape_and_runtime_bounds_in_one_definition(device) -> None:
    """A constant slice of a dynamic input makes the definition trace per input signature;
    the other slices then still work: one ending at `t.shape()` (a size of the first trace,
    taken again from the inputs) and one whose bounds are runtime scalars (`define_vector(3)`,
    traced per value: each call slices at its own bounds)."""
    x = torch.randn(2, 5, 10, device=device)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1, -1])
        fd.add_output(fd.ops.slice(t, [0, 1, 2], [2, 5, 10], [1, 1, 1]))
        fd.add_output(fd.ops.slice(t, fd.define_vector([0, 1, 2]), t.shape()))
        fd.add_output(fd.ops.slice(t, fd.define_vector(3), fd.define_vector(3)))
    for bounds in ([0, 1, 2, 2, 5, 10], [1, 0, 3, 2, 4, 7], [0, 2, 0, 1, 5, 4]):
        outs = fd.execute([x, *bounds])
        torch.testing.assert_close(outs[0], x[:, 1:, 2:])
        torch.testing.assert_close(outs[1], x[:, 1:, 2:])
        (a, b, c), (e, f, g) = bounds[:3], bounds[3:]
        torch.testing.assert_close(outs[2], x[a:e, b:f, c:g])


@pytest.mark.parametrize("device", DEVICES)
def test_pad_widths_held_in_scalars(device) -> None:
    """Pad widths that are fusion scalars: computed from constants (folded when traced) or
    runtime inputs (traced per value)."""
    x = torch.randn(1, 2, 3, device=device)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        width = fd.ops.cast(fd.ops.mul(fd.define_scalar(2.5, dtype=DataType.Float),
                                       fd.define_scalar(7, dtype=DataType.Int)), dtype=DataType.Int)
        fd.add_output(fd.ops.pad(t, fd.define_vector([width, width, width, width], dtype=DataType.Int)))
    torch.testing.assert_close(fd.execute([x])[0], F.pad(x, [17, 17, 17, 17]))
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        w = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.pad(t, [w, fd.ops.add(w, 1)], 0.5))
    for w in (2, 0, 3):
        torch.testing.assert_close(fd.execute([x, w])[0], F.pad(x, [w, w + 1], value=0.5))


@pytest.mark.parametrize("device", DEVICES)
def test_clone_defines_a_new_definition_that_runs_as_the_original(device, capsys) -> None:
    """nvFuser's `clone(fd, new_fd)`: the copy has the same inputs, ops and outputs (the same
    cache entry), deferred definitions included (a constant slice of a dynamic input); a
    defined target is refused. `segment` gives the one piece mlirfuse executes (a clone,
    mapped index for index); `_repro_error_str` holds the repro script."""
    x = torch.randn(2, 5, 10, device=device)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.sum(fd.ops.mul(fd.ops.relu(t), s), [-1]))
        fd.add_output(fd.ops.slice(t, [0, 1, 2], [2, 5, 10]))
    copy = mlirfuse.clone(fd, FusionDefinition())
    for a, b in zip(fd.execute([x, 2.0]), copy.execute([x, 2.0])):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.testing.assert_close(copy.execute([x, 3.0])[1], x[:, 1:, 2:])
    assert copy.id() == fd.id() and repr(copy) == repr(fd)
    with pytest.raises(FusionError, match="new, empty FusionDefinition"):
        mlirfuse.clone(fd, copy)
    (piece,) = copy.segment([x, 2.0])
    assert repr(piece) == repr(fd) and copy.segments == [piece]
    assert copy.segment_index_space_maps[piece] == {i: i for i in range(6)}  # T0, S1, T2 .. T5
    torch.testing.assert_close(copy.execute([x, 2.0])[0], piece.execute([x, 2.0])[0])
    assert "fd.ops.slice" in fd._repro_error_str("executing", [x, 2.0])
    fd.execute([x, 2.0], print_repro=True)
    assert "fd.ops.slice" in capsys.readouterr().out
    with FusionDefinition() as fd:  # a vector of runtime sizes is one input of segment, as of execute
        fd.add_output(fd.ops.sum(fd.ops.reshape(fd.from_pytorch(x), fd.define_vector(2)), [0]))
    (piece,) = fd.segment([x, [10, 10]])
    torch.testing.assert_close(piece.execute([x, (10, 10)])[0], x.reshape(10, 10).sum(0))
    with pytest.raises(FusionError, match="segment: expected a list of the definition's 3 inputs"):
        fd.segment([x])


def test_squeeze_of_a_dynamic_dim_ties_it_to_1() -> None:
    """nvFuser's squeeze removes every dim it is given: a dynamic one must be 1 (checked at
    each call; it was kept, a wrong shape), a static one of another size is an error. torch's
    squeeze (`mlirfuse.ops.squeeze`) keeps a dim > 1, so a dynamic dim it keeps must not be 1."""
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.squeeze(fd.define_tensor([-1, -1]), [0]))
    x = torch.randn(1, 5)
    torch.testing.assert_close(fd.execute([x])[0], x.squeeze(0))
    with pytest.raises(FusionError, match="in0.shape.0. == 1"):
        fd.execute([torch.randn(3, 5)])
    with pytest.raises(FusionError, match="only dims of size 1 can be squeezed"):
        with FusionDefinition() as fd:
            fd.ops.squeeze(fd.define_tensor([3, -1]), [0])
    with FusionDefinition() as fd:
        fd.add_output(mlirfuse.ops.squeeze(fd.define_tensor([-1, -1]), [0]))
    assert fd.execute([torch.randn(3, 5)])[0].shape == (3, 5)
    with pytest.raises(FusionError, match="dynamic dim 0 is kept"):
        fd.execute([torch.randn(1, 5)])


def test_sizes_as_values_and_entries_of_shape_vectors() -> None:
    """A symbolic size cast to a float or used as a fill value (a mean written by hand) traces
    per input signature, as a size multiplied into a tensor does (it raised); `fd.ops.at` and
    indexing take an entry of a shape vector, a deferred one included."""
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, -1])
        n = fd.ops.cast(fd.ops.size(a, 1), DataType.Float)
        fd.add_output(fd.ops.div(fd.ops.sum(a, [1]), n))
        fd.add_output(fd.ops.full([fd.ops.size(a, 0)], fd.ops.at(fd.ops.shape(a), -1), DataType.Float))
    for shape in [(2, 3), (4, 5)]:
        x = torch.randn(shape)
        mean, full = fd.execute([x])
        torch.testing.assert_close(mean, x.mean(1))
        torch.testing.assert_close(full, torch.full((shape[0],), float(shape[1])))
    with FusionDefinition() as fd:
        r = fd.ops.reshape(fd.define_tensor([-1]), fd.define_vector(2))  # deferred: runtime sizes
        fd.add_output(fd.ops.add(r, fd.ops.shape(r)[1]))
    torch.testing.assert_close(fd.execute([torch.zeros(12), [3, 4]])[0], torch.full((3, 4), 4.0))
    with pytest.raises(FusionError, match="out of range"):
        with FusionDefinition() as fd:
            fd.ops.at(fd.ops.shape(fd.define_tensor([-1])), 1)


@pytest.mark.parametrize(("sizes", "strides", "contiguity", "order"), [
    ([2, 4, 8], [32, 8, 1], [True, True, True], [2, 1, 0]),
    ([2, 4], [1, 2], [True, True], [0, 1]),  # a transpose
    ([2, 3, 1, 5, 4], [28, 4, 14, 0, 1], [False, None, True, None, True], [4, 2, 3, 1, 0]),
    ([2, 2, 2, 2], [8, 4, 0, 2], [True, True, None, False], [3, 2, 1, 0]),  # stride 0 keeps its place
])
def test_compute_tensor_descriptor(sizes, strides, contiguity, order) -> None:
    assert compute_tensor_descriptor(sizes, strides) == (contiguity, order)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_welford_broadcast_signbit(device, dtype) -> None:
    x = torch.randn(5, 33, device=device).to(dtype)
    x[0, :3] = torch.tensor([-0.0, 0.0, float("-inf")])
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        avg, var_sum, n = fd.ops.welford(t, [1])
        fd.add_output(avg)
        fd.add_output(var_sum)
        fd.add_output(n)
        fd.add_output(fd.ops.signbit(t))
    avg, var_sum, n, sign = fd.execute([x])
    xf = x[1:].double()
    torch.testing.assert_close(avg[1:].double(), xf.mean(1), rtol=TOL[dtype], atol=TOL[dtype])
    torch.testing.assert_close(var_sum[1:].double(), xf.var(1, unbiased=False) * 33, rtol=TOL[dtype] * 4,
                               atol=TOL[dtype] * 4)
    assert n.dtype == torch.int64 and (n == 33).all()
    assert torch.equal(sign, torch.signbit(x))


@pytest.mark.parametrize("device", DEVICES)
def test_truediv_of_integers_is_float(device) -> None:
    i = torch.tensor([7, -7, 3], dtype=torch.int32, device=device)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(i)
        q = fd.ops.truediv(t, fd.define_scalar(2, DataType.Int))
        fd.add_output(q)
    assert q.dtype is DataType.Float
    torch.testing.assert_close(fd.execute([i])[0], torch.tensor([3.5, -3.5, 1.5], device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("max_norm", [None, 1.0])
def test_embedding_fwd_matches_torch(device, dtype, max_norm) -> None:
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 10, (3, 5), generator=g).to(device)
    w = torch.randn(10, 8, generator=g).to(device, dtype)
    with FusionDefinition() as fd:
        a, b = fd.from_pytorch(idx), fd.from_pytorch(w)
        norm = None if max_norm is None else fd.define_scalar(max_norm)
        fd.add_output(fd.ops.embedding_fwd(a, b, None, norm, None, None, None))
    (out,) = fd.execute([idx, w])
    want = F.embedding(idx, w.clone(), max_norm=max_norm)
    torch.testing.assert_close(out, want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("bad", [10, -1])
def test_embedding_fwd_raises_for_an_index_outside_the_table(bad) -> None:
    """As F.embedding raises for an index outside [0, rows), negative ones included (the
    fusion's gather alone would read -1 from the end)."""
    from mlirfuse.errors import IndexOutOfRange

    w = torch.randn(10, 8)
    with FusionDefinition() as fd:
        a, b = fd.define_tensor([-1], dtype=DataType.Int), fd.from_pytorch(w)
        fd.add_output(fd.ops.embedding_fwd(a, b, None, None, None, None, None))
    good = torch.tensor([3, 0])
    torch.testing.assert_close(fd.execute([good, w])[0], F.embedding(good, w))
    with pytest.raises(IndexError):
        F.embedding(torch.tensor([bad, 0]), w)
    with pytest.raises(IndexOutOfRange):
        fd.execute([torch.tensor([bad, 0]), w])


def test_nvfuser_op_names_are_listed() -> None:
    with FusionDefinition() as fd:
        assert {"embedding_fwd", "welford", "broadcast", "signbit", "truediv", "exp"} <= set(dir(fd.ops))
    assert "compute_tensor_descriptor" in mlirfuse.__all__


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_shifts_match_torch_with_counts_past_the_width(device, dtype) -> None:
    """bitwise_left_shift / bitwise_right_shift as torch (counts past the width: 0, or the
    sign), logical_right_shift as a zero-filling shift of the bits."""
    bits = torch.iinfo(dtype).bits
    a = torch.tensor([5, -5, 1, -1, 100, -128, 7, -3] * 2, dtype=dtype, device=device)
    b = torch.tensor([0, 1, 2, bits - 1, bits, bits + 3, -1, 3] * 2, dtype=dtype, device=device)
    with FusionDefinition() as fd:
        x, y = fd.from_pytorch(a), fd.from_pytorch(b)
        fd.add_output(fd.ops.bitwise_left_shift(x, y))
        fd.add_output(fd.ops.bitwise_right_shift(x, y))
        fd.add_output(fd.ops.logical_right_shift(x, y))
    left, right, logical = fd.execute([a, b])
    over = (b < 0) | (b >= bits)
    safe = torch.where(over, torch.zeros_like(b), b)
    torch.testing.assert_close(left, torch.where(over, torch.zeros_like(a), a << safe))
    torch.testing.assert_close(right, torch.where(over, torch.where(a < 0, -1, 0).to(dtype), a >> safe))
    mask = (1 << bits) - 1
    want = [0 if o else ((int(x) & mask) >> int(s)) for x, s, o in zip(a.tolist(), b.tolist(), over.tolist())]
    want = [w - (1 << bits) if w >= 1 << (bits - 1) else w for w in want]
    assert logical.tolist() == want


def test_torch_shifts_fuse() -> None:
    a = torch.randint(-1000, 1000, (64,), dtype=torch.int32)
    b = torch.randint(0, 12, (64,), dtype=torch.int32)
    fn = torch.compile(lambda x, y: ((x << y) + 1, (x >> y) * 2), backend="mlirfuse")
    for got, want in zip(fn(a, b), ((a << b) + 1, (a >> b) * 2)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Double, DataType.BFloat16])
def test_normal_statistics_and_repeatability(device, dtype) -> None:
    """Mean and standard deviation of 2^17 draws within 5 sigma of the estimates' spread; the
    same seed and offset give the same numbers, another offset others; none infinite."""
    x = torch.zeros(1024, 128, device=device)

    def draw(offset: int) -> torch.Tensor:
        with FusionDefinition() as fd:
            t = fd.from_pytorch(x)
            noise = fd.ops.normal(1.5, 2.0, [t.shape[0], t.shape[1]], rng_seed=7, rng_offset=offset, dtype=dtype)
            fd.add_output(fd.ops.add(noise, fd.ops.cast(t, dtype)))
        return fd.execute([x])[0]
    a, b, c = draw(0), draw(0), draw(1)
    assert torch.equal(a, b) and not torch.equal(a, c)
    n = a.numel()
    mean, std = a.double().mean().item(), a.double().std().item()
    assert abs(mean - 1.5) < 5 * 2.0 / n ** 0.5 and abs(std - 2.0) < 5 * 2.0 / (2 * n) ** 0.5 + 0.02
    assert torch.isfinite(a).all()


def test_segment_set_is_accepted_as_a_copy() -> None:
    x = torch.randn(4, 8)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.exp(fd.ops.segment_set(fd.ops.mul(t, 2.0))))
    torch.testing.assert_close(fd.execute([x])[0], (x * 2.0).exp())


def test_validate_uses_the_tolerance_of_the_dtype() -> None:
    """bf16 results checked at bf16's tolerance, integers exactly."""
    x = torch.randn(64, dtype=torch.bfloat16)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.exp(fd.from_pytorch(x)))
    fd.validate([x])
    fd.validate([x], [x.float().exp().bfloat16()])
    i = torch.arange(6, dtype=torch.int64)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.mul(fd.from_pytorch(i), 3))
    fd.validate([i])
    with pytest.raises(FusionError, match="differs"):
        fd.validate([i], [i * 3 + 1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_gcd_matches_torch(device, dtype) -> None:
    """Signs, zeros (gcd(0, 0) = 0) and broadcasting, against torch.gcd."""
    a = torch.tensor([12, -18, 0, 7, 0, 2 ** 30, -36, 1, 97 * 89], dtype=dtype, device=device)
    b = torch.tensor([[18], [-4]], dtype=dtype, device=device)
    with FusionDefinition() as fd:
        x, y = fd.from_pytorch(a), fd.define_tensor([-1, 1], dtype=dtype)
        fd.add_output(fd.ops.gcd(x, y))
        fd.add_output(fd.ops.gcd(x, fd.ops.mul(x, 3)))
    got, same = fd.execute([a, b])
    assert torch.equal(got, torch.gcd(a, b)) and torch.equal(same, torch.gcd(a, a * 3))
    with pytest.raises(FusionError, match="integer"):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.gcd(fd.define_tensor([-1]), fd.define_tensor([-1])))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nextafter_matches_torch_bit_for_bit(device, dtype) -> None:
    """Toward larger, smaller, equal (the second's sign of zero), from zero (the smallest
    subnormal), from the largest finite to infinity, NaN."""
    info = torch.finfo(dtype)
    a = torch.tensor([1.0, -1.0, 0.0, -0.0, 0.0, info.max, float("inf"), float("nan"), 1.0, 3.0, info.tiny, -2.5],
                     dtype=dtype, device=device)
    b = torch.tensor([2.0, 0.0, -1.0, 1.0, -0.0, float("inf"), 0.0, 1.0, float("nan"), -float("inf"), 0.0, -2.5],
                     dtype=dtype, device=device)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.nextafter(fd.from_pytorch(a), fd.from_pytorch(b)))
    (got,) = fd.execute([a, b])
    want = torch.nextafter(a, b)
    bits = torch.int32 if dtype is torch.float32 else torch.int64
    same = (got.view(bits) == want.view(bits)) | (got.isnan() & want.isnan())
    assert same.all(), (got, want)
    with pytest.raises(FusionError, match="float32 or float64"):
        with FusionDefinition() as fd:
            t = fd.define_tensor([-1], dtype=DataType.BFloat16)
            fd.add_output(fd.ops.nextafter(t, t))


def test_torch_gcd_and_nextafter_fuse() -> None:
    a, b = torch.randint(-500, 500, (64,)), torch.randint(-500, 500, (64,))
    x, y = torch.randn(64), torch.randn(64)
    fn = torch.compile(lambda a, b, x, y: (torch.gcd(a, b) + 1, torch.nextafter(x, y) * 2), backend="mlirfuse")
    g, n = fn(a, b, x, y)
    assert torch.equal(g, torch.gcd(a, b) + 1) and torch.equal(n, torch.nextafter(x, y) * 2)


def test_a_cpu_tensor_input_must_be_0d() -> None:
    """is_cpu=True declares a 0-d tensor on the host (nvFuser's CPU scalar tensors); any
    other rank is an error when defined, every time (nothing of the failed definition is
    cached); a 0-d one runs."""
    for _ in range(2):
        with pytest.raises(FusionError, match="CPU non-scalar tensor is not supported!"):
            with FusionDefinition() as fd:
                fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int, is_cpu=True)
    x, s = torch.randn(4, 3), torch.tensor(2.5, dtype=torch.float64)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        c = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Double, is_cpu=True)
        fd.add_output(fd.ops.mul(t, c))
    torch.testing.assert_close(fd.execute([x, s])[0], x * 2.5)


def test_inputs_outputs_and_extents_are_nvfusers_state_indices() -> None:
    """fd.inputs() and fd.outputs() give the state indices nvFuser gives (the numbers of the
    printed T/S names; a defined constant is no input), fd.extents() -1 down, one per dim
    of each tensor input; a subclass's definition runs first."""
    x = torch.ones(2, 4, 8)
    with FusionDefinition() as fd:
        t0, t1, c2 = fd.from_pytorch(x), fd.from_pytorch(x), fd.define_scalar(3.0)
        t5 = fd.ops.sum(fd.ops.mul(fd.ops.add(t0, t1), c2), [-1], False, DataType.Float)
        fd.add_output(t5)
    assert (fd.inputs(), fd.outputs(), fd.extents()) == ([0, 1], [5], [-1, -2, -3, -4, -5, -6])
    assert "T5 = fd.ops.sum(T4" in repr(fd)

    class Scaled(FusionDefinition):
        def definition(self):
            t = self.define_tensor([-1, -1], dtype=DataType.Float)
            s = self.define_scalar(dtype=DataType.Double)  # a runtime scalar: an input
            self.add_output(self.ops.mul(t, s))
            self.add_output(t)
    assert (Scaled().inputs(), Scaled().outputs(), Scaled().extents()) == ([0, 1], [2, 0], [-1, -2])


@pytest.mark.parametrize("device", DEVICES)
def test_cat_takes_nvfusers_manual_padding_flag(device) -> None:
    """cat(tensors, dim, manual_padding=...) as nvFuser's (the flag only chooses how nvFuser
    lowers the padding): the same concatenation either way, and the printed definition keeps it."""
    x = torch.randn(3, 5, device=device)
    for flag in (False, True):
        with FusionDefinition() as fd:
            t = fd.from_pytorch(x)
            fd.add_output(fd.ops.cat([fd.ops.neg(t), t], dim=-1, manual_padding=flag))
        torch.testing.assert_close(fd.execute([x])[0], torch.cat([-x, x], -1))
        assert f"manual_padding={flag}" in repr(fd)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64, torch.bool])
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin"])
def test_scans_match_torch(device, dtype, name) -> None:
    """Along the first and the last dim; NaN, once met, stays in cummax/cummin; integer and
    bool cumsum/cumprod give int64 as torch's."""
    if dtype.is_floating_point:
        x = torch.randn(5, 9, dtype=torch.float64).to(dtype)
        if name == "cumprod":
            x = x.abs() * 0.3 + 0.8
        x[2, 4] = float("nan")
    elif dtype is torch.bool:
        x = torch.rand(5, 9) < 0.7
        if name in ("cummax", "cummin"):
            pytest.skip("torch.cummax/cummin have no bool kernel")
    else:
        x = torch.randint(-4, 5, (5, 9), dtype=dtype)
    x = x.to(device)
    for dim in (0, -1):
        with FusionDefinition() as fd:
            fd.add_output(getattr(fd.ops, name)(fd.from_pytorch(x), dim))
        (got,) = fd.execute([x])
        want = getattr(torch, name)(x, dim)
        want = want if isinstance(want, torch.Tensor) else want.values
        assert got.dtype == want.dtype
        tol = TOL.get(dtype, 0) * (10 if dtype is torch.bfloat16 else 1)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_matches_torch(device, dim) -> None:
    """An index smaller than the input and src in the other dims (dynamic sizes), writes to
    distinct places (torch leaves colliding ones unspecified on the GPU), a number as src."""
    x = torch.randn(5, 6, dtype=torch.float64, device=device)
    src = torch.randn(7, 8, dtype=torch.float64, device=device)
    n = x.shape[dim]
    index = torch.stack([torch.randperm(n)[:4] for _ in range(3)], 1 if dim == 0 else 0).to(device)
    with FusionDefinition() as fd:
        a, i, s = fd.from_pytorch(x), fd.from_pytorch(index), fd.from_pytorch(src)
        fd.add_output(fd.ops.scatter(a, i, s, dim))
        fd.add_output(fd.ops.scatter(a, i, 2.5, dim))
    got, filled = fd.execute([x, index, src])
    assert torch.equal(got, torch.scatter(x, dim, index, src))
    assert torch.equal(filled, torch.scatter(x, dim, index, 2.5))


def test_scatter_collisions_keep_the_last_write_and_static_shapes_trace_once() -> None:
    x = torch.zeros(2, 4, dtype=torch.int64)
    index = torch.tensor([[1, 1, 3], [0, 0, 0]])
    src = torch.tensor([[10, 20, 30], [40, 50, 60]])
    with FusionDefinition() as fd:
        a, i, s = (fd.from_pytorch(t, static_sizes=True) for t in (x, index, src))
        fd.add_output(fd.ops.scatter(a, i, s, 1))
    assert fd._deferred is None
    (got,) = fd.execute([x, index, src])
    assert got.tolist() == [[0, 20, 0, 30], [60, 0, 0, 0]]  # torch's CPU order: the last write
    with pytest.raises(FusionError, match="src must be a int64"):
        with FusionDefinition() as fd:
            a, i = fd.from_pytorch(x), fd.from_pytorch(index)
            fd.ops.scatter(a, i, fd.from_pytorch(src.float()), 1)


def test_a_definition_needing_concrete_sizes_is_traced_per_signature() -> None:
    """slice and cat of dynamic dims, a reshape to runtime scalars: the definition runs for
    each input shape and scalar value, traced again per signature, not per call."""
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1])
        s0, s1 = fd.define_vector(2)
        head = fd.ops.slice(t, [0, 1], [2, 3])              # needs t's sizes: deferred from here
        both = fd.ops.cat([head, head], 1) * 2.0             # an operator on a deferred value
        fd.add_output(fd.ops.exp(both))
        fd.add_output(fd.ops.reshape(fd.ops.add(t, 1.0), [s0, s1]))
        assert fd.ops.exp(t).ndim == 2                       # values not depending on them stay traced
    with pytest.raises(FusionError, match="the rank of a deferred value"):
        head.ndim
    for shape, sizes in [((4, 6), (3, 8)), ((4, 6), (8, 3)), ((3, 5), (15, 1)), ((4, 6), (3, 8))]:
        x = torch.randn(*shape)
        cat, reshaped = fd.execute([x, *sizes])
        torch.testing.assert_close(cat, torch.cat([x[:2, 1:3]] * 2, 1).mul(2.0).exp())
        torch.testing.assert_close(reshaped, (x + 1.0).reshape(sizes))
    assert len(fd._replays) == 3
    fd.validate([torch.randn(4, 6), 2, 12])
    assert "traced per input signature" in str(fd)
    with pytest.raises(FusionError, match="needs concrete sizes"):
        fd.compile()


def test_a_deferred_definition_keeps_in_place_outputs_and_several_results() -> None:
    x = torch.randn(4, 6)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        part = fd.ops.slice(t, [1, 0], [3, 6])
        avg, var_sum, n = fd.ops.welford(part, [1])
        fd.add_output(avg)
        fd.add_output(fd.ops.pad(part, [0, 0, 1, 1]), alias_input=t)
    y = torch.randn(4, 6)
    want_mean, want_x = y[1:3].mean(1), torch.nn.functional.pad(y[1:3], [0, 0, 1, 1])
    (got,) = fd.execute([y])
    torch.testing.assert_close(got, want_mean)
    torch.testing.assert_close(y, want_x)


def test_operators_are_logged_and_tensor_methods_in_a_deferred_definition_refused_clearly() -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1])
        doubled = -(t * 2.0) + 1  # Python operators on traced tensors are logged as fd.ops calls
        fd.add_output(fd.ops.cat([doubled, t], 0))
    x = torch.randn(3)
    torch.testing.assert_close(fd.execute([x])[0], torch.cat([-(x * 2.0) + 1, x]))
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1])
        fd.add_output(fd.ops.cat([t.exp(), t], 0))  # a method: not in the definition's log
    with pytest.raises(FusionError, match="built outside fd.ops"):
        fd.execute([x])


FLOAT8 = [(DataType.Float8_e4m3fn, torch.float8_e4m3fn), (DataType.Float8_e5m2, torch.float8_e5m2)]


def _float8_probe() -> torch.Tensor:
    """Round-to-even ties, subnormals, the largest finite values and past them, infinities,
    NaN, signed zeros, and a spread of ordinary values."""
    special = [0.0, -0.0, 1e-9, 2 ** -9, 2 ** -10, 3 * 2 ** -10, 2 ** -7, 0.99 * 2 ** -6, 2 ** -16, 3 * 2 ** -18,
               1.0625, 1.1875, 300.0, 448.0, 449.0, 463.9, 464.0, 470.0, 480.0, 1e6, 57344.0, 59392.0, 61440.0,
               1e5, float("inf"), -float("inf"), float("nan"), -500.0]
    return torch.cat([torch.tensor(special), torch.randn(2000, generator=torch.Generator().manual_seed(0)) * 100])


def _same_float8(got: torch.Tensor, want: torch.Tensor) -> bool:
    g, w = got.float(), want.float()
    return bool(((g == w) | (g.isnan() & w.isnan())).all()) and bool(((g.signbit() == w.signbit()) | g.isnan()).all())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt,torch_dt", FLOAT8, ids=["e4m3fn", "e5m2"])
def test_float8_casts_match_torch(device, dt, torch_dt) -> None:
    """float32/bfloat16/float64 -> float8 as torch rounds (e4m3fn saturates at 448, as torch
    2.13 and PTX's cvt.satfinite do; e5m2 overflows to inf), every one of the 256 codes back
    to float32, arithmetic computed in float32 between a load and a store of float8."""
    x = _float8_probe().to(device)
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch_dt).to(device)
    with FusionDefinition() as fd:
        t, c = fd.from_pytorch(x), fd.from_pytorch(codes)
        f8 = fd.ops.cast(t, dt)
        fd.add_output(f8)
        fd.add_output(fd.ops.cast(fd.ops.cast(t, DataType.BFloat16), dt))
        fd.add_output(fd.ops.cast(c, DataType.Float))
        fd.add_output(fd.ops.mul(f8, 0.5))  # a float8 result: computed in float32, stored as float8
    f8, from_bf16, decoded, halved = fd.execute([x, codes])
    assert f8.dtype == torch_dt and halved.dtype == torch_dt

    def to_f8(v: torch.Tensor) -> torch.Tensor:
        """torch's rounding; e4m3fn saturating explicitly (torch 2.13 saturates, 2.11 gave NaN)."""
        return (v.clamp(-448.0, 448.0) if torch_dt is torch.float8_e4m3fn else v).to(torch_dt)
    assert _same_float8(f8, to_f8(x))
    assert _same_float8(from_bf16, to_f8(x.bfloat16()))
    assert _same_float8(decoded, codes.float())
    assert _same_float8(halved, to_f8(to_f8(x).float() * 0.5))
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.cast(fd.from_pytorch(x.double()), dt))
    assert _same_float8(fd.execute([x.double()])[0], to_f8(x.double()))


def test_float8_promotion_is_refused_as_torch_refuses_it() -> None:
    with pytest.raises(FusionError, match="no type promotion between float8_e4m3fn and float32"):
        with FusionDefinition() as fd:
            fd.ops.add(fd.define_tensor([-1], dtype=DataType.Float8_e4m3fn), fd.define_tensor([-1]))


@pytest.mark.parametrize("device", DEVICES)
def test_stride_order_lays_outputs_out_in_memory_order(device) -> None:
    """stride_order[d] ranks dim d's stride (0 the innermost); fd.ops.stride_order and
    add_output's stride order give outputs with those strides and the same values; the
    stride_order result stays an ordinary value for later ops."""
    x = torch.randn(2, 3, 4, device=device)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        e = fd.ops.exp(t)
        ordered = fd.ops.stride_order(e, [0, 2, 1])
        fd.add_output(ordered)
        fd.add_output(e)
        fd.add_output(fd.ops.relu(t), [1, 0, 2])
        fd.add_output(fd.ops.mul(ordered, 2.0))
        fd.add_output(fd.ops.neg(t), stride_order=[2, 1, 0])  # row-major: as any output
    a, b, c, d, n = fd.execute([x])
    assert a.stride() == (1, 8, 2) and c.stride() == (3, 1, 6)
    assert b.is_contiguous() and d.is_contiguous() and n.is_contiguous()
    torch.testing.assert_close(a, x.exp())
    torch.testing.assert_close(c, x.relu())
    torch.testing.assert_close(d, x.exp() * 2.0)
    with pytest.raises(FusionError, match="not a permutation"):
        with FusionDefinition() as fd:
            fd.ops.stride_order(fd.from_pytorch(x), [0, 0, 1])


def test_define_scalar_takes_the_dtype_of_its_value_as_nvfuser() -> None:
    with FusionDefinition() as fd:
        i, f, b = fd.define_scalar(3), fd.define_scalar(2.5), fd.define_scalar(True)
        runtime, old_form = fd.define_scalar(), fd.define_scalar(DataType.Int)
        t = fd.define_tensor([-1], dtype=DataType.Int32)
        fd.add_output(fd.ops.add(t, i))                 # int32 + an int scalar stays int32
        fd.add_output(fd.ops.mul(fd.ops.cast(t, DataType.Float), f))
        fd.add_output(fd.ops.add(t, old_form))
    assert (i.dtype, f.dtype, b.dtype, runtime.dtype, old_form.dtype) == (
        DataType.Int, DataType.Double, DataType.Bool, DataType.Double, DataType.Int)
    x = torch.arange(4, dtype=torch.int32)
    added, scaled, plus = fd.execute([2.0, 5, x])
    assert added.dtype == torch.int32 and torch.equal(added, x + 3)
    torch.testing.assert_close(scaled, x.float() * 2.5)
    assert torch.equal(plus, x + 5)
    with FusionDefinition() as fd:
        assert fd.define_scalar(1 + 2j).dtype is DataType.ComplexDouble


def test_define_tensor_forms_and_vectors_passed_as_lists() -> None:
    """define_tensor(sizes, strides) (a transposed layout, static sizes on request), a rank
    alone (nvFuser's oldest form), stride_order on an input; define_vector(n)'s scalars passed
    as one list; t.shape() and fd.ops.shape as nvFuser spells them."""
    xt = torch.randn(6, 4).t()
    with FusionDefinition() as fd:
        t = fd.define_tensor([4, 6], [1, 4])
        s = fd.define_tensor([4, 6], [1, 4], static_sizes=True)
        r = fd.define_tensor(2)
        v = fd.define_vector(2)
        fd.add_output(fd.ops.reshape(fd.ops.add(t, r), v))
        fd.add_output(fd.ops.mul(s, fd.ops.shape(s)[0]))
        assert t.shape()[0] == t.shape[0] and s.shape() == (4, 6) and len(fd.ops.tensor_sizes(r)) == 2
    y = torch.randn(4, 6)
    reshaped, scaled = fd.execute([xt, xt, y, [3, 8]])
    torch.testing.assert_close(reshaped, (xt + y).reshape(3, 8))
    torch.testing.assert_close(scaled, xt * 4)
    with FusionDefinition() as fd:  # channels-last-like input: contiguity in memory order
        c = fd.define_tensor([-1, -1, -1], contiguity=[True, True, True], stride_order=[0, 2, 1])
        fd.add_output(fd.ops.exp(c))
    z = torch.randn(2, 5, 3).permute(0, 2, 1)
    torch.testing.assert_close(fd.execute([z])[0], z.exp())


def test_squeeze_and_reshape_in_both_of_nvfusers_spellings() -> None:
    """squeeze(t, dims) and reshape(t, new_shape), and the older squeeze(t, original_shape,
    dims) and reshape(t, original_shape, new_shape); the printed definition keeps the
    spelling used and runs again."""
    x, y = torch.randn(1, 4, 1), torch.randn(2, 1, 4)
    with FusionDefinition() as fd:
        a = fd.define_tensor(sizes=[1, 4, 1], strides=[4, 1, 1])
        b = fd.define_tensor(sizes=[2, 1, 4], strides=[4, 4, 1])
        fd.add_output(fd.ops.mul(fd.ops.squeeze(a, [1, 4, 1], [0, -1]), fd.ops.squeeze(b, [-2])))
        fd.add_output(fd.ops.squeeze(b, dims=[1], squeeze_expanded=False))
        fd.add_output(fd.ops.reshape(b, [2, 1, 4], [4, 2]))
        fd.add_output(fd.ops.reshape(b, new_shape=[8]))
    want = x.reshape(4) * y.reshape(2, 4)
    got, kept, old_reshape, new_reshape = fd.execute([x, y])
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(kept, y.reshape(2, 4))
    torch.testing.assert_close(old_reshape, y.reshape(4, 2))
    torch.testing.assert_close(new_reshape, y.reshape(8))
    assert "fd.ops.squeeze(T0, [1, 4, 1], [0, -1])" in repr(fd)
    scope = {"FusionDefinition": FusionDefinition, "DataType": DataType}
    exec(repr(fd), scope)  # noqa: S102 - the definition just printed
    with FusionDefinition() as again:
        scope["nvfuser_fusion_id" + repr(fd).split("nvfuser_fusion_id")[1].split("(")[0]](again)
    torch.testing.assert_close(again.execute([x, y])[0], want)
    with pytest.raises(FusionError, match="original_shape"):
        with FusionDefinition() as fd:
            fd.ops.squeeze(fd.define_tensor(sizes=[1, 4], strides=[4, 1]), [1, 4, 1], [0])


@pytest.mark.parametrize("device", DEVICES)
def test_nvfuser_composite_ops_match_torch(device) -> None:
    x = torch.tensor([-2.5, -0.5, 0.0, 0.75, 3.25, float("inf"), -float("inf"), float("nan")], device=device)
    a, b = torch.randn(8, device=device), torch.randn(8, device=device)
    with FusionDefinition() as fd:
        t, ta, tb = fd.from_pytorch(x), fd.from_pytorch(a), fd.from_pytorch(b)
        for out in (fd.ops.frac(t), fd.ops.isfinite(t), fd.ops.isneginf(t), fd.ops.isposinf(t),
                    fd.ops.threshold(t, 0.5, -1.0), fd.ops.addcmul(ta, ta, tb, 0.5), fd.ops.real(ta),
                    fd.ops.iota(5, None, None, DataType.Int)):
            fd.add_output(out)
    got = fd.execute([x, a, b])
    want = [torch.frac(x), torch.isfinite(x), torch.isneginf(x), torch.isposinf(x),
            F.threshold(x, 0.5, -1.0), torch.addcmul(a, a, b, value=0.5), a, torch.arange(5, device=device)]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True)
    with pytest.raises(FusionError, match="imag"):
        with FusionDefinition() as fd:
            fd.ops.imag(fd.from_pytorch(a))


COMPLEX = [(torch.complex64, 1e-5), (torch.complex128, 1e-12)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,tol", COMPLEX, ids=["complex64", "complex128"])
def test_complex_tensors_constants_arithmetic_parts_and_sums(device, dtype, tol) -> None:
    """Complex inputs (a transposed one too), constants and runtime scalars; arithmetic with
    torch's promotion; real/imag/abs; rsqrt, sqrt, exp, log; sums (with nvFuser's positional
    dtype); views; complex outputs as complex tensors."""
    g = torch.Generator().manual_seed(3)
    z = torch.randn(3, 4, dtype=dtype, generator=g).to(device)
    w = torch.randn(4, 3, dtype=dtype, generator=g).to(device).t()  # not contiguous
    x = torch.randn(3, 4, dtype=torch.float64, generator=g).to(device)
    with FusionDefinition() as fd:
        a, b, r = fd.from_pytorch(z), fd.from_pytorch(w), fd.from_pytorch(x)
        c = fd.define_scalar(1.5 - 2j)
        s = fd.define_scalar(None, dtype=DataType.ComplexDouble)
        outputs = [fd.ops.add(a, b), fd.ops.mul(a, c), fd.ops.div(a, b), fd.ops.mul(a, s), fd.ops.mul(a, r),
                   fd.ops.real(a), fd.ops.imag(a), fd.ops.abs(a), fd.ops.rsqrt(a), fd.ops.sqrt(a), fd.ops.exp(a),
                   fd.ops.log(a), fd.ops.sum(a, [-1], False, DataType.ComplexFloat), fd.ops.sum(fd.ops.mul(a, b), [0]),
                   fd.ops.permute(fd.ops.conj(a), [1, 0]), fd.ops.eq(a, b), -a + 1]
        for out in outputs:
            fd.add_output(out)
    got = fd.execute([z, w, x, 0.25 + 1j])
    want = [z + w, z * (1.5 - 2j), z / w, z * (0.25 + 1j), z * x, z.real, z.imag, z.abs(), z.rsqrt(), z.sqrt(),
            z.exp(), z.log(), z.sum(-1), (z * w).sum(0), z.conj().t(), z == w, -z + 1]
    for k, (o, e) in enumerate(zip(got, want)):
        e = e.resolve_conj()
        assert o.dtype == e.dtype and o.device == e.device, (k, o.dtype, e.dtype)
        torch.testing.assert_close(o, e, rtol=tol * 10, atol=tol * 10, msg=lambda m: f"output {k}: {m}")


@pytest.mark.parametrize("dtype,big", [(torch.complex64, 1e30), (torch.complex128, 1e200)],
                         ids=["complex64", "complex128"])
def test_complex_special_and_extreme_values_as_torch(dtype, big) -> None:
    """abs, exp, sqrt, rsqrt, log and reciprocal of every pair of parts among zeros, ordinary,
    huge and tiny values, infinities and NaN, and their quotients by huge, tiny and infinite
    divisors, against torch (C99's special values: |inf + nan j| = inf, exp(-inf + inf j) =
    0, sqrt(x + inf j) = inf + inf j; |1e30| is not inf in float32, nor 1e30 / 1e30 0)."""
    inf, nan = float("inf"), float("nan")
    values = [0.0, -0.0, 1.5, -2.5, big, -big, 1 / big, inf, -inf, nan]
    z = torch.tensor([complex(a, b) for a in values for b in values], dtype=dtype)
    w = torch.tensor([complex(a, b) for a in [big, 1 / big, -1.5, inf, 0.0] for b in [0.0, -big, 2.0, 1 / big, nan]]
                     * 4, dtype=dtype)
    names = ["abs", "exp", "sqrt", "rsqrt", "log", "reciprocal", "div"]
    with FusionDefinition() as fd:
        t, u = fd.from_pytorch(z), fd.from_pytorch(w)
        for name in names:
            fd.add_output(fd.ops.div(t, u) if name == "div" else getattr(fd.ops, name)(t))
    for name, got in zip(names, fd.execute([z, w])):
        want = z / w if name == "div" else getattr(torch, name)(z)
        for part in ("real", "imag") if want.is_complex() else ("real",):
            g, e = getattr(got, part), getattr(want, part)
            bad = ~(torch.isclose(g, e, rtol=1e-5, atol=0, equal_nan=True) | (g == e))
            assert not bad.any(), (name, part, [(z[k].item(), got[k].item(), want[k].item())
                                                for k in bad.nonzero().flatten()[:6].tolist()])


def test_complex_pad_values() -> None:
    """A complex tensor padded with a real value (its imaginary part 0, as torch's), a complex
    constant or a runtime complex scalar; a real tensor with a complex value is refused."""
    z = torch.tensor([[1 + 2j, -3j]], dtype=torch.complex64)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(z)
        fd.add_output(fd.ops.pad(t, [1, 1], fd.define_scalar(1.5)))
        fd.add_output(fd.ops.pad(t, [0, 2], fd.define_scalar(0.5 - 2j)))
        fd.add_output(fd.ops.pad(t, [2, 0], fd.define_scalar(None, dtype=DataType.ComplexDouble)))
        fd.add_output(fd.ops.pad(t, [1, 0]))
    got = fd.execute([z, 3 + 4j])
    want = [F.pad(z, [1, 1], value=1.5), torch.cat([z, torch.full((1, 2), 0.5 - 2j, dtype=z.dtype)], 1),
            torch.cat([torch.full((1, 2), 3 + 4j, dtype=z.dtype), z], 1), F.pad(z, [1, 0])]
    for g, w in zip(got, want):
        assert torch.equal(g, w), (g, w)
    with pytest.raises(FusionError, match="pad value must have the same dtype"):
        with FusionDefinition() as fd:
            fd.ops.pad(fd.from_pytorch(torch.ones(2)), [1, 1], fd.define_scalar(1 + 1j))


@pytest.mark.parametrize("define, match", [
    (lambda fd, x, c: fd.ops.where(fd.from_pytorch(c), x, x), "condition should be of DataType Bool"),
    (lambda fd, x, c: fd.ops.linear(fd.from_pytorch(torch.ones(4, 3)), fd.from_pytorch(torch.ones(1, 3)),
                                    fd.from_pytorch(torch.ones(5))), "does not broadcast to the output"),
    (lambda fd, x, c: fd.ops.squeeze(fd.define_tensor([], dtype=DataType.Float), [0]), "0-d tensor"),
    (lambda fd, x, c: fd.ops.iota(4, 1.0, 0.0, DataType.Float), "must not equal zero"),
    (lambda fd, x, c: fd.ops.iota(3, float("inf"), 1.0, DataType.Float), "must be finite"),
    (lambda fd, x, c: fd.define_vector([-2, 3]), "neither symbolic"),
    (lambda fd, x, c: fd.ops.slice(fd.from_pytorch(torch.ones(4, 4, dtype=torch.complex64)), [-1, 0], [2, 2]),
     "start_indices must be greater than or equal to 0"),
    (lambda fd, x, c: fd.ops.slice(fd.from_pytorch(torch.ones(4, 4, dtype=torch.complex64)), [0, 0], [2, 2],
                                   [2, 1]), "strides must be of const size 1"),
], ids=["where-float-condition", "linear-bias", "squeeze-0d", "iota-zero-step", "iota-inf", "vector-negative",
        "complex-slice-start", "complex-slice-stride"])
def test_definitions_nvfuser_refuses_are_refused(define, match) -> None:
    """Definitions nvFuser refuses (and torch too, where it has the op): refused when defined,
    not run with a made-up meaning (a float condition's truth, a bias growing the output)."""
    with pytest.raises(FusionError, match=match):
        with FusionDefinition() as fd:
            fd.add_output(define(fd, fd.from_pytorch(torch.ones(3)), torch.tensor([0.0, 0.5, 2.0])))


def test_mod_and_isreal() -> None:
    """nvFuser's `mod` (the remainder of truncated division, torch's fmod) of integers and
    floats, and `isreal` of real and complex tensors."""
    a, b = torch.tensor([7, -7, 7, -7, 0], dtype=torch.int32), torch.tensor([3, 3, -3, -3, 5], dtype=torch.int32)
    x = torch.tensor([1.5, float("nan"), -2.0, float("inf")])
    z = torch.tensor([1 + 0j, 2 + 1j, float("nan") + 0j, -0.5j])
    with FusionDefinition() as fd:
        ta, tb, tx, tz = fd.from_pytorch(a), fd.from_pytorch(b), fd.from_pytorch(x), fd.from_pytorch(z)
        for out in (fd.ops.mod(ta, tb), fd.ops.mod(tx, fd.define_scalar(0.75)), fd.ops.isreal(tx), fd.ops.isreal(tz)):
            fd.add_output(out)
    want = [torch.fmod(a, b), torch.fmod(x, 0.75), torch.isreal(x), torch.isreal(z)]
    for g, w in zip(fd.execute([a, b, x, z]), want):
        torch.testing.assert_close(g, w, equal_nan=True)
    assert "fd.ops.mod(T0, T1)" in repr(fd) and "fd.ops.isreal(T3)" in repr(fd)


def test_complex_arrays_and_ops_not_offered() -> None:
    """numpy complex arrays in and out; casts between real and complex; an op with no complex
    rule names itself; complex tensors outside FusionDefinition are refused clearly."""
    z = (np.arange(6) + 1j * np.arange(6)[::-1]).astype(np.complex64).reshape(2, 3)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=DataType.ComplexFloat)
        fd.add_output(fd.ops.mul(t, fd.ops.cast(fd.ops.real(t), DataType.ComplexFloat)))
        fd.add_output(fd.ops.cast(fd.ops.cast(t, DataType.ComplexDouble), DataType.ComplexFloat))
    prod, same = fd.execute([z])
    assert prod.dtype == np.complex64 and np.allclose(prod, z * z.real) and np.array_equal(same, z)
    with pytest.warns(UserWarning, match="imaginary part"):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.cast(fd.define_tensor([-1], dtype=DataType.ComplexFloat), DataType.Float))
    assert np.array_equal(fd.execute([z[0]])[0], z[0].real)
    with pytest.raises(FusionError, match="fd.ops.tanh: not offered for complex"):
        with FusionDefinition() as fd:
            fd.ops.tanh(fd.define_tensor([-1], dtype=DataType.ComplexFloat))
    with pytest.raises(FusionError, match="complex tensors are offered by FusionDefinition only"):
        mlirfuse.jit(lambda a: a * 2)(z)


def test_torch_compile_leaves_float8_and_complex_nodes_to_torch() -> None:
    """Through torch.compile, float8 casts (whose overflow differs between torch versions) and
    complex nodes run as torch's; the real work around them still fuses and the results are
    eager's."""
    x = torch.randn(256) * 300
    f = torch.compile(lambda t: (t * 2).to(torch.float8_e4m3fn).float() + 1, backend="mlirfuse")
    assert torch.equal(f(x), (x * 2).to(torch.float8_e4m3fn).float() + 1)
    z = torch.randn(8, dtype=torch.complex64)
    g = torch.compile(lambda t: (t * 2).abs() + 1, backend="mlirfuse")
    torch.testing.assert_close(g(z), (z * 2).abs() + 1)


def test_sizes_written_as_scalar_arithmetic_fold_or_specialize() -> None:
    """Sizes from define_scalar constants and arithmetic on them fold at definition time;
    sizes computed from runtime scalars (nvFuser's dynamic reshapes) specialize per value;
    vectors convert their entries to Int; iota takes scalar arguments."""
    x = torch.randn(4, 8, 6)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        n = fd.define_scalar(None, dtype=DataType.Int)
        size = fd.ops.sub(fd.ops.mul(fd.define_scalar(192), fd.ops.reciprocal(n)), fd.define_scalar(0))  # a float
        fd.add_output(fd.ops.sum(fd.ops.reshape(t, fd.define_vector([n, size], dtype=DataType.Int)), [1]))
        fd.add_output(fd.ops.reshape(t, [fd.define_scalar(4), fd.ops.mul(fd.define_scalar(8), 6)]))
        fd.add_output(fd.ops.broadcast_in_dim(fd.ops.sum(t, [2]), [fd.define_scalar(4), 8, 1], [0, 1]))
        fd.add_output(fd.ops.iota(fd.define_scalar(3), fd.define_scalar(100), fd.define_scalar(2), DataType.Int32))
    assert fd._deferred is not None  # the first reshape waits for n
    for n_value in (32, 16):
        summed, folded, kept, ramp = fd.execute([x, n_value])
        torch.testing.assert_close(summed, x.reshape(n_value, -1).sum(1))
        torch.testing.assert_close(folded, x.reshape(4, 48))
        torch.testing.assert_close(kept, x.sum(2, keepdim=True))
        assert ramp.tolist() == [100, 102, 104] and ramp.dtype == torch.int32


def test_subclassed_definitions_and_the_fusion_cache() -> None:
    """nvFuser's forms: a subclass's definition() runs at the first execute (schedule()
    after it may add no op); FusionDefinition() never defined raises NotImplementedError;
    equal definitions share one number in the FusionCache; FusionDefinition(id) runs it."""
    x = torch.randn(4, 4)

    class Sigmoid(FusionDefinition):
        def definition(self):
            self.add_output(self.ops.sigmoid(self.from_pytorch(x)))

    torch.testing.assert_close(Sigmoid().execute([x])[0], torch.sigmoid(x))
    with pytest.raises(NotImplementedError):
        FusionDefinition().execute([x])

    class AddsInSchedule(Sigmoid):
        def schedule(self):
            self.ops.relu(self.from_pytorch(x))

    with pytest.raises(RuntimeError, match="Attempting to add to a completed definition"):
        AddsInSchedule().execute([x])
    before = mlirfuse.FusionCache.get().num_fusions()

    def define() -> FusionDefinition:
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.mul(fd.from_pytorch(x), fd.define_scalar(3.0)))
        return fd
    first, second = define(), define()
    assert first.id() == second.id() and mlirfuse.FusionCache.get().num_fusions() == before + 1
    torch.testing.assert_close(FusionDefinition(first.id()).execute([x])[0], x * 3.0)


def test_nvfuser_module_level_names() -> None:
    assert mlirfuse.compute_contiguity([2, 1, 3, 1, 4, 5, 6], [80, 30, 30, 7, 0, 6, 1]) == [
        False, None, True, None, None, True, True]
    assert mlirfuse.version() > "0.0.0" and mlirfuse.version() >= mlirfuse.version()
    from mlirfuse.pytorch_utils import torch_dtype_to_nvfuser_dtype

    assert torch_dtype_to_nvfuser_dtype(torch.bfloat16) is DataType.BFloat16
    assert torch_dtype_to_nvfuser_dtype(float) is DataType.Double
    assert issubclass(FusionError, RuntimeError) and issubclass(FusionError, ValueError)
    with FusionDefinition() as fd:
        s, t = fd.define_scalar(2.0), fd.from_pytorch(torch.randn(3))
        scalar_sum, tensor_sum = fd.ops.add(s, s), fd.ops.add(t, s)
        assert isinstance(s, mlirfuse.Scalar) and not isinstance(s, mlirfuse.Tensor)
        assert isinstance(scalar_sum, mlirfuse.Scalar) and isinstance(tensor_sum, mlirfuse.Tensor)
        fd.add_output(tensor_sum)


def test_scalar_dtypes_integer_division_and_reduction_spellings_as_nvfuser() -> None:
    """Operations on scalars alone keep the scalars' dtypes (where(c, 3.0, 5.0) is Double);
    div of integers rounds toward zero as C's (truediv gives floats); sum/prod take a dtype
    in the axes' place; max/min take dtype=Null."""
    cond = torch.tensor([True, False])
    a, b = torch.tensor([7, -7, 7, -7, 0, 5]), torch.tensor([2, 2, -2, -2, 3, 0])
    x = torch.randn(3, 4)
    with FusionDefinition() as fd:
        c = fd.from_pytorch(cond)
        fd.add_output(fd.ops.where(c, fd.define_scalar(3.0), fd.define_scalar(5.0)))
        fd.add_output(fd.ops.where(c, fd.define_scalar(3.0, DataType.Float), fd.define_scalar(5.0, DataType.Float)))
        fd.add_output(fd.ops.where(c, fd.define_scalar(3, DataType.Int32), fd.define_scalar(5, DataType.Int32)))
        ta, tb, tx = fd.from_pytorch(a), fd.from_pytorch(b), fd.from_pytorch(x)
        fd.add_output(fd.ops.div(ta, tb))
        fd.add_output(fd.ops.truediv(ta, tb))
        fd.add_output(fd.ops.prod(tx, DataType.Double))
        fd.add_output(fd.ops.max(tx, [1], False, DataType.Null))
    double, single, int32, quotient, ratio, prod, largest = fd.execute([cond, a, b, x])
    assert (double.dtype, single.dtype, int32.dtype) == (torch.float64, torch.float32, torch.int32)
    assert quotient.tolist() == [3, -3, -3, 3, 0, 0] and quotient.dtype == torch.int64  # by 0: 0
    assert ratio.dtype == torch.float32
    torch.testing.assert_close(prod, x.double().prod())
    torch.testing.assert_close(largest, x.amax(1))


def test_random_ops_without_a_seed_follow_torchs_generator() -> None:
    """uniform/normal given no seed draw new numbers on every call; torch.manual_seed(s)
    repeats them, and they are the numbers of the same op given seed s and offsets 0, 1, ..."""
    x = torch.zeros(5, 9)
    with FusionDefinition() as stateful:
        stateful.add_output(stateful.ops.add(stateful.from_pytorch(x), stateful.ops.uniform(0.3, 1.7, shape=[5, 9])))
    with FusionDefinition() as stateless:
        t = stateless.from_pytorch(x)
        seed, offset = stateless.define_scalar(DataType.Int), stateless.define_scalar(DataType.Int)
        stateless.add_output(stateless.ops.add(t, stateless.ops.uniform(0.3, 1.7, shape=[5, 9], rng_seed=seed,
                                                                        rng_offset=offset)))
    torch.manual_seed(1234)
    drawn = [stateful.execute([x])[0] for _ in range(3)]
    assert not torch.equal(drawn[0], drawn[1])
    for k, d in enumerate(drawn):
        assert torch.equal(d, stateless.execute([x, 1234, k])[0])
    torch.manual_seed(1234)
    assert torch.equal(stateful.execute([x])[0], drawn[0])
    stateful.validate([x])  # the reference sees the same random state as the run


def test_random_ops_take_a_dtype_right_after_the_shape() -> None:
    """nvFuser's uniform/normal(a, b, shape, dtype): the fourth positional argument is the
    dtype there (the seed and offset are keywords), and the numbers follow torch's generator
    as with no seed."""
    x = torch.zeros(64, 256)
    with FusionDefinition() as fd:
        size = fd.ops.tensor_sizes(fd.from_pytorch(x))
        fd.add_output(fd.ops.normal(fd.define_scalar(3.7), fd.define_scalar(2.5), size, DataType.Double))
        fd.add_output(fd.ops.uniform(fd.define_scalar(1.8), fd.define_scalar(9.5), size, DataType.Double))
    torch.manual_seed(5)
    normal, uniform = fd.execute([x])
    assert normal.dtype == uniform.dtype == torch.float64
    assert abs(float(normal.mean()) - 3.7) < 0.05 and abs(float(normal.std()) - 2.5) < 0.05
    assert 1.8 <= float(uniform.min()) < 1.9 and 9.4 < float(uniform.max()) < 9.5
    assert "DataType.Double)" in repr(fd)
    torch.manual_seed(5)
    assert torch.equal(fd.execute([x])[0], normal)


def test_outputs_are_torch_tensors_when_no_tensor_is_given() -> None:
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.iota(4, 0, 1, DataType.Int))
        fd.add_output(fd.ops.full([2], fd.define_scalar(1.5), DataType.BFloat16))
    ramp, filled = fd.execute([])
    assert isinstance(ramp, torch.Tensor) and ramp.tolist() == [0, 1, 2, 3]
    assert filled.dtype == torch.bfloat16 and filled.tolist() == [1.5, 1.5]


def test_the_fusion_cache_tells_layouts_apart() -> None:
    """As nvFuser's: inputs laid out differently (or outputs given other stride orders) make
    other definitions. (A definition no other test makes: the cache is the process's, and
    another test's exp of a transposed input made one fewer new definition here.)"""
    x = torch.randn(3, 4)
    before = mlirfuse.FusionCache.get().num_fusions()
    for example in (x, x.t().contiguous().t(), x):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.mul(fd.ops.exp(fd.from_pytorch(example)), 0.8125))
        torch.testing.assert_close(fd.execute([example])[0], example.exp() * 0.8125)
    assert mlirfuse.FusionCache.get().num_fusions() == before + 2


def test_validate_sees_outputs_as_execute_returns_them() -> None:
    """Stride-ordered and complex outputs compared with the reference in their returned form."""
    z = torch.randn(2, 3, dtype=torch.complex64)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(z)
        fd.add_output(fd.ops.sum(fd.ops.mul(t, t), [1]))
        fd.add_output(fd.ops.stride_order(fd.ops.abs(t), [0, 1]))
    fd.validate([z])
