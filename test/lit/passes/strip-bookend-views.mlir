// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true}, fusion-strip-bookend-views)' | FileCheck %s

// GELU between two reshapes: the reshapes become host views, one group holds the GELU.
// CHECK-LABEL: func.func private @gelu_group0
// CHECK-NOT: fusion.reshape
// CHECK: "fusion.erf"
// CHECK-LABEL: func.func @gelu
// CHECK: "fusion.reshape"
// CHECK: call @gelu_group0
// CHECK: "fusion.reshape"
func.func @gelu(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %t = "fusion.reshape"(%x) {shape = array<i64: 2, 4, 6>} : (tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %e = "fusion.erf"(%t) : (tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %m = "fusion.mul"(%t, %e) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %r = "fusion.reshape"(%m) {shape = array<i64: 8, 6>} : (tensor<2x4x6xf32>) -> tensor<8x6xf32>
  return %r : tensor<8x6xf32>
}

// A transpose between reshapes: the input reshape and the permute are views, the reshape
// of the permuted (strided) view needs a copy and stays: one transpose kernel.
// CHECK-LABEL: func.func private @transpose_group0
// CHECK-NEXT: "fusion.reshape"
// CHECK-NEXT: return
// CHECK-LABEL: func.func @transpose
// CHECK: "fusion.reshape"
// CHECK: "fusion.permute"
// CHECK: call @transpose_group0
// CHECK: "fusion.reshape"
func.func @transpose(%x: tensor<24x8x4xf32>) -> tensor<64x24xf32> {
  %0 = "fusion.reshape"(%x) {shape = array<i64: 2, 12, 8, 4>} : (tensor<24x8x4xf32>) -> tensor<2x12x8x4xf32>
  %1 = "fusion.permute"(%0) {dims = array<i64: 0, 2, 1, 3>} : (tensor<2x12x8x4xf32>) -> tensor<2x8x12x4xf32>
  %2 = "fusion.reshape"(%1) {shape = array<i64: 2, 8, 48>} : (tensor<2x8x12x4xf32>) -> tensor<2x8x48xf32>
  %3 = "fusion.reshape"(%2) {shape = array<i64: 64, 24>} : (tensor<2x8x48xf32>) -> tensor<64x24xf32>
  return %3 : tensor<64x24xf32>
}

// A view inside a group (between two compute ops) stays in the group.
// CHECK-LABEL: func.func private @inner_group0
// CHECK: "fusion.exp"
// CHECK: "fusion.reshape"
// CHECK: "fusion.tanh"
func.func @inner(%x: tensor<4x6xf32>) -> tensor<24xf32> {
  %0 = "fusion.exp"(%x) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %1 = "fusion.reshape"(%0) {shape = array<i64: 24>} : (tensor<4x6xf32>) -> tensor<24xf32>
  %2 = "fusion.tanh"(%1) : (tensor<24xf32>) -> tensor<24xf32>
  return %2 : tensor<24xf32>
}
