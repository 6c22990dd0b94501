// gpu-schedule on the GPU path's bufferized entry point: every linalg op that becomes a
// kernel gets its schedule as data (`mlirfuse.schedule`): relu(x + 1) is pointwise, 16-byte
// vectors of f32 (4) and of f64 (2); a row sum is an inner reduction with its row tiers; a
// schedule written by hand is kept as it is.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(gpu-schedule{arch=sm_90})' | FileCheck %s
// An A100 (108 SMs) cuts few long rows into chunks for 2 x 108 blocks instead of 2 x 132:
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(gpu-schedule{arch=sm_80})' | FileCheck %s --check-prefix=SM80
// SM80: kind = "inner_reduction", min_chunk = 32768 : i64, split_blocks = 216 : i64

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// CHECK-LABEL: func.func @mlirfuse_entry(
// CHECK: linalg.generic {{.*}} attrs = {mlirfuse.schedule = {block = 256 : i64, kind = "pointwise", unroll = 4 : i64, vector = 4 : i64}}
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}} attrs = {mlirfuse.schedule = {block = 256 : i64, kind = "pointwise", unroll = 4 : i64, vector = 2 : i64}}
// CHECK: linalg.generic {{.*}} attrs = {mlirfuse.schedule = {block = 512 : i64, kind = "inner_reduction", min_chunk = 32768 : i64, split_blocks = 264 : i64, tiers = [{max_row = 16 : i64, threads = 1 : i64}, {max_row = 32 : i64, threads = 2 : i64},
// CHECK-SAME: {threads = 512 : i64}], unroll = 4 : i64, vector = 4 : i64}}
// CHECK: linalg.generic {{.*}} attrs = {mlirfuse.schedule = {block = 128 : i64, kind = "pointwise", unroll = 1 : i64, vector = 2 : i64}}
func.func @mlirfuse_entry(%x: memref<?x?xf32>, %y: memref<?x?xf32>, %a: memref<?x?xf64>, %b: memref<?x?xf64>,
                          %s: memref<?xf32>, %w: memref<?x?xf32>, %z: memref<?x?xf32>) attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %one64 = arith.constant 1.000000e+00 : f64
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %one : f32
    %1 = arith.maximumf %0, %zero : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : memref<?x?xf64>) outs(%b : memref<?x?xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.addf %in, %one64 : f64
    linalg.yield %0 : f64
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %in, %acc : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : memref<?x?xf32>) outs(%z : memref<?x?xf32>) attrs = {mlirfuse.schedule = {block = 128 : i64, kind = "pointwise", unroll = 1 : i64, vector = 2 : i64}} {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  return
}
