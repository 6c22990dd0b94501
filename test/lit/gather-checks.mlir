// A gather's index check (`cf.assert`) on both backends.
// linalg-drop-dead-checks: a generic nothing reads is erased though it holds a check, and a
// body's repeated checks of one condition become one.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-drop-dead-checks)' | FileCheck %s --check-prefix=DEAD
// cpu-asserts-as-error-flag: the check sets a flag the host reads and clears through
// @mlirfuse_take_error (upstream would print and abort()).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-drop-dead-checks, one-shot-bufferize{bufferize-function-boundaries}, func.func(convert-linalg-to-loops), cpu-asserts-as-error-flag)' | FileCheck %s --check-prefix=CPU

// DEAD-LABEL: func.func @gathers(
// DEAD-COUNT-1: linalg.generic
// DEAD-NOT: linalg.generic
// DEAD-COUNT-1: cf.assert
// DEAD-NOT: cf.assert
// DEAD: return

// CPU: memref.global "private" @mlirfuse_error : memref<i32> = dense<0>
// CPU-LABEL: func.func @mlirfuse_take_error() -> i32
// CPU: %[[FLAG:.+]] = memref.get_global @mlirfuse_error
// CPU: %[[VALUE:.+]] = memref.load %[[FLAG]][]
// CPU: memref.store %c0_i32, %[[FLAG]][]
// CPU: return %[[VALUE]] : i32
// CPU-LABEL: func.func @gathers(
// CPU-NOT: cf.assert
// CPU: %[[FAILED:.+]] = arith.xori %{{.+}}, %true
// CPU: scf.if %[[FAILED]] {
// CPU: memref.get_global @mlirfuse_error
// CPU: memref.store %c1_i32
#map = affine_map<(d0) -> (d0)>
func.func @gathers(%x: tensor<8xf32>, %i: tensor<4xindex>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %e = tensor.empty() : tensor<4xf32>
  // the gather itself, left unread once fused into its consumer below
  %dead = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%e : tensor<4xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %j = tensor.extract %i[%k] : tensor<4xindex>
    %ok = arith.cmpi ult, %j, %c8 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = tensor.extract %x[%j] : tensor<8xf32>
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%e : tensor<4xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %j = tensor.extract %i[%k] : tensor<4xindex>
    %ok = arith.cmpi ult, %j, %c8 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = tensor.extract %x[%j] : tensor<8xf32>
    %w = arith.mulf %v, %v : f32
    linalg.yield %w : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
