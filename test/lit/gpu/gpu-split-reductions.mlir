// gpu-split-reductions: a sum over (0, 2, 3) of [N, C, H, W] (BatchNorm's statistics) keeps C
// between reduced dims, which no schedule reads in one kernel; it becomes a reduction over
// the trailing H, W into partials [N, C] (starting from the identity), then one over N into
// the output. A reduction the schedules take as it is (a column sum) is left alone. A sum
// over (0, 2) of [A, B, C, D] keeps B and D: first over C (a batched column reduction, D
// innermost) into partials [A, B, D], then over A (a column reduction) into [B, D].
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(gpu-split-reductions)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(gpu-split-reductions, gpu-schedule{arch=sm_90})' | FileCheck %s --check-prefix=SCHED

// CHECK-LABEL: func.func @mlirfuse_entry(
// CHECK: %[[P:.+]] = memref.alloc({{.*}}) : memref<?x?xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel"{{.*}}ins(%{{.+}} : f32) outs(%[[P]] : memref<?x?xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "reduction"]{{.*}}outs(%[[P]] : memref<?x?xf32>)
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}}ins(%[[P]] : memref<?x?xf32>) outs(%arg1 : memref<?xf32>)
// CHECK: memref.dealloc %[[P]]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}}ins(%arg2 : memref<?x?xf32>)
// CHECK: %[[Q:.+]] = memref.alloc({{.*}}) : memref<?x?x?xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "parallel"]{{.*}}outs(%[[Q]] : memref<?x?x?xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]{{.*}}ins(%[[Q]] : memref<?x?x?xf32>) outs(%arg5 : memref<?x?xf32>)
// SCHED: kind = "inner_reduction"
// SCHED: kind = "column_reduction"
// SCHED: kind = "column_reduction"
// SCHED: kind = "column_reduction"
// SCHED: kind = "column_reduction"
// SCHED-NOT: kind = "naive"
#nchw = affine_map<(c, n, h, w) -> (n, c, h, w)>
#chan = affine_map<(c, n, h, w) -> (c)>
func.func @mlirfuse_entry(%x: memref<?x?x?x?xf32>, %out: memref<?xf32>, %y: memref<?x?xf32>, %col: memref<?xf32>,
                          %z: memref<?x?x?x?xf32>, %bd: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#nchw, #chan], iterator_types = ["parallel", "reduction", "reduction", "reduction"]}
      ins(%x : memref<?x?x?x?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(c, r) -> (r, c)>, affine_map<(c, r) -> (c)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<?x?xf32>) outs(%col : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(b, d, a, c) -> (a, b, c, d)>, affine_map<(b, d, a, c) -> (b, d)>],
                  iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%z : memref<?x?x?x?xf32>) outs(%bd : memref<?x?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

