// gpu-apply-schedules makes each scheduled op its kernel, as the schedule says: relu(x + 1)
// with the heuristic's schedule (vectors of 4, blocks of 256) and with a hand-edited one
// (vectors of 2, blocks of 128) gives 128-bit and 64-bit vector accesses; bad schedules are
// errors at their op.
// RUN: sed -e 's/ attrs = {mlirfuse.schedule = HAND}//' %s | mlirfuse-opt --pass-pipeline='builtin.module(gpu-schedule, gpu-apply-schedules)' | FileCheck %s --check-prefix=V4
// RUN: sed -e 's/HAND/{block = 128 : i64, kind = "pointwise", unroll = 1 : i64, vector = 2 : i64}/' %s | mlirfuse-opt --pass-pipeline='builtin.module(gpu-apply-schedules)' | FileCheck %s --check-prefix=V2
// RUN: sed -e 's/HAND/{kind = "tiled", vector = 2 : i64}/' %s | not mlirfuse-opt --pass-pipeline='builtin.module(gpu-apply-schedules)' 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: sed -e 's/HAND/{block = 128 : i64, kind = "pointwise", unroll = 1 : i64, vector = 8 : i64}/' %s | not mlirfuse-opt --pass-pipeline='builtin.module(gpu-apply-schedules)' 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: sed -e 's/HAND/{block = 2048 : i64, kind = "pointwise", unroll = 1 : i64, vector = 4 : i64}/' %s | not mlirfuse-opt --pass-pipeline='builtin.module(gpu-apply-schedules)' 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: sed -e 's/HAND/{kind = "column_reduction", unroll = 1 : i64, vector = 4 : i64, block_x = 32 : i64, block_y = 8 : i64, target_blocks = 8 : i64, min_rows_per_thread = 2 : i64}/' %s | not mlirfuse-opt --pass-pipeline='builtin.module(gpu-apply-schedules)' 2>&1 | FileCheck %s --check-prefix=MISFIT
// RUN: sed -e 's/HAND/{kind = "transpose", vector = 4 : i64, tile = 32 : i64, block = 256 : i64, squares = 3 : i64}/' %s | not mlirfuse-opt --pass-pipeline='builtin.module(gpu-apply-schedules)' 2>&1 | FileCheck %s --check-prefix=SQUARES
// RUN: sed -e 's/HAND/{kind = "transpose", vector = 4 : i64, tile = 32 : i64, block = 512 : i64}/' %s | not mlirfuse-opt --pass-pipeline='builtin.module(gpu-apply-schedules)' 2>&1 | FileCheck %s --check-prefix=SQUARES
// RUN: sed -e 's/HAND/{kind = "naive", reason = "by hand"}/' %s | mlirfuse-opt --pass-pipeline='builtin.module(gpu-apply-schedules)' | FileCheck %s --check-prefix=NAIVE

// V4: gpu.launch blocks
// V4-SAME: threads({{.*}}) in ({{[^ ]+}} = %c256
// V4: vector.load %{{[^ ]+}}[%{{[^ ]+}}] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// V4: vector.store %{{[^ ]+}}, %{{[^ ]+}}[%{{[^ ]+}}] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// V4-NOT: linalg.generic

// V2: gpu.launch blocks
// V2-SAME: threads({{.*}}) in ({{[^ ]+}} = %c128
// V2: vector.load %{{[^ ]+}}[%{{[^ ]+}}] {alignment = 8 : i64} : memref<?xf32>, vector<2xf32>
// V2: vector.store %{{[^ ]+}}, %{{[^ ]+}}[%{{[^ ]+}}] {alignment = 8 : i64} : memref<?xf32>, vector<2xf32>
// V2-NOT: vector<4xf32>

// KIND: error: mlirfuse.schedule: unknown schedule kind 'tiled' (kinds: pointwise, transpose, inner_reduction, column_reduction, normalization, naive)
// WIDE: error: mlirfuse.schedule: pointwise schedule: vector width 8 for 4-byte elements exceeds a 16-byte access (at most 4)
// BLOCK: error: mlirfuse.schedule: pointwise schedule: block of 2048 threads (1 to 1024)
// SQUARES: error: mlirfuse.schedule: transpose schedule: {{[0-9]}} square(s) in blocks of {{[0-9]+}} threads: a square's threads must be a multiple of 8 whose rows of 8 divide the tile of 32
// MISFIT: <stdin>:{{[0-9]+}}:3: error: mlirfuse.schedule: a column_reduction schedule does not fit this op: {{.+}}

// A naive schedule leaves the op for the loop lowering (one thread an element):
// NAIVE: linalg.generic
// NAIVE-NOT: gpu.launch

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @mlirfuse_entry(%x: memref<?x?xf32>, %y: memref<?x?xf32>) attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>) attrs = {mlirfuse.schedule = HAND} {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %one : f32
    %1 = arith.maximumf %0, %zero : f32
    linalg.yield %1 : f32
  }
  return
}
