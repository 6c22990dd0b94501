// linalg-unshare-inits: every linalg op gets its own init, and every insert its own frame.
// Two padded outputs of one value, pad(v) and pad(v^T): `cse` made their pads' borders (fills
// inserted into an empty tensor) one frame, the destination of both values' inserts.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-unshare-inits)' | FileCheck %s
// With empty-tensor elimination and bufferization: v^T is written into the second output,
// from v in the first. Sharing the frame, bufferization wrote v^T there, copied v over it
// and copied the first output into the second (MLIR 22.1, fuzz seed 730572).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-unshare-inits, eliminate-empty-tensors, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, canonicalize, cse)' | FileCheck %s --check-prefix=BUF

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>

// CHECK-LABEL: func.func @two_pads_of_one_value(
// CHECK-DAG: %[[B1:.+]] = tensor.insert_slice %{{.+}} into %{{.+}}[5, 0]
// CHECK-DAG: %[[B2:.+]] = tensor.insert_slice %{{.+}} into %{{.+}}[5, 0]
// CHECK-DAG: %[[F1:.+]] = tensor.insert_slice %{{.+}} into %[[B1]][0, 5]
// CHECK-DAG: %[[F2:.+]] = tensor.insert_slice %{{.+}} into %[[B2]][0, 5]
// CHECK-DAG: tensor.insert_slice %{{.+}} into %[[F1]][0, 0]
// CHECK-DAG: tensor.insert_slice %{{.+}} into %[[F2]][0, 0]
// CHECK: return
// BUF-LABEL: func.func @two_pads_of_one_value(
// BUF-SAME: %[[X:[a-z0-9]+]]: memref<5x5xf32>, %[[O1:[a-z0-9]+]]: memref<8x8xf32>, %[[O2:[a-z0-9]+]]: memref<8x8xf32>)
// BUF: %[[V1:.+]] = memref.subview %[[O1]][0, 0] [5, 5]
// BUF: linalg.generic {{.*}} ins(%[[X]] : memref<5x5xf32>) outs(%[[V1]] :
// BUF: %[[T2:.+]] = memref.subview %[[O2]][0, 0] [5, 5]
// BUF-NOT: memref.copy %[[O1]]
// BUF: linalg.generic {{.*}} ins(%[[V1]] : {{.*}}) outs(%[[T2]] :
// BUF-NOT: memref.copy %[[O1]]
// BUF: return
func.func @two_pads_of_one_value(%x: memref<5x5xf32>, %o1: memref<8x8xf32>, %o2: memref<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %t = bufferization.to_tensor %x restrict : memref<5x5xf32> to tensor<5x5xf32>
  %e = tensor.empty() : tensor<5x5xf32>
  %v = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<5x5xf32>) outs(%e : tensor<5x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.exp %in : f32
    linalg.yield %r : f32
  } -> tensor<5x5xf32>
  %frame = tensor.empty() : tensor<8x8xf32>
  %rows = tensor.empty() : tensor<3x8xf32>
  %zrows = linalg.fill ins(%zero : f32) outs(%rows : tensor<3x8xf32>) -> tensor<3x8xf32>
  %below = tensor.insert_slice %zrows into %frame[5, 0] [3, 8] [1, 1] : tensor<3x8xf32> into tensor<8x8xf32>
  %cols = tensor.empty() : tensor<5x3xf32>
  %zcols = linalg.fill ins(%zero : f32) outs(%cols : tensor<5x3xf32>) -> tensor<5x3xf32>
  %border = tensor.insert_slice %zcols into %below[0, 5] [5, 3] [1, 1] : tensor<5x3xf32> into tensor<8x8xf32>
  %p1 = tensor.insert_slice %v into %border[0, 0] [5, 5] [1, 1] : tensor<5x5xf32> into tensor<8x8xf32>
  %vt = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v : tensor<5x5xf32>) outs(%e : tensor<5x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<5x5xf32>
  %p2 = tensor.insert_slice %vt into %border[0, 0] [5, 5] [1, 1] : tensor<5x5xf32> into tensor<8x8xf32>
  bufferization.materialize_in_destination %p1 in restrict writable %o1 : (tensor<8x8xf32>, memref<8x8xf32>) -> ()
  bufferization.materialize_in_destination %p2 in restrict writable %o2 : (tensor<8x8xf32>, memref<8x8xf32>) -> ()
  return
}
