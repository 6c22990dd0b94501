// gpu-checks-at-kernel-end: a kernel's checks OR their failures into a private flag, and one
// cf.assert after the body tests it (CUDA's device-side assert, with no __assertfail call
// among the kernel's loads: a held-row kernel kept its row across such a call, 73 registers
// instead of 48).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(gpu-checks-at-kernel-end)' | FileCheck %s

// CHECK-LABEL: func.func @kernel(
// CHECK: gpu.launch
// CHECK: %[[FLAG:.+]] = memref.alloca() : memref<i32>
// CHECK: memref.store %{{.+}}, %[[FLAG]][]
// CHECK-NOT: cf.assert
// CHECK: %[[BAD:.+]] = arith.extui
// CHECK: %[[OLD:.+]] = memref.load %[[FLAG]][]
// CHECK: %[[NEW:.+]] = arith.ori %[[OLD]], %[[BAD]]
// CHECK: memref.store %[[NEW]], %[[FLAG]][]
// CHECK: memref.load %[[FLAG]][]
// CHECK: memref.load %[[FLAG]][]
// CHECK: %[[OK:.+]] = arith.cmpi eq
// CHECK-NEXT: cf.assert %[[OK]], "mlirfuse: gather index out of range"
// CHECK-NEXT: gpu.terminator
func.func @kernel(%x: memref<8xf32>, %i: memref<4xindex>, %out: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %j = memref.load %i[%tx] : memref<4xindex>
    %ok = arith.cmpi ult, %j, %c8 : index
    cf.assert %ok, "mlirfuse: gather index out of range"
    %v = memref.load %x[%j] : memref<8xf32>
    %k = memref.load %i[%tx] : memref<4xindex>
    %ok2 = arith.cmpi ult, %k, %c8 : index
    cf.assert %ok2, "mlirfuse: gather index out of range"
    memref.store %v, %out[%tx] : memref<4xf32>
    gpu.terminator
  }
  return
}
