// math-expand-constant-powers: powf with a constant exponent in {0, 1, 2, 3, 4, -1} becomes
// multiplications (one division for -1); other exponents, and runtime ones, keep powf.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(math-expand-constant-powers, canonicalize)' | FileCheck %s

// CHECK-LABEL: func.func @cube(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: f32
// CHECK: %[[SQ:[a-z0-9_]+]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK-NEXT: %[[CUBE:[a-z0-9_]+]] = arith.mulf %[[SQ]], %[[X]] : f32
// CHECK-NEXT: return %[[CUBE]]
func.func @cube(%x: f32) -> f32 {
  %c = arith.constant 3.0 : f32
  %r = math.powf %x, %c : f32
  return %r : f32
}

// CHECK-LABEL: func.func @in_a_generic(
// CHECK: ^bb0(%[[IN:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[SQ:[a-z0-9_]+]] = arith.mulf %[[IN]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[SQ]]
// CHECK-NOT: math.powf
func.func @in_a_generic(%t: tensor<?xf32>) -> tensor<?xf32> {
  %two = arith.constant 2.0 : f32
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%t : tensor<?xf32>) outs(%t : tensor<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %p = math.powf %in, %two : f32
    linalg.yield %p : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// CHECK-LABEL: func.func @others(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: f64
// CHECK-DAG: %[[ONE:[a-z0-9_]+]] = arith.constant 1.000000e+00 : f64
// CHECK-DAG: %[[SQ:[a-z0-9_]+]] = arith.mulf %[[X]], %[[X]] : f64
// CHECK-DAG: %[[FOURTH:[a-z0-9_]+]] = arith.mulf %[[SQ]], %[[SQ]] : f64
// CHECK-DAG: %[[RECIP:[a-z0-9_]+]] = arith.divf %{{.*}}, %[[X]] : f64
// CHECK-DAG: %[[HALF:[a-z0-9_]+]] = math.powf %[[X]], %{{.*}} : f64
// CHECK-DAG: %[[RUNTIME:[a-z0-9_]+]] = math.powf %[[X]], %arg1 : f64
// CHECK: return %[[ONE]], %[[X]], %[[FOURTH]], %[[RECIP]], %[[HALF]], %[[RUNTIME]]
func.func @others(%x: f64, %y: f64) -> (f64, f64, f64, f64, f64, f64) {
  %c0 = arith.constant 0.0 : f64
  %c1 = arith.constant 1.0 : f64
  %c4 = arith.constant 4.0 : f64
  %cm1 = arith.constant -1.0 : f64
  %ch = arith.constant 0.5 : f64
  %p0 = math.powf %x, %c0 : f64
  %p1 = math.powf %x, %c1 : f64
  %p4 = math.powf %x, %c4 : f64
  %pm1 = math.powf %x, %cm1 : f64
  %ph = math.powf %x, %ch : f64
  %py = math.powf %x, %y : f64
  return %p0, %p1, %p4, %pm1, %ph, %py : f64, f64, f64, f64, f64, f64
}
