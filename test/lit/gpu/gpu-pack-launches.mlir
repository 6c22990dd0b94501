// gpu-pack-launches: independent pointwise kernels in one launch. Two casts of different
// shapes (autocast's weight casts) and y = x * 2 become one launch whose grid is the sum of
// theirs, each kernel running on its range of blocks (block id minus the range's start) and
// on the threads it was launched with; the cast of y reads what that launch writes, so it
// stays a launch of its own.
// RUN: mlirfuse-opt --pass-pipeline='builtin.module(gpu-schedule, gpu-apply-schedules, gpu-pack-launches)' %s | FileCheck %s

// CHECK: mlirfuse.schedule_notes = ["pointwise: 3 kernels packed in one launch: {{[^"]*}}", "pointwise: {{[^"]*}}"]
// CHECK-LABEL: func.func @mlirfuse_entry
// CHECK: %[[A:.+]] = arith.select %{{.+}}, %{{.+}}, %[[ZERO:c0[_0-9]*]] : index
// CHECK: %[[END_A:.+]] = arith.addi %[[ZERO]], %[[A]]
// CHECK: %[[B:.+]] = arith.select %{{.+}}, %{{.+}}, %[[ZERO]] : index
// CHECK: %[[END_B:.+]] = arith.addi %[[END_A]], %[[B]]
// CHECK: %[[C:.+]] = arith.select %{{.+}}, %{{.+}}, %[[ZERO]] : index
// CHECK: %[[END_C:.+]] = arith.addi %[[END_B]], %[[C]]
// CHECK: gpu.launch blocks(%[[BX:[^,]+]], {{.*}} in ({{[^ ]+}} = %[[END_C]],
// CHECK: arith.cmpi uge, %[[BX]], %[[ZERO]]
// CHECK: arith.cmpi ult, %[[BX]], %[[END_A]]
// CHECK: arith.subi %[[BX]], %[[ZERO]]
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: arith.cmpi uge, %[[BX]], %[[END_A]]
// CHECK: arith.cmpi ult, %[[BX]], %[[END_B]]
// CHECK: arith.subi %[[BX]], %[[END_A]]
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: arith.cmpi uge, %[[BX]], %[[END_B]]
// CHECK: arith.cmpi ult, %[[BX]], %[[END_C]]
// CHECK: arith.subi %[[BX]], %[[END_B]]
// CHECK: arith.mulf
// CHECK: } {mlirfuse.packed = 3 : i64, mlirfuse.schedule = "pointwise"}
// CHECK: gpu.launch
// CHECK: arith.truncf
// CHECK-NOT: gpu.launch

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @mlirfuse_entry(%a: memref<?x?xf32>, %b: memref<?xf32>, %x: memref<?xf32>, %a16: memref<?x?xbf16>,
                          %b16: memref<?xbf16>, %y: memref<?xf32>, %y16: memref<?xbf16>) attributes {llvm.emit_c_interface} {
  %two = arith.constant 2.000000e+00 : f32
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%a : memref<?x?xf32>) outs(%a16 : memref<?x?xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  }
  linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%b : memref<?xf32>) outs(%b16 : memref<?xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  }
  linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%x : memref<?xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %two : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%y : memref<?xf32>) outs(%y16 : memref<?xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  }
  return
}
