// inline-scalar-operands: a generic reads a runtime scalar's tensor (0-d, or viewed as [1])
// as the scalar itself; a scalar's tensor still needed (returned, or the only operand giving
// a loop its extent) is made by linalg.fill, so that bufferization never has the host store
// the scalar into a buffer (on the GPU, device memory: the host process faults).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(inline-scalar-operands)' | FileCheck %s

// CHECK-LABEL: func.func @scalar_returned(
// CHECK-SAME: %[[S:[a-z0-9]+]]: f32
// CHECK: %[[E:.+]] = tensor.empty() : tensor<f32>
// CHECK: %[[F:.+]] = linalg.fill ins(%[[S]] : f32) outs(%[[E]] : tensor<f32>)
// CHECK: bufferization.materialize_in_destination %[[F]]
// CHECK-NOT: tensor.from_elements
func.func @scalar_returned(%s: f32, %out: memref<f32>) {
  %t = tensor.from_elements %s : tensor<f32>
  bufferization.materialize_in_destination %t in restrict writable %out : (tensor<f32>, memref<f32>) -> ()
  return
}

// Viewed as [1] and added to x: read by value. Summed over its [1] view, it gives the loop
// its extent: it stays an input, made by a fill.
// CHECK-LABEL: func.func @viewed(
// CHECK-SAME: %[[S:[a-z0-9]+]]: f32
// CHECK: linalg.fill ins(%[[S]] : f32)
// CHECK: linalg.generic {{.*}} ins(%{{.+}} : tensor<1xf32>) outs(%{{.+}} : tensor<1xf32>)
// CHECK: arith.addf %{{.+}}, %[[S]]
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction"]} ins(%{{.+}} : tensor<1xf32>)
#id = affine_map<(d0) -> (d0)>
#none = affine_map<(d0) -> ()>
func.func @viewed(%s: f32, %x: tensor<1xf32>) -> (tensor<1xf32>, tensor<f32>) {
  %shape = arith.constant dense<1> : tensor<1xindex>
  %t = tensor.from_elements %s : tensor<f32>
  %v = tensor.reshape %t(%shape) : (tensor<f32>, tensor<1xindex>) -> tensor<1xf32>
  %e = tensor.empty() : tensor<1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x, %v : tensor<1xf32>, tensor<1xf32>) outs(%e : tensor<1xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<1xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %acc = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %total = linalg.generic {indexing_maps = [#id, #none], iterator_types = ["reduction"]}
      ins(%v : tensor<1xf32>) outs(%acc : tensor<f32>) {
  ^bb0(%b: f32, %o: f32):
    %r = arith.addf %o, %b : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %sum, %total : tensor<1xf32>, tensor<f32>
}
