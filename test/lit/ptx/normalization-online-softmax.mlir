// The looping variants of a softmax (float32, a row length known at run time: rows too long
// to hold, unaligned or misaligned loop over chunks) accumulate the sum of exp(x - max) in
// the max's pass, against each thread's running maximum (the sum rescaled by exp(old - new)
// as it grows), then rescale to the row's maximum: a pass reading the row for both
// reductions and a last one writing the output, where a pass per reduction read it three
// times. The held variant is unchanged (its row is in registers). Normalization kernels take
// exp as 2**(x * log2(e)) (ex2.approx, as Triton's): no libdevice expf is left.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU

// PARAMS: launch 0 gridDim=(?, 1, 1) blockDim=(?, 1, 1): normalization (row, reduce, tile, row, reduce, tile): NormalizationParams({{.*}})"
// PARAMS-SAME: "launch 0 (or) gridDim=(?, 1, 1) blockDim=(?, 1, 1): normalization: the looping variant in vectors from each row's first aligned element; sums of exp(u - r) in the pass before"
// PARAMS-SAME: "launch 0 (or) gridDim=(?, 1, 1) blockDim=(?, 1, 1): normalization: the looping variant, for rows too long to hold or unaligned; sums of exp(u - r) in the pass before"

// One pass for the max and the sum (the max, the running maximum, the sum), the threads'
// maxima and rescaled sums combined, then the output's pass; no other pass reads the row.
// GPU: function(@kernel_with_attrs_1)
// GPU: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32) {
// GPU: vector.load %arg0
// GPU: arith.maximumf
// GPU: arith.mulf {{.*}} : f32
// GPU-NEXT: math.exp2
// GPU: scf.yield
// GPU: gpu.barrier
// GPU-NOT: vector.load %arg0
// GPU: scf.for %{{[^ ]+}} = %{{[^ ]+}} to %{{[^ ]+}} step %{{[^ ]+}} {
// GPU: vector.load %arg0
// GPU: vector.store
// GPU: function(@kernel_with_attrs_2)
// GPU-NOT: math.exp {{.*}} : f32

module {
  func.func @fusion(%arg0: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {mlirfuse.inputs = ["tensor"]} {
    %0 = "fusion.max"(%arg0) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
    %1 = "fusion.size"(%arg0) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
    %2 = "fusion.size"(%arg0) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
    %3 = "fusion.broadcast_in_dim"(%0, %1, %2) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
    %4 = "fusion.sub"(%arg0, %3) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    %5 = "fusion.exp"(%4) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    %6 = "fusion.sum"(%5) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
    %7 = "fusion.broadcast_in_dim"(%6, %1, %2) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
    %8 = "fusion.div"(%5, %7) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %8 : tensor<?x?xf32>
  }
}
