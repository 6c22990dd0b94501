"""GPU schedules: the heuristics as plain functions, the kernels' IR and PTX (no GPU needed),
and (with `-m gpu`) their numerics on the edges the schedules create: vector vs scalar
variants, partial blocks, broadcasts, row-length tiers, 8/16/32/64-bit accumulators."""

from __future__ import annotations

import logging
import re

import ml_dtypes
import numpy as np
import pytest

import mlirfuse
from mlirfuse import ops
from mlirfuse.dtypes import DataType
from mlirfuse.lowering.gpu import toolchain
from mlirfuse.lowering.gpu.heuristics import (
    ColumnReductionParams,
    DeviceProperties,
    InnerReductionParams,
    NormalizationParams,
    PointwiseParams,
    RowTier,
    TransposeParams,
    column_reduction_heuristic,
    column_unroll,
    device_properties,
    inner_reduction_heuristic,
    normalization_heuristic,
    pointwise_heuristic,
    transpose_heuristic,
    vector_width,
)

needs_libdevice = pytest.mark.skipif(toolchain.find().libdevice is None,
                                     reason="no libdevice (CUDA toolkit or nvidia-cuda-nvcc wheel)")
H100 = DeviceProperties("sm_90", 132, 2048)


# -- heuristics ----------------------------------------------------------------------------
@pytest.mark.parametrize("sizes,width", [([4], 4), ([4, 4, 4], 4), ([2], 8), ([2, 4], 4),
                                         ([8], 2), ([1], 16), ([1, 4], 4), ([], 4)])
def test_vector_width_is_16_bytes_of_the_widest_operand(sizes, width) -> None:
    assert vector_width(sizes) == width


def test_pointwise_defaults_move_64_bytes_per_operand_per_thread() -> None:
    p = pointwise_heuristic(None, [4, 4], H100)
    assert p == PointwiseParams(vector=4, unroll=4, block=256)
    assert p.vector * 4 == 16 and p.vector * p.unroll * 4 == 64
    half = pointwise_heuristic(None, [2, 2], H100)
    assert (half.vector, half.unroll) == (8, 4)
    assert pointwise_heuristic(1 << 24, [4, 4], H100) == p  # large static sizes: the same


def test_pointwise_small_static_sizes_keep_the_sms_busy() -> None:
    tiny = pointwise_heuristic(1000, [4, 4], H100)
    assert tiny.unroll == 1 and tiny.block == 64
    mid = pointwise_heuristic(132 * 2 * 256 * 4 * 2, [4, 4], H100)  # two waves at unroll 2
    assert mid.unroll == 2 and mid.block == 256
    assert -(-(132 * 2 * 256 * 4 * 2) // mid.elements_per_block) >= 2 * H100.sm_count


def test_pointwise_unrolls_less_for_many_operands_and_big_bodies() -> None:
    assert pointwise_heuristic(None, [4] * 12, H100).unroll == 2
    assert pointwise_heuristic(None, [4, 4], H100, body_ops=8).unroll == 4  # 128 ops unrolled
    assert pointwise_heuristic(None, [4, 4], H100, body_ops=40).unroll == 1
    assert pointwise_heuristic(None, [2, 2], H100, body_ops=10).unroll == 2  # 8 halves a vector


def test_inner_reduction_tiers_go_from_a_thread_to_a_block_per_row() -> None:
    p = inner_reduction_heuristic(None, None, [4], H100)
    assert (p.vector, p.unroll, p.block) == (4, 4, 512)
    assert p.tiers[0] == RowTier(16, 1)  # a thread per row: 512 rows per block
    assert RowTier(512, 32) in p.tiers  # a warp per row
    assert p.tiers[-1] == RowTier(None, 512)  # a block per row
    threads = [t.threads for t in p.tiers]
    assert threads == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert all(p.block % t == 0 for t in threads)
    # each thread loads `unroll` vectors of a row that fills its tier:
    assert all(t.max_row == t.threads * p.vector * p.unroll for t in p.tiers[:-1])
    assert p.tier(1).threads == 1 and p.tier(128).threads == 8 and p.tier(513).threads == 64
    assert p.tier(4096).threads == 256 and p.tier(32768).threads == 512


def test_inner_reduction_static_rows_get_one_tier() -> None:
    p = inner_reduction_heuristic(4096, 32768, [4], H100)
    assert p == InnerReductionParams(4, 4, 512, (RowTier(None, 256),))
    bf16 = inner_reduction_heuristic(None, None, [2], H100)
    assert bf16.vector == 8 and bf16.tier(4096).threads == 128
    wide = inner_reduction_heuristic(None, None, [8], H100, body_ops=100)
    assert wide.vector == 2 and wide.unroll == 1


def test_inner_reduction_cuts_few_long_rows() -> None:
    """Dynamic shapes: rows may be cut at run time (two blocks per SM, chunks of 4 unrolled
    block steps); static ones only where they are few and long enough for two chunks."""
    p = inner_reduction_heuristic(None, None, [4], H100)
    assert (p.split_blocks, p.min_chunk) == (264, 4 * 512 * 4 * 4)
    assert inner_reduction_heuristic(1 << 20, 8, [4], H100).split_blocks == 264
    assert inner_reduction_heuristic(1 << 20, 264, [4], H100).split_blocks == 0  # enough rows
    assert inner_reduction_heuristic(40000, 8, [4], H100).split_blocks == 0  # under two chunks
    assert inner_reduction_heuristic(None, None, [2], H100).min_chunk == 4 * 512 * 8 * 4


def test_column_reduction_a_warp_across_columns_and_four_blocks_an_sm() -> None:
    p = column_reduction_heuristic(None, None, [4], H100)
    assert p == ColumnReductionParams(vector=4, unroll=4, block_x=32, block_y=8, target_blocks=132 * 4,
                                      min_rows_per_thread=16, registers=64)  # at least 16 rows a thread
    assert column_reduction_heuristic(None, None, [4], H100, body_ops=40).min_rows_per_thread == 16
    assert p.block == 256 and p.block_x * p.vector * 4 == 512  # a warp reads 512 contiguous bytes of a row
    narrow = column_reduction_heuristic(6, None, [4], H100)  # 6 columns: 2 lanes' vectors, more rows
    assert (narrow.block_x, narrow.block_y) == (4, 64)
    assert column_reduction_heuristic(None, None, [2], H100).vector == 8
    assert column_reduction_heuristic(None, None, [4], H100, body_ops=40).unroll == 1
    # rows in flight for the vectors a row loads: 4 up to 4 of them, else 2
    assert [column_unroll(4, n, 1) for n in (1, 2, 4, 5, 9)] == [4, 4, 4, 2, 2]
    assert column_reduction_heuristic(None, None, [4] * 5, H100).unroll == 2
    # Few static rows (a sum over a batch of 8): more lanes across, each thread summing them all,
    # while the column blocks stay two an SM (bfloat16's 16-byte vectors: 128 lanes, 384 blocks)
    few = column_reduction_heuristic(512 * 768, 8, [4], H100)
    assert (few.block_x, few.block_y) == (256, 1)
    assert (column_reduction_heuristic(512 * 768, 64, [4], H100).block_x,
            column_reduction_heuristic(512 * 768, 4096, [4], H100).block_x,
            column_reduction_heuristic(None, 8, [4], H100).block_x,
            column_reduction_heuristic(512 * 768, 8, [2], H100).block_x,
            column_reduction_heuristic(4096, 8, [4], H100).block_x) == (64, 32, 32, 128, 32)
    # one row (a sum over a batch of one), columns unknown: one row of threads all the same
    assert (column_reduction_heuristic(None, 1, [4], H100).block_x,
            column_reduction_heuristic(4096, 1, [4], H100).block_x) == (256, 32)


def test_a_batch_of_column_reductions_takes_fewer_lanes_for_one_slice() -> None:
    """x.sum(1) of [B, R, C]: where 32 lanes give too few column blocks for the slices'
    target (528 on the H100), 8 lanes, if their blocks then make one slice and each of the 32
    rows of threads has 16 rows; float32 only (bfloat16 lost). Of dynamic extents, the kernel
    carries both geometries (`narrow_block_x`) and the host chooses."""
    lanes = lambda c, r, b, e=4: column_reduction_heuristic(c, r, [e], H100, batch=b).block_x  # noqa: E731
    assert lanes(256, 1024, 64) == 8  # 512 blocks of 8 lanes: one slice
    assert lanes(64, 512, 512) == 8  # (16 lanes already: 64 columns)
    assert lanes(256, 256, 64) == 32  # 8 rows a row of threads
    assert lanes(512, 2048, 32, 2) == 32  # bfloat16
    assert lanes(128, 4096, 4) == 32  # 8 lanes: 64 blocks, still slices
    assert lanes(1024, 32768, 1) == 32 and lanes(1 << 15, 4096, 1) == 8  # x.sum(0): the same rule
    dynamic = column_reduction_heuristic(None, None, [4], H100, batch=None)
    assert (dynamic.block_x, dynamic.narrow_block_x, dynamic.narrowed().block_y) == (32, 8, 32)
    assert column_reduction_heuristic(256, None, [4], H100, batch=64).narrow_block_x == 8
    assert column_reduction_heuristic(None, None, [4], H100).narrow_block_x == 0  # no batch: x.sum(0)
    assert column_reduction_heuristic(None, None, [2], H100, batch=None).narrow_block_x == 0
    assert column_reduction_heuristic(32, None, [4], H100, batch=None).narrow_block_x == 0  # 8 lanes already


def test_the_narrow_column_geometry_keeps_eight_rows_in_flight() -> None:
    """8 lanes and one slice leave a thread R / 32 rows of its batch: 8 rows in flight where
    their loads fit (16 vectors), else fewer; the wide geometry keeps 4."""
    static = column_reduction_heuristic(256, 1024, [4], H100, batch=64)
    assert (static.block_x, static.unroll) == (8, 8)
    assert column_reduction_heuristic(256, 256, [4], H100, batch=64).unroll == 4  # 32 lanes: 4 rows
    dynamic = column_reduction_heuristic(None, None, [4], H100, batch=None)
    assert (dynamic.unroll, dynamic.narrow_unroll, dynamic.narrowed().unroll) == (4, 8, 8)
    assert (dynamic.narrowed().narrow_block_x, dynamic.narrowed().narrow_unroll) == (0, 0)
    assert column_reduction_heuristic(None, None, [4, 4], H100, batch=None).narrow_unroll == 8  # 16 loads
    assert column_reduction_heuristic(None, None, [4] * 3, H100, batch=None).narrow_unroll == 4
    assert column_reduction_heuristic(None, None, [4] * 5, H100, batch=None).narrow_unroll == 2
    assert column_reduction_heuristic(None, None, [4], H100).narrow_unroll == 0  # x.sum(0): no narrow geometry
    # (the loads' rule, as it was for the wide geometry: 4 rows up to 4 vectors a row, else 2)
    assert [column_unroll(4, n, 1) for n in (1, 4, 5, 9)] == [4, 4, 2, 2]
    assert column_unroll(4, 1, 16, most=8) == 4  # 8 x 4 x 16 ops over the unrolled budget


def test_a_column_reduction_is_capped_at_the_registers_its_target_blocks_leave() -> None:
    """The slices aim for half a wave: 4 blocks of 256 threads an SM on sm_90, which leave 64
    registers a thread (ptxas, left to itself, took 48 and spilled); 1536 threads an SM: 80."""
    assert column_reduction_heuristic(None, None, [4], H100).registers == 64
    assert column_reduction_heuristic(256, 1024, [2], H100, batch=8).registers == 64
    assert column_reduction_heuristic(None, None, [4], device_properties("sm_86")).registers == 80


@pytest.mark.parametrize("change,message", [
    ({"loop_threads": 100}, "loop_threads of 100 threads, not a power of two"),
    ({"loop_threads": 2048}, "loop_threads of 2048 threads"),
    ({"loop_slots": 0}, "loop_slots 0"),
    ({"tiers": (RowTier(None, 96),)}, "tier of 96 threads, not a power of two"),
    ({"registers": 72}, "72 registers a thread in blocks of 1024"),
    ({"registers": 300}, "300 registers a thread"),
])
def test_a_normalization_schedule_written_by_hand_keeps_rows_in_powers_of_two(change, message) -> None:
    """Rows of a normalization kernel share blocks and warps (block // threads rows a block,
    butterflies over the row's lanes): a hand-written schedule whose row threads are not a
    power of two up to the block, or that loops over no vectors, is refused when read."""
    import dataclasses

    from mlir import ir

    from mlirfuse.lowering.gpu import schedule_attrs

    params = normalization_heuristic(None, None, [4], H100)
    with ir.Context():
        assert schedule_attrs.read(schedule_attrs.to_attr("normalization", params)) == ("normalization", params)
        with pytest.raises(mlirfuse.FusionError, match=re.escape(message)):
            schedule_attrs.read(schedule_attrs.to_attr("normalization", dataclasses.replace(params, **change)))


@pytest.mark.parametrize("change,message", [
    ({"unroll": 0}, "unroll 0 (at least 1)"),
    ({"narrow_unroll": -1}, "narrow_unroll -1"),
    ({"narrow_block_x": 12}, "narrow_block_x 12 must be 0 or a power of two under block_x (32)"),
    ({"narrow_block_x": 32}, "narrow_block_x 32 must be 0 or a power of two under block_x (32)"),
    ({"registers": 300}, "a cap of 300 registers a thread in blocks of 256"),
    ({"registers": 255, "block_y": 32}, "a cap of 255 registers a thread in blocks of 1024"),
])
def test_a_column_schedule_written_by_hand_is_checked(change, message) -> None:
    """A hand-written column-reduction schedule with no rows in flight (a loop that would not
    advance), or a narrow geometry no narrower than the wide one, is refused when read; the
    heuristic's own round-trips."""
    import dataclasses

    from mlir import ir

    from mlirfuse.lowering.gpu import schedule_attrs

    params = column_reduction_heuristic(None, None, [4], H100, batch=None)
    with ir.Context():
        assert schedule_attrs.read(schedule_attrs.to_attr("column_reduction", params)) == ("column_reduction", params)
        with pytest.raises(mlirfuse.FusionError, match=re.escape(message)):
            schedule_attrs.read(schedule_attrs.to_attr("column_reduction", dataclasses.replace(params, **change)))


def test_normalization_holds_rows_of_16k_float32_and_32k_bfloat16_in_registers() -> None:
    p = normalization_heuristic(None, None, [4], H100)
    assert (p.vector, p.slots, p.block, p.min_block, p.loop_slots, p.loop_threads) == (4, 4, 1024, 128, 4, 256)
    assert [t.threads for t in p.tiers] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert all(t.max_row == t.threads * p.vector * p.slots for t in p.tiers[:-1])
    assert p.tier(16).threads == 1 and p.tier(1024).threads == 64 and p.tier(4096).threads == 256
    assert p.tier(16384).threads == 1024 and p.max_persistent_row == 16384
    bf16 = normalization_heuristic(None, None, [2], H100)
    assert bf16.vector == 8 and bf16.max_persistent_row == 32768 and bf16.tier(4096).threads == 128
    assert bf16.loop_slots == 2  # the looping variant's chunk: 4 x 4 elements either way, in 16-byte loads
    assert normalization_heuristic(30522, None, [2], H100).loop_slots == 2
    assert normalization_heuristic(None, None, [1], H100).loop_slots == 1
    mixed = normalization_heuristic(None, None, [2, 4], H100)  # the widest operand sets the vector
    assert mixed.vector == 4


def test_normalization_blocks_hold_several_short_rows_within_the_register_cap() -> None:
    p = normalization_heuristic(None, None, [4], H100)
    # Short rows share blocks of 128 threads; longer ones have a block each.
    assert p.block_for(16) == 128 and p.block_for(128) == 128 and p.block_for(512) == 512
    assert p.block_for(1024) == 1024
    # Compiled for blocks of up to 1024 threads: 64 registers a thread (65536 per SM).
    assert p.max_registers == 64


def test_normalization_registers_follow_what_a_thread_holds() -> None:
    """A bfloat16 LayerNorm keeps its float32 row and loads both columns (8 bytes an element,
    32 elements a thread): 88 registers, so that ptxas does not spill them, and blocks of at
    most 512 threads (rows of up to 16K elements held). What needs at most 72 keeps 64 (and
    blocks of 1024)."""
    ln = normalization_heuristic(None, None, [2], H100, held_bytes=8)
    assert (ln.registers, ln.block, ln.tiers[-1].threads, ln.max_persistent_row) == (88, 512, 512, 16384)
    softmax = normalization_heuristic(None, None, [2], H100, held_bytes=4)
    assert (softmax.registers, softmax.block) == (64, 1024)
    assert normalization_heuristic(None, None, [4], H100, held_bytes=16).registers == 88
    # a static row of 768: 3 slots, so fewer registers (72: a few spills cost less than warps)
    assert normalization_heuristic(768, None, [2], H100, held_bytes=8).registers == 64
    assert normalization_heuristic(None, None, [2], H100, held_bytes=6).registers == 64  # RMSNorm's 72
    wide = normalization_heuristic(None, None, [2], H100, held_bytes=64)  # capped at 255: blocks of 256
    assert (wide.registers, wide.block) == (255, 256)


def test_normalization_static_rows_get_one_tier() -> None:
    assert normalization_heuristic(4096, None, [4], H100) == NormalizationParams(4, 4, 1024, (RowTier(None, 256),),
                                                                                 4, 256)
    assert normalization_heuristic(100000, None, [4], H100).tiers == (RowTier(None, 1024),)  # the looping variant


def test_normalization_static_rows_hold_only_the_slots_they_fill() -> None:
    """GPT-2's and BERT's 768-wide bfloat16 rows, short rows (`SHORT_ROW`): two warps of
    8-element vectors, 2 slots each (the second half full); rows over `SHORT_ROW` elements
    take the tier of `PERSISTENT_SLOTS`, filled as far as the row goes; rows of dynamic length
    keep the tiers of 4 slots."""
    p = normalization_heuristic(768, None, [2], H100)
    assert (p.vector, p.slots, p.tiers) == (8, 2, (RowTier(None, 64),))
    assert normalization_heuristic(1024, None, [4], H100).tiers == (RowTier(None, 128),)  # 2 slots of 4
    assert normalization_heuristic(1000, None, [2], H100).slots == 2
    assert normalization_heuristic(2048, None, [2], H100).tiers == (RowTier(None, 64),)  # 4 slots of 8
    assert normalization_heuristic(1536, None, [2], H100).slots == 3
    assert normalization_heuristic(8, None, [4], H100).slots == 2  # one thread, two vectors
    assert normalization_heuristic(None, None, [4], H100).tier(1024).threads == 64


def test_transpose_squares_are_8_vectors_of_16_bytes_a_side() -> None:
    p = transpose_heuristic([4, 4], [4], H100)
    assert p == TransposeParams(vector=4, tile=32, block=256, squares=4)  # 64 threads a square
    assert p.shared_bytes([4]) == 4 * 32 * 33 * 4  # rows padded by one element
    assert transpose_heuristic([2, 2], [2], H100) == TransposeParams(8, 64, 256, 2)
    assert transpose_heuristic([8, 8], [8], H100) == TransposeParams(2, 16, 256, 8)  # 8 lanes x 4 rows, 4 steps
    assert transpose_heuristic([1, 1], [1], H100) == TransposeParams(16, 128, 256, 1)
    for p in (transpose_heuristic([b, b], [b], H100) for b in (1, 2, 4, 8)):
        assert p.tile * p.tile // p.vector == 4 * (p.block // p.squares)  # each thread's 4 vectors in flight
    assert transpose_heuristic([2, 4], [2], H100).vector == 4  # the widest operand sets the vector


def test_transpose_squares_shrink_to_fit_shared_memory() -> None:
    many = transpose_heuristic([1] * 4, [1] * 4, H100)  # 4 x 128 x 129 bytes > 48 KiB
    assert many.vector == 8 and many.shared_bytes([1] * 4) <= 48 * 1024
    for p in (many, transpose_heuristic([4] * 20, [4] * 20, H100)):
        assert p.tile == 8 * p.vector and p.block <= 256 and p.tile % (p.block // p.squares // 8) == 0


def test_device_properties_per_architecture() -> None:
    assert device_properties("sm_80").sm_count == 108
    assert device_properties("sm_90") == H100
    assert device_properties("sm_999").sm_count == 132


# -- IR and PTX (no GPU) --------------------------------------------------------------------
X = np.ones((4, 8), np.float32)


def _last_axis(name: str):
    return lambda t: getattr(ops, name)(t, [-1])


def compiled(fn, *args, dynamic: bool = True):
    return mlirfuse.jit(fn, dynamic=dynamic).compile(*args, backend="gpu", arch="sm_90")


@needs_libdevice
def test_pointwise_float32_uses_128_bit_loads_and_stores() -> None:
    c = compiled(lambda x: ops.relu(x + 1.0), X)
    assert re.search(r"ld\.global\.v4\.[bf]32", c.ptx) and re.search(r"st\.global\.v4\.[bf]32", c.ptx)
    assert "vector.load" in c.stages["gpu"] and "{alignment = 16 : i64}" in c.stages["gpu"]
    assert c.n_launches == 1
    assert re.fullmatch(r"launch 0 gridDim=\(\?, 1, 1\) blockDim=\(256, 1, 1\): pointwise: .*",
                        c.stages["launch_params"])


@needs_libdevice
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_pointwise_16_bit_moves_8_elements_per_vector(dtype) -> None:
    c = compiled(lambda x, y: x * y + 1.0, X.astype(dtype), X[0].astype(dtype))
    assert "vector<8x" in c.stages["gpu"] and "ld.global.v4.b32" in c.ptx


@needs_libdevice
def test_inner_reduction_uses_shuffle_butterflies_and_shared_memory() -> None:
    c = compiled(lambda x: x.sum(-1), X)
    assert c.ptx.count("shfl.sync.bfly") >= 10  # within warps, then across a row's warps
    assert "bar.sync" in c.ptx and re.search(r"ld\.global\.v4\.[bf]32", c.ptx)
    # the fill is folded into the reduction; where rows are cut, their last blocks add the chunks
    assert c.stages["gpu"].count("gpu.launch blocks") == 1 and "atom.global.add.u32" in c.ptx
    assert "inner reduction" in c.stages["launch_params"]


@needs_libdevice
@pytest.mark.parametrize("name", ["max", "min", "prod", "mean", "var"])
@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.bool_])
def test_inner_reductions_of_every_dtype_compile(name, dtype) -> None:
    if name in ("mean", "var") and np.dtype(dtype).kind in "ib" or name == "prod" and dtype is np.bool_:
        pytest.skip("not defined for this dtype")
    c = compiled(_last_axis(name), X.astype(dtype))
    kernel = "normalization" if name == "var" else "inner reduction"  # var: mean, deviations, sum
    assert kernel in c.stages["launch_params"] and "shfl.sync.bfly" in c.ptx


@needs_libdevice
def test_a_row_shared_by_all_rows_is_a_row_operand() -> None:
    c = compiled(lambda x, w: (x * w).sum(-1), X, X[0])
    assert "naive" not in c.stages["launch_params"]


@needs_libdevice
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int64])
def test_column_reduction_splits_rows_and_its_last_blocks_combine_the_partials(dtype) -> None:
    c = compiled(lambda x: ops.max(x, [0]), X.astype(dtype))
    lines = c.stages["launch_params"].splitlines()
    sixteen_bit = np.dtype(dtype).itemsize == 2  # accumulates in float32: then a cast back (its epilogue)
    # one launch: the output's fill folded in, the partials combined by each column block's
    # last block (counted with an atomic after a fence; the counters zeroed by a memset)
    assert c.n_launches == 1 and ": column reduction: ColumnReductionParams(" in lines[0]
    assert "the last block of each column block combines its partials in a fixed order" in lines[0]
    assert ("with its pointwise epilogue" in lines[0]) == sixteen_bit
    assert "membar.gl" in c.ptx and "atom.global.add.u32" in c.ptx and "mgpuMemset32" in c.stages["llvm"]
    # workspace and counters (+ f32 result)
    assert "bar.sync" in c.ptx and c.stages["gpu"].count("gpu.alloc") == 2 + sixteen_bit
    if np.dtype(dtype).itemsize <= 4:
        assert re.search(r"ld\.global\.v4\.[bf]32", c.ptx)


@needs_libdevice
def test_column_operands_in_16_byte_vectors_load_evict_first() -> None:
    """A column reduction reads each column operand once: in 16-byte vectors those loads are
    `ld.global.cs` (evict-first, `gpu-streaming-loads`); narrower vectors (a column count
    no 4-element vector divides) stay plain loads, as the workspace's partials do."""
    wide = compiled(lambda x: x.sum(1), np.ones((4, 64, 256), np.float32))
    assert wide.stages["gpu"].count("nontemporal = true") == wide.ptx.count("ld.global.cs.v4.b32") > 0
    assert re.search(r"ld\.global\.v4\.b32", wide.ptx)  # the partials, combined by the last blocks
    narrow = compiled(lambda x: x.sum(0), np.ones((64, 30522), np.float32), dynamic=False)
    assert "ld.global.v2.b32" in narrow.ptx and "ld.global.cs" not in narrow.ptx
    assert "ld.global.cs" not in compiled(_layer_norm, np.ones((8, 1024), np.float32), np.ones(1024, np.float32),
                                          np.ones(1024, np.float32)).ptx


def _layer_norm(x, w, b):
    d = x - x.mean(-1, keepdim=True)
    return d * ops.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * w + b


def _softmax(x):
    e = ops.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def _rms_norm(x, w):
    return x * ops.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w


@needs_libdevice
@pytest.mark.parametrize("fn,args,kinds,held_bytes", [
    (_layer_norm, (X, X[0], X[0]), "row, row, reduce, reduce, tile", 12),  # x across; then w, b
    (_softmax, (X,), "row, reduce, tile, row, reduce, tile", 4),
    (_rms_norm, (X, X[0]), "row, reduce, tile", 8),
    (lambda x: ops.var_mean(x, [-1]), (X.reshape(2, 2, 8),), "row, row, reduce, row, reduce, row", 4),
], ids=["layer_norm", "softmax", "rms_norm", "var_mean_3d"])
def test_normalizations_are_one_kernel_without_temporaries(fn, args, kinds, held_bytes) -> None:
    """One launch a call: the kernel's three variants (rows held in registers; rows too long
    or unaligned looping over chunks in vectors from each row's first aligned element; those
    of misaligned buffers an element at a time) are three kernel functions, launched one
    instead of the others."""
    c = compiled(fn, *args)
    held, vectors, looping = c.stages["launch_params"].splitlines()
    assert held.startswith("launch 0 ") and held.endswith(
        f"normalization ({kinds}): " + repr(normalization_heuristic(None, None, [4], H100, held_bytes)))
    online = "; sums of exp(u - r) in the pass before" if fn is _softmax else ""  # one pass fewer
    assert vectors.startswith("launch 0 (or) ") and vectors.endswith(
        ": normalization: the looping variant in vectors from each row's first aligned element" + online)
    assert looping.startswith("launch 0 (or) ") and looping.endswith(": normalization: the looping variant, "
                                                                     "for rows too long to hold or unaligned" + online)
    assert c.n_launches == 1 and c.kernel.module.n_kernels == 3 and c.ptx.count(".entry") == 3
    assert "gpu.alloc" not in c.stages["gpu"]  # the totals and centred rows stay in registers
    assert c.ptx.count("ld.global.v4") >= 5 and "shfl.sync.bfly" in c.ptx and ".local" not in c.ptx
    # the host picks the block: up to what the register cap (what a thread holds) allows
    registers = normalization_heuristic(None, None, [4], H100, held_bytes).registers
    assert c.ptx.count(f".maxnreg {registers}") == 3


@needs_libdevice
@pytest.mark.parametrize("name", ["bias-dropout-add-LayerNorm", "bias-dropout-add-RMSNorm"])
def test_normalization_with_dropout_writes_no_temporary(name) -> None:
    """The sum y = dropout(x + b) + r is only read inside the kernel: it stays in registers.
    (The chain's own extents once read the size of y's buffer, which kept it allocated and
    written: 32 MB of extra stores per call at 64 x 128 x 1024.)"""
    from mlirfuse.workloads import WORKLOADS

    w = next(w for w in WORKLOADS if w.name == name)
    c = compiled(w.jit_fn, *w.make_inputs(w.small, np.random.default_rng(0)))
    assert c.n_launches == 1 and "gpu.alloc" not in c.stages["gpu"]


@needs_libdevice
def test_normalization_writes_intermediates_other_ops_read() -> None:
    """The mean and the centred rows are outputs too: written, once, by the same kernel."""
    c = compiled(lambda x: (_layer_norm(x, 1.0, 0.0), x.mean(-1), x - x.mean(-1, keepdim=True)), X)
    assert c.n_launches == 1 and "gpu.alloc" not in c.stages["gpu"]
    assert c.ptx.count(".entry") == 3 and "st.global.v4" in c.ptx  # the held and the two looping variants


@needs_libdevice
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_dropout_in_a_normalization_makes_one_philox_call_per_4_elements(monkeypatch, dynamic) -> None:
    """Rows aligned to the vector give 4 consecutive elements consecutive random indices, the
    first a multiple of 4: they share one Philox4x32 call (its 4 words). Numerics: the
    GPU test below compares with the CPU backend bit for bit on the mask. Static sizes too,
    whose random index multiplies the row loops by constants (an nvFuser definition's
    sizes): bias-dropout-add-LayerNorm 64x128x1024 made 4 calls where 1 would do, 40.5 us
    against 34.4 with dynamic sizes (H200, session 74)."""
    from mlirfuse.lowering.gpu import normalization_kernel

    def dropout_layer_norm(x, w):
        return _layer_norm(ops.where(ops.rand_like(x, seed=9) >= 0.1, x * 1.1, 0.0) + w, w, w)

    def rounds(ptx: str) -> int:
        return len(re.findall(r"\bxor\.b32\b", ptx))

    shared = compiled(dropout_layer_norm, X.reshape(2, 2, 8), X[0], dynamic=dynamic)
    monkeypatch.setattr(normalization_kernel, "share_philox", lambda cloned: None)
    unshared = compiled(dropout_layer_norm, X.reshape(2, 2, 8), X[0], dynamic=dynamic)
    # held-row variant (the first kernel): 4 vectors of 4 -> 4 calls instead of 16 (the
    # looping variants keep theirs: a shifted row's vectors do not start at multiples of 4)
    held = [ptx.split(".entry")[1] for ptx in (shared.ptx, unshared.ptx)]
    assert rounds(held[0]) < 0.6 * rounds(held[1])


@needs_libdevice
def test_every_kernel_of_a_fusion_is_in_one_gpu_module() -> None:
    """One module: libdevice linked, LLVM and ptxas run, and the binary loaded once a fusion."""
    c = compiled(lambda x, w: ((x * w).sum((0, 1)), ops.exp(x).sum(-1)), X.reshape(2, 2, 8), X[0])
    entries = re.findall(r"\.entry (\w+)\(", c.ptx)
    # column reduction, inner reduction (both outputs' fills folded in)
    assert entries == [f"mlirfuse_entry_kernel_{k}" for k in range(c.n_launches)] and c.n_launches == 2
    assert c.stages["llvm"].count("gpu.binary @") == 1
    launched = re.findall(r"gpu\.launch_func .*?@(\w+)::@(\w+)", c.stages["llvm"])
    assert launched == [("mlirfuse_entry_kernel", name) for name in entries]


@needs_libdevice
def test_what_no_schedule_takes_stays_naive_and_counts_its_launches() -> None:
    # A row sum of x + y^T: operands reading the loops in different orders (a middle-axis
    # sum, the naive example before, is a batch of column reductions now).
    c = compiled(lambda x, y: ((x + ops.permute(x, [1, 0])).sum(1), ops.permute(y, [1, 0])), X[:, :4].copy(), X)
    notes = c.stages["launch_params"].splitlines()
    assert sum(": naive: " in n for n in notes) == 1 and sum(": transpose: " in n for n in notes) == 1
    assert c.n_launches == len(notes) == c.stages["gpu"].count("gpu.launch blocks")


@needs_libdevice
def test_a_naive_kernel_is_logged_with_why_as_a_warning(caplog) -> None:
    """The naive path is a fallback (one thread an element): a compile taking it says so where
    a user sees it, with the reason each schedule gave, once per kernel."""
    with caplog.at_level(logging.WARNING, logger="mlirfuse"):
        compiled(lambda x, y: (x + ops.permute(x, [1, 0])).sum(1) * y.sum(), X[:, :4].copy(), X)
    naive = [r for r in caplog.records if r.name == "mlirfuse.schedules" and "naive" in r.getMessage()]
    assert len(naive) == 1 and naive[0].levelno == logging.WARNING, caplog.text
    assert "operand 1 is not a contiguous row ([1, 0])" in naive[0].getMessage()


# -- numerics on the GPU ------------------------------------------------------------------
# Compiled once each (dynamic shapes: one kernel serves every size and alignment).
RELU_ADD = mlirfuse.jit(lambda x: ops.relu(x + 1.0))
BIAS_SCALE = mlirfuse.jit(lambda a, b, c: (a + b) * c)
SUBTRACT = mlirfuse.jit(lambda a, b: a - b)
ROW_SUM = mlirfuse.jit(lambda t: t.sum(-1))
ROW_MAX = mlirfuse.jit(lambda t: ops.max(t, [-1]))
ROW_VAR = mlirfuse.jit(lambda t: ops.var(t, [-1], keepdim=True))
ROW_REDUCTIONS = {name: mlirfuse.jit(_last_axis(name)) for name in ("sum", "max", "min")}


def _torch():
    return pytest.importorskip("torch")


def _misaligned(torch, shape, dtype):
    """A contiguous tensor whose data pointer is one element past a 16-byte boundary."""
    n = int(np.prod(shape))
    base = torch.randn(n + 1, device="cuda").to(dtype)
    return base[1:].view(*shape)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 3, 4, 255, 1024, 4096, 4100, 65536 * 4 + 8, (1 << 20) + 3])
def test_pointwise_sizes_and_alignments(n) -> None:
    torch = _torch()
    for x in (torch.randn(n, device="cuda"), _misaligned(torch, (n,), torch.float32)):
        torch.testing.assert_close(RELU_ADD(x), torch.relu(x + 1.0))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32", "int64"])
@pytest.mark.parametrize("shape", [(3, 8), (5, 33), (64, 1024), (7, 3, 16)])
def test_pointwise_broadcasts(dtype, shape) -> None:
    torch = _torch()
    dt = getattr(torch, dtype)
    x = (torch.randn(*shape, device="cuda") * 4).to(dt)
    row = (torch.randn(shape[-1], device="cuda") * 4).to(dt)
    col = (torch.randn(*shape[:-1], 1, device="cuda") * 4).to(dt)
    low = dt in (torch.float16, torch.bfloat16)
    torch.testing.assert_close(BIAS_SCALE(x, row, col), (x + row) * col, rtol=2e-2 if low else 1e-5,
                               atol=5e-2 if low else 1e-5)
    mid = (torch.randn(shape[0], 1, shape[-1], device="cuda") * 4).to(dt) if len(shape) == 3 else row
    torch.testing.assert_close(SUBTRACT(x, mid), x - mid)


@pytest.mark.gpu
def test_pointwise_random_and_where_match_the_cpu_backend() -> None:
    torch = _torch()
    x = np.random.default_rng(0).standard_normal((37, 64)).astype(np.float32)
    f = mlirfuse.jit(lambda t: ops.where(t > 0.0, ops.rand_like(t, seed=5), t * 2.0))
    np.testing.assert_allclose(f(torch.from_numpy(x).cuda()).cpu().numpy(), f(x), rtol=1e-6, atol=1e-6)


ROW_LENGTHS = [1, 2, 3, 16, 17, 31, 32, 33, 100, 128, 129, 512, 513, 1000, 1024, 4096, 4100, 8192, 10000,
               20000, 65536]


@pytest.mark.gpu
@pytest.mark.parametrize("row", ROW_LENGTHS)
def test_inner_sum_max_var_across_tiers(row) -> None:
    torch = _torch()
    for rows in (1, 3, 50) if row > 1000 else (1, 3, 50, 700):
        for x in (torch.randn(rows, row, device="cuda"), _misaligned(torch, (rows, row), torch.float32)):
            torch.testing.assert_close(ROW_SUM(x), x.double().sum(-1).float(), rtol=1e-5, atol=1e-4 * np.sqrt(row))
            torch.testing.assert_close(ROW_MAX(x), x.amax(-1))
            if row > 1:
                torch.testing.assert_close(ROW_VAR(x), x.double().var(-1, keepdim=True).float(),
                                           rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int32", "int64", "bool"])
@pytest.mark.parametrize("row", [7, 256, 3000])
def test_inner_reductions_of_other_dtypes(dtype, row) -> None:
    torch = _torch()
    dt = getattr(torch, dtype)
    x = (torch.randn(9, row, device="cuda") * 3)
    x = (x > 0) if dtype == "bool" else x.to(dt)
    for name, ref in (("max", lambda t: t.amax(-1)), ("min", lambda t: t.amin(-1)),
                      ("sum", lambda t: t.double().sum(-1))):
        if name == "sum" and dtype == "bool":
            continue
        got = ROW_REDUCTIONS[name](x)
        want = ref(x.to(torch.uint8) if dtype == "bool" else x).to(got.dtype)
        tol = {"float16": 1e-2, "bfloat16": 2e-2}.get(dtype, 1e-6)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol * np.sqrt(row))


@pytest.mark.gpu
def test_reductions_with_fused_bodies_and_row_invariant_operands() -> None:
    torch = _torch()
    x, w = torch.randn(300, 1000, device="cuda"), torch.randn(1000, device="cuda")
    torch.testing.assert_close(mlirfuse.jit(lambda a, b: (a * b + 1.0).sum(-1))(x, w), (x * w + 1.0).sum(-1),
                               rtol=1e-4, atol=1e-3)
    y = torch.randn(4, 6, 130, device="cuda")
    torch.testing.assert_close(mlirfuse.jit(lambda t: t.sum((1, 2)))(y), y.sum((1, 2)), rtol=1e-5, atol=1e-4)
    full = mlirfuse.jit(lambda t: ops.sum(t))
    torch.testing.assert_close(full(y), y.sum(), rtol=1e-5, atol=1e-3)
    big = torch.randn(1 << 20, device="cuda")
    torch.testing.assert_close(full(big), big.double().sum().float(), rtol=1e-5, atol=1e-2)


COLUMN_SUM = mlirfuse.jit(lambda t: t.sum(0))
COLUMN_MAX = mlirfuse.jit(lambda t: ops.max(t, [0], keepdim=True))
COLUMN_FUSED = mlirfuse.jit(lambda t, w: ((t - w) * (t - w)).sum((0, 1)))
COLUMN_REDUCTIONS = {name: mlirfuse.jit(lambda t, name=name: getattr(ops, name)(t, [0]))
                     for name in ("sum", "max", "min")}


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [0, 1, 2, 7, 64, 100, 1000, 8192, 70000])
@pytest.mark.parametrize("cols", [1, 3, 4, 33, 128, 1000, 4096])
def test_column_sum_and_max_across_slices(rows, cols) -> None:
    torch = _torch()
    if rows * cols > 1 << 25:
        pytest.skip("too big for a test")
    for x in (torch.randn(rows, cols, device="cuda"), _misaligned(torch, (rows, cols), torch.float32)):
        torch.testing.assert_close(COLUMN_SUM(x), x.double().sum(0).float(), rtol=1e-5,
                                   atol=1e-4 * np.sqrt(max(rows, 1)))
        if rows:
            torch.testing.assert_close(COLUMN_MAX(x), x.amax(0, keepdim=True))


@pytest.mark.gpu
def test_column_reductions_with_fused_bodies_and_column_invariant_operands() -> None:
    torch = _torch()
    for shape in ((16, 512, 4096), (3, 5, 7), (2, 300, 64)):
        x, w = torch.randn(*shape, device="cuda"), torch.randn(shape[-1], device="cuda")
        torch.testing.assert_close(COLUMN_FUSED(x, w), ((x - w) ** 2).double().sum((0, 1)).float(),
                                   rtol=1e-4, atol=1e-3)
    y = torch.randn(40, 6, 130, device="cuda")
    f = mlirfuse.jit(lambda t: (t.sum(0), t.mean((0, 1), keepdim=True), ops.var(t, [0], correction=0)))
    s, m, v = f(y)
    torch.testing.assert_close(s, y.sum(0), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(m, y.mean((0, 1), keepdim=True), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(v, y.var(0, correction=0), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int32", "int64", "bool"])
@pytest.mark.parametrize("shape", [(7, 5), (3000, 256), (50, 3000)])
def test_column_reductions_of_other_dtypes(dtype, shape) -> None:
    torch = _torch()
    dt = getattr(torch, dtype)
    x = (torch.randn(*shape, device="cuda") * 3)
    x = (x > 0) if dtype == "bool" else x.to(dt)
    for name, ref in (("max", lambda t: t.amax(0)), ("min", lambda t: t.amin(0)),
                      ("sum", lambda t: t.double().sum(0))):
        if name == "sum" and dtype == "bool":
            continue
        got = COLUMN_REDUCTIONS[name](x)
        want = ref(x.to(torch.uint8) if dtype == "bool" else x).to(got.dtype)
        tol = {"float16": 1e-2, "bfloat16": 2e-2}.get(dtype, 1e-6)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol * np.sqrt(shape[0]))


def _bias_gradients(g, x, b, r):
    """A bias gradient whose producer the column reduction computes (a reshape of it summed),
    one of a head merge (a permuted read), a bfloat16 one rounded in its epilogue, and one
    scaled by a row's value (BERT's LayerNorm dx)."""
    y = ops.reshape(g * ops.tanh(x) + b, [g.shape[0] * g.shape[1], g.shape[2]])
    heads = ops.reshape(ops.permute(ops.reshape(x, [x.shape[0], x.shape[1], 4, x.shape[2] // 4]), [0, 2, 1, 3]),
                        [x.shape[0] * 4, x.shape[1] * (x.shape[2] // 4)])
    z = ops.cast(g * 3.0, DataType.BFloat16)
    s = ops.cast(ops.cast(ops.cast(z, DataType.Float).sum((0, 1)), DataType.BFloat16), DataType.Float)
    rows = ops.reshape(x * r, [g.shape[0] * g.shape[1], g.shape[2]])
    return y, y.sum(0), heads, heads.sum(0), z, s, rows, rows.sum(0)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(8, 512, 768), (2, 7, 36), (3, 1000, 40), (1, 3, 8)], ids=str)
@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "misaligned"])
def test_column_reductions_computing_their_producers_and_epilogues(shape, aligned) -> None:
    torch = _torch()
    g = torch.randn(*shape, device="cuda") if aligned else _misaligned(torch, shape, torch.float32)
    x, b = torch.randn(*shape, device="cuda"), torch.randn(shape[-1], device="cuda")
    r = torch.randn(*shape[:2], 1, device="cuda")
    f = mlirfuse.jit(_bias_gradients)
    got = f(g, x, b, r)
    y = (g * torch.tanh(x) + b).reshape(-1, shape[-1])
    heads = x.reshape(shape[0], shape[1], 4, -1).permute(0, 2, 1, 3).reshape(shape[0] * 4, -1)
    z = (g * 3.0).bfloat16()
    rowed = (x * r).reshape(-1, shape[-1])
    want = (y, y.double().sum(0).float(), heads, heads.sum(0), z, z.double().sum((0, 1)).bfloat16().float(),
            rowed, rowed.double().sum(0).float())
    rows = shape[0] * shape[1]
    for k, (a, w) in enumerate(zip(got, want)):
        tol = 1e-2 if k == 5 else 1e-5
        torch.testing.assert_close(a, w, rtol=tol, atol=tol * np.sqrt(rows), msg=f"output {k}")
    launches = f.compile(g, x, b, r, backend="gpu").stages["launch_params"]
    assert launches.count("computing its pointwise prologue") == 4 and "pointwise:" not in launches, launches


NORMALIZATIONS = {"layer_norm": mlirfuse.jit(_layer_norm), "softmax": mlirfuse.jit(_softmax),
                  "rms_norm": mlirfuse.jit(_rms_norm)}


def _normalization_reference(torch, name, x, w, b):
    xd = x.double()
    if name == "layer_norm":
        return torch.nn.functional.layer_norm(xd, x.shape[-1:], w.double(), b.double(), 1e-5)
    if name == "softmax":
        return torch.softmax(xd, -1)
    return xd * torch.rsqrt((xd * xd).mean(-1, keepdim=True) + 1e-6) * w.double()


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(NORMALIZATIONS))
@pytest.mark.parametrize("row", ROW_LENGTHS + [16384, 16385, 32768, 40000])
def test_normalizations_across_tiers_alignments_and_the_looping_variant(name, row) -> None:
    torch = _torch()
    for rows in (1, 3, 50) if row > 1000 else (1, 3, 50, 700):
        for x in (torch.randn(rows, row, device="cuda"), _misaligned(torch, (rows, row), torch.float32)):
            w, b = torch.randn(row, device="cuda"), torch.randn(row, device="cuda")
            args = (x, w, b) if name == "layer_norm" else (x, w) if name == "rms_norm" else (x,)
            got = NORMALIZATIONS[name](*args)
            want = _normalization_reference(torch, name, x, w, b).float()
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
@pytest.mark.parametrize("row", [7, 1024, 4096, 32768])
def test_normalizations_of_other_dtypes(dtype, row) -> None:
    torch = _torch()
    dt = getattr(torch, dtype)
    x = torch.randn(5, row, device="cuda").to(dt)
    w, b = torch.randn(row, device="cuda").to(dt), torch.randn(row, device="cuda").to(dt)
    tol = {"float16": 1e-2, "bfloat16": 3e-2}.get(dtype, 1e-9)
    for name, args in (("layer_norm", (x, w, b)), ("softmax", (x,)), ("rms_norm", (x, w))):
        got = NORMALIZATIONS[name](*args)
        want = _normalization_reference(torch, name, x, w, b).to(got.dtype)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.gpu
def test_normalization_chains_match_the_cpu_backend() -> None:
    """Intermediates as outputs, rows over two dims, random numbers in the chain, ints."""
    torch = _torch()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 7, 300)).astype(np.float32)
    w = rng.standard_normal(300).astype(np.float32)
    fns = [
        lambda t, v: (_layer_norm(t, v, 1.0), t.mean(-1), t - t.mean(-1, keepdim=True)),
        lambda t, v: _layer_norm(ops.where(ops.rand_like(t, seed=9) >= 0.1, t * 1.1, 0.0) + v, v, v),
        lambda t, v: (ops.exp(t - ops.amax(t, -1, keepdim=True)) * v).sum(-1),
    ]
    for fn in fns:
        f = mlirfuse.jit(fn)
        for got, want in zip(f(torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()), f(x, w)):
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=2e-5, atol=2e-5)
    xi = rng.integers(-50, 50, (9, 1000)).astype(np.int32)
    g = mlirfuse.jit(lambda t: (t - ops.max(t, [-1], keepdim=True)).sum(-1))
    np.testing.assert_array_equal(g(torch.from_numpy(xi).cuda()).cpu().numpy(), g(xi))


@pytest.mark.gpu
def test_column_reductions_match_the_cpu_backend() -> None:
    torch = _torch()
    x = np.random.default_rng(1).standard_normal((257, 3, 40)).astype(np.float32)
    f = mlirfuse.jit(lambda t: (ops.exp(t) * 0.5).sum((0, 1)))
    np.testing.assert_allclose(f(torch.from_numpy(x).cuda()).cpu().numpy(), f(x), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("predicate, bound, swapped, taken_whole", [
    ("ult", 32, False, True), ("slt", 30, False, False), ("ule", 31, False, True), ("ule", 32, False, False),
    ("ugt", 31, False, True), ("uge", 32, False, True), ("eq", 32, False, False), ("ne", 32, False, False),
    ("ult", 31, True, True), ("ule", 32, True, True), ("ult", 32, True, False)])
def test_a_read_in_a_branch_is_a_vector_where_each_vector_takes_the_branch_whole(predicate, bound, swapped,
                                                                                 taken_whole) -> None:
    """`if j cmp bound: x[i, j]` with vectors of 4 along j (starting at multiples of 4): one
    vector load only where the condition changes at a multiple of 4 (j < 32, j <= 31, j > 31,
    31 < j, 32 <= j), never for == or != (true at one index)."""
    from mlir import ir

    from mlirfuse.dialects import fusion as fusion_dialect
    from mlirfuse.lowering.gpu.body_reads import contiguous_reads
    from mlirfuse.lowering.gpu.kernels import analyze

    compare = "%bound, %j" if swapped else "%j, %bound"
    text = f"""
    func.func @f(%x: memref<4x64xf32>, %y: memref<4x64xf32>) {{
      %bound = arith.constant {bound} : index
      %zero = arith.constant 0.0 : f32
      linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}}
          outs(%y : memref<4x64xf32>) {{
      ^bb0(%out: f32):
        %i = linalg.index 0 : index
        %j = linalg.index 1 : index
        %c = arith.cmpi {predicate}, {compare} : index
        %v = scf.if %c -> (f32) {{
          %e = memref.load %x[%i, %j] : memref<4x64xf32>
          scf.yield %e : f32
        }} else {{
          scf.yield %zero : f32
        }}
        linalg.yield %v : f32
      }}
      return
    }}"""
    with fusion_dialect.context():
        module = ir.Module.parse(text)
        func = module.body.operations[0]
        generic = next(op.operation for op in func.regions[0].blocks[0].operations
                       if op.operation.name == "linalg.generic")
        g = analyze(generic)
        found = contiguous_reads(g, 4, whole_vectors=True)
        assert bool(found) == taken_whole
        assert all(r.clamped for r in found.reads)
        assert not contiguous_reads(g, 4)  # the normalization kernel's rows may start off a multiple of 4


@needs_libdevice
def test_bfloat16_normalization_temporaries_do_not_narrow_its_vectors() -> None:
    """A bfloat16 LayerNorm computing in float32: its float32 sum and centred rows stay in
    registers (temporaries), so its bfloat16 loads and stores are 16 bytes (8 elements), not
    the 8 bytes a float32 buffer's 4-element vectors would make them: half the threads a
    row (two warps for 768 elements, 2 slots each) and the vector loads of 16 bytes."""
    x = np.ones((4, 768), ml_dtypes.bfloat16)
    w = np.ones((768,), ml_dtypes.bfloat16)

    def fn(x, r, w, b):
        y = ops.cast(x + r, DataType.Float)
        d = y - y.mean(-1, keepdim=True)
        out = d * ops.rsqrt((d * d).mean(-1, keepdim=True) + 1e-12) * ops.cast(w, DataType.Float)
        return ops.cast(out + ops.cast(b, DataType.Float), DataType.BFloat16)

    c = mlirfuse.jit(fn, dynamic=False).compile(x, x, w, w, backend="gpu", arch="sm_90")
    held = c.stages["launch_params"].splitlines()[0]
    assert "gridDim=(2, 1, 1) blockDim=(128, 1, 1)" in held  # 4 rows of two warps each
    assert "vector=8, slots=2" in held and "RowTier(max_row=None, threads=64)" in held, held
    assert "ld.global.v4.b32" in c.ptx and "gpu.alloc" not in c.stages["gpu"]



@pytest.mark.parametrize("source, groups, expected", [
    ("memref<1x1xf32, strided<[8, 1]>>", [[0, 1]], "memref<1xf32, strided<[8]>>"),
    ("memref<5x1xf32, strided<[8, 1], offset: 2>>", [[0, 1]], "memref<5xf32, strided<[8], offset: 2>>"),
    ("memref<2x3x4xf32, strided<[40, 4, 1]>>", [[0], [1, 2]], "memref<2x12xf32, strided<[40, 1]>>"),
    ("memref<?x1x4xf32, strided<[?, 4, 1], offset: ?>>", [[0, 1], [2]],
     "memref<?x4xf32, strided<[?, 1], offset: ?>>"),
    ("memref<?x4xf32, strided<[4, 1]>>", [[0, 1]], "memref<?xf32, strided<[1]>>"),
    ("memref<3x4xf32, 3>", [[0, 1]], "memref<12xf32, 3>"),
    ("memref<2x3xf32>", [[0, 1]], "memref<6xf32>"),
])
def test_a_collapsed_view_keeps_its_sources_strides(source, groups, expected) -> None:
    """`kernels.collapse` of a strided view (a padded matmul result's interior, GPU fuzz seed
    805461: memref<1x1xf32, strided<[8, 1]>> taken as memref<1xf32>, which MLIR's verifier
    refused) gives the layout MLIR infers: a group's stride is that of its last dim not of
    size 1 (of its last dim where that is dynamic), the offset and memory space kept."""
    from mlir import ir
    from mlir.dialects import func

    from mlirfuse.dialects import fusion as fusion_dialect
    from mlirfuse.lowering.gpu.kernels import collapse

    with fusion_dialect.context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("f", ir.FunctionType.get([ir.Type.parse(source)], []))
            with ir.InsertionPoint(f.add_entry_block()):
                view = collapse(f.arguments[0], groups)
                func.ReturnOp([])
        assert module.operation.verify()
        assert str(view.type) == expected


@pytest.mark.parametrize("source", ["memref<3x4xf32, strided<[8, 1]>>", "memref<3x?xf32, strided<[8, 1]>>",
                                    "memref<3x4xf32, strided<[?, 1]>>"])
def test_a_collapse_of_dims_not_known_to_be_contiguous_is_refused(source) -> None:
    """Rows 8 apart taken as one run of 12 would read the padding, and rows whose length or
    stride is known only at run time may be: an error, never a view MLIR would take."""
    from mlir import ir
    from mlir.dialects import func

    from mlirfuse.dialects import fusion as fusion_dialect
    from mlirfuse.lowering.gpu.kernels import collapse

    with fusion_dialect.context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("f", ir.FunctionType.get([ir.Type.parse(source)], []))
            with ir.InsertionPoint(f.add_entry_block()):
                with pytest.raises(ValueError, match="not contiguous"):
                    collapse(f.arguments[0], [[0, 1]])
