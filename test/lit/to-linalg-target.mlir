// fusion-to-linalg{target=...}: on cpu (the default), f32 transcendental functions become
// vectorizable polynomial approximations (math.fma, exponent bit tricks), with no math.exp
// etc. left; on gpu the math ops stay (they lower to libdevice). f16/bf16 compute in f32, so
// they follow the f32 rule; f64 keeps math ops on both targets.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg{target=cpu})' | FileCheck %s --check-prefix=CPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg)' | FileCheck %s --check-prefix=CPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg{target=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg{target=tpu})' 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: {{.*}}fusion-to-linalg: target must be cpu or gpu, got 'tpu'

// CPU-LABEL: func.func @exp_f32(
// CPU-NOT: math.exp
// CPU: math.roundeven
// CPU: math.fma
// CPU: arith.bitcast %{{[^ ]+}} : i32 to f32
// CPU-NOT: math.exp
// CPU: return
// GPU-LABEL: func.func @exp_f32(
// GPU: ^bb0(%[[X:[^:]+]]: f32, %{{[^:]+}}: f32):
// GPU-NEXT: %[[E:[^ ]+]] = math.exp %[[X]] : f32
// GPU-NEXT: linalg.yield %[[E]] : f32
func.func @exp_f32(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "fusion.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CPU-LABEL: func.func @others_f32(
// CPU-NOT: math.{{(exp|log|tanh|sin|cos|erf)}}
// CPU: return
// GPU-LABEL: func.func @others_f32(
// GPU-DAG: math.tanh %{{[^ ]+}} : f32
// GPU-DAG: math.log %{{[^ ]+}} : f32
// GPU-DAG: math.sin %{{[^ ]+}} : f32
// GPU-DAG: math.erf %{{[^ ]+}} : f32
// sigmoid on gpu is 1 / (1 + exp(-x)):
// GPU-DAG: arith.negf
// GPU-DAG: math.exp %{{[^ ]+}} : f32
// GPU-DAG: arith.divf
// GPU: return
func.func @others_f32(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "fusion.tanh"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "fusion.log"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "fusion.sin"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "fusion.erf"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "fusion.sigmoid"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3, %4 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// f16: widened to f32 first, so the cpu approximation applies.
// CPU-LABEL: func.func @exp_f16(
// CPU: arith.extf %{{[^ ]+}} : f16 to f32
// CPU-NOT: math.exp
// CPU: arith.truncf %{{[^ ]+}} : f32 to f16
// GPU-LABEL: func.func @exp_f16(
// GPU: %[[W:[^ ]+]] = arith.extf %{{[^ ]+}} : f16 to f32
// GPU-NEXT: %[[E:[^ ]+]] = math.exp %[[W]] : f32
// GPU-NEXT: arith.truncf %[[E]] : f32 to f16
func.func @exp_f16(%a: tensor<4xf16>) -> tensor<4xf16> {
  %0 = "fusion.exp"(%a) : (tensor<4xf16>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// f64 has no cpu approximation: math.exp on both targets.
// CPU-LABEL: func.func @exp_f64(
// CPU: math.exp %{{[^ ]+}} : f64
// GPU-LABEL: func.func @exp_f64(
// GPU: math.exp %{{[^ ]+}} : f64
func.func @exp_f64(%a: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "fusion.exp"(%a) : (tensor<4xf64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}
