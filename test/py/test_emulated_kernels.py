"""The GPU schedules' kernels, as the GPU backend generates them (`gpu` stage, sm_90), run by
the CPU emulator (`gpu_emulator.py`) and compared with numpy and the CPU backend: CI checks
what the kernels compute (indices, guards, barriers, shuffles, vector/scalar variants,
misaligned pointers) without a GPU. `pytest -m gpu` runs the same kernels on a real one."""

from __future__ import annotations

import dataclasses
import re
import sys

import ml_dtypes
import numpy as np
import pytest
from gpu_emulator import EmulationError, emulate
from tolerances import assert_close

import mlirfuse
from mlirfuse import ops
from mlirfuse.dtypes import DataType
from mlirfuse.frontend import indexing as I
from mlirfuse.lowering.gpu import toolchain
from mlirfuse.workloads import WORKLOADS

pytestmark = pytest.mark.skipif(toolchain.find().libdevice is None,
                                reason="no libdevice (CUDA toolkit or nvidia-cuda-nvcc wheel)")
RNG = np.random.default_rng(7)


def randn(*shape: int, dtype=np.float32) -> np.ndarray:
    a = RNG.standard_normal(shape) * 3
    return a.astype(dtype) if np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16 else \
        (a > 0).astype(dtype) if dtype is np.bool_ else a.astype(dtype)


def on_emulated_gpu(fn, *args, misalign: dict[int, int] | None = None, dynamic: bool = True):
    """(compiled for the GPU, its outputs from the emulator, the CPU backend's outputs)."""
    f = mlirfuse.jit(fn, dynamic=dynamic)
    want = f(*args)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    compiled = f.compile(*args, backend="gpu", arch="sm_90")
    # As the call passes them: an argument read as its permutation (a permuted dense layout).
    passed = [a if spec.order is None else np.transpose(a, spec.order) for a, spec in zip(args, compiled.fusion.specs)]
    got = emulate(compiled.stages["gpu"], passed, [np.empty_like(w) for w in want], misalign)
    return compiled, got, want


def check(fn, *args, misalign: dict[int, int] | None = None, reduction_size: int = 1, dynamic: bool = True):
    compiled, got, want = on_emulated_gpu(fn, *args, misalign=misalign, dynamic=dynamic)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, f"output {k}", reduction_size)
    return compiled


def schedules(compiled) -> list[str]:
    """The schedule of each launch (a kernel's variant launched instead of another left out)."""
    return [line.split(": ", 1)[1].split(":")[0] for line in compiled.stages["launch_params"].splitlines()
            if not line.split(" gridDim")[0].endswith(" (or)")]


def test_fma_rounds_once_on_the_emulated_gpu() -> None:
    a, c = np.full((4, 33), 1 + 2.0 ** -12, np.float32), np.full((4, 33), -1, np.float32)
    _, got, _ = on_emulated_gpu(lambda a, b, c: ops.fma(a, b, c), a, a, c)
    assert (got[0] == np.float32(2.0 ** -11 + 2.0 ** -24)).all()


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bf16", "f16"])
def test_half_quotients_by_a_row_value_are_correctly_rounded(dtype) -> None:
    """linalg-reciprocal-divisors' product and Newton step give the float32 quotient rounded
    once, as a division does: half values divided by 0.3 (quotients of few bits, often ties
    between two half numbers: x * (1 / y) alone put 62 of 4096 float16 results an ulp off),
    bitwise on the emulated GPU and on the CPU."""
    x = randn(16, 256).astype(dtype)
    y = np.full((16,), 0.3, np.float32)
    want = (x.astype(np.float32) / y[:, None]).astype(dtype)
    fn = lambda x, y: ops.cast(ops.div(ops.cast(x, DataType.Float), ops.unsqueeze(y, 1)), x.dtype)  # noqa: E731
    _, got, _ = on_emulated_gpu(fn, x, y)
    assert np.array_equal(got[0].view(np.uint16), want.view(np.uint16))
    assert np.array_equal(np.asarray(mlirfuse.jit(fn)(x, y)).view(np.uint16), want.view(np.uint16))


# -- transpose ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (32, 32), (33, 65), (64, 32), (100, 7)])
@pytest.mark.parametrize("misalign", [None, {0: 4}, {1: 8}], ids=["aligned", "input+4B", "output+8B"])
def test_transpose_squares_edges_and_variants(shape, misalign) -> None:
    c = check(lambda x: ops.permute(x, [1, 0]) * 2.0, randn(*shape), misalign=misalign)
    assert schedules(c) == ["transpose"]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64, np.int32, np.int64, np.bool_])
def test_transpose_of_every_dtype(dtype) -> None:
    c = check(lambda x: ops.permute(x, [1, 0]), randn(40, 70, dtype=dtype))
    assert schedules(c) == ["transpose"]


def test_transpose_with_batch_loops_and_operands_of_every_kind() -> None:
    """A batched permute (0, 2, 1) next to a contiguous input, a row and a column broadcast
    and a runtime scalar; a rotation (2, 0, 1); two inputs permuted alike."""
    x, y = randn(3, 20, 40), randn(3, 40, 20)
    c = check(lambda a, b, w, col, s: ops.permute(a, [0, 2, 1]) * b + w - col * s,
              x, y, randn(20), randn(3, 40, 1), 0.5)
    assert schedules(c) == ["transpose"]
    assert schedules(check(lambda a: ops.permute(a, [2, 0, 1]) + 1.0, randn(5, 6, 7))) == ["transpose"]
    assert schedules(check(lambda a, b: ops.permute(a, [1, 0]) - ops.permute(b, [1, 0]),
                           randn(37, 45), randn(37, 45))) == ["transpose"]


def test_transpose_with_random_numbers_matches_the_cpu_backend_bit_for_bit() -> None:
    """The body's loop indices (Philox's counter) follow the output's elements."""
    c = check(lambda a: ops.where(ops.rand_like(ops.permute(a, [1, 0]), seed=3) > 0.5, ops.permute(a, [1, 0]), 0.0),
              randn(48, 40))
    assert schedules(c) == ["transpose"]


# -- results through views, folded fills --------------------------------------------------------
def _gelu_bookend(x):
    n, h = x.shape
    t = x.reshape(8, n // 8, h)
    return (t * 0.5 * (ops.erf(t * 0.7071067811865476) + 1.0)).reshape(n, h)


def _transpose_bookend(x):
    a, b, c = x.shape
    return x.reshape(a, b * c).permute(1, 0).reshape(b, c, a) * 1.0


@pytest.mark.parametrize("fn,shape,kind", [(_gelu_bookend, (64, 48), "pointwise"),
                                           (_transpose_bookend, (24, 4, 8), "transpose")],
                         ids=["gelu_bookend", "transpose_bookend"])
def test_results_leaving_through_a_reshape_are_written_in_place(fn, shape, kind) -> None:
    """One kernel writes the output itself: no temporary, no copy kernel."""
    c = check(fn, randn(*shape))
    assert schedules(c) == [kind] and c.n_launches == 1 and "gpu.alloc" not in c.stages["gpu"]


def test_results_through_other_views_and_intermediates_read_twice() -> None:
    def fn(x):
        y = ops.exp(x) + 1.0
        return (y.reshape(-1), y.unsqueeze(0), (y * 2.0).reshape(x.shape[1], x.shape[0]), y.sum(-1),
                ops.broadcast_in_dim(x.sum(0), [1, 1, x.shape[1]], [2]))
    c = check(fn, randn(6, 10), reduction_size=10)
    # the column sum (its last blocks combining the partials) written straight into the
    # [1, 1, C] output, then y's chain, which writes y to both of its outputs
    assert schedules(c) == ["column reduction", "normalization (tile, tile, row, reduce, tile)"]


@pytest.mark.parametrize("fn", [lambda x: x.sum((0, 1)), lambda x: ops.max(x, [0, 1]),
                                lambda x: (x * x).sum((0, 1))], ids=["sum", "max", "sum_of_squares"])
@pytest.mark.parametrize("shape", [(2, 3, 64), (3, 50, 9), (7, 2, 3)])
def test_column_reductions_start_from_the_folded_fill(fn, shape) -> None:
    c = check(fn, randn(*shape), reduction_size=shape[0] * shape[1])
    assert schedules(c) == ["column reduction"]  # one launch: slices, then the last block's combine; no fill
    xi = randn(*shape, dtype=np.int32)
    check(lambda x: x.sum((0, 1)), xi)


@pytest.mark.parametrize("shape", [(2100, 64), (8300, 9)], ids=["vectors", "scalars"])
def test_column_reductions_of_many_slices(shape) -> None:
    """Rows enough for 33 slices: the last block's threads combine their slices in order, a
    vector a slice (slices 0, 8, .. 32 for the first row of threads). 9 columns: the scalar
    variant, 16 rows in flight a thread."""
    c = check(lambda x: x.sum(0), randn(*shape), reduction_size=shape[0])
    assert schedules(c) == ["column reduction"]
    from emulator_rules import MEMSETS

    assert MEMSETS == [1]  # the column block's counter, zeroed before the launch
    check(lambda x: ops.max(x, [0]), randn(*shape))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "input+4B"])
def test_column_reductions_over_columns_no_full_vector_divides_take_narrower_vectors(dtype, misalign) -> None:
    """BERT's vocabulary bias gradient, a sum over the rows of 30522 columns: vectors of 4
    float32 (8 bfloat16) never divide the rows, and the host took the scalar variant (H200,
    4096 rows, 187 us for 500 MB). A static column count caps the vector at the widest that
    divides it: vectors of 2; a misaligned input still takes the scalar variant."""
    x = randn(300, 102, dtype=dtype)
    c = check(lambda x: x.sum(0), x, misalign=misalign, reduction_size=300, dynamic=False)
    assert "ColumnReductionParams(vector=2," in c.stages["launch_params"]
    assert re.search(r"ld\.global(\.nc)?\.v2\.(f32|b32|u32)", c.ptx) if dtype is np.float32 else \
        re.search(r"ld\.global(\.nc)?\.(b32|u32)", c.ptx)


@pytest.mark.parametrize("shape", [(1, 6, 40), (1, 1, 9), (1, 3, 130)], ids=str)
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "input+4B"])
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_column_reductions_over_dims_of_extent_one_are_column_reductions(shape, misalign, dynamic) -> None:
    """A sum over a batch of one (GPT-2's position-embedding gradient at batch size 1): the
    reduced dims have extent 1, and the reduction was a naive launch after a fill ("not a
    reduction that keeps some loops"). It is a column reduction of one row: each input read
    at its column (or broadcast), the fill folded in, one launch."""
    x, w = randn(*shape), randn(shape[-1])
    c = check(lambda x, w: ((x * w).sum(0), ops.max(x, [0]), x * 2.0, (x * x).sum((0, 1))), x, w,
              misalign=misalign, dynamic=dynamic)
    assert "naive" not in c.stages["launch_params"], c.stages["launch_params"]
    assert "column reduction" in schedules(c)
    check(lambda x: x.sum(0), randn(*shape, dtype=np.int32), dynamic=dynamic)


@pytest.mark.parametrize("shape", [(4, 6, 40), (3, 5, 9), (2, 7, 130)], ids=str)
@pytest.mark.parametrize("misalign", [None, {1: 4}], ids=["aligned", "input1+4B"])
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_column_reductions_read_operands_broadcast_over_some_columns(shape, misalign, dynamic) -> None:
    """(x * w).sum(0) of [B, R, C] with w [C] (a per-channel weight over a batch sum): w is read
    at the column's last index (the columns are [R, C] flattened), h [R, 1] at its first, per
    column, not per row. These were naive launches (found by a randomized emulator sweep);
    also over a middle axis, a batch of column reductions."""
    x, w, h = randn(*shape), randn(shape[-1]), randn(shape[1], 1)
    c = check(lambda x, w, h: ((x * w).sum(0), (x * h).sum(0), ops.max(x * w + h, [0])), x, w, h,
              misalign=misalign, reduction_size=shape[0], dynamic=dynamic)
    assert schedules(c) == ["column reduction"] and c.n_launches == 1, c.stages["launch_params"]
    hb = randn(shape[0], 1, 1)  # per batch: read at the batch (leading), w at the column (trailing)
    c = check(lambda x, w, hb: ((x * w).sum(1), (x * hb).sum(1)), x, w, hb, misalign=misalign,
              reduction_size=shape[1], dynamic=dynamic)
    assert "naive" not in c.stages["launch_params"] and "column reduction" in schedules(c), c.stages["launch_params"]


@pytest.mark.parametrize("misalign", [None, {2: 4}], ids=["aligned", "input2+4B"])
def test_a_column_reduction_computing_a_prologue_of_many_inputs_has_fewer_rows_in_flight(misalign) -> None:
    """BERT's embedding LayerNorm backward: the sum of four gradients, and that sum times the
    normalized input, summed over the rows. The column reduction computes the sum (its
    prologue) at each element, so it loads five vectors a row, not two: 2 rows in flight a
    thread, not 4 (H200, float32 8x512x768: 30.7 -> 26.0 us)."""
    def fn(a, b, c, d, e):  # (the sum a result too, as the normalization's input in BERT)
        t = a + b + c + d
        return (t * e).sum((0, 1)), t.sum((0, 1)), t
    shape = (3, 70, 24)
    c = check(fn, *[randn(*shape) for _ in range(5)], misalign=misalign, reduction_size=210)
    assert schedules(c) == ["column reduction"] and c.n_launches == 1
    assert "unroll=2," in c.stages["launch_params"] and "computing its pointwise prologue" in c.stages["launch_params"]
    # two inputs a row (the prologue's one and the reduction's one): 4 rows in flight
    c = check(lambda a, e: ((a * 2.0) * e).sum((0, 1)), randn(*shape), randn(*shape), reduction_size=210)
    assert "unroll=4," in c.stages["launch_params"]


@pytest.mark.parametrize("shape", [(8, 4096), (8, 4098), (3, 4, 4096)], ids=str)
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "input+4B"])
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_column_reductions_over_few_static_rows_put_more_lanes_across(shape, misalign, dynamic, monkeypatch) -> None:
    """A sum over a batch of 8 (GPT-2's position-embedding gradient): with 8 rows of threads a
    thread had one row to sum (H200: [8, 512 * 768] float32 16.9 us, 8.6 with one row of 256
    lanes). Few static rows widen the block's lanes across the columns, up to one row of
    threads, while the column blocks stay two an SM (a device of one SM here): 4096 columns in
    4 blocks of 256 lanes' vectors (32 blocks of 32 lanes with dynamic rows), 4098 columns in
    blocks of 256 vectors of 2 (of dynamic extents, or a misaligned input: the scalar variant,
    256 scalars)."""
    from mlirfuse.lowering.gpu import heuristics as S

    heuristic = S.column_reduction_heuristic
    monkeypatch.setattr(S, "column_reduction_heuristic", lambda columns, rows, element_bytes, device, *rest:
                        heuristic(columns, rows, element_bytes, S.DeviceProperties(sm_count=1), *rest))
    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", "off")
    rows = shape[:-1]
    fn = lambda a, b: (lambda y: (y, y.sum(tuple(range(len(rows))))))(a + b)  # noqa: E731
    c = check(fn, randn(*shape), randn(*shape), misalign=misalign, reduction_size=int(np.prod(rows)),
              dynamic=dynamic)
    assert schedules(c) == ["column reduction"] and c.n_launches == 1
    from gpu_emulator import LAUNCHED

    lanes = 32 if dynamic else 256
    assert f"block_x={lanes}, block_y={256 // lanes}," in c.stages["launch_params"]
    # a static 4098 columns: vectors of 2; of dynamic extents, the vector variant's check fails
    vector = 1 if misalign else 4 if shape[-1] % 4 == 0 else 1 if dynamic else 2
    assert LAUNCHED == [((-(-shape[-1] // (lanes * vector)), 1, 1), (256, 1, 1))]
    from emulator_rules import MEMSETS

    assert MEMSETS == []  # one slice: each block writes its columns' sums, no workspace or counters


@pytest.mark.parametrize("shape, misalign, grid, memsets", [
    ((8, 512, 64), None, 16, []),  # 8 lanes: 2 column blocks a batch, one slice
    ((8, 512, 64), {0: 4}, 16, []),  # misaligned: the scalar variant of 32 lanes (2 column blocks)
    ((8, 256, 64), None, 8, []),  # too few rows for 32 rows of threads: 32 lanes
    ((2, 1024, 8), None, 4, [2]),  # 8 lanes would still take 2 slices: 32 lanes, 2 slices
], ids=str)
def test_a_batch_of_column_reductions_takes_fewer_lanes_where_they_make_one_slice(
        shape, misalign, grid, memsets, monkeypatch) -> None:
    """x.sum(1) of [B, R, C] of dynamic extents: the kernel has a second geometry of 8 lanes
    across (32 rows of threads), which the host takes where its column blocks make one slice
    (no workspace, counters or memset; H200, float32 [64, 1024, 256]: 19.7 -> 17.3 us), the
    vector variant is aligned and every row of threads has 16 rows. Here a device of one SM
    (slices aim for 4 blocks)."""
    from emulator_rules import MEMSETS
    from gpu_emulator import LAUNCHED
    from mlirfuse.lowering.gpu import heuristics as S

    heuristic = S.column_reduction_heuristic
    monkeypatch.setattr(S, "column_reduction_heuristic", lambda columns, rows, element_bytes, device, *rest:
                        heuristic(columns, rows, element_bytes, S.DeviceProperties(sm_count=1), *rest))
    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", "off")
    c = check(lambda x: x.sum(1), randn(*shape), misalign=misalign, reduction_size=shape[1])
    assert schedules(c) == ["column reduction"]
    assert "block_x=32, block_y=8," in c.stages["launch_params"] and "narrow_block_x=8" in c.stages["launch_params"]
    assert LAUNCHED == [((grid, 1, 1), (256, 1, 1))] and MEMSETS == memsets


@pytest.mark.parametrize("shape, grid", [
    ((4096, 4096), 512),  # 32 column blocks: 16 slices (17, the nearest, made 544 blocks: 16 past a wave)
    ((4096, 768), 192),  # 6 column blocks: 32 slices, each row of threads 16 rows (the fewest)
    ((4096, 8448), 528),  # 66 column blocks: 8 slices
    ((8192, 35840), 560),  # 280 column blocks: 2 slices (1 would leave half the wave idle)
], ids=str)
def test_column_slices_stay_within_a_wave_where_that_keeps_it_full(shape, grid) -> None:
    """The slices of a column reduction aim for `target_blocks` (4 blocks of 256 an SM on the
    H200's 132 SMs: 528, what the 64-register cap lets an SM hold). The nearest multiple of
    the column blocks could pass it: 32 column blocks (4096 float32 columns) took 17 slices,
    544 blocks, 16 of them a second wave (H200, session 74: x.sum((0, 1)) of [16, 512, 4096]
    49.4 us, 46.1 with the cap lifted, which let 5 blocks an SM hold them; Inductor 43.4).
    Rounded down where that keeps at least 7/8 of the target: 16 slices, 512 blocks. The
    host's geometry alone (the kernels not run: sizes too large to emulate)."""
    from gpu_emulator import LAUNCHED

    x = np.zeros(shape, np.float32)
    c = mlirfuse.jit(lambda x: x.sum(0)).compile(x, backend="gpu", arch="sm_90")
    assert schedules(c) == ["column reduction"] and "target_blocks=528," in c.stages["launch_params"]
    emulate(c.stages["gpu"], [x], [np.empty(shape[1:], np.float32)], kernels=False)
    assert LAUNCHED == [((grid, 1, 1), (256, 1, 1))]


NARROW_BODIES = {  # name -> (function of x [B, R, C] and an operand, the operand's shape given x's)
    "times a column weight": (lambda x, w: (x * w).sum(1), lambda b, r, c: (c,)),
    "max less a batch's means": (lambda x, m: ops.max(x - ops.unsqueeze(m, 1), [1]), lambda b, r, c: (b, c)),
    "sum and max, an epilogue": (lambda x, y: (ops.sum(x * x, [1]) * 0.5 + 1.0, ops.max(x + y, [1])),
                                 lambda b, r, c: (b, r, c)),
    "a body of two inputs": (lambda x, y: ops.exp(x * 0.1 + y).sum(1), lambda b, r, c: (b, r, c)),
}


@pytest.mark.parametrize("shape, grid", [((8, 512, 64), 16), ((8, 256, 64), 8)], ids=["8 lanes", "32 lanes"])
@pytest.mark.parametrize("body", list(NARROW_BODIES))
def test_either_geometry_of_a_batch_of_column_reductions_computes_its_body(body, shape, grid, monkeypatch) -> None:
    """The narrow geometry (8 lanes, one slice) and the wide one on the same bodies: column
    weights, operands read at the output's index, several outputs and an epilogue, two
    inputs; as the CPU backend (a device of one SM)."""
    from gpu_emulator import LAUNCHED
    from mlirfuse.lowering.gpu import heuristics as S

    heuristic = S.column_reduction_heuristic
    monkeypatch.setattr(S, "column_reduction_heuristic", lambda columns, rows, element_bytes, device, *rest:
                        heuristic(columns, rows, element_bytes, S.DeviceProperties(sm_count=1), *rest))
    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", "off")
    fn, operand = NARROW_BODIES[body]
    c = check(fn, randn(*shape), randn(*operand(*shape)), reduction_size=shape[1])
    assert schedules(c) == ["column reduction"] and "narrow_block_x=8" in c.stages["launch_params"]
    assert LAUNCHED == [((grid, 1, 1), (256, 1, 1))]


@pytest.mark.parametrize("shape", [(4, 64, 32), (3, 5, 9), (2, 1000, 3), (5, 7, 1)])
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "input+4B"])
def test_middle_axis_reductions_are_batched_column_reductions(shape, misalign) -> None:
    """x.sum(1) of [B, R, C]: a column reduction per outer index (the batch in the grid), not
    the naive path (a thread an output walking R rows: 6% of the copy bandwidth on the H100
    at 64x1024x256). Sums, maxima and a mean with a fused body, float32 and int32."""
    x = randn(*shape)
    c = check(lambda x: x.sum(1), x, misalign=misalign, reduction_size=shape[1])
    kind = "inner reduction" if shape[2] == 1 else "column reduction"  # C = 1: rows of [B, R]
    assert schedules(c) == [kind] * len(schedules(c)) and "naive" not in schedules(c)
    check(lambda x: (ops.max(x * x, [1]), (x * 2.0).mean(1)), x, reduction_size=shape[1])
    check(lambda x: x.sum(1), randn(*shape, dtype=np.int32))
    b, r, col = shape
    check(lambda x: x.sum((1, 2)), randn(b, r, 2, col), reduction_size=r * 2)  # two middle axes


def _gelu_backward(g, x):
    """tanh-GELU's backward as GPT-2's MLP gets it: an elementwise product of the gradient."""
    inner = 0.7978845608 * (x + 0.044715 * x * x * x)
    t = ops.tanh(inner)
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608 * (1.0 + 3 * 0.044715 * x * x))


@pytest.mark.parametrize("shape", [(70, 40), (2100, 64), (3, 50, 9), (5, 1, 24)], ids=str)
@pytest.mark.parametrize("misalign", [None, {1: 4}], ids=["aligned", "input1+4B"])
def test_a_column_reduction_computes_its_pointwise_producer(shape, misalign) -> None:
    """A bias gradient: y = gelu'(x) * g is a result and summed over its rows. The column
    reduction's threads compute y at each element they sum, write it, and sum it: one launch
    reading g and x once (the pointwise kernel wrote y, the column reduction read it back:
    GPT-2 f32's MLP, 50 us where the copy bound is 36, H200)."""
    rows = tuple(range(len(shape) - 1))
    c = check(lambda g, x: (lambda y: (y, y.sum(rows)))(_gelu_backward(g, x)), randn(*shape), randn(*shape),
              misalign=misalign, reduction_size=int(np.prod(shape[:-1])))
    assert schedules(c) == ["column reduction"] and c.n_launches == 1


@pytest.mark.parametrize("shape", [(2, 35, 40), (3, 7, 9)], ids=str)
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "input0+4B"])
def test_a_column_reduction_computes_a_producer_it_reads_through_a_reshape(shape, misalign) -> None:
    """GPT-2's MLP gradient as AOTAutograd gives it: y computed [B, S, H], returned and summed
    as its [B * S, H] view. The generic's loops are not the reduction's: it is computed at
    each element's place in memory."""
    def fn(g, x):
        y = ops.reshape(_gelu_backward(g, x), [g.shape[0] * g.shape[1], g.shape[2]])
        return y, y.sum(0)
    c = check(fn, randn(*shape), randn(*shape), misalign=misalign, reduction_size=shape[0] * shape[1])
    assert schedules(c) == ["column reduction"] and c.n_launches == 1

    def biased(g, x, b):  # a bias read at the element's place modulo its length
        y = ops.reshape(g * ops.tanh(x) + b, [g.shape[0] * g.shape[1], g.shape[2]])
        return y, y.sum(0)
    c = check(biased, randn(*shape), randn(*shape), randn(shape[-1]), misalign=misalign,
              reduction_size=shape[0] * shape[1])
    assert schedules(c) == ["column reduction"] and c.n_launches == 1

    def per_row(g, x, s, r):  # BERT's LayerNorm dx from a row's sums ([B, S]) and rstd ([B, S, 1])
        y = ops.reshape((g - ops.unsqueeze(s, 2) * x) * r, [g.shape[0] * g.shape[1], g.shape[2]])
        return y, y.sum(0)
    c = check(per_row, randn(*shape), randn(*shape), randn(*shape[:2]), randn(*shape[:2], 1), misalign=misalign,
              reduction_size=shape[0] * shape[1])
    assert schedules(c) == ["column reduction"] and c.n_launches == 1


@pytest.mark.parametrize("shape", [(2, 3, 5, 8), (2, 2, 3, 6), (1, 4, 33, 16)], ids=str)
def test_a_column_reduction_computes_a_head_merge(shape) -> None:
    """BERT's attention output gradient: [B, H, S, D] permuted to [B, S, H, D], reshaped to
    [B * S, H * D] for the matmul and summed over rows for the bias. The permuted input is
    read at the element's indices (vectors along D where D allows: 6 does not)."""
    def fn(x):
        b, h, s, d = x.shape
        y = ops.reshape(ops.permute(x, [0, 2, 1, 3]), [b * s, h * d])
        return y, y.sum(0)
    c = check(fn, randn(*shape), reduction_size=shape[0] * shape[2])
    assert schedules(c) == ["column reduction"] and c.n_launches == 1


def test_a_column_reduction_computes_a_bfloat16_producer_with_row_and_column_operands() -> None:
    """Under autocast: the gradient computed in float32 from a bias (read per column), a
    per-row scale and a 0-d scalar, written as bfloat16; its bias gradient sums the bfloat16
    values widened (as AOTAutograd's graph has it); a second output of the producer (its
    float32 value) is written by the same threads."""
    def fn(g, x, b, r, s):
        y = ops.cast((ops.cast(g, DataType.Float) + b) * r * s + x, DataType.BFloat16)
        return y, ops.cast(y, DataType.Float).sum((0, 1)), ops.cast(g, DataType.Float) * s
    shape = (2, 7, 48)
    c = check(fn, randn(*shape, dtype=ml_dtypes.bfloat16), randn(*shape), randn(48), randn(2, 7, 1),
              np.float32(0.5), reduction_size=14)
    assert schedules(c) == ["column reduction"] and c.n_launches == 1


@pytest.mark.parametrize("shape", [(4, 6, 40), (3, 50, 9), (2, 2100, 16)], ids=str)
def test_a_column_reduction_computes_its_pointwise_epilogue(shape) -> None:
    """Autocast's bias gradients: the float32 column sums rounded to bfloat16 and widened back
    for the float32 parameter; a second sum's square root. The last block of each column
    block computes them where it writes the sums: no launch of their own. With the middle
    axis summed (x.sum(1) of [B, R, C]), the batch of column reductions too."""
    def fn(g):
        s, q = ops.cast(g, DataType.Float).sum((0, 1)), (ops.cast(g, DataType.Float) ** 2).sum((0, 1))
        return ops.cast(ops.cast(s, DataType.BFloat16), DataType.Float), ops.sqrt(q) * 2.0
    x = randn(*shape, dtype=ml_dtypes.bfloat16)
    c = check(fn, x, reduction_size=shape[0] * shape[1])
    assert schedules(c) == ["column reduction"] and c.n_launches == 1
    c = check(lambda g: ops.cast(ops.cast(ops.cast(g, DataType.Float).sum(1), DataType.BFloat16), DataType.Float),
              x, reduction_size=shape[1])
    assert schedules(c) == ["column reduction"] and c.n_launches == 1


@pytest.mark.parametrize("f32_too", [False, True], ids=["cast", "cast+f32"])
def test_a_normalization_writes_the_cast_of_its_reshaped_output(f32_too) -> None:
    """Autocast's residual LayerNorm: the float32 output viewed as [tokens, hidden] and cast to
    bfloat16 for the next matmul (and, in some layers, also returned in float32). The cast is
    computed before the view, in the normalization's kernel: no float32 temporary written and
    read back by a kernel of its own (H200, GPT-2: 2 launches, 57% of the copy bandwidth)."""
    def fn(x, r, w, b):
        h = x + r
        m = h.mean(-1, keepdim=True)
        v = ((h - m) * (h - m)).mean(-1, keepdim=True)
        y = ops.reshape((h - m) * ops.rsqrt(v + 1e-5) * w + b, [x.shape[0] * x.shape[1], x.shape[2]])
        return (ops.cast(y, DataType.BFloat16), y) if f32_too else ops.cast(y, DataType.BFloat16)
    c = check(fn, randn(2, 5, 64), randn(2, 5, 64), randn(64), randn(64), reduction_size=64)
    assert schedules(c) == [s for s in schedules(c) if s.startswith("normalization")] and c.n_launches == 1
    assert "gpu.alloc" not in c.stages["gpu"]


def test_an_epilogue_reading_the_producer_elsewhere_is_not_in_the_kernel() -> None:
    """Found in review: the sums plus y's last row read at other columns (a gather, or one
    element). A column block's last block would run that epilogue while other column blocks
    still compute y: the epilogue stays a kernel of its own (outputs start as NaN here, so a
    read before the write shows)."""
    g, x = randn(64, 512), randn(64, 512)
    rev = np.arange(511, -1, -1).astype(np.int64)

    def produce(g, x):  # costly enough not to be recomputed where it is gathered
        return g * ops.tanh(x) * ops.exp(ops.sin(x)) / (1.0 + ops.erf(x) * ops.erf(x))
    for fn in (lambda g, x, i: (lambda y: (y, y.sum(0) + I.index_select(y[-1], i, 0)))(produce(g, x)),
               lambda g, x, i: (lambda y: (y, y.sum(0) * y[-1, -1]))(produce(g, x))):
        f = mlirfuse.jit(fn)
        want = f(g, x, rev)
        c = f.compile(g, x, rev, backend="gpu", arch="sm_90")
        got = emulate(c.stages["gpu"], [g, x, rev], [np.full_like(w, np.nan) for w in want])
        for k, (a, w) in enumerate(zip(got, want)):
            assert_close(a, w, f"output {k}", 64)


def test_a_producer_reading_a_0d_tensor() -> None:
    """Found in review: y = g * s with s a 0-d tensor failed to compile (a 0-d buffer
    collapsed to one dim)."""
    g, s = randn(40, 24), np.array(0.5, np.float32)
    for fn in (lambda g, s: (lambda y: (y, y.sum(0)))(g * s),
               lambda g, s: (lambda y: (y, y.sum(0)))(ops.reshape(g * s, [10, 96]))):
        c = check(fn, g, s, reduction_size=40)
        assert schedules(c) == ["column reduction"]


def test_a_concatenation_summed_stays_a_kernel() -> None:
    """A producer whose body loads by itself (a cat's sides, as GPT-2's query, key and value
    gradients before the bias sum) keeps its own kernel: the column kernel could not issue
    those loads ahead (slower fused on the H200)."""
    c = check(lambda a, b: (lambda y: (y, y.sum(0)))(ops.cat([a, b * 2.0], -1)), randn(40, 8), randn(40, 24),
              reduction_size=40)
    assert schedules(c) == ["pointwise", "column reduction"]


def test_a_producer_read_otherwise_than_at_the_row_stays_a_kernel() -> None:
    """The column sum reads y transposed against its own rows (y.T's columns): y is written
    by its own kernel first, as before."""
    c = check(lambda g, x: (lambda y: (y, (y.T * x).sum(0)))(g * 2.0), randn(16, 16), randn(16, 16),
              reduction_size=16)
    assert "pointwise" in schedules(c) or "transpose" in schedules(c)


@pytest.mark.parametrize("shape", [(4, 8, 5, 6), (3, 16, 2, 33), (2, 3, 70, 1)], ids=str)
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "input0+4B"])
def test_reductions_around_a_kept_axis_split_in_two(shape, misalign) -> None:
    """BatchNorm's statistics and gradients, sums over (0, 2, 3) of [N, C, H, W] keeping C: no
    schedule reads them in one kernel (they ran naive, a thread a channel walking N * H * W
    elements). gpu-split-reductions makes them an inner reduction over H * W into partials
    [N, C], then a column reduction of those; the body (BatchNorm backward's per-channel
    operands) and several outputs, maxima and integers too."""
    x, g = randn(*shape), randn(*shape)
    mean, inv = randn(1, shape[1], 1, 1), randn(1, shape[1], 1, 1)
    rows = shape[0] * shape[2] * shape[3]
    axes = (0, 2, 3)
    c = check(lambda t: t.sum(axes), x, misalign=misalign, reduction_size=rows)
    assert schedules(c) == ["inner reduction", "column reduction"]
    c = check(lambda d, t, m, s: ((d * (t - m) * s).sum(axes), d.sum(axes, keepdim=True), ops.max(t, list(axes))),
              g, x, mean, inv, misalign=misalign, reduction_size=rows)
    # (W = 1: the per-channel operands' unit dims meet a reduced unit loop, which the inner
    # reduction's matcher does not take: naive, as before)
    assert "naive" not in schedules(c) or shape[3] == 1
    check(lambda t: t.sum(axes), randn(*shape, dtype=np.int32))
    check(lambda t: ops.cast(t, DataType.Float).mean((0, 2)), randn(shape[0], shape[1], 7, dtype=ml_dtypes.bfloat16),
          reduction_size=shape[0] * 7)


@pytest.mark.parametrize("shape,axes", [
    ((2, 3, 4, 5, 6), (0, 2, 4)), ((7, 5, 3, 3, 20), (0, 2, 4)), ((2, 8, 33, 8), (0, 2)), ((33, 4, 7, 5, 4), (1, 3)),
    ((16, 5, 3, 3, 3), (0, 1, 3)), ((3, 40, 5, 24), (0, 2)), ((16, 2, 8, 1), (0, 2)), ((1, 33, 4, 4), (1, 3)),
    ((7, 256, 1, 7), (0, 3))], ids=str)
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "input0+4B"])
def test_reductions_over_any_axes_split_until_scheduled(shape, axes, misalign) -> None:
    """Reduced axes around kept ones, wherever the kept ones are: the innermost run of reduced
    axes first (an inner reduction where it is the last, a batched column reduction where kept
    axes follow: x.sum((0, 2)) of [A, B, C, D]), then the others, split again where they still
    sit around kept ones. They ran naive, a thread an output walking every reduced element;
    x.sum((0, 2, 4)) of a 5-d x failed to compile (found by random programs on the emulator:
    its partials [N0, K1, N2, K3] summed over (0, 2) naive). Unit dims among the loops split
    with partials computed naive."""
    n = int(np.prod([shape[a] for a in axes]))
    c = check(lambda t: (t.sum(axes), ops.max(t, list(axes))), randn(*shape), misalign=misalign, reduction_size=n)
    assert "naive" not in schedules(c) or 1 in shape, schedules(c)
    if misalign is None:
        check(lambda t: t.sum(axes, keepdim=True), randn(*shape, dtype=np.int32))


def test_several_reductions_start_from_their_folded_fills() -> None:
    """Four outputs' fills, each folded into its reduction past the others: no fill kernel."""
    c = check(lambda x: (x.sum((0, 1)), ops.max(x * x, [0, 1]), x.sum(-1), (x * 2.0).sum(-1)),
              randn(3, 5, 40), reduction_size=15)
    assert "pointwise" not in schedules(c)


def test_pointwise_siblings_reading_one_input_are_one_kernel() -> None:
    """exp(x) and sin(x) * y (two generics after elementwise fusion) merged: the launches
    match the segmenter's plan of one kernel."""
    c = check(lambda x, y: (ops.exp(x), ops.sin(x) * y, x * 2.0), randn(9, 40), randn(9, 40))
    assert schedules(c) == ["pointwise"] and c.n_launches == c.n_kernels == 1


@pytest.mark.parametrize("misalign", [None, {1: 4}], ids=["aligned", "input1+4B"])
def test_independent_pointwise_kernels_run_in_one_packed_launch(misalign) -> None:
    """Autocast's weight casts: one cast per weight, each its own shape (an empty one, odd
    sizes, one too small for a full block) in one launch, each kernel on its own range of
    blocks with its own variant (a misaligned input takes the scalar one)."""
    weights = [randn(64, 48), randn(33, 7), randn(0, 5), randn(5), randn(300, 41)]
    c = check(lambda *w: tuple(ops.cast(x, DataType.BFloat16) for x in w), *weights, misalign=misalign)
    assert schedules(c) == ["pointwise"] and c.n_launches == 1
    assert "5 kernels packed in one launch" in c.stages["launch_params"]


def test_packed_launches_keep_within_the_kernel_parameter_space() -> None:
    """40 independent casts of 2-d weights (an optimizer step's 28 parameter updates took 9 KB)
    packed: each packed launch takes at most 4 KB of kernel parameters (PTX ISA 8.0 allows 4352
    bytes; ptxas refused the whole region before), so they are two launches, not one."""
    weights = [randn(4 + k, 3) for k in range(40)]
    c = check(lambda *w: tuple(ops.cast(x, DataType.BFloat16) for x in w), *weights)
    assert c.n_launches == 2 and "kernels packed in one launch" in c.stages["launch_params"]


def test_a_packed_kernel_reading_a_dynamic_reshape_keeps_its_shape_stores() -> None:
    """z viewed as [rows * cols] (a memref.reshape whose shape the host stores into a buffer)
    packed with x * 2: the kernel moving up to join the other launch takes the reshape along,
    and must not pass the stores of its shape (found in review: the packed kernel read the
    shape buffer before it was written)."""
    c = check(lambda x, z: (x * 2.0, ops.reshape(z, [z.shape[0] * z.shape[1]]) * 3.0), randn(8, 16), randn(6, 5))
    assert c.n_launches == 1 and "2 kernels packed in one launch" in c.stages["launch_params"]


def test_packed_kernels_of_different_block_sizes_and_broadcasts() -> None:
    """Kernels whose heuristics chose different blocks (a small bf16 tensor, a large float32
    one with a row broadcast) packed: each runs on the threads it was launched with."""
    x, row, small = randn(257, 130), randn(130), randn(3, dtype=ml_dtypes.bfloat16)
    c = check(lambda a, r, s: (a * r + 1.0, ops.cast(s, DataType.Float) * 2.0), x, row, small)
    assert c.n_launches == 1


def test_a_kernel_reading_what_another_writes_is_not_packed_with_it() -> None:
    """y = x * w is a result and u + y reads it broadcast along rows (so neither elementwise
    fusion nor the producer-consumer merge joins them): packed together, blocks of the sum
    could read y before it is written. The cast of an unrelated z packs with one of them."""
    c = check(lambda x, w, u, z: (lambda y: (y, u + y, ops.cast(z, DataType.Half)))(x * w),
              randn(33), randn(33), randn(70, 33), randn(20, 3))
    assert c.n_launches == 2 and "2 kernels packed in one launch" in c.stages["launch_params"]


def test_a_pointwise_consumer_merges_with_its_producer() -> None:
    """y = x * w is a result and its bfloat16 cast another: one kernel writes both."""
    c = check(lambda x, w: (lambda y: (y, ops.cast(y, DataType.BFloat16)))(x * w), randn(70, 33), randn(70, 33))
    assert schedules(c) == ["pointwise"] and c.n_launches == 1


def test_column_reduction_with_per_row_operands() -> None:
    """RMSNorm's weight gradient, sum over rows of g * x * rstd[row]: rstd is read once per
    row (it used to be broadcast to a full tensor first)."""
    rng = np.random.default_rng(6)
    g, x = rng.standard_normal((3, 50, 40)).astype(np.float32), rng.standard_normal((3, 50, 40)).astype(np.float32)
    rstd = rng.random((3, 50, 1)).astype(np.float32)
    c = check(lambda a, b, r: ((a * b * r).sum((0, 1)), a * r), g, x, rstd, reduction_size=150)
    assert schedules(c) == ["column reduction", "pointwise"]
    assert c.stages["gpu"].count("gpu.alloc ") == 2  # the workspace and its counters: no broadcast rstd written


# -- the other schedules --------------------------------------------------------------------------
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "misaligned"])
def test_pointwise_with_broadcasts(misalign) -> None:
    c = check(lambda x, row, col: (x + row) * col, randn(7, 3, 16), randn(16), randn(7, 1, 1), misalign=misalign)
    assert schedules(c) == ["pointwise"]


@pytest.mark.parametrize("fn", [lambda t: t.sum(-1), lambda t: ops.max(t, [-1])], ids=["sum", "max"])
@pytest.mark.parametrize("row", [2, 17, 100, 600])
def test_inner_reductions_across_tiers(fn, row) -> None:
    c = check(fn, randn(5, row), reduction_size=row)
    assert schedules(c) == ["inner reduction"]


@pytest.mark.parametrize("fn,kind", [(lambda t: (t * 2.0).sum(-1), "sum"), (lambda t: ops.max(t, [-1]), "max"),
                                     (lambda t: t.sum(-1, keepdim=True) + 1.0, "sum-keepdim-then-pointwise"),
                                     (lambda t: ops.sum(t * t), "full-sum-of-squares")],
                         ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("shape,misalign", [((3, 5000), None), ((2, 4099), None), ((3, 5000), {0: 4}),
                                            ((1, 6000), None)])
def test_few_long_rows_are_cut_into_chunks(fn, kind, shape, misalign, monkeypatch) -> None:
    """Few rows of a whole block each: chunks of a row run in separate blocks, and each row's
    last block combines the partials in chunk order, in the same launch (the chunk size made
    small here, so that the emulator runs rows of thousands of elements as several chunks)."""
    from dataclasses import replace

    from mlirfuse.lowering.gpu import heuristics as S

    heuristic = S.inner_reduction_heuristic
    monkeypatch.setattr(S, "inner_reduction_heuristic",
                        lambda *a, **k: replace(heuristic(*a, **k), min_chunk=1024))
    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", "off")
    full = kind.startswith("full")  # one row of every element (positive terms: no cancellation)
    c = check(fn, randn(*shape), misalign=misalign, reduction_size=shape[1] * (shape[0] if full else 1))
    assert "inner reduction" in schedules(c) and c.n_launches == schedules(c).count("inner reduction")
    assert "the last block of each row combines its partials in chunk order" in c.stages["launch_params"]


@pytest.mark.parametrize("shapes", [((4, 6, 40), (1, 6, 40)), ((4, 6, 40), (4, 1, 40)), ((4, 6, 40), (1, 1, 40)),
                                    ((3, 5, 7, 33), (5, 1, 33)), ((2, 3, 130), (1, 3, 1))],
                         ids=["over-batch", "over-seq", "over-both", "middle-of-three", "row-invariant"])
@pytest.mark.parametrize("misalign", [None, {1: 4}], ids=["aligned", "broadcast+4B"])
def test_inner_reduction_reading_a_broadcast_row(shapes, misalign) -> None:
    """A reduction over the last axis of `x + p` where p is broadcast over some leading axes
    (GPT-2's token + position embeddings, [B, S, H] + [1, S, H]): p's row is picked by the
    loops it has, in the same kernel (it ran one thread an element)."""
    x_shape, p_shape = shapes

    def fn(x, p):
        y = x + p
        return (y * y).sum(-1), ops.max(y, [-1])

    c = check(fn, randn(*x_shape), randn(*p_shape), misalign=misalign, reduction_size=x_shape[-1])
    assert "naive" not in c.stages["launch_params"], c.stages["launch_params"]
    assert any(s.startswith(("inner reduction", "normalization")) for s in schedules(c))


@pytest.mark.parametrize("p_shape", [(1, 6, 40), (4, 1, 40), (1, 1, 40)], ids=["over-batch", "over-seq", "over-both"])
@pytest.mark.parametrize("misalign", [None, {1: 4}], ids=["aligned", "broadcast+4B"])
def test_column_reduction_reading_a_broadcast_row(p_shape, misalign) -> None:
    """GPT-2's LayerNorm weight and bias gradients over (batch, seq) where the normalized
    input is token + position embeddings ([B, S, H] + [1, S, H]) and a per-row rstd: the
    broadcast operand's row is picked by the reduced loops it has (it ran one thread an element)."""
    def fn(g, x, p, rstd):
        return (g * ((x + p) * rstd)).sum((0, 1)), g.sum((0, 1))

    x_shape = (4, 6, 40)
    c = check(fn, randn(*x_shape), randn(*x_shape), randn(*p_shape), randn(4, 6, 1), misalign=misalign,
              reduction_size=24)
    assert "naive" not in c.stages["launch_params"], c.stages["launch_params"]
    assert "column reduction" in schedules(c)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("inner", [64, 5], ids=["inner-64", "inner-5"])
def test_pointwise_on_strided_inputs(dtype, inner) -> None:
    """Attention's heads are permuted views ([B, S, heads, d] seen as [B, heads, S, d]); a
    pointwise op on them (a rotary embedding, a scale, a mask) reads them element by element
    at their strides, in the vectorized kernel with the contiguous operands (it ran one
    thread an element: 'operand 0 ... is not contiguous')."""
    q = randn(2, 6, 3, inner, dtype=dtype).transpose(0, 2, 1, 3)  # a strided view
    k = randn(2, 6, 4, inner, dtype=dtype)[:, :, 1:, :].transpose(0, 2, 1, 3)  # sliced, then permuted
    cos = randn(1, 1, 6, inner, dtype=dtype)

    kt = randn(2, 3, inner, 6, dtype=dtype)  # contiguous, read transposed beside them

    def fn(q, k, cos, kt):
        return q * cos + k, ops.exp(q) * ops.permute(kt, [0, 1, 3, 2])

    c = check(fn, q, k, cos, kt)
    # q is a permuted dense array: read as that dense array, its heads' dim permuted inside
    # (the innermost dim is the same: still one vectorized pointwise kernel); the sliced k is
    # read at its strides.
    assert not q.flags.c_contiguous and c.fusion.specs[0].order == (0, 2, 1, 3)
    assert c.fusion.specs[1].contiguous is False and c.fusion.specs[1].order is None
    assert schedules(c) == ["pointwise"], c.stages["launch_params"]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("seq", [64, 37], ids=["seq-64", "seq-37"])
def test_permuted_dense_input_read_transposed_is_a_transpose_kernel(dtype, seq) -> None:
    """BERT's keys: a matmul's [B, S, H, D] output seen as [B, H, S, D], then transposed to
    [B, H, D, S] and scaled in float32. The argument is a permutation of a dense layout, so
    the kernel reads the dense tensor with the innermost dim changed: a transpose kernel
    through shared memory (it was a pointwise kernel reading the view element by element,
    uncoalesced: 19.5 us against Inductor's 4.6 us on the H200 at [8, 512, 12, 64])."""
    k = randn(2, seq, 3, 64, dtype=dtype).transpose(0, 2, 1, 3)  # [B, H, S, D], not contiguous

    def fn(k):
        return ops.permute(ops.cast(k, DataType.Float), [0, 1, 3, 2]) * 0.125

    c = check(fn, k)
    assert c.fusion.specs[0].order == (0, 2, 1, 3)
    assert schedules(c) == ["transpose"], c.stages["launch_params"]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float64], ids=["f32", "bf16", "f64"])
def test_a_transpose_kernel_packs_with_pointwise_kernels_of_its_block(dtype) -> None:
    """BERT's keys transposed and its values cast, independent: one launch where the
    transpose's block (shared memory, a barrier) is the pointwise kernel's, 256 threads (4
    float32 squares a block, 2 bfloat16 ones, 8 float64 ones)."""
    k = randn(2, 40, 3, 64, dtype=dtype).transpose(0, 2, 1, 3)
    v = randn(2, 40, 3, 64, dtype=dtype).transpose(0, 2, 1, 3)

    def fn(k, v):
        return ops.permute(ops.cast(k, DataType.Float), [0, 1, 3, 2]) * 0.125, ops.cast(v, DataType.Float)

    c = check(fn, k, v)
    assert c.n_launches == 1 and "2 kernels packed in one launch" in c.stages["launch_params"]
    assert "block=256" in c.stages["launch_params"]


def test_a_transpose_kernel_of_another_block_is_not_packed() -> None:
    """Four permuted float32 inputs: 2 squares a block (4 would not fit 48 KiB of shared
    memory), 128 threads; the pointwise kernel beside it keeps its own launch."""
    ks = [randn(2, 40, 3, 64).transpose(0, 2, 1, 3) for _ in range(4)]
    v = randn(2, 40, 3, 64)

    def fn(a, b, c, d, v):
        return ops.permute(a * b + c * d, [0, 1, 3, 2]), ops.exp(v)

    c = check(fn, *ks, v)
    assert sorted(schedules(c)) == ["pointwise", "transpose"], c.stages["launch_params"]
    assert "block=128, squares=2" in c.stages["launch_params"]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("shape", [(3, 37, 70), (2, 64, 96), (5, 8, 4)], ids=["ragged", "aligned", "one-square"])
def test_transposes_with_several_squares_a_block(shape, dtype) -> None:
    """Squares past the last (the last block's: 3 x 2 x 3 squares of 32 in 4-square blocks)
    stage the last square again and store nothing; ragged extents take the scalar variant,
    its loads clamped inside the extents."""
    x = randn(*shape, dtype=dtype)
    y = randn(shape[0], shape[2], shape[1], dtype=dtype)
    c = check(lambda x, y: ops.permute(x, [0, 2, 1]) * 2.0 + y, x, y)
    assert schedules(c) == ["transpose"], c.stages["launch_params"]


@pytest.mark.parametrize("p_shape", [(1, 6, 40), (4, 1, 40), (1, 6, 1)], ids=["tile-over-batch", "tile-over-seq",
                                                                       "row-over-batch"])
@pytest.mark.parametrize("row", [40, 3000], ids=["held", "looping"])
def test_normalization_reading_a_broadcast_tile(p_shape, row) -> None:
    """GPT-2's first LayerNorm normalizes token + position embeddings ([B, S, H] + [1, S, H]):
    one normalization kernel, the broadcast operand's row picked by the row loops it has
    (it was 9 launches: the sum written out, then each reduction its own kernel)."""
    def fn(x, p, w, b):
        y = x + p
        mean = y.mean(-1, keepdim=True)
        d = y - mean
        return d * ops.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * w + b, y

    p_shape = p_shape[:2] + (row if p_shape[2] != 1 else 1,)
    c = check(fn, randn(4, 6, row), randn(*p_shape), randn(row), randn(row), reduction_size=row)
    assert [s.split(" (")[0] for s in schedules(c)] == ["normalization"], c.stages["launch_params"]


def _embedding_layer_norm(wte, ids, pos, w, b):
    """GPT-2's first LayerNorm: embedding rows gathered in the kernel, plus position rows."""
    h = ops.index_select(wte, ids, 0) + pos
    x = ops.cast(h, DataType.Float)
    d = x - ops.mean(x, [1], keepdim=True)
    y = d * ops.rsqrt(ops.mean(d * d, [1], keepdim=True) + 1e-5) * ops.cast(w, DataType.Float)
    return ops.cast(y + ops.cast(b, DataType.Float), DataType.BFloat16), h


@pytest.mark.parametrize("misalign", [None, {0: 2}], ids=["aligned", "misaligned"])
def test_normalization_gathers_rows_a_vector_at_a_time(misalign) -> None:
    """The gathered rows' alignment is checked on the host, so the held kernel (the first)
    loads them as 16-byte vectors. Checked in the kernel, row by row, LLVM merged the vector
    branch into the scalar one: 2-byte loads. A misaligned table takes the kernels that
    check each row."""
    bf = ml_dtypes.bfloat16
    args = (randn(50, 64, dtype=bf), RNG.integers(0, 50, 24), randn(24, 64, dtype=bf), randn(64, dtype=bf),
            randn(64, dtype=bf))
    c = check(_embedding_layer_norm, *args, misalign=misalign, reduction_size=64)
    assert [s.split(" (")[0] for s in schedules(c)] == ["normalization"], c.stages["launch_params"]
    held = c.ptx.split(".entry")[1]
    assert "ld.global.b16" not in held and held.count("ld.global.v4") >= 8, held.count("ld.global.b16")


def _masked_mean(v, labels):
    """A cross-entropy's loss over kept labels: the count of labels not -100 and the sum of
    the kept values (two whole-tensor sums over the labels), then their quotient."""
    keep = labels != -100
    return ops.sum(ops.where(keep, v, 0.0)) / ops.cast(ops.sum(keep), DataType.Float)


def _labels(n: int) -> np.ndarray:
    labels = RNG.integers(0, 50, n)
    labels[RNG.random(n) < 0.3] = -100
    return labels


@pytest.mark.parametrize("fn,args,size", [
    (lambda x: ops.mean(x, [1]), (randn(50, 300),), 300),
    (lambda x, b: ops.rsqrt(ops.mean(x * x, [2], keepdim=True) + 1e-5) * b, (randn(3, 5, 40), randn(3, 5, 1)), 40),
    (lambda x: ops.sum(x, [0, 1]) / 7.0, (randn(9, 40),), 360),
    (lambda x: (lambda s: (s * 2.0, ops.exp(s * 0.01) + I.iota(x.shape[0], 0, 1, DataType.Float)))(ops.sum(x, [1])),
     (randn(33, 70),), 70),
    (lambda x, w: (lambda s: ops.sqrt(s + w * 0.0 + 1.0) * 3.0)(ops.sum(x * x, [0, 1])), (randn(21, 30), 2.5), 630),
    (_masked_mean, (randn(300), _labels(300)), 300),
], ids=["mean", "rms-keepdim-times-per-row", "whole-sum-divided", "two-results-and-iota", "whole-scalar-chain",
        "masked-mean"])
def test_a_reduction_computes_its_pointwise_epilogue(fn, args, size) -> None:
    """The pointwise work on a reduction's results (the division of a mean, rsqrt(mean + eps)
    times a per-row input, a loss sum divided by a count) runs in the reduction's kernel, by
    the thread writing each row's total: one launch. A cross-entropy's two whole-tensor
    sums over the labels (the count and the loss) are one kernel, its division their epilogue."""
    c = check(fn, *args, reduction_size=size)
    assert schedules(c) == ["inner reduction"], c.stages["launch_params"]
    assert "with its pointwise epilogue" in c.stages["launch_params"]


@pytest.mark.parametrize("fn", [
    lambda x, i: (lambda s: I.slice_dim(s, 0, 1, None) - I.slice_dim(s, 0, 0, -1))(ops.sum(x, [1])),
    lambda x, i: (lambda s: I.index_select(s, i, 0) * 2.0)(ops.sum(x, [1])),
], ids=["differences", "index-select"])
def test_pointwise_work_reading_other_rows_of_a_reduction_is_a_kernel_of_its_own(fn) -> None:
    """s[i + 1] - s[i] and s[index[i]] read row sums other than their own row's: the thread
    writing a row's total cannot compute them, so they stay a kernel after the reduction."""
    c = check(fn, randn(40, 30), RNG.integers(0, 40, 40), reduction_size=30)
    assert "inner reduction" in schedules(c) and len(schedules(c)) >= 2
    assert "epilogue" not in c.stages["launch_params"]


def test_inner_reduction_of_empty_rows() -> None:
    """Rows of no elements: one (empty) chunk each, the output its initial value."""
    c = check(lambda t: (t * 2.0).sum(-1), np.zeros((3, 0), np.float32))
    assert schedules(c) == ["inner reduction"]


@pytest.mark.parametrize("shape", [(0, 2, 2), (3, 0, 4), (2, 3, 0), (0, 0, 5)])
def test_middle_axis_sums_of_empty_tensors(shape) -> None:
    """A sum over the middle axis of a tensor with an empty batch (a random program: the host
    divided by the batch's zero blocks, which traps on the CPU running the host code), with
    no rows, or with no columns."""
    check(lambda t: ops.sum(t, -2, keepdim=True), np.zeros(shape, np.float32))


def test_bfloat16_softmax_divides_by_a_reciprocal() -> None:
    """linalg-reciprocal-divisors on the GPU path: one reciprocal per row instead of a
    division per element, each quotient within one ulp of the correctly rounded one."""
    from test_ops import _softmax, check_row_quotients

    x = randn(16, 300, dtype=ml_dtypes.bfloat16)
    compiled, got, _ = on_emulated_gpu(_softmax, x)
    check_row_quotients(got[0], x)
    # a reciprocal a row in each variant (held, looping in vectors, in scalars), not a
    # division an element (LLVM may duplicate the one after a loop)
    assert [e.count("div.rn.f32") <= 2 for e in compiled.ptx.split(".entry")[1:]] == [True] * 3


def _layer_norm(x, w, b):
    d = x - x.mean(-1, keepdim=True)
    return d * ops.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * w + b


@pytest.mark.parametrize("row,misalign", [(64, None), (101, None), (64, {0: 4})],
                         ids=["held", "looping-unaligned-row", "looping-misaligned"])
def test_normalization_held_and_looping_variants(row, misalign) -> None:
    c = check(_layer_norm, randn(3, row), randn(row), randn(row), misalign=misalign, reduction_size=row)
    assert schedules(c) == ["normalization (row, row, reduce, reduce, tile)"]
    check(lambda x: ops.softmax(x, -1), randn(2, row), reduction_size=row)


@pytest.mark.parametrize("row,dtype", [(96, np.float32), (80, np.float32), (768, ml_dtypes.bfloat16),
                                       (1000, np.float32)])
def test_held_rows_that_leave_slots_unused(row, dtype) -> None:
    """Rows of 96 float32 elements on 8 lanes of 4-vectors fill 3 of 4 slots (768 bfloat16 on
    32 lanes of 8 likewise; 80 fill 2 and part of a third; 1000 all four, the last in part):
    the unused slots' values (computed at the row's first column) are left out of the sums
    and not stored. The values are the CPU backend's, rows sharing blocks (5 rows) included.
    (Skipping those slots behind a branch the row's lanes take alike was tried, session 45:
    H200, LayerNorm(x + r) bf16 4096 x 768 5.33 -> 6.88 us, 8192 x 4096 50.0 -> 74.3 us; the
    branches keep the slots' loads and arithmetic from overlapping.)"""
    x, w, b = randn(5, row, dtype=dtype), randn(row, dtype=dtype), randn(row, dtype=dtype)
    c = check(_layer_norm, x, w, b, reduction_size=row)
    assert schedules(c)[0].startswith("normalization (row, row, reduce, ")
    check(lambda x: ops.softmax(x, -1), x, reduction_size=row)


def _variants(compiled) -> list[str]:
    """The normalization kernels' variants as launch_params describes them, in order."""
    lines = [line.split(": ", 1)[1] for line in compiled.stages["launch_params"].splitlines()
             if ": normalization" in line]
    first = lines[0].split("; ", 1)[1] if "; " in lines[0] else "rows held"
    return [first] + [line.split("normalization: ", 1)[1] for line in lines[1:]]


SHIFTED_HELD = "rows held, vectors from each row's first aligned element"
SCALAR_LOOPING = "the looping variant, for rows too long to hold or unaligned"
ONLINE = "; sums of exp(u - r) in the pass before"  # a looping softmax's


@pytest.mark.parametrize("row,dtype,first,misalign", [
    (101, np.float32, SHIFTED_HELD, None), (101, np.float32, SHIFTED_HELD, {0: 4}),
    (301, ml_dtypes.bfloat16, SHIFTED_HELD, None), (301, ml_dtypes.bfloat16, SHIFTED_HELD, {0: 4}),
    (16387, np.float32, "the looping variant in vectors from each row's first aligned element", None),
    (16387, np.float32, "the looping variant in vectors from each row's first aligned element", {0: 4}),
    (16388, np.float32, "the looping variant in vectors", None)])
def test_static_rows_of_any_length_are_read_in_vectors(row, dtype, first, misalign) -> None:
    """A row length known at compile time that is not a multiple of the vector (vocabulary
    rows: 30522, 50257) or too long to hold: vectors from each row's first aligned element,
    the few elements before and after them one to a lane (4 rows start misaligned in 4
    ways); rows too long to hold loop over chunks of vectors. Column vectors (the LayerNorm
    weights) are read an element at a time there; a misaligned input (+4 bytes) takes the
    looping variant an element at a time. Each row's sums stay within tolerance. (Rows too
    long to hold: softmax alone, the emulator's slowest case.)"""
    x, w, b = randn(4, row, dtype=dtype), randn(row, dtype=dtype), randn(row, dtype=dtype)
    # (softmax computes a bfloat16 row in float32, as torch does: summed online too)
    cases = ((_layer_norm, (x, w, b), ""), (lambda t: ops.softmax(t, -1), (x,), ONLINE))
    for fn, args, online in cases[1:] if row > 16384 else cases:
        c = check(fn, *args, misalign=misalign, reduction_size=row, dynamic=False)
        looping = [v + online if "looping" in v else v for v in (first, SCALAR_LOOPING)]
        assert _variants(c) == looping, c.stages["launch_params"]


@pytest.mark.parametrize("row", [301, 16387])
def test_shifted_rows_with_a_tile_broadcast_over_rows_and_iota(row) -> None:
    """A shifted row reading a tile broadcast over the batch (its rows start misaligned
    otherwise: read an element at a time) and the column index (cross-entropy's one-hot)."""
    def fn(x, p, label):
        y = x + p
        logp = y - ops.log(ops.exp(y - y.amax(-1, keepdim=True)).sum(-1, keepdim=True)) - y.amax(-1, keepdim=True)
        hot = I.iota(row) == label
        return ops.where(hot, logp, 0.0).sum(-1), ops.exp(logp)
    label = np.array([[0], [row - 1], [5], [row // 2]], np.int64).reshape(2, 2, 1)
    c = check(fn, randn(2, 2, row), randn(1, 2, row), label, reduction_size=row, dynamic=False)
    assert _variants(c)[0] != SCALAR_LOOPING, c.stages["launch_params"]


def _log_softmax_parts(x):
    """Cross-entropy's forward: log-softmax, its row maximum and log-sum-exp."""
    m = x.amax(-1, keepdim=True)
    lse = ops.log(ops.exp(x - m).sum(-1, keepdim=True))
    return x - m - lse, m, lse


def _global_loads(compiled) -> list[int]:
    return [len(re.findall(r"\bld\.global", entry)) for entry in compiled.ptx.split(".entry")[1:]]


def _hard_rows() -> np.ndarray:
    """Rows of 203 that a careless online sum gets wrong: all -inf, +inf and NaN elements,
    values to 3e4, -inf over most of the row, a maximum in the row's last chunk."""
    x = randn(8, 203)
    x[1] = -np.inf
    x[2, 7] = np.inf
    x[3, 100] = np.nan
    x[4] *= 1e4
    x[5, :150] = -np.inf
    x[6, 202] = 50.0
    return x


@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["vectors", "scalars"])
def test_looping_variant_sums_exp_against_a_running_maximum(misalign) -> None:
    """Rows too long to hold or unaligned (here 203 elements, a length known at run time)
    loop over chunks: the sum of exp(x - max) is accumulated in the max's pass against each
    thread's running maximum, rescaled as it grows, then to the row's maximum. Rows that a
    two-pass kernel gets right and a careless online one does not: all -inf (NaN, as
    torch), +inf and NaN elements, values to 3e4 (exp overflows without the rescaling),
    -inf over most of the row, a maximum in the row's last chunk; empty rows. A sum of exp(2x - max)
    rescales to a maximum that is not its own. Softmax's exp(x - max), also divided by the
    sum, is a tile op of its own: the sum's source. The looping kernels read the row one pass
    fewer than the same chain whose sum is not of exp(u - r) (multiplied by a scalar)."""
    x = _hard_rows()
    c = check(_log_softmax_parts, x, misalign=misalign, reduction_size=203)
    check(_log_softmax_parts, np.zeros((3, 0), np.float32))  # empty rows: max -inf, sum 0
    soft = check(lambda t: ops.softmax(t, -1), x, misalign=misalign, reduction_size=203)  # exp a tile op
    assert all(v.endswith(ONLINE) for v in _variants(soft)[1:]), soft.stages["launch_params"]
    assert all(v.endswith(ONLINE) for v in _variants(c)[1:]), c.stages["launch_params"]
    check(lambda t: ops.exp(2.0 * t - t.amax(-1, keepdim=True)).sum(-1), randn(5, 203), misalign=misalign,
          reduction_size=203)

    def scaled(t, k):
        m = t.amax(-1, keepdim=True)
        return t - m - ops.log((ops.exp(t - m) * k).sum(-1, keepdim=True))

    plain = check(scaled, x, 1.0, misalign=misalign, reduction_size=203)
    assert "sums of exp" not in plain.stages["launch_params"]
    online, two_pass = _global_loads(c), _global_loads(plain)
    assert online[0] <= two_pass[0] and all(a < b for a, b in zip(online[1:], two_pass[1:])), (online, two_pass)


@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["vectors", "scalars"])
def test_log_softmax_sums_exp_online_against_its_finite_maximum(misalign) -> None:
    """ops.log_softmax subtracts the row maximum taken as 0 where it is infinite, computed in
    the sum's body from the maximum (`where(isinf(m), 0, m)`): the sum is still accumulated
    in the maximum's pass, and rescaled at the end to that r computed from the row's
    maximum. It was a pass of its own (and a float32 tile) since log_softmax subtracts the
    maximum before the log of the sum: H200, the suite's cross-entropy 8192 x 32000 bf16,
    573 -> 952 us. Rows with -inf, +inf, NaN, large values, and a bf16 cross-entropy."""
    x = _hard_rows()
    c = check(lambda t: ops.log_softmax(t, -1), x, misalign=misalign, reduction_size=203)
    assert all(v.endswith(ONLINE) for v in _variants(c)[1:]), c.stages["launch_params"]

    def cross_entropy(logits, target):
        logp = ops.log_softmax(ops.cast(logits, DataType.Float), -1)
        picked = ops.take_along_axis(logp, ops.unsqueeze(target, 1), 1)
        return -(picked.sum() / logits.shape[0]), ops.cast(ops.exp(logp), DataType.BFloat16)
    target = RNG.integers(0, 203, 8).astype(np.int64)
    c = check(cross_entropy, randn(8, 203, dtype=ml_dtypes.bfloat16), target, misalign=misalign,
              reduction_size=203, dynamic=False)
    assert ONLINE in c.stages["launch_params"], c.stages["launch_params"]


_COPY_INTO_EXP = """    linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]} \
ins(%arg0 : memref<?x?xf32>) outs(%alloc_3 : memref<?x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
"""


@pytest.mark.parametrize("edit", ["written-twice", "captured-u"])
def test_online_sums_of_hand_edited_softmax_schedules(edit) -> None:
    """Schedules edited by hand (`compile(..., scheduled_ir=)`) that look like a softmax's
    sum of exp(u - max) but are not (both found by review): the exp tile's buffer written
    again (by a copy of x) before the sum reads it, so it sums x, and an exp(c - max) whose
    c is captured from outside the body (its clone never reached c: the compile aborted).
    Neither is summed online; each computes what the two passes compute."""
    f = mlirfuse.jit(lambda t: ops.softmax(t, -1))
    x = (RNG.random((6, 203)) + 0.5).astype(np.float32)
    text = f.compile(x, backend="gpu", arch="sm_90").stages["scheduled"]
    if edit == "written-twice":
        anchor = '    linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel"]} ins(%cst_0'
        text, want = text.replace(anchor, _COPY_INTO_EXP + anchor), x / x.sum(-1, keepdims=True)
    else:
        old = "      %0 = arith.subf %in, %in_4 : f32\n      %1 = math.exp %0 : f32"
        text, want = text.replace(old, "      %0 = arith.subf %cst_0, %in_4 : f32\n      %1 = math.exp %0 : f32"), \
            np.full_like(x, 1 / 203)
    assert text != f.compile(x, backend="gpu", arch="sm_90").stages["scheduled"]
    c = f.compile(x, backend="gpu", arch="sm_90", scheduled_ir=text)
    assert "sums of exp" not in c.stages["launch_params"]
    for misalign in (None, {0: 4}):
        assert_close(emulate(c.stages["gpu"], [x], [np.empty_like(x)], misalign)[0], want, edit, 203)


def test_chains_read_once_loop_over_rows_of_more_than_256_threads() -> None:
    """A chain the looping variant reads once (a cross-entropy's forward: the max and, summed
    online, the sum of exp; only row values out) loops over rows that would take more than
    256 threads held (5000 float32: 512 threads), in rows of 256 threads, more rows a block:
    it reads them once either way. Softmax, whose output is a last pass, stays held. A row
    length known at run time makes the same choice on the host."""
    x = randn(3, 5000)
    c = check(lambda t: _log_softmax_parts(t)[1:], x, reduction_size=5000, dynamic=False)
    assert _variants(c)[0] == "the looping variant in vectors" + ONLINE, c.stages["launch_params"]
    soft = check(lambda t: ops.softmax(t, -1), x, reduction_size=5000, dynamic=False)
    assert _variants(soft)[0] == "rows held", soft.stages["launch_params"]
    check(lambda t: _log_softmax_parts(t)[1:], x, reduction_size=5000)


INV_ROW = 1 / 64


def _layer_norm_backward(g, xhat, w, rstd):
    """LayerNorm's backward as the torch backend gets it from AOTAutograd (xhat and rstd
    saved by the forward): the row sums, the weight and bias gradients (column sums), dx."""
    gw = g * w
    s1, s2 = gw.sum(-1, keepdim=True), (gw * xhat).sum(-1, keepdim=True)
    dw, db = (g * xhat).sum((0, 1)), g.sum((0, 1))
    return (gw - s1 * INV_ROW - xhat * (s2 * INV_ROW)) * rstd, dw, db


def test_layer_norm_backward_is_one_normalization_kernel_and_one_column_reduction() -> None:
    """The chain spans the column sums between its row sums and dx (they read only inputs:
    they run before it): g * w and the row sums never reach memory; dw and db are one kernel
    reading g once."""
    rng = np.random.default_rng(5)
    g, x, w = (rng.standard_normal(s).astype(np.float32) for s in [(3, 4, 64), (3, 4, 64), (64,)])
    rstd = (1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)).astype(np.float32)
    xhat = ((x - x.mean(-1, keepdims=True)) * rstd).astype(np.float32)
    c = check(_layer_norm_backward, g, xhat, w, rstd, reduction_size=64)
    assert schedules(c) == ["column reduction",
                            "normalization (row, row, reduce, reduce, tile)"]  # g * w recomputed where used
    assert c.stages["gpu"].count("gpu.alloc ") == 3  # the column reduction's workspaces and counters only
    gw = g * w
    dx = (gw - gw.mean(-1, keepdims=True) - xhat * (gw * xhat).mean(-1, keepdims=True)) * rstd
    got = mlirfuse.jit(_layer_norm_backward)(g, xhat, w, rstd)
    for k, (a, b) in enumerate(zip(got, [dx, (g * xhat).sum((0, 1)), g.sum((0, 1))])):
        assert_close(a, b.astype(np.float32), f"output {k}", reduction_size=64)


def _layer_norm_backward_case(rows: int, row: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(g, xhat, w, rstd of [rows, row], the float64 dx, dw, db) for `_layer_norm_backward`
    at that row length."""
    rng = np.random.default_rng(rows * row)
    g, x = (rng.standard_normal((1, rows, row)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(row).astype(np.float32)
    rstd = (1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)).astype(np.float32)
    xhat = ((x - x.mean(-1, keepdims=True)) * rstd).astype(np.float32)
    gw = g.astype(np.float64) * w
    dx = (gw - gw.mean(-1, keepdims=True) - xhat * (gw * xhat).mean(-1, keepdims=True)) * rstd
    return [g, xhat, w, rstd], [dx, (g.astype(np.float64) * xhat).sum((0, 1)), g.astype(np.float64).sum((0, 1))]


@pytest.mark.parametrize("rows, row, blocks, groups", [(37, 64, 1, 1), (5, 768, 2, 1), (64, 96, 2, 1), (9, 2048, 4, 1),
                                                      (600, 64, 19, 1), (37, 64, 3, 6)])
def test_layer_norm_backward_sums_its_columns_in_the_normalization_kernel(monkeypatch, rows, row, blocks,
                                                                          groups) -> None:
    """With rows of a static length, held: the weight and bias gradients are summed in the
    normalization kernel, its blocks (at most the column reduction's `target_blocks`: 1 to 4
    here, so each loops over many row groups) accumulating the columns their threads hold,
    a block's row groups combined through shared memory into a row of partials, which a
    column reduction combines: dy and x_hat are read once. Row counts that leave the last
    block's last row groups empty, rows shorter than the slots (96 of 8 x 4 x 4), several
    slots (768, 2048); partials enough for the combining column reduction to cut them into
    slices (19 rows, a slice per row of threads: its workspace and counters, device memory,
    were host allocations in an scf.if on the host, which a memset on the H200 rejected).
    Where the grid is below `GROUPS_PER_BLOCK` x the target (37 rows, 2 blocks of 32 rows,
    against 6 x 3), the held kernel without the sums runs, and the column reduction apart."""
    from mlirfuse.lowering.gpu import column_sums, heuristics

    chosen = heuristics.column_reduction_heuristic
    monkeypatch.setattr(heuristics, "column_reduction_heuristic", lambda *a, **k: dataclasses.replace(
        chosen(*a, **k), target_blocks=blocks, min_rows_per_thread=1))
    monkeypatch.setattr(column_sums, "GROUPS_PER_BLOCK", groups)
    monkeypatch.setattr(sys.modules[__name__], "INV_ROW", 1 / row)
    args, want = _layer_norm_backward_case(rows, row)
    c = check(_layer_norm_backward, *args, reduction_size=rows * row, dynamic=False)
    assert schedules(c) == ["normalization (row, row, reduce, reduce, tile)", "column reduction"], \
        c.stages["launch_params"]
    lines = c.stages["launch_params"].splitlines()
    assert "with the column sums of 1 column reduction" in lines[0], lines[0]
    assert lines[1].endswith("normalization: rows held, without the column sums (a grid of fewer row groups)")
    assert "of the column sums' partials" in lines[3] and lines[4].startswith("launch 1 (or)") and \
        "the column sum apart, where rows are not held" in lines[4], c.stages["launch_params"]
    held = c.stages["gpu"].split("gpu.launch")[1]
    assert "scf.for" in held and held.count("gpu.barrier") >= 2  # the loop over row groups; the groups' turns
    got = mlirfuse.jit(_layer_norm_backward, dynamic=False)(*args)
    for k, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b.astype(np.float32), f"output {k}", reduction_size=rows * row)


def _sums_in_two_blocks(monkeypatch) -> None:
    """Column sums in the normalization kernel at small sizes: column reductions target 2
    blocks, a row each at least, and the held kernel takes the sums from one row group a block."""
    from mlirfuse.lowering.gpu import column_sums, heuristics

    chosen = heuristics.column_reduction_heuristic
    monkeypatch.setattr(heuristics, "column_reduction_heuristic", lambda *a, **k: dataclasses.replace(
        chosen(*a, **k), target_blocks=2, min_rows_per_thread=1))
    monkeypatch.setattr(column_sums, "GROUPS_PER_BLOCK", 1)


def _two_sums_reshaped(g, xhat, w, rstd):
    """dx, and dw and db as two column reductions (outputs of different shapes: [1, H], [1, H] kept)."""
    dx = _layer_norm_backward(g, xhat, w, rstd)[0]
    return dx, ops.reshape((g * xhat).sum((0, 1)), [1, g.shape[-1]]), g.sum(1, keepdim=True).sum(0)


def _two_sums_of_rows(g, xhat, w, rstd):
    """dx, and column sums of dy times a row input and of the chain's row sum times x_hat."""
    dx = _layer_norm_backward(g, xhat, w, rstd)[0]
    return dx, (g * rstd).sum((0, 1)), ((g * w).sum(-1, keepdim=True) * xhat).sum((0, 1))


@pytest.mark.parametrize("fn", [_two_sums_reshaped, _two_sums_of_rows])
def test_a_chain_takes_two_column_reductions(monkeypatch, fn) -> None:
    """Two column reductions in one chain's kernel (found by black-box testing: the second's
    workspace was looked up by comparing sums, which read the first's erased op: "the
    operation has been invalidated")."""
    _sums_in_two_blocks(monkeypatch)
    monkeypatch.setattr(sys.modules[__name__], "INV_ROW", 1 / 64)
    args, _ = _layer_norm_backward_case(33, 64)
    c = check(fn, *args, reduction_size=33 * 64, dynamic=False)
    assert "with the column sums of 2 column reductions" in c.stages["launch_params"], c.stages["launch_params"]


def _bias_gradient_case(monkeypatch, seed: int):
    """(g, x_hat, w, rstd) of a LayerNorm backward over [3, 11, 64], the column sums put in
    the normalization kernel at this size."""
    _sums_in_two_blocks(monkeypatch)
    monkeypatch.setattr(sys.modules[__name__], "INV_ROW", 1 / 64)
    rng = np.random.default_rng(seed)
    g, x = (rng.standard_normal((3, 11, 64)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(64).astype(np.float32)
    rstd = (1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)).astype(np.float32)
    return g, ((x - x.mean(-1, keepdims=True)) * rstd).astype(np.float32), w, rstd


def _layer_norm_backward_then_bias_gradient(g, xhat, w, rstd, dtype=None):
    """GPT-2's LayerNorm backward regions: dx over [batch, seq, hidden], the weight and bias
    gradients, and the gradient of the linear before it, its bias's: dx (under autocast cast
    to bfloat16) viewed as [tokens, hidden] and summed over the tokens, keepdim."""
    dx, dw, db = _layer_norm_backward(g, xhat, w, rstd)
    b, s, h = g.shape
    flat = ops.reshape(dx if dtype is None else ops.cast(dx, dtype), [b * s, h])
    return dx, dw, db, flat.sum(0, keepdim=True)


@pytest.mark.parametrize("narrow", [False, True], ids=["f32", "bf16 dx"])
def test_a_bias_gradient_over_viewed_rows_joins_the_layer_norm_backward(monkeypatch, narrow) -> None:
    """The bias gradient sums dx viewed as [tokens, hidden]: reduced over [batch, seq]
    instead (fusion-reshapes-past-reductions), it is one domain with dw and db. float32: the
    normalization kernel takes all three column sums, one column reduction (it ran the bias
    gradient apart, a third launch reading dx again). A bfloat16 dx (autocast: tiles of 2 bytes, which the
    held kernel does not sum): dw, db and the bias gradient are one column reduction after
    the chain (they were two, one before it)."""
    g, xhat, w, rstd = _bias_gradient_case(monkeypatch, 11)
    dtype = DataType.BFloat16 if narrow else None
    fn = lambda g, xhat, w, rstd: _layer_norm_backward_then_bias_gradient(g, xhat, w, rstd, dtype)  # noqa: E731
    c = check(fn, g, xhat, w, rstd, reduction_size=33 * 64, dynamic=False)
    assert schedules(c) == ["normalization (row, row, reduce, reduce, tile)", "column reduction"], \
        c.stages["launch_params"]
    # (linalg-merge-siblings makes dw, db and the bias gradient one column reduction)
    taken = "with the column sums of 1 column reduction" in c.stages["launch_params"]
    assert taken != narrow, c.stages["launch_params"]
    gw = g.astype(np.float64) * w
    dx = (gw - gw.mean(-1, keepdims=True) - xhat * (gw * xhat).mean(-1, keepdims=True)) * rstd
    rounded = dx.astype(ml_dtypes.bfloat16).astype(np.float64) if narrow else dx
    got = mlirfuse.jit(fn, dynamic=False)(g, xhat, w, rstd)
    assert_close(got[3], rounded.reshape(33, 64).sum(0, keepdims=True).astype(got[3].dtype), "bias gradient",
                 reduction_size=33)


def _autocast_layer_norm_backward(dy, xhat, w, rstd):
    """GPT-2's and BERT's LayerNorm backward regions under CUDA autocast: dy (a bfloat16
    gradient of the linear after, or float32) widened; dx cast to bfloat16 for the linear
    before, viewed as [tokens, hidden] and widened again for its bias gradient's float32 sum."""
    g = ops.cast(dy, DataType.Float)
    dx, dw, db = _layer_norm_backward(g, xhat, w, rstd)
    b, s, h = g.shape
    flat = ops.reshape(ops.cast(dx, DataType.BFloat16), [b * s, h])
    return dx, dw, db, flat, ops.cast(flat, DataType.Float).sum(0, keepdim=True)


@pytest.mark.parametrize("narrow_dy", [True, False], ids=["bf16 dy", "f32 dy"])
def test_an_autocast_bias_gradient_joins_the_weight_and_bias_gradients(monkeypatch, narrow_dy) -> None:
    """Under CUDA autocast the bias gradient reads dx through a cast (bfloat16, widened to sum
    it): fusion-reshapes-past-reductions moves the widening cast with it. A bfloat16 dy: dw, db
    and the bias gradient are one column reduction after the chain (they were two, one before
    it and one after: a third launch, GPT-2's and BERT's autocast LayerNorm-backward regions).
    A float32 dy: the normalization kernel keeps summing dw and db (a bfloat16 column beside
    them would take them out of it), and the bias gradient stays apart."""
    g, xhat, w, rstd = _bias_gradient_case(monkeypatch, 12)
    dy = g.astype(ml_dtypes.bfloat16) if narrow_dy else g
    c, got, want = on_emulated_gpu(_autocast_layer_norm_backward, dy, xhat, w, rstd, dynamic=False)
    for k in range(4):
        assert_close(got[k], want[k], f"output {k}", reduction_size=33 * 64)
    # each bfloat16 term of the bias gradient may round the other way (dx's float32 computed
    # in another order on the GPU): a bfloat16 step of each at most
    bound = 2.0 ** -8 * np.abs(want[3].astype(np.float64)).sum(0).max()
    np.testing.assert_allclose(got[4], want[4], rtol=0, atol=bound, err_msg="bias gradient")
    held = "with the column sums of 1 column reduction" in c.stages["launch_params"]
    if narrow_dy:
        assert schedules(c) == ["normalization (row, row, reduce, reduce, tile)", "column reduction"], \
            c.stages["launch_params"]
        assert not held, c.stages["launch_params"]
    else:
        assert held, c.stages["launch_params"]
    gw = dy.astype(np.float64) * w
    dx = (gw - gw.mean(-1, keepdims=True) - xhat * (gw * xhat).mean(-1, keepdims=True)) * rstd
    rounded = dx.astype(ml_dtypes.bfloat16).astype(np.float64)
    cpu = mlirfuse.jit(_autocast_layer_norm_backward, dynamic=False)(dy, xhat, w, rstd)[4]
    np.testing.assert_allclose(cpu, rounded.reshape(33, 64).sum(0, keepdims=True), rtol=0, atol=bound,
                               err_msg="bias gradient (CPU)")


def _softmax_gradient_viewed_and_back(x, other):
    """BERT's MLM head backward: a gradient computed over [tokens, vocab] rows (here a
    softmax), viewed as [batch, seq, vocab] to add another gradient, viewed back as rows:
    the result and its bias gradient, the sum over the tokens."""
    e = ops.exp(x - ops.max(x, [1], keepdim=True))
    g = e / e.sum(1, keepdim=True)
    b, s, v = other.shape
    total = ops.reshape(ops.reshape(g, [b, s, v]) + other, [b * s, v])
    return total, total.sum(0, keepdim=True)


def test_a_bias_gradient_of_a_view_round_trip_stays_in_the_normalization_kernel(monkeypatch) -> None:
    """fusion-reshapes-past-reductions leaves the bias gradient over the rows where the value
    it sums was computed from a view of rows ([tokens, vocab] -> [batch, seq, vocab] -> back):
    moved to [batch, seq, vocab], it pulled the add out of the normalization kernel, which
    then wrote the gradient to a temporary (374 MB more at BERT's peak, float32)."""
    _sums_in_two_blocks(monkeypatch)
    x, other = randn(32, 96), randn(2, 16, 96)
    c = check(_softmax_gradient_viewed_and_back, x, other, reduction_size=96, dynamic=False)
    assert schedules(c)[0].startswith("normalization") and len(schedules(c)) == 2, c.stages["launch_params"]
    assert "with the column sums of 1 column reduction" in c.stages["launch_params"], c.stages["launch_params"]
    assert c.stages["gpu"].count("memref.alloc(") + c.stages["gpu"].count("memref.alloc()") <= 4, \
        "a temporary of the rows"  # (the workspace, the counters, shape buffers; no [32, 96] temporary)


def test_launch_lines_keep_their_schedules_with_column_sums_and_packed_launches(monkeypatch) -> None:
    """The column sums' launches sit in a host branch: gpu-pack-launches counts them too, so
    that each launch line keeps its schedule when pointwise launches are packed (found in
    review: the lines lost their schedules)."""
    from mlirfuse.lowering.gpu import column_sums, heuristics

    chosen = heuristics.column_reduction_heuristic
    monkeypatch.setattr(heuristics, "column_reduction_heuristic",
                        lambda *a, **k: dataclasses.replace(chosen(*a, **k), target_blocks=1))
    monkeypatch.setattr(column_sums, "GROUPS_PER_BLOCK", 1)
    monkeypatch.setattr(sys.modules[__name__], "INV_ROW", 1 / 64)
    args, _ = _layer_norm_backward_case(37, 64)
    z, y = randn(5, 7), randn(3, 9)
    c = check(lambda g, xhat, w, rstd, z, y: (*_layer_norm_backward(g, xhat, w, rstd), z * 2, y + 1),
              *args, z, y, reduction_size=37 * 64, dynamic=False)
    assert schedules(c) == ["normalization (row, row, reduce, reduce, tile)", "column reduction", "pointwise"], \
        c.stages["launch_params"]


def test_column_sums_of_bf16_tiles_stay_apart() -> None:
    """Sums over bfloat16 tiles keep their own kernel (`column_sums.GROUPS_PER_BLOCK`: they lost
    on the H200 at every size measured)."""
    args, _ = _layer_norm_backward_case(8, 64)
    args = [a.astype(ml_dtypes.bfloat16) if k < 2 else a for k, a in enumerate(args)]
    c = mlirfuse.jit(_layer_norm_backward, dynamic=False).compile(*args, backend="gpu", arch="sm_90")
    assert "column sums" not in c.stages["launch_params"], c.stages["launch_params"]


def test_layer_norm_backward_sums_apart_where_rows_are_not_held(monkeypatch) -> None:
    """A misaligned dy makes the host launch the looping variant: the column sums then run as
    their own column reduction after it (the alternative launch), from the same inputs."""
    monkeypatch.setattr(sys.modules[__name__], "INV_ROW", 1 / 64)
    args, _ = _layer_norm_backward_case(21, 64)
    compiled, got, want = on_emulated_gpu(_layer_norm_backward, *args, misalign={0: 4}, dynamic=False)
    assert "with the column sums" in compiled.stages["launch_params"]
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, f"output {k}", 21 * 64)


def test_layer_norm_backward_of_dynamic_rows_sums_apart() -> None:
    """A row length known at run time may take blocks of up to 1024 threads, which the sums'
    registers do not fit: the column reduction stays a kernel of its own."""
    args, _ = _layer_norm_backward_case(6, 64)
    c = check(_layer_norm_backward, *args, reduction_size=6 * 64)
    assert "column sums" not in c.stages["launch_params"]


def _cross_entropy_forward(logits, labels):
    """transformers' causal-LM loss as AOTAutograd gives it: `logits.float().view(-1, V)`,
    log-softmax, the label's entry gathered."""
    rows = logits.shape[0] * logits.shape[1]
    x = ops.reshape(ops.cast(logits, DataType.Float), [rows, logits.shape[2]])
    m = ops.max(x, 1, keepdim=True)
    shifted = x - m
    lse = ops.log(ops.sum(ops.exp(shifted), 1, keepdim=True))
    return -ops.gather(shifted - lse, labels, 1), m, lse


def _cross_entropy_backward(logits, m, lse, labels, scale, other=None):
    """Its gradient: log-softmax's backward of the scattered -scale, viewed back to
    [batch, seq, vocab] and cast to the logits' bf16 (plus the logits' other gradient, as in
    a training step that also returns them)."""
    rows = logits.shape[0] * logits.shape[1]
    x = ops.reshape(ops.cast(logits, DataType.Float), [rows, logits.shape[2]])
    cols = ops.broadcast_in_dim(ops.iota(logits.shape[2]), [rows, logits.shape[2]], [1])
    onehot = ops.where(cols == labels, -1.0, 0.0) * scale
    grad = onehot - ops.exp(x - m - lse) * ops.sum(onehot, 1, keepdim=True)
    grad = ops.cast(ops.reshape(grad, logits.shape), DataType.BFloat16)
    return grad if other is None else grad + other


def test_cross_entropy_reads_bf16_logits_in_one_normalization_kernel_each_way() -> None:
    """Neither way writes a float32 copy of the logits: forward, the cast moves behind the
    view and the gather reads through it to the bf16 input; backward, the cast to bf16 moves
    before the view back to 3-D and fuses into the normalization, which writes the gradient."""
    rng = np.random.default_rng(3)
    b, s, v = 2, 3, 300
    logits = (rng.standard_normal((b, s, v)) * 3).astype(ml_dtypes.bfloat16)
    labels = rng.integers(0, v, (b * s, 1)).astype(np.int64)
    forward = check(_cross_entropy_forward, logits, labels, reduction_size=v)
    assert schedules(forward) == ["normalization (row, reduce, row, row, reduce, row)", "pointwise"]
    assert re.findall(r"gpu\.alloc .*", forward.stages["gpu"]) == ["gpu.alloc  (%0) : memref<?xf32>"]  # a value a row
    x = logits.astype(np.float32).reshape(b * s, v)
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1, keepdims=True)).astype(np.float32)
    loss = mlirfuse.jit(_cross_entropy_forward)(logits, labels)[0]
    assert_close(loss, -np.take_along_axis(x - m - lse, labels, 1), "loss", reduction_size=v)
    backward = check(_cross_entropy_backward, logits, m, lse, labels, np.float32(0.25), reduction_size=v)
    assert schedules(backward) == ["normalization (row, tile, reduce, tile, tile)"]
    assert "gpu.alloc" not in backward.stages["gpu"]
    other = (rng.standard_normal((b, s, v)) * 0.1).astype(ml_dtypes.bfloat16)
    backward = check(_cross_entropy_backward, logits, m, lse, labels, np.float32(0.25), other, reduction_size=v)
    assert schedules(backward) == ["normalization (row, tile, reduce, tile, tile)"]
    assert "gpu.alloc" not in backward.stages["gpu"]


def test_a_cross_entropy_backward_loops_over_long_rows_its_one_hot_sum_does_not_read() -> None:
    """The backward's one reduction, the sum of the one-hot term (iota against each row's
    label, times the scale), reads nothing along the row: the looping variant reads the row
    once (its last pass), so rows of more than 256 threads loop, in rows of 256 threads, as a
    forward's do. BERT's bfloat16 rows of 30522 were held in blocks of 1024 threads, one block
    an SM (H200: 262 us for 500 MB). 8201 bfloat16 elements (257 threads held), unaligned."""
    rng = np.random.default_rng(7)
    b, s, v = 1, 2, 8201
    logits = (rng.standard_normal((b, s, v)) * 3).astype(ml_dtypes.bfloat16)
    labels = rng.integers(0, v, (b * s, 1)).astype(np.int64)
    x = logits.astype(np.float32).reshape(b * s, v)
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1, keepdims=True)).astype(np.float32)
    backward = check(_cross_entropy_backward, logits, m, lse, labels, np.float32(0.25), reduction_size=v,
                     dynamic=False)
    assert _variants(backward)[0] == "the looping variant in vectors from each row's first aligned element", \
        backward.stages["launch_params"]


def test_a_cross_entropy_forward_reads_its_sliced_bf16_rows_16_bytes_at_a_time() -> None:
    """The forward over bfloat16 logits sliced from a padded product reads the rows only in
    its body (the slice, cast to float32 in registers): its vector is 8 elements, 16 bytes of
    the source, not the 4 of a float32 default. H200, GPT-2 under bfloat16 autocast: the
    kernel read its 4096 rows of 50257 in 8-byte loads."""
    rng = np.random.default_rng(5)
    wide = (rng.standard_normal((2, 3, 304)) * 3).astype(ml_dtypes.bfloat16)
    labels = rng.integers(0, 300, (6, 1)).astype(np.int64)
    forward = check(lambda w, y: _cross_entropy_forward(I.slice_dim(w, 2, 0, 300), y), wide, labels,
                    reduction_size=300)
    assert "NormalizationParams(vector=8," in forward.stages["launch_params"], forward.stages["launch_params"]
    assert "vector.load %arg0[" in forward.stages["gpu"] and "vector<8xbf16>" in forward.stages["gpu"]


TAIL = "vectors from each row's first element, its last elements one a lane"


@pytest.mark.parametrize("misalign", [None, {0: 2}], ids=["aligned", "logits+2B"])
def test_sliced_logits_of_rows_not_a_multiple_of_the_vector_are_read_in_vectors(misalign) -> None:
    """Rows of 8201 bfloat16 logits sliced from a product padded to 8208 (GPT-2's 50257 in
    50264, BERT's 30522 in 30528): the forward's first kernel reads them in 16-byte vectors
    from each row's first element, the last one a lane (`Variant.tail`), the alignment checked
    on the host. It started its vectors at each row's first aligned element, checking each
    row's read in the kernel, and LLVM merged the vector branch into the scalar one: 2-byte
    loads, 8 a slot (H200, GPT-2 under bfloat16 autocast: 156 us for 412 MB). Misaligned
    logits take the element-at-a-time kernel."""
    rng = np.random.default_rng(5)
    v, pitch = 8201, 8208
    wide = (rng.standard_normal((1, 2, pitch)) * 3).astype(ml_dtypes.bfloat16)
    labels = rng.integers(0, v, (2, 1)).astype(np.int64)
    forward = check(lambda w, y: _cross_entropy_forward(I.slice_dim(w, 2, 0, v), y), wide, labels,
                    reduction_size=v, dynamic=False, misalign=misalign)
    assert _variants(forward)[0].startswith(f"the looping variant, {TAIL};"), forward.stages["launch_params"]
    first = forward.ptx.split(".entry")[1]
    assert first.count("ld.global.v4") >= 2 and first.count("ld.global.b16") <= 2, first.count("ld.global.b16")


@pytest.mark.parametrize("dtype, v", [(np.float32, 1001), (ml_dtypes.bfloat16, 3001)], ids=["f32-1001", "bf16-3001"])
def test_a_layer_norm_with_dropout_of_sliced_rows_written_padded_reads_from_each_rows_first_element(dtype, v) -> None:
    """The tail variant with what a LayerNorm brings: column vectors (its weight and bias) read
    in vectors, random numbers drawn for the dropout mask four elements at a time (its vectors
    start at multiples of 4 of the random index), rows held, each ending with elements one a
    lane; a misaligned weight takes the element-at-a-time kernel. (Rows looped over in passes,
    float32 rows of 20001 and bfloat16 of 40003, matched too: minutes on the emulator.)"""
    pitch = (v + 7) // 8 * 8

    def fn(x, w, b):
        h = ops.cast(I.slice_dim(x, 1, 0, v), DataType.Float)
        h = ops.where(ops.rand_like(h, seed=5) >= 0.25, h * (1 / 0.75), 0.0)
        d = h - ops.mean(h, [1], keepdim=True)
        y = d * ops.rsqrt(ops.mean(d * d, [1], keepdim=True) + 1e-5) * ops.cast(w, DataType.Float) + \
            ops.cast(b, DataType.Float)
        return I.pad(ops.cast(y, x.dtype), [0, pitch - v])

    args = randn(2, pitch, dtype=dtype), randn(v, dtype=dtype), randn(v, dtype=dtype)
    for misalign in (None, {1: 4}):
        c = check(fn, *args, reduction_size=v, dynamic=False, misalign=misalign)
        assert _variants(c) == ["rows held, " + TAIL, SCALAR_LOOPING], \
            c.stages["launch_params"]


@pytest.mark.parametrize("v, narrow", [(8201, "a buffer an element at a time"), (8202, "a buffer in vectors of 2"),
                                       (8200, None)])
def test_a_cross_entropy_backward_reads_a_gradient_of_other_rows_in_narrower_vectors(v, narrow) -> None:
    """BERT's backward under bfloat16 autocast: the logits sliced from a padded product (rows
    of 30528), the logits' other gradient (contiguous: rows of 30522, 61044 bytes apart), the
    gradient written into a padded buffer (rows of 30528). Its rows did not start alike, so
    its one vector kernel, whose vectors start at each row's first aligned element, was never
    launched: every buffer an element at a time (H200: 262 us for 750 MB). The tail variant
    reads and writes the padded rows in 16-byte vectors from each row's first element and the
    other gradient in the widest vectors its rows start at (of 2 elements for rows of 8202, one
    element for 8201); a row length that is a multiple of the vector is held or loops in
    vectors as before."""
    rng = np.random.default_rng(5)
    pitch = 8208
    wide = (rng.standard_normal((1, 2, pitch)) * 3).astype(ml_dtypes.bfloat16)
    labels = rng.integers(0, v, (2, 1)).astype(np.int64)
    x = wide.astype(np.float32)[:, :, :v].reshape(2, v)
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1, keepdims=True)).astype(np.float32)
    other = (rng.standard_normal((1, 2, v)) * 0.1).astype(ml_dtypes.bfloat16)

    def backward(w, m, lse, y, scale, o):
        g = _cross_entropy_backward(I.slice_dim(w, 2, 0, v), m, lse, y, scale, o)
        return I.pad(ops.reshape(g, [2, v]), [0, pitch - v])

    c = check(backward, wide, m, lse, labels, np.float32(0.25), other, reduction_size=v, dynamic=False)
    first = c.ptx.split(".entry")[1]
    if narrow is None:
        assert TAIL not in c.stages["launch_params"], c.stages["launch_params"]
        return
    assert _variants(c)[0] == f"the looping variant, {TAIL} ({narrow})", c.stages["launch_params"]
    assert first.count("ld.global.v4") >= 2 and first.count("st.global.v4") >= 2  # the logits, the gradient
    assert first.count("ld.global.b16") <= (2 + 16 if v % 2 else 2), first.count("ld.global.b16")
    if v % 2 == 0:
        assert first.count("ld.global.b32") >= 8  # the other gradient: 4 vectors of 2 a slot

@pytest.mark.parametrize("b, s, v, pitch", [(2, 3, 300, 304), (3, 5, 1001, 1008), (3, 5, 1001, 1003)])
@pytest.mark.parametrize("misalign", [None, {0: 2}], ids=["aligned", "logits+2B"])
def test_cross_entropy_reads_a_slice_of_padded_logits_in_place(b, s, v, pitch, misalign) -> None:
    """Logits sliced from a padded product ([b, s, pitch] -> [b, s, v]): cast, viewed as rows
    and normalized with the slice read in place, one normalization kernel each way and no
    copy of the logits (the slice used to be written out in float32 first). The slice's
    rows are read in vectors from each row's first aligned element (a pitch of 1003 starts
    each row elsewhere), or, misaligned, an element at a time."""
    rng = np.random.default_rng(5)
    wide = (rng.standard_normal((b, s, pitch)) * 3).astype(ml_dtypes.bfloat16)
    labels = rng.integers(0, v, (b * s, 1)).astype(np.int64)
    forward = check(lambda w, y: _cross_entropy_forward(I.slice_dim(w, 2, 0, v), y), wide, labels, reduction_size=v,
                    misalign=misalign)
    assert [k.split(" ")[0] for k in schedules(forward)] == ["normalization"]
    assert "vector.load %arg0[" in forward.stages["gpu"]
    assert re.findall(r"gpu\.alloc .*", forward.stages["gpu"]) == [f"gpu.alloc  () : memref<{b * s}xf32>"]
    x = wide.astype(np.float32)[:, :, :v].reshape(b * s, v)
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1, keepdims=True)).astype(np.float32)
    other = (rng.standard_normal((b, s, v)) * 0.1).astype(ml_dtypes.bfloat16)
    backward = check(lambda w, m, lse, y, sc, o: _cross_entropy_backward(I.slice_dim(w, 2, 0, v), m, lse, y, sc, o),
                     wide, m, lse, labels, np.float32(0.25), other, reduction_size=v, misalign=misalign)
    assert schedules(backward) == ["normalization (row, tile, reduce, tile)"]
    assert "gpu.alloc" not in backward.stages["gpu"]


def test_a_pad_loads_the_gradient_its_other_reader_had_written() -> None:
    """BERT's cross-entropy backward under autocast: the bf16 gradient is padded to the
    aligned width for the matmuls and summed over rows for the bias. The normalization kernel
    writes it for the column sum; the pad's kernel loads it instead of computing it again from
    the logits (an exp an element, the logits and the other gradient read twice: 507 us where
    the copy takes 145, H200)."""
    rng = np.random.default_rng(6)
    b, s, v, pitch = 2, 3, 300, 304
    wide = (rng.standard_normal((b, s, pitch)) * 3).astype(ml_dtypes.bfloat16)
    labels = rng.integers(0, v, (b * s, 1)).astype(np.int64)
    x = wide.astype(np.float32)[:, :, :v].reshape(b * s, v)
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1, keepdims=True)).astype(np.float32)
    other = (rng.standard_normal((b, s, v)) * 0.1).astype(ml_dtypes.bfloat16)

    def fn(w, m, lse, y, sc, o):
        grad = _cross_entropy_backward(I.slice_dim(w, 2, 0, v), m, lse, y, sc, o)
        return ops.pad(grad, [0, pitch - v]), ops.sum(ops.cast(grad, DataType.Float), [0, 1])
    c = check(fn, wide, m, lse, labels, np.float32(0.25), other, reduction_size=v)
    pointwise = [g for g in c.stages["scheduled"].split("linalg.generic")[1:] if 'kind = "pointwise"' in g]
    assert pointwise and not any("math.exp" in g for g in pointwise), schedules(c)


def test_rotary_backward_recomputes_its_product_under_the_slices() -> None:
    """Llama's rotary-embedding backward as AOTAutograd gives it: the gradient times the sin
    table (computed in the region and returned), its halves sliced and padded back
    (rotate_half's backward). The sin counts as a broadcast operand, loaded where it is
    written: the product is recomputed under each slice, never a tensor in memory (it was,
    8 MB a layer: H200 session 46)."""
    rng = np.random.default_rng(7)
    g = rng.standard_normal((2, 3, 8, 16)).astype(ml_dtypes.bfloat16)
    table = rng.standard_normal((1, 8, 16)).astype(np.float32)

    def fn(g, table):
        sin = ops.unsqueeze(ops.sin(table), 1)
        t = ops.cast(ops.cast(g, DataType.Float) * sin, DataType.BFloat16)
        first, second = I.slice_dim(t, 3, 0, 8), I.slice_dim(t, 3, 8, 16)
        rotated = ops.pad(-first, [8, 0]) + ops.pad(second, [0, 8])
        return sin, rotated + g
    c = check(fn, g, table)
    assert "memref.alloc" not in c.stages["scheduled"], c.stages["scheduled"]


@pytest.mark.parametrize("rows, width, length", [(5, 304, 300), (7, 70, 61), (3, 5000, 4099)])
def test_normalization_bodies_reading_inputs_at_their_indices_stay_in_bounds(rows, width, length) -> None:
    """A slice is read in the kernel's body at the element's own row and column. Threads past
    the last row, and slots past the row's end, compute nothing that is kept, but their reads
    must stay inside the buffer too (the emulator checks every access)."""
    x = randn(rows, width)

    def softmax_of_slice(x):
        y = I.slice_dim(x, 1, 0, length)
        e = ops.exp(y - ops.max(y, 1, keepdim=True))
        return e / ops.sum(e, 1, keepdim=True)

    compiled = check(softmax_of_slice, x, reduction_size=length)
    assert schedules(compiled)[0].startswith("normalization")


def test_cross_entropy_of_a_slice_reads_labels_of_valid_rows_only() -> None:
    """The label's gather runs in the normalization kernel's row phase: a thread past the last
    row must not read a label (6 rows, 4 a block: the second block has 2 rows to spare)."""
    rng = np.random.default_rng(3)
    b, s, v = 2, 3, 300
    wide = (rng.standard_normal((b, s, v + 4)) * 3).astype(ml_dtypes.bfloat16)
    labels = rng.integers(0, v, (b * s, 1)).astype(np.int64)
    check(lambda w, labels: _cross_entropy_forward(I.slice_dim(w, 2, 0, v), labels), wide, labels, reduction_size=v)


@pytest.mark.parametrize("w", [w for w in WORKLOADS if w.definition is None and "linears" not in w.name],
                         ids=lambda w: w.name)
def test_reference_workloads(w) -> None:
    inputs = w.make_inputs(w.small, np.random.default_rng(0))
    check(w.jit_fn, *inputs, reduction_size=w.small[-1])


def _rotate_half(x):
    """cat(-x2, x1) of x's two halves along the last dim (rotary embeddings)."""
    half = x.shape[-1] // 2
    return ops.cat([-I.slice_dim(x, -1, half, x.shape[-1]), I.slice_dim(x, -1, 0, half)], -1)


@pytest.mark.parametrize("name,fn,args,vectors", [
    # a weight padded with rows to a multiple of 8 (the output projection's, every step)
    ("pad rows", lambda w: ops.pad(w, [0, 0, 0, 3]), [randn(37, 64, dtype=ml_dtypes.bfloat16)], True),
    ("pad rows both sides", lambda w: ops.pad(w * 2.0, [0, 0, 2, 3], 1.5), [randn(5, 32)], True),
    ("slice of columns at a vector", lambda x: ops.slice(x, [0, 8], [None, 40]) + 1.0, [randn(6, 48)], True),
    ("slice of columns off a vector", lambda x: ops.slice(x, [0, 3], [None, 35]) + 1.0, [randn(6, 48)], False),
    ("cat of rows", lambda a, b: ops.cat([a, b * 2.0], 0), [randn(3, 16), randn(5, 16)], True),
    ("embedding rows", lambda w, i: ops.index_select(w, i, 0) * 2.0,
     [randn(10, 32), np.array([9, 0, 3, 3, 7], np.int64)], True),
    ("pad of the last dim", lambda x: ops.pad(x, [0, 4]), [randn(4, 12)], False),
    # a branch on the innermost index at a multiple of the vector: each vector reads one side
    ("rotation of halves", lambda x: _rotate_half(x) * 2.0, [randn(6, 32)], True),
    ("rotation of halves bf16", lambda x: _rotate_half(x) * 2.0, [randn(6, 64, dtype=ml_dtypes.bfloat16)], True),
    ("rotation off a vector", lambda x: _rotate_half(x) * 2.0, [randn(6, 12)], False),
    ("rotary embedding", lambda x, c, s: x * c + _rotate_half(x) * s,
     [randn(2, 3, 8, 32), randn(1, 1, 8, 32), randn(1, 1, 8, 32)], True),
    ("cat of columns", lambda a, b: ops.cat([a, b * 2.0], -1), [randn(5, 8), randn(5, 16)], True),
])
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "input+4B"])
def test_reads_in_the_body_along_rows_are_vector_loads(name, fn, args, vectors, misalign) -> None:
    """A pad, slice, cat or gather reads its source inside the pointwise kernel's body: where
    a vector's elements read consecutive elements of one row of the source (the last index
    is the innermost loop's, plus a multiple of the vector), they are one vector load, made
    before the body's copies (a pad's rows past the end read the last row, unused). So are
    reads in a branch that a vector takes whole (a rotation's halves: `j < 32` with vectors
    of 4 or 8), at a column clamped into the row: the two sides' reads of one row are one
    load, at the column of the side the vector takes.
    Values equal the CPU backend's, aligned or not (a misaligned source takes the scalar
    variant)."""
    c = check(fn, *args, misalign=misalign)
    assert schedules(c) == ["pointwise"], c.stages["launch_params"]
    source = c.stages["gpu"].split("gpu.launch", 1)[1]
    loads = re.findall(r"vector\.load %arg0\[", source)
    assert bool(loads) == vectors, source[:3000]
    if vectors and name.startswith("rotation of halves"):  # its two branches' reads: one load
        assert len(loads) == 1, source[:3000]
    if vectors:  # the vector variant without them too, for a source the vectors do not fit
        assert source.count("scf.if") >= 2 and re.search(r"memref\.load %arg0\[", source)


def test_random_programs_on_the_emulated_gpu() -> None:
    """The random-program generator's programs (test_random_programs.py) compiled for the GPU
    and run by the emulator, against the CPU backend: host code touching device memory, a
    kernel out of bounds or a wrong value in any schedule is a failure. (It found a scalar
    argument returned as a result stored by the host into device memory.)"""
    from hypothesis import given, settings
    from test_random_programs import HEALTH, _as_tuple, programs
    from test_random_programs import check as check_outputs

    @settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=HEALTH)
    @given(programs())
    def run(prog) -> None:
        args = prog.make_inputs()
        f = mlirfuse.jit(prog.function(ops))
        want = _as_tuple(f(*args))
        compiled = f.compile(*args, backend="gpu", arch="sm_90")
        got = emulate(compiled.stages["gpu"], list(args), [np.empty_like(np.asarray(w)) for w in want])
        check_outputs(prog, [np.asarray(g) for g in got], want, "the emulated GPU vs the CPU backend")

    run()


def test_the_emulator_catches_a_missing_barrier(monkeypatch) -> None:
    """Without its barrier the transpose reads shared memory another thread writes: a data
    race (the block's threads in lockstep: a thread's transposed read of the tile element
    another thread wrote since the last barrier) and, the race check off (threads one after
    another), garbage: NaN."""
    from emulator_rules import RACES

    from mlirfuse.lowering.gpu import transpose as gpu_transpose

    class NoBarrier:
        barrier = staticmethod(lambda: None)

    monkeypatch.setattr(gpu_transpose, "gpu", NoBarrier)
    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", "off")
    with pytest.raises(EmulationError, match="data race: thread .* of block 0 reads element .* that thread .* of "
                                             "block 0 wrote"):
        on_emulated_gpu(lambda x: ops.permute(x, [1, 0]) * 1.0, randn(64, 32))
    monkeypatch.setattr(RACES, "on", False)
    _, got, want = on_emulated_gpu(lambda x: ops.permute(x, [1, 0]) * 1.0, randn(64, 32))
    assert np.isnan(got[0]).any() and not np.isnan(want[0]).any()


def test_the_emulator_catches_a_row_value_read_before_its_lane_stores_it(monkeypatch) -> None:
    """GPU fuzz seed 780106 (a device-side assert on the H200, which the emulator's order of
    threads hid): a gather read its row's argmax from the buffer the row's lane 0 stores it
    in, with nothing ordering the store before the other threads' loads. With the gather's
    reads from memory again (as before `Member.body_rows`), the race check names the race."""
    from mlirfuse.lowering.gpu import normalization

    def fn(x):
        picked = ops.take_along_axis(x, ops.argmax(x, 2, keepdim=True), 2)
        return ops.var(picked, 2, keepdim=True, correction=0), ops.sigmoid(x)

    check(fn, randn(2, 1, 1))
    found = normalization._body_rows
    monkeypatch.setattr(normalization, "_body_rows",
                        lambda members: None if found(members) is None else [{} for _ in members])
    monkeypatch.setenv("MLIRFUSE_CACHE_DIR", "off")
    with pytest.raises(EmulationError, match="data race: thread [1-9][0-9]* of block 0 reads element 0 of a buffer "
                                             "that thread 0 of block 0 wrote"):
        on_emulated_gpu(fn, randn(2, 1, 1))


def test_threads_past_the_last_row_load_no_row_value_the_chain_writes() -> None:
    """A variance over rows of 33 (4 threads a row, 32 rows a block, 42 rows), in a chain whose
    first reduction's initial value is read from memory (its fill is another kernel's, shared
    with the other outputs): threads past the last row compute on row 0 and loaded that value
    from row 0's place, which block 0's lane 0 then overwrites with row 0's total, in the
    same launch. Nothing they compute is kept, but the emulator's race check names the race
    (a load unordered with another block's store); they now load nothing."""
    from test_ops import sample

    def fn(t):
        return (ops.mean(t, [-1], keepdim=True), ops.var(t, None), ops.var(t, [-1], keepdim=True),
                ops.var(t, [0, 2]))
    x = sample(np.float32, (6, 7, 33))
    c = check(fn, x, reduction_size=x.size)
    assert any(s.startswith("normalization (reduce,") for s in schedules(c)), c.stages["launch_params"]


def test_the_emulator_checks_bounds() -> None:
    from gpu_emulator import of_array

    with pytest.raises(EmulationError, match="out of bounds"):
        of_array(np.zeros((2, 3), np.float32)).at([2, 0])


def _elementwise_chunks(size: int = 12) -> list[tuple[str, list[str]]]:
    from test_ops import ELEMENTWISE_CASES

    by_dtype: dict[str, list[str]] = {}
    for name, dtype in ELEMENTWISE_CASES:
        by_dtype.setdefault(np.dtype(dtype).name, []).append(name)
    return [(d, names[k:k + size]) for d, names in by_dtype.items() for k in range(0, len(names), size)]


@pytest.mark.parametrize("dtype_name,names", _elementwise_chunks(), ids=lambda v: v if isinstance(v, str) else None)
def test_every_elementwise_op_and_dtype(dtype_name, names) -> None:
    """Each op of the table on its own inputs, a dozen ops to a fusion (one kernel each)."""
    from test_ops import sample

    from mlirfuse.dialects import optable

    dtype = ml_dtypes.bfloat16 if dtype_name == "bfloat16" else np.dtype(dtype_name).type
    arity = [optable.OPS[n].arity for n in names]
    inputs = [sample(dtype, (5, 33), n, i) for n, a in zip(names, arity) for i in range(a)]
    for k, n in enumerate(names):
        if n == "where":
            inputs[sum(arity[:k])] = np.random.default_rng(1).random((5, 33)) < 0.5

    def fn(*args):
        args, out = list(args), []
        for n, a in zip(names, arity):
            out.append(getattr(ops, n)(*args[:a]))
            args = args[a:]
        return tuple(out)

    check(fn, *inputs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_reductions_of_every_dtype_over_inner_outer_middle_and_all_axes(dtype) -> None:
    from test_ops import sample

    floating = np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16
    names = ["sum", "max", "min"] + (["mean", "var"] if floating else [])
    x = sample(dtype, (6, 7, 33))

    def fn(t):
        return tuple(getattr(ops, n)(t, axes, keepdim=keep) for n in names
                     for axes, keep in [(None, False), ([-1], True), ([0, 2], False), ([1], False), ([0, 1], False)])

    check(fn, x, reduction_size=x.size)


@pytest.fixture
def calls():
    """Every call of a jitted function during the test (`torch_programs.RegionCall`)."""
    from torch_programs import recorded_region_calls

    with recorded_region_calls() as recorded:
        yield recorded


def _emulate_recorded(calls: list) -> list:
    """Each recorded call compiled for the GPU, no naive kernel, and emulated on its inputs:
    the CPU's results (`torch_programs.emulate_region_calls`). Returns the compiled fusions."""
    from torch_programs import emulate_region_calls

    compiled = emulate_region_calls(calls)
    for c in compiled:
        assert "naive" not in c.stages["launch_params"], c.stages["launch_params"]
    return compiled


def test_a_recording_over_steps_compares_each_call_with_its_own_results(calls) -> None:
    """Found by black-box testing: the recorder kept references to a region's results, and a
    later step accumulated gradients into the bias gradient a backward region had returned, so
    the emulated first backward was compared with the sum of both steps'. Each recorded call
    now holds copies of its results as they were."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 8)
    step = torch.compile(lambda x: torch.nn.functional.gelu(linear(x)).square().sum(), backend="mlirfuse")
    for _ in range(2):
        step(torch.randn(4, 16)).backward()
    assert len(calls) >= 4
    _emulate_recorded(calls)


def test_torch_backend_regions_of_the_tutorial_blocks(calls) -> None:
    """Every fused region torch.compile(backend="mlirfuse") makes of the tutorial's
    bias-dropout-add-LayerNorm and -RMSNorm blocks and of GELU + softmax, forward and
    backward, recorded on the CPU and run again as the GPU backend's kernels."""
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional

    def bdaln(x, r, w, b1, b2):
        y = functional.dropout(x + b1, 0.1, training=True) + r
        return functional.layer_norm(y, y.shape[-1:], w, b2)

    def bdarms(x, r, w, b1):
        y = functional.dropout(x + b1, 0.1, training=True) + r
        return y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def gelu_softmax(x, w):
        return torch.softmax(functional.gelu(x) * w, -1)

    for fn, n in ((bdaln, 5), (bdarms, 4), (gelu_softmax, 2)):
        torch.manual_seed(0)
        args = [torch.randn(s, requires_grad=True) for s in [(2, 3, 64), (2, 3, 64)] + [(64,)] * (n - 2)]
        out = torch.compile(fn, backend="mlirfuse")(*args)
        out.backward(torch.randn_like(out))
    assert len(calls) == 6  # a forward and a backward region each
    _emulate_recorded(calls)


def test_torch_backend_region_of_embeddings_and_layer_norm(calls) -> None:
    """The region torch.compile(backend="mlirfuse") makes of GPT-2's input (token and position
    embeddings, gathered in the region, then LayerNorm), recorded on the CPU and run again as
    the GPU backend's kernels: no naive kernel, the gathers' rows as torch's."""
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    torch.manual_seed(0)
    wte, wpe, w, b = torch.randn(50, 64), torch.randn(12, 64), torch.randn(64), torch.randn(64)

    def fn(ids):
        h = functional.embedding(ids, wte) + functional.embedding(torch.arange(ids.shape[1]), wpe)
        return functional.layer_norm(h, (64,), w, b)
    torch.compile(fn, backend="mlirfuse")(torch.randint(0, 50, (2, 12)))
    assert len(calls) == 1
    _emulate_recorded(calls)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_torch_backend_region_of_embeddings_and_rms_norm_is_one_kernel(calls, dynamic) -> None:
    """Llama's input: the embedding rows, a result (the residual stream), and their RMSNorm.
    The region gathers [B * S] rows and views them as [B, S, H]; the gather is computed in
    the viewed shape, so one normalization kernel gathers, writes and normalizes the rows (the
    normalization read them back from memory in a second launch)."""
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    torch.manual_seed(0)
    wte, w = torch.randn(50, 64), torch.randn(64)

    def fn(ids):
        h = functional.embedding(ids, wte)
        return h, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.compile(fn, backend="mlirfuse", dynamic=dynamic)(torch.randint(0, 50, (2, 12)))
    assert len(calls) == 1
    (compiled,) = _emulate_recorded(calls)
    assert [k.split(" (")[0] for k in schedules(compiled)] == ["normalization"], compiled.stages["launch_params"]


def test_torch_backend_region_of_bert_embeddings(calls) -> None:
    """transformers' BertEmbeddings (word, token-type and position rows gathered, summed,
    LayerNorm) through torch.compile(backend="mlirfuse"): each table's rows are read in
    vectors (BERT inference on the H200: this kernel took 71 us with the tables read an
    element at a time), and the results are torch's. The region takes the tables with their
    width static, as the graph has it ([?, 64]); traced with sizes known at run time only
    ([?, ?], as before the torch backend's signatures held last sizes), it views the gathered
    [S, ?] rows as [B, S, H], whose static sizes fix the width, and reads them in vectors too."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=50, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=128, max_position_embeddings=16, type_vocab_size=2)
    embeddings = transformers.models.bert.modeling_bert.BertEmbeddings(config).eval()
    ids = torch.randint(0, 50, (2, 12))
    with torch.no_grad():
        torch.compile(embeddings, backend="mlirfuse")(input_ids=ids)
    assert len(calls) == 1
    tables = [tuple(a.shape) for a in calls[0][1] if isinstance(a, torch.Tensor) and a.dtype == torch.float32
              and a.dim() == 2]
    assert sorted(tables) == [(2, 64), (16, 64), (50, 64)]
    from torch_programs import RegionCall

    from mlirfuse.frontend.jit import JitFunction

    (jitted, inputs, results, args), = calls
    dynamic = JitFunction(jitted.fn, into=jitted.into)
    for width, recorded in (("64", calls), (r"\?", [RegionCall(dynamic, inputs, results, args)])):
        (compiled,) = _emulate_recorded(recorded)
        assert [k for k in schedules(compiled) if k.startswith("normalization")]
        read = re.findall(r"vector\.load %arg\d+\[[^\]]*\] {[^}]*} : memref<\?x" + width + r"xf32>, vector<4xf32>",
                          compiled.stages["gpu"])
        assert len(read) >= 3, compiled.stages["gpu"]


def test_torch_backend_regions_of_cross_entropy_on_padded_logits(calls) -> None:
    """Cross-entropy as transformers computes it (`logits.float().view(-1, V)`) on bf16
    logits that are a slice of a padded product, as they reach the loss across a graph break:
    each region takes the whole padded rows (a view, no copy) and reads the slice in place,
    one normalization kernel each way."""
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    torch.manual_seed(0)
    v, pitch = 301, 304
    logits = torch.randn(2, 3, pitch, dtype=torch.bfloat16)[..., :v].requires_grad_()
    labels = torch.randint(0, v, (2, 3))

    def loss(logits, labels):
        return functional.cross_entropy(logits.float().view(-1, v), labels.view(-1))
    torch.compile(loss, backend="mlirfuse")(logits, labels).backward()
    assert len(calls) == 2
    assert [tuple(a.shape) for a in calls[0][1] if isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16] \
        == [(2, 3, pitch)]
    assert calls[0].args[0].data_ptr() == logits.data_ptr()  # the padded rows themselves
    for compiled in _emulate_recorded(calls):
        assert [k for k in schedules(compiled) if not k.startswith("pointwise")][0].startswith("normalization")
        assert not [a for a in re.findall(r"gpu\.alloc .*", compiled.stages["gpu"]) if f"x{v}x" in a]  # no copy


def test_torch_backend_region_of_a_causal_lm_loss_is_three_launches(calls) -> None:
    """A causal LM's loss as transformers computes it (labels padded with -100 and shifted by
    one, cross-entropy averaged over the labels kept): the forward region runs the row
    log-sum-exp as one normalization kernel; the count of kept labels, the loss sum and their
    quotient as one reduction kernel; and the labels and mask kept for the backward, read
    from the input labels, packed with the shifted labels the reduction reads (a kernel that
    waited for the others before) - 3 launches."""
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    torch.manual_seed(0)
    b, s, v = 4, 48, 37
    logits = torch.randn(b, s, v, requires_grad=True)
    labels = torch.randint(0, v, (b, s))
    labels[0, :5] = -100

    def loss(logits, labels):
        labels = functional.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
        return functional.cross_entropy(logits.float().view(-1, v), labels.view(-1), ignore_index=-100)
    torch.compile(loss, backend="mlirfuse")(logits, labels).backward()
    forward = _emulate_recorded(calls)[0]
    assert schedules(forward) == ["pointwise", "normalization (row, reduce, row, row, reduce, row)",
                                  "inner reduction"], forward.stages["launch_params"]
    assert "2 kernels packed in one launch" in forward.stages["launch_params"]
    assert "with its pointwise epilogue" in forward.stages["launch_params"]


def test_a_chain_member_reading_other_rows_values_is_left_out_of_the_chain(calls) -> None:
    """log_softmax over dim 2 of x[..., None] broadcast over a last dim (emulator fuzz seed
    920938): the pointwise generic after the row sums reads them at [b, c, j], j running along
    the row, the values of other rows, which the chain's kernel holds for its own row only
    (gpu-apply-schedules raised a KeyError). It is not a member: the chain (the maximum and
    the sum) is one kernel, and the generic a pointwise kernel after it, reading what it stored."""
    torch = pytest.importorskip("torch")

    def fn(x):
        y = x.unsqueeze(3).expand(2, 3, 4, 4)
        z = torch.log_softmax(y, 2)
        return torch.where(y > z, y, z * 0.5)
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(torch.compile(fn, backend="mlirfuse")(x), fn(x))
    assert len(calls) == 1
    (compiled,) = _emulate_recorded(calls)
    assert [k.split(" (")[0] for k in schedules(compiled)] == ["normalization", "pointwise"], \
        compiled.stages["launch_params"]


# -- symbolic sizes of 1 ---------------------------------------------------------------------------
def _normalized(x):
    d = x - x.mean(-1, keepdim=True)
    return d * ops.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5)


@pytest.mark.parametrize("name, fn, compiled_for, runs", [
    ("pointwise", lambda x, y: ops.exp(x) * y, [(2, 3), (2, 3)],
     [[(1, 4), (1, 4)], [(5, 1), (5, 1)], [(1, 1), (1, 1)]]),
    ("row sum", lambda x: x.sum(-1), [(2, 3)], [[(1, 4)], [(5, 1)], [(1, 1)]]),
    ("column sum", lambda x: x.sum(0), [(2, 3)], [[(1, 4)], [(5, 1)], [(1, 1)]]),
    ("sum over (0, 1)", lambda x: x.sum((0, 1)), [(2, 3, 4)], [[(1, 1, 8)], [(5, 1, 7)]]),
    ("normalization", _normalized, [(2, 3)], [[(1, 8)], [(5, 1)], [(1, 1)]]),
    ("transpose", lambda x: ops.permute(x, [1, 0]) * 2.0, [(2, 3)], [[(1, 40)], [(40, 1)]]),
])
def test_symbolic_sizes_of_one(name, fn, compiled_for, runs) -> None:
    """A FusionDefinition's -1 dims may be 1 at run time (jit makes size-1 dims static, so only
    definitions reach kernels with such extents): every schedule, against the CPU backend."""
    from mlirfuse.compiler import CompiledFusion

    f = mlirfuse.jit(fn)
    examples = [randn(*s) for s in compiled_for]
    gpu = f.compile(*examples, backend="gpu", arch="sm_90")
    cpu = CompiledFusion(f.trace(*examples)[0], "cpu")
    for shapes in runs:
        args = [randn(*s) for s in shapes]
        want = cpu(args)
        got = emulate(gpu.stages["gpu"], args, [np.empty_like(w) for w in want])
        for g, w in zip(got, want):
            assert_close(g, w, f"{name} {shapes}", reduction_size=8)


@pytest.mark.parametrize("shape, view", [((64, 48), [4, 16, 48]), ((6, 10), [60]), ((3, 4, 5), [12, 5]), ((7, 1), [7])])
@pytest.mark.parametrize("misalign", [None, {0: 4}], ids=["aligned", "input+4B"])
def test_view_between_pointwise_ops_is_one_kernel(shape, view, misalign) -> None:
    """reshape(x + y) * z: the elementwise producer moves past the reshape
    (linalg-reshape-elementwise) and fuses with its consumer: one kernel, right values."""
    def fn(x, y, z):
        return ops.reshape(x + y * 2.0, view) * z

    c = check(fn, randn(*shape), randn(*shape), randn(*view), misalign=misalign)
    assert c.n_launches == 1


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float32, np.int64])
def test_constant_results_are_written_by_the_kernel_not_read_from_host_memory(dtype) -> None:
    """T5 under bf16 autocast on the H100: 'illegal memory access'. A group returned a constant
    (a scalar_tensor also read outside it); bufferization copied it from a memref.global of the
    host module, and the kernel doing the copy read host memory."""
    def f(x, m):
        zero = ops.cast(0.0, DataType(np.dtype(dtype).name) if dtype is not ml_dtypes.bfloat16 else DataType.BFloat16)
        return zero, ops.where(m, ops.expand(zero, list(x.shape)), x), ops.reshape(zero, [1, 1]) + 1
    check(f, randn(4, 8, 16, dtype=dtype), randn(4, 8, 16, dtype=np.bool_))


@pytest.mark.parametrize("scalar", [np.float32(2.5), np.bool_(True), np.int64(-3)], ids=lambda s: s.dtype.name)
def test_a_scalar_argument_returned_is_written_by_a_kernel(scalar) -> None:
    """A scalar passed by value and returned as a 0-d result (found by running random programs
    through the emulator): the host stored it into a buffer, which on a GPU is device memory
    (the host process faults), for a kernel to copy out; a fill kernel now writes it."""
    compiled = check(lambda x, s: (ops.abs(x), s), randn(5), scalar)
    assert "memref.store %arg" not in compiled.stages["gpu"].split("gpu.launch")[0]


def test_scalar_arguments_viewed_as_one_element_tensors_are_read_by_value() -> None:
    """neg(reshape(s + t, [-1])) of two scalars passed by value (a random program): the
    reshaped scalars were stored by the host into device buffers for the kernel to read; a
    kernel now takes them by value."""
    compiled = check(lambda t, s: ops.neg(ops.reshape(ops.neg(s + t), [-1])), np.int32(3), 5)
    assert "memref.store %arg" not in compiled.stages["gpu"].split("gpu.launch")[0]
    # summed over its [1] view, the scalar's tensor is the only operand giving the loop its
    # extent: it stays an input, made by a fill kernel (inlined, the generic was invalid)
    for x in (np.bool_(True), np.bool_(False)):
        compiled = check(lambda b: ops.sum(ops.reshape(ops.logical_not(b), [-1])), x)
        assert "memref.store %arg" not in compiled.stages["gpu"].split("gpu.launch")[0]


@pytest.mark.parametrize("fn", [
    lambda x: ops.sum(x * ops.rand_like(x, seed=3)),
    lambda x: ops.min(ops.where(x > 0.5, ops.iota(x.shape[0], 0, 1, DataType.Int), 99)),
], ids=["random", "iota"])
def test_full_reductions_with_index_dependent_bodies(fn) -> None:
    """A full reduction gets a unit parallel loop d0 on the GPU; the body's `linalg.index`
    must follow its loop to d1 (it read the unit loop: every index 0)."""
    check(fn, randn(37), reduction_size=37)


def test_shifts_on_the_emulated_gpu() -> None:
    """The shifts' GPU code (counts past the width selected away: LLVM's shifts are poison
    there) against the numpy reference."""
    a = np.array([5, -5, 1, -1, 100, -128, 7, -3] * 4, np.int32)
    b = np.array([0, 1, 2, 31, 32, 35, -1, 3] * 4, np.int32)
    c = check(lambda x, y: (ops.bitwise_left_shift(x, y), ops.bitwise_right_shift(x, y),
                            ops.logical_right_shift(x, y)), a, b)
    assert schedules(c) == ["pointwise"]


def test_integer_powers_on_the_emulated_gpu() -> None:
    """Integer pow's square-and-multiply loop in a kernel (wrapping products, negative
    exponents), against the CPU backend."""
    a = np.array([3, 2147483647, 0, 7, -1, -1, 1, 2, -3, 5] * 4, np.int64)
    b = np.array([39, 2, -2, 23, -3, -4, -7, 0, 5, 62] * 4, np.int64)
    assert schedules(check(lambda x, y: x ** y, a, b)) == ["pointwise"]


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_float8_conversions_on_the_emulated_gpu(dtype) -> None:
    """The float8 conversions in a kernel (PTX cvt on the emulated sm_90): every code to
    float32, float16 and float64, and float32 and bfloat16 values (ties, subnormals, overflow,
    NaN) to float8, against the reference. Canonicalization folds the casts through float32 of
    the last four into one conversion (the bfloat16 one failed to compile for an H200)."""
    codes = np.arange(256, dtype=np.uint8).view(dtype)
    x = np.array([0.0, -0.0, 2 ** -9, 3 * 2 ** -10, 2 ** -16, 1.0625, 1.1875, 449.0, 464.0, 480.0, 1e6, 59392.0,
                  61440.0, np.inf, -np.inf, np.nan, -500.0] * 2, np.float32)
    to = mlirfuse.dtypes.to_dtype(np.dtype(dtype))
    _, got, want = on_emulated_gpu(lambda c, v: (
        ops.cast(c, DataType.Float), ops.cast(v, to), ops.cast(ops.cast(v, DataType.BFloat16), to),
        ops.cast(c, DataType.Half), ops.cast(c, DataType.Double)), codes, x)
    for g, w in zip(got, want):  # exactly: NaN where NaN, the same value and sign elsewhere
        g, w = np.asarray(g).astype(np.float64), np.asarray(w).astype(np.float64)
        np.testing.assert_array_equal(g, w)
        assert (np.signbit(g) == np.signbit(w))[~np.isnan(w)].all()


@pytest.mark.parametrize("bounds", [DataType.Double, DataType.Float], ids=["float64-bounds", "float32-bounds"])
def test_random_bounds_computed_in_the_fusion_are_read_in_the_kernel(bounds) -> None:
    """uniform's bounds when the fusion computes them (casts of float64 constants, as an
    nvFuser definition's define_scalar(0.0) gives): the kernel reads them; host code that
    loaded them from device memory segfaulted on the H100 (the emulator now refuses host
    accesses to gpu.alloc buffers)."""
    def fn(t):
        lo, hi = ops.constant(-1.0, bounds), ops.constant(3.0, bounds)
        return t * ops.uniform(lo, hi, [8, 4], seed=3, dtype=DataType.Float)
    check(fn, np.ones((8, 4), np.float32))
    check(lambda t, s: t * ops.uniform(ops.cast(s, bounds), 3.0, [8, 4], seed=3), np.ones((8, 4), np.float32), -1.0)


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
@pytest.mark.parametrize("dtype, shape, misalign", [
    (np.float32, (6, 40), None), (ml_dtypes.bfloat16, (6, 48), None), (np.float32, (3, 5, 16), None),
    (np.float32, (6, 40), {0: 1}), (ml_dtypes.bfloat16, (7, 13), None)])
def test_pointwise_random_numbers_share_philox_calls_in_vectors(dtype, shape, misalign, dynamic) -> None:
    """Dropout in a pointwise kernel: the elements of a vector take consecutive random indices,
    so each 4 of them share one Philox call (a call makes 4 words; before, every element made
    its own and kept one word: bias+GELU+dropout in bf16 was bound by those calls). The bits
    equal the CPU backend's in the vector variant, the scalar one (misaligned input, rows not
    a multiple of the vector) and with a broadcast operand."""
    x = randn(*shape, dtype=dtype)
    b = randn(shape[-1], dtype=dtype)
    c = check(lambda t, v: ops.where(ops.rand_like(t + v, seed=3) >= 0.25, (t + v) * 2.0, 0.0), x, b,
              misalign=misalign, dynamic=dynamic)
    assert schedules(c) == ["pointwise"]
    vector = 16 // np.dtype(dtype).itemsize
    calls = c.ptx.count("mul.hi.u32") / 20  # two 32-bit high products per round, ten rounds
    assert calls <= vector // 4 + 2  # the vector, plus one in the last block's and the scalar variant's loops


def test_a_gather_index_out_of_range_fails_the_kernels_assert() -> None:
    """On the GPU, a gather's index outside its dim fails the kernel's `cf.assert`: CUDA's
    device-side assert (`__assertfail` in the PTX), as torch's kernels assert."""
    from emulator_rules import DeviceAssert

    x = randn(5, 4)
    c = check(lambda x, i: ops.index_select(x * 2.0, i, 0), x, np.array([4, -5, 0]))
    assert "__assertfail" in c.ptx
    with pytest.raises(DeviceAssert, match="gather index out of range"):
        emulate(c.stages["gpu"], [x, np.array([4, 5, 0])], [np.empty((3, 4), np.float32)])


def test_a_gather_read_in_part_fails_the_kernels_assert() -> None:
    """A gather read only in part (its first row) keeps its own kernel for the checks of the
    indices not read: the device-side assert fires for an index no output element reads."""
    from emulator_rules import DeviceAssert

    x = randn(5, 4)
    c = check(lambda x, i: ops.index_select(x * 2.0, i, 0)[:1], x, np.array([4, -5, 0]))
    with pytest.raises(DeviceAssert, match="gather index out of range"):
        emulate(c.stages["gpu"], [x, np.array([4, 0, 9])], [np.empty((1, 4), np.float32)])


def _scheduled_from_buffers(module: str) -> dict[str, str]:
    """The GPU stages from `generalized` to `gpu` run on hand-written bufferized linalg (the
    entry point's memrefs): each stage's IR by name."""
    from mlir import ir

    from mlirfuse import stages

    path = stages.gpu_stages()
    names = [s.name for s in path]
    record: dict[str, str] = {}
    with ir.Context(), ir.Location.unknown():
        stages.run(ir.Module.parse(module), path[names.index("generalized"):names.index("gpu") + 1], record)
    return record


# A LayerNorm-like chain (sum, sum of squares about the mean, x times the latter) whose
# second reduction starts from a fill the chain does not hold: an unrelated generic of other
# extents sits between them (as GPT-2's position-embedding gather did after the gather
# checks), so the kernel reads the initial value from memory and lane 0 writes the total
# back into the same buffer.
_INIT_FROM_MEMORY = """
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
module {
  func.func @mlirfuse_entry(%x: memref<4x1024xf32>, %y: memref<3x1024xf32>, %z: memref<3x1024xf32>,
                            %out: memref<4x1024xf32>) attributes {llvm.emit_c_interface} {
    %zero = arith.constant 0.0 : f32
    %n = arith.constant 1024.0 : f32
    %squares = memref.alloc() : memref<4xf32>
    linalg.fill ins(%zero : f32) outs(%squares : memref<4xf32>)
    linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
        ins(%y : memref<3x1024xf32>) outs(%z : memref<3x1024xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.negf %a : f32
      linalg.yield %r : f32
    }
    %sum = memref.alloc() : memref<4xf32>
    linalg.fill ins(%zero : f32) outs(%sum : memref<4xf32>)
    linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<4x1024xf32>) outs(%sum : memref<4xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.addf %acc, %a : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#rows, #row, #row], iterator_types = ["parallel", "reduction"]}
        ins(%x, %sum : memref<4x1024xf32>, memref<4xf32>) outs(%squares : memref<4xf32>) {
    ^bb0(%a: f32, %s: f32, %acc: f32):
      %mean = arith.divf %s, %n : f32
      %d = arith.subf %a, %mean : f32
      %q = arith.mulf %d, %d : f32
      %r = arith.addf %acc, %q : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#rows, #row, #rows], iterator_types = ["parallel", "parallel"]}
        ins(%x, %squares : memref<4x1024xf32>, memref<4xf32>) outs(%out : memref<4x1024xf32>) {
    ^bb0(%a: f32, %w: f32, %o: f32):
      %r = arith.mulf %a, %w : f32
      linalg.yield %r : f32
    }
    memref.dealloc %sum : memref<4xf32>
    memref.dealloc %squares : memref<4xf32>
    return
  }
}
"""


def test_a_normalization_reads_an_initial_value_from_memory_before_writing_the_total() -> None:
    """A reduction of a normalization chain whose initial value is in memory (a fill the chain
    does not hold) reads it in every lane before the row's combine, whose barrier orders those
    reads before lane 0 writes the total into the same buffer. Read after the combine, lanes
    1.. of a row could take lane 0's total as their start: a wrong variance in GPT-2's first
    LayerNorm, 2 runs in 3 on the H200 (the emulator runs lane 0 first: always wrong)."""
    record = _scheduled_from_buffers(_INIT_FROM_MEMORY)
    assert 'kind = "normalization"' in record["scheduled"]
    assert record["gpu"].count("gpu.barrier") >= 2  # rows of more than a warp: shared memory combines
    x = randn(4, 1024)
    y = randn(3, 1024)
    z, out = emulate(record["gpu"], [x, y], [np.empty_like(y), np.empty_like(x)])
    x64 = x.astype(np.float64)
    assert_close(out, (x64 * ((x64 - x64.mean(1, keepdims=True)) ** 2).sum(1, keepdims=True)).astype(np.float32),
                 "x times its row's sum of squares", 1024)
    assert (z == -y).all()


# A row op updating, in place, a buffer of row values that a kernel before the chain filled
# (v = v * 2), then a reduction and a tile op reading v: lane 0 stores 2v while the row's
# other lanes may still load v (no barrier between them), and they would compute with 4v.
_ROW_UPDATED_IN_PLACE = """
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#one = affine_map<(d0) -> (d0)>
module {
  func.func @mlirfuse_entry(%x: memref<4x1024xf32>, %y: memref<3x1024xf32>, %z: memref<3x1024xf32>,
                            %out: memref<4x1024xf32>, %v: memref<4xf32>) attributes {llvm.emit_c_interface} {
    %zero = arith.constant 0.0 : f32
    %two = arith.constant 2.0 : f32
    linalg.fill ins(%two : f32) outs(%v : memref<4xf32>)
    linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
        ins(%y : memref<3x1024xf32>) outs(%z : memref<3x1024xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.negf %a : f32
      linalg.yield %r : f32
    }
    %sum = memref.alloc() : memref<4xf32>
    linalg.fill ins(%zero : f32) outs(%sum : memref<4xf32>)
    linalg.generic {indexing_maps = [#one, #one], iterator_types = ["parallel"]}
        ins(%v : memref<4xf32>) outs(%v : memref<4xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.mulf %a, %two : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<4x1024xf32>) outs(%sum : memref<4xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.addf %acc, %a : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#rows, #row, #row, #rows], iterator_types = ["parallel", "parallel"]}
        ins(%x, %v, %sum : memref<4x1024xf32>, memref<4xf32>, memref<4xf32>) outs(%out : memref<4x1024xf32>) {
    ^bb0(%a: f32, %w: f32, %s: f32, %o: f32):
      %p = arith.mulf %a, %w : f32
      %r = arith.addf %p, %s : f32
      linalg.yield %r : f32
    }
    memref.dealloc %sum : memref<4xf32>
    return
  }
}
"""


def test_a_row_buffer_updated_in_place_is_not_held_by_a_normalization() -> None:
    """A chain member writing a row buffer that it read from memory, no reduction between:
    the chain is not formed there (the row op runs as a kernel of its own, before it)."""
    record = _scheduled_from_buffers(_ROW_UPDATED_IN_PLACE)
    x, y = randn(4, 1024), randn(3, 1024)
    z, out, v = emulate(record["gpu"], [x, y], [np.empty_like(y), np.empty_like(x), np.empty(4, np.float32)])
    assert (v == 4).all() and (z == -y).all()
    assert_close(out, x * 4 + x.sum(1, keepdims=True), "x times the updated row value, plus its row's sum", 1024)


# Softmax's chain (maximum, sum of exp(x - max), exp(x - max) / sum) whose sum starts from a
# fill the chain does not hold; rows of N too long to hold take the looping variant, which
# sums exp online in the maximum's pass and rescales the total where the sum's place is.
_ONLINE_SUM_INIT_FROM_MEMORY = """
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
module {
  func.func @mlirfuse_entry(%x: memref<4xNxf32>, %y: memref<3xNxf32>, %z: memref<3xNxf32>,
                            %out: memref<4xNxf32>) attributes {llvm.emit_c_interface} {
    %zero = arith.constant 0.0 : f32
    %low = arith.constant 0xFF800000 : f32
    %sum = memref.alloc() : memref<4xf32>
    linalg.fill ins(%zero : f32) outs(%sum : memref<4xf32>)
    linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
        ins(%y : memref<3xNxf32>) outs(%z : memref<3xNxf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.negf %a : f32
      linalg.yield %r : f32
    }
    %max = memref.alloc() : memref<4xf32>
    linalg.fill ins(%low : f32) outs(%max : memref<4xf32>)
    linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<4xNxf32>) outs(%max : memref<4xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.maximumf %acc, %a : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#rows, #row, #row], iterator_types = ["parallel", "reduction"]}
        ins(%x, %max : memref<4xNxf32>, memref<4xf32>) outs(%sum : memref<4xf32>) {
    ^bb0(%a: f32, %m: f32, %acc: f32):
      %d = arith.subf %a, %m : f32
      %e = math.exp %d : f32
      %r = arith.addf %acc, %e : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#rows, #row, #row, #rows], iterator_types = ["parallel", "parallel"]}
        ins(%x, %max, %sum : memref<4xNxf32>, memref<4xf32>, memref<4xf32>) outs(%out : memref<4xNxf32>) {
    ^bb0(%a: f32, %m: f32, %s: f32, %o: f32):
      %d = arith.subf %a, %m : f32
      %e = math.exp %d : f32
      %r = arith.divf %e, %s : f32
      linalg.yield %r : f32
    }
    memref.dealloc %sum : memref<4xf32>
    memref.dealloc %max : memref<4xf32>
    return
  }
}
"""


def test_a_looping_normalizations_online_sum_reads_its_initial_value_before_the_combine() -> None:
    """The looping variant's online sum (softmax) with its initial value in memory: read in
    the maximum's pass, before the combines. Read where the total is rescaled (no barrier
    after it), lanes 1.. could take lane 0's total as their start: softmax off by half."""
    n = 20000  # more than a row of the held variant (1024 threads of 4 vectors of 4)
    record = _scheduled_from_buffers(_ONLINE_SUM_INIT_FROM_MEMORY.replace("xNx", f"x{n}x"))
    assert 'kind = "normalization"' in record["scheduled"]
    x, y = randn(4, n), randn(3, n)
    z, out = emulate(record["gpu"], [x, y], [np.empty_like(y), np.empty_like(x)])
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    assert_close(out, (e / e.sum(1, keepdims=True)).astype(np.float32), "softmax", n)
    assert (z == -y).all()


# Softmax's chain with, between the maximum and the online sum, a tile op reading a row buffer
# B from memory (out = x * B), and after the sum a row op writing B (B = sum). In the looping
# variant the sum is combined across the row in the maximum's pass: nothing at its own place
# ordered the lanes' loads of B before lane 0's store (found by review).
_ONLINE_SUM_THEN_ROW_WRITE = """
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#one = affine_map<(d0) -> (d0)>
module {
  func.func @mlirfuse_entry(%x: memref<4xNxf32>, %b: memref<4xf32>, %out: memref<4xNxf32>, %out2: memref<4xNxf32>)
      attributes {llvm.emit_c_interface} {
    %zero = arith.constant 0.0 : f32
    %low = arith.constant 0xFF800000 : f32
    %max = memref.alloc() : memref<4xf32>
    linalg.fill ins(%low : f32) outs(%max : memref<4xf32>)
    %sum = memref.alloc() : memref<4xf32>
    linalg.fill ins(%zero : f32) outs(%sum : memref<4xf32>)
    linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<4xNxf32>) outs(%max : memref<4xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.maximumf %acc, %a : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#rows, #row, #rows], iterator_types = ["parallel", "parallel"]}
        ins(%x, %b : memref<4xNxf32>, memref<4xf32>) outs(%out : memref<4xNxf32>) {
    ^bb0(%a: f32, %w: f32, %o: f32):
      %r = arith.mulf %a, %w : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#rows, #row, #row], iterator_types = ["parallel", "reduction"]}
        ins(%x, %max : memref<4xNxf32>, memref<4xf32>) outs(%sum : memref<4xf32>) {
    ^bb0(%a: f32, %m: f32, %acc: f32):
      %d = arith.subf %a, %m : f32
      %e = math.exp %d : f32
      %r = arith.addf %acc, %e : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#one, #one], iterator_types = ["parallel"]}
        ins(%sum : memref<4xf32>) outs(%b : memref<4xf32>) {
    ^bb0(%s: f32, %o: f32):
      linalg.yield %s : f32
    }
    linalg.generic {indexing_maps = [#rows, #row, #row, #rows], iterator_types = ["parallel", "parallel"]}
        ins(%x, %max, %sum : memref<4xNxf32>, memref<4xf32>, memref<4xf32>) outs(%out2 : memref<4xNxf32>) {
    ^bb0(%a: f32, %m: f32, %s: f32, %o: f32):
      %d = arith.subf %a, %m : f32
      %e = math.exp %d : f32
      %r = arith.divf %e, %s : f32
      linalg.yield %r : f32
    }
    memref.dealloc %sum : memref<4xf32>
    memref.dealloc %max : memref<4xf32>
    return
  }
}
"""


def test_a_looping_normalization_orders_row_reads_before_writes_after_its_online_sum() -> None:
    """`rescale_online` has a barrier, as a reduction's combine is one: every lane loads B for
    out = x * B before lane 0 writes the sum into B. Before, lanes 1.. read the sum (79680 of
    80000 elements wrong on the emulator)."""
    n = 20000  # the looping variant (see the test above)
    record = _scheduled_from_buffers(_ONLINE_SUM_THEN_ROW_WRITE.replace("xNx", f"x{n}x"))
    x, b = randn(4, n), np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    out, out2 = emulate(record["gpu"], [x, b.copy()], [np.empty_like(x), np.empty_like(x)])[:2]
    assert_close(out, x * b[:, None], "x times B as it was", 1)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    assert_close(out2, (e / e.sum(1, keepdims=True)).astype(np.float32), "softmax", n)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("shape,pad", [((12, 1000), 6), ((3, 5000), 7), ((5, 37), 3), ((12, 1024), 8)],
                         ids=["unaligned-6", "long-7", "small-3", "aligned-8"])
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_a_pad_of_a_normalization_is_written_in_place(shape, pad, dtype, dynamic) -> None:
    """BERT's masked-LM gradient padded for the matmul after it (cuBLAS's aligned sizes) and
    summed over rows (the decoder bias's gradient): the normalization writes the padded
    output's interior (rows of their own stride) and a small pointwise kernel its border,
    the column reduction reads the interior: no copy of the gradient into the padded buffer."""
    x = randn(*shape, dtype=dtype)

    def fn(x):
        y = ops.softmax(ops.cast(x, DataType.Float)) * 3.0 - 1.0
        y = ops.cast(y, x.dtype)
        return ops.pad(y, [0, pad]), ops.sum(ops.cast(y, DataType.Float), [0])

    c = check(fn, x, dynamic=dynamic, reduction_size=shape[0])
    kinds = [k.split(" (")[0] for k in schedules(c)]
    assert kinds == ["normalization", "pointwise", "column reduction"], c.stages["launch_params"]
    assert "memref.copy" not in c.stages["gpu"] and "strided<[" in c.stages["gpu"]


@pytest.mark.parametrize("low,high", [([0, 2], [0, 5]), ([1, 0], [2, 3]), ([0, 0], [3, 0])],
                         ids=["columns-both-sides", "rows-and-columns", "rows-after"])
def test_pads_in_place_fill_each_side_of_the_border(low, high) -> None:
    """Pads of a normalization's output on either side of either dim: the border boxes (one a
    padded side) filled, the interior written by the normalization where its rows are
    contiguous (padding the last dim on one side keeps them so), the values everywhere as
    the CPU backend's."""
    x = randn(20, 70)

    def fn(x):
        return ops.pad(ops.softmax(x) + 1.0, [low[1], high[1], low[0], high[0]], 0.5)

    c = check(fn, x)
    assert "naive" not in c.stages["launch_params"], c.stages["launch_params"]


@pytest.mark.parametrize("reader", ["inner-sum", "transposed", "column-sum"])
def test_a_padded_interior_read_by_other_kernels(reader) -> None:
    """The normalization's output written into the padded buffer is read from there by the
    region's other kernels (rows of their own stride): an inner reduction and a column
    reduction as [row, element] views, a transposed read element by element; none naive."""
    x = randn(12, 1000)

    def fn(x):
        y = ops.softmax(x) * 3.0
        other = {"inner-sum": lambda: ops.sum(ops.exp(y), [1]), "transposed": lambda: ops.permute(y, [1, 0]) * 2.0,
                 "column-sum": lambda: ops.sum(y * y, [0])}[reader]()
        return ops.pad(y, [0, 8]), other

    c = check(fn, x, reduction_size=1000)
    assert "naive" not in c.stages["launch_params"] and "strided<[" in c.stages["gpu"], c.stages["launch_params"]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("misalign", [None, {1: 2}], ids=["aligned", "output+2B"])
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_a_padded_interior_of_another_shape_is_written_in_vectors(dtype, misalign, dynamic) -> None:
    """A cross-entropy's gradient over logits[:, :-1] (a slice's backward: padded after the
    sequence's last row): the normalization's [B * (S - 1), V] rows, reshaped to [B, S - 1,
    V], are copied into the interior of the padded [B, S, V] output, whose rows are not one
    stride apart. That copy stored an element at a time (610 us for 262 MB bf16 on the
    H200); its rows are contiguous: vector stores where the host finds them aligned, the
    scalar variant else (a misaligned output)."""
    x = randn(6, 40, dtype=dtype)

    def fn(x):
        y = ops.cast(ops.softmax(ops.cast(x, DataType.Float)) * 3.0, x.dtype)
        return ops.pad(ops.reshape(y, [2, 3, 40]), [0, 0, 0, 1])

    c = check(fn, x, misalign=misalign, dynamic=dynamic, reduction_size=40)
    assert re.search(r"vector\.store .*memref<2x3x40x(f32|bf16), strided<\[160, 40, 1\]", c.stages["gpu"]), \
        c.stages["launch_params"]


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
@pytest.mark.parametrize("shape", [(2, 4, 24, 24), (3, 2, 5, 7)], ids=["vector", "scalar"])
def test_a_column_reduction_reading_row_values_broadcast_over_trailing_columns(shape, dynamic) -> None:
    """T5's relative position bias gradient under bf16 autocast: the softmax backward of
    [B, H, S, S] summed over the batch, the kernel computing `g * p - p * s` at each element
    with s the row sums [B, H, S] (read at the row and the first kept loops: at the column
    divided by the last extent, one value a vector). It was a naive launch ("operand 2 is not
    read by column")."""
    g, p = randn(*shape), randn(*shape)

    def fn(g, p):
        x = ops.cast(ops.cast(g, DataType.BFloat16), DataType.Float) * p
        t = x - p * ops.sum(x, [3], keepdim=True)
        return ops.cast(t, DataType.BFloat16), ops.sum(t, [0], keepdim=True)

    c = check(fn, g, p, dynamic=dynamic, reduction_size=shape[0] * shape[3])
    assert "naive" not in c.stages["launch_params"], c.stages["launch_params"]
    assert "column reduction" in c.stages["launch_params"]


def test_a_gather_takes_the_index_its_chain_computed_from_registers() -> None:
    """x.gather(2, x.argmax(2, keepdim=True)) and its variance over rows of one element, one
    normalization kernel of 128 rows a block for 2 rows (GPU fuzz seed 780106, on the H200:
    "gather index out of range"). The gather read its index from the buffer the chain's
    lane 0 stores it in; the threads past the last row, computing on row 0, read row 0's
    index before thread 0 stored it (the emulator runs threads one after another, so it
    never saw that). The index now comes from registers, where those threads hold the
    argmax's identity: their checks must pass, the emulator checks, as their results are
    not kept."""
    def fn(x):
        picked = ops.take_along_axis(x, ops.argmax(x, 2, keepdim=True), 2)
        return ops.var(picked, 2, keepdim=True, correction=0), ops.sigmoid(x)
    c = check(fn, randn(2, 1, 1))
    assert schedules(c)[0].startswith("normalization"), c.stages["launch_params"]
    assert not re.findall(r"memref.load [^\n]*xi64>", c.stages["gpu"]), "the index read from memory"


def test_a_chain_runs_before_a_kernel_whose_body_reads_its_row_values() -> None:
    """log_softmax(x, 1) catted with itself, and its exp after the cat (GPU fuzz seed 782456,
    the forward of a training step: the exp is saved for the backward). The chain reached
    past the cat to the exp, so its kernel ran where the exp was, after the cat's; the cat
    reads the chain's row maximum and log-sum in its body (its sources, at computed indices:
    not operands) and read memory nothing had written (the H200: 2.4e3 off; the emulator:
    NaN). A generic whose body reads the chain's buffers is not skipped."""
    def fn(x):
        u = x - ops.amax(x, 1, keepdim=True)
        logp = u - ops.log(ops.sum(ops.exp(u), 1, keepdim=True))
        return ops.cat([logp, logp], 0), ops.exp(logp)
    c = check(fn, randn(2, 5, 1))
    assert schedules(c) == ["normalization (row, reduce, row, reduce, row)", "pointwise"], c.stages["launch_params"]


LOCKSTEP_CASES = [
    ("layer norm, rows of 300", lambda x: ops.var(x, [-1], keepdim=True, correction=0) + x, (randn(9, 300),), None),
    ("column sums, a last block", lambda x: ops.sum(x, [0]), (randn(700, 40),), None),
    ("whole-tensor sum", lambda x: ops.sum(x * x), (randn(3, 1000),), None),
    ("transpose", lambda x: ops.permute(x, [1, 0]) * 2.0, (randn(70, 40),), None),
    ("vectors, misaligned", lambda x: ops.exp(x) + 1.0, (randn(6, 64),), {0: 4}),
    ("argmax and gather", lambda x: ops.take_along_axis(x, ops.argmax(x, 1, keepdim=True), 1) * x,
     (randn(5, 77),), None),
    ("integer division", lambda a, b: (a // b, a % b), (RNG.integers(-50, 50, (4, 33)).astype(np.int32),
                                                        RNG.integers(1, 9, (4, 33)).astype(np.int32)), None),
]


@pytest.mark.parametrize("name,fn,args,misalign", LOCKSTEP_CASES, ids=[c[0] for c in LOCKSTEP_CASES])
def test_lockstep_and_per_thread_emulation_agree_bitwise(name, fn, args, misalign, monkeypatch) -> None:
    """The emulator's two ways to run a block (its threads in lockstep, the default; one after
    another, `EMULATOR_PER_THREAD`), both with the race check on, give bit-equal outputs: loops
    whose bounds differ across threads, branches, shuffles, barriers, atomics and the last
    block's combine, vector accesses of the scalar variant, integer division."""
    import gpu_emulator

    compiled, lockstep, want = on_emulated_gpu(fn, *args, misalign=misalign)
    monkeypatch.setattr(gpu_emulator, "PER_THREAD", True)
    _, per_thread, _ = on_emulated_gpu(fn, *args, misalign=misalign)
    for a, b in zip(lockstep, per_thread):
        assert a.dtype == b.dtype and np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)), name
    for k, (g, w) in enumerate(zip(lockstep, want)):
        assert_close(g, w, f"output {k}", 1000)
