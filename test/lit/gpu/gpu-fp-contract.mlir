// gpu-fp-contract: float32/float64 multiplies, adds and subtracts in kernels may fuse into
// fused multiply-adds (`contract`, beside flags they carry); ops on widened bfloat16/float16
// values (which LLVM narrows to torch's half-precision op) and host code are left alone.
// RUN: mlirfuse-opt --pass-pipeline='builtin.module(gpu-fp-contract)' %s | FileCheck %s

// CHECK-LABEL: func.func @kernel
// CHECK: gpu.launch
// CHECK: %[[P:.+]] = arith.mulf %{{.+}}, %{{.+}} fastmath<contract> : f32
// CHECK: arith.addf %[[P]], %{{.+}} fastmath<contract> : f32
// CHECK: arith.subf %{{.+}}, %{{.+}} fastmath<reassoc,contract> : f64
// CHECK: %[[H:.+]] = arith.mulf %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: arith.truncf %[[H]] : f32 to bf16
// CHECK: arith.addf %{{.+}}, %{{.+}} : bf16
// CHECK: gpu.terminator
// CHECK: arith.mulf %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: return
func.func @kernel(%a: memref<4xf32>, %b: memref<4xf64>, %c: memref<4xbf16>, %s: f32) -> f32 {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = memref.load %a[%tx] : memref<4xf32>
    %p = arith.mulf %x, %x : f32
    %q = arith.addf %p, %s : f32
    memref.store %q, %a[%tx] : memref<4xf32>
    %y = memref.load %b[%tx] : memref<4xf64>
    %d = arith.subf %y, %y fastmath<reassoc> : f64
    memref.store %d, %b[%tx] : memref<4xf64>
    %h = memref.load %c[%tx] : memref<4xbf16>
    %w = arith.extf %h : bf16 to f32
    %m = arith.mulf %w, %w : f32
    %n = arith.truncf %m : f32 to bf16
    %e = arith.addf %n, %h : bf16
    memref.store %e, %c[%tx] : memref<4xbf16>
    gpu.terminator
  }
  %r = arith.mulf %s, %s : f32
  return %r : f32
}
