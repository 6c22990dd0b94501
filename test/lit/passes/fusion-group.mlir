// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{horizontal=false})' | FileCheck %s --check-prefix=NOH
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{max-args=2})' | FileCheck %s --check-prefix=ARGS

// Two chains around a matmul: two groups, the matmul stays in the caller (no cycle even
// though %e feeds both the matmul and the second chain).
// CHECK-LABEL: func.func private @around_matmul_group0
// CHECK: "fusion.exp"
// CHECK: "fusion.tanh"
// CHECK: return
// CHECK-LABEL: func.func private @around_matmul_group1
// CHECK: "fusion.add"
// CHECK: "fusion.relu"
// CHECK-LABEL: func.func @around_matmul
// CHECK: call @around_matmul_group0
// CHECK: "fusion.matmul"
// CHECK: call @around_matmul_group1
func.func @around_matmul(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = "fusion.exp"(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = "fusion.tanh"(%e) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = "fusion.matmul"(%t, %b) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = "fusion.add"(%m, %e) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = "fusion.relu"(%s) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// Siblings sharing %x: one group with horizontal fusion, two without.
// CHECK-LABEL: func.func @siblings
// CHECK: call @siblings_group0
// CHECK-NOT: call
// CHECK: return
// NOH-LABEL: func.func @siblings
// NOH: call @siblings_group0
// NOH: call @siblings_group1
// A group may have at most 2 inputs + outputs: the 3-argument sibling merge is rejected.
// ARGS-LABEL: func.func @siblings
// ARGS: call @siblings_group0
// ARGS: call @siblings_group1
func.func @siblings(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = "fusion.exp"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %a2 = "fusion.neg"(%a) : (tensor<8xf32>) -> tensor<8xf32>
  %b = "fusion.sin"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %b2 = "fusion.abs"(%b) : (tensor<8xf32>) -> tensor<8xf32>
  return %a2, %b2 : tensor<8xf32>, tensor<8xf32>
}
