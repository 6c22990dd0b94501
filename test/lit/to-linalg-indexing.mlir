// fusion-to-linalg on the indexing ops: each becomes one linalg.generic without tensor inputs
// over its result, whose body computes where each operand is read (linalg.index arithmetic)
// and reads it there with tensor.extract; an elementwise producer is recomputed at those
// indices (the negation inside rotate_half's cat, the exp before a gather) instead of being
// read back from a materialized tensor. Every read is in bounds: cat and pad branch (scf.if)
// to the operand holding the element, gather clamps its index into the dim.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg)' | FileCheck %s

// CHECK-LABEL: func.func @slice_steps(
// CHECK: linalg.generic {{.*}} outs(%{{[^ ]+}} : tensor<2x3xf32>)
// CHECK: %[[I:[^ ]+]] = linalg.index 0 : index
// CHECK: %[[J:[^ ]+]] = linalg.index 1 : index
// CHECK: %[[I2:[^ ]+]] = arith.muli %[[I]], %{{[^ ]+}} : index
// CHECK: %[[I3:[^ ]+]] = arith.addi %[[I2]], %{{[^ ]+}} : index
// CHECK: %[[J3:[^ ]+]] = arith.muli %[[J]], %{{[^ ]+}} : index
// CHECK: tensor.extract %arg0[%[[I3]], %[[J3]]] : tensor<6x7xf32>
func.func @slice_steps(%x: tensor<6x7xf32>) -> tensor<2x3xf32> {
  %0 = "fusion.slice"(%x) {shape = array<i64: 2, 3>, starts = array<i64: 1, 0>, steps = array<i64: 2, 3>} : (tensor<6x7xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// cat((-x[:, 4:], x[:, :4]), 1): the cat's loop reads x directly in both branches, negating
// in the first (the slices and the neg are recomputed, so they are dead after fusion).
// CHECK-LABEL: func.func @rotate_half(
// CHECK: %[[R:[^ ]+]] = linalg.generic {{.*}} outs(%{{[^ ]+}} : tensor<?x8xf32>)
// CHECK: %[[K:[^ ]+]] = linalg.index 1 : index
// CHECK: %[[IN0:[^ ]+]] = arith.cmpi ult, %[[K]], %{{[^ ]+}} : index
// CHECK: scf.if %[[IN0]] -> (f32) {
// CHECK: %[[A:[^ ]+]] = tensor.extract %arg0[%{{[^ ]+}}, %{{[^ ]+}}] : tensor<?x8xf32>
// CHECK: %[[N:[^ ]+]] = arith.negf %[[A]] : f32
// CHECK: scf.yield %[[N]] : f32
// CHECK: } else {
// CHECK: %[[K2:[^ ]+]] = arith.subi %[[K]], %{{[^ ]+}} : index
// CHECK: %[[B:[^ ]+]] = tensor.extract %arg0[%{{[^ ]+}}, %[[K2]]] : tensor<?x8xf32>
// CHECK: scf.yield %[[B]] : f32
// CHECK: return %[[R]]
func.func @rotate_half(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x8xf32>) -> index
  %hi = "fusion.slice"(%x, %d0) {shape = array<i64: -1, 4>, starts = array<i64: 0, 4>, steps = array<i64: 1, 1>} : (tensor<?x8xf32>, index) -> tensor<?x4xf32>
  %lo = "fusion.slice"(%x, %d0) {shape = array<i64: -1, 4>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<?x8xf32>, index) -> tensor<?x4xf32>
  %n = "fusion.neg"(%hi) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %0 = "fusion.cat"(%n, %lo) {dim = 1 : i64} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// pad low (0, 1), high (1, 2): the element is read only where both shifted indices are
// inside the input (an unsigned compare also catches indices below the low edge).
// CHECK-LABEL: func.func @pad(
// CHECK: %[[FILL:[^ ]+]] = tensor.extract %arg1[] : tensor<f32>
// CHECK: %[[J:[^ ]+]] = arith.subi %{{[^ ]+}}, %c1 : index
// CHECK: %[[OK1:[^ ]+]] = arith.cmpi ult, %[[J]], %c4 : index
// CHECK: %[[OK:[^ ]+]] = arith.andi %{{[^ ]+}}, %[[OK1]] : i1
// CHECK: scf.if %[[OK]] -> (f32) {
// CHECK: tensor.extract %arg0[%{{[^ ]+}}, %[[J]]] : tensor<3x4xf32>
// CHECK: } else {
// CHECK: scf.yield %[[FILL]] : f32
func.func @pad(%x: tensor<3x4xf32>, %v: tensor<f32>) -> tensor<4x7xf32> {
  %0 = "fusion.pad"(%x, %v) {low = array<i64: 0, 1>, high = array<i64: 1, 2>} : (tensor<3x4xf32>, tensor<f32>) -> tensor<4x7xf32>
  return %0 : tensor<4x7xf32>
}

// gather(exp(x), i, 1): an index outside [-size, size) fails the check (torch raises), a
// negative one counts from the end, then the index is clamped into [0, size - 1] (the read
// stays in bounds); exp is computed at the gathered element only.
// CHECK-LABEL: func.func @gather(
// CHECK: linalg.generic {{.*}} outs(%{{[^ ]+}} : tensor<?x1xf32>)
// CHECK: %[[RAW:[^ ]+]] = tensor.extract %arg1[%{{[^ ]+}}, %{{[^ ]+}}] : tensor<?x1xi64>
// CHECK: %[[IDX:[^ ]+]] = arith.index_cast %[[RAW]] : i64 to index
// CHECK: %[[ABOVE:[^ ]+]] = arith.cmpi sge, %[[IDX]]
// CHECK: %[[BELOW:[^ ]+]] = arith.cmpi slt, %[[IDX]]
// CHECK: %[[OK:[^ ]+]] = arith.andi %[[ABOVE]], %[[BELOW]]
// CHECK: cf.assert %[[OK]], "mlirfuse: gather index out of range
// CHECK: %[[NEG:[^ ]+]] = arith.cmpi slt, %[[IDX]]
// CHECK: %[[WRAP:[^ ]+]] = arith.select %[[NEG]]
// CHECK: %[[LO:[^ ]+]] = arith.minsi %[[WRAP]]
// CHECK: %[[IN:[^ ]+]] = arith.maxsi %[[LO]]
// CHECK: tensor.extract %arg0[%{{[^ ]+}}, %[[IN]]] : tensor<?x?xf32>
// CHECK: math.roundeven
// CHECK: linalg.yield
func.func @gather(%x: tensor<?x?xf32>, %i: tensor<?x1xi64>) -> tensor<?x1xf32> {
  %e = "fusion.exp"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %0 = "fusion.gather"(%e, %i) {dim = 1 : i64} : (tensor<?x?xf32>, tensor<?x1xi64>) -> tensor<?x1xf32>
  return %0 : tensor<?x1xf32>
}

// gather(view(float(x), [32, V]), i, 1), cross-entropy's read of the label's logit: the read
// goes through the reshape to the bf16 input, at the same row-major position (row r is
// (r / 16, r % 16) of [batch, 16]; the column is the gathered index itself), so neither the
// cast nor the view is materialized for it.
// CHECK-LABEL: func.func @gather_through_view(
// CHECK: linalg.generic {{.*}} outs(%{{[^ ]+}} : tensor<?x1xf32>)
// CHECK: %[[R:[^ ]+]] = linalg.index 0 : index
// CHECK: %[[V:[^ ]+]] = arith.maxsi
// CHECK-NOT: arith.muli
// CHECK: %[[S:[^ ]+]] = arith.remui %[[R]], %{{[^ ]+}} : index
// CHECK: %[[B:[^ ]+]] = arith.divui %[[R]], %{{[^ ]+}} : index
// CHECK: %[[E:[^ ]+]] = tensor.extract %arg0[%[[B]], %[[S]], %[[V]]] : tensor<?x16x1000xbf16>
// CHECK: arith.extf %[[E]] : bf16 to f32
// CHECK: linalg.yield
func.func @gather_through_view(%x: tensor<?x16x1000xbf16>, %n: index, %i: tensor<?x1xi64>) -> tensor<?x1xf32> {
  %f = "fusion.cast"(%x) : (tensor<?x16x1000xbf16>) -> tensor<?x16x1000xf32>
  %v = "fusion.reshape"(%f, %n) {shape = array<i64: -1, 1000>} : (tensor<?x16x1000xf32>, index) -> tensor<?x1000xf32>
  %0 = "fusion.gather"(%v, %i) {dim = 1 : i64} : (tensor<?x1000xf32>, tensor<?x1xi64>) -> tensor<?x1xf32>
  return %0 : tensor<?x1xf32>
}

// iota along dim 1: 2 + 3 * j.
// CHECK-LABEL: func.func @iota(
// CHECK: tensor.empty(%arg0) : tensor<?x4xi64>
// CHECK: %[[J:[^ ]+]] = linalg.index 1 : index
// CHECK: %[[JI:[^ ]+]] = arith.index_cast %[[J]] : index to i64
// CHECK: %[[M:[^ ]+]] = arith.muli %{{[^ ]+}}, %[[JI]] : i64
// CHECK: arith.addi %{{[^ ]+}}, %[[M]] : i64
func.func @iota(%n: index) -> tensor<?x4xi64> {
  %0 = "fusion.iota"(%n) {shape = array<i64: -1, 4>, dim = 1 : i64, start = 2 : i64, step = 3 : i64} : (index) -> tensor<?x4xi64>
  return %0 : tensor<?x4xi64>
}
