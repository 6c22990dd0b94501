// fusion-reshapes-past-reductions: a column reduction of a reshape that merges the reduced
// dims reduces the reshape's (computed) operand over them, and the reshape moves to the
// result. Everything else is left as it is.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-reshapes-past-reductions, fusion-dce)' | FileCheck %s

// A linear's bias gradient beside a LayerNorm backward: [B, S, H] viewed as [tokens, H],
// summed over the tokens (keepdim, as torch's sum(0, keepdim=True)).
// CHECK-LABEL: func.func @bias_gradient(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x?x64xf32>
// CHECK-NEXT: %[[E:[0-9]+]] = "fusion.exp"(%[[X]])
// CHECK-NEXT: %[[S:[0-9]+]] = "fusion.sum"(%[[E]]) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<?x?x64xf32>) -> tensor<64xf32>
// CHECK-NEXT: %[[R:[0-9]+]] = "fusion.reshape"(%[[S]]) {shape = array<i64: 1, 64>} : (tensor<64xf32>) -> tensor<1x64xf32>
// CHECK-NEXT: return %[[E]], %[[R]]
func.func @bias_gradient(%x: tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<1x64xf32>) {
  %e = "fusion.exp"(%x) : (tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %v = "fusion.reshape"(%e) {shape = array<i64: 32, 64>} : (tensor<?x?x64xf32>) -> tensor<32x64xf32>
  %s = "fusion.sum"(%v) {axes = array<i64: 0>, keepdim = true} : (tensor<32x64xf32>) -> tensor<1x64xf32>
  return %e, %s : tensor<?x?x64xf32>, tensor<1x64xf32>
}

// Max over the merged leading dims of a bf16 value, no keepdim: the new result has the
// original's shape, so no reshape follows.
// CHECK-LABEL: func.func @max_no_keepdim(
// CHECK: %[[M:[0-9]+]] = "fusion.max"(%{{[0-9]+}}) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<2x3x4x5xbf16>) -> tensor<4x5xbf16>
// CHECK-NEXT: return %[[M]]
func.func @max_no_keepdim(%x: tensor<2x3x4x5xbf16>) -> tensor<4x5xbf16> {
  %n = "fusion.neg"(%x) : (tensor<2x3x4x5xbf16>) -> tensor<2x3x4x5xbf16>
  %v = "fusion.reshape"(%n) {shape = array<i64: 6, 4, 5>} : (tensor<2x3x4x5xbf16>) -> tensor<6x4x5xbf16>
  %m = "fusion.max"(%v) {axes = array<i64: 0>, keepdim = false} : (tensor<6x4x5xbf16>) -> tensor<4x5xbf16>
  return %m : tensor<4x5xbf16>
}

// A dynamic kept dim: its size comes from the reshape's own index operand; var keeps its
// correction.
// CHECK-LABEL: func.func @var_dynamic_kept(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<2x3x?x8xf32>, %[[N:[a-z0-9_]+]]: index
// CHECK: %[[V:[0-9]+]] = "fusion.var"(%{{[0-9]+}}) {axes = array<i64: 0, 1>, correction = 1.000000e+00 : f64, keepdim = false} : (tensor<2x3x?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: %[[R:[0-9]+]] = "fusion.reshape"(%[[V]], %[[N]]) {shape = array<i64: 1, -1, 8>} : (tensor<?x8xf32>, index) -> tensor<1x?x8xf32>
func.func @var_dynamic_kept(%x: tensor<2x3x?x8xf32>, %n: index) -> tensor<1x?x8xf32> {
  %t = "fusion.tanh"(%x) : (tensor<2x3x?x8xf32>) -> tensor<2x3x?x8xf32>
  %v = "fusion.reshape"(%t, %n) {shape = array<i64: 6, -1, 8>} : (tensor<2x3x?x8xf32>, index) -> tensor<6x?x8xf32>
  %r = "fusion.var"(%v) {axes = array<i64: 0>, correction = 1.0 : f64, keepdim = true} : (tensor<6x?x8xf32>) -> tensor<1x?x8xf32>
  return %r : tensor<1x?x8xf32>
}

// Left alone: a row reduction (the innermost dim reduced), a reshape of an argument, a
// group reduced in part, a reduced dim split, and a reshape that only makes sizes static.
// CHECK-LABEL: func.func @left_alone(
// CHECK-COUNT-4: "fusion.reshape"
// CHECK-NOT: "fusion.reshape"
func.func @left_alone(%x: tensor<?x?x64xf32>, %y: tensor<8x64xf32>) -> (tensor<32x1xf32>, tensor<64xf32>, tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %e = "fusion.exp"(%x) : (tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %rows = "fusion.reshape"(%e) {shape = array<i64: 32, 64>} : (tensor<?x?x64xf32>) -> tensor<32x64xf32>
  %a = "fusion.sum"(%rows) {axes = array<i64: 1>, keepdim = true} : (tensor<32x64xf32>) -> tensor<32x1xf32>
  %arg_view = "fusion.reshape"(%y) {shape = array<i64: 8, 64>} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %b = "fusion.sum"(%arg_view) {axes = array<i64: 0>, keepdim = false} : (tensor<8x64xf32>) -> tensor<64xf32>
  %l = "fusion.log"(%y) : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %split = "fusion.reshape"(%l) {shape = array<i64: 2, 4, 64>} : (tensor<8x64xf32>) -> tensor<2x4x64xf32>
  %c = "fusion.sum"(%split) {axes = array<i64: 0>, keepdim = false} : (tensor<2x4x64xf32>) -> tensor<4x64xf32>
  %d = "fusion.sum"(%split) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<2x4x64xf32>) -> tensor<64xf32>
  %static = "fusion.reshape"(%e) {shape = array<i64: 2, 16, 64>} : (tensor<?x?x64xf32>) -> tensor<2x16x64xf32>
  %f = "fusion.sum"(%static) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<2x16x64xf32>) -> tensor<64xf32>
  return %a, %b, %c, %d, %f : tensor<32x1xf32>, tensor<64xf32>, tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// Through a cast (the torch backend's bias gradient under CUDA autocast: a bfloat16 dx viewed
// as rows and widened to sum it in float32): the widening cast moves with the reduction, onto
// the reshape's operand. Here the weight and bias gradients it will merge with read a
// bfloat16 dy, which no normalization kernel sums (columns of 4 bytes or wider only); and with
// no such sibling at all the move changes nothing else.
// CHECK-LABEL: func.func @through_a_cast(
// CHECK-SAME: %[[DY:[a-z0-9_]+]]: tensor<8x512x64xbf16>
// CHECK: %[[B:[0-9]+]] = "fusion.cast"(%{{[0-9]+}}) : (tensor<8x512x64xf32>) -> tensor<8x512x64xbf16>
// CHECK: %[[V:[0-9]+]] = "fusion.reshape"(%[[B]]) {shape = array<i64: 4096, 64>}
// CHECK: %[[W:[0-9]+]] = "fusion.cast"(%[[B]]) : (tensor<8x512x64xbf16>) -> tensor<8x512x64xf32>
// CHECK-NEXT: %[[S:[0-9]+]] = "fusion.sum"(%[[W]]) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<8x512x64xf32>) -> tensor<64xf32>
// CHECK-NEXT: "fusion.reshape"(%[[S]]) {shape = array<i64: 1, 64>}
func.func @through_a_cast(%dy: tensor<8x512x64xbf16>, %x: tensor<8x512x64xf32>) -> (tensor<64xf32>, tensor<4096x64xbf16>, tensor<1x64xf32>) {
  %g = "fusion.cast"(%dy) : (tensor<8x512x64xbf16>) -> tensor<8x512x64xf32>
  %db = "fusion.sum"(%g) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<8x512x64xf32>) -> tensor<64xf32>
  %dx = "fusion.mul"(%g, %x) : (tensor<8x512x64xf32>, tensor<8x512x64xf32>) -> tensor<8x512x64xf32>
  %b = "fusion.cast"(%dx) : (tensor<8x512x64xf32>) -> tensor<8x512x64xbf16>
  %v = "fusion.reshape"(%b) {shape = array<i64: 4096, 64>} : (tensor<8x512x64xbf16>) -> tensor<4096x64xbf16>
  %w = "fusion.cast"(%v) : (tensor<4096x64xbf16>) -> tensor<4096x64xf32>
  %s = "fusion.sum"(%w) {axes = array<i64: 0>, keepdim = true} : (tensor<4096x64xf32>) -> tensor<1x64xf32>
  return %db, %v, %s : tensor<64xf32>, tensor<4096x64xbf16>, tensor<1x64xf32>
}

// CHECK-LABEL: func.func @through_a_cast_alone(
// CHECK: "fusion.sum"(%{{[0-9]+}}) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<8x512x64xf32>) -> tensor<64xf32>
func.func @through_a_cast_alone(%x: tensor<8x512x64xf32>) -> (tensor<4096x64xbf16>, tensor<1x64xf32>) {
  %b = "fusion.cast"(%x) : (tensor<8x512x64xf32>) -> tensor<8x512x64xbf16>
  %v = "fusion.reshape"(%b) {shape = array<i64: 4096, 64>} : (tensor<8x512x64xbf16>) -> tensor<4096x64xbf16>
  %w = "fusion.cast"(%v) : (tensor<4096x64xbf16>) -> tensor<4096x64xf32>
  %s = "fusion.sum"(%w) {axes = array<i64: 0>, keepdim = true} : (tensor<4096x64xf32>) -> tensor<1x64xf32>
  return %v, %s : tensor<4096x64xbf16>, tensor<1x64xf32>
}

// Left alone through a cast: a sibling over the same dims reads only float32 (dy float32), a
// sum the normalization kernel takes; merged with the bfloat16 column it would not.
// CHECK-LABEL: func.func @through_a_cast_beside_wide_sums(
// CHECK: "fusion.sum"(%{{[0-9]+}}) {axes = array<i64: 0>, keepdim = true} : (tensor<4096x64xf32>) -> tensor<1x64xf32>
func.func @through_a_cast_beside_wide_sums(%dy: tensor<8x512x64xf32>, %x: tensor<8x512x64xf32>) -> (tensor<64xf32>, tensor<4096x64xbf16>, tensor<1x64xf32>) {
  %db = "fusion.sum"(%dy) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<8x512x64xf32>) -> tensor<64xf32>
  %dx = "fusion.mul"(%dy, %x) : (tensor<8x512x64xf32>, tensor<8x512x64xf32>) -> tensor<8x512x64xf32>
  %b = "fusion.cast"(%dx) : (tensor<8x512x64xf32>) -> tensor<8x512x64xbf16>
  %v = "fusion.reshape"(%b) {shape = array<i64: 4096, 64>} : (tensor<8x512x64xbf16>) -> tensor<4096x64xbf16>
  %w = "fusion.cast"(%v) : (tensor<4096x64xbf16>) -> tensor<4096x64xf32>
  %s = "fusion.sum"(%w) {axes = array<i64: 0>, keepdim = true} : (tensor<4096x64xf32>) -> tensor<1x64xf32>
  return %db, %v, %s : tensor<64xf32>, tensor<4096x64xbf16>, tensor<1x64xf32>
}

// Left alone: the value summed is computed from a view of one in the reduction's shape (BERT's
// cross-entropy gradient, [tokens, vocab] viewed as [batch, seq, vocab] to add a gradient, and
// viewed back for the bias gradient): that op belongs to the reduction's shape.
// CHECK-LABEL: func.func @round_trip(
// CHECK: "fusion.sum"(%{{[0-9]+}}) {axes = array<i64: 0>, keepdim = true} : (tensor<32x64xf32>) -> tensor<1x64xf32>
func.func @round_trip(%g: tensor<32x64xf32>, %o: tensor<2x16x64xf32>) -> (tensor<32x64xf32>, tensor<1x64xf32>) {
  %e = "fusion.exp"(%g) : (tensor<32x64xf32>) -> tensor<32x64xf32>
  %v = "fusion.reshape"(%e) {shape = array<i64: 2, 16, 64>} : (tensor<32x64xf32>) -> tensor<2x16x64xf32>
  %a = "fusion.add"(%o, %v) : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %back = "fusion.reshape"(%a) {shape = array<i64: 32, 64>} : (tensor<2x16x64xf32>) -> tensor<32x64xf32>
  %s = "fusion.sum"(%back) {axes = array<i64: 0>, keepdim = true} : (tensor<32x64xf32>) -> tensor<1x64xf32>
  return %back, %s : tensor<32x64xf32>, tensor<1x64xf32>
}
