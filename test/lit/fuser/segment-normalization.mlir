// fusion-segment on normalizations written from primitives: each is ONE group with ONE
// "normalization" segment (reductions whose results are broadcast back into work on their
// input domain), every op in segment 0, with or without horizontal fusion or single-node.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{horizontal=false}, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true}, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | mlir-opt --irdl-file=%irdl > /dev/null

// LayerNorm from primitives: mean, x - mean, mean of squares, rsqrt, scale and shift.
// CHECK-LABEL: func.func private @layernorm_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["normalization"]}
// CHECK-NOT: fusion.segment = 1
// CHECK-COUNT-2: "fusion.{{(mean|sum|max)}}"{{.*}}fusion.segment = 0 : i64
// CHECK-NOT: fusion.segment = 1
// CHECK: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @layernorm(
// CHECK-NOT: "fusion.{{(mean|sum|max|add|sub|mul|div|rsqrt|sqrt|exp)}}"
// CHECK: call @layernorm_group0(
// CHECK-NEXT: return
func.func @layernorm(%arg0: tensor<?x?xf32>, %arg1: tensor<?xf32>, %arg2: tensor<?xf32>) -> (tensor<?x?xf32>) {
  %t4 = "fusion.mean"(%arg0) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %d0_0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d0_1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %t5 = "fusion.broadcast_in_dim"(%t4, %d0_0, %d0_1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %t6 = "fusion.sub"(%arg0, %t5) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t7 = "fusion.mul"(%t6, %t6) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t8 = "fusion.mean"(%t7) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %t9 = "fusion.constant"() {value = 1.0e-05 : f64} : () -> tensor<f32>
  %t10 = "fusion.broadcast_in_dim"(%t9, %d0_0) {broadcast_dims = array<i64>, shape = array<i64: -1, 1>} : (tensor<f32>, index) -> tensor<?x1xf32>
  %t11 = "fusion.add"(%t8, %t10) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %t12 = "fusion.rsqrt"(%t11) : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %t13 = "fusion.broadcast_in_dim"(%t12, %d0_0, %d0_1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %t14 = "fusion.mul"(%t6, %t13) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t15 = "fusion.broadcast_in_dim"(%arg1, %d0_0, %d0_1) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, -1>} : (tensor<?xf32>, index, index) -> tensor<?x?xf32>
  %t16 = "fusion.mul"(%t14, %t15) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t17 = "fusion.broadcast_in_dim"(%arg2, %d0_0, %d0_1) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, -1>} : (tensor<?xf32>, index, index) -> tensor<?x?xf32>
  %t18 = "fusion.add"(%t16, %t17) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %t18 : tensor<?x?xf32>
}

// RMSNorm from primitives: x * rsqrt(mean(x * x) + eps) * w.
// CHECK-LABEL: func.func private @rmsnorm_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["normalization"]}
// CHECK-NOT: fusion.segment = 1
// CHECK-COUNT-1: "fusion.{{(mean|sum|max)}}"{{.*}}fusion.segment = 0 : i64
// CHECK-NOT: fusion.segment = 1
// CHECK: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @rmsnorm(
// CHECK-NOT: "fusion.{{(mean|sum|max|add|sub|mul|div|rsqrt|sqrt|exp)}}"
// CHECK: call @rmsnorm_group0(
// CHECK-NEXT: return
func.func @rmsnorm(%arg0: tensor<?x?xf32>, %arg1: tensor<?xf32>) -> (tensor<?x?xf32>) {
  %t3 = "fusion.mul"(%arg0, %arg0) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t4 = "fusion.mean"(%t3) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %t5 = "fusion.constant"() {value = 1.0e-06 : f64} : () -> tensor<f32>
  %d0_0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %t6 = "fusion.broadcast_in_dim"(%t5, %d0_0) {broadcast_dims = array<i64>, shape = array<i64: -1, 1>} : (tensor<f32>, index) -> tensor<?x1xf32>
  %t7 = "fusion.add"(%t4, %t6) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %t8 = "fusion.rsqrt"(%t7) : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %d0_1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %t9 = "fusion.broadcast_in_dim"(%t8, %d0_0, %d0_1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %t10 = "fusion.mul"(%arg0, %t9) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t11 = "fusion.broadcast_in_dim"(%arg1, %d0_0, %d0_1) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, -1>} : (tensor<?xf32>, index, index) -> tensor<?x?xf32>
  %t12 = "fusion.mul"(%t10, %t11) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %t12 : tensor<?x?xf32>
}

// The tutorial's bias-dropout-add-LayerNorm (002), as mlirfuse.workloads traces it.
// CHECK-LABEL: func.func private @bias_dropout_add_layernorm_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["normalization"]}
// CHECK-NOT: fusion.segment = 1
// CHECK-COUNT-2: "fusion.{{(mean|sum|max)}}"{{.*}}fusion.segment = 0 : i64
// CHECK-NOT: fusion.segment = 1
// CHECK: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @bias_dropout_add_layernorm(
// CHECK-NOT: "fusion.{{(mean|sum|max|add|sub|mul|div|rsqrt|sqrt|exp)}}"
// CHECK: call @bias_dropout_add_layernorm_group0(
// CHECK-NEXT: return
func.func @bias_dropout_add_layernorm(%arg0: tensor<?x?x?xf32>, %arg1: tensor<?x?x?xf32>, %arg2: tensor<?xf32>, %arg3: tensor<?xf32>, %arg4: tensor<?xf32>, %arg5: tensor<i64>) -> (tensor<?x?x?xf32>) {
  %d0_0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?x?xf32>) -> index
  %d0_1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?x?xf32>) -> index
  %d2_0 = "fusion.size"(%arg2) {dim = 0 : i64} : (tensor<?xf32>) -> index
  %t7 = "fusion.broadcast_in_dim"(%arg3, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 2>, shape = array<i64: -1, -1, -1>} : (tensor<?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t8 = "fusion.add"(%arg0, %t7) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t9 = "fusion.constant"() {value = 0 : i64} : () -> tensor<i64>
  %t10 = "fusion.rand_like"(%t8, %arg5, %t9) : (tensor<?x?x?xf32>, tensor<i64>, tensor<i64>) -> tensor<?x?x?xf32>
  %t11 = "fusion.constant"() {value = 0.1 : f64} : () -> tensor<f32>
  %t12 = "fusion.broadcast_in_dim"(%t11, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t13 = "fusion.ge"(%t10, %t12) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xi1>
  %t14 = "fusion.constant"() {value = 1.1111111111111112 : f64} : () -> tensor<f32>
  %t15 = "fusion.broadcast_in_dim"(%t14, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t16 = "fusion.mul"(%t8, %t15) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t17 = "fusion.constant"() {value = 0.0 : f64} : () -> tensor<f32>
  %t18 = "fusion.broadcast_in_dim"(%t17, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t19 = "fusion.where"(%t13, %t16, %t18) : (tensor<?x?x?xi1>, tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t20 = "fusion.broadcast_in_dim"(%arg1, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t21 = "fusion.add"(%t19, %t20) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t22 = "fusion.mean"(%t21) {axes = array<i64: 2>, keepdim = true} : (tensor<?x?x?xf32>) -> tensor<?x?x1xf32>
  %t23 = "fusion.broadcast_in_dim"(%t22, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x1xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t24 = "fusion.sub"(%t21, %t23) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t25 = "fusion.mul"(%t24, %t24) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t26 = "fusion.mean"(%t25) {axes = array<i64: 2>, keepdim = true} : (tensor<?x?x?xf32>) -> tensor<?x?x1xf32>
  %t27 = "fusion.broadcast_in_dim"(%t22, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x1xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t28 = "fusion.sub"(%t21, %t27) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t29 = "fusion.constant"() {value = 1.0e-12 : f64} : () -> tensor<f32>
  %t30 = "fusion.broadcast_in_dim"(%t29, %d0_0, %d0_1) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, 1>} : (tensor<f32>, index, index) -> tensor<?x?x1xf32>
  %t31 = "fusion.add"(%t26, %t30) : (tensor<?x?x1xf32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %t32 = "fusion.sqrt"(%t31) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %t33 = "fusion.broadcast_in_dim"(%t32, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x1xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t34 = "fusion.div"(%t28, %t33) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t35 = "fusion.broadcast_in_dim"(%arg2, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 2>, shape = array<i64: -1, -1, -1>} : (tensor<?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t36 = "fusion.broadcast_in_dim"(%t34, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t37 = "fusion.mul"(%t35, %t36) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t38 = "fusion.broadcast_in_dim"(%arg4, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 2>, shape = array<i64: -1, -1, -1>} : (tensor<?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t39 = "fusion.add"(%t37, %t38) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  return %t39 : tensor<?x?x?xf32>
}

// The tutorial's bias-dropout-add-RMSNorm (002).
// CHECK-LABEL: func.func private @bias_dropout_add_rmsnorm_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["normalization"]}
// CHECK-NOT: fusion.segment = 1
// CHECK-COUNT-1: "fusion.{{(mean|sum|max)}}"{{.*}}fusion.segment = 0 : i64
// CHECK-NOT: fusion.segment = 1
// CHECK: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @bias_dropout_add_rmsnorm(
// CHECK-NOT: "fusion.{{(mean|sum|max|add|sub|mul|div|rsqrt|sqrt|exp)}}"
// CHECK: call @bias_dropout_add_rmsnorm_group0(
// CHECK-NEXT: return
func.func @bias_dropout_add_rmsnorm(%arg0: tensor<?x?x?xf32>, %arg1: tensor<?x?x?xf32>, %arg2: tensor<?xf32>, %arg3: tensor<?xf32>, %arg4: tensor<i64>) -> (tensor<?x?x?xf32>) {
  %d0_0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?x?xf32>) -> index
  %d0_1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?x?xf32>) -> index
  %d2_0 = "fusion.size"(%arg2) {dim = 0 : i64} : (tensor<?xf32>) -> index
  %t6 = "fusion.broadcast_in_dim"(%arg3, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 2>, shape = array<i64: -1, -1, -1>} : (tensor<?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t7 = "fusion.add"(%arg0, %t6) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t8 = "fusion.constant"() {value = 0 : i64} : () -> tensor<i64>
  %t9 = "fusion.rand_like"(%t7, %arg4, %t8) : (tensor<?x?x?xf32>, tensor<i64>, tensor<i64>) -> tensor<?x?x?xf32>
  %t10 = "fusion.constant"() {value = 0.1 : f64} : () -> tensor<f32>
  %t11 = "fusion.broadcast_in_dim"(%t10, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t12 = "fusion.ge"(%t9, %t11) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xi1>
  %t13 = "fusion.constant"() {value = 1.1111111111111112 : f64} : () -> tensor<f32>
  %t14 = "fusion.broadcast_in_dim"(%t13, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t15 = "fusion.mul"(%t7, %t14) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t16 = "fusion.constant"() {value = 0.0 : f64} : () -> tensor<f32>
  %t17 = "fusion.broadcast_in_dim"(%t16, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
  %t18 = "fusion.where"(%t12, %t15, %t17) : (tensor<?x?x?xi1>, tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t19 = "fusion.broadcast_in_dim"(%arg1, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t20 = "fusion.add"(%t18, %t19) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t21 = "fusion.mul"(%t20, %t20) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t22 = "fusion.mean"(%t21) {axes = array<i64: 2>, keepdim = true} : (tensor<?x?x?xf32>) -> tensor<?x?x1xf32>
  %t23 = "fusion.constant"() {value = 1.0e-12 : f64} : () -> tensor<f32>
  %t24 = "fusion.broadcast_in_dim"(%t23, %d0_0, %d0_1) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, 1>} : (tensor<f32>, index, index) -> tensor<?x?x1xf32>
  %t25 = "fusion.add"(%t22, %t24) : (tensor<?x?x1xf32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %t26 = "fusion.rsqrt"(%t25) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %t27 = "fusion.broadcast_in_dim"(%t26, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x1xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t28 = "fusion.mul"(%t20, %t27) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %t29 = "fusion.broadcast_in_dim"(%arg2, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 2>, shape = array<i64: -1, -1, -1>} : (tensor<?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t30 = "fusion.broadcast_in_dim"(%t28, %d0_0, %d0_1, %d2_0) {broadcast_dims = array<i64: 0, 1, 2>, shape = array<i64: -1, -1, -1>} : (tensor<?x?x?xf32>, index, index, index) -> tensor<?x?x?xf32>
  %t31 = "fusion.mul"(%t29, %t30) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  return %t31 : tensor<?x?x?xf32>
}

// softmax: two reductions (max, sum) over the same axes of the same domain.
// CHECK-LABEL: func.func private @softmax_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["normalization"]}
// CHECK-NOT: fusion.segment = 1
// CHECK-COUNT-2: "fusion.{{(mean|sum|max)}}"{{.*}}fusion.segment = 0 : i64
// CHECK-NOT: fusion.segment = 1
// CHECK: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @softmax(
// CHECK-NOT: "fusion.{{(mean|sum|max|add|sub|mul|div|rsqrt|sqrt|exp)}}"
// CHECK: call @softmax_group0(
// CHECK-NEXT: return
func.func @softmax(%arg0: tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  %t2 = "fusion.max"(%arg0) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %d0_0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d0_1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %t3 = "fusion.broadcast_in_dim"(%t2, %d0_0, %d0_1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %t4 = "fusion.sub"(%arg0, %t3) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t5 = "fusion.exp"(%t4) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %t6 = "fusion.sum"(%t5) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %t7 = "fusion.broadcast_in_dim"(%t6, %d0_0, %d0_1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %t8 = "fusion.div"(%t5, %t7) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %t8 : tensor<?x?xf32>
}
