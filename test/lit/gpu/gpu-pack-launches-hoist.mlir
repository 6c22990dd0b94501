// gpu-pack-launches moves a pointwise launch up to an earlier one it can be packed with, past
// launches it is independent of: y * 3 (reading neither what the row sum writes nor what it
// reads) joins z * 2 before the row sum of x; y + s (s broadcast along the rows) reads the
// row sum's result, so it stays after it.
// RUN: mlirfuse-opt --pass-pipeline='builtin.module(gpu-schedule, gpu-apply-schedules, gpu-pack-launches)' %s | FileCheck %s

// CHECK: mlirfuse.schedule_notes = ["pointwise: 2 kernels packed in one launch: {{[^"]*}}", "inner reduction: {{[^"]*}}", "pointwise: {{[^"]*}}"]
// CHECK-LABEL: func.func @mlirfuse_entry
// CHECK: gpu.launch
// CHECK: arith.mulf %{{.+}}, %cst
// CHECK: arith.mulf %{{.+}}, %cst_0
// CHECK: } {mlirfuse.packed = 2 : i64, mlirfuse.schedule = "pointwise"}
// CHECK: gpu.launch
// CHECK: gpu.shuffle
// CHECK: } {mlirfuse.schedule = "inner-reduction"}
// CHECK: gpu.launch
// CHECK: arith.addf
// CHECK: } {mlirfuse.schedule = "pointwise"}
// CHECK-NOT: gpu.launch

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#scalar = affine_map<(d0) -> ()>
#vec = affine_map<(d0) -> (d0)>
func.func @mlirfuse_entry(%x: memref<?x?xf32>, %y: memref<?x?xf32>, %z: memref<?xf32>, %two_z: memref<?xf32>, %s: memref<?xf32>,
                          %three_y: memref<?x?xf32>, %t: memref<?x?xf32>) attributes {llvm.emit_c_interface} {
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]} ins(%z : memref<?xf32>) outs(%two_z : memref<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %two : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#scalar, #vec], iterator_types = ["parallel"]} ins(%zero : f32) outs(%s : memref<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %out, %in : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : memref<?x?xf32>) outs(%three_y : memref<?x?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %three : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %s : memref<?x?xf32>, memref<?xf32>) outs(%t : memref<?x?xf32>) {
  ^bb0(%in: f32, %sum: f32, %out: f32):
    %a = arith.addf %in, %sum : f32
    linalg.yield %a : f32
  }
  return
}
