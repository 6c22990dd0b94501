// linalg-reciprocal-divisors: a division rounded to 16 bits whose divisor the innermost loop
// does not change (a row value) multiplies by the divisor's reciprocal and takes one Newton
// step (two fmas: the correctly rounded quotient), the plain product where the reciprocal is
// not a normal number; divisors that vary along the row, and float32 results, keep the division.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-reciprocal-divisors)' | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// CHECK-LABEL: func.func @by_row_sum(
// CHECK: ^bb0(%[[X:[a-z0-9_]+]]: bf16, %[[S:[a-z0-9_]+]]: f32, %{{.*}}: bf16):
// CHECK: %[[XF:[a-z0-9_]+]] = arith.extf %[[X]] : bf16 to f32
// CHECK: %[[ONE:[a-z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[R:[a-z0-9_]+]] = arith.divf %[[ONE]], %[[S]] : f32
// CHECK-NEXT: %[[Q:[a-z0-9_]+]] = arith.mulf %[[XF]], %[[R]] : f32
// CHECK-NEXT: %[[NQ:[a-z0-9_]+]] = arith.negf %[[Q]] : f32
// CHECK-NEXT: %[[REM:[a-z0-9_]+]] = math.fma %[[NQ]], %[[S]], %[[XF]] : f32
// CHECK-NEXT: %[[Q1:[a-z0-9_]+]] = math.fma %[[REM]], %[[R]], %[[Q]] : f32
// CHECK: arith.cmpf uno, %[[Q1]], %[[Q1]] : f32
// CHECK: %[[E:[a-z0-9_]+]] = arith.select %{{[a-z0-9_]+}}, %[[Q]], %[[Q1]] : f32
// CHECK-NEXT: arith.truncf %[[E]] : f32 to bf16
func.func @by_row_sum(%x: tensor<?x?xbf16>, %s: tensor<?xf32>, %o: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<?x?xbf16>, tensor<?xf32>) outs(%o : tensor<?x?xbf16>) {
  ^bb0(%a: bf16, %b: f32, %out: bf16):
    %af = arith.extf %a : bf16 to f32
    %q = arith.divf %af, %b : f32
    %t = arith.truncf %q : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x?xbf16>
  return %r : tensor<?x?xbf16>
}

// CHECK-LABEL: func.func @kept(
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: arith.truncf
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: linalg.yield
// CHECK-NOT: arith.mulf
func.func @kept(%x: tensor<?x?xbf16>, %y: tensor<?x?xf32>, %s: tensor<?xf32>, %o: tensor<?x?xbf16>, %o2: tensor<?x?xf32>) -> (tensor<?x?xbf16>, tensor<?x?xf32>) {
  // the divisor varies along the row
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x?xbf16>, tensor<?x?xf32>) outs(%o : tensor<?x?xbf16>) {
  ^bb0(%a: bf16, %b: f32, %out: bf16):
    %af = arith.extf %a : bf16 to f32
    %q = arith.divf %af, %b : f32
    %t = arith.truncf %q : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x?xbf16>
  // a float32 result
  %r2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %s : tensor<?x?xf32>, tensor<?xf32>) outs(%o2 : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %q = arith.divf %a, %b : f32
    linalg.yield %q : f32
  } -> tensor<?x?xf32>
  return %r, %r2 : tensor<?x?xbf16>, tensor<?x?xf32>
}
