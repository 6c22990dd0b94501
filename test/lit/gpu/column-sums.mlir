// A LayerNorm backward over rows of 768 (g, x_hat, w, rstd -> dx; dw and db are column sums
// over the rows of the g and x_hat the chain reads): gpu-apply-schedules gives the chain's held
// kernel the column sums (its blocks loop over the row groups, scf.for from the block's index
// by the grid; a block's partials a row of each workspace), then the held kernel without them
// and the looping variant as alternatives; after them, under the host's `column-sums` branch,
// the column reduction combining the partials, else the sums' own column reduction.
// RUN: mlirfuse-opt --pass-pipeline='builtin.module(gpu-schedule, gpu-apply-schedules)' %s | FileCheck %s
// Every buffer the kernels use is device memory, those the branches allocate too:
// RUN: mlirfuse-opt --pass-pipeline='builtin.module(gpu-schedule, gpu-apply-schedules, gpu-pack-launches, func.func(convert-linalg-to-parallel-loops), gpu-loops-to-launches)' %s | FileCheck %s --check-prefix=DEVICE
// DEVICE-NOT: memref.alloc
// DEVICE: gpu.alloc
// DEVICE-NOT: memref.alloc
// DEVICE: "column-sums"
// DEVICE-NOT: memref.alloc

// CHECK: mlirfuse.schedule_notes = [{{.*}}with the column sums of 1 column reduction: blocks loop over the rows{{.*}}, "normalization: rows held, without the column sums (a grid of fewer row groups)", "normalization: the looping variant{{[^"]*}}", "column reduction: {{.*}}; of the column sums' partials", "column reduction: {{.*}}; the column sum apart, where rows are not held"]}
// CHECK: %[[WS0:.+]] = memref.alloc({{.*}}) : memref<?x?xf32>
// CHECK: %[[WS1:.+]] = memref.alloc({{.*}}) : memref<?x?xf32>
// CHECK: gpu.launch blocks(%[[BX:[^,]+]],
// CHECK-SAME: in (%[[GRID:[^ ]+]] = {{[^ ]+}}
// CHECK: scf.for %{{[^ ]+}} = %[[BX]] to %{{[^ ]+}} step %[[GRID]] iter_args(
// CHECK: gpu.barrier
// CHECK: vector.store %{{[^ ]+}}, %[[WS0]][
// CHECK: vector.store %{{[^ ]+}}, %[[WS1]][
// CHECK: } {mlirfuse.schedule = "normalization"}
// CHECK: } {mlirfuse.alternative, mlirfuse.schedule = "normalization"}
// CHECK: } {mlirfuse.alternative, mlirfuse.schedule = "normalization"}
// CHECK: scf.if
// CHECK: gpu.launch
// CHECK: } {mlirfuse.schedule = "column-reduction"}
// CHECK: } else {
// CHECK: gpu.launch
// CHECK: } {mlirfuse.alternative, mlirfuse.schedule = "column-reduction"}
// CHECK: } {mlirfuse.schedule = "column-sums"}
// CHECK-NEXT: memref.dealloc %[[WS0]]
// CHECK-NEXT: memref.dealloc %[[WS1]]
// CHECK-NOT: linalg.generic

#tile = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
#row1 = affine_map<(d0, d1) -> (d0, 0)>
#down = affine_map<(d0, d1) -> (d1, d0)>
#none = affine_map<(d0) -> ()>
#one = affine_map<(d0) -> (d0)>
func.func @mlirfuse_entry(%g: memref<?x768xf32>, %xhat: memref<?x768xf32>, %w: memref<768xf32>, %rstd: memref<?x1xf32>,
                          %dx: memref<?x768xf32>, %dw: memref<768xf32>, %db: memref<768xf32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.000000e+00 : f32
  %inv = arith.constant 0.00130208337 : f32
  %n = memref.dim %g, %c0 : memref<?x768xf32>
  %s1 = memref.alloc(%n) : memref<?xf32>
  %s2 = memref.alloc(%n) : memref<?xf32>
  linalg.generic {indexing_maps = [#none, #one], iterator_types = ["parallel"]} ins(%zero : f32) outs(%s1 : memref<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#none, #one], iterator_types = ["parallel"]} ins(%zero : f32) outs(%s2 : memref<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#tile, #col, #row], iterator_types = ["parallel", "reduction"]} ins(%g, %w : memref<?x768xf32>, memref<768xf32>) outs(%s1 : memref<?xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.addf %out, %0 fastmath<reassoc> : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#tile, #col, #tile, #row], iterator_types = ["parallel", "reduction"]} ins(%g, %w, %xhat : memref<?x768xf32>, memref<768xf32>, memref<?x768xf32>) outs(%s2 : memref<?xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %out: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.mulf %0, %c : f32
    %2 = arith.addf %out, %1 fastmath<reassoc> : f32
    linalg.yield %2 : f32
  }
  linalg.generic {indexing_maps = [#none, #one], iterator_types = ["parallel"]} ins(%zero : f32) outs(%dw : memref<768xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#none, #one], iterator_types = ["parallel"]} ins(%zero : f32) outs(%db : memref<768xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#down, #down, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%g, %xhat : memref<?x768xf32>, memref<?x768xf32>) outs(%dw, %db : memref<768xf32>, memref<768xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32, %out2: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.addf %out, %0 fastmath<reassoc> : f32
    %2 = arith.addf %out2, %a fastmath<reassoc> : f32
    linalg.yield %1, %2 : f32, f32
  }
  linalg.generic {indexing_maps = [#tile, #col, #row, #tile, #row, #row1, #tile], iterator_types = ["parallel", "parallel"]} ins(%g, %w, %s1, %xhat, %s2, %rstd : memref<?x768xf32>, memref<768xf32>, memref<?xf32>, memref<?x768xf32>, memref<?xf32>, memref<?x1xf32>) outs(%dx : memref<?x768xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %d: f32, %e: f32, %r: f32, %out: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.mulf %c, %inv : f32
    %2 = arith.subf %0, %1 : f32
    %3 = arith.mulf %e, %inv : f32
    %4 = arith.mulf %d, %3 : f32
    %5 = arith.subf %2, %4 : f32
    %6 = arith.mulf %5, %r : f32
    linalg.yield %6 : f32
  }
  memref.dealloc %s1 : memref<?xf32>
  memref.dealloc %s2 : memref<?xf32>
  return
}
