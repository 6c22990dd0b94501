// Views INSIDE a group (between compute ops) stay in it; only views at its edges leave.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views)' | mlir-opt --irdl-file=%irdl > /dev/null

// reshape, permute, squeeze/unsqueeze and broadcast_in_dim between compute ops.
// CHECK-LABEL: func.func private @inner_group0(
// CHECK-SAME: %arg0: tensor<4x6xf32>, %arg1: tensor<6x4xf32>) -> tensor<6x4xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.exp"(%arg0)
// CHECK-NEXT: "fusion.reshape"
// CHECK-NEXT: "fusion.tanh"
// CHECK-NEXT: "fusion.reshape"
// CHECK-NEXT: "fusion.permute"
// CHECK-NEXT: "fusion.neg"
// CHECK-NEXT: "fusion.unsqueeze"
// CHECK-NEXT: "fusion.sin"
// CHECK-NEXT: "fusion.squeeze"
// CHECK-NEXT: "fusion.sum"
// CHECK-NEXT: "fusion.broadcast_in_dim"
// CHECK-NEXT: "fusion.add"
// CHECK-NEXT: "fusion.mul"(%{{.*}}, %arg1)
// CHECK-NEXT: return
// CHECK-LABEL: func.func @inner(
// CHECK-NEXT: call @inner_group0(%arg0, %arg1)
// CHECK-NEXT: return
func.func @inner(%x: tensor<4x6xf32>, %y: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %0 = "fusion.exp"(%x) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %1 = "fusion.reshape"(%0) {shape = array<i64: 24>} : (tensor<4x6xf32>) -> tensor<24xf32>
  %2 = "fusion.tanh"(%1) : (tensor<24xf32>) -> tensor<24xf32>
  %3 = "fusion.reshape"(%2) {shape = array<i64: 4, 6>} : (tensor<24xf32>) -> tensor<4x6xf32>
  %4 = "fusion.permute"(%3) {dims = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %5 = "fusion.neg"(%4) : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %6 = "fusion.unsqueeze"(%5) {dim = 1 : i64} : (tensor<6x4xf32>) -> tensor<6x1x4xf32>
  %7 = "fusion.sin"(%6) : (tensor<6x1x4xf32>) -> tensor<6x1x4xf32>
  %8 = "fusion.squeeze"(%7) {dims = array<i64: 1>} : (tensor<6x1x4xf32>) -> tensor<6x4xf32>
  %9 = "fusion.sum"(%8) {axes = array<i64: 1>, keepdim = true} : (tensor<6x4xf32>) -> tensor<6x1xf32>
  %10 = "fusion.broadcast_in_dim"(%9) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 6, 4>} : (tensor<6x1xf32>) -> tensor<6x4xf32>
  %11 = "fusion.add"(%8, %10) : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %12 = "fusion.mul"(%11, %y) : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return %12 : tensor<6x4xf32>
}

// The same kinds of view at the edges: squeeze and broadcast_in_dim of inputs and the
// unsqueeze and reshape of the output all leave (chains of edge views peel off one by one).
// CHECK-LABEL: func.func private @edges_group0(
// CHECK-SAME: %arg0: tensor<4x6xf32>, %arg1: tensor<4x6xf32>) -> tensor<4x6xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.exp"(%arg0)
// CHECK-NEXT: "fusion.add"(%{{.*}}, %arg1)
// CHECK-NEXT: "fusion.neg"
// CHECK-NEXT: return
// CHECK-LABEL: func.func @edges(
// CHECK-NEXT: %[[S:.*]] = "fusion.squeeze"(%arg0)
// CHECK-NEXT: %[[B:.*]] = "fusion.broadcast_in_dim"(%arg1)
// CHECK-NEXT: %[[G:.*]] = call @edges_group0(%[[S]], %[[B]])
// CHECK-NEXT: %[[U:.*]] = "fusion.unsqueeze"(%[[G]])
// CHECK-NEXT: %[[R:.*]] = "fusion.reshape"(%[[U]])
// CHECK-NEXT: return %[[R]]
func.func @edges(%x: tensor<4x1x6xf32>, %b: tensor<6xf32>) -> tensor<24xf32> {
  %0 = "fusion.squeeze"(%x) {dims = array<i64: 1>} : (tensor<4x1x6xf32>) -> tensor<4x6xf32>
  %1 = "fusion.exp"(%0) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %2 = "fusion.broadcast_in_dim"(%b) {broadcast_dims = array<i64: 1>, shape = array<i64: 4, 6>} : (tensor<6xf32>) -> tensor<4x6xf32>
  %3 = "fusion.add"(%1, %2) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %4 = "fusion.neg"(%3) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %5 = "fusion.unsqueeze"(%4) {dim = 0 : i64} : (tensor<4x6xf32>) -> tensor<1x4x6xf32>
  %6 = "fusion.reshape"(%5) {shape = array<i64: 24>} : (tensor<1x4x6xf32>) -> tensor<24xf32>
  return %6 : tensor<24xf32>
}
