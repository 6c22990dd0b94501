// The kernel-argument limit: a merge never gives a group more than max-args inputs+outputs.
// ((a + b) * c) - d needs 4 inputs + 1 output as one group.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | FileCheck %s --check-prefix=ALL
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{max-args=5})' | FileCheck %s --check-prefix=ALL
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{max-args=4})' | FileCheck %s --check-prefix=FOUR
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{max-args=4 single-node=true})' | FileCheck %s --check-prefix=FOUR-SN
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{max-args=3})' | FileCheck %s --check-prefix=THREE
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{max-args=3 single-node=true})' | FileCheck %s --check-prefix=THREE-SN
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{max-args=4 single-node=true})' | mlir-opt --irdl-file=%irdl > /dev/null

// No limit reached: one group of 5 arguments.
// ALL-LABEL: func.func private @four_inputs_group0(
// ALL-SAME: %arg0: tensor<8xf32>, %arg1: tensor<8xf32>, %arg2: tensor<8xf32>, %arg3: tensor<8xf32>) -> tensor<8xf32>
// ALL-NEXT: "fusion.add"
// ALL-NEXT: "fusion.mul"
// ALL-NEXT: "fusion.sub"
// ALL-NEXT: return
// ALL-NOT: func.func private
// ALL-LABEL: func.func @four_inputs(
// ALL-NEXT: call @four_inputs_group0(%arg0, %arg1, %arg2, %arg3)
// ALL-NEXT: return

// max-args=4: the add cannot join (5 arguments); alone it is a single-node group, which is
// not outlined by default: it stays in the caller.
// FOUR-LABEL: func.func private @four_inputs_group0(
// FOUR-SAME: %arg0: tensor<8xf32>, %arg1: tensor<8xf32>, %arg2: tensor<8xf32>) -> tensor<8xf32>
// FOUR-NEXT: "fusion.mul"
// FOUR-NEXT: "fusion.sub"
// FOUR-NEXT: return
// FOUR-NOT: func.func private
// FOUR-LABEL: func.func @four_inputs(
// FOUR-NEXT: %[[S:.*]] = "fusion.add"(%arg0, %arg1)
// FOUR-NEXT: call @four_inputs_group0(%[[S]], %arg2, %arg3)
// FOUR-NEXT: return

// FOUR-SN-LABEL: func.func private @four_inputs_group0(
// FOUR-SN-SAME: %arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> tensor<8xf32>
// FOUR-SN-NEXT: "fusion.add"
// FOUR-SN-NEXT: return
// FOUR-SN-LABEL: func.func private @four_inputs_group1(
// FOUR-SN-SAME: %arg0: tensor<8xf32>, %arg1: tensor<8xf32>, %arg2: tensor<8xf32>) -> tensor<8xf32>
// FOUR-SN-NEXT: "fusion.mul"
// FOUR-SN-NEXT: "fusion.sub"
// FOUR-SN-NEXT: return
// FOUR-SN-NOT: func.func private
// FOUR-SN-LABEL: func.func @four_inputs(
// FOUR-SN-NEXT: %[[S:.*]] = call @four_inputs_group0(%arg0, %arg1)
// FOUR-SN-NEXT: call @four_inputs_group1(%[[S]], %arg2, %arg3)
// FOUR-SN-NEXT: return

// max-args=3: every merge needs 4 arguments: no group of two ops.
// THREE-NOT: func.func private @four_inputs_group
// THREE-LABEL: func.func @four_inputs(
// THREE-NEXT: "fusion.add"
// THREE-NEXT: "fusion.mul"
// THREE-NEXT: "fusion.sub"
// THREE-NEXT: return
// THREE-SN-LABEL: func.func private @four_inputs_group0(
// THREE-SN-NEXT: "fusion.add"
// THREE-SN-NEXT: return
// THREE-SN-LABEL: func.func private @four_inputs_group1(
// THREE-SN-NEXT: "fusion.mul"
// THREE-SN-NEXT: return
// THREE-SN-LABEL: func.func private @four_inputs_group2(
// THREE-SN-NEXT: "fusion.sub"
// THREE-SN-NEXT: return
// THREE-SN-NOT: func.func private @four_inputs_group
// THREE-SN-LABEL: func.func @four_inputs(
func.func @four_inputs(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>, %d: tensor<8xf32>) -> tensor<8xf32> {
  %s = "fusion.add"(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %m = "fusion.mul"(%s, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %r = "fusion.sub"(%m, %d) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// The limit also applies to horizontal merges: the two sibling chains of %x need 1 input +
// 2 outputs together; with max-args=2 they stay two groups.
// ALL-LABEL: func.func private @siblings_group0(
// ALL-SAME: -> (tensor<8xf32>, tensor<8xf32>)
// ALL-NOT: func.func private
// ALL-LABEL: func.func @siblings(
// ALL-NEXT: call @siblings_group0(%arg0)
// ALL-NEXT: return
// FOUR-LABEL: func.func private @siblings_group0(
// FOUR-SAME: -> (tensor<8xf32>, tensor<8xf32>)
// THREE-LABEL: func.func private @siblings_group0(
// THREE-SAME: -> (tensor<8xf32>, tensor<8xf32>)
// THREE-NOT: func.func private @siblings_group1
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{max-args=2})' | FileCheck %s --check-prefix=TWO
// TWO-LABEL: func.func private @siblings_group0(
// TWO-SAME: %arg0: tensor<8xf32>) -> tensor<8xf32>
// TWO-NEXT: "fusion.exp"
// TWO-NEXT: "fusion.neg"
// TWO-NEXT: return
// TWO-LABEL: func.func private @siblings_group1(
// TWO-SAME: %arg0: tensor<8xf32>) -> tensor<8xf32>
// TWO-NEXT: "fusion.sin"
// TWO-NEXT: "fusion.abs"
// TWO-NEXT: return
// TWO-LABEL: func.func @siblings(
// TWO-NEXT: call @siblings_group0(%arg0)
// TWO-NEXT: call @siblings_group1(%arg0)
// TWO-NEXT: return
func.func @siblings(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = "fusion.exp"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %a2 = "fusion.neg"(%a) : (tensor<8xf32>) -> tensor<8xf32>
  %b = "fusion.sin"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %b2 = "fusion.abs"(%b) : (tensor<8xf32>) -> tensor<8xf32>
  return %a2, %b2 : tensor<8xf32>, tensor<8xf32>
}
