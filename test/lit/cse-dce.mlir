// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce)' | FileCheck %s

// CHECK-LABEL: func.func @f
// CHECK-COUNT-1: "fusion.exp"
// CHECK-NOT: "fusion.exp"
// CHECK: "fusion.sum"{{.*}}axes = array<i64: 0>
// CHECK: "fusion.sum"{{.*}}axes = array<i64: 1>
// CHECK-NOT: "fusion.tanh"
func.func @f(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %0 = "fusion.exp"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %1 = "fusion.exp"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %2 = "fusion.add"(%0, %1) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %3 = "fusion.sum"(%2) {axes = array<i64: 0>, keepdim = false} : (tensor<?x?xf32>) -> tensor<?xf32>
  %4 = "fusion.sum"(%2) {axes = array<i64: 1>, keepdim = false} : (tensor<?x?xf32>) -> tensor<?xf32>
  %dead = "fusion.tanh"(%2) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %dead2 = "fusion.tanh"(%dead) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %2, %3, %4 : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}
