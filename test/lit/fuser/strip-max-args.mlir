// fusion-strip-bookend-views keeps groups within max-args: moving a view out of a group can
// add an argument (the group then needs both the view and the value it views), so a strip
// that would take a group above max-args is not done; strips that keep the count, or lower
// it, still are (even for a group already above the limit). Pass both passes the same limit
// (the groups below are formed under the default limit to show the strip pass's own check).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views{max-args=3})' | FileCheck %s --check-prefix=THREE
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views{max-args=4})' | FileCheck %s --check-prefix=FOUR
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views)' | FileCheck %s --check-prefix=FOUR
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views{max-args=3})' | mlir-opt --irdl-file=%irdl > /dev/null

// %x feeds a view AND a compute op of the group: moving the reshape out would make the group
// read %x and its view, 4 arguments.
// THREE-LABEL: func.func private @view_and_value_group0(
// THREE-SAME: %arg0: tensor<4x6xf32>, %arg1: tensor<6x4xf32>) -> tensor<6x4xf32> attributes {fusion.group}
// THREE-NEXT: "fusion.reshape"(%arg0)
// THREE-NEXT: "fusion.exp"(%arg0)
// THREE-NEXT: "fusion.reshape"
// THREE-NEXT: "fusion.add"
// THREE-NEXT: "fusion.mul"
// THREE-NEXT: return
// THREE-LABEL: func.func @view_and_value(
// THREE-NEXT: call @view_and_value_group0(%arg0, %arg1)
// THREE-NEXT: return
// FOUR-LABEL: func.func private @view_and_value_group0(
// FOUR-SAME: %arg0: tensor<4x6xf32>, %arg1: tensor<6x4xf32>, %arg2: tensor<6x4xf32>) -> tensor<6x4xf32> attributes {fusion.group}
// FOUR-NEXT: "fusion.exp"(%arg0)
// FOUR-NEXT: "fusion.reshape"
// FOUR-NEXT: "fusion.add"(%arg1,
// FOUR-NEXT: "fusion.mul"
// FOUR-NEXT: return
// FOUR-LABEL: func.func @view_and_value(
// FOUR-NEXT: %[[R:.*]] = "fusion.reshape"(%arg0)
// FOUR-NEXT: call @view_and_value_group0(%arg0, %[[R]], %arg1)
// FOUR-NEXT: return
func.func @view_and_value(%x: tensor<4x6xf32>, %y: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %r = "fusion.reshape"(%x) {shape = array<i64: 6, 4>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %e = "fusion.exp"(%x) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %er = "fusion.reshape"(%e) {shape = array<i64: 6, 4>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %a = "fusion.add"(%r, %er) : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %m = "fusion.mul"(%a, %y) : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return %m : tensor<6x4xf32>
}

// Two views of one input: moving either out alone needs 4 arguments (the view, %x for the
// other view, %y, the result); both out is 4 as well. Within 3 both stay; within 4 both go.
// THREE-LABEL: func.func private @two_views_group0(
// THREE-SAME: %arg0: tensor<4x6xf32>, %arg1: tensor<6x4xf32>) -> tensor<6x4xf32> attributes {fusion.group}
// THREE-NEXT: "fusion.reshape"(%arg0)
// THREE-NEXT: "fusion.permute"(%arg0)
// THREE-NEXT: "fusion.add"
// THREE-NEXT: "fusion.mul"
// THREE-NEXT: return
// THREE-LABEL: func.func @two_views(
// THREE-NEXT: call @two_views_group0(%arg0, %arg1)
// THREE-NEXT: return
// FOUR-LABEL: func.func private @two_views_group0(
// FOUR-SAME: %arg0: tensor<6x4xf32>, %arg1: tensor<6x4xf32>, %arg2: tensor<6x4xf32>) -> tensor<6x4xf32> attributes {fusion.group}
// FOUR-NEXT: "fusion.add"(%arg0, %arg1)
// FOUR-NEXT: "fusion.mul"
// FOUR-NEXT: return
// FOUR-LABEL: func.func @two_views(
// FOUR-NEXT: %[[R:.*]] = "fusion.reshape"(%arg0)
// FOUR-NEXT: %[[P:.*]] = "fusion.permute"(%arg0)
// FOUR-NEXT: call @two_views_group0(%[[R]], %[[P]], %arg1)
// FOUR-NEXT: return
func.func @two_views(%x: tensor<4x6xf32>, %y: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %r = "fusion.reshape"(%x) {shape = array<i64: 6, 4>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %p = "fusion.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %a = "fusion.add"(%r, %p) : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %m = "fusion.mul"(%a, %y) : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return %m : tensor<6x4xf32>
}

// Output views lower the count or keep it: the reshapes of the result leave the group even
// within max-args=3, though the group (2 inputs + 2 outputs) starts above it (outputs: 2
// views -> their one operand).
// THREE-LABEL: func.func private @output_views_group0(
// THREE-SAME: %arg0: tensor<4x6xf32>, %arg1: tensor<4x6xf32>) -> tensor<4x6xf32> attributes {fusion.group}
// THREE-NEXT: "fusion.add"
// THREE-NEXT: "fusion.exp"
// THREE-NEXT: return
// THREE-LABEL: func.func @output_views(
// THREE-NEXT: %[[G:.*]] = call @output_views_group0(%arg0, %arg1)
// THREE-NEXT: "fusion.reshape"(%[[G]])
// THREE-NEXT: "fusion.reshape"(%[[G]])
// THREE-NEXT: return
func.func @output_views(%x: tensor<4x6xf32>, %y: tensor<4x6xf32>) -> (tensor<24xf32>, tensor<6x4xf32>) {
  %a = "fusion.add"(%x, %y) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %e = "fusion.exp"(%a) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %r1 = "fusion.reshape"(%e) {shape = array<i64: 24>} : (tensor<4x6xf32>) -> tensor<24xf32>
  %r2 = "fusion.reshape"(%e) {shape = array<i64: 6, 4>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  return %r1, %r2 : tensor<24xf32>, tensor<6x4xf32>
}
