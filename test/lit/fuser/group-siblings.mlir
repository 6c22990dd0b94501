// Horizontal fusion: fusible siblings that share an input (a function argument, or the result
// of a library op) merge into one group when horizontal=true (the default) and stay two
// groups when horizontal=false. A sibling merge that would make a cycle through a matmul is
// refused even with horizontal=true.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | FileCheck %s --check-prefix=H
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{horizontal=true})' | FileCheck %s --check-prefix=H
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{horizontal=false})' | FileCheck %s --check-prefix=NOH
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | mlir-opt --irdl-file=%irdl > /dev/null
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{horizontal=false})' | mlir-opt --irdl-file=%irdl > /dev/null

// Siblings of a function argument.
// H-LABEL: func.func private @arg_siblings_group0(
// H-SAME: %arg0: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) attributes {fusion.group}
// H-NEXT: "fusion.exp"
// H-NEXT: "fusion.neg"
// H-NEXT: "fusion.sin"
// H-NEXT: "fusion.abs"
// H-NEXT: return
// H-NOT: func.func private
// H-LABEL: func.func @arg_siblings(
// H-NEXT: call @arg_siblings_group0(%arg0)
// H-NEXT: return
// NOH-LABEL: func.func private @arg_siblings_group0(
// NOH-SAME: -> tensor<8xf32> attributes {fusion.group}
// NOH-NEXT: "fusion.exp"
// NOH-NEXT: "fusion.neg"
// NOH-NEXT: return
// NOH-LABEL: func.func private @arg_siblings_group1(
// NOH-SAME: -> tensor<8xf32> attributes {fusion.group}
// NOH-NEXT: "fusion.sin"
// NOH-NEXT: "fusion.abs"
// NOH-NEXT: return
// NOH-LABEL: func.func @arg_siblings(
// NOH-NEXT: call @arg_siblings_group0(%arg0)
// NOH-NEXT: call @arg_siblings_group1(%arg0)
// NOH-NEXT: return
func.func @arg_siblings(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = "fusion.exp"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %a2 = "fusion.neg"(%a) : (tensor<8xf32>) -> tensor<8xf32>
  %b = "fusion.sin"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %b2 = "fusion.abs"(%b) : (tensor<8xf32>) -> tensor<8xf32>
  return %a2, %b2 : tensor<8xf32>, tensor<8xf32>
}

// Siblings of an op result: both chains read the matmul's result, which stays in the caller.
// H-LABEL: func.func private @result_siblings_group0(
// H-SAME: %arg0: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) attributes {fusion.group}
// H-NEXT: "fusion.exp"
// H-NEXT: "fusion.neg"
// H-NEXT: "fusion.sin"
// H-NEXT: "fusion.abs"
// H-NEXT: return
// H-NOT: func.func private
// H-LABEL: func.func @result_siblings(
// H-NEXT: %[[M:.*]] = "fusion.matmul"(%arg0, %arg1)
// H-NEXT: call @result_siblings_group0(%[[M]])
// H-NEXT: return
// NOH-LABEL: func.func private @result_siblings_group0(
// NOH-NEXT: "fusion.exp"
// NOH-NEXT: "fusion.neg"
// NOH-NEXT: return
// NOH-LABEL: func.func private @result_siblings_group1(
// NOH-NEXT: "fusion.sin"
// NOH-NEXT: "fusion.abs"
// NOH-NEXT: return
// NOH-LABEL: func.func @result_siblings(
// NOH-NEXT: %[[M:.*]] = "fusion.matmul"(%arg0, %arg1)
// NOH-NEXT: call @result_siblings_group0(%[[M]])
// NOH-NEXT: call @result_siblings_group1(%[[M]])
// NOH-NEXT: return
func.func @result_siblings(%p: tensor<4x4xf32>, %q: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %m = "fusion.matmul"(%p, %q) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = "fusion.exp"(%m) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %a2 = "fusion.neg"(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = "fusion.sin"(%m) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %b2 = "fusion.abs"(%b) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %a2, %b2 : tensor<4x4xf32>, tensor<4x4xf32>
}

// exp(x) and sin(x) are siblings, but exp's chain feeds a matmul whose result meets sin's
// chain: merging them would put the matmul inside a cycle (group -> matmul -> group), so
// there are two groups in either mode, and the matmul sits between the two calls.
// H-LABEL: func.func private @sibling_cycle_group0(
// H-NEXT: "fusion.exp"
// H-NEXT: "fusion.tanh"
// H-NEXT: return
// H-LABEL: func.func private @sibling_cycle_group1(
// H-NEXT: "fusion.sin"
// H-NEXT: "fusion.add"
// H-NEXT: "fusion.relu"
// H-NEXT: return
// H-LABEL: func.func @sibling_cycle(
// H-NEXT: %[[T:.*]] = call @sibling_cycle_group0(%arg0)
// H-NEXT: %[[M:.*]] = "fusion.matmul"(%[[T]], %arg1)
// H-NEXT: call @sibling_cycle_group1(%arg0, %[[M]])
// H-NEXT: return
// NOH-LABEL: func.func private @sibling_cycle_group0(
// NOH-NEXT: "fusion.exp"
// NOH-NEXT: "fusion.tanh"
// NOH-NEXT: return
// NOH-LABEL: func.func private @sibling_cycle_group1(
// NOH-NEXT: "fusion.sin"
// NOH-NEXT: "fusion.add"
// NOH-NEXT: "fusion.relu"
// NOH-NEXT: return
func.func @sibling_cycle(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = "fusion.exp"(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = "fusion.tanh"(%e) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = "fusion.matmul"(%t, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = "fusion.sin"(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = "fusion.add"(%s, %m) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = "fusion.relu"(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
