// A column reduction: (x * w).sum((0, 1)) of a [?, ?, ?] x and a [?] w. The rows (dims 0, 1)
// are cut into slices across blocks; a thread reads 4 adjacent columns of a row at once
// (128-bit loads, w once before the row loop), `unroll` rows in flight; the block's rows of
// threads meet in shared memory; each slice's partial goes to a workspace that a second
// launch combines (8 threads a column, each taking every 8th slice, then in shared memory in a
// fixed order: deterministic, no atomics), starting from the sum's initial value: the
// output's fill is folded into it (no kernel of its own, the output never read).
// RUN: mlirfuse-opt %S/Inputs/column_sum.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %S/Inputs/column_sum.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %S/Inputs/column_sum.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX

// PARAMS: launch 0 gridDim=(?, 1, 1) blockDim=(256, 1, 1): column reduction: ColumnReductionParams(vector=4, unroll=4, block_x=32, block_y=8,
// PARAMS-SAME: launch 1 gridDim=(?, 1, 1) blockDim=(256, 1, 1): column reduction: partials combined in a fixed order (8 threads a column)
// PARAMS-SAME: "launches: 2"

// GPU-NOT: mlirfuse.schedule = "pointwise"
// GPU: %[[ZERO:[^ ]+]] = arith.constant 0.000000e+00 : f32
// GPU: %[[WS:[^ ]+]] = gpu.alloc  (%{{[^ ]+}}, %{{[^ ]+}}) : memref<?x?xf32>
// GPU: gpu.launch blocks{{.*}} workgroup(%[[SH:[^ ]+]] : memref<1024xf32, #gpu.address_space<workgroup>>)
// GPU: vector.load %arg1[%[[COL:[^ ]+]]] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// GPU: scf.for
// GPU-COUNT-4: vector.load %collapse_shape[%{{[^ ]+}}, %[[COL]]] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// GPU: memref.store %{{[^ ]+}}, %[[SH]]
// GPU: gpu.barrier
// GPU: memref.store %{{[^ ]+}}, %[[WS]][%{{[^ ]+}}, %{{[^ ]+}}] : memref<?x?xf32>
// GPU: } {mlirfuse.schedule = "column-reduction"}
// GPU: gpu.launch blocks{{.*}} workgroup(%[[FSH:[^ ]+]] : memref<256xf32, #gpu.address_space<workgroup>>)
// GPU: scf.for {{.*}} step %{{[^ ]+}} iter_args(%{{[^ ]+}} = %[[ZERO]]) -> (f32)
// GPU: memref.load %[[WS]]
// GPU: memref.store %{{[^ ]+}}, %[[FSH]]
// GPU: gpu.barrier
// GPU-COUNT-8: memref.load %[[FSH]]
// GPU: } {mlirfuse.schedule = "column-reduction-finish"}
// GPU: gpu.dealloc  %[[WS]]

// The slices, the finish: two kernels.
// PTX: .entry
// PTX: ld.global.v4.{{[bf]}}32
// PTX: bar.sync
// PTX: .entry
// PTX-NOT: .entry
