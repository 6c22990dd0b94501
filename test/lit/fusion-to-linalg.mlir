// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-to-linalg, resolve-shaped-type-result-dims, canonicalize, func.func(linalg-fuse-elementwise-ops), canonicalize)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg{target=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg{target=cpu})' | FileCheck %s --check-prefix=CPU

// relu(exp(x) + 1): one fused generic, no fusion op left.
// CHECK-LABEL: func.func @fusion
// CHECK-NOT: fusion.
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK-NOT: linalg.generic
// CHECK: return
// GPU: math.exp
// CPU-NOT: math.exp
// CPU: arith.bitcast
func.func @fusion(%arg0: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %d0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %e = "fusion.exp"(%arg0) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %dup = "fusion.exp"(%arg0) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %c = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
  %b = "fusion.broadcast_in_dim"(%c, %d0, %d1) {broadcast_dims = array<i64>, shape = array<i64: -1, -1>} : (tensor<f32>, index, index) -> tensor<?x?xf32>
  %a = "fusion.add"(%e, %b) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = "fusion.relu"(%a) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
