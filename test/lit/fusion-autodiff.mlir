// fusion-autodiff builds the backward of a fusion function: tanh's gradient reads the
// forward's result, which the forward returns anyway (a residual for free); the broadcast
// weight's gradient is a sum over the broadcast dim.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-autodiff)' | FileCheck %s
// LayerNorm: the forward also returns the mean and rstd (saved: rstd, not the variance under
// it), the backward recomputes the normalized input from them; grouped and segmented like
// any fusion, it is a normalization kernel (row sums) plus the weight gradient's column
// reduction.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-autodiff{func=layer_norm wrt=0,1})' | FileCheck %s --check-prefix=LN
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-autodiff{func=layer_norm}, fusion-cse, fusion-dce, fusion-group, fusion-segment)' | FileCheck %s --check-prefix=SEG
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-autodiff{func=dynamic_mean})' 2>&1 | FileCheck %s --check-prefix=DYN

// CHECK-LABEL: func.func @fusion(
// CHECK: %[[T:[0-9]+]] = "fusion.tanh"
// CHECK: return %[[T]] : tensor<4x8xf32>
// CHECK-LABEL: func.func @fusion_backward(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[W:[a-z0-9]+]]: tensor<8xf32>, %[[G:[a-z0-9]+]]: tensor<4x8xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-SAME: fusion.cotangents = array<i64: 0>, fusion.gradients = array<i64: 0, 1>, fusion.residuals = array<i64: 0>
// CHECK-NOT: "fusion.tanh"
// CHECK: "fusion.mul"(%[[Y]], %[[Y]])
// CHECK: %[[SUM:[0-9]+]] = "fusion.sum"({{.*}}) {axes = array<i64: 0>, keepdim = true}
// CHECK: %[[GW:[0-9]+]] = "fusion.squeeze"(%[[SUM]])
// CHECK: return %{{[0-9]+}}, %[[GW]] : tensor<4x8xf32>, tensor<8xf32>
func.func @fusion(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %b = "fusion.broadcast_in_dim"(%w) {broadcast_dims = array<i64: 1>, shape = array<i64: 4, 8>} : (tensor<8xf32>) -> tensor<4x8xf32>
  %m = "fusion.mul"(%x, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = "fusion.tanh"(%m) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// LN-LABEL: func.func @layer_norm(
// LN: %[[VM:[0-9]+]]:2 = "fusion.var_mean"
// LN: %[[R:[0-9]+]] = "fusion.rsqrt"
// LN: return %{{[0-9]+}}, %[[VM]]#1, %[[R]] : tensor<16x64xf32>, tensor<16x1xf32>, tensor<16x1xf32>
// LN-LABEL: func.func @layer_norm_backward(
// LN-SAME: %arg0: tensor<16x64xf32>, %arg1: tensor<64xf32>, %arg2: tensor<16x64xf32>, %arg3: tensor<16x1xf32>, %arg4: tensor<16x1xf32>) -> (tensor<16x64xf32>, tensor<64xf32>)
// LN-SAME: fusion.gradients = array<i64: 0, 1>, fusion.residuals = array<i64: 1, 2>
// LN-NOT: "fusion.var_mean"
// LN-NOT: "fusion.rsqrt"
// LN: return
// SEG-LABEL: func.func private @layer_norm_backward_group0(
// SEG-SAME: fusion.segments = ["reduction", "normalization"]
// SEG-LABEL: func.func @layer_norm_backward(
// SEG-SAME: fusion.kernels = 2
func.func @layer_norm(%x: tensor<16x64xf32>, %w: tensor<64xf32>) -> tensor<16x64xf32> {
  %v:2 = "fusion.var_mean"(%x) {axes = array<i64: 1>, correction = 0.0 : f64, keepdim = true} : (tensor<16x64xf32>) -> (tensor<16x1xf32>, tensor<16x1xf32>)
  %mb = "fusion.broadcast_in_dim"(%v#1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 16, 64>} : (tensor<16x1xf32>) -> tensor<16x64xf32>
  %c = "fusion.sub"(%x, %mb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %eps = "fusion.constant"() {value = 1.0e-05 : f64} : () -> tensor<f32>
  %eb = "fusion.broadcast_in_dim"(%eps) {broadcast_dims = array<i64>, shape = array<i64: 16, 1>} : (tensor<f32>) -> tensor<16x1xf32>
  %ve = "fusion.add"(%v#0, %eb) : (tensor<16x1xf32>, tensor<16x1xf32>) -> tensor<16x1xf32>
  %r = "fusion.rsqrt"(%ve) : (tensor<16x1xf32>) -> tensor<16x1xf32>
  %rb = "fusion.broadcast_in_dim"(%r) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: 16, 64>} : (tensor<16x1xf32>) -> tensor<16x64xf32>
  %n = "fusion.mul"(%c, %rb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %wb = "fusion.broadcast_in_dim"(%w) {broadcast_dims = array<i64: 1>, shape = array<i64: 16, 64>} : (tensor<64xf32>) -> tensor<16x64xf32>
  %y = "fusion.mul"(%n, %wb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// DYN: error: {{.*}}fusion-autodiff: the gradient of mean over the dynamic size {{.*}} (give the function static sizes)
func.func @dynamic_mean(%x: tensor<?x?xf32>) -> tensor<?xf32> {
  %m = "fusion.mean"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<?x?xf32>) -> tensor<?xf32>
  return %m : tensor<?xf32>
}
