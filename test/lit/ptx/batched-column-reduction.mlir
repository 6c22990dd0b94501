// A batch of column reductions of dynamic extents: x.sum(1) of a [?, ?, ?] x ([B, R, C]).
// The kernel carries two geometries of 256 threads: 32 lanes across the columns (8 rows of
// threads, slices where the column blocks are few), and 8 lanes (32 rows of threads, 8 rows
// in flight rather than 4) for one slice. The host takes the narrow one where the vector
// variant is aligned, its column blocks (B x C / 32) make one slice of the target (528
// blocks on an H100: the nearest multiple) and each row of threads has 16 rows (R >= 512);
// then there are no slices, workspace, counters or memset, and the narrow geometry has no
// slice code.
// RUN: mlirfuse-opt %S/Inputs/middle_sum.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %S/Inputs/middle_sum.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %S/Inputs/middle_sum.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX

// PARAMS: launch 0 gridDim=(?, 1, 1) blockDim=(256, 1, 1): column reduction: ColumnReductionParams(vector=4, unroll=4, block_x=32, block_y=8, target_blocks=528, min_rows_per_thread=16, narrow_block_x=8, narrow_unroll=8, registers=64)

// The host: the column blocks of 32 lanes' vectors (or scalars), and their slices; those of
// 8 lanes' vectors, and whether they make one slice.
// GPU: %[[C:[^ ]+]] = memref.dim %arg0, %c2
// GPU: %[[R:[^ ]+]] = memref.dim %arg0, %c1
// GPU: %[[ALIGNED:[^ ]+]] = arith.andi
// GPU: %[[WIDE:[^ ]+]] = arith.maxui %{{[^ ]+}}, %c1 : index
// GPU: arith.addi %{{[^ ]+}}, %c528 : index
// GPU: arith.minui
// GPU-NEXT: %[[SLICES:[^ ]+]] = arith.maxui %{{[^ ]+}}, %c1 : index
// GPU-NEXT: arith.ceildivui %[[C]], %c32 : index
// GPU-NEXT: %[[NARROW_BLOCKS:[^ ]+]] = arith.maxui %{{[^ ]+}}, %c1 : index
// GPU: arith.ceildivui %[[R]], %c512 : index
// GPU: arith.minui
// GPU-NEXT: %[[NARROW_SLICES:[^ ]+]] = arith.maxui %{{[^ ]+}}, %c1 : index
// GPU-NEXT: %[[ONE:[^ ]+]] = arith.cmpi eq, %[[NARROW_SLICES]], %c1 : index
// GPU-NEXT: %[[OK:[^ ]+]] = arith.andi %[[ALIGNED]], %[[ONE]] : i1
// GPU-NEXT: %[[ROWS:[^ ]+]] = arith.cmpi uge, %[[R]], %c512 : index
// GPU-NEXT: %[[NARROW:[^ ]+]] = arith.andi %[[OK]], %[[ROWS]] : i1
// GPU-NEXT: arith.select %[[NARROW]], %[[NARROW_BLOCKS]], %[[WIDE]] : index
// GPU: arith.select %[[NARROW]], %c1, %[[SLICES]] : index
// GPU: gpu.launch
// The narrow geometry: lane and row of threads by 8, vector loads, the block's rows of threads
// combined, each column's total stored; no fence, counter or workspace.
// GPU: scf.if %[[NARROW]] {
// GPU: arith.remui %{{[^ ]+}}, %c8
// GPU-NEXT: arith.divui %{{[^ ]+}}, %c8
// Eight rows in flight (`narrow_unroll`: 32 rows of threads apart, 256 rows a step), then
// the rest a row at a time.
// GPU: arith.divui %{{[^ ]+}}, %c256
// GPU-COUNT-8: vector.load %arg0{{.*}} vector<4xf32>
// GPU-NEXT: vector.extract
// GPU: scf.for {{.*}} step %c32
// GPU-NEXT: vector.load %arg0{{.*}} vector<4xf32>
// GPU: gpu.barrier
// GPU-NOT: nvvm.memory.barrier
// GPU-NOT: memref.atomic_rmw
// GPU-COUNT-4: memref.store %{{[^ ]+}}, %collapse_shape[%{{[^ ]+}}] : memref<?xf32>
// GPU-NEXT: }
// GPU-NEXT: } else {
// The wide one: the vector and scalar variants, each with the slices' fence, count and combine.
// GPU: arith.remui %{{[^ ]+}}, %c32
// Four rows in flight (8 rows of threads apart).
// GPU-COUNT-4: vector.load %arg0{{.*}} vector<4xf32>
// GPU-NEXT: vector.extract
// GPU: nvvm.memory.barrier <gpu>
// GPU: memref.atomic_rmw addi
// GPU: } {mlirfuse.schedule = "column-reduction-narrow"}

// One kernel, capped at 64 registers (4 blocks of 256 threads an SM: the slices' target;
// left to itself, ptxas took 48 and spilled); the counter's atomic in the wide geometry's
// vector and scalar variants only. x's vectors load evict-first (read once).
// PTX: .entry
// PTX: .maxntid 256, 1, 1
// PTX-NEXT: .maxnreg 64
// PTX: ld.global.cs.v4.b32
// PTX-COUNT-2: atom.global.add.u32
// PTX-NOT: atom.global
