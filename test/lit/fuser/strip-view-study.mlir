// The view study of the bookend-view issue (003): a sequential fusion add -> mul with views
// A (before the add), B (between add and mul) and C (after the mul) that swap a tensor
// between [8192, 3072] and [64, 128, 3072] (here [8, 6] and [2, 4, 6]). nvFuser made 1 to 3
// segments depending on which views are present; here EVERY one of the 8 combinations ends
// with exactly ONE group holding the add and the mul (with B between them when present),
// one pointwise segment, A as a view of the caller's input and C of the group's output.
// One RUN block per combination (prefix V + the views present; NONE: no view).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' > %t
// RUN: mlir-opt --irdl-file=%irdl %t > /dev/null

// RUN: FileCheck %s --check-prefix=NONE < %t
// NONE-LABEL: func.func private @none_group0(
// NONE-SAME: %arg0: tensor<8x6xf32>) -> tensor<8x6xf32> attributes {fusion.group, fusion.segments = ["pointwise"]}
// NONE-NEXT: "fusion.add"(%arg0, %arg0)
// NONE-NEXT: "fusion.mul"
// NONE-NEXT: return
// NONE-NOT: func.func private
// NONE-LABEL: func.func @none(
// NONE-NEXT: %[[G:.*]] = call @none_group0(%arg0)
// NONE-NEXT: return %[[G]]

func.func @none(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %s = "fusion.add"(%x, %x) : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %p = "fusion.mul"(%s, %s) : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  return %p : tensor<8x6xf32>
}

// RUN: FileCheck %s --check-prefix=VC < %t
// VC-LABEL: func.func private @C_group0(
// VC-SAME: %arg0: tensor<8x6xf32>) -> tensor<8x6xf32> attributes {fusion.group, fusion.segments = ["pointwise"]}
// VC-NEXT: "fusion.add"(%arg0, %arg0)
// VC-NEXT: "fusion.mul"
// VC-NEXT: return
// VC-NOT: func.func private
// VC-LABEL: func.func @C(
// VC-NEXT: %[[G:.*]] = call @C_group0(%arg0)
// VC-NEXT: %[[C:.*]] = "fusion.reshape"(%[[G]])
// VC-NEXT: return %[[C]]

func.func @C(%x: tensor<8x6xf32>) -> tensor<2x4x6xf32> {
  %s = "fusion.add"(%x, %x) : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %p = "fusion.mul"(%s, %s) : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %v1 = "fusion.reshape"(%p) {shape = array<i64: 2, 4, 6>} : (tensor<8x6xf32>) -> tensor<2x4x6xf32>
  return %v1 : tensor<2x4x6xf32>
}

// RUN: FileCheck %s --check-prefix=VB < %t
// VB-LABEL: func.func private @B_group0(
// VB-SAME: %arg0: tensor<8x6xf32>) -> tensor<2x4x6xf32> attributes {fusion.group, fusion.segments = ["pointwise"]}
// VB-NEXT: "fusion.add"(%arg0, %arg0)
// VB-NEXT: "fusion.reshape"
// VB-NEXT: "fusion.mul"
// VB-NEXT: return
// VB-NOT: func.func private
// VB-LABEL: func.func @B(
// VB-NEXT: %[[G:.*]] = call @B_group0(%arg0)
// VB-NEXT: return %[[G]]

func.func @B(%x: tensor<8x6xf32>) -> tensor<2x4x6xf32> {
  %s = "fusion.add"(%x, %x) : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %v1 = "fusion.reshape"(%s) {shape = array<i64: 2, 4, 6>} : (tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %p = "fusion.mul"(%v1, %v1) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %p : tensor<2x4x6xf32>
}

// RUN: FileCheck %s --check-prefix=VBC < %t
// VBC-LABEL: func.func private @BC_group0(
// VBC-SAME: %arg0: tensor<8x6xf32>) -> tensor<2x4x6xf32> attributes {fusion.group, fusion.segments = ["pointwise"]}
// VBC-NEXT: "fusion.add"(%arg0, %arg0)
// VBC-NEXT: "fusion.reshape"
// VBC-NEXT: "fusion.mul"
// VBC-NEXT: return
// VBC-NOT: func.func private
// VBC-LABEL: func.func @BC(
// VBC-NEXT: %[[G:.*]] = call @BC_group0(%arg0)
// VBC-NEXT: %[[C:.*]] = "fusion.reshape"(%[[G]])
// VBC-NEXT: return %[[C]]

func.func @BC(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %s = "fusion.add"(%x, %x) : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %v1 = "fusion.reshape"(%s) {shape = array<i64: 2, 4, 6>} : (tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %p = "fusion.mul"(%v1, %v1) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %v2 = "fusion.reshape"(%p) {shape = array<i64: 8, 6>} : (tensor<2x4x6xf32>) -> tensor<8x6xf32>
  return %v2 : tensor<8x6xf32>
}

// RUN: FileCheck %s --check-prefix=VA < %t
// VA-LABEL: func.func private @A_group0(
// VA-SAME: %arg0: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> attributes {fusion.group, fusion.segments = ["pointwise"]}
// VA-NEXT: "fusion.add"(%arg0, %arg0)
// VA-NEXT: "fusion.mul"
// VA-NEXT: return
// VA-NOT: func.func private
// VA-LABEL: func.func @A(
// VA-NEXT: %[[A:.*]] = "fusion.reshape"(%arg0)
// VA-NEXT: %[[G:.*]] = call @A_group0(%[[A]])
// VA-NEXT: return %[[G]]

func.func @A(%x: tensor<8x6xf32>) -> tensor<2x4x6xf32> {
  %v1 = "fusion.reshape"(%x) {shape = array<i64: 2, 4, 6>} : (tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %s = "fusion.add"(%v1, %v1) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %p = "fusion.mul"(%s, %s) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %p : tensor<2x4x6xf32>
}

// RUN: FileCheck %s --check-prefix=VAC < %t
// VAC-LABEL: func.func private @AC_group0(
// VAC-SAME: %arg0: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> attributes {fusion.group, fusion.segments = ["pointwise"]}
// VAC-NEXT: "fusion.add"(%arg0, %arg0)
// VAC-NEXT: "fusion.mul"
// VAC-NEXT: return
// VAC-NOT: func.func private
// VAC-LABEL: func.func @AC(
// VAC-NEXT: %[[A:.*]] = "fusion.reshape"(%arg0)
// VAC-NEXT: %[[G:.*]] = call @AC_group0(%[[A]])
// VAC-NEXT: %[[C:.*]] = "fusion.reshape"(%[[G]])
// VAC-NEXT: return %[[C]]

func.func @AC(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %v1 = "fusion.reshape"(%x) {shape = array<i64: 2, 4, 6>} : (tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %s = "fusion.add"(%v1, %v1) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %p = "fusion.mul"(%s, %s) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %v2 = "fusion.reshape"(%p) {shape = array<i64: 8, 6>} : (tensor<2x4x6xf32>) -> tensor<8x6xf32>
  return %v2 : tensor<8x6xf32>
}

// RUN: FileCheck %s --check-prefix=VAB < %t
// VAB-LABEL: func.func private @AB_group0(
// VAB-SAME: %arg0: tensor<2x4x6xf32>) -> tensor<8x6xf32> attributes {fusion.group, fusion.segments = ["pointwise"]}
// VAB-NEXT: "fusion.add"(%arg0, %arg0)
// VAB-NEXT: "fusion.reshape"
// VAB-NEXT: "fusion.mul"
// VAB-NEXT: return
// VAB-NOT: func.func private
// VAB-LABEL: func.func @AB(
// VAB-NEXT: %[[A:.*]] = "fusion.reshape"(%arg0)
// VAB-NEXT: %[[G:.*]] = call @AB_group0(%[[A]])
// VAB-NEXT: return %[[G]]

func.func @AB(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %v1 = "fusion.reshape"(%x) {shape = array<i64: 2, 4, 6>} : (tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %s = "fusion.add"(%v1, %v1) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %v2 = "fusion.reshape"(%s) {shape = array<i64: 8, 6>} : (tensor<2x4x6xf32>) -> tensor<8x6xf32>
  %p = "fusion.mul"(%v2, %v2) : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  return %p : tensor<8x6xf32>
}

// RUN: FileCheck %s --check-prefix=VABC < %t
// VABC-LABEL: func.func private @ABC_group0(
// VABC-SAME: %arg0: tensor<2x4x6xf32>) -> tensor<8x6xf32> attributes {fusion.group, fusion.segments = ["pointwise"]}
// VABC-NEXT: "fusion.add"(%arg0, %arg0)
// VABC-NEXT: "fusion.reshape"
// VABC-NEXT: "fusion.mul"
// VABC-NEXT: return
// VABC-NOT: func.func private
// VABC-LABEL: func.func @ABC(
// VABC-NEXT: %[[A:.*]] = "fusion.reshape"(%arg0)
// VABC-NEXT: %[[G:.*]] = call @ABC_group0(%[[A]])
// VABC-NEXT: %[[C:.*]] = "fusion.reshape"(%[[G]])
// VABC-NEXT: return %[[C]]

func.func @ABC(%x: tensor<8x6xf32>) -> tensor<2x4x6xf32> {
  %v1 = "fusion.reshape"(%x) {shape = array<i64: 2, 4, 6>} : (tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %s = "fusion.add"(%v1, %v1) : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %v2 = "fusion.reshape"(%s) {shape = array<i64: 8, 6>} : (tensor<2x4x6xf32>) -> tensor<8x6xf32>
  %p = "fusion.mul"(%v2, %v2) : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %v3 = "fusion.reshape"(%p) {shape = array<i64: 2, 4, 6>} : (tensor<8x6xf32>) -> tensor<2x4x6xf32>
  return %v3 : tensor<2x4x6xf32>
}
