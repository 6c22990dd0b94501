// A column reduction: (x * w).sum((0, 1)) of a [?, ?, ?] x and a [?] w. The rows (dims 0, 1)
// are cut into slices across blocks; a thread reads 4 adjacent columns of a row at once
// (128-bit loads, w once before the row loop; x's evict-first, `ld.global.cs`: read once,
// `gpu-streaming-loads`), `unroll` rows in flight; the block's rows of
// threads meet in shared memory; each slice's partial goes to a workspace (a vector store).
// Then every thread fences, one counts the block done on its column block's counter (the
// counters zeroed by a memset before the launch), and the last block of a column block
// combines its columns' partials (each row of threads every 8th slice, a vector a slice, then
// the rows in shared memory in a fixed order: deterministic, no floating-point atomics),
// starting from the sum's initial value: the output's fill is folded into it (no kernel of
// its own). One launch. Where the rows make one slice (a uniform branch on the host's count),
// each block writes its columns' totals: no workspace, counters or memset.
// RUN: mlirfuse-opt %S/Inputs/column_sum.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %S/Inputs/column_sum.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %S/Inputs/column_sum.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX

// PARAMS: launch 0 gridDim=(?, 1, 1) blockDim=(256, 1, 1): column reduction: ColumnReductionParams(vector=4, unroll=4, block_x=32, block_y=8,
// PARAMS-SAME: the last block of each column block combines its partials in a fixed order
// PARAMS-SAME: "launches: 1"

// GPU-NOT: mlirfuse.schedule = "pointwise"
// GPU: %[[WS:[^ ]+]] = gpu.alloc  (%{{[^ ]+}}, %{{[^ ]+}}) : memref<?x?xf32>
// GPU: %[[COUNT:[^ ]+]] = gpu.alloc  (%{{[^ ]+}}) : memref<?xi32>
// GPU: scf.if %{{[^ ]+}} {
// GPU: %[[T0:[^ ]+]] = gpu.wait async
// GPU: %[[T1:[^ ]+]] = gpu.memset async [%[[T0]]] %[[COUNT]], %{{[^ ]+}} : memref<?xi32>, i32
// GPU: gpu.wait [%[[T1]]]
// GPU-NEXT: } {mlirfuse.schedule = "column-reduction-counters"}
// GPU: gpu.launch blocks{{.*}} workgroup(%[[SH:[^ ]+]] : memref<1024xf32, #gpu.address_space<workgroup>>, %[[LAST:[^ ]+]] : memref<1xi32, #gpu.address_space<workgroup>>)
// The sum's initial value, a constant inside the kernel (not a parameter):
// GPU: %[[ZERO:[^ ]+]] = arith.constant 0.000000e+00 : f32
// GPU: vector.load %arg1[%[[COL:[^ ]+]]] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// GPU: scf.for
// GPU-COUNT-4: vector.load %collapse_shape[%{{[^ ]+}}, %[[COL]]] {alignment = 16 : i64, nontemporal = true} : memref<?x?xf32>, vector<4xf32>
// GPU: memref.store %{{[^ ]+}}, %[[SH]]
// GPU: gpu.barrier
// GPU-NEXT: %[[SINGLE:[^ ]+]] = arith.cmpi eq, %{{[^ ]+}}, %{{[^ ]+}} : index
// GPU-NEXT: scf.if %[[SINGLE]] {
// GPU-COUNT-4: memref.store %{{[^ ]+}}, %arg2[%{{[^ ]+}}] : memref<?xf32>
// GPU: } else {
// GPU: vector.store %{{[^ ]+}}, %[[WS]][%{{[^ ]+}}, %[[COL]]] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// GPU: nvvm.memory.barrier <gpu>
// GPU-NEXT: gpu.barrier
// GPU: memref.atomic_rmw addi %{{[^ ]+}}, %[[COUNT]][%{{[^ ]+}}] : (i32, memref<?xi32>) -> i32
// GPU: memref.store %{{[^ ]+}}, %[[LAST]]
// GPU: gpu.barrier
// GPU: memref.load %[[LAST]]
// GPU: scf.if
// GPU: scf.for {{.*}} step %{{[^ ]+}} iter_args(%{{[^ ]+}} = %[[ZERO]], {{.*}}) -> (f32, f32, f32, f32)
// GPU: vector.load %[[WS]][%{{[^ ]+}}, %[[COL]]] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// GPU: memref.store %{{[^ ]+}}, %[[SH]]
// GPU: gpu.barrier
// GPU-COUNT-8: memref.load %[[SH]]
// GPU: } {mlirfuse.schedule = "column-reduction"}
// GPU-NOT: gpu.launch
// GPU: gpu.dealloc  %[[WS]]
// GPU: gpu.dealloc  %[[COUNT]]

// One kernel: the slices, the count, the last block's combine.
// PTX: .entry
// PTX: ld.global.v4.{{[bf]}}32
// PTX: ld.global.cs.v4.b32
// PTX: bar.sync
// PTX: membar.gl
// PTX: atom.global.add.u32
// PTX-NOT: .entry
