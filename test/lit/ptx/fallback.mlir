// What no schedule takes stays on the naive path (a thread per iteration, reductions as a
// serial loop): a reduction over a middle axis (neither the innermost loops nor the outer
// dims of its input); each schedule says why it did not take it. The fill of the sum's output
// is still a pointwise kernel; the transpose beside it is a transpose kernel.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s

// CHECK: pointwise: PointwiseParams(
// CHECK: naive: not all loops are parallel; has reduction loops; operand 0 is not a contiguous row ([0, 2, 1]); operand 0 is not read by column ([0, 2, 1])
// CHECK: transpose: TransposeParams(vector=4, tile=32, block=256)
// CHECK: "launches: 3"

func.func @fusion(%arg0: tensor<?x?x?xf32>, %arg1: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %t2 = "fusion.sum"(%arg0) {axes = array<i64: 1>, keepdim = false} : (tensor<?x?x?xf32>) -> tensor<?x?xf32>
  %t3 = "fusion.permute"(%arg1) {dims = array<i64: 1, 0>} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %t2, %t3 : tensor<?x?xf32>, tensor<?x?xf32>
}
