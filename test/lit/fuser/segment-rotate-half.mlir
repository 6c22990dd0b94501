// fusion-segment on rotary embedding's q * cos + rotate_half(q) * sin, with rotate_half =
// cat((-q[.., d/2:], q[.., :d/2])): the halves and the negation have their own [.., d/2]
// domain, but only the cat reads them, and its loop reads them at computed indices
// (recomputing the slice and the negation there), so they belong to the cat's kernel: one
// pointwise segment, one kernel (was three: each half its own).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s

// CHECK-LABEL: func.func private @fusion_group0(
// CHECK-SAME: fusion.segments = ["pointwise"]
// CHECK: "fusion.slice"{{.*}}fusion.segment = 0
// CHECK: "fusion.slice"{{.*}}fusion.segment = 0
// CHECK: "fusion.neg"{{.*}}fusion.segment = 0
// CHECK: "fusion.cat"{{.*}}fusion.segment = 0
// CHECK-LABEL: func.func @fusion(
// CHECK-SAME: fusion.kernels = 1
func.func @fusion(%q: tensor<2x4x32x16xf32>, %cos: tensor<2x4x32x16xf32>, %sin: tensor<2x4x32x16xf32>) -> tensor<2x4x32x16xf32> {
  %lo = "fusion.slice"(%q) {shape = array<i64: 2, 4, 32, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x32x16xf32>) -> tensor<2x4x32x8xf32>
  %hi = "fusion.slice"(%q) {shape = array<i64: 2, 4, 32, 8>, starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x32x16xf32>) -> tensor<2x4x32x8xf32>
  %neg = "fusion.neg"(%hi) : (tensor<2x4x32x8xf32>) -> tensor<2x4x32x8xf32>
  %rot = "fusion.cat"(%neg, %lo) {dim = 3 : i64} : (tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>) -> tensor<2x4x32x16xf32>
  %a = "fusion.mul"(%q, %cos) : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x16xf32>
  %b = "fusion.mul"(%rot, %sin) : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x16xf32>
  %r = "fusion.add"(%a, %b) : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x16xf32>
  return %r : tensor<2x4x32x16xf32>
}
