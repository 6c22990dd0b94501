// mlirfuse-gpu-pipeline: fusion IR to a host module holding PTX, every stage a registered pass,
// on a machine with no GPU; --emit=ptx prints the PTX. stop= ends at a stage; schedules=false
// makes every kernel naive; a scalar input is passed by value (@fusion's mlirfuse.inputs).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{arch=sm_90})' --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{arch=sm_80})' --emit=ptx | FileCheck %s --check-prefix=SM80
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=scheduled})' | FileCheck %s --check-prefix=SCHEDULED
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu schedules=false})' | FileCheck %s --check-prefix=NAIVE
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=ptx})' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' --emit=ptx 2>&1 | FileCheck %s --check-prefix=NO-PTX

// PTX: .target sm_90
// PTX: .visible .entry mlirfuse_entry_kernel_0(
// The scalar is a kernel parameter, not a load from memory:
// PTX: .param .f32 mlirfuse_entry_kernel_0_param_{{[0-9]+}}
// PTX: ld.global.v4.b32
// PTX: mul{{(\.rn)?}}.f32
// SM80: .target sm_80

// SCHEDULED: func.func @mlirfuse_entry(%arg0: memref<?x?xf32>, %arg1: f32, %arg2: memref<?x?xf32>)
// SCHEDULED: mlirfuse.schedule = {block = 256 : i64, kind = "pointwise", unroll = 4 : i64, vector = 4 : i64}

// NAIVE: mlirfuse.launch_params = ["launch 0 gridDim=(?, 1, 1) blockDim=(256, 1, 1)", "launches: 1", "kernels: 1"]
// NAIVE-NOT: vector.load

// BAD: error: mlirfuse-gpu-pipeline: stop=ptx is not a stage (linalg, inlined, bufferized, generalized, scheduled, loops, gpu, outlined, llvm)
// NO-PTX: error: --emit=ptx: the module has no gpu.binary (run mlirfuse-gpu-pipeline)

func.func @fusion(%arg0: tensor<?x?xf32>, %arg1: tensor<f32>) -> (tensor<?x?xf32>) attributes {mlirfuse.inputs = ["tensor", "scalar"]} {
  %d0 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %s = "fusion.broadcast_in_dim"(%arg1, %d0, %d1) {shape = array<i64: -1, -1>, broadcast_dims = array<i64>} : (tensor<f32>, index, index) -> tensor<?x?xf32>
  %m = "fusion.mul"(%arg0, %s) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = "fusion.relu"(%m) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
