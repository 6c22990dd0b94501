// Inner reductions beyond float32 sums. var_mean: the mean's sum, the mean, the squared
// deviations and the variance are one normalization kernel: x loaded once (4 vectors a
// thread), the mean and variance written once per row (three kernel variants, one launch).
// float64 max: 2 x 64-bit vectors, each 64-bit shuffle split into two 32-bit ones, -inf as
// the starting value.
// RUN: mlirfuse-opt %S/Inputs/var_mean.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=VAR-PARAMS
// RUN: mlirfuse-opt %S/Inputs/var_mean.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=VAR
// RUN: mlirfuse-opt %S/Inputs/max_f64.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=F64
// RUN: mlirfuse-opt %S/Inputs/max_f64.mlir --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=F64-PTX

// VAR-PARAMS: normalization (row, row, reduce, row, reduce, row): NormalizationParams(vector=4,
// VAR-PARAMS-NOT: naive
// VAR-PARAMS: "launches: 1"
// VAR-PARAMS: "kernels: 3"

// VAR: gpu.launch blocks{{.*}} workgroup(
// VAR-COUNT-4: vector.load %arg0[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// VAR: gpu.barrier
// VAR: memref.store %{{[^ ]+}}, %arg2[
// VAR-NOT: vector.load
// VAR: arith.subf
// VAR-NOT: vector.load
// VAR: gpu.barrier
// VAR: memref.store %{{[^ ]+}}, %arg1[
// VAR: } {mlirfuse.schedule = "normalization"}

// F64: arith.constant 0xFFF0000000000000 : f64
// F64: gpu.launch blocks{{.*}} workgroup(%{{[^ ]+}} : memref<16xf64, #gpu.address_space<workgroup>>)
// F64: vector.load %arg0[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 16 : i64} : memref<?x?xf64>, vector<2xf64>
// F64: arith.maximumf
// F64: arith.bitcast %{{[^ ]+}} : f64 to i64
// F64: gpu.shuffle  xor %{{[^ ]+}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : i32
// F64: gpu.shuffle  xor %{{[^ ]+}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : i32
// F64: arith.bitcast %{{[^ ]+}} : i64 to f64

// F64-PTX: ld.global.v2.{{[bf]}}64
// F64-PTX: shfl.sync.bfly.b32
// F64-PTX: shfl.sync.bfly.b32
// F64-PTX: max{{(.NaN)?}}.f64
