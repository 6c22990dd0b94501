// fusion-strip-bookend-views on the transpose of the bookend-view issue (003,
// nvfuser_fusion_id0/id7: the transpose after Matmul2 of multi-head attention):
// view [768, 128, 64] -> [64, 12, 128, 64], permute [0, 2, 1, 3], set, view -> [64, 128, 768],
// view -> [8192, 768]. IR from the issue's FusionDefinition (`set` is a no-op in mlirfuse).
// The input reshape and the permute are views of the input: they go to the caller. The
// reshape of the permuted (strided) view needs a copy: it stays in the group, the only op
// left there. The last reshape, of the (contiguous) group output, goes to the caller.
// The group has no compute op, so it only exists with single-node=true.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true}, fusion-strip-bookend-views)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true}, fusion-strip-bookend-views)' | mlir-opt --irdl-file=%irdl > /dev/null

// CHECK-LABEL: func.func private @mha_transpose_group0(
// CHECK-SAME: %arg0: tensor<64x128x12x64xf32>) -> tensor<64x128x768xf32> attributes {fusion.group}
// CHECK-NEXT: %[[R:.*]] = "fusion.reshape"(%arg0) {shape = array<i64: 64, 128, 768>}
// CHECK-NEXT: return %[[R]]
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @mha_transpose(
// CHECK-NEXT: %[[V:.*]] = "fusion.reshape"(%arg0) {shape = array<i64: 64, 12, 128, 64>}
// CHECK-NEXT: %[[P:.*]] = "fusion.permute"(%[[V]]) {dims = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: %[[G:.*]] = call @mha_transpose_group0(%[[P]])
// CHECK-NEXT: %[[O:.*]] = "fusion.reshape"(%[[G]]) {shape = array<i64: 8192, 768>}
// CHECK-NEXT: return %[[O]]
func.func @mha_transpose(%arg0: tensor<?x?x?xf32>) -> (tensor<8192x768xf32>) {
  %t2 = "fusion.reshape"(%arg0) {shape = array<i64: 64, 12, 128, 64>} : (tensor<?x?x?xf32>) -> tensor<64x12x128x64xf32>
  %t3 = "fusion.permute"(%t2) {dims = array<i64: 0, 2, 1, 3>} : (tensor<64x12x128x64xf32>) -> tensor<64x128x12x64xf32>
  %t4 = "fusion.reshape"(%t3) {shape = array<i64: 64, 128, 768>} : (tensor<64x128x12x64xf32>) -> tensor<64x128x768xf32>
  %t5 = "fusion.reshape"(%t4) {shape = array<i64: 8192, 768>} : (tensor<64x128x768xf32>) -> tensor<8192x768xf32>
  return %t5 : tensor<8192x768xf32>
}

// With compute between: reshape + permute of the input go out (pointwise ops read the
// permuted view directly), the reshape of the (contiguous) result goes out too.
// CHECK-LABEL: func.func private @permuted_compute_group0(
// CHECK-SAME: %arg0: tensor<2x8x12x4xf32>) -> tensor<2x8x12x4xf32> attributes {fusion.group}
// CHECK-NOT: fusion.reshape
// CHECK-NOT: fusion.permute
// CHECK: "fusion.mul"(%arg0
// CHECK-NEXT: "fusion.exp"
// CHECK-NEXT: return
// CHECK-LABEL: func.func @permuted_compute(
// CHECK-NEXT: %[[V:.*]] = "fusion.reshape"(%arg0)
// CHECK-NEXT: %[[P:.*]] = "fusion.permute"(%[[V]])
// CHECK-NEXT: %[[G:.*]] = call @permuted_compute_group0(%[[P]])
// CHECK-NEXT: %[[O:.*]] = "fusion.reshape"(%[[G]]) {shape = array<i64: 64, 24>}
// CHECK-NEXT: return %[[O]]
func.func @permuted_compute(%x: tensor<24x8x4xf32>) -> tensor<64x24xf32> {
  %0 = "fusion.reshape"(%x) {shape = array<i64: 2, 12, 8, 4>} : (tensor<24x8x4xf32>) -> tensor<2x12x8x4xf32>
  %1 = "fusion.permute"(%0) {dims = array<i64: 0, 2, 1, 3>} : (tensor<2x12x8x4xf32>) -> tensor<2x8x12x4xf32>
  %c = "fusion.constant"() {value = 2.0 : f64} : () -> tensor<f32>
  %b = "fusion.broadcast_in_dim"(%c) {broadcast_dims = array<i64>, shape = array<i64: 2, 8, 12, 4>} : (tensor<f32>) -> tensor<2x8x12x4xf32>
  %m = "fusion.mul"(%1, %b) : (tensor<2x8x12x4xf32>, tensor<2x8x12x4xf32>) -> tensor<2x8x12x4xf32>
  %e = "fusion.exp"(%m) : (tensor<2x8x12x4xf32>) -> tensor<2x8x12x4xf32>
  %2 = "fusion.reshape"(%e) {shape = array<i64: 64, 24>} : (tensor<2x8x12x4xf32>) -> tensor<64x24xf32>
  return %2 : tensor<64x24xf32>
}

// permute then reshape of an input, then compute: the permute leaves, the reshape of the
// permuted view stays with the compute ops.
// CHECK-LABEL: func.func private @transpose_reshape_input_group0(
// CHECK-SAME: %arg0: tensor<6x4xf32>) -> tensor<24xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.reshape"(%arg0) {shape = array<i64: 24>}
// CHECK-NEXT: "fusion.exp"
// CHECK-NEXT: "fusion.neg"
// CHECK-NEXT: return
// CHECK-LABEL: func.func @transpose_reshape_input(
// CHECK-NEXT: %[[P:.*]] = "fusion.permute"(%arg0)
// CHECK-NEXT: call @transpose_reshape_input_group0(%[[P]])
// CHECK-NEXT: return
func.func @transpose_reshape_input(%x: tensor<4x6xf32>) -> tensor<24xf32> {
  %0 = "fusion.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %1 = "fusion.reshape"(%0) {shape = array<i64: 24>} : (tensor<6x4xf32>) -> tensor<24xf32>
  %2 = "fusion.exp"(%1) : (tensor<24xf32>) -> tensor<24xf32>
  %3 = "fusion.neg"(%2) : (tensor<24xf32>) -> tensor<24xf32>
  return %3 : tensor<24xf32>
}

// A permute of a group OUTPUT stays in the group (the output is written transposed).
// CHECK-LABEL: func.func private @permute_output_group0(
// CHECK-SAME: %arg0: tensor<4x6xf32>) -> tensor<6x4xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.exp"
// CHECK-NEXT: "fusion.neg"
// CHECK-NEXT: "fusion.permute"
// CHECK-NEXT: return
// CHECK-LABEL: func.func @permute_output(
// CHECK-NEXT: call @permute_output_group0(%arg0)
// CHECK-NEXT: return
func.func @permute_output(%x: tensor<4x6xf32>) -> tensor<6x4xf32> {
  %0 = "fusion.exp"(%x) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %1 = "fusion.neg"(%0) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %2 = "fusion.permute"(%1) {dims = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  return %2 : tensor<6x4xf32>
}
