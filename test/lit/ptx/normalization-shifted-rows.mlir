// The normalization schedule on a row length known at compile time that is not a multiple
// of the vector (vocabulary rows: 30522, 50257): softmax over 301 bfloat16 elements. Each
// row is read in vectors from its first element aligned in memory (a row of 301 starts
// misaligned differently row by row: the shift comes from the row's offset, in the kernel),
// the elements before and after those vectors one to a lane of the row; the rows stay held
// in registers. A misaligned buffer takes the looping variant an element at a time instead.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX

// PARAMS: launch 0 gridDim=(3, 1, 1) blockDim=(128, 1, 1): normalization (row, reduce, tile, row, reduce, tile): {{.*}}; rows held, vectors from each row's first aligned element
// PARAMS: launch 0 (or) gridDim=(3, 1, 1) blockDim=(128, 1, 1): normalization: the looping variant, for rows too long to hold or unaligned

// GPU-LABEL: func.func @mlirfuse_entry(
// GPU: gpu.launch blocks
// GPU: vector.load %arg0[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 8 : i64} : memref<6x301xbf16>, vector<4xbf16>
// GPU: memref.load %arg0[%{{[^ ]+}}, %{{[^ ]+}}] : memref<6x301xbf16>
// GPU: vector.store %{{[^ ]+}}, %arg1[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 16 : i64} : memref<6x301xf32>, vector<4xf32>
// GPU: memref.store %{{[^ ]+}}, %arg1[%{{[^ ]+}}, %{{[^ ]+}}] : memref<6x301xf32>
// GPU: } {mlirfuse.schedule = "normalization"}
// GPU: gpu.launch blocks
// GPU-NOT: vector.load
// GPU: } {mlirfuse.alternative, mlirfuse.schedule = "normalization"}

// PTX: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// PTX-COUNT-2: ld.global.v4.b16
// PTX: ld.global.b16
// PTX: st.global.v4.b32
// PTX: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// PTX-NOT: ld.global.v4

func.func @fusion(%arg0: tensor<6x301xbf16>) -> tensor<6x301xf32> attributes {mlirfuse.inputs = ["tensor"]} {
  %0 = "fusion.cast"(%arg0) : (tensor<6x301xbf16>) -> tensor<6x301xf32>
  %1 = "fusion.max"(%0) {axes = array<i64: 1>, keepdim = true} : (tensor<6x301xf32>) -> tensor<6x1xf32>
  %2 = "fusion.broadcast_in_dim"(%1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 6, 301>} : (tensor<6x1xf32>) -> tensor<6x301xf32>
  %3 = "fusion.sub"(%0, %2) : (tensor<6x301xf32>, tensor<6x301xf32>) -> tensor<6x301xf32>
  %4 = "fusion.exp"(%3) : (tensor<6x301xf32>) -> tensor<6x301xf32>
  %5 = "fusion.sum"(%4) {axes = array<i64: 1>, keepdim = true} : (tensor<6x301xf32>) -> tensor<6x1xf32>
  %6 = "fusion.broadcast_in_dim"(%5) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 6, 301>} : (tensor<6x1xf32>) -> tensor<6x301xf32>
  %7 = "fusion.div"(%4, %6) : (tensor<6x301xf32>, tensor<6x301xf32>) -> tensor<6x301xf32>
  return %7 : tensor<6x301xf32>
}
