// Horizontal fusion in fusion-segment: siblings that fusion-group put in one group (ops
// reading the same input) share one kernel whenever one schedule serves them all: pointwise
// chains over one domain are one pointwise kernel, reductions over the same axes of one
// input one reduction kernel (prologues included). Siblings that no one schedule serves stay
// apart: reductions over different axes, or a reduction and pointwise work over its input
// domain that is neither its prologue nor its epilogue.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true}, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | mlir-opt --irdl-file=%irdl > /dev/null
// Without horizontal fusion in fusion-group the siblings are separate groups to begin with.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{horizontal=false}, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s --check-prefix=NOH

// Two pointwise chains reading %x: one group, one pointwise kernel.
// CHECK-LABEL: func.func private @pointwise_chains_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["pointwise"]}
// CHECK-NEXT: "fusion.exp"(%arg0) {fusion.segment = 0 : i64}
// CHECK-NEXT: "fusion.neg"{{.*}}{fusion.segment = 0 : i64}
// CHECK-NEXT: "fusion.sin"(%arg0) {fusion.segment = 0 : i64}
// CHECK-NEXT: "fusion.abs"{{.*}}{fusion.segment = 0 : i64}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @pointwise_chains(
// CHECK-SAME: attributes {fusion.kernels = 1 : i64}
// NOH-LABEL: func.func @pointwise_chains(
// NOH-SAME: attributes {fusion.kernels = 2 : i64}
func.func @pointwise_chains(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = "fusion.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a2 = "fusion.neg"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = "fusion.sin"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b2 = "fusion.abs"(%b) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %a2, %b2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// The same with dynamic sizes: both chains run over the extents of %x.
// CHECK-LABEL: func.func private @dynamic_chains_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["pointwise"]}
// CHECK-NOT: fusion.segment = 1
// CHECK: return
// CHECK-LABEL: func.func @dynamic_chains(
// CHECK-SAME: attributes {fusion.kernels = 1 : i64}
func.func @dynamic_chains(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %a = "fusion.exp"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %a2 = "fusion.neg"(%a) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %b = "fusion.sin"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %b2 = "fusion.abs"(%b) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %a2, %b2 : tensor<?x?xf32>, tensor<?x?xf32>
}

// Two reductions over the same axes of %x (a sum and a max, both results returned): one
// reduction kernel.
// CHECK-LABEL: func.func private @two_reductions_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["reduction"]}
// CHECK-NEXT: "fusion.sum"(%arg0) {axes = array<i64: 1>, fusion.segment = 0 : i64
// CHECK-NEXT: "fusion.max"(%arg0) {axes = array<i64: 1>, fusion.segment = 0 : i64
// CHECK-NEXT: return
// CHECK-LABEL: func.func @two_reductions(
// CHECK-SAME: attributes {fusion.kernels = 1 : i64}
// NOH-LABEL: func.func @two_reductions(
// NOH-SAME: attributes {fusion.kernels = 2 : i64}
func.func @two_reductions(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  %m = "fusion.max"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %s, %m : tensor<4xf32>, tensor<4xf32>
}

// Reductions over the same axes with their own pointwise prologues (sum(exp(x)) and
// max(x * x)): still one reduction kernel.
// CHECK-LABEL: func.func private @reductions_with_prologues_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["reduction"]}
// CHECK-NOT: fusion.segment = 1
// CHECK: return
// CHECK-LABEL: func.func @reductions_with_prologues(
// CHECK-SAME: attributes {fusion.kernels = 1 : i64}
func.func @reductions_with_prologues(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = "fusion.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = "fusion.sum"(%e) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  %q = "fusion.mul"(%x, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = "fusion.max"(%q) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %s, %m : tensor<4xf32>, tensor<4xf32>
}

// Reductions of one input over different axes need two schedules: two kernels.
// CHECK-LABEL: func.func private @different_axes_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["reduction", "reduction"]}
// CHECK-NEXT: "fusion.sum"(%arg0) {axes = array<i64: 0>, fusion.segment = 0 : i64
// CHECK-NEXT: "fusion.sum"(%arg0) {axes = array<i64: 1>, fusion.segment = 1 : i64
// CHECK-NEXT: return
// CHECK-LABEL: func.func @different_axes(
// CHECK-SAME: attributes {fusion.kernels = 2 : i64}
func.func @different_axes(%x: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  %a = "fusion.sum"(%x) {axes = array<i64: 0>, keepdim = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  %b = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %a, %b : tensor<8xf32>, tensor<4xf32>
}

// A reduction and a pointwise sibling that is neither its prologue nor its epilogue: a
// reduction kernel and a pointwise kernel (as in test/lit/passes/segment.mlir).
// CHECK-LABEL: func.func private @reduction_and_pointwise_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["reduction", "pointwise"]}
// CHECK-LABEL: func.func @reduction_and_pointwise(
// CHECK-SAME: attributes {fusion.kernels = 2 : i64}
func.func @reduction_and_pointwise(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %s = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  %e = "fusion.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = "fusion.neg"(%e) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %n : tensor<4xf32>, tensor<4x8xf32>
}
