// The transpose schedule on x.permute(1, 0) * 2 (float32, dynamic shapes): four 32 x 32
// squares per block of 256 threads, 64 a square; each permuted input's square goes through
// shared memory (33 floats a row: padded against bank conflicts), read along its contiguous
// dim with 128-bit loads (a thread's four loads first, at indices clamped inside the extents,
// then its shared stores) and written along the output's contiguous dim with 128-bit stores;
// a barrier between the phases.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{schedules=false})' --emit=ptx | FileCheck %s --check-prefix=NAIVE

// PARAMS: blockDim=(256, 1, 1): transpose: TransposeParams(vector=4, tile=32, block=256, squares=4)
// PARAMS: "launches: 1"

// GPU-LABEL: func.func @mlirfuse_entry(
// GPU: gpu.launch blocks
// GPU-SAME: workgroup(%[[TILE:[^ ]+]] : memref<4224xf32, #gpu.address_space<workgroup>>)
// GPU: scf.if
// GPU-COUNT-4: vector.load %arg0[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// GPU-NOT: scf.if
// GPU-COUNT-16: memref.store %{{[^ ]+}}, %[[TILE]]
// GPU: gpu.barrier
// GPU: scf.if
// GPU-COUNT-4: memref.load %[[TILE]]
// GPU: vector.store %{{[^ ]+}}, %arg1[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// GPU: } else {
// GPU: memref.load %arg0
// GPU: gpu.barrier
// GPU: memref.store %{{[^ ]+}}, %arg1
// GPU: } {mlirfuse.schedule = "transpose"}

// PTX-LABEL: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// PTX: .shared .align 4 .b8 {{[^ ]+}}[16896];
// PTX-COUNT-4: ld.global.v4.{{[bf]}}32
// PTX: st.shared.{{[bf]}}32
// PTX: bar.sync
// PTX-COUNT-4: ld.shared.{{[bf]}}32
// x * 2 (or x + x):
// PTX: {{mul|add}}{{(\.rn)?}}.f32
// PTX: st.global.v4.{{[bf]}}32

// Without schedules: no shared memory, no vectors.
// NAIVE-NOT: .shared
// NAIVE-NOT: ld.global.v4

func.func @fusion(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %t = "fusion.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %two = "fusion.constant"() {value = 2.0 : f64} : () -> tensor<f32>
  %d0 = "fusion.size"(%t) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%t) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %b = "fusion.broadcast_in_dim"(%two, %d0, %d1) {broadcast_dims = array<i64>, shape = array<i64: -1, -1>} : (tensor<f32>, index, index) -> tensor<?x?xf32>
  %y = "fusion.mul"(%t, %b) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
