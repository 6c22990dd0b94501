// The inner-reduction schedule on x.sum(-1), float32, dynamic shapes. The output's fill is
// folded into the reduction (no kernel of its own, the output not read back): the host picks the threads per
// row from the row length (one thread up to 16 elements, then 2, 4, ..., a warp up to 512,
// then 64, 128, 256, 512 threads) and short rows share a block of 512 threads. Each thread sums every threads-th 16-byte vector of
// its row, 4 vectors in flight; shuffle-xor butterflies reduce each warp, shared memory the
// warps of a row; lane 0 writes the fill's value combined with the total. Rows of a whole
// block (over 4096 elements) that are fewer than 264 (two blocks per SM) are cut into chunks
// of at least 32768 elements, a block each: the chunks' partials go to a [rows, chunks]
// workspace, each block then counts itself done on its row's counter (zeroed by a memset
// before the launch; a fence, then an atomic add), and the row's last block adds the
// partials in chunk order: one launch. Rows not cut allocate neither (empty) and skip the
// memset.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=PARAMS
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline{stop=gpu})' | FileCheck %s --check-prefix=GPU
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(mlirfuse-gpu-pipeline)' --emit=ptx | FileCheck %s --check-prefix=PTX

// PARAMS-NOT: pointwise
// PARAMS: inner reduction: InnerReductionParams(vector=4, unroll=4, block=512, tiers=(RowTier(max_row=16, threads=1), RowTier(max_row=32, threads=2), {{.*}}, RowTier(max_row=512, threads=32), RowTier(max_row=1024, threads=64), {{.*}}, RowTier(max_row=None, threads=512)), split_blocks=264, min_chunk=32768); where rows are cut into chunks, the last block of each row combines its partials in chunk order
// PARAMS: "launches: 1"

// GPU-LABEL: func.func @mlirfuse_entry(
// GPU-NOT: mlirfuse.schedule = "pointwise"
// GPU: %[[ROW:[^ ]+]] = memref.dim %arg0, %c1
// GPU: %[[WARP_ROWS:[^ ]+]] = arith.cmpi ule, %[[ROW]], %c512
// GPU: arith.select %[[WARP_ROWS]], %c32, %{{[^ ]+}} : index
// GPU: %[[TINY_ROWS:[^ ]+]] = arith.cmpi ule, %[[ROW]], %c16
// GPU: %[[THREADS:[^ ]+]] = arith.select %[[TINY_ROWS]], %c1, %{{[^ ]+}} : index
// GPU: %[[PER_BLOCK:[^ ]+]] = arith.divui %c512, %[[THREADS]]
// GPU: %[[ROW_GRID:[^ ]+]] = arith.ceildivui %[[ROWS:[^ ]+]], %[[PER_BLOCK]]
// GPU: %[[LONG:[^ ]+]] = arith.cmpi ugt, %[[ROW]], %c4096
// GPU: %[[FEW:[^ ]+]] = arith.cmpi ult, %[[ROWS]], %c264
// GPU: arith.divui %[[ROW]], %c32768
// GPU: %[[VECTORS:[^ ]+]] = arith.muli %{{[^ ]+}}, %c4 : index
// GPU: %[[CHUNK:[^ ]+]] = arith.maxui %[[VECTORS]], %c1 : index
// GPU: %[[BY_CHUNK:[^ ]+]] = arith.ceildivui %[[ROW]], %[[CHUNK]] : index
// GPU: %[[CHUNKS:[^ ]+]] = arith.maxui %[[BY_CHUNK]], %c1 : index
// GPU: %[[CUT:[^ ]+]] = arith.cmpi ugt, %[[CHUNKS]], %c1
// GPU: %[[WS_ROWS:[^ ]+]] = arith.select %[[CUT]], %[[ROWS]], %c0
// GPU: %[[WS:[^ ]+]] = gpu.alloc  (%[[WS_ROWS]], %[[CHUNKS]]) : memref<?x?xf32>
// GPU: %[[COUNTERS:[^ ]+]] = gpu.alloc  (%[[WS_ROWS]]) : memref<?xi32>
// GPU: scf.if %[[CUT]] {
// GPU: gpu.memset async [%{{[^ ]+}}] %[[COUNTERS]], %c0_i32
// GPU: } {mlirfuse.schedule = "inner-reduction-counters"}
// GPU: %[[CHUNK_GRID:[^ ]+]] = arith.muli %[[ROWS]], %[[CHUNKS]]
// GPU: %[[GRID:[^ ]+]] = arith.select %[[CUT]], %[[CHUNK_GRID]], %[[ROW_GRID]]
// GPU: gpu.launch blocks({{.*}}) in ({{[^ ]+}} = %[[GRID]],
// GPU-SAME: threads({{.*}}) in ({{[^ ]+}} = %c512,
// GPU-SAME: workgroup(%[[SHARED:[^ ]+]] : memref<16xf32, #gpu.address_space<workgroup>>)
// GPU-COUNT-4: vector.load %arg0[%{{[^ ]+}}, %{{[^ ]+}}] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// GPU: arith.addf %{{[^ ]+}}, %{{[^ ]+}} fastmath<reassoc,contract> : f32
// GPU: gpu.shuffle  xor %{{[^ ]+}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// GPU: gpu.shuffle  xor %{{[^ ]+}}, %c8_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// GPU: gpu.shuffle  xor %{{[^ ]+}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// GPU: gpu.shuffle  xor %{{[^ ]+}}, %c2_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// GPU: gpu.shuffle  xor %{{[^ ]+}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// GPU: memref.store %{{[^ ]+}}, %[[SHARED]]
// GPU: gpu.barrier
// GPU: memref.load %[[SHARED]]
// GPU: gpu.shuffle  xor
// GPU-NOT: memref.load %arg1
// GPU: memref.store %{{[^ ]+}}, %[[WS]]
// GPU-NEXT: nvvm.memory.barrier <gpu>
// GPU-NEXT: %[[BEFORE:[^ ]+]] = memref.atomic_rmw addi %c1_i32, %[[COUNTERS]]
// GPU: %[[DONE:[^ ]+]] = arith.addi %{{[^ ]+}}, %c1{{[_0-9]*}} : index
// GPU: %[[LAST:[^ ]+]] = arith.cmpi eq, %[[DONE]], %[[CHUNKS]]
// GPU: scf.if %[[LAST]] {
// GPU-NEXT: nvvm.memory.barrier <gpu>
// GPU-NEXT: scf.for %{{[^ ]+}} = %c0{{[_0-9]*}} to %[[CHUNKS]]
// GPU-NEXT: memref.load %[[WS]]
// GPU: memref.store %{{[^ ]+}}, %arg1
// GPU: } else {
// GPU: memref.store %{{[^ ]+}}, %arg1
// GPU: } {mlirfuse.schedule = "inner-reduction"}
// GPU-NOT: gpu.launch
// GPU: gpu.dealloc  %[[WS]]
// GPU: gpu.dealloc  %[[COUNTERS]]

// The reduction kernel, with 16 floats of shared memory (one slot per warp), its last
// blocks counting themselves done:
// PTX: .visible .entry mlirfuse_entry_kernel_{{[0-9]+}}(
// PTX: .maxntid 512, 1, 1
// PTX: .shared .align 4 .b8 __wg_{{[a-z_0-9]+}}[64];
// PTX: ld.global.v4.{{[bf]}}32
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX: st.shared.{{[bf]}}32
// PTX: bar.sync 0;
// PTX: ld.shared.{{[bf]}}32
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX: membar.gl;
// PTX: atom.global.add.u32
// PTX: membar.gl;

func.func @fusion(%arg0: tensor<?x?xf32>) -> (tensor<?xf32>) {
  %t2 = "fusion.sum"(%arg0) {axes = array<i64: 1>, keepdim = false} : (tensor<?x?xf32>) -> tensor<?xf32>
  return %t2 : tensor<?xf32>
}
