// The normalization schedule on a LayerNorm (float32, dynamic shapes): the fills, the mean,
// the variance and the scaling are one kernel (the centring x - mean is recomputed where it
// is used, linalg-recompute-producers: no op of its own). Each thread holds 4 vectors of
// 4 floats of its row (threads per row picked on the host from the row length: one up to
// 16 elements, a warp up to 512, 1024 threads up to 16K; blocks of at least 128 threads,
// so the block size is the host's too and the kernel carries a 64-register cap for blocks
// of 1024, which holds what a thread keeps here); x is loaded once, 4 vector loads in flight, and the centred values stay in
// registers for the variance and the output. Every thread of a row gets each total
// (butterflies, then the warps' totals through shared memory in warp order). The
// temporaries (the two [rows] totals, the centred rows) are never allocated. Rows that are
// unaligned or too long take a looping variant: a second kernel, in vectors from each row's
// first aligned element, or, where a buffer is misaligned, a third, an element at a time;
// each is launched instead of the first (its guard is `mlirfuse.alternative`), so one
// launch a call and three PTX entries.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX

// PARAMS: normalization (row, row, reduce, reduce, tile): NormalizationParams(vector=4, slots=4, block=1024, tiers=(RowTier(max_row=16, threads=1), {{.*}}, RowTier(max_row=512, threads=32), {{.*}}, RowTier(max_row=None, threads=1024)), loop_slots=4, loop_threads=256, min_block=128, registers=64)
// PARAMS: launch 0 (or) gridDim=(?, 1, 1) blockDim=(?, 1, 1): normalization: the looping variant in vectors from each row's first aligned element
// PARAMS: launch 0 (or) gridDim=(?, 1, 1) blockDim=(?, 1, 1): normalization: the looping variant, for rows too long to hold or unaligned
// PARAMS-NOT: launch 1
// PARAMS: "launches: 1"
// PARAMS: "kernels: 3"

// GPU-LABEL: func.func @mlirfuse_entry(
// GPU-NOT: gpu.alloc
// GPU: arith.cmpi ule, %[[LEN:[^ ]+]], %c8192
// GPU: arith.cmpi ule, %[[LEN]], %c512
// GPU: %[[BLOCK:[^ ]+]] = arith.maxui %{{[^ ]+}}, %c128 : index
// The looping variants' rows have at most 256 threads (several rows a block of 128):
// GPU: %[[LOOP_THREADS:[^ ]+]] = arith.minui %{{[^ ]+}}, %c256 : index
// GPU: %[[LOOP_BLOCK:[^ ]+]] = arith.maxui %[[LOOP_THREADS]], %c128 : index
// GPU: gpu.launch blocks
// GPU-SAME: threads({{.*}}) in ({{[^ ]+}} = %[[BLOCK]],
// GPU-SAME: workgroup(%[[MEAN:[^ ]+]] : memref<32xf32, #gpu.address_space<workgroup>>, %[[VAR:[^ ]+]] : memref<32xf32, #gpu.address_space<workgroup>>)
// GPU-COUNT-4: vector.load %arg0[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// GPU: gpu.shuffle  xor %{{[^ ]+}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// GPU: memref.store %{{[^ ]+}}, %[[MEAN]]
// GPU: gpu.barrier
// GPU: memref.load %[[MEAN]]
// GPU-NOT: vector.load %arg0
// GPU: arith.subf
// GPU-NOT: vector.load %arg0
// GPU: memref.store %{{[^ ]+}}, %[[VAR]]
// GPU: gpu.barrier
// GPU-COUNT-4: vector.load %arg1[%{{[^ ]+}}] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// The rsqrt: PTX's correctly rounded sqrt (libdevice's, from math.sqrt, is sqrt.approx.f32).
// GPU: llvm.inline_asm "sqrt.rn.f32 $0, $1;"
// GPU: vector.store %{{[^ ]+}}, %arg3[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// GPU-NOT: scf.for
// GPU: } {mlirfuse.schedule = "normalization"}
// The looping variants, launched instead: a pass per reduction, then the outputs; in
// vectors from the row's first aligned element (the elements around them one a lane), ...
// GPU: gpu.launch blocks
// GPU-SAME: threads({{.*}}) in ({{[^ ]+}} = %[[LOOP_BLOCK]],
// GPU: memref.extract_strided_metadata %arg0
// GPU: scf.for
// GPU: vector.load %arg0
// GPU: } {mlirfuse.alternative, mlirfuse.schedule = "normalization"}
// ... or element by element.
// GPU: gpu.launch blocks
// GPU-SAME: threads({{.*}}) in ({{[^ ]+}} = %[[LOOP_BLOCK]],
// GPU: scf.for
// GPU-NOT: vector.load %arg0
// GPU: memref.load %arg0
// GPU: } {mlirfuse.alternative, mlirfuse.schedule = "normalization"}
// GPU-NOT: gpu.launch
// GPU-NOT: gpu.dealloc

// PTX: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// PTX: .maxnreg 64
// PTX-NOT: .local
// PTX-COUNT-4: ld.global.v4.{{[bf]}}32
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync 0;
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync 0;
// PTX: sqrt.rn.f32
// PTX: st.global.v4.{{[bf]}}32
// PTX: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// PTX: .maxnreg 64
// PTX: ld.global.v4.{{[bf]}}32
// PTX: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// PTX: .maxnreg 64
// PTX-NOT: .entry

func.func @fusion(%arg0: tensor<?x?xf32>, %arg1: tensor<?xf32>, %arg2: tensor<?xf32>) -> tensor<?x?xf32> {
  %0 = "fusion.mean"(%arg0) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %1 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %2 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %3 = "fusion.broadcast_in_dim"(%0, %1, %2) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %4 = "fusion.sub"(%arg0, %3) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %5 = "fusion.mul"(%4, %4) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %6 = "fusion.mean"(%5) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %7 = "fusion.constant"() {value = 1.000000e-05 : f64} : () -> tensor<f32>
  %8 = "fusion.broadcast_in_dim"(%7, %1) {broadcast_dims = array<i64>, shape = array<i64: -1, 1>} : (tensor<f32>, index) -> tensor<?x1xf32>
  %9 = "fusion.add"(%6, %8) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %10 = "fusion.rsqrt"(%9) : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %11 = "fusion.broadcast_in_dim"(%10, %1, %2) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %12 = "fusion.mul"(%4, %11) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %13 = "fusion.broadcast_in_dim"(%arg1, %1, %2) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, -1>} : (tensor<?xf32>, index, index) -> tensor<?x?xf32>
  %14 = "fusion.mul"(%12, %13) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %15 = "fusion.broadcast_in_dim"(%arg2, %1, %2) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, -1>} : (tensor<?xf32>, index, index) -> tensor<?x?xf32>
  %16 = "fusion.add"(%14, %15) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %16 : tensor<?x?xf32>
}
