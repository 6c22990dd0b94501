// linalg-drop-dead-checks keeps a gather marked `mlirfuse.keep_checks` (lower_gather marks a
// gather whose result is read only in part): its consumer, a slice, read the first row
// alone, so only the gather checks the other indices.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-drop-dead-checks)' | FileCheck %s

// CHECK-LABEL: func.func @slice_of_gather(
// CHECK: linalg.generic {{.+}} outs(%{{.+}} : tensor<2x4xf32>) attrs = {mlirfuse.keep_checks}
// CHECK: cf.assert
// CHECK: linalg.generic {{.+}} outs(%{{.+}} : tensor<1x4xf32>)
// CHECK: cf.assert
// CHECK: return
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @slice_of_gather(%x: tensor<5x4xf32>, %i: tensor<2xindex>) -> tensor<1x4xf32> {
  %c0 = arith.constant 0 : index
  %c5 = arith.constant 5 : index
  %e = tensor.empty() : tensor<2x4xf32>
  %unread = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<2x4xf32>) attrs = {mlirfuse.keep_checks} {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %c = linalg.index 1 : index
    %j = tensor.extract %i[%k] : tensor<2xindex>
    %ok = arith.cmpi ult, %j, %c5 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = tensor.extract %x[%j, %c] : tensor<5x4xf32>
    linalg.yield %v : f32
  } -> tensor<2x4xf32>
  %e1 = tensor.empty() : tensor<1x4xf32>
  %r = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%e1 : tensor<1x4xf32>) {
  ^bb0(%out: f32):
    %c = linalg.index 1 : index
    %j = tensor.extract %i[%c0] : tensor<2xindex>
    %ok = arith.cmpi ult, %j, %c5 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = tensor.extract %x[%j, %c] : tensor<5x4xf32>
    linalg.yield %v : f32
  } -> tensor<1x4xf32>
  return %r : tensor<1x4xf32>
}
