// The pointwise schedule on relu(x + 1), float32, dynamic shapes: one kernel whose aligned
// variant moves 4 x 128-bit vectors per thread (every load issued before the first store),
// and whose scalar variant runs where pointers or the size are not multiples of 16 bytes /
// 4 elements; the host picks the variant (and the grid) from the pointers and the size.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=SCALAR
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{schedules=false})' --emit=ptx | FileCheck %s --check-prefix=NAIVE

// PARAMS: pointwise: PointwiseParams(vector=4, unroll=4, block=256)
// PARAMS: "launches: 1"

// GPU-LABEL: func.func @mlirfuse_entry(
// GPU-DAG: %[[X:[^ ]+]] = memref.collapse_shape %arg0 {{\[\[}}0, 1]] : memref<?x?xf32> into memref<?xf32>
// GPU-DAG: %[[Y:[^ ]+]] = memref.collapse_shape %arg1 {{\[\[}}0, 1]] : memref<?x?xf32> into memref<?xf32>
// GPU: memref.extract_aligned_pointer_as_index %arg0
// GPU: memref.extract_aligned_pointer_as_index %arg1
// GPU: arith.select %[[ALIGNED:[^ ,]+]], %{{[^ ]+}}, %{{[^ ]+}} : index
// GPU: scf.if
// GPU-NEXT: gpu.launch blocks
// GPU-SAME: threads({{.*}}) in ({{[^ ]+}} = %c256,
// GPU: scf.if %[[ALIGNED]] {
// GPU-COUNT-4: vector.load %[[X]][%{{[^ ]+}}] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// GPU: arith.addf
// GPU: arith.maximumf
// GPU: vector.store %{{[^ ]+}}, %[[Y]][%{{[^ ]+}}] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// GPU: } else {
// GPU: memref.load %[[X]]
// GPU: memref.store %{{[^ ]+}}, %[[Y]]
// GPU: } {mlirfuse.schedule = "pointwise"}

// The aligned variant: four 128-bit loads in flight, then the math, then four 128-bit stores
// (LLVM 22 types vector loads as b32, not f32).
// PTX-LABEL: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// PTX-COUNT-4: ld.global.v4.{{[bf]}}32
// PTX-NOT: st.global
// PTX: max.NaN.f32
// PTX: st.global.v4.{{[bf]}}32
// PTX: st.global.v4.{{[bf]}}32
// PTX: st.global.v4.{{[bf]}}32
// PTX: st.global.v4.{{[bf]}}32

// The scalar variant (and the last block's tail): one element at a time.
// SCALAR-LABEL: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// SCALAR: ld.global.{{[bf]}}32 {{[^{]+}}]
// SCALAR: st.global.{{[bf]}}32 {{[^{]+}}

// The naive path (one element per thread) has no vector access:
// NAIVE-LABEL: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// NAIVE-NOT: .v4.
// NAIVE: ret;

func.func @fusion(%arg0: tensor<?x?xf32>) -> (tensor<?x?xf32>) {
  %t2 = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
  %d0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %t3 = "fusion.broadcast_in_dim"(%t2, %d0, %d1) {broadcast_dims = array<i64>, shape = array<i64: -1, -1>} : (tensor<f32>, index, index) -> tensor<?x?xf32>
  %t4 = "fusion.add"(%arg0, %t3) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t5 = "fusion.relu"(%t4) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %t5 : tensor<?x?xf32>
}
