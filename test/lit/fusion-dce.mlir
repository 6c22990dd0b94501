// fusion-dce erases fusion ops whose results are unused, whole dead chains included, and
// keeps everything a live value depends on. Upstream canonicalize cannot do this (IRDL ops
// are not known to be side-effect free), so the dead fusion ops survive it.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-dce)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(canonicalize)' | FileCheck %s --check-prefix=UPSTREAM
// Index math between fusion ops: fusion-dce, canonicalize (drops the dead arith), then
// fusion-dce again leaves nothing dead.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-dce, canonicalize, fusion-dce)' | FileCheck %s --check-prefix=CLEAN

// CHECK-LABEL: func.func @dead_chain(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x4xf32>)
// CHECK-NEXT: %[[E:[0-9]+]] = "fusion.exp"(%[[X]])
// CHECK-NEXT: %[[VM:[0-9]+]]:2 = "fusion.var_mean"(%[[E]])
// CHECK-NEXT: %[[A:[0-9]+]] = "fusion.add"(%[[E]], %[[E]])
// CHECK-NEXT: return %[[A]], %[[VM]]#1 :
// UPSTREAM-LABEL: func.func @dead_chain(
// UPSTREAM-DAG: "fusion.cos"
// UPSTREAM-DAG: "fusion.uniform"
// UPSTREAM-DAG: "fusion.broadcast_in_dim"
func.func @dead_chain(%x: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?xf32>) {
  %e = "fusion.exp"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %t = "fusion.tanh"(%e) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %s = "fusion.sin"(%t) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %c = "fusion.cos"(%s) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // Only the mean is used: the op stays (it has a live result).
  %vm:2 = "fusion.var_mean"(%e) {axes = array<i64: 1>, correction = 1.0 : f64, keepdim = false} : (tensor<?x4xf32>) -> (tensor<?xf32>, tensor<?xf32>)
  %a = "fusion.add"(%e, %e) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
  %k = "fusion.constant"() {value = 2.0 : f64} : () -> tensor<f32>
  %b = "fusion.broadcast_in_dim"(%k, %d0) {broadcast_dims = array<i64>, shape = array<i64: -1, 4>} : (tensor<f32>, index) -> tensor<?x4xf32>
  %m = "fusion.mul"(%b, %c) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %seed = "fusion.constant"() {value = 0 : i64} : () -> tensor<i64>
  %u = "fusion.uniform"(%k, %k, %seed, %seed, %d0) {shape = array<i64: -1, 4>} : (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>, index) -> tensor<?x4xf32>
  return %a, %vm#1 : tensor<?x4xf32>, tensor<?xf32>
}

// Nothing live but an argument: the body empties.
// CHECK-LABEL: func.func @all_dead(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]] : tensor<4xf32>
func.func @all_dead(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "fusion.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1:2 = "fusion.var_mean"(%0) {axes = array<i64: 0>, correction = 0.0 : f64, keepdim = true} : (tensor<4xf32>) -> (tensor<1xf32>, tensor<1xf32>)
  %2 = "fusion.reshape"(%1#0) {shape = array<i64>} : (tensor<1xf32>) -> tensor<f32>
  return %x : tensor<4xf32>
}

// A dead reshape whose size comes from upstream index math on fusion.size results.
// CHECK-LABEL: func.func @index_math(
// CHECK-NOT: "fusion.reshape"
// CHECK: return
// CLEAN-LABEL: func.func @index_math(
// CLEAN-SAME: %[[X:[a-z0-9_]+]]: tensor<?x?xf32>)
// CLEAN-NEXT: return %[[X]] : tensor<?x?xf32>
func.func @index_math(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%x) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %n = arith.muli %d0, %d1 : index
  %r = "fusion.reshape"(%x, %n) {shape = array<i64: -1>} : (tensor<?x?xf32>, index) -> tensor<?xf32>
  return %x : tensor<?x?xf32>
}

// A straight_through (a value with another's gradient, read by fusion-autodiff) becomes its
// value: the sum that carried the gradient is dead and erased.
// CHECK-LABEL: func.func @straight_through(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<4x6xf32>)
// CHECK-NOT: "fusion.sum"
// CHECK-NOT: "fusion.straight_through"
// CHECK: %[[E:[0-9]+]] = "fusion.exp"(%[[X]])
// CHECK-NEXT: return %[[E]] : tensor<4x6xf32>
func.func @straight_through(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %s = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %b = "fusion.broadcast_in_dim"(%s) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 4, 6>} : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %e = "fusion.exp"(%x) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %v = "fusion.straight_through"(%e, %b) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return %v : tensor<4x6xf32>
}
