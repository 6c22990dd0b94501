// Library ops (fusion.matmul, fusion.linear) are never fused: the fusible chains on either
// side of one become two groups, the library op stays in the caller between the two calls,
// and no group both feeds and consumes it (no cycle). Piping the result through mlir-opt
// verifies it (a cycle would show up as a use before its definition).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{horizontal=false})' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | mlir-opt --irdl-file=%irdl | FileCheck %s --check-prefix=VERIFY
// VERIFY-LABEL: func.func @matmul_between_chains(
// VERIFY-LABEL: func.func @linear_between_chains(
// VERIFY-LABEL: func.func @producer_feeds_matmul_and_its_consumer(

// CHECK-LABEL: func.func private @matmul_between_chains_group0(
// CHECK-SAME: %arg0: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.exp"
// CHECK-NEXT: "fusion.tanh"
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @matmul_between_chains_group1(
// CHECK-SAME: %arg0: tensor<4x2xf32>) -> tensor<4x2xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.neg"
// CHECK-NEXT: "fusion.relu"
// CHECK-NEXT: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @matmul_between_chains(
// CHECK-NEXT: %[[A:.*]] = call @matmul_between_chains_group0(%arg0)
// CHECK-NEXT: %[[M:.*]] = "fusion.matmul"(%[[A]], %arg1)
// CHECK-NEXT: %[[B:.*]] = call @matmul_between_chains_group1(%[[M]])
// CHECK-NEXT: return %[[B]]
func.func @matmul_between_chains(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> {
  %e = "fusion.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = "fusion.tanh"(%e) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = "fusion.matmul"(%t, %w) : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %n = "fusion.neg"(%m) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %r = "fusion.relu"(%n) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}

// The same with linear (x @ w.T + b): the bias is an operand of the library op.
// CHECK-LABEL: func.func private @linear_between_chains_group0(
// CHECK-NEXT: "fusion.mul"
// CHECK-NEXT: "fusion.sigmoid"
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @linear_between_chains_group1(
// CHECK-NEXT: "fusion.erf"
// CHECK-NEXT: "fusion.add"
// CHECK-NEXT: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @linear_between_chains(
// CHECK-NEXT: %[[A:.*]] = call @linear_between_chains_group0(%arg0)
// CHECK-NEXT: %[[L:.*]] = "fusion.linear"(%[[A]], %arg1, %arg2)
// CHECK-NEXT: %[[B:.*]] = call @linear_between_chains_group1(%[[L]])
// CHECK-NEXT: return %[[B]]
func.func @linear_between_chains(%x: tensor<2x3x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<2x3x16xf32> {
  %m = "fusion.mul"(%x, %x) : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %s = "fusion.sigmoid"(%m) : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %l = "fusion.linear"(%s, %w, %b) : (tensor<2x3x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x3x16xf32>
  %e = "fusion.erf"(%l) : (tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
  %a = "fusion.add"(%e, %l) : (tensor<2x3x16xf32>, tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
  return %a : tensor<2x3x16xf32>
}

// tanh's result feeds the matmul AND the add that consumes the matmul: the add cannot join
// the producer's group (group -> matmul -> group would be a cycle). Group 0 returns the
// tanh result, which the caller passes both to the matmul and to group 1.
// CHECK-LABEL: func.func private @producer_feeds_matmul_and_its_consumer_group0(
// CHECK-SAME: %arg0: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.exp"
// CHECK-NEXT: "fusion.tanh"
// CHECK-NEXT: return
// CHECK-NOT: fusion.matmul
// CHECK-LABEL: func.func private @producer_feeds_matmul_and_its_consumer_group1(
// CHECK-SAME: -> tensor<4x4xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.add"
// CHECK-NEXT: "fusion.relu"
// CHECK-NEXT: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @producer_feeds_matmul_and_its_consumer(
// CHECK-NEXT: %[[T:.*]] = call @producer_feeds_matmul_and_its_consumer_group0(%arg0)
// CHECK-NEXT: %[[M:.*]] = "fusion.matmul"(%[[T]], %arg1)
// CHECK-NEXT: %[[R:.*]] = call @producer_feeds_matmul_and_its_consumer_group1(%[[M]], %[[T]])
// CHECK-NEXT: return %[[R]]
func.func @producer_feeds_matmul_and_its_consumer(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = "fusion.exp"(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = "fusion.tanh"(%e) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = "fusion.matmul"(%t, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = "fusion.add"(%m, %t) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = "fusion.relu"(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
