// The GPU path's passes one at a time, each on the IR the stage before it leaves (made by
// mlirfuse-gpu-pipeline{stop=...}): x * s (x strided, s a runtime scalar) and its full sum.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=linalg})' | mlirfuse-opt --pass-pipeline='builtin.module(entry-point)' | FileCheck %s --check-prefix=ENTRY
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=linalg})' | mlirfuse-opt --pass-pipeline='builtin.module(entry-point, inline, symbol-dce, canonicalize, cse)' | FileCheck %s --check-prefix=BEFORE-SCALARS
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=linalg})' | mlirfuse-opt --pass-pipeline='builtin.module(entry-point, inline, symbol-dce, canonicalize, cse, inline-scalar-operands)' | FileCheck %s --check-prefix=SCALARS
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=inlined})' | mlirfuse-opt --pass-pipeline='builtin.module(output-views-in-place, constant-outputs-as-fills, resolve-shaped-type-result-dims, canonicalize, linalg-unshare-inits, eliminate-empty-tensors, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, gpu-unit-loops)' | FileCheck %s --check-prefix=UNIT
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | mlirfuse-opt --pass-pipeline='builtin.module(gpu-kernel-outlining)' | FileCheck %s --check-prefix=OUTLINED
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | mlirfuse-opt --pass-pipeline='builtin.module(gpu-kernel-outlining, gpu-merge-kernel-modules)' | FileCheck %s --check-prefix=MERGED
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' | FileCheck %s --check-prefix=HOST
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(gpu-unit-loops)' 2>&1 | FileCheck %s --check-prefix=NO-ENTRY

// entry-point: destination passing; the strided input a strided memref, the scalar by value.
// ENTRY: func.func private @fusion(
// ENTRY: func.func @mlirfuse_entry(%arg0: memref<?x?xf32, strided<[?, ?], offset: ?>>, %arg1: f32, %arg2: memref<?x?xf32>, %arg3: memref<f32>) attributes {llvm.emit_c_interface}
// ENTRY: %{{[^ ]+}} = bufferization.to_tensor %arg0 restrict
// ENTRY: %[[S:[^ ]+]] = tensor.from_elements %arg1 : tensor<f32>
// ENTRY: %[[R:[^ ]+]]:2 = call @fusion(%{{[^ ]+}}, %[[S]])
// ENTRY: bufferization.materialize_in_destination %[[R]]#0 in restrict writable %arg2
// ENTRY: bufferization.materialize_in_destination %[[R]]#1 in restrict writable %arg3

// inline-scalar-operands: the product reads the scalar as a value, not a 0-d tensor input.
// BEFORE-SCALARS: linalg.generic {{.*}} ins(%{{[^ ]+}}, %{{[^ ]+}} : tensor<?x?xf32>, tensor<f32>)
// SCALARS: linalg.generic {{.*}} ins(%{{[^ ]+}} : tensor<?x?xf32>)
// SCALARS: arith.mulf %{{[^ ]+}}, %arg1 : f32

// gpu-unit-loops: the full sum gets a unit parallel loop in front of its reductions.
// UNIT: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// UNIT: linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "reduction"]{{.*}} outs(%{{[^ ]+}} : memref<1xf32>)

// gpu-kernel-outlining makes a gpu.module per launch (the product; the sum, its fill folded
// in, its chunks combined by each row's last block); then gpu-merge-kernel-modules one for all.
// OUTLINED-COUNT-2: gpu.module @
// MERGED: gpu.launch_func @mlirfuse_entry_kernel::@mlirfuse_entry_kernel_0
// MERGED: gpu.launch_func @mlirfuse_entry_kernel::@mlirfuse_entry_kernel_1
// MERGED: gpu.module @mlirfuse_entry_kernel {
// MERGED-COUNT-2: gpu.func @mlirfuse_entry_kernel_{{[0-1]}}(
// MERGED-NOT: gpu.module

// gpu-host-overrides: the runtime's stream and allocation entry points are the caller's;
// kernels are looked up in a table first, the driver asked only on a miss.
// HOST: llvm.func @mgpuStreamCreate()
// HOST: llvm.func @mgpuMemAlloc(
// HOST: llvm.mlir.global internal @mlirfuse_functions()
// HOST: llvm.func @mgpuModuleGetFunction(
// HOST: llvm.cond_br %{{[^ ]+}}, ^[[HIT:[a-z0-9]+]], ^[[MISS:[a-z0-9]+]]
// HOST: ^[[MISS]]:
// HOST: llvm.call @cuModuleGetFunction(

// NO-ENTRY: error: pipeline failed: gpu-unit-loops: no @mlirfuse_entry function (this pass runs after entry-point)

func.func @fusion(%arg0: tensor<?x?xf32>, %arg1: tensor<f32>) -> (tensor<?x?xf32>, tensor<f32>) attributes {mlirfuse.inputs = ["strided", "scalar"]} {
  %d0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %s = "fusion.broadcast_in_dim"(%arg1, %d0, %d1) {shape = array<i64: -1, -1>, broadcast_dims = array<i64>} : (tensor<f32>, index, index) -> tensor<?x?xf32>
  %m = "fusion.mul"(%arg0, %s) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t = "fusion.sum"(%m) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<?x?xf32>) -> tensor<f32>
  return %m, %t : tensor<?x?xf32>, tensor<f32>
}
