// output-views-in-place: a result that leaves through a reshape is materialized, before the
// reshape, into the output buffer seen with its shape; the view is built before the
// tensor.empty that sizes the value, so that bufferization computes it in the output itself.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(output-views-in-place)' | FileCheck %s
// The whole bufferization pipeline of both backends: no temporary, no copy, right shapes.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(output-views-in-place, resolve-shaped-type-result-dims, canonicalize, linalg-unshare-inits, eliminate-empty-tensors, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, buffer-deallocation-pipeline, canonicalize, cse)' | FileCheck %s --check-prefix=BUF
// Without the pass, upstream empty-tensor elimination writes the [n, m] value of
// @same_type_reshape straight into the [m, n] output (a wrong answer, MLIR 22.1):
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-unshare-inits, eliminate-empty-tensors, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, canonicalize)' | FileCheck %s --check-prefix=UPSTREAM

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// GELU between bookend reshapes: [n, h] -> [64, n/64, h] -> erf -> [n, h].
// CHECK-LABEL: func.func @bookend(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf32>, %[[OUT:[a-z0-9]+]]: memref<?x?xf32>)
// CHECK: %[[M:.+]] = arith.divsi
// CHECK: %[[SIZES:.+]] = memref.alloc() : memref<3xindex>
// CHECK: memref.store %[[M]], %[[SIZES]]
// CHECK: %[[VIEW:.+]] = memref.reshape %[[OUT]](%[[SIZES]]) : (memref<?x?xf32>, memref<3xindex>) -> memref<64x?x?xf32>
// CHECK: tensor.empty(%[[M]], %{{.+}}) : tensor<64x?x?xf32>
// CHECK: %[[G:.+]] = linalg.generic
// CHECK: bufferization.materialize_in_destination %[[G]] in restrict writable %[[VIEW]] : (tensor<64x?x?xf32>, memref<64x?x?xf32>) -> ()
// BUF-LABEL: func.func @bookend(
// BUF-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf32>, %[[OUT:[a-z0-9]+]]: memref<?x?xf32>)
// BUF: %[[VIEW:.+]] = memref.reshape %[[OUT]]
// BUF: linalg.generic {{.*}} outs(%[[VIEW]] : memref<64x?x?xf32>)
// BUF-NOT: memref.copy
// BUF: return
func.func @bookend(%x: memref<?x?xf32>, %out: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %t = bufferization.to_tensor %x restrict : memref<?x?xf32> to tensor<?x?xf32>
  %n = tensor.dim %t, %c0 : tensor<?x?xf32>
  %h = tensor.dim %t, %c1 : tensor<?x?xf32>
  %m = arith.divsi %n, %c64 : index
  %s3 = tensor.from_elements %c64, %m, %h : tensor<3xindex>
  %in = tensor.reshape %t(%s3) : (tensor<?x?xf32>, tensor<3xindex>) -> tensor<64x?x?xf32>
  %e = tensor.empty(%m, %h) : tensor<64x?x?xf32>
  %g = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%in : tensor<64x?x?xf32>) outs(%e : tensor<64x?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = math.erf %a : f32
    linalg.yield %r : f32
  } -> tensor<64x?x?xf32>
  %s2 = tensor.from_elements %n, %h : tensor<2xindex>
  %res = tensor.reshape %g(%s2) : (tensor<64x?x?xf32>, tensor<2xindex>) -> tensor<?x?xf32>
  bufferization.materialize_in_destination %res in restrict writable %out : (tensor<?x?xf32>, memref<?x?xf32>) -> ()
  return
}

// (x * 2).reshape(m, n) of an [n, m] x: the same type before and after the reshape.
// BUF-LABEL: func.func @same_type_reshape(
// BUF-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf32>, %[[OUT:[a-z0-9]+]]: memref<?x?xf32>)
// BUF: %[[VIEW:.+]] = memref.reshape %[[OUT]]
// BUF: linalg.generic {{.*}} ins(%[[X]] : memref<?x?xf32>) outs(%[[VIEW]] : memref<?x?xf32>)
// BUF-NOT: memref.copy
// UPSTREAM-LABEL: func.func @same_type_reshape(
// UPSTREAM-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf32>, %[[OUT:[a-z0-9]+]]: memref<?x?xf32>)
// UPSTREAM: linalg.generic {{.*}} ins(%[[X]] : memref<?x?xf32>) outs(%[[OUT]] : memref<?x?xf32>)
func.func @same_type_reshape(%x: memref<?x?xf32>, %out: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 2.0 : f32
  %t = bufferization.to_tensor %x restrict : memref<?x?xf32> to tensor<?x?xf32>
  %n = tensor.dim %t, %c0 : tensor<?x?xf32>
  %m = tensor.dim %t, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%n, %m) : tensor<?x?xf32>
  %g = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %cst : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %s = tensor.from_elements %m, %n : tensor<2xindex>
  %res = tensor.reshape %g(%s) : (tensor<?x?xf32>, tensor<2xindex>) -> tensor<?x?xf32>
  bufferization.materialize_in_destination %res in restrict writable %out : (tensor<?x?xf32>, memref<?x?xf32>) -> ()
  return
}

// A reshaped input (no kernel computes it): copied into the output's view, sized from it.
// CHECK-LABEL: func.func @reshaped_input(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<6xf32>, %[[OUT:[a-z0-9]+]]: memref<2x3xf32>)
// CHECK: %[[T:.+]] = bufferization.to_tensor %[[X]]
// CHECK: %[[VIEW:.+]] = memref.reshape %[[OUT]](%{{.+}}) : (memref<2x3xf32>, memref<1xindex>) -> memref<6xf32>
// CHECK: bufferization.materialize_in_destination %[[T]] in restrict writable %[[VIEW]]
// BUF-LABEL: func.func @reshaped_input(
// BUF: memref.copy %{{.+}}, %{{.+}} : memref<6xf32> to memref<6xf32>
func.func @reshaped_input(%x: memref<6xf32>, %out: memref<2x3xf32>) {
  %t = bufferization.to_tensor %x restrict : memref<6xf32> to tensor<6xf32>
  %r = tensor.expand_shape %t [[0, 1]] output_shape [2, 3] : tensor<6xf32> into tensor<2x3xf32>
  bufferization.materialize_in_destination %r in restrict writable %out : (tensor<2x3xf32>, memref<2x3xf32>) -> ()
  return
}

// A copy that only inserts size-1 dims ([C] -> [1, 1, C]) is a view too: the column sum is
// computed into the output.
// CHECK-LABEL: func.func @unit_dims(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf32>, %[[OUT:[a-z0-9]+]]: memref<1x1x?xf32>)
// CHECK: %[[VIEW:.+]] = memref.reshape %[[OUT]](%{{.+}}) : (memref<1x1x?xf32>, memref<1xindex>) -> memref<?xf32>
// CHECK: %[[S:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: bufferization.materialize_in_destination %[[S]] in restrict writable %[[VIEW]]
// BUF-LABEL: func.func @unit_dims(
// BUF-COUNT-1: linalg.generic
// BUF-NOT: memref.copy
// BUF: return
#col_t = affine_map<(d0, d1) -> (d1, d0)>
#col_o = affine_map<(d0, d1) -> (d0)>
#bc_in = affine_map<(d0, d1, d2) -> (d2)>
func.func @unit_dims(%x: memref<?x?xf32>, %out: memref<1x1x?xf32>) {
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %t = bufferization.to_tensor %x restrict : memref<?x?xf32> to tensor<?x?xf32>
  %n = tensor.dim %t, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %s = linalg.generic {indexing_maps = [#col_t, #col_o], iterator_types = ["parallel", "reduction"]}
      ins(%t : tensor<?x?xf32>) outs(%f : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  %e3 = tensor.empty(%n) : tensor<1x1x?xf32>
  %b = linalg.generic {indexing_maps = [#bc_in, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<?xf32>) outs(%e3 : tensor<1x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<1x1x?xf32>
  bufferization.materialize_in_destination %b in restrict writable %out : (tensor<1x1x?xf32>, memref<1x1x?xf32>) -> ()
  return
}
