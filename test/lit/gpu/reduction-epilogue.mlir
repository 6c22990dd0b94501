// A reduction's pointwise epilogue: mean(x, -1) is a row sum, then a division of each row's
// total by the row length. gpu-apply-schedules gives the reduction's kernel the division:
// the thread writing a row's total divides it and stores the mean (one launch, no generic
// left). With the division's schedule edited to naive, it is not folded.
// RUN: sed -e 's/ attrs = {mlirfuse.schedule = HAND}//' %s | mlirfuse-opt --pass-pipeline='builtin.module(gpu-schedule, gpu-apply-schedules)' | FileCheck %s
// RUN: sed -e 's/HAND/{kind = "naive", reason = "by hand"}/' %s | mlirfuse-opt --pass-pipeline='builtin.module(gpu-schedule, gpu-apply-schedules)' | FileCheck %s --check-prefix=NAIVE

// CHECK-LABEL: func.func @mlirfuse_entry(
// CHECK-COUNT-1: gpu.launch blocks
// CHECK: gpu.shuffle xor
// CHECK: memref.store %[[TOTAL:[0-9]+]], %alloc[%{{.+}}] : memref<?xf32>
// CHECK-NEXT: %[[MEAN:.+]] = arith.divf %[[TOTAL]], %{{.+}} : f32
// CHECK-NEXT: memref.store %[[MEAN]], %arg1[%{{.+}}] : memref<?xf32>
// CHECK-NOT: gpu.launch blocks
// CHECK-NOT: linalg.generic
// CHECK: return

// NAIVE: gpu.launch blocks
// NAIVE-NOT: arith.divf
// NAIVE: linalg.generic
// NAIVE: arith.divf

#scalar = affine_map<(d0) -> ()>
#row = affine_map<(d0) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#kept = affine_map<(d0, d1) -> (d0)>
func.func @mlirfuse_entry(%x: memref<?x?xf32>, %mean: memref<?xf32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.000000e+00 : f32
  %len = memref.dim %x, %c1 : memref<?x?xf32>
  %len_i = arith.index_cast %len : index to i64
  %n = arith.sitofp %len_i : i64 to f32
  %rows = memref.dim %x, %c0 : memref<?x?xf32>
  %sum = memref.alloc(%rows) {alignment = 64 : i64} : memref<?xf32>
  linalg.generic {indexing_maps = [#scalar, #row], iterator_types = ["parallel"]} ins(%zero : f32) outs(%sum : memref<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #kept], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x?xf32>) outs(%sum : memref<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in fastmath<reassoc> : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#row, #row], iterator_types = ["parallel"]} ins(%sum : memref<?xf32>) outs(%mean : memref<?xf32>) attrs = {mlirfuse.schedule = HAND} {
  ^bb0(%in: f32, %out: f32):
    %m = arith.divf %in, %n : f32
    linalg.yield %m : f32
  }
  memref.dealloc %sum : memref<?xf32>
  return
}
