// A group that only moves data is a kernel when the data really moves: a reshape of a
// permuted view (it needs a copy) or a permuted value written as a group output is a
// "transpose" kernel. Views that fusion-strip-bookend-views moved out of a group launch
// nothing: a group left with no op disappears, and a group of views of contiguous values
// is "no-op". `fusion.kernels` on the graph function counts the kernels it launches: group
// segments, plus data movement left outside groups (a copying reshape, a strided view
// returned as an output, which must be written contiguous).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true}, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s --check-prefix=SN
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s --check-prefix=DEF
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true}, fusion-segment)' | FileCheck %s --check-prefix=NOSTRIP
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group{single-node=true}, fusion-strip-bookend-views, fusion-segment)' | mlir-opt --irdl-file=%irdl > /dev/null

// The multi-head-attention transpose of the bookend-view issue (003): view, permute, a
// reshape of the permuted view (a copy), view. One transpose kernel in every mode.
// SN-LABEL: func.func private @mha_transpose_group0(
// SN-SAME: %arg0: tensor<64x128x12x64xf32>) -> tensor<64x128x768xf32> attributes {fusion.group, fusion.segments = ["transpose"]}
// SN-NEXT: "fusion.reshape"(%arg0) {fusion.segment = 0 : i64, shape = array<i64: 64, 128, 768>}
// SN-NEXT: return
// SN-LABEL: func.func @mha_transpose(
// SN-SAME: attributes {fusion.kernels = 1 : i64}
// SN-NEXT: "fusion.reshape"(%arg0)
// SN-NEXT: "fusion.permute"
// SN-NEXT: call @mha_transpose_group0(
// SN-NEXT: "fusion.reshape"
// SN-NEXT: return
// Without single-node the copy is not outlined (no compute op): it is still one kernel.
// DEF-NOT: func.func private @mha_transpose_group
// DEF-LABEL: func.func @mha_transpose(
// DEF-SAME: attributes {fusion.kernels = 1 : i64}
// NOSTRIP-LABEL: func.func private @mha_transpose_group0(
// NOSTRIP-SAME: attributes {fusion.group, fusion.segments = ["transpose"]}
// NOSTRIP-LABEL: func.func @mha_transpose(
// NOSTRIP-SAME: attributes {fusion.kernels = 1 : i64}
func.func @mha_transpose(%arg0: tensor<768x128x64xf32>) -> (tensor<8192x768xf32>) {
  %t2 = "fusion.reshape"(%arg0) {shape = array<i64: 64, 12, 128, 64>} : (tensor<768x128x64xf32>) -> tensor<64x12x128x64xf32>
  %t3 = "fusion.permute"(%t2) {dims = array<i64: 0, 2, 1, 3>} : (tensor<64x12x128x64xf32>) -> tensor<64x128x12x64xf32>
  %t4 = "fusion.reshape"(%t3) {shape = array<i64: 64, 128, 768>} : (tensor<64x128x12x64xf32>) -> tensor<64x128x768xf32>
  %t5 = "fusion.reshape"(%t4) {shape = array<i64: 8192, 768>} : (tensor<64x128x768xf32>) -> tensor<8192x768xf32>
  return %t5 : tensor<8192x768xf32>
}

// A permuted value returned as the fusion's output is materialized: one transpose kernel,
// whether the permute stays in a group (no strip) or is a view in the caller.
// NOSTRIP-LABEL: func.func private @permute_output_group0(
// NOSTRIP-SAME: attributes {fusion.group, fusion.segments = ["transpose"]}
// NOSTRIP-NEXT: "fusion.permute"(%arg0) {dims = array<i64: 1, 0>, fusion.segment = 0 : i64}
// NOSTRIP-NEXT: return
// NOSTRIP-LABEL: func.func @permute_output(
// NOSTRIP-SAME: attributes {fusion.kernels = 1 : i64}
// SN-NOT: func.func private @permute_output_group
// SN-LABEL: func.func @permute_output(
// SN-SAME: attributes {fusion.kernels = 1 : i64}
// SN-NEXT: "fusion.permute"(%arg0)
// SN-NEXT: return
// DEF-LABEL: func.func @permute_output(
// DEF-SAME: attributes {fusion.kernels = 1 : i64}
func.func @permute_output(%x: tensor<4x6xf32>) -> tensor<6x4xf32> {
  %p = "fusion.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  return %p : tensor<6x4xf32>
}

// Only views of a contiguous input (reshape, unsqueeze, squeeze, and a permute undone by
// its inverse): nothing moves, 0 kernels. With the strip pass the group disappears; without
// it the group is "no-op".
// SN-NOT: func.func private @only_views_group
// SN-LABEL: func.func @only_views(
// SN-SAME: attributes {fusion.kernels = 0 : i64}
// SN-NOT: call
// SN: return
// DEF-LABEL: func.func @only_views(
// DEF-SAME: attributes {fusion.kernels = 0 : i64}
// NOSTRIP-LABEL: func.func private @only_views_group0(
// NOSTRIP-SAME: attributes {fusion.group, fusion.segments = ["no-op"]}
// NOSTRIP-LABEL: func.func @only_views(
// NOSTRIP-SAME: attributes {fusion.kernels = 0 : i64}
func.func @only_views(%x: tensor<4x6xf32>) -> tensor<6x1x4xf32> {
  %r = "fusion.reshape"(%x) {shape = array<i64: 24>} : (tensor<4x6xf32>) -> tensor<24xf32>
  %u = "fusion.unsqueeze"(%r) {dim = 0 : i64} : (tensor<24xf32>) -> tensor<1x24xf32>
  %s = "fusion.squeeze"(%u) {dims = array<i64: 0>} : (tensor<1x24xf32>) -> tensor<24xf32>
  %v = "fusion.reshape"(%s) {shape = array<i64: 4, 6>} : (tensor<24xf32>) -> tensor<4x6xf32>
  %p = "fusion.permute"(%v) {dims = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %q = "fusion.permute"(%p) {dims = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %w = "fusion.reshape"(%q) {shape = array<i64: 6, 1, 4>} : (tensor<4x6xf32>) -> tensor<6x1x4xf32>
  return %w : tensor<6x1x4xf32>
}

// Pointwise work on both sides of a permute is one transpose kernel (the transpose
// scheduler serves inputs and outputs with different inner dimensions).
// SN-LABEL: func.func private @pointwise_around_permute_group0(
// SN-SAME: attributes {fusion.group, fusion.segments = ["transpose"]}
// SN-NOT: fusion.segment = 1
// SN: return
// SN-LABEL: func.func @pointwise_around_permute(
// SN-SAME: attributes {fusion.kernels = 1 : i64}
func.func @pointwise_around_permute(%x: tensor<4x6xf32>) -> tensor<6x4xf32> {
  %e = "fusion.exp"(%x) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = "fusion.permute"(%e) {dims = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %n = "fusion.neg"(%p) : (tensor<6x4xf32>) -> tensor<6x4xf32>
  return %n : tensor<6x4xf32>
}
