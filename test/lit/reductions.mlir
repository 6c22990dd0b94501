// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg)' | FileCheck %s

// A sum over the last axis: fill with 0, then a generic with a reduction loop; f16 is
// extended to f32 before accumulating and rounded at the end.
// CHECK-LABEL: func.func @sum_f16
// CHECK: linalg.fill
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK: arith.extf {{.*}} : f16 to f32
// CHECK: arith.addf {{.*}} fastmath<reassoc> : f32
// CHECK: arith.truncf {{.*}} : f32 to f16
func.func @sum_f16(%x: tensor<?x?xf16>) -> tensor<?xf16> {
  %0 = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<?x?xf16>) -> tensor<?xf16>
  return %0 : tensor<?xf16>
}

// CHECK-LABEL: func.func @views
// CHECK: tensor.reshape
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
func.func @views(%x: tensor<6x4xf32>) -> (tensor<24xf32>, tensor<4x6xf32>) {
  %c24 = arith.constant 24 : index
  %0 = "fusion.reshape"(%x, %c24) {shape = array<i64: -1>} : (tensor<6x4xf32>, index) -> tensor<24xf32>
  %1 = "fusion.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  return %0, %1 : tensor<24xf32>, tensor<4x6xf32>
}

// Philox rounds for random numbers.
// CHECK-LABEL: func.func @random
// CHECK: linalg.index
// CHECK: arith.mului_extended
func.func @random(%x: tensor<?xf32>, %seed: tensor<i64>) -> tensor<?xf32> {
  %0 = "fusion.rand_like"(%x, %seed, %seed) : (tensor<?xf32>, tensor<i64>, tensor<i64>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
