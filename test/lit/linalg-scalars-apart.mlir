// linalg-scalars-apart: 0-d work with a math function or a division, read by a pointwise
// generic over a tensor, is read with tensor.extract in the consumer's body (computed once by
// its own generic, not fused into every element); cheap 0-d work stays an operand (fused).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-scalars-apart)' | FileCheck %s

#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
#s0 = affine_map<() -> ()>

// CHECK-LABEL: func.func @bias_correction(
// CHECK: linalg.generic
// CHECK: math.powf
// CHECK: %[[C:[a-z0-9_]+]] = linalg.generic
// CHECK: arith.subf
// CHECK: %[[DUMMY:[a-z0-9_]+]] = tensor.empty() : tensor<f32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[DUMMY]] : tensor<?xf32>, tensor<f32>)
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[E:[a-z0-9_]+]] = tensor.extract %[[C]][] : tensor<f32>
// CHECK-NEXT: arith.divf %{{.*}}, %[[E]] : f32
func.func @bias_correction(%x: tensor<?xf32>, %step: tensor<f32>, %o: tensor<?xf32>) -> tensor<?xf32> {
  %e = tensor.empty() : tensor<f32>
  %cst = arith.constant 0.9 : f32
  %p = linalg.generic {indexing_maps = [#s0, #s0], iterator_types = []}
      ins(%step : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%s: f32, %out: f32):
    %v = math.powf %cst, %s : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  %one = arith.constant 1.0 : f32
  %c = linalg.generic {indexing_maps = [#s0, #s0], iterator_types = []}
      ins(%p : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%s: f32, %out: f32):
    %v = arith.subf %one, %s : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  %r = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel"]}
      ins(%x, %c : tensor<?xf32>, tensor<f32>) outs(%o : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %q = arith.divf %a, %b : f32
    linalg.yield %q : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// CHECK-LABEL: func.func @cheap(
// CHECK-NOT: tensor.extract
// CHECK: ins(%{{.*}}, %{{.*}} : tensor<?xf32>, tensor<f32>)
func.func @cheap(%x: tensor<?xf32>, %step: tensor<f32>, %o: tensor<?xf32>) -> tensor<?xf32> {
  %e = tensor.empty() : tensor<f32>
  %one = arith.constant 1.0 : f32
  %c = linalg.generic {indexing_maps = [#s0, #s0], iterator_types = []}
      ins(%step : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%s: f32, %out: f32):
    %v = arith.addf %s, %one : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  %r = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel"]}
      ins(%x, %c : tensor<?xf32>, tensor<f32>) outs(%o : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %q = arith.mulf %a, %b : f32
    linalg.yield %q : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
