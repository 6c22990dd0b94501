// fusion-to-linalg on shape ops. Broadcasts are copies through a projected input map (a
// size-1 dim that grows is read at index 0); reshape is tensor.reshape with the extents from
// the `sizes` operands; permute/squeeze/unsqueeze are copies through permuted / constant-0 /
// dropped-dim maps (so linalg-fuse-elementwise-ops can fold them into their neighbours;
// mlirfuse deliberately does not emit tensor.collapse_shape/expand_shape here).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg)' | FileCheck %s

// CHECK-DAG: #[[ID2:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[LAST:map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[NONE:map[0-9]*]] = affine_map<(d0, d1) -> ()>
// CHECK-DAG: #[[GROW0:map[0-9]*]] = affine_map<(d0, d1) -> (0, d1)>
// CHECK-DAG: #[[SQUEEZE:map[0-9]*]] = affine_map<(d0, d1) -> (d0, 0, d1)>
// CHECK-DAG: #[[PERM:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d1, d2, d0)>
// CHECK-DAG: #[[ID3:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[UNSQ:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[ID4:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// broadcast_in_dim of a row vector to ?x4; the dynamic extent is the `sizes` operand
// (fusion.size lowered to tensor.dim).
// CHECK-LABEL: func.func @broadcast_row(
// CHECK-SAME: %[[V:[a-z0-9_]+]]: tensor<4xf32>, %[[X:[a-z0-9_]+]]: tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[D0:[^ ]+]] = tensor.dim %[[X]], %{{[^ ]+}} : tensor<?x4xf32>
// CHECK: %[[INIT:[^ ]+]] = tensor.empty(%[[D0]]) : tensor<?x4xf32>
// CHECK: %[[R:[^ ]+]] = linalg.generic {indexing_maps = [#[[LAST]], #[[ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[V]] : tensor<4xf32>) outs(%[[INIT]] : tensor<?x4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]] : f32
// CHECK: return %[[R]]
func.func @broadcast_row(%v: tensor<4xf32>, %x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
  %0 = "fusion.broadcast_in_dim"(%v, %d0) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, 4>} : (tensor<4xf32>, index) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// A 0-d scalar broadcast (how the frontends splat Python numbers).
// CHECK-LABEL: func.func @broadcast_scalar(
// CHECK-SAME: %[[K:[a-z0-9_]+]]: tensor<f32>
// CHECK: linalg.generic {indexing_maps = [#[[NONE]], #[[ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[K]] : tensor<f32>) outs(%{{[^ ]+}} : tensor<?x3xf32>)
func.func @broadcast_scalar(%k: tensor<f32>, %x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x3xf32>) -> index
  %0 = "fusion.broadcast_in_dim"(%k, %d0) {broadcast_dims = array<i64>, shape = array<i64: -1, 3>} : (tensor<f32>, index) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// expand of a size-1 leading dim: read at index 0; both extents come from `sizes`.
// CHECK-LABEL: func.func @expand(
// CHECK-SAME: %[[R:[a-z0-9_]+]]: tensor<1x?xf32>, %[[Y:[a-z0-9_]+]]: tensor<?x?xf32>)
// CHECK-DAG: %[[D0:[^ ]+]] = tensor.dim %[[Y]], %[[C0:[^ ]+]] : tensor<?x?xf32>
// CHECK-DAG: %[[D1:[^ ]+]] = tensor.dim %[[Y]], %[[C1:[^ ]+]] : tensor<?x?xf32>
// CHECK: %[[INIT:[^ ]+]] = tensor.empty(%[[D0]], %[[D1]]) : tensor<?x?xf32>
// CHECK: linalg.generic {indexing_maps = [#[[GROW0]], #[[ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[R]] : tensor<1x?xf32>) outs(%[[INIT]] : tensor<?x?xf32>)
func.func @expand(%r: tensor<1x?xf32>, %y: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %d0 = "fusion.size"(%y) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%y) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %0 = "fusion.expand"(%r, %d0, %d1) {shape = array<i64: -1, -1>} : (tensor<1x?xf32>, index, index) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// reshape with a dynamic extent computed by index math on fusion.size results.
// CHECK-LABEL: func.func @reshape_dynamic(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x?xf32>) -> tensor<?xf32>
// CHECK-DAG: %[[D0:[^ ]+]] = tensor.dim %[[X]], %{{[^ ]+}} : tensor<?x?xf32>
// CHECK-DAG: %[[D1:[^ ]+]] = tensor.dim %[[X]], %{{[^ ]+}} : tensor<?x?xf32>
// CHECK: %[[N:[^ ]+]] = arith.muli %[[D0]], %[[D1]] : index
// CHECK: %[[SHAPE:[^ ]+]] = tensor.from_elements %[[N]] : tensor<1xindex>
// CHECK: %[[R:[^ ]+]] = tensor.reshape %[[X]](%[[SHAPE]]) : (tensor<?x?xf32>, tensor<1xindex>) -> tensor<?xf32>
// CHECK: return %[[R]]
func.func @reshape_dynamic(%x: tensor<?x?xf32>) -> tensor<?xf32> {
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%x) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %n = arith.muli %d0, %d1 : index
  %0 = "fusion.reshape"(%x, %n) {shape = array<i64: -1>} : (tensor<?x?xf32>, index) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// A static reshape: the shape operand holds constants.
// CHECK-LABEL: func.func @reshape_static(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<2x1x3xf32>)
// CHECK-DAG: %[[C3:[^ ]+]] = arith.constant 3 : index
// CHECK-DAG: %[[C2:[^ ]+]] = arith.constant 2 : index
// CHECK: %[[SHAPE:[^ ]+]] = tensor.from_elements %[[C3]], %[[C2]] : tensor<2xindex>
// CHECK: tensor.reshape %[[X]](%[[SHAPE]]) : (tensor<2x1x3xf32>, tensor<2xindex>) -> tensor<3x2xf32>
func.func @reshape_static(%x: tensor<2x1x3xf32>) -> tensor<3x2xf32> {
  %0 = "fusion.reshape"(%x) {shape = array<i64: 3, 2>} : (tensor<2x1x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// permute dims [2, 0, 1]: output (i, j, k) reads input (j, k, i).
// CHECK-LABEL: func.func @permute(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<2x3x4xf32>)
// CHECK: %[[INIT:[^ ]+]] = tensor.empty() : tensor<4x2x3xf32>
// CHECK: linalg.generic {indexing_maps = [#[[PERM]], #[[ID3]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]] : tensor<2x3x4xf32>) outs(%[[INIT]] : tensor<4x2x3xf32>)
func.func @permute(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = "fusion.permute"(%x) {dims = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// squeeze dim 1 of 4x1x8: a copy reading the dropped dim at 0.
// CHECK-LABEL: func.func @squeeze(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<4x1x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[INIT:[^ ]+]] = tensor.empty() : tensor<4x8xf32>
// CHECK: %[[R:[^ ]+]] = linalg.generic {indexing_maps = [#[[SQUEEZE]], #[[ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]] : tensor<4x1x8xf32>) outs(%[[INIT]] : tensor<4x8xf32>)
// CHECK: return %[[R]]
func.func @squeeze(%x: tensor<4x1x8xf32>) -> tensor<4x8xf32> {
  %0 = "fusion.squeeze"(%x) {dims = array<i64: 1>} : (tensor<4x1x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// unsqueeze at dim 2 of 4x1x8 (dynamic leading dim kept): the new loop d2 is not read.
// CHECK-LABEL: func.func @unsqueeze(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x1x8xf32>) -> tensor<?x1x1x8xf32>
// CHECK: %[[D0:[^ ]+]] = tensor.dim %[[X]], %{{[^ ]+}} : tensor<?x1x8xf32>
// CHECK: %[[INIT:[^ ]+]] = tensor.empty(%[[D0]]) : tensor<?x1x1x8xf32>
// CHECK: %[[R:[^ ]+]] = linalg.generic {indexing_maps = [#[[UNSQ]], #[[ID4]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[X]] : tensor<?x1x8xf32>) outs(%[[INIT]] : tensor<?x1x1x8xf32>)
// CHECK: return %[[R]]
func.func @unsqueeze(%x: tensor<?x1x8xf32>) -> tensor<?x1x1x8xf32> {
  %0 = "fusion.unsqueeze"(%x) {dim = 2 : i64} : (tensor<?x1x8xf32>) -> tensor<?x1x1x8xf32>
  return %0 : tensor<?x1x1x8xf32>
}
