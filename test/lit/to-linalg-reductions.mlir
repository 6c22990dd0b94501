// fusion-to-linalg on reductions: an accumulator tensor of the kept dims is filled with the
// reduction's identity (linalg.fill), then one linalg.generic reads the input through the
// identity map and writes through a projected map, with "reduction" iterators on the reduced
// axes. Floats accumulate with fastmath<reassoc>; f16 accumulates in f32; on the host (the
// default target, cpu) sums, means and variances with f32 results accumulate in f64 and round
// once at the end (a sequential f32 sum loses accuracy with its length); bools are i8 bytes.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg)' | FileCheck %s

// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROWS:map[0-9]*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[COLS:map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[ALL:map[0-9]*]] = affine_map<(d0, d1) -> ()>
// CHECK-DAG: #[[ID1:map[0-9]*]] = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func.func @sum_rows(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NOT: fusion.
// CHECK: %[[ZERO:[^ ]+]] = arith.constant 0.000000e+00 : f64
// CHECK: %[[INIT:[^ ]+]] = tensor.empty() : tensor<4xf64>
// CHECK: %[[ACC:[^ ]+]] = linalg.fill ins(%[[ZERO]] : f64) outs(%[[INIT]] : tensor<4xf64>) -> tensor<4xf64>
// CHECK: %[[SUM:[^ ]+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROWS]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x8xf32>) outs(%[[ACC]] : tensor<4xf64>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %[[OUT:[^:]+]]: f64):
// CHECK-NEXT: %[[W:[^ ]+]] = arith.extf %[[IN]] : f32 to f64
// CHECK-NEXT: %[[S:[^ ]+]] = arith.addf %[[OUT]], %[[W]] fastmath<reassoc> : f64
// CHECK-NEXT: linalg.yield %[[S]] : f64
// CHECK: %[[R:[^ ]+]] = linalg.generic {{.*}}ins(%[[SUM]] : tensor<4xf64>) outs(%{{[^ ]+}} : tensor<4xf32>)
// CHECK: arith.truncf %{{[^ ]+}} : f64 to f32
// CHECK: return %[[R]] : tensor<4xf32>
func.func @sum_rows(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// Reducing the leading axis: the iterator order follows the input's dims.
// CHECK-LABEL: func.func @sum_cols_i64(
// CHECK: %[[ZERO:[^ ]+]] = arith.constant 0 : i64
// CHECK: linalg.fill ins(%[[ZERO]] : i64)
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[COLS]]], iterator_types = ["reduction", "parallel"]}
// CHECK: arith.addi
func.func @sum_cols_i64(%x: tensor<4x8xi64>) -> tensor<8xi64> {
  %0 = "fusion.sum"(%x) {axes = array<i64: 0>, keepdim = false} : (tensor<4x8xi64>) -> tensor<8xi64>
  return %0 : tensor<8xi64>
}

// CHECK-LABEL: func.func @prod(
// CHECK: %[[ONE:[^ ]+]] = arith.constant 1.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ONE]] : f32)
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.mulf {{.*}} fastmath<reassoc> : f32
func.func @prod(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = "fusion.prod"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// Full reduction to 0-d; min starts at +inf and propagates NaN (minimumf).
// CHECK-LABEL: func.func @min_all(
// CHECK: %[[INF:[^ ]+]] = arith.constant 0x7F800000 : f32
// CHECK: %[[INIT:[^ ]+]] = tensor.empty() : tensor<f32>
// CHECK: linalg.fill ins(%[[INF]] : f32) outs(%[[INIT]] : tensor<f32>)
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ALL]]], iterator_types = ["reduction", "reduction"]}
// CHECK: arith.minimumf
func.func @min_all(%x: tensor<4x8xf32>) -> tensor<f32> {
  %0 = "fusion.min"(%x) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Integer max starts at the type's minimum.
// CHECK-LABEL: func.func @max_i32(
// CHECK: %[[MIN:[^ ]+]] = arith.constant -2147483648 : i32
// CHECK: linalg.fill ins(%[[MIN]] : i32)
// CHECK: arith.maxsi
func.func @max_i32(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  %0 = "fusion.max"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// Bool any/all (max/min) on i8 bytes: identities 0 and 1, unsigned max/min.
// CHECK-LABEL: func.func @any_all(
// CHECK-SAME: tensor<4x8xi8>) -> (tensor<4xi8>, tensor<4xi8>)
// CHECK: %[[F:[^ ]+]] = arith.constant 0 : i8
// CHECK: linalg.fill ins(%[[F]] : i8)
// CHECK: arith.maxui {{.*}} : i8
// CHECK: %[[T:[^ ]+]] = arith.constant 1 : i8
// CHECK: linalg.fill ins(%[[T]] : i8)
// CHECK: arith.minui {{.*}} : i8
func.func @any_all(%x: tensor<4x8xi1>) -> (tensor<4xi1>, tensor<4xi1>) {
  %0 = "fusion.max"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xi1>) -> tensor<4xi1>
  %1 = "fusion.min"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<4x8xi1>) -> tensor<4xi1>
  return %0, %1 : tensor<4xi1>, tensor<4xi1>
}

// keepdim: reduce to the kept dims (max starts at -inf), then a parallel generic re-inserts the size-1 dim.
// CHECK-LABEL: func.func @max_keepdim(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x8xf32>) -> tensor<?x1xf32>
// CHECK: %[[NINF:[^ ]+]] = arith.constant 0xFF800000 : f32
// CHECK: %[[INIT:[^ ]+]] = tensor.empty(%{{[^)]+}}) : tensor<?xf32>
// CHECK: %[[ACC:[^ ]+]] = linalg.fill ins(%[[NINF]] : f32) outs(%[[INIT]] : tensor<?xf32>)
// CHECK: %[[R:[^ ]+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROWS]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<?x8xf32>) outs(%[[ACC]] : tensor<?xf32>)
// CHECK: arith.maximumf
// CHECK: %[[K:[^ ]+]] = linalg.generic {indexing_maps = [#[[ROWS]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[R]] : tensor<?xf32>) outs(%{{[^ ]+}} : tensor<?x1xf32>)
// CHECK: return %[[K]] : tensor<?x1xf32>
func.func @max_keepdim(%x: tensor<?x8xf32>) -> tensor<?x1xf32> {
  %0 = "fusion.max"(%x) {axes = array<i64: 1>, keepdim = true} : (tensor<?x8xf32>) -> tensor<?x1xf32>
  return %0 : tensor<?x1xf32>
}

// mean in f16: accumulate the f16 elements in f32, divide by the element count, round to f16 last.
// CHECK-LABEL: func.func @mean_f16(
// CHECK: %[[N:[^ ]+]] = arith.sitofp %{{[^ ]+}} : i64 to f32
// CHECK: linalg.fill ins(%{{[^ ]+}} : f32) outs(%{{[^ ]+}} : tensor<?xf32>)
// CHECK: %[[SUM:[^ ]+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%{{[^ ]+}} : tensor<?x8xf16>) outs(%{{[^ ]+}} : tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f16, %[[OUT:[^:]+]]: f32):
// CHECK-NEXT: %[[W:[^ ]+]] = arith.extf %[[IN]] : f16 to f32
// CHECK-NEXT: arith.addf %[[OUT]], %[[W]] fastmath<reassoc> : f32
// CHECK: %[[MEAN:[^ ]+]] = linalg.generic {{.*}}ins(%[[SUM]] : tensor<?xf32>)
// CHECK: arith.divf %{{[^ ]+}}, %[[N]] : f32
// CHECK: %[[H:[^ ]+]] = linalg.generic {{.*}}ins(%[[MEAN]] : tensor<?xf32>) outs(%{{[^ ]+}} : tensor<?xf16>)
// CHECK: arith.truncf %{{[^ ]+}} : f32 to f16
// CHECK: return %[[H]] : tensor<?xf16>
func.func @mean_f16(%x: tensor<?x8xf16>) -> tensor<?xf16> {
  %0 = "fusion.mean"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<?x8xf16>) -> tensor<?xf16>
  return %0 : tensor<?xf16>
}

// var_mean: a sum reduction gives the mean; a second reduction reads the input and the mean
// (broadcast back through the projected map) and sums squared deviations; that is divided by
// max(count - correction, 0). Result #0 is the variance, #1 the mean.
// CHECK-LABEL: func.func @var_mean(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[N:[^ ]+]] = arith.sitofp %{{[^ ]+}} : i64 to f64
// CHECK: %[[SUM:[^ ]+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROWS]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x8xf32>)
// CHECK: %[[MEAN:[^ ]+]] = linalg.generic {indexing_maps = [#[[ID1]], #[[ID1]]], iterator_types = ["parallel"]} ins(%[[SUM]] : tensor<4xf64>)
// CHECK: arith.divf %{{[^ ]+}}, %[[N]] : f64
// CHECK: %[[SQ:[^ ]+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROWS]], #[[ROWS]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[MEAN]] : tensor<4x8xf32>, tensor<4xf64>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %[[M:[^:]+]]: f64, %[[OUT:[^:]+]]: f64):
// CHECK-NEXT: %[[W:[^ ]+]] = arith.extf %[[IN]] : f32 to f64
// CHECK-NEXT: %[[D:[^ ]+]] = arith.subf %[[W]], %[[M]] : f64
// CHECK-NEXT: %[[D2:[^ ]+]] = arith.mulf %[[D]], %[[D]] : f64
// CHECK-NEXT: arith.addf %[[OUT]], %[[D2]] fastmath<reassoc> : f64
// CHECK: %[[CORR:[^ ]+]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[NC:[^ ]+]] = arith.subf %[[N]], %[[CORR]] : f64
// CHECK: %[[DEN:[^ ]+]] = arith.maximumf %[[NC]], %{{[^ ]+}} : f64
// CHECK: %[[VAR64:[^ ]+]] = linalg.generic {{.*}}ins(%[[SQ]] : tensor<4xf64>)
// CHECK: arith.divf %{{[^ ]+}}, %[[DEN]] : f64
// CHECK: %[[VAR:[^ ]+]] = linalg.generic {{.*}}ins(%[[VAR64]] : tensor<4xf64>) outs(%{{[^ ]+}} : tensor<4xf32>)
// CHECK: arith.truncf %{{[^ ]+}} : f64 to f32
// CHECK: %[[MEAN32:[^ ]+]] = linalg.generic {{.*}}ins(%[[MEAN]] : tensor<4xf64>) outs(%{{[^ ]+}} : tensor<4xf32>)
// CHECK: return %[[VAR]], %[[MEAN32]] : tensor<4xf32>, tensor<4xf32>
func.func @var_mean(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0:2 = "fusion.var_mean"(%x) {axes = array<i64: 1>, keepdim = false, correction = 1.0 : f64} : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}
