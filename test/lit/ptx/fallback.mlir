// What no schedule takes stays on the naive path (a thread per iteration, reductions as a
// serial loop): a column sum (the reduced loop is not the innermost one) and a transpose.
// The fill of the column sum's output is still a pointwise kernel.
// RUN: %python %S/Inputs/gpu_stage.py %s launch_params | FileCheck %s

// CHECK: pointwise: PointwiseParams(
// CHECK: naive: not all loops are parallel; operand 0 is not a contiguous row ([1, 0])
// CHECK: naive: operand 0 is transposed ([1, 0]); not a reduction over the innermost loops
// CHECK: // launches: 3

func.func @fusion(%arg0: tensor<?x?xf32>) -> (tensor<?xf32>, tensor<?x?xf32>) {
  %t2 = "fusion.sum"(%arg0) {axes = array<i64: 0>, keepdim = false} : (tensor<?x?xf32>) -> tensor<?xf32>
  %t3 = "fusion.permute"(%arg0) {dims = array<i64: 1, 0>} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %t2, %t3 : tensor<?xf32>, tensor<?x?xf32>
}
