"""GPU schedule heuristics: pure functions from shapes, dtypes and device properties to the
parameters of a kernel (the nvFuser `*_heuristic.h` split). `gpu_kernels` applies them to IR.

Shapes are usually dynamic (one compile serves many shapes): a size is an `int` where the
signature fixes it, `None` where it is only known at run time. Parameters then describe
run-time choices as data (the row-length tiers of an inner reduction; the scalar variant of
a vectorized kernel, taken when pointers or extents are not aligned to the vector width).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

VECTOR_BYTES = 16  # the widest global access: ld.global.v4.b32 / st.global.v4.b32
WARP = 32
# Threads of an inner-reduction block: a whole block for a long row, or several short rows.
# 512 leaves ptxas up to 128 registers a thread (1024 would leave 64).
REDUCTION_BLOCK = 512
# Unrolling copies a kernel's body once per element a thread handles in one step; past this
# many operations the code (and LLVM's time on it) grows for little gain: unroll less.
UNROLLED_OPS_BUDGET = 256
# Not taken: unrolling twice up to twice the budget (bodies the budget leaves at one vector a
# thread). H200, GPT-2's bf16 GELU (27 operations, [8, 512, 3072]), kernel us in one run,
# unroll 1 -> 2 (-> 4): 19.55 -> 18.34 (19.10), session 60; but the suite's bf16 rotary
# embedding (27 operations, [8, 32, 2048, 128]) went 69.3 us (session 57) -> 75.0 us with it
# (session 61, its only change), against torch.compile's 67.5.


@dataclass(frozen=True)
class DeviceProperties:
    """What the heuristics need of a GPU. Kernels are compiled per architecture, not per device,
    so these are per-architecture defaults (the cache key holds the architecture only)."""

    arch: str = "sm_90"
    sm_count: int = 132
    max_threads_per_sm: int = 2048


_SM_COUNT = {"sm_70": 80, "sm_75": 40, "sm_80": 108, "sm_86": 84, "sm_89": 128, "sm_90": 132,
             "sm_90a": 132, "sm_100": 148, "sm_100a": 148, "sm_120": 84}
_THREADS_PER_SM = {"sm_75": 1024, "sm_86": 1536, "sm_89": 1536, "sm_120": 1536}


def device_properties(arch: str = "sm_90") -> DeviceProperties:
    """Defaults for `arch` (an H100 SXM's for unknown ones)."""
    return DeviceProperties(arch, _SM_COUNT.get(arch, 132), _THREADS_PER_SM.get(arch, 2048))


def vector_width(element_bytes: Sequence[int]) -> int:
    """Elements per vector access such that no operand's access exceeds 16 bytes."""
    widest = max(element_bytes, default=4)
    return max(1, VECTOR_BYTES // widest)


# -- pointwise -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PointwiseParams:
    """One thread moves `unroll` vectors of `vector` elements per operand, all loads issued
    before the first store; `block` threads per block, a 1-D grid covering the tensor. A scalar
    variant (vector = 1, same unroll) runs where the vector variant's alignment does not hold."""

    vector: int
    unroll: int
    block: int

    @property
    def elements_per_block(self) -> int:
        return self.vector * self.unroll * self.block


def _unroll(vec: int, n_operands: int, body_ops: int) -> int:
    """4 vectors in flight (64 bytes of each operand), 2 where many operands would spill
    registers, fewer where the unrolled body would pass the code budget."""
    unroll = 4 if n_operands <= 8 else 2
    while unroll > 1 and unroll * vec * body_ops > UNROLLED_OPS_BUDGET:
        unroll //= 2
    return unroll


# Not taken: other (unroll, block) pairs for every pointwise kernel, session 80 (H200, the
# suite's pointwise rows through mlirfuse.jit, dynamic sizes, kernel_us with L2 flushed, best
# of 2 interleaved rounds, us; today's choice first, Inductor in brackets): relu(x + 1) float32
# [2, 32, 128, 512] 12.3 (13.7), (2, 128) 13.2, (1, 256) 13.2; exp(a + b) float32 16M 53.9 (52.7),
# 52.6, 52.7; GELU between bookend reshapes float32 8192x3072 55.4 (53.3), 53.0, 53.5; rotary
# embedding bf16 [8, 32, 2048, 128] 70.0 (67.6), 73.9, 70.0; silu(a) * b bf16 16384x11008 253.2
# (250.8), 251.3, 253.7. No pair won everywhere: (2, 128) gained 1-4% on the large rows and lost
# 7% on relu and 6% on the rotary embedding (its ops budget keeps today's at one vector).
def pointwise_heuristic(numel: int | None, element_bytes: Sequence[int],
                        device: DeviceProperties = DeviceProperties(), body_ops: int = 1) -> PointwiseParams:
    """Vectors of 16 bytes (for the widest operand), `_unroll` of them in flight per thread,
    256 threads; smaller blocks where a static size would leave SMs idle."""
    vec = vector_width(element_bytes)
    unroll = _unroll(vec, len(element_bytes), body_ops)
    block = 256
    if numel is not None:
        wave = 2 * device.sm_count  # at least two blocks per SM before anything is cut
        while unroll > 1 and -(-numel // (vec * unroll * block)) < wave:
            unroll //= 2
        while block > 64 and -(-numel // (vec * unroll * block)) < wave:
            block //= 2
    return PointwiseParams(vec, unroll, block)


# -- inner (row) reduction -------------------------------------------------------------------
@dataclass(frozen=True)
class RowTier:
    """Rows of at most `max_row` elements (None: any length) get `threads` threads each."""

    max_row: int | None
    threads: int


@dataclass(frozen=True)
class InnerReductionParams:
    """A reduction over a contiguous row: each of a row's threads accumulates every
    `threads`-th vector of it (`unroll` vectors in flight), then `gpu.shuffle xor`
    butterflies reduce each warp, and shared memory the warps of a row. The tier is chosen
    by the row length at run time (statically where it is known); a block of `block`
    threads holds block // threads rows. The block size is static so that the kernel
    declares it (`.maxntid`): ptxas then keeps registers within what the block may use."""

    vector: int
    unroll: int
    block: int
    tiers: tuple[RowTier, ...]
    # Few long rows (a block each, fewer blocks than `split_blocks`): each row is cut into
    # chunks of at least `min_chunk` elements, a block per chunk, so that about `split_blocks`
    # blocks run; a second launch combines each row's partials in chunk order. 0: never.
    split_blocks: int = 0
    min_chunk: int = 0

    def tier(self, row: int) -> RowTier:
        for t in self.tiers:
            if t.max_row is None or row <= t.max_row:
                return t
        return self.tiers[-1]


def inner_reduction_heuristic(row: int | None, rows: int | None, element_bytes: Sequence[int],
                              device: DeviceProperties = DeviceProperties(),
                              body_ops: int = 1) -> InnerReductionParams:
    """Threads per row: the fewest that cover the row in one unrolled step (`unroll` vectors
    each): one for rows up to 16 float32 elements, a warp up to 512, a whole block of 512
    threads for rows of 8K and more (longer rows loop). Short rows share a block (and
    warp). Where rows of a whole block are fewer than two blocks per SM, each row is cut
    into chunks (at least 4 unrolled steps of the block each) so that about that many
    blocks run (decided at run time unless `rows` and `row` are static)."""
    vec = vector_width(element_bytes)
    unroll = _unroll(vec, len(element_bytes), body_ops)
    block = REDUCTION_BLOCK
    tiers = [RowTier(t * vec * unroll, t) for t in (1 << k for k in range(10)) if t < block]
    tiers.append(RowTier(None, block))
    split_blocks, min_chunk = 2 * device.sm_count, 4 * block * vec * unroll
    if rows is not None and rows >= split_blocks or row is not None and row < 2 * min_chunk:
        split_blocks = min_chunk = 0  # statically: rows enough, or too short to cut
    params = InnerReductionParams(vec, unroll, block, tuple(tiers), split_blocks, min_chunk)
    if row is not None:  # a static row length: one tier
        params = InnerReductionParams(vec, unroll, block, (RowTier(None, params.tier(row).threads),),
                                      split_blocks, min_chunk)
    return params


# -- outer (column) reduction ----------------------------------------------------------------
COLUMN_BLOCK = 256
# Rows each thread of a column reduction sums at least (fewer slices where the rows are few
# for the columns): with 2 x unroll (8 float32 rows, 4 bfloat16), a thread's few rows left it
# waiting on its loads. H200, session 52, kernel us (2 x unroll -> 16; 24): LayerNorm backward's
# sums (dy * xhat, dy) bf16 16384x768 40.3 -> 24.7, float32 16384x768 34.4 -> 34.4 (29.5),
# 4096x768 8.62 -> 8.09, 4096x4096 37.7 -> 37.8 (40.8); x.sum(0) float32 16384x768 18.8 -> 14.4,
# 4096x4096 21.4 -> 21.2.
COLUMN_MIN_ROWS_PER_THREAD = 16
# The slices of a column reduction aim for half the 256-thread blocks an SM can hold (4 on
# sm_90): fewer, longer blocks pay less for each slice's partial, fence and counter.
# H200, session 63, L2 flushed (triton do_bench), us, 8 -> 4 (2; 6) blocks an SM, two rounds:
# middle-axis sum f32 64x1024x256 30.5 -> 28.8 (29.5; 32.0), column sum over (0, 1) f32
# 16x512x4096 47.5 -> 45.5 (46.6; 51.4), sum(0,1) + pow 3 113.5 -> 111.8 (112.3; 117.0),
# GELU-backward + bias-grad 138.4 -> 137.5 (138.3; 143.5); LayerNorm backward's sums through
# torch.compile (torch.profiler, L2 warm), f32 16384x768 35.0 -> 29.7 (33.1), 4096x768 8.8 -> 8.9
# (9.2).
COLUMN_WAVE_FRACTION = 2  # the blocks a wave holds, divided by this
# The slices are the target's nearest multiple of the column blocks, or the multiple below
# where that keeps this fraction of the target: a multiple above it is more blocks than the
# SMs hold at once at the register cap (`column_registers`), the rest a second wave. H200,
# session 74, x.sum((0, 1)) of float32 [16, 512, 4096], 32 column blocks, 17 slices (544
# blocks) against 528 held: 49.4 us; 46.1 with no register cap (5 blocks an SM held them all);
# Inductor 43.4.
COLUMN_WAVE_FILL = 0.875
# Static rows too few for 8 rows of threads of `COLUMN_MIN_ROWS_PER_THREAD` each (a sum over
# a batch of 8): more lanes across the columns, fewer rows of threads, while the column blocks
# stay at least this many an SM. H200, session 67, [8, 512, 768] summed over the batch (and
# written), kernel us, 8 rows of threads (one row a thread) -> one row of 256 lanes: float32
# 16.9 -> 8.6 (Inductor's kernel 9.0-9.2); bfloat16 12.9 -> 14.9 at 192 column blocks (1.5 an
# SM), which this keeps at 128 lanes: 12.7 (Inductor 9.0). Not taken: the lanes chosen at run time, for rows of
# dynamic size (a select of the lanes on the host, the kernel's lane, row and combine loops
# over it): the kernels whose rows are many lost, float32 4096x768 LayerNorm-backward sums 8.1 -> 11.5 us.
# Their PTX shows why: the combine over the rows of threads became a loop of dynamic trip
# count per output element (182 scalar shared loads, 105 basic blocks, against 32 vector loads
# and 20 blocks), and lane and row divisions of 64 bits. One loop over the rows of threads
# for all elements, with vector loads, and shifts for the divisions, would be the next try.
COLUMN_FEW_ROWS_WAVES = 2
# A batch of column reductions whose column blocks fall short of the slices' target (x.sum(1)
# of [64, 1024, 256]: 2 blocks of a warp's vectors a batch, 128 blocks) takes fewer lanes
# across, down to these (8 x 16 bytes: a 128-byte line a row), for more column blocks and fewer
# slices: each slice costs a partial, a fence and a counter, and the memset of the counters.
COLUMN_MIN_LANES = 8
# ... for vectors of this many elements (4-byte ones). H200, session 70, us per call through
# torch.compile (torch.profiler; dynamic extents: the host's choice), e2c3a70 (32 lanes, slices)
# -> 8 lanes, one slice (Inductor): x.sum(1) float32 [64, 1024, 256] 19.8 -> 17.8 (16.1),
# [512, 512, 64] 23.6 -> 18.3 (16.3), [16, 2048, 1024] 34.1 -> 32.3 (32.5). Not for 2-byte
# elements (vectors of 8), where 8 lanes without slices lost to 16: bfloat16 [64, 1024, 256]
# 11.9 against 7.3, [32, 2048, 512] 27.3 against 24.2 (32 lanes and slices: 9.5, 20.8).
COLUMN_NARROW_VECTOR = 4


# A column reduction's rows in flight a thread: all its loads of `unroll` rows wait in
# registers together (every operand's vector of each row), next to the accumulators, so more
# operands take fewer rows: 4 up to 4 operands a row, else 2. H200, session 67, kernel us, 4 ->
# 2 rows: BERT's embedding LayerNorm-backward sums (a + b + c + d, and times e, summed over
# rows; 5 vectors a row) float32 8x512x768 31.3 -> 26.2 (Inductor 24.3); GELU-backward + bias
# gradient bf16 8x512x3072 (2 a row) 28.5 -> 31.4; LayerNorm backward's sums float32 4096x768
# (2 a row) 8.1 -> 8.4.
COLUMN_LOADS_IN_FLIGHT = 16
# Rows in flight in the narrow geometry (8 lanes across, one slice: a thread walks R / 32 rows
# of its batch), where the loads fit `COLUMN_LOADS_IN_FLIGHT`. H200, session 71,
# bench/column_reductions.py through torch.compile, us (torch.profiler): 8 rows in both
# geometries (64 registers, no spills) against 4 (48 registers, 8 bytes of spills), Inductor:
# float32 x.sum(1) of [64, 1024, 256] 17.8 -> 16.7 (16.1), [512, 512, 64] 18.4 -> 17.0 (16.5),
# [16, 2048, 1024] 32.0 -> 30.9 (32.3). Those figures mix the rows with the spills: 8 rows in
# the narrow geometry alone, which ptxas compiled with 20 bytes of spills, measured 18.1
# against 17.8. At the register cap below (session 72, best of 2 rounds), 8 rows -> 4: [64, 1024,
# 256] 16.8 -> 17.0 (16.6), [16, 2048, 1024] 31.6 -> 31.7 (32.6): no difference. With 8 the
# wide geometry lost: bfloat16 x.sum(0) of [8192, 768] 8.2 -> 8.5, [8192, 3072] 14.9 -> 15.5;
# LayerNorm backward's sums float32 4096x768 8.0 -> 9.6, 16384x768 29.0 -> 31.5.
COLUMN_NARROW_UNROLL = 8
# A column reduction's register cap (`.maxnreg`): the register file over the threads of the
# blocks its slices aim to keep on an SM (`COLUMN_WAVE_FRACTION` of a wave: 4 blocks of 256 on
# sm_90, so 64). Left to itself, ptxas (CUDA 13.0, sm_90, -O3) gave these kernels 40-58
# registers, fewer than their loads in flight need, and the middle-axis sum's (both
# geometries) 48 and 20 bytes of spills; capped, 56-64 and no spills (a cap of 96 or more:
# 104, 2 blocks an SM). H200, session 71, through torch.compile, us (torch.profiler), uncapped
# -> 64, Inductor: BERT's LayerNorm backward under bfloat16 autocast (a residual gradient,
# dx, weight and bias sums, the next bias's bfloat16 sum; 3 loads a row) 40.7 -> 31.3 (29.9),
# its two column reductions 18.0 -> 10.8 and 8.8 -> 6.6; bfloat16 x.sum(0) [8192, 768] 8.2 ->
# 6.4 (4.9); LayerNorm backward's sums float32 4096x768 8.1 -> 7.5 (17.8), 16384x768 29.5 ->
# 28.5 (48.2); x.sum((0, 1)) [8, 512, 768] 5.8 -> 5.6 (5.5); float(x).sum(0) bfloat16 4096 x
# 4096 9.3 -> 9.1 (12.7); float32 x.sum(0) [32768, 1024] 34.9 -> 34.5 (34.2); the one loss,
# bfloat16 x.sum(0) [8192, 3072] 14.2 -> 14.6 (14.7). None of these computes a pointwise
# prologue; one that does takes `COLUMN_PROLOGUE_REGISTERS` (`schedule._unroll_with_prologues`).
# The cap for a column reduction computing a pointwise prologue at each element: none
# (ptxas's choice). Capped at 64, ptxas spilled GPT-2's and BERT's bfloat16 GELU-backward
# bias gradients (12-92 bytes; one 48 at a cap of 64, 56 at 72, 32 at 80), uncapped none
# (56-80 registers). Timed, session 72 (H200, best of 2 rounds, us, kernels + memset): the
# bfloat16 GELU-backward + bias gradient 8x512x3072 27.8 uncapped, 27.1 at 64 (Inductor 31.0):
# within the rounds' noise, so the choice stays the one that does not spill.
COLUMN_PROLOGUE_REGISTERS = 0


def column_unroll(vec: int, loads: int, body_ops: int, most: int = 4) -> int:
    """Rows in flight a thread of a column reduction loading `loads` vectors a row (its column
    operands, and a pointwise prologue's inputs it computes at each element): `most`, halved
    while their loads are over `COLUMN_LOADS_IN_FLIGHT` (down to 2) or their ops over the
    budget."""
    unroll = most
    while unroll > 2 and unroll * loads > COLUMN_LOADS_IN_FLIGHT:
        unroll //= 2
    while unroll > 1 and unroll * vec * body_ops > UNROLLED_OPS_BUDGET:
        unroll //= 2
    return unroll


@dataclass(frozen=True)
class ColumnReductionParams:
    """A reduction over the outer dims of [rows, columns] operands (x.sum(0)): a block covers
    `block_x * vector` adjacent columns (128-bit loads along them) and `block_y` rows of
    threads, each accumulating every `block_y`-th row of its slice (`unroll` rows in flight).
    The rows are cut into slices so that there are about `target_blocks` blocks, but no
    thread gets fewer than `min_rows_per_thread` rows; each slice's partial goes to a
    workspace, which the last block of its column block to finish combines in a fixed order
    (deterministic). A second, narrower geometry of `narrow_block_x` lanes across (the block's
    threads the same) is compiled alongside where the extents that pick the lanes are dynamic;
    the host takes it where it makes one slice (0: none), with `narrow_unroll` rows in flight
    (0: `unroll`)."""

    vector: int
    unroll: int
    block_x: int
    block_y: int
    target_blocks: int
    min_rows_per_thread: int
    narrow_block_x: int = 0
    narrow_unroll: int = 0
    registers: int = 0  # the kernel's register cap (0: ptxas's choice)

    def narrowed(self) -> ColumnReductionParams:
        """The geometry of `narrow_block_x` lanes across."""
        return replace(self, block_x=self.narrow_block_x, block_y=self.block // self.narrow_block_x,
                       unroll=self.narrow_unroll or self.unroll, narrow_block_x=0, narrow_unroll=0)

    @property
    def block(self) -> int:
        return self.block_x * self.block_y


def column_reduction_heuristic(columns: int | None, rows: int | None, element_bytes: Sequence[int],
                               device: DeviceProperties = DeviceProperties(),
                               body_ops: int = 1, batch: int | None = 1,
                               accumulator_bytes: Sequence[int] = ()) -> ColumnReductionParams:
    """A warp across the columns (32 x 16 bytes: each row read in 512-byte spans) and 8 rows
    of threads; fewer lanes across (more rows) where a static column count is narrower than
    a warp's vectors, or where a static batch of column reductions (x.sum(1) of [B, R, C]:
    `batch` B, `columns` C) gives too few column blocks for the slices' target
    (`COLUMN_MIN_LANES`, `COLUMN_NARROW_UNROLL` rows in flight); more lanes across (fewer
    rows of threads) where static rows are too few to give each row of threads
    `COLUMN_MIN_ROWS_PER_THREAD` of them (a sum over a batch of 8) and static columns many
    (`COLUMN_FEW_ROWS_WAVES`). Slices: about half a wave of blocks (`COLUMN_WAVE_FRACTION`),
    but at least `COLUMN_MIN_ROWS_PER_THREAD` rows a thread. Registers: the cap that keeps
    those blocks on an SM (`column_registers`). Narrower vectors where the block's values
    of the outputs (`accumulator_bytes` each), combined in shared memory, would not fit
    `SHARED_BYTES` (two int64 sums of bool columns, vectors of 16: 64 KB, which ptxas refused;
    GPU fuzz seed 782920), and the widest that divides a static column count (BERT's
    vocabulary of 30522: vectors of 2, where the vector variant's check would take the scalar
    one)."""
    vec = vector_width(element_bytes)
    while vec > 1 and COLUMN_BLOCK * vec * sum(accumulator_bytes) + 4 > SHARED_BYTES:  # (+ the last-block flag)
        vec //= 2
    while vec > 1 and columns is not None and columns % vec:  # (the host would take the scalar variant)
        vec //= 2
    unroll = column_unroll(vec, len(element_bytes), body_ops)
    narrow_unroll = column_unroll(vec, len(element_bytes), body_ops, COLUMN_NARROW_UNROLL)
    target = device.sm_count * (device.max_threads_per_sm // COLUMN_BLOCK) // COLUMN_WAVE_FRACTION
    block_x = WARP
    narrow = 0
    if columns is not None:
        while block_x > 4 and (block_x // 2) * vec >= columns:
            block_x //= 2
    if vec == COLUMN_NARROW_VECTOR:
        if None not in (columns, rows, batch):
            lanes = _lanes_for_one_slice(block_x, columns, rows, vec, batch, target)
            if lanes < block_x:
                block_x, unroll = lanes, narrow_unroll
        elif batch != 1 and block_x > COLUMN_MIN_LANES:  # a batch of column reductions, of dynamic extents
            narrow = COLUMN_MIN_LANES
    every = None if columns is None or batch is None else columns * batch  # the outputs' elements
    if rows is not None:
        # (one row, as a sum over a batch of one: rows of threads past the first have nothing to do)
        while block_x < COLUMN_BLOCK and rows < (COLUMN_BLOCK // block_x) * COLUMN_MIN_ROWS_PER_THREAD and (
                rows == 1 and columns is None
                or every is not None and every >= 2 * block_x * vec * COLUMN_FEW_ROWS_WAVES * device.sm_count):
            block_x *= 2
    block_y = COLUMN_BLOCK // block_x
    return ColumnReductionParams(vec, unroll, block_x, block_y, target, max(2 * unroll, COLUMN_MIN_ROWS_PER_THREAD),
                                 narrow, narrow_unroll if narrow else 0, column_registers(device))


def column_registers(device: DeviceProperties) -> int:
    """The register cap of a column reduction's threads: the register file shared by the
    threads of the blocks its slices aim to keep on an SM, in multiples of 8."""
    threads = device.max_threads_per_sm // COLUMN_WAVE_FRACTION
    return min(MAX_REGISTERS, REGISTER_FILE // threads // 8 * 8)


def _lanes_for_one_slice(block_x: int, columns: int, rows: int, vec: int, batch: int, target: int) -> int:
    """Fewer lanes across, down to `COLUMN_MIN_LANES`, while the column blocks fall short of
    the slices' target and every row of threads keeps `COLUMN_MIN_ROWS_PER_THREAD` rows; taken
    only where the blocks then make one slice (the target's nearest multiple), which saves the
    slices' partials, counters and memset. Else `block_x`. (column.py's host makes the same
    choice for `narrow_block_x` at run time.)"""
    narrow = block_x
    blocks = lambda lanes: batch * -(-columns // (lanes * vec))  # noqa: E731
    while narrow > COLUMN_MIN_LANES and blocks(narrow) < target \
            and rows >= (2 * COLUMN_BLOCK // narrow) * COLUMN_MIN_ROWS_PER_THREAD:
        narrow //= 2
    return narrow if (target + blocks(narrow) // 2) // blocks(narrow) <= 1 else block_x


# -- loads ---------------------------------------------------------------------------------
# The kernels whose once-read operands load with the evict-first policy (`kernels.load`'s
# `streaming`, which `gpu-streaming-loads` makes `ld.global.cs`): "column" (a column
# reduction's column operands, where a vector is 16 bytes), and for sweeps "normalization" (a
# chain's row tiles), "pointwise" (operands read at the kernel's own element). Lines such
# loads bring into L2 go first, so the lines other kernels left there (dirty ones, which an
# eviction writes back) stay: what `gpu_bench.kernel_us`'s L2 flush (a write of 256 MB)
# leaves, and a model's previous kernels. Inductor's looping reductions load so
# (`eviction_policy='evict_first'`); under ncu, which flushes the L2 clean, the middle-axis
# sum was 19.4 us against Inductor's 21.7, in kernel_us 26.0 against 23.2. H200, session 89,
# kernel us (kernel_us), plain -> streaming (Inductor): bench/column_reductions.py, x.sum(1)
# float32 [64, 1024, 256] 26.2 -> 23.4 (23.0), [16, 2048, 1024] 43.3 -> 40.5 (40.8), [512,
# 512, 64] 25.9 -> 23.2, bfloat16 [32, 2048, 512] 29.1 -> 26.5; x.sum(0) float32 32768x1024
# 46.2 -> 43.0, bfloat16 8192x3072 24.6 -> 22.8; LayerNorm-backward sums float32 16384x768
# 39.0 -> 35.1; BERT's LayerNorm backward under autocast 41.8 -> 38.5; GELU-backward + bias
# gradient bf16 8x512x3072 33.4 -> 32.0 (16 of 18 cases faster). The two slower, vectors of 2
# (BERT's vocabulary bias gradient over 30522 columns): float32 132.7 -> 146.8, bfloat16 73.3
# -> 92.7, hence 16-byte vectors only. bench/suite.py: middle-axis sum 26.1 -> 23.6 (23.3),
# column sum over (0,1) 46.0 -> 42.7 (45.3). Not for the other kernels:
# bench/normalization_sweep.py (every last size static) LayerNorm f32 32768x4096 261.6 ->
# 274.2, RMSNorm bf16 32768x4096 134.1 -> 140.2, the 8192x1024 rows within 0.2 us; pointwise
# (dynamic) silu(a) * b bf16 16384x11008 253.9 -> 281.4, exp(a+b) 53.8 -> 57.4, GELU between
# bookend reshapes 55.0 -> 57.4.
STREAMING_LOADS: frozenset[str] = frozenset({"column"})


# -- normalization (row-persistent chain) ----------------------------------------------------
# Vectors a thread holds in registers per row-sized value: 4 x 16 bytes, so that a block of
# 1024 threads keeps rows of 16K float32 or 32K bfloat16 elements on chip. Four slots rather
# than eight, and small blocks: with at most 64 registers a thread an SM runs 1024 threads
# in up to 8 blocks, and other blocks loading while one reduces is worth more than longer
# rows per thread. H100, kernel us, (8 slots, blocks of 512) -> (4 slots, blocks of at
# least 128): softmax bf16 32768x4096 243.9 -> 185.7, LayerNorm bf16 208.2 -> 183.5,
# softmax f32 391.9 -> 362.3, bias-dropout-add-LayerNorm 64x128x1024 53.1 -> 44.9 (blocks of
# at least 512: 47.9); RMSNorm f32 32768x4096 359.3 -> 368.7 the one loss.
PERSISTENT_SLOTS = 4
# Not taken: more threads a row (each tier's threads x 2, 4 or 8, slots divided alike, the
# same rows held). H200, session 63, through torch.compile, torch.profiler (L2 warm), us, today's
# -> x 2 (x 8): softmax bf16 8192x1024 9.0 -> 12.0 (33.0), LayerNorm bf16 8192x1024 10.0 -> 11.3
# (30.9), softmax f32 32768x4096 271.7 -> 411.3 (947.8), LayerNorm f32 32768x4096 265.3 -> 445.5
# (946.0). The 4096-wide rows lose by the rows an SM holds, and so the bytes it has in flight
# (ncu, session 64, LayerNorm f32 32768x4096, kernel us: 256 threads a row at 64 registers, 4
# rows an SM, 263 at 83% of DRAM throughput; 512 threads at 54 registers, 2 rows, 405 at 54%;
# 512 at a cap of 40 registers, 3 rows, 335 at 65%). Not the loop combining a row's warps
# (`across_row`): butterflies over the warps' totals instead (one shared load a thread) changed
# neither (triton do_bench, 268.7 -> 268.1 at 256 threads, 419.5 -> 422.8 at 512). Blocks of at
# least 256 or 512 threads lost too. A cap of 48 registers at today's threads helped float32
# softmax alone (8192x1024 19.0 -> 18.1, 32768x4096 271.7 -> 254.9) and spilled elsewhere
# (LayerNorm bf16 8192x1024 10.0 -> 24.9).
# Not taken either, session 74 (H200, bench/gpu_bench.kernel_us through mlirfuse.jit, dynamic
# sizes, best of 2 rounds of 3, us; Inductor's kernels in brackets): 8 slots (a warp a row of
# 1024 float32, as Inductor's kernel: 32 threads, 8 vectors each) LayerNorm f32 8192x1024 22.8 ->
# 23.3 (21.5), RMSNorm f32 22.0 -> 23.3 (20.9), softmax f32 22.3 -> 24.3 (20.4), softmax bf16
# 15.2 -> 19.2 (13.7), bias-dropout-add-LayerNorm 34.1 -> 44.0; 3 slots (768-wide rows held
# without an idle slot) residual LayerNorm bf16 4096x768 10.9 -> 11.2 (10.0), 16384x768 25.6 ->
# 25.2 (24.1), LayerNorm f32 8192x768 19.3 -> 18.8 (17.3); blocks of at least 32 or 64 threads
# (a block a row, as Inductor's) within 0.4 us either way. What ncu shows instead (LayerNorm f32
# 8192x1024): 4x Inductor's instructions an element, most of them the index arithmetic, branches
# and shuffle offsets of rows whose length and tier are known only at run time, and spills at
# the 64-register cap; with static sizes (mlirfuse.jit(dynamic=False)) half the instructions and
# no spills, yet LayerNorm f32 23.5 and softmax f32 21.4, bf16 13.6 (8192x1024), 11.8 (8192x768).
# Static rows of at most `SHORT_ROW` elements take twice the threads, `SHORT_ROW_SLOTS` vectors
# each (the tiers of threads whose `PERSISTENT_SLOTS` would hold at most that many). H200,
# session 89, bench/normalization_sweep.py, every last size static (the torch backend's
# signature), kernel us, 4 slots -> 2 (Inductor): LayerNorm f32 8192x1024 22.6 -> 21.7 (21.5),
# RMSNorm f32 22.1 -> 21.5 (20.8), softmax f32 21.3 -> 20.9 (20.3), LayerNorm bf16 14.5 -> 14.0
# (13.8), RMSNorm bf16 13.9 -> 13.6 (13.4), softmax bf16 13.4 -> 13.8 (13.7), residual
# LayerNorm bf16 4096x768 11.3 -> 11.0 (9.9), softmax in float32 49152x512 29.7 -> 29.1 (30.6),
# bias-dropout-add-LayerNorm 64x128x1024 31.2 -> 30.5 (40.3). Not for longer rows (session 88,
# 2 slots for every row): LayerNorm f32 32768x4096 (512 threads a row instead of 256) 262.2 ->
# 271.8 (253.3); RMSNorm bf16 32768x4096 134.5 either way. Not for rows of dynamic length
# either (the kernel holds 4 slots, and the short rows' last 2 idle): session 89, LayerNorm f32
# 8192x1024 22.9 -> 27.6, softmax f32 21.9 -> 28.5, softmax bf16 14.9 -> 20.8,
# bias-dropout-add-LayerNorm 35.9 -> 45.7. Not taken either (session 90): a kernel of their own
# for held rows of dynamic length up to SHORT_ROW (the short tiers' threads, 2 slots, the
# others' kernel launched for longer rows). H200, bench/normalization_sweep.py dyn, kernel us,
# two rounds, without -> with (Inductor): LayerNorm f32 8192x1024 23.0 -> 24.3 (21.5), softmax
# f32 22.0 -> 24.9 (20.4), LayerNorm bf16 14.8 -> 16.1 (13.9), softmax bf16 15.0 -> 16.8
# (13.7), softmax in float32 49152x512 30.2 -> 34.2 (30.7); RMSNorm f32 22.5 -> 22.3,
# residual LayerNorm 4096x768 11.6 -> 11.4, bias-dropout-add-LayerNorm 35.8 -> 32.7 (40.4).
# The same threads and slots compiled for the static row are 20.9-21.7 us for the f32 rows.
# Nor are the registers what the dynamic kernels lose: ptxas (sm_90) gives softmax f32's held
# kernel 28 registers compiled for rows of 1024 and 64 (the cap) for rows of any length, 40
# with no `.maxnreg` at all (it takes what a cap allows: 64 with `.maxntid 1024`, 64 with a cap
# of 255; 32-bit indices, PTX only, 48); but with no cap on any normalization kernel (H200,
# normalization_sweep.py dyn, two rounds each) the 8192x1024 rows moved by 0.0-0.4 us
# (softmax f32 21.8 -> 21.3-21.6, LayerNorm f32 22.6-23.0 -> 22.5-22.7), and LayerNorm f32
# 32768x4096 went 262.4 -> 286.5 (bias-dropout-add-LayerNorm 35.8 -> 33.5 the one gain).
SHORT_ROW = 1024
SHORT_ROW_SLOTS = 2
NORMALIZATION_MAX_BLOCK = 1024
# Short rows share blocks of this many threads (block // threads rows each).
NORMALIZATION_MIN_BLOCK = 128
# The looping variant (rows too long to hold, or unaligned): rows of at most 256 threads,
# each handling 4 vectors a chunk (4 loads in flight). A row of 1024 threads, one vector a
# thread, left each thread a few chunks of a vocabulary row and the block its barriers and
# tail: H200, session 42, cross-entropy micro-benchmark over 4096 rows, kernel us, (1024
# threads, 1 vector) -> (256, 4): forward float32 x 32000 312 -> 142, bfloat16 x 50257
# 347 -> 195; backward 350 -> 263 and 257 (128 threads: 138/175 forward, 271/282 backward).
LOOP_SLOTS = 4
LOOP_THREADS = 256
# Those are vectors of 4 elements: vectors of 8 or 16 (2-byte or 1-byte elements) take as many
# elements a chunk in fewer loads (`loop_slots_for`). H200, session 81, cross-entropy over
# [8, 512, V] bfloat16 logits (bench/cross_entropy_micro.py), GPU us of the forward and of the
# backward (a step less the forward), median of 3 profiles, two rounds within 1%; vectors of 4
# (the forward's sliced rows, read in its body only, were not counted: `Chain.vector_bytes`) ->
# of 8 in 4 slots -> of 8 in 2 slots: V = 30522 sliced from 30528, forward 99 -> 94 -> 99,
# backward 841 -> 839 -> 806; V = 50257 from 50264, forward 151 -> 162 -> 148, backward 1160 ->
# 1160 -> 1163; V = 32000 (vectors of 8 already), forward 82 -> 82 -> 84.5, backward 335 -> 335
# -> 326.


def loop_slots_for(vec: int) -> int:
    """The looping variant's vectors a thread loads a chunk: `LOOP_SLOTS` of up to 4 elements,
    as many elements in vectors of more."""
    return max(1, LOOP_SLOTS * 4 // vec) if vec > 4 else LOOP_SLOTS


# Not taken: LayerNorm backward's weight and bias sums computed by the normalization kernel
# (nvFuser's inner-outer persistent schedule: each block sums its rows' columns in registers
# into a [blocks, columns] workspace, then a column reduction of that), session 52, patch kept
# outside the tree. It passed the emulator and the GPU tests but lost everywhere it was timed
# (H200, jit'd LayerNorm backward, kernel us, unfused normalization + column reduction ->
# fused + workspace reduction, best of 7 geometries): f32 16384x768 38.1 + 37.2 -> 59.7 + 9.8,
# 4096x768 8.5 + 7.7 -> 19.9 + 6.8, 4096x4096 42.5 + 47.9 -> 82.2 + 10.3; bf16 16384x768 46.7 + 28.2
# -> 56.8 + 9.8. The 32 column sums a thread keeps cost registers, which halve the blocks an
# SM holds, and a block's rows then follow each other through its barriers (blocks of one
# turn each, with their sums combined per block, were 2-4x slower still). Inductor's fused
# kernel (16384x768 f32: 40.6 us + 11.6 us of aten sums) shows it can pay with Triton's
# register allocation; ours would need the next rows' loads issued before the sums.
# (Sweeping a heuristic's constants: one configuration per process, with MLIRFUSE_CACHE_DIR=off:
# a process loads one module per fusion, and the disk cache's key does not hold the constants.)
# Not taken: 8 slots for static rows a block holds with 8 but not 4 (16K-32K float32). H200,
# session 41: the cross-entropy micro-benchmark's backward kernel over 4096 x 32000 went
# 350 -> 294 us, but Llama f32's cross-entropy backward region (more tiles held per row)
# 430 -> 586 us; the forward's rows are of dynamic length, so it was not reached.
REGISTER_FILE = 65536  # 32-bit registers per SM (sm_70 to sm_100)
# A thread's registers (its `.maxnreg`): 64, unless what it holds (`Chain.held_bytes` per
# element of the row, slots x vector elements) and `OVERHEAD_REGISTERS` more (indices, the
# row's totals) need more than `SPILL_TOLERANCE`: then that many, so that ptxas need not spill,
# and the block shrinks to fit the register file. The cap that first compiles with no spill
# (ptxas, sm_90) against this estimate, bf16 / f32 rows of dynamic length: LayerNorm(x + r)
# 88 / 80 (88 / 88), LayerNorm(gelu(x)) 88 / 64 (88 / 72), RMSNorm 72 / 56 (72 / 56), softmax
# 56 / 48 (56 / 40), softmax backward 88 / 56 (88 / 56). H200, session 45, kernel us, cap 64
# (spilling) -> the estimate, Inductor: LayerNorm(x + r) bf16 4096 x 768 6.77 -> 5.33 (5.17),
# 16384 x 768 31.3 -> 22.1 (19.2), 8192 x 4096 71.1 -> 50.1 (62.3); float32 16384 x 768 41.2 ->
# 37.6 (37.1); LayerNorm forward + backward bf16 8192 x 768 50.3 -> 42.8 (48.8). A few
# registers over 64 spill little and cost less than the warps a higher cap takes from the SM:
# RMSNorm bf16 4096 x 1024 4.27 -> 4.74 at a cap of 72 (softmax, which does not spill, went
# 25.7 -> 29.1 at a cap of 96).
MIN_REGISTERS = 64
OVERHEAD_REGISTERS = 24
SPILL_TOLERANCE = 72
MAX_REGISTERS = 255


@dataclass(frozen=True)
class NormalizationParams:
    """A chain of inner reductions and row-wise pointwise ops (LayerNorm, softmax) in one
    kernel. `threads` threads per row (the tier whose `max_row` holds the row, chosen at run
    time): each keeps `slots` vectors of `vector` elements of every row-sized value in
    registers, so the row is read from global memory once. A block has max(threads,
    `min_block`) threads (chosen on the host with the tier), holding block // threads rows;
    the kernel is compiled for blocks of up to `block` threads, so with at most
    `registers` registers a thread (`block * registers` fit the register file). Rows longer
    than `block * vector * slots`, or unaligned ones, take the looping variant: rows of at
    most `loop_threads` threads (more rows a block), each reduction's pass re-reading its
    inputs, `loop_slots` vectors per thread per chunk, and the outputs written by a last
    pass."""

    vector: int
    slots: int
    block: int
    tiers: tuple[RowTier, ...]
    loop_slots: int
    loop_threads: int = LOOP_THREADS
    min_block: int = NORMALIZATION_MIN_BLOCK
    registers: int = MIN_REGISTERS

    @property
    def max_persistent_row(self) -> int:
        return self.block * self.vector * self.slots

    @property
    def max_registers(self) -> int:
        return self.registers

    def tier(self, row: int) -> RowTier:
        return next((t for t in self.tiers if t.max_row is None or row <= t.max_row), self.tiers[-1])

    def block_for(self, threads: int) -> int:
        return max(threads, self.min_block)


def normalization_heuristic(row: int | None, rows: int | None, element_bytes: Sequence[int],
                            device: DeviceProperties = DeviceProperties(),
                            held_bytes: int = 4) -> NormalizationParams:
    """The fewest threads per row (a power of two up to the block) whose registers hold the
    row: one thread for rows up to 16 float32 elements, a warp up to 512, 256 threads at
    4096, 1024 threads up to 16K (32K for 16-bit types); a static row of at most
    `SHORT_ROW` elements twice the threads, `SHORT_ROW_SLOTS` vectors each (a block of 128
    for 1024 float32); blocks of at least 128 threads. Registers: `MIN_REGISTERS`, or what a
    thread holds (`held_bytes` per row element, `Chain.held_bytes`) and `OVERHEAD_REGISTERS`
    where that is over `SPILL_TOLERANCE`; the block is the largest of up to 1024 threads those
    fit. `rows` is not used yet: few long rows would need a row split across blocks."""
    del rows, device
    vec = vector_width(element_bytes)

    def registers(slots: int) -> int:
        held = OVERHEAD_REGISTERS + -(-slots * vec * held_bytes // 4)
        return min(MAX_REGISTERS, -(-held // 8) * 8) if held > SPILL_TOLERANCE else MIN_REGISTERS

    regs = registers(PERSISTENT_SLOTS)
    block = NORMALIZATION_MAX_BLOCK
    while block * regs > REGISTER_FILE:
        block //= 2

    def tiers(short_row: int) -> tuple[RowTier, ...]:
        slots = lambda t: SHORT_ROW_SLOTS if t * vec * PERSISTENT_SLOTS <= short_row else PERSISTENT_SLOTS  # noqa: E731
        return tuple(RowTier(t * vec * slots(t), t) for t in (1 << k for k in range(11)) if t < block) + \
            (RowTier(None, block),)

    loop_slots = loop_slots_for(vec)
    params = NormalizationParams(vec, PERSISTENT_SLOTS, block, tiers(0), loop_slots, LOOP_THREADS, registers=regs)
    if row is not None:  # a static row length: one tier, and the slots it fills
        threads = replace(params, tiers=tiers(SHORT_ROW)).tier(row).threads
        slots = max(1, min(PERSISTENT_SLOTS, -(-row // (threads * vec))))
        params = NormalizationParams(vec, slots, block, (RowTier(None, threads),), loop_slots, LOOP_THREADS,
                                     registers=registers(slots))
    return params


# -- transpose -------------------------------------------------------------------------------
# Static shared memory a block may use without opting in.
SHARED_BYTES = 48 * 1024
LANES_ACROSS = 8  # lanes covering one row of a transpose square: 8 vectors of 16 bytes
# Vectors a thread of a transpose moves in each phase (its loads all in flight), and the squares
# a block of `TRANSPOSE_BLOCK` threads takes (one per `tile * tile / vector / 4` threads), so
# that an SM holds many squares and the block stays as wide as a pointwise kernel's (packed
# with one, the barrier needs every thread of the packed block). H200, session 68, kernel us
# (torch.profiler), one vector a thread and one square a block of 256 -> 4 vectors a thread,
# 4 float32 squares a block of 256 (one square a block of 64; 2 squares of 128 threads a
# square), torch.compile: BERT's keys, bf16 [8, 12, 512, 64] read as [B, H, S, D] to float32
# [B, H, D, S], 8.1 -> 5.1 (4.7; 6.1), 3.9; float32 [8, 12, 512, 64] -> [.., 64, 512] 8.0 -> 5.3
# (5.0; 5.8), 4.3; float32 4096 x 4096 37.6 -> 35.4 (35.8; 34.8), 32.8; the suite's transpose
# between reshapes 14.3 -> 12.6 (12.2; 12.1), 11.5; bf16 [8, 12, 512, 64] -> [.., 64, 512]
# 3.8 -> 3.7, 4.7.
TRANSPOSE_VECTORS_PER_THREAD = 4
TRANSPOSE_BLOCK = 256


@dataclass(frozen=True)
class TransposeParams:
    """`squares` `tile` x `tile` squares per block, each staged in shared memory for each
    permuted input (rows padded by one element) by `block // squares` threads; `LANES_ACROSS`
    lanes cover a row with vectors of `vector` elements in both phases (so `tile =
    LANES_ACROSS * vector`)."""

    vector: int
    tile: int
    block: int
    squares: int = 1

    def shared_bytes(self, permuted_bytes: Sequence[int]) -> int:
        return self.squares * sum(b * self.tile * (self.tile + 1) for b in permuted_bytes)


def transpose_heuristic(element_bytes: Sequence[int], permuted_bytes: Sequence[int],
                        device: DeviceProperties = DeviceProperties()) -> TransposeParams:
    """16-byte vectors on both sides: squares of 32 float32 (64 bfloat16, 16 float64)
    elements, `TRANSPOSE_VECTORS_PER_THREAD` vectors a thread in each phase (64 threads a
    square for float32, 128 for bfloat16, 32 for float64), squares enough for blocks of
    `TRANSPOSE_BLOCK` threads. Fewer squares, then narrower vectors (smaller squares), where
    the permuted inputs' squares would not fit in `SHARED_BYTES`."""
    del device
    vec = vector_width(element_bytes)
    while vec > 1 and TransposeParams(vec, LANES_ACROSS * vec, 0).shared_bytes(permuted_bytes) > SHARED_BYTES:
        vec //= 2
    tile = LANES_ACROSS * vec
    threads = max(WARP, tile * tile // vec // TRANSPOSE_VECTORS_PER_THREAD)
    squares = max(1, TRANSPOSE_BLOCK // threads)
    while squares > 1 and TransposeParams(vec, tile, 0, squares).shared_bytes(permuted_bytes) > SHARED_BYTES:
        squares //= 2
    return TransposeParams(vec, tile, threads * squares, squares)


