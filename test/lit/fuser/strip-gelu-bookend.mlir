// fusion-strip-bookend-views on the GELU of the bookend-view issue (003, nvfuser_fusion_id10):
// view [8192, 3072] -> [64, 128, 3072], GELU (erf form), view back. IR from the
// FusionDefinition of the issue (mlirfuse's nvFuser frontend; `view` is `fusion.reshape`).
// Both reshapes leave the group and become views in the caller; ONE group holds the GELU,
// on the [64, 128, 3072] domain, and no reshape.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true horizontal=false}, fusion-strip-bookend-views)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s --check-prefix=SEG
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views)' | mlir-opt --irdl-file=%irdl > /dev/null

// Before stripping, the group holds the reshapes.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | FileCheck %s --check-prefix=GROUPED
// GROUPED-LABEL: func.func private @gelu_group0(
// GROUPED-SAME: %arg0: tensor<?x?xf32>) -> tensor<8192x3072xf32>
// GROUPED-NEXT: "fusion.reshape"
// GROUPED: "fusion.erf"
// GROUPED: "fusion.reshape"
// GROUPED-NEXT: return

// CHECK-LABEL: func.func private @gelu_group0(
// CHECK-SAME: %arg0: tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32> attributes {fusion.group}
// CHECK-NOT: fusion.reshape
// CHECK: "fusion.erf"
// CHECK-NOT: fusion.reshape
// CHECK: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @gelu(
// CHECK-NEXT: %[[IN:.*]] = "fusion.reshape"(%arg0) {shape = array<i64: 64, 128, 3072>}
// CHECK-NEXT: %[[G:.*]] = call @gelu_group0(%[[IN]])
// CHECK-NEXT: %[[OUT:.*]] = "fusion.reshape"(%[[G]]) {shape = array<i64: 8192, 3072>}
// CHECK-NEXT: return %[[OUT]]
// SEG-LABEL: func.func private @gelu_group0(
// SEG-SAME: fusion.segments = ["pointwise"]
// SEG-NOT: func.func private
// SEG-LABEL: func.func @gelu(
func.func @gelu(%arg0: tensor<?x?xf32>) -> (tensor<8192x3072xf32>) {
  %t2 = "fusion.reshape"(%arg0) {shape = array<i64: 64, 128, 3072>} : (tensor<?x?xf32>) -> tensor<64x128x3072xf32>
  %t3 = "fusion.constant"() {value = 0.5 : f64} : () -> tensor<f64>
  %t4 = "fusion.cast"(%t3) : (tensor<f64>) -> tensor<f32>
  %t5 = "fusion.broadcast_in_dim"(%t4) {broadcast_dims = array<i64>, shape = array<i64: 64, 128, 3072>} : (tensor<f32>) -> tensor<64x128x3072xf32>
  %t6 = "fusion.mul"(%t2, %t5) : (tensor<64x128x3072xf32>, tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t7 = "fusion.constant"() {value = 0.707107 : f64} : () -> tensor<f64>
  %t8 = "fusion.cast"(%t7) : (tensor<f64>) -> tensor<f32>
  %t9 = "fusion.broadcast_in_dim"(%t8) {broadcast_dims = array<i64>, shape = array<i64: 64, 128, 3072>} : (tensor<f32>) -> tensor<64x128x3072xf32>
  %t10 = "fusion.mul"(%t2, %t9) : (tensor<64x128x3072xf32>, tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t11 = "fusion.erf"(%t10) : (tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t12 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f64>
  %t13 = "fusion.cast"(%t12) : (tensor<f64>) -> tensor<f32>
  %t14 = "fusion.broadcast_in_dim"(%t13) {broadcast_dims = array<i64>, shape = array<i64: 64, 128, 3072>} : (tensor<f32>) -> tensor<64x128x3072xf32>
  %t15 = "fusion.add"(%t11, %t14) : (tensor<64x128x3072xf32>, tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t16 = "fusion.mul"(%t6, %t15) : (tensor<64x128x3072xf32>, tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t17 = "fusion.reshape"(%t16) {shape = array<i64: 8192, 3072>} : (tensor<64x128x3072xf32>) -> tensor<8192x3072xf32>
  return %t17 : tensor<8192x3072xf32>
}

// The issue's first variant also returns the input view T1: it is computed once, in the
// caller, and both returned and passed to the group.
// CHECK-LABEL: func.func private @gelu_view_output_group0(
// CHECK-SAME: %arg0: tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32> attributes {fusion.group}
// CHECK-NOT: fusion.reshape
// CHECK: "fusion.erf"
// CHECK-NOT: fusion.reshape
// CHECK: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @gelu_view_output(
// CHECK-NEXT: %[[IN:.*]] = "fusion.reshape"(%arg0) {shape = array<i64: 64, 128, 3072>}
// CHECK-NEXT: %[[G:.*]] = call @gelu_view_output_group0(%[[IN]])
// CHECK-NEXT: %[[OUT:.*]] = "fusion.reshape"(%[[G]]) {shape = array<i64: 8192, 3072>}
// CHECK-NEXT: return %[[IN]], %[[OUT]]
func.func @gelu_view_output(%arg0: tensor<?x?xf32>) -> (tensor<64x128x3072xf32>, tensor<8192x3072xf32>) {
  %t2 = "fusion.reshape"(%arg0) {shape = array<i64: 64, 128, 3072>} : (tensor<?x?xf32>) -> tensor<64x128x3072xf32>
  %t3 = "fusion.constant"() {value = 0.5 : f64} : () -> tensor<f64>
  %t4 = "fusion.cast"(%t3) : (tensor<f64>) -> tensor<f32>
  %t5 = "fusion.broadcast_in_dim"(%t4) {broadcast_dims = array<i64>, shape = array<i64: 64, 128, 3072>} : (tensor<f32>) -> tensor<64x128x3072xf32>
  %t6 = "fusion.mul"(%t2, %t5) : (tensor<64x128x3072xf32>, tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t7 = "fusion.constant"() {value = 0.707107 : f64} : () -> tensor<f64>
  %t8 = "fusion.cast"(%t7) : (tensor<f64>) -> tensor<f32>
  %t9 = "fusion.broadcast_in_dim"(%t8) {broadcast_dims = array<i64>, shape = array<i64: 64, 128, 3072>} : (tensor<f32>) -> tensor<64x128x3072xf32>
  %t10 = "fusion.mul"(%t2, %t9) : (tensor<64x128x3072xf32>, tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t11 = "fusion.erf"(%t10) : (tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t12 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f64>
  %t13 = "fusion.cast"(%t12) : (tensor<f64>) -> tensor<f32>
  %t14 = "fusion.broadcast_in_dim"(%t13) {broadcast_dims = array<i64>, shape = array<i64: 64, 128, 3072>} : (tensor<f32>) -> tensor<64x128x3072xf32>
  %t15 = "fusion.add"(%t11, %t14) : (tensor<64x128x3072xf32>, tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t16 = "fusion.mul"(%t6, %t15) : (tensor<64x128x3072xf32>, tensor<64x128x3072xf32>) -> tensor<64x128x3072xf32>
  %t17 = "fusion.reshape"(%t16) {shape = array<i64: 8192, 3072>} : (tensor<64x128x3072xf32>) -> tensor<8192x3072xf32>
  return %t2, %t17 : tensor<64x128x3072xf32>, tensor<8192x3072xf32>
}
