// mlirfuse passes mixed with upstream ones in one pipeline: fusion-cse merges the duplicate
// add, fusion-dce drops the dead exp (which would otherwise keep a second use on the add),
// fusion-to-linalg lowers, linalg-fuse-elementwise-ops fuses broadcast + add + relu, and
// canonicalize cleans up: relu(x + 1) is ONE linalg.generic (relu on the CPU target: x < 0 ? 0 : x,
// which keeps -0 as torch's CPU relu does).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-to-linalg, func.func(linalg-fuse-elementwise-ops), canonicalize)' | FileCheck %s
// The same for what the jit frontend traces (static shapes):
// RUN: %python %inputs/jit_ir.py relu_add_static | mlirfuse-opt --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-to-linalg, func.func(linalg-fuse-elementwise-ops), canonicalize)' | FileCheck %s --check-prefix=JIT
// The output is valid upstream IR and bufferizes:
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-to-linalg, func.func(linalg-fuse-elementwise-ops), canonicalize)' | mlir-opt --one-shot-bufferize=bufferize-function-boundaries | FileCheck %s --check-prefix=BUF

// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @fusion(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: fusion.
// CHECK-DAG: %[[ZERO:[^ ]+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ONE:[^ ]+]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[INIT:[^ ]+]] = tensor.empty() : tensor<2x3xf32>
// CHECK-NEXT: %[[R:[^ ]+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]] : tensor<2x3xf32>) outs(%[[INIT]] : tensor<2x3xf32>) {
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: %[[S:[^ ]+]] = arith.addf %[[IN]], %[[ONE]] : f32
// CHECK-NEXT: %[[NEG:[^ ]+]] = arith.cmpf olt, %[[S]], %[[ZERO]] : f32
// CHECK-NEXT: %[[M:[^ ]+]] = arith.select %[[NEG]], %[[ZERO]], %[[S]] : f32
// CHECK-NEXT: linalg.yield %[[M]] : f32
// CHECK-NEXT: } -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x3xf32>
// CHECK-NOT: linalg.generic
func.func @fusion(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %t2 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
  %t3 = "fusion.broadcast_in_dim"(%t2) {broadcast_dims = array<i64>, shape = array<i64: 2, 3>} : (tensor<f32>) -> tensor<2x3xf32>
  %t4 = "fusion.add"(%arg0, %t3) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %dup = "fusion.add"(%arg0, %t3) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %dead = "fusion.exp"(%dup) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t5 = "fusion.relu"(%t4) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %t5 : tensor<2x3xf32>
}

// JIT-LABEL: func.func @fusion(
// JIT-SAME: tensor<2x3xf32>) -> tensor<2x3xf32>
// JIT-NOT: fusion.
// JIT: linalg.generic
// JIT-SAME: iterator_types = ["parallel", "parallel"]
// JIT: arith.addf
// JIT-NEXT: arith.cmpf olt
// JIT-NEXT: arith.select
// JIT-NEXT: linalg.yield
// JIT-NOT: linalg.generic
// JIT: return

// BUF-LABEL: func.func @fusion(
// BUF-SAME: memref<2x3xf32
// BUF: linalg.generic
// BUF-NOT: linalg.generic
// BUF: return
