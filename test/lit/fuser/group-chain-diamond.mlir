// fusion-group on straight-line code: a chain and a diamond each become ONE group, with or
// without horizontal fusion (producer-consumer merging alone reaches every op), and only the
// values used outside a group become its results.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{horizontal=false})' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | mlir-opt --irdl-file=%irdl | FileCheck %s --check-prefix=VERIFY
// VERIFY: func.func @chain(
// VERIFY: func.func @diamond(

// A chain relu(tanh(exp(x) + 1)): constant and broadcast go into the group with the compute
// ops; the caller keeps nothing but the call.
// CHECK-LABEL: func.func private @chain_group0(
// CHECK-SAME: %arg0: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.exp"(%arg0)
// CHECK-NEXT: "fusion.constant"
// CHECK-NEXT: "fusion.broadcast_in_dim"
// CHECK-NEXT: "fusion.add"
// CHECK-NEXT: "fusion.tanh"
// CHECK-NEXT: "fusion.relu"
// CHECK-NEXT: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @chain(
// CHECK-NEXT: %[[R:.*]] = call @chain_group0(%arg0)
// CHECK-NEXT: return %[[R]]
func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = "fusion.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
  %b = "fusion.broadcast_in_dim"(%c) {broadcast_dims = array<i64>, shape = array<i64: 4, 8>} : (tensor<f32>) -> tensor<4x8xf32>
  %a = "fusion.add"(%e, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = "fusion.tanh"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = "fusion.relu"(%t) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// A diamond: exp(x) feeds sin and cos, which meet again in an add; a second diamond rooted
// at the function argument (mul(neg(x), abs(x))) joins the same group through the final sub.
// CHECK-LABEL: func.func private @diamond_group0(
// CHECK-SAME: %arg0: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {fusion.group}
// CHECK-NEXT: "fusion.exp"
// CHECK-NEXT: "fusion.sin"
// CHECK-NEXT: "fusion.cos"
// CHECK-NEXT: "fusion.add"
// CHECK-NEXT: "fusion.neg"
// CHECK-NEXT: "fusion.abs"
// CHECK-NEXT: "fusion.mul"
// CHECK-NEXT: "fusion.sub"
// CHECK-NEXT: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @diamond(
// CHECK-NEXT: %[[R:.*]] = call @diamond_group0(%arg0)
// CHECK-NEXT: return %[[R]]
func.func @diamond(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = "fusion.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = "fusion.sin"(%e) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = "fusion.cos"(%e) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = "fusion.add"(%s, %c) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = "fusion.neg"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = "fusion.abs"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = "fusion.mul"(%n, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = "fusion.sub"(%a, %m) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// An intermediate that is also returned escapes the group: the group has two results, in
// definition order, and the caller returns both from the one call.
// CHECK-LABEL: func.func private @escaping_group0(
// CHECK-SAME: %arg0: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) attributes {fusion.group}
// CHECK-NEXT: %[[E:.*]] = "fusion.exp"(%arg0)
// CHECK-NEXT: %[[T:.*]] = "fusion.tanh"(%[[E]])
// CHECK-NEXT: %[[N:.*]] = "fusion.neg"(%[[T]])
// CHECK-NEXT: return %[[T]], %[[N]]
// CHECK-LABEL: func.func @escaping(
// CHECK-NEXT: %[[C:.*]]:2 = call @escaping_group0(%arg0)
// CHECK-NEXT: return %[[C]]#1, %[[C]]#0
func.func @escaping(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = "fusion.exp"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %t = "fusion.tanh"(%e) : (tensor<8xf32>) -> tensor<8xf32>
  %n = "fusion.neg"(%t) : (tensor<8xf32>) -> tensor<8xf32>
  return %n, %t : tensor<8xf32>, tensor<8xf32>
}
