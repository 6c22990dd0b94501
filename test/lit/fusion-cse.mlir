// fusion-cse merges fusion ops with the same name, operands, attributes and result types
// (upstream `cse` cannot: IRDL ops are not known to be Pure). The first op stays and takes
// over the uses of its duplicates; anything that differs is kept apart.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse)' | FileCheck %s
// Upstream cse leaves the duplicates (that is why fusion-cse exists):
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(cse)' | FileCheck %s --check-prefix=UPSTREAM

// Merging cascades: once the two exps are one, the two adds become identical, then the two
// muls (whose operands were swapped copies of the same value). Multi-result ops (var_mean)
// and random ops (seed/offset are operands, so they are pure) merge too.
// CHECK-LABEL: func.func @duplicates(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x4xf32>, %[[Y:[a-z0-9_]+]]: tensor<?x4xf32>)
// CHECK-NEXT: %[[E:[0-9]+]] = "fusion.exp"(%[[X]])
// CHECK-NEXT: %[[A:[0-9]+]] = "fusion.add"(%[[E]], %[[Y]])
// CHECK-NEXT: %[[M:[0-9]+]] = "fusion.mul"(%[[A]], %[[A]])
// CHECK-NEXT: %[[D0:[0-9]+]] = "fusion.size"(%[[X]]) {dim = 0 : i64}
// CHECK-NEXT: %[[VM:[0-9]+]]:2 = "fusion.var_mean"(%[[X]])
// CHECK-NEXT: %[[K:[0-9]+]] = "fusion.constant"() {value = 1.500000e+00 : f64} : () -> tensor<f32>
// CHECK-NEXT: %[[S:[0-9]+]] = "fusion.constant"() {value = 3 : i64} : () -> tensor<i64>
// CHECK-NEXT: %[[U:[0-9]+]] = "fusion.uniform"(%[[K]], %[[K]], %[[S]], %[[S]], %[[D0]])
// CHECK-NEXT: return %[[M]], %[[M]], %[[VM]]#0, %[[VM]]#1, %[[VM]]#1, %[[U]], %[[U]] :
// UPSTREAM-LABEL: func.func @duplicates(
// UPSTREAM-COUNT-2: "fusion.exp"
// UPSTREAM-COUNT-2: "fusion.add"
func.func @duplicates(%x: tensor<?x4xf32>, %y: tensor<?x4xf32>)
    -> (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?x4xf32>, tensor<?x4xf32>) {
  %e1 = "fusion.exp"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %e2 = "fusion.exp"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %a1 = "fusion.add"(%e1, %y) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %a2 = "fusion.add"(%e2, %y) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %m1 = "fusion.mul"(%a1, %a2) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %m2 = "fusion.mul"(%a2, %a1) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
  %d0b = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
  %vm1:2 = "fusion.var_mean"(%x) {axes = array<i64: 1>, correction = 1.0 : f64, keepdim = false} : (tensor<?x4xf32>) -> (tensor<?xf32>, tensor<?xf32>)
  %vm2:2 = "fusion.var_mean"(%x) {keepdim = false, correction = 1.0 : f64, axes = array<i64: 1>} : (tensor<?x4xf32>) -> (tensor<?xf32>, tensor<?xf32>)
  %k1 = "fusion.constant"() {value = 1.5 : f64} : () -> tensor<f32>
  %s1 = "fusion.constant"() {value = 3 : i64} : () -> tensor<i64>
  %k2 = "fusion.constant"() {value = 1.5 : f64} : () -> tensor<f32>
  %s2 = "fusion.constant"() {value = 3 : i64} : () -> tensor<i64>
  %u1 = "fusion.uniform"(%k1, %k1, %s1, %s1, %d0) {shape = array<i64: -1, 4>} : (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>, index) -> tensor<?x4xf32>
  %u2 = "fusion.uniform"(%k2, %k2, %s2, %s2, %d0b) {shape = array<i64: -1, 4>} : (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>, index) -> tensor<?x4xf32>
  return %m1, %m2, %vm1#0, %vm2#1, %vm1#1, %u1, %u2 : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?x4xf32>, tensor<?x4xf32>
}

// Nothing here is a duplicate: attributes (axes, keepdim, correction, dim, constant value),
// operand order (no commutativity is assumed), or result type differ.
// CHECK-LABEL: func.func @kept(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x4xf32>, %[[Y:[a-z0-9_]+]]: tensor<?x4xf32>)
// CHECK-NEXT: "fusion.sum"(%[[X]]) {axes = array<i64: 0>, keepdim = false}
// CHECK-NEXT: "fusion.sum"(%[[X]]) {axes = array<i64: 1>, keepdim = false}
// CHECK-NEXT: "fusion.sum"(%[[X]]) {axes = array<i64: 1>, keepdim = true}
// CHECK-NEXT: "fusion.var"(%[[X]]) {axes = array<i64: 1>, correction = 0.000000e+00 : f64, keepdim = false}
// CHECK-NEXT: "fusion.var"(%[[X]]) {axes = array<i64: 1>, correction = 1.000000e+00 : f64, keepdim = false}
// CHECK-NEXT: "fusion.size"(%[[X]]) {dim = 0 : i64}
// CHECK-NEXT: "fusion.size"(%[[X]]) {dim = 1 : i64}
// CHECK-NEXT: "fusion.constant"() {value = 1.000000e+00 : f64} : () -> tensor<f32>
// CHECK-NEXT: "fusion.constant"() {value = 2.000000e+00 : f64} : () -> tensor<f32>
// CHECK-NEXT: "fusion.constant"() {value = 1.000000e+00 : f64} : () -> tensor<f16>
// CHECK-NEXT: "fusion.add"(%[[X]], %[[Y]])
// CHECK-NEXT: "fusion.add"(%[[Y]], %[[X]])
// CHECK-NEXT: "fusion.cast"(%[[X]]) : (tensor<?x4xf32>) -> tensor<?x4xf16>
// CHECK-NEXT: "fusion.cast"(%[[X]]) : (tensor<?x4xf32>) -> tensor<?x4xbf16>
// CHECK-NEXT: return
func.func @kept(%x: tensor<?x4xf32>, %y: tensor<?x4xf32>) {
  %0 = "fusion.sum"(%x) {axes = array<i64: 0>, keepdim = false} : (tensor<?x4xf32>) -> tensor<4xf32>
  %1 = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<?x4xf32>) -> tensor<?xf32>
  %2 = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = true} : (tensor<?x4xf32>) -> tensor<?x1xf32>
  %3 = "fusion.var"(%x) {axes = array<i64: 1>, correction = 0.0 : f64, keepdim = false} : (tensor<?x4xf32>) -> tensor<?xf32>
  %4 = "fusion.var"(%x) {axes = array<i64: 1>, correction = 1.0 : f64, keepdim = false} : (tensor<?x4xf32>) -> tensor<?xf32>
  %5 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
  %6 = "fusion.size"(%x) {dim = 1 : i64} : (tensor<?x4xf32>) -> index
  %7 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
  %8 = "fusion.constant"() {value = 2.0 : f64} : () -> tensor<f32>
  %9 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f16>
  %10 = "fusion.add"(%x, %y) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %11 = "fusion.add"(%y, %x) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %12 = "fusion.cast"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf16>
  %13 = "fusion.cast"(%x) : (tensor<?x4xf32>) -> tensor<?x4xbf16>
  return
}

// Each function is its own scope: the same op in two functions stays in both.
// CHECK-LABEL: func.func @scope_a(
// CHECK: "fusion.tanh"
// CHECK-LABEL: func.func @scope_b(
// CHECK: "fusion.tanh"
func.func @scope_a(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "fusion.tanh"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @scope_b(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "fusion.tanh"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
