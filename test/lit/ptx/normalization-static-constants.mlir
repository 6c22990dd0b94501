// Constants in a kernel over shapes known at compile time stay constants. Folding hoists them
// to the function and kernel outlining would make them parameters: the butterfly's shuffle
// offsets, the row length the mean divides by and the float constants are copied into the
// launch instead (sink_constants), so ptxas sees immediate shuffle offsets and LLVM
// turns the division by 1024 into a multiply. LayerNorm without affine over 64 x 1024 f32.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX

// GPU-LABEL: func.func @mlirfuse_entry(
// GPU: gpu.launch blocks
// GPU-DAG: %[[W:[^ ]+]] = arith.constant 32 : i32
// GPU-DAG: %[[O:[^ ]+]] = arith.constant 16 : i32
// GPU-DAG: %[[N:[^ ]+]] = arith.constant 1.024000e+03 : f32
// GPU: gpu.shuffle  xor %{{[^ ]+}}, %[[O]], %[[W]] : f32
// GPU: arith.divf %{{[^ ]+}}, %[[N]] : f32
// GPU: } {mlirfuse.schedule = "normalization"}

// PTX-LABEL: .visible .entry mlirfuse_entry_kernel_0(
// PTX-NOT: div.rn.f32
// PTX: shfl.sync.bfly.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, 16, 31, -1;
// PTX-NOT: div.rn.f32
// PTX: shfl.sync.bfly.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, 1, 31, -1;
// PTX-NOT: div.rn.f32
// PTX: mul.rn.f32 %r{{[0-9]+}}, %r{{[0-9]+}}, 0f3A800000;
// PTX-NOT: div.rn.f32
// PTX: .visible .entry

func.func @fusion(%arg0: tensor<64x1024xf32>) -> tensor<64x1024xf32> attributes {mlirfuse.inputs = ["tensor"]} {
  %0 = "fusion.mean"(%arg0) {axes = array<i64: 1>, keepdim = true} : (tensor<64x1024xf32>) -> tensor<64x1xf32>
  %1 = "fusion.broadcast_in_dim"(%0) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 64, 1024>} : (tensor<64x1xf32>) -> tensor<64x1024xf32>
  %2 = "fusion.sub"(%arg0, %1) : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %3 = "fusion.mul"(%2, %2) : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %4 = "fusion.mean"(%3) {axes = array<i64: 1>, keepdim = true} : (tensor<64x1024xf32>) -> tensor<64x1xf32>
  %5 = "fusion.rsqrt"(%4) : (tensor<64x1xf32>) -> tensor<64x1xf32>
  %6 = "fusion.broadcast_in_dim"(%5) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 64, 1024>} : (tensor<64x1xf32>) -> tensor<64x1024xf32>
  %7 = "fusion.mul"(%2, %6) : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
  return %7 : tensor<64x1024xf32>
}
