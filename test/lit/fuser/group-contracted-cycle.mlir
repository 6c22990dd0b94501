// Groups must not feed each other: with the kernel-argument limit cutting a chain, a merge
// whose group alone has no path out and back in can still make two groups each need the
// other's result (a1 -> b1 and b2 -> a2). fusion-group checks paths over the contracted graph
// (a reached group continues from all its ops); before, this input made two such groups and
// the pass failed ordering them ("min() arg is an empty sequence").
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-group{max-args=8})' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-group{max-args=8})' | mlir-opt --irdl-file=%irdl > /dev/null

// CHECK-LABEL: func.func private @fusion_group0(
// CHECK-COUNT-2: "fusion.add"
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @fusion_group1(
// CHECK: return
// CHECK-LABEL: func.func @fusion(
// CHECK: %[[G0:.+]]:2 = call @fusion_group0(
// CHECK-NEXT: %[[G1:.+]]:4 = call @fusion_group1({{.*}}%[[G0]]#1
// CHECK-NEXT: "fusion.mul"(%[[G0]]#0, %[[G1]]#0)
// CHECK-NEXT: return
module {
  func.func @fusion(%arg0: tensor<?xf32>, %arg1: tensor<?xf32>, %arg2: tensor<?xf32>, %arg3: tensor<?xf32>, %arg4: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
    %d0_0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?xf32>) -> index
    %t6 = "fusion.broadcast_in_dim"(%arg1, %d0_0) {broadcast_dims = array<i64: 0>, shape = array<i64: -1>} : (tensor<?xf32>, index) -> tensor<?xf32>
    %t7 = "fusion.add"(%arg0, %t6) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %t8 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
    %t9 = "fusion.broadcast_in_dim"(%t8, %d0_0) {broadcast_dims = array<i64>, shape = array<i64: -1>} : (tensor<f32>, index) -> tensor<?xf32>
    %t10 = "fusion.mul"(%t7, %t9) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %t11 = "fusion.broadcast_in_dim"(%arg2, %d0_0) {broadcast_dims = array<i64: 0>, shape = array<i64: -1>} : (tensor<?xf32>, index) -> tensor<?xf32>
    %t12 = "fusion.add"(%t7, %t11) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %t13 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
    %t14 = "fusion.broadcast_in_dim"(%t13, %d0_0) {broadcast_dims = array<i64>, shape = array<i64: -1>} : (tensor<f32>, index) -> tensor<?xf32>
    %t15 = "fusion.mul"(%t12, %t14) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %t16 = "fusion.broadcast_in_dim"(%arg3, %d0_0) {broadcast_dims = array<i64: 0>, shape = array<i64: -1>} : (tensor<?xf32>, index) -> tensor<?xf32>
    %t17 = "fusion.add"(%t12, %t16) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %t18 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
    %t19 = "fusion.broadcast_in_dim"(%t18, %d0_0) {broadcast_dims = array<i64>, shape = array<i64: -1>} : (tensor<f32>, index) -> tensor<?xf32>
    %t20 = "fusion.mul"(%t17, %t19) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %t21 = "fusion.broadcast_in_dim"(%arg4, %d0_0) {broadcast_dims = array<i64: 0>, shape = array<i64: -1>} : (tensor<?xf32>, index) -> tensor<?xf32>
    %t22 = "fusion.add"(%t17, %t21) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %t23 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
    %t24 = "fusion.broadcast_in_dim"(%t23, %d0_0) {broadcast_dims = array<i64>, shape = array<i64: -1>} : (tensor<f32>, index) -> tensor<?xf32>
    %t25 = "fusion.mul"(%t22, %t24) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    return %t10, %t15, %t20, %t25 : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
  }
}
