// What no schedule takes stays on the naive path (a thread per iteration, reductions as a
// serial loop): a row sum of x + transpose(y) (read along its rows by one operand, along
// its columns by the other); each schedule says why it did not take it. The fill of that
// sum's output is a pointwise kernel. A sum over a middle axis is a batch of column
// reductions (the outer index in the grid): one launch.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s

// CHECK: launch 0 {{.*}}: column reduction: ColumnReductionParams({{.*}}; the last block of each column block combines its partials in a fixed order
// CHECK: launch 1 {{.*}}: pointwise: PointwiseParams(
// CHECK: launch 2 {{.*}}: naive: not all loops are parallel; has reduction loops; operand 1 is not a contiguous row ([1, 0]); operand 0 is not read by column ([0, 1])
// CHECK: "launches: 3"

func.func @fusion(%arg0: tensor<?x?x?xf32>, %arg1: tensor<?x?xf32>, %arg2: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %t2 = "fusion.sum"(%arg0) {axes = array<i64: 1>, keepdim = false} : (tensor<?x?x?xf32>) -> tensor<?x?xf32>
  %t3 = "fusion.permute"(%arg2) {dims = array<i64: 1, 0>} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %t4 = "fusion.add"(%arg1, %t3) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t5 = "fusion.sum"(%t4) {axes = array<i64: 1>, keepdim = false} : (tensor<?x?xf32>) -> tensor<?xf32>
  return %t2, %t5 : tensor<?x?xf32>, tensor<?xf32>
}
