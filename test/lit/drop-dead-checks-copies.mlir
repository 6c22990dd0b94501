// linalg-drop-dead-checks: copies of one checked generic (linalg-recompute-producers clones a
// producer for each consumer; a copy that fusion could not fold into its consumer, one read
// through a broadcast, stays) become one. `cse` does not merge them: `cf.assert` has an
// effect. Each clone has its own `tensor.empty`, and fusion leaves copies of constants.
// GPT-2's position-embedding gather was computed three times, twice into buffers of their
// own, and its LayerNorm's reduction started from a fill read from memory.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-drop-dead-checks)' | FileCheck %s

// CHECK-LABEL: func.func @copies(
// CHECK: %[[G:.+]] = linalg.generic
// CHECK: cf.assert
// CHECK-NOT: cf.assert
// CHECK: %[[S:.+]] = linalg.generic {{.+}} ins(%[[G]] : tensor<4x8xf32>)
// CHECK: %[[T:.+]] = linalg.generic {{.+}} ins(%[[G]], %[[S]] : tensor<4x8xf32>, tensor<2x4xf32>)
// CHECK: return %[[G]], %[[S]], %[[T]]

// Not copies: another index tensor, another message. Both stay.
// CHECK-LABEL: func.func @not_copies(
// CHECK-COUNT-3: cf.assert
// CHECK-NOT: cf.assert
// CHECK: return
#gather = affine_map<(d0, d1) -> (d0, d1)>
#bcast = affine_map<(d0, d1, d2) -> (d1, d2)>
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @copies(%x: tensor<16x8xf32>, %i: tensor<4xindex>) -> (tensor<4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#gather], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x8xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %c = linalg.index 1 : index
    %j = tensor.extract %i[%k] : tensor<4xindex>
    %ok = arith.cmpi ult, %j, %c16 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = tensor.extract %x[%j, %c] : tensor<16x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %g1 = linalg.generic {indexing_maps = [#gather], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x8xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %c = linalg.index 1 : index
    %j = tensor.extract %i[%k] : tensor<4xindex>
    %ok = arith.cmpi ult, %j, %c16 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = tensor.extract %x[%j, %c] : tensor<16x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %r = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%r : tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = linalg.generic {indexing_maps = [#bcast, #rows], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g1 : tensor<4x8xf32>) outs(%f : tensor<2x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %acc, %in : f32
    linalg.yield %a : f32
  } -> tensor<2x4xf32>
  %g2 = linalg.generic {indexing_maps = [#gather], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x8xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %c = linalg.index 1 : index
    %j = tensor.extract %i[%k] : tensor<4xindex>
    %ok = arith.cmpi ult, %j, %c16 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = tensor.extract %x[%j, %c] : tensor<16x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#bcast, #rows, #rows], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g2, %s : tensor<4x8xf32>, tensor<2x4xf32>) outs(%f : tensor<2x4xf32>) {
  ^bb0(%in: f32, %m: f32, %acc: f32):
    %d = arith.subf %in, %m : f32
    %a = arith.addf %acc, %d : f32
    linalg.yield %a : f32
  } -> tensor<2x4xf32>
  return %g, %s, %t : tensor<4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

func.func @not_copies(%x: tensor<16x8xf32>, %i: tensor<4xindex>, %i2: tensor<4xindex>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %c16 = arith.constant 16 : index
  %e = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#gather], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x8xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %c = linalg.index 1 : index
    %j = tensor.extract %i[%k] : tensor<4xindex>
    %ok = arith.cmpi ult, %j, %c16 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = tensor.extract %x[%j, %c] : tensor<16x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %g1 = linalg.generic {indexing_maps = [#gather], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x8xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %c = linalg.index 1 : index
    %j = tensor.extract %i2[%k] : tensor<4xindex>
    %ok = arith.cmpi ult, %j, %c16 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = tensor.extract %x[%j, %c] : tensor<16x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %g2 = linalg.generic {indexing_maps = [#gather], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x8xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %c = linalg.index 1 : index
    %j = tensor.extract %i[%k] : tensor<4xindex>
    %ok = arith.cmpi ult, %j, %c16 : index
    cf.assert %ok, "another check"
    %v = tensor.extract %x[%j, %c] : tensor<16x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %g, %g1, %g2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
