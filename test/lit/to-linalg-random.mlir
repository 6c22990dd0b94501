// fusion-to-linalg on random ops: a linalg.generic whose inputs are the 0-d operands (bounds,
// seed, offset: read in its body, since on the GPU a value the fusion computes lives in device
// memory, where host code may not load it) computes each element's row-major linear index
// from linalg.index, runs Philox4x32-10 on it with plain integer arith
// (10 rounds = 20 arith.mului_extended; same bits on CPU and GPU), keeps 24 bits and scales
// them into [minval, maxval) (a value rounding to maxval in the result's type is minval).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg)' | FileCheck %s
// The same integer code on the GPU target:
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg{target=gpu})' | FileCheck %s

// CHECK-DAG: #[[ID2:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[SCALAR:map[0-9]*]] = affine_map<(d0, d1) -> ()>

// CHECK-LABEL: func.func @uniform(
// CHECK-SAME: %[[LO:[a-z0-9_]+]]: tensor<f32>, %[[HI:[a-z0-9_]+]]: tensor<f32>, %[[SEED:[a-z0-9_]+]]: tensor<i64>, %[[OFF:[a-z0-9_]+]]: tensor<i64>, %[[X:[a-z0-9_]+]]: tensor<?xf32>) -> tensor<?x4xf32>
// CHECK-NOT: fusion.
// CHECK-DAG: %[[N:[^ ]+]] = tensor.dim %[[X]], %{{[^ ]+}} : tensor<?xf32>
// CHECK-DAG: %[[C4:[^ ]+]] = arith.constant 4 : index
// CHECK-NOT: tensor.extract
// CHECK: %[[INIT:[^ ]+]] = tensor.empty(%[[N]]) : tensor<?x4xf32>
// CHECK: %[[R:[^ ]+]] = linalg.generic {indexing_maps = [#[[SCALAR]], #[[SCALAR]], #[[SCALAR]], #[[SCALAR]], #[[ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[LO]], %[[HI]], %[[SEED]], %[[OFF]] : tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>) outs(%[[INIT]] : tensor<?x4xf32>) {
// CHECK-NEXT: ^bb0(%[[LOV:[^:]+]]: f32, %[[HIV:[^:]+]]: f32, %[[SEEDV:[^:]+]]: i64, %[[OFFV:[^:]+]]: i64, %{{[^:]+}}: f32):
// Linear index: (0 * n + i) * 4 + j.
// CHECK: %[[I:[^ ]+]] = linalg.index 0 : index
// CHECK: %[[ROW:[^ ]+]] = arith.addi %{{[^ ]+}}, %[[I]] : index
// CHECK: %[[ROW4:[^ ]+]] = arith.muli %[[ROW]], %[[C4]] : index
// CHECK: %[[J:[^ ]+]] = linalg.index 1 : index
// CHECK: %[[LIN:[^ ]+]] = arith.addi %[[ROW4]], %[[J]] : index
// The index is tagged (so are the selected word's ops) for GPU kernels that share a call among
// 4 consecutive elements (gpu_kernels.share_philox).
// CHECK: arith.index_castui %[[LIN]] {mlirfuse.philox_index} : index to i64
// Counter from the index and the offset, key from the seed (low/high 32-bit halves).
// CHECK-DAG: arith.shrui %[[OFFV]], %{{[^ ]+}} : i64
// CHECK-DAG: arith.shrui %[[SEEDV]], %{{[^ ]+}} : i64
// Philox multipliers 0xD2511F53 / 0xCD9E8D57 and Weyl key increments 0x9E3779B9 / 0xBB67AE85.
// CHECK-DAG: arith.constant -766435501 : i32
// CHECK-DAG: arith.constant -845247145 : i32
// CHECK-DAG: arith.constant -1640531527 : i32
// CHECK-DAG: arith.constant -1150833019 : i32
// CHECK-COUNT-20: arith.mului_extended %{{[^ ]+}}, %{{[^ ]+}} : i32
// CHECK-NOT: arith.mului_extended
// 24 random bits -> [0, 1) -> [lo, hi).
// CHECK: %[[BITS:[^ ]+]] = arith.shrui %{{[^ ]+}}, %{{[^ ]+}} : i32
// CHECK-NEXT: %[[F:[^ ]+]] = arith.uitofp %[[BITS]] : i32 to f32
// CHECK-NEXT: %[[SCALE:[^ ]+]] = arith.constant 5.96046448E-8 : f32
// CHECK-NEXT: %[[U:[^ ]+]] = arith.mulf %[[F]], %[[SCALE]] : f32
// CHECK-NEXT: %[[WIDTH:[^ ]+]] = arith.subf %[[HIV]], %[[LOV]] : f32
// CHECK-NEXT: %[[UW:[^ ]+]] = arith.mulf %[[U]], %[[WIDTH]] : f32
// CHECK-NEXT: %[[V:[^ ]+]] = arith.addf %[[LOV]], %[[UW]] : f32
// [minval, maxval) in the result's type: a value that rounds to maxval is minval (torch's rule).
// CHECK-NEXT: %[[TOP:[^ ]+]] = arith.cmpf oeq, %[[V]], %[[HIV]] : f32
// CHECK-NEXT: %[[W:[^ ]+]] = arith.select %[[TOP]], %[[LOV]], %[[V]] : f32
// CHECK-NEXT: linalg.yield %[[W]] : f32
// CHECK: return %[[R]] : tensor<?x4xf32>
func.func @uniform(%lo: tensor<f32>, %hi: tensor<f32>, %seed: tensor<i64>, %off: tensor<i64>, %x: tensor<?xf32>) -> tensor<?x4xf32> {
  %n = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?xf32>) -> index
  %0 = "fusion.uniform"(%lo, %hi, %seed, %off, %n) {shape = array<i64: -1, 4>} : (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>, index) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// rand_like: [0, 1) shaped like the input (extents from tensor.dim); f16 results are drawn
// in f32 and rounded.
// CHECK-LABEL: func.func @rand_like_f16(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x3xf16>, %[[SEED:[a-z0-9_]+]]: tensor<i64>, %[[OFF:[a-z0-9_]+]]: tensor<i64>) -> tensor<?x3xf16>
// CHECK-DAG: %[[N:[^ ]+]] = tensor.dim %[[X]], %{{[^ ]+}} : tensor<?x3xf16>
// CHECK-DAG: %[[ZERO:[^ ]+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ONE:[^ ]+]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[INIT:[^ ]+]] = tensor.empty(%[[N]]) : tensor<?x3xf16>
// CHECK: linalg.generic {indexing_maps = [#[[SCALAR]], #[[SCALAR]], #[[ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[SEED]], %[[OFF]] : tensor<i64>, tensor<i64>) outs(%[[INIT]] : tensor<?x3xf16>) {
// CHECK-COUNT-20: arith.mului_extended
// CHECK-NOT: arith.mului_extended
// CHECK: arith.subf %[[ONE]], %[[ZERO]] : f32
// CHECK: %[[V:[^ ]+]] = arith.addf %[[ZERO]], %{{[^ ]+}} : f32
// CHECK-NEXT: %[[H:[^ ]+]] = arith.truncf %[[V]] : f32 to f16
// The rounded value is compared with the bound rounded alike (in f32): one that rounds to 1.0
// is 0.0.
// CHECK-NEXT: %[[HX:[^ ]+]] = arith.extf %[[H]] : f16 to f32
// CHECK-NEXT: %[[TOPH:[^ ]+]] = arith.truncf %[[ONE]] : f32 to f16
// CHECK-NEXT: %[[TOPX:[^ ]+]] = arith.extf %[[TOPH]] : f16 to f32
// CHECK-NEXT: %[[TOP:[^ ]+]] = arith.cmpf oeq, %[[HX]], %[[TOPX]] : f32
// CHECK-NEXT: %[[LOWH:[^ ]+]] = arith.truncf %[[ZERO]] : f32 to f16
// CHECK-NEXT: %[[R:[^ ]+]] = arith.select %[[TOP]], %[[LOWH]], %[[H]] : f16
// CHECK-NEXT: linalg.yield %[[R]] : f16
func.func @rand_like_f16(%x: tensor<?x3xf16>, %seed: tensor<i64>, %off: tensor<i64>) -> tensor<?x3xf16> {
  %0 = "fusion.rand_like"(%x, %seed, %off) : (tensor<?x3xf16>, tensor<i64>, tensor<i64>) -> tensor<?x3xf16>
  return %0 : tensor<?x3xf16>
}
