// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true horizontal=true}, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s

// A reduction and pointwise work over another domain in one group (siblings of %x):
// two segments, each op annotated.
// CHECK-LABEL: func.func private @two_kernels_group0
// CHECK-SAME: fusion.segments = ["reduction", "pointwise"]
// CHECK: "fusion.sum"{{.*}}fusion.segment = 0
// CHECK: "fusion.mul"{{.*}}fusion.segment = 1
func.func @two_kernels(%x: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4x8xf32>) {
  %s = "fusion.sum"(%x) {axes = array<i64: 0>, keepdim = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  %m = "fusion.mul"(%x, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %m : tensor<8xf32>, tensor<4x8xf32>
}

// LayerNorm from primitives: one normalization segment.
// CHECK-LABEL: func.func private @layernorm_group0
// CHECK-SAME: fusion.segments = ["normalization"]
func.func @layernorm(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %mean = "fusion.mean"(%x) {axes = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mb = "fusion.broadcast_in_dim"(%mean) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 4, 8>} : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %d = "fusion.sub"(%x, %mb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sq = "fusion.mul"(%d, %d) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %var = "fusion.mean"(%sq) {axes = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %r = "fusion.rsqrt"(%var) : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %rb = "fusion.broadcast_in_dim"(%r) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 4, 8>} : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = "fusion.mul"(%d, %rb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
