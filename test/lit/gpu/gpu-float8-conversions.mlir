// gpu-float8-conversions: float8 casts (arith.extf / arith.truncf through float32, as
// fusion-to-linalg{target=gpu} leaves them). In a kernel on sm_90: PTX cvt (f8x2 -> f16x2 then
// an exact extf; f32x2 -> f8x2, round to nearest even, satfinite, the value in the low byte),
// e5m2's saturated overflow made infinite (|x| >= 61440). In host code, and on sm_80 anywhere:
// the integer code on the bits. No float8 extf/truncf is left.
// RUN: mlirfuse-opt --pass-pipeline='builtin.module(gpu-float8-conversions{arch=sm_90})' %s | FileCheck %s
// RUN: mlirfuse-opt --pass-pipeline='builtin.module(gpu-float8-conversions{arch=sm_80})' %s | FileCheck %s --check-prefix=SM80

// CHECK-LABEL: func.func @casts
// CHECK: gpu.launch
// CHECK: %[[B:.+]] = arith.bitcast %{{.+}} : f8E4M3FN to i8
// CHECK: %[[V:.+]] = vector.from_elements %[[B]], %[[B]] : vector<2xi8>
// CHECK: %[[H:.+]] = nvvm.convert.f8x2.to.f16x2 %[[V]] : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK: %[[E:.+]] = vector.extract %[[H]][0]
// CHECK: arith.extf %[[E]] : f16 to f32
// CHECK: %[[P:.+]] = nvvm.convert.f32x2.to.f8x2 %{{.+}}, %{{.+}} {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : i16(f8E4M3FN)
// CHECK: arith.trunci %[[P]] : i16 to i8
// CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E5M2)
// CHECK: arith.cmpf oge, %{{.+}}, %{{.+}} : f32
// CHECK: arith.select
// CHECK: gpu.terminator
// CHECK-NOT: nvvm.convert
// CHECK: math.roundeven
// CHECK-NOT: arith.truncf {{.*}} to f8
// CHECK: return
// SM80-LABEL: func.func @casts
// SM80-NOT: nvvm.convert
// SM80-NOT: arith.truncf {{.*}} to f8
// SM80: return
func.func @casts(%a: memref<4xf8E4M3FN>, %b: memref<4xf32>, %c: memref<4xf8E4M3FN>, %d: memref<4xf8E5M2>,
                 %h: f32) -> f8E5M2 {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = memref.load %a[%tx] : memref<4xf8E4M3FN>
    %w = arith.extf %x : f8E4M3FN to f32
    memref.store %w, %b[%tx] : memref<4xf32>
    %n = arith.truncf %w : f32 to f8E4M3FN
    memref.store %n, %c[%tx] : memref<4xf8E4M3FN>
    %m = arith.truncf %w : f32 to f8E5M2
    memref.store %m, %d[%tx] : memref<4xf8E5M2>
    gpu.terminator
  }
  %host = arith.truncf %h : f32 to f8E5M2
  return %host : f8E5M2
}

// Canonicalization folds truncf(extf(x)) and extf(extf(x)): a bf16 source and f16/f64 results
// meet the float8 conversion directly; they go through float32 (exact for all of them).
// CHECK-LABEL: func.func @folded
// CHECK: %[[W:.+]] = arith.extf %{{.+}} : bf16 to f32
// CHECK: nvvm.convert.f32x2.to.f8x2 %{{.+}}, %[[W]] {{.*}} : i16(f8E4M3FN)
// CHECK: %[[H:.+]] = nvvm.convert.f8x2.to.f16x2
// CHECK: %[[E:.+]] = arith.extf %{{.+}} : f16 to f32
// CHECK: arith.truncf %[[E]] : f32 to f16
// CHECK: nvvm.convert.f8x2.to.f16x2
// CHECK: %[[F:.+]] = arith.extf %{{.+}} : f16 to f32
// CHECK: arith.extf %[[F]] : f32 to f64
// CHECK-NOT: arith.truncf {{.*}} to f8
// SM80-LABEL: func.func @folded
// SM80-NOT: arith.truncf {{.*}} to f8
// SM80-NOT: arith.extf %{{.+}} : f8
// SM80: return
func.func @folded(%a: memref<4xbf16>, %c: memref<4xf8E4M3FN>, %h: memref<4xf16>, %d: memref<4xf64>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = memref.load %a[%tx] : memref<4xbf16>
    %n = arith.truncf %x : bf16 to f8E4M3FN
    memref.store %n, %c[%tx] : memref<4xf8E4M3FN>
    %y = arith.extf %n : f8E4M3FN to f16
    memref.store %y, %h[%tx] : memref<4xf16>
    %z = arith.extf %n : f8E4M3FN to f64
    memref.store %z, %d[%tx] : memref<4xf64>
    gpu.terminator
  }
  return
}
