// linalg-reshape-elementwise: an elementwise generic whose only user is a tensor.reshape is
// rebuilt over the reshaped shape, reading reshaped inputs; elementwise fusion then makes it
// and its consumer one generic (a view between two pointwise ops: one kernel). A generic
// whose result has another user, one with a broadcast input, and one reading a strided
// memref keep their reshape.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-reshape-elementwise)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-reshape-elementwise, func.func(linalg-fuse-elementwise-ops), canonicalize, cse)' | FileCheck %s --check-prefix=FUSED

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// CHECK-LABEL: func.func @view_between(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x?xf32>, %[[Y:[a-z0-9_]+]]: tensor<?x?xf32>
// CHECK-DAG: %[[SHAPE:.+]] = arith.constant dense<[4, 16, 48]> : tensor<3xindex>
// CHECK-DAG: %[[XR:.+]] = tensor.reshape %[[X]](%[[SHAPE]]) : (tensor<?x?xf32>, tensor<3xindex>) -> tensor<4x16x48xf32>
// CHECK-DAG: %[[YR:.+]] = tensor.reshape %[[Y]](%[[SHAPE]]) : (tensor<?x?xf32>, tensor<3xindex>) -> tensor<4x16x48xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]{{.*}} ins(%[[XR]], %[[YR]] : tensor<4x16x48xf32>, tensor<4x16x48xf32>)
// CHECK: arith.addf
// CHECK-NOT: tensor.reshape
// FUSED-LABEL: func.func @view_between(
// FUSED-COUNT-1: linalg.generic
// FUSED-NOT: linalg.generic
// FUSED: arith.addf
// FUSED-NEXT: arith.mulf
func.func @view_between(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %o: tensor<?x?xf32>) -> tensor<4x16x48xf32> {
  %sum = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  %shape = arith.constant dense<[4, 16, 48]> : tensor<3xindex>
  %view = tensor.reshape %sum(%shape) : (tensor<?x?xf32>, tensor<3xindex>) -> tensor<4x16x48xf32>
  %init = tensor.empty() : tensor<4x16x48xf32>
  %sq = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%view : tensor<4x16x48xf32>) outs(%init : tensor<4x16x48xf32>) {
  ^bb0(%a: f32, %out: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x16x48xf32>
  return %sq : tensor<4x16x48xf32>
}

// CHECK-LABEL: func.func @kept(
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?xf32>)
// CHECK: tensor.reshape
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<?x?xf32>)
// CHECK: tensor.reshape
// CHECK: %[[T:.+]] = bufferization.to_tensor
// CHECK-NEXT: %[[SQ:.+]] = linalg.generic {{.*}} ins(%[[T]] : tensor<8x8xf32>)
// CHECK: tensor.reshape %[[SQ]]
func.func @kept(%x: tensor<?x?xf32>, %b: tensor<?xf32>, %o: tensor<?x?xf32>, %m: memref<8x8xf32, strided<[16, 1]>>,
                %o2: tensor<8x8xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<?x?xf32>, tensor<64xf32>) {
  %shape = arith.constant dense<[64]> : tensor<1xindex>
  // a broadcast input
  %bc = linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<?x?xf32>, tensor<?xf32>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%a: f32, %c: f32, %out: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  %v1 = tensor.reshape %bc(%shape) : (tensor<?x?xf32>, tensor<1xindex>) -> tensor<64xf32>
  // a second user
  %neg = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%a: f32, %out: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<?x?xf32>
  %v2 = tensor.reshape %neg(%shape) : (tensor<?x?xf32>, tensor<1xindex>) -> tensor<64xf32>
  // a strided memref's tensor
  %t = bufferization.to_tensor %m : memref<8x8xf32, strided<[16, 1]>> to tensor<8x8xf32>
  %sq = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<8x8xf32>) outs(%o2 : tensor<8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %q = arith.mulf %a, %a : f32
    linalg.yield %q : f32
  } -> tensor<8x8xf32>
  %v3 = tensor.reshape %sq(%shape) : (tensor<8x8xf32>, tensor<1xindex>) -> tensor<64xf32>
  return %v1, %v2, %neg, %v3 : tensor<64xf32>, tensor<64xf32>, tensor<?x?xf32>, tensor<64xf32>
}
