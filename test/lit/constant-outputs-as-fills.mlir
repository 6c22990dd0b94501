// constant-outputs-as-fills: a result that is a splat constant is filled into its output
// buffer; bufferization then has no memref.global to copy from (on the GPU, a kernel reading
// host memory: T5 under bf16 autocast crashed with an illegal address).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(constant-outputs-as-fills)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(constant-outputs-as-fills, linalg-unshare-inits, eliminate-empty-tensors, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, buffer-deallocation-pipeline, canonicalize, cse)' | FileCheck %s --check-prefix=BUF
// Without it, the constant comes from a global:
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, canonicalize)' | FileCheck %s --check-prefix=UPSTREAM

// CHECK-LABEL: func.func @zero_and_where(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xbf16>, %[[M:[a-z0-9]+]]: memref<?xi8>, %[[OUT0:[a-z0-9]+]]: memref<bf16>, %[[OUT1:[a-z0-9]+]]: memref<?xbf16>)
// CHECK: linalg.yield
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : bf16
// CHECK-NEXT: linalg.fill ins(%[[ZERO]] : bf16) outs(%[[OUT0]] : memref<bf16>)
// CHECK-NOT: materialize_in_destination %cst
// CHECK: bufferization.materialize_in_destination %{{.+}} in restrict writable %[[OUT1]]
// BUF-NOT: memref.global
// BUF-NOT: memref.get_global
// BUF: linalg.fill ins(%{{.+}} : bf16) outs(%{{.+}} : memref<bf16>)
// UPSTREAM: memref.global "private" constant
// UPSTREAM: memref.get_global
// UPSTREAM: memref.copy
#id1 = affine_map<(d0) -> (d0)>
func.func @zero_and_where(%x: memref<?xbf16>, %m: memref<?xi8>, %out0: memref<bf16>, %out1: memref<?xbf16>) {
  %zero = arith.constant dense<0.0> : tensor<bf16>
  %c0 = arith.constant 0 : index
  %tx = bufferization.to_tensor %x restrict : memref<?xbf16> to tensor<?xbf16>
  %tm = bufferization.to_tensor %m restrict : memref<?xi8> to tensor<?xi8>
  %n = tensor.dim %tx, %c0 : tensor<?xbf16>
  %init = tensor.empty(%n) : tensor<?xbf16>
  %w = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%tm, %tx : tensor<?xi8>, tensor<?xbf16>) outs(%init : tensor<?xbf16>) {
  ^bb0(%a: i8, %b: bf16, %o: bf16):
    %z = arith.constant 0 : i8
    %c = arith.cmpi ne, %a, %z : i8
    %zf = arith.constant 0.0 : bf16
    %r = arith.select %c, %zf, %b : bf16
    linalg.yield %r : bf16
  } -> tensor<?xbf16>
  bufferization.materialize_in_destination %zero in restrict writable %out0 : (tensor<bf16>, memref<bf16>) -> ()
  bufferization.materialize_in_destination %w in restrict writable %out1 : (tensor<?xbf16>, memref<?xbf16>) -> ()
  return
}

