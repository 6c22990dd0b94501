// fusion-segment on nvFuser issue 785's real example, GELU-backward + bias-gradient
// (nvfuser_fusion_id6 with runtime scalars S0..S3; IR = str(fd) of
// mlirfuse.workloads.gelu_backward_definition()). It is 2 kernels: the bias gradient (a sum
// over axes [0, 1] of T4) is a "reduction", the GELU backward a single "pointwise" segment
// (every one of its 61 ops in segment 0). As the issue asks, the segmentation is printed
// inline with the fusion IR: `fusion.segment` on ops, `fusion.segments` on groups.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true}, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s --check-prefix=SN
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | mlir-opt --irdl-file=%irdl > /dev/null

// single-node=true: the lone sum is a group of its own.
// SN-LABEL: func.func private @fusion_group0(
// SN-SAME: attributes {fusion.group, fusion.segments = ["pointwise"]}
// SN-COUNT-61: fusion.segment = 0 : i64
// SN-NEXT: return
// SN-LABEL: func.func private @fusion_group1(
// SN-SAME: %arg0: tensor<?x?x?xf32>) -> tensor<?xf32> attributes {fusion.group, fusion.segments = ["reduction"]}
// SN-NEXT: "fusion.sum"(%arg0) {axes = array<i64: 0, 1>, fusion.segment = 0 : i64, keepdim = false}
// SN-NEXT: return
// SN-NOT: func.func private
// SN-LABEL: func.func @fusion(
// SN-NOT: "fusion.{{(mul|add|sub|pow|tanh|sum)}}"
// SN: call @fusion_group0(
// SN-NOT: "fusion.{{(mul|add|sub|pow|tanh|sum)}}"
// SN: call @fusion_group1(%arg4)
// SN-NEXT: return

// Default (single-node=false): the sum is not outlined; it stays in the caller as the
// second kernel, next to the one pointwise group.
// CHECK-LABEL: func.func private @fusion_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["pointwise"]}
// CHECK-COUNT-61: fusion.segment = 0 : i64
// CHECK-NEXT: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @fusion(
// CHECK: call @fusion_group0(
// CHECK-NEXT: "fusion.sum"(%arg4) {axes = array<i64: 0, 1>, fusion.scheduler = "reduction", keepdim = false}
// CHECK-NEXT: return
func.func @fusion(%arg0: tensor<f64>, %arg1: tensor<f64>, %arg2: tensor<f64>, %arg3: tensor<f64>, %arg4: tensor<?x?x?xf32>, %arg5: tensor<?x?x?xf32>, %arg6: tensor<?x?x?xf32>) -> (tensor<?xf32>, tensor<?x?x?xf32>) {
  %t8 = "fusion.constant"() {value = 0.5 : f64} : () -> tensor<f64>
  %t9 = "fusion.cast"(%t8) : (tensor<f64>) -> tensor<f32>
  %d5_0 = "fusion.size"(%arg5) {dim = 0 : i64} : (tensor<?x?x?xf32>) -> index
  %d5_1 = "fusion.size"(%arg5) {dim = 1 : i64} : (tensor<?x?x?xf32>) -> index
  %d5_2 = "fusion.size"(%arg5) {dim = 2 : i64} : (tensor<?x?x?xf32>) -> index
  %t10 = "fusion.broadcast_in_dim"(%t9, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t11 = "fusion.mul"(%t10, %arg6) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t12 = "fusion.constant"() {value = 3.0 : f64} : () -> tensor<f64>
  %t13 = "fusion.cast"(%t12) : (tensor<f64>) -> tensor<f32>
  %t14 = "fusion.broadcast_in_dim"(%t13, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t15 = "fusion.pow"(%arg6, %t14) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t16 = "fusion.constant"() {value = 0.044715 : f64} : () -> tensor<f64>
  %t17 = "fusion.cast"(%t16) : (tensor<f64>) -> tensor<f32>
  %t18 = "fusion.broadcast_in_dim"(%t17, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t19 = "fusion.mul"(%t18, %t15) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t20 = "fusion.add"(%arg6, %t19) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t21 = "fusion.constant"() {value = 0.797885 : f64} : () -> tensor<f64>
  %t22 = "fusion.cast"(%t21) : (tensor<f64>) -> tensor<f32>
  %t23 = "fusion.broadcast_in_dim"(%t22, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t24 = "fusion.mul"(%t23, %t20) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t25 = "fusion.tanh"(%t24) : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t26 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f64>
  %t27 = "fusion.cast"(%t26) : (tensor<f64>) -> tensor<f32>
  %t28 = "fusion.broadcast_in_dim"(%t27, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t29 = "fusion.add"(%t28, %t25) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t30 = "fusion.sum"(%arg4) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<?x?x?xf32>) -> tensor<?xf32>
  %t31 = "fusion.broadcast_in_dim"(%t29, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t32 = "fusion.mul"(%arg5, %t31) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t33 = "fusion.broadcast_in_dim"(%t11, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t34 = "fusion.mul"(%arg5, %t33) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t35 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f64>
  %t36 = "fusion.cast"(%t35) : (tensor<f64>) -> tensor<f32>
  %t37 = "fusion.broadcast_in_dim"(%t36, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t38 = "fusion.mul"(%t37, %t34) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t39 = "fusion.broadcast_in_dim"(%t25, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t40 = "fusion.broadcast_in_dim"(%t25, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t41 = "fusion.mul"(%t39, %t40) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t42 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f64>
  %t43 = "fusion.cast"(%t42) : (tensor<f64>) -> tensor<f32>
  %t44 = "fusion.broadcast_in_dim"(%t43, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t45 = "fusion.sub"(%t44, %t41) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t46 = "fusion.mul"(%t38, %t45) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t47 = "fusion.cast"(%arg3) : (tensor<f64>) -> tensor<f32>
  %t48 = "fusion.broadcast_in_dim"(%t47, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t49 = "fusion.mul"(%t46, %t48) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t50 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f64>
  %t51 = "fusion.cast"(%t50) : (tensor<f64>) -> tensor<f32>
  %t52 = "fusion.broadcast_in_dim"(%t51, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t53 = "fusion.mul"(%t52, %t49) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t54 = "fusion.cast"(%arg2) : (tensor<f64>) -> tensor<f32>
  %t55 = "fusion.broadcast_in_dim"(%t54, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t56 = "fusion.mul"(%t53, %t55) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t57 = "fusion.cast"(%arg1) : (tensor<f64>) -> tensor<f32>
  %t58 = "fusion.broadcast_in_dim"(%t57, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t59 = "fusion.mul"(%t56, %t58) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t60 = "fusion.constant"() {value = 2.0 : f64} : () -> tensor<f64>
  %t61 = "fusion.cast"(%t60) : (tensor<f64>) -> tensor<f32>
  %t62 = "fusion.broadcast_in_dim"(%t61, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t63 = "fusion.pow"(%arg6, %t62) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t64 = "fusion.mul"(%t59, %t63) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t65 = "fusion.add"(%t53, %t64) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t66 = "fusion.cast"(%arg0) : (tensor<f64>) -> tensor<f32>
  %t67 = "fusion.broadcast_in_dim"(%t66, %d5_0, %d5_1, %d5_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t68 = "fusion.mul"(%t32, %t67) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t69 = "fusion.add"(%t65, %t68) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  return %t30, %t69 : tensor<?xf32>, tensor<?x?x?xf32>
}
