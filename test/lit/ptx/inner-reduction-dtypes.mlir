// Inner reductions beyond float32 sums. var_mean: the mean's sum, then the squared
// deviations with the mean read once per row (a row-invariant operand, no vector loads).
// float64 max: 2 x 64-bit vectors, each 64-bit shuffle split into two 32-bit ones, -inf as
// the starting value.
// RUN: %python %S/Inputs/gpu_stage.py %S/Inputs/var_mean.mlir launch_params | FileCheck %s --check-prefix=VAR-PARAMS
// RUN: %python %S/Inputs/gpu_stage.py %S/Inputs/var_mean.mlir gpu | FileCheck %s --check-prefix=VAR
// RUN: %python %S/Inputs/gpu_stage.py %S/Inputs/max_f64.mlir gpu | FileCheck %s --check-prefix=F64
// RUN: %python %S/Inputs/gpu_stage.py %S/Inputs/max_f64.mlir ptx | FileCheck %s --check-prefix=F64-PTX

// VAR-PARAMS: inner reduction: InnerReductionParams(vector=4,
// VAR-PARAMS: inner reduction: InnerReductionParams(vector=4,
// VAR-PARAMS-NOT: naive

// The second reduction: the mean (scratch memory, divided by the row length in a pointwise
// kernel before) is loaded once per row, before the row loop.
// VAR: } {mlirfuse.schedule = "inner-reduction"}
// VAR: gpu.launch blocks{{.*}} workgroup(
// VAR: %[[MEAN:[^ ]+]] = memref.load %{{[^ ]+}}[%[[ROW:[^ ]+]]] : memref<?xf32>
// VAR: scf.for
// VAR: vector.load %arg0[%[[ROW]], %{{[^ ]+}}] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// VAR: arith.subf %{{[^ ]+}}, %[[MEAN]] : f32
// VAR: } {mlirfuse.schedule = "inner-reduction"}

// F64: arith.constant 0xFFF0000000000000 : f64
// F64: gpu.launch blocks{{.*}} workgroup(%{{[^ ]+}} : memref<16xf64, #gpu.address_space<workgroup>>)
// F64: vector.load %arg0[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 16 : i64} : memref<?x?xf64>, vector<2xf64>
// F64: arith.maximumf
// F64: arith.bitcast %{{[^ ]+}} : f64 to i64
// F64: gpu.shuffle  xor %{{[^ ]+}}, %c16_i32, %c32_i32 : i32
// F64: gpu.shuffle  xor %{{[^ ]+}}, %c16_i32, %c32_i32 : i32
// F64: arith.bitcast %{{[^ ]+}} : i64 to f64

// F64-PTX: ld.global.v2.{{[bf]}}64
// F64-PTX: shfl.sync.bfly.b32
// F64-PTX: shfl.sync.bfly.b32
// F64-PTX: max{{(.NaN)?}}.f64
