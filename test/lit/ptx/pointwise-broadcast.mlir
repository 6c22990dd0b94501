// The pointwise schedule with broadcasts, bfloat16: (x + b) * r with x[?, ?], a row vector
// b[?] and a column r[?, 1]. x and b are read 8 elements (16 bytes) at a time, b at the
// column of the vector; r once per vector (its value is the same along the row). The
// vector variant needs the inner extent to be a multiple of 8 and x, b and the output
// 16-byte aligned; r's alignment does not matter.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX

// PARAMS: pointwise: PointwiseParams(vector=8, unroll=4, block=256)
// PARAMS: "launches: 1"

// GPU-LABEL: func.func @mlirfuse_entry(
// GPU-SAME: %arg0: memref<?x?xbf16>, %arg1: memref<?xbf16>, %arg2: memref<?x1xbf16>, %arg3: memref<?x?xbf16>
// GPU: %[[INNER:[^ ]+]] = memref.dim %arg0, %c1
// GPU: arith.remui %[[INNER]], %c8
// GPU: memref.extract_aligned_pointer_as_index %arg0
// GPU: memref.extract_aligned_pointer_as_index %arg1
// GPU-NOT: memref.extract_aligned_pointer_as_index %arg2
// GPU: memref.extract_aligned_pointer_as_index %arg3
// GPU: gpu.launch blocks
// GPU: vector.load %{{[^ ]+}}[%{{[^ ]+}}] {alignment = 16 : i64} : memref<?xbf16>, vector<8xbf16>
// GPU: vector.load %arg1[%[[COL:[^ ]+]]] {alignment = 16 : i64} : memref<?xbf16>, vector<8xbf16>
// GPU: memref.load %arg2[%{{[^ ]+}}, %c0{{[_0-9]*}}] : memref<?x1xbf16>
// GPU: vector.store %{{[^ ]+}}, %{{[^ ]+}}[%{{[^ ]+}}] {alignment = 16 : i64} : memref<?xbf16>, vector<8xbf16>
// GPU: } {mlirfuse.schedule = "pointwise"}

// 16-bit vectors load as four 32-bit words each:
// PTX-LABEL: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// PTX: ld.global.v4.b32
// PTX: st.global.v4.b32

func.func @fusion(%arg0: tensor<?x?xbf16>, %arg1: tensor<?xbf16>, %arg2: tensor<?x1xbf16>) -> (tensor<?x?xbf16>) {
  %d0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xbf16>) -> index
  %d1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xbf16>) -> index
  %t4 = "fusion.broadcast_in_dim"(%arg1, %d0, %d1) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, -1>} : (tensor<?xbf16>, index, index) -> tensor<?x?xbf16>
  %t5 = "fusion.add"(%arg0, %t4) : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  %t6 = "fusion.broadcast_in_dim"(%arg2, %d0, %d1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xbf16>, index, index) -> tensor<?x?xbf16>
  %t7 = "fusion.mul"(%t5, %t6) : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %t7 : tensor<?x?xbf16>
}
