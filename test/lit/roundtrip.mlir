// RUN: mlirfuse-opt %s | mlirfuse-opt | FileCheck %s
// RUN: mlir-opt --irdl-file=%irdl %s | FileCheck %s

// CHECK-LABEL: func.func @ops
func.func @ops(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>, %c: tensor<?x4xi1>) -> (tensor<?xf32>, tensor<?xf32>) {
  // CHECK: "fusion.add"(%{{.*}}, %{{.*}}) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %0 = "fusion.add"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK: "fusion.where"
  %1 = "fusion.where"(%c, %0, %b) : (tensor<?x4xi1>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK: "fusion.lt"{{.*}}-> tensor<?x4xi1>
  %2 = "fusion.lt"(%0, %1) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  // CHECK: %{{.*}}:2 = "fusion.var_mean"{{.*}}axes = array<i64: 1>
  %3:2 = "fusion.var_mean"(%1) {axes = array<i64: 1>, correction = 1.0 : f64, keepdim = false} : (tensor<?x4xf32>) -> (tensor<?xf32>, tensor<?xf32>)
  // CHECK: "fusion.size"
  %d = "fusion.size"(%a) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
  // CHECK: "fusion.broadcast_in_dim"{{.*}}broadcast_dims = array<i64: 0>
  %4 = "fusion.broadcast_in_dim"(%3#1, %d) {broadcast_dims = array<i64: 0>, shape = array<i64: -1, 4>} : (tensor<?xf32>, index) -> tensor<?x4xf32>
  // CHECK: "fusion.uniform"
  %lo = "fusion.constant"() {value = 0.0 : f64} : () -> tensor<f32>
  %hi = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
  %s = "fusion.constant"() {value = 7 : i64} : () -> tensor<i64>
  %5 = "fusion.uniform"(%lo, %hi, %s, %s, %d) {shape = array<i64: -1, 4>} : (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>, index) -> tensor<?x4xf32>
  return %3#0, %3#1 : tensor<?xf32>, tensor<?xf32>
}
