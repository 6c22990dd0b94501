// single-node: a group with one compute op (constants, casts and views do not count) is not
// outlined by default -- the op stays in the caller -- and is outlined with single-node=true.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | FileCheck %s --check-prefix=OFF
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=false})' | FileCheck %s --check-prefix=OFF
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true})' | FileCheck %s --check-prefix=ON
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true})' | mlir-opt --irdl-file=%irdl > /dev/null

// OFF-NOT: func.func private
// OFF-NOT: fusion.group

// A lone exp.
// OFF-LABEL: func.func @lone(
// OFF-NEXT: "fusion.exp"(%arg0)
// OFF-NEXT: return
// ON-LABEL: func.func private @lone_group0(
// ON-SAME: %arg0: tensor<8xf32>) -> tensor<8xf32> attributes {fusion.group}
// ON-NEXT: "fusion.exp"(%arg0)
// ON-NEXT: return
// ON-LABEL: func.func @lone(
// ON-NEXT: call @lone_group0(%arg0)
// ON-NEXT: return
func.func @lone(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = "fusion.exp"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %e : tensor<8xf32>
}

// x * 2.0 as traced: constant, broadcast and one mul -- still a single compute op.
// OFF-LABEL: func.func @scaled(
// OFF-NEXT: "fusion.constant"
// OFF-NEXT: "fusion.broadcast_in_dim"
// OFF-NEXT: "fusion.mul"
// OFF-NEXT: return
// ON-LABEL: func.func private @scaled_group0(
// ON-SAME: %arg0: tensor<8xf32>) -> tensor<8xf32> attributes {fusion.group}
// ON-NEXT: "fusion.constant"
// ON-NEXT: "fusion.broadcast_in_dim"
// ON-NEXT: "fusion.mul"
// ON-NEXT: return
// ON-LABEL: func.func @scaled(
// ON-NEXT: call @scaled_group0(%arg0)
// ON-NEXT: return
func.func @scaled(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c = "fusion.constant"() {value = 2.0 : f64} : () -> tensor<f32>
  %b = "fusion.broadcast_in_dim"(%c) {broadcast_dims = array<i64>, shape = array<i64: 8>} : (tensor<f32>) -> tensor<8xf32>
  %m = "fusion.mul"(%x, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %m : tensor<8xf32>
}

// A lone relu after a matmul, and a lone reduction beside it.
// OFF-LABEL: func.func @after_matmul(
// OFF-NEXT: "fusion.matmul"
// OFF-NEXT: "fusion.relu"
// OFF-NEXT: "fusion.sum"
// OFF-NEXT: return
// ON-LABEL: func.func private @after_matmul_group0(
// ON-SAME: %arg0: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {fusion.group}
// ON-NEXT: "fusion.relu"
// ON-NEXT: return
// ON-LABEL: func.func private @after_matmul_group1(
// ON-SAME: %arg0: tensor<4x4xf32>) -> tensor<4xf32> attributes {fusion.group}
// ON-NEXT: "fusion.sum"
// ON-NEXT: return
// ON-LABEL: func.func @after_matmul(
// ON-NEXT: %[[M:.*]] = "fusion.matmul"(%arg0, %arg1)
// ON-NEXT: call @after_matmul_group0(%[[M]])
// ON-NEXT: call @after_matmul_group1(%arg0)
// ON-NEXT: return
func.func @after_matmul(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  %m = "fusion.matmul"(%a, %b) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = "fusion.relu"(%m) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = "fusion.sum"(%a) {axes = array<i64: 1>, keepdim = false} : (tensor<4x4xf32>) -> tensor<4xf32>
  return %r, %s : tensor<4x4xf32>, tensor<4xf32>
}

// Two compute ops form a group in both modes.
// OFF-LABEL: func.func private @pair_group0(
// OFF-NEXT: "fusion.exp"
// OFF-NEXT: "fusion.log"
// OFF-NEXT: return
// OFF-LABEL: func.func @pair(
// OFF-NEXT: call @pair_group0(%arg0)
// ON-LABEL: func.func private @pair_group0(
// ON-NEXT: "fusion.exp"
// ON-NEXT: "fusion.log"
// ON-NEXT: return
func.func @pair(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = "fusion.exp"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %l = "fusion.log"(%e) : (tensor<8xf32>) -> tensor<8xf32>
  return %l : tensor<8xf32>
}
