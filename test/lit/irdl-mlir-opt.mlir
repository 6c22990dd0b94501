// Upstream mlir-opt understands fusion IR once the generated IRDL definition is loaded:
// it parses, verifies and prints it (and the round trip is stable), and rejects it without.
// RUN: mlir-opt --irdl-file=%irdl %s | FileCheck %s
// RUN: mlir-opt --irdl-file=%irdl --verify-roundtrip %s | FileCheck %s
// RUN: mlir-opt --irdl-file=%irdl %s | mlirfuse-opt | FileCheck %s
// RUN: not mlir-opt %s 2>&1 | FileCheck %s --check-prefix=NO-IRDL
// Upstream passes treat IRDL ops as opaque (no Pure trait): cse and canonicalize keep them.
// RUN: mlir-opt --irdl-file=%irdl --cse --canonicalize %s | FileCheck %s --check-prefix=OPAQUE
// What the jit frontend prints is accepted too (and survives mlir-opt -> mlirfuse-opt).
// RUN: %python %inputs/jit_ir.py mixed | mlir-opt --irdl-file=%irdl | mlirfuse-opt | FileCheck %s --check-prefix=JIT

// NO-IRDL: error: operation being parsed with an unregistered dialect

// The shape of IR the frontend prints: fusion.size extents, index math, a 0-d constant
// broadcast, multi-result var_mean with #-uses.
// CHECK-LABEL: func.func @fusion(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x?xf32>)
// CHECK-NEXT: %[[D0:[0-9]+]] = "fusion.size"(%[[X]]) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
// CHECK-NEXT: %[[D1:[0-9]+]] = "fusion.size"(%[[X]]) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
// CHECK-NEXT: %[[K:[0-9]+]] = "fusion.constant"() {value = 1.000000e+00 : f64} : () -> tensor<f32>
// CHECK-NEXT: %[[B:[0-9]+]] = "fusion.broadcast_in_dim"(%[[K]], %[[D0]], %[[D1]]) {broadcast_dims = array<i64>, shape = array<i64: -1, -1>} : (tensor<f32>, index, index) -> tensor<?x?xf32>
// CHECK-NEXT: %[[A:[0-9]+]] = "fusion.add"(%[[X]], %[[B]]) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
// CHECK-NEXT: %[[VM:[0-9]+]]:2 = "fusion.var_mean"(%[[A]]) {axes = array<i64: 1>, correction = 1.000000e+00 : f64, keepdim = true} : (tensor<?x?xf32>) -> (tensor<?x1xf32>, tensor<?x1xf32>)
// CHECK-NEXT: %[[N:[0-9]+]] = arith.muli %[[D0]], %[[D1]] : index
// CHECK-NEXT: %[[R:[0-9]+]] = "fusion.reshape"(%[[A]], %[[N]]) {shape = array<i64: -1>} : (tensor<?x?xf32>, index) -> tensor<?xf32>
// CHECK-NEXT: return %[[VM]]#0, %[[VM]]#1, %[[R]] : tensor<?x1xf32>, tensor<?x1xf32>, tensor<?xf32>
// OPAQUE-LABEL: func.func @fusion(
// OPAQUE: "fusion.var_mean"
// OPAQUE-LABEL: func.func @opaque(
// OPAQUE-COUNT-2: "fusion.exp"
// OPAQUE: "fusion.tanh"
// OPAQUE: return
func.func @fusion(%arg0: tensor<?x?xf32>) -> (tensor<?x1xf32>, tensor<?x1xf32>, tensor<?xf32>) {
  %d0_0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d0_1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %t2 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
  %t3 = "fusion.broadcast_in_dim"(%t2, %d0_0, %d0_1) {broadcast_dims = array<i64>, shape = array<i64: -1, -1>} : (tensor<f32>, index, index) -> tensor<?x?xf32>
  %t4 = "fusion.add"(%arg0, %t3) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t5:2 = "fusion.var_mean"(%t4) {axes = array<i64: 1>, keepdim = true, correction = 1.0 : f64} : (tensor<?x?xf32>) -> (tensor<?x1xf32>, tensor<?x1xf32>)
  %s2 = arith.muli %d0_0, %d0_1 : index
  %t6 = "fusion.reshape"(%t4, %s2) {shape = array<i64: -1>} : (tensor<?x?xf32>, index) -> tensor<?xf32>
  return %t5#0, %t5#1, %t6 : tensor<?x1xf32>, tensor<?x1xf32>, tensor<?xf32>
}

// Duplicate and dead fusion ops: upstream cse/canonicalize leave them all.
func.func @opaque(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "fusion.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "fusion.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %dead = "fusion.tanh"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// JIT-LABEL: func.func @fusion(
// JIT-SAME: tensor<?x?xf32>, %{{[a-z0-9_]+}}: tensor<?x?xf32>, %{{[a-z0-9_]+}}: tensor<?x?xf16>)
// JIT-DAG: "fusion.size"
// JIT-DAG: "fusion.where"
// JIT-DAG: "fusion.clamp"
// JIT-DAG: :2 = "fusion.var_mean"{{.*}} -> (tensor<?x1xf32>, tensor<?x1xf32>)
// JIT-DAG: "fusion.reshape"
// JIT-DAG: "fusion.permute"{{.*}}dims = array<i64: 1, 0>
// JIT-DAG: "fusion.squeeze"
// JIT-DAG: "fusion.unsqueeze"
// JIT-DAG: "fusion.cast"{{.*}}(tensor<?x?xf16>) -> tensor<?x?xf32>
// JIT-DAG: "fusion.expand"
// JIT-DAG: "fusion.uniform"{{.*}} -> tensor<?x4xf32>
// JIT-DAG: "fusion.rand_like"
// JIT-DAG: "fusion.lerp"
// JIT: return
