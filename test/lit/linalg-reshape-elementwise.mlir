// linalg-reshape-elementwise: an elementwise generic whose only user is a tensor.reshape is
// rebuilt over the reshaped shape, reading reshaped inputs; elementwise fusion then makes it
// and its consumer one generic (a view between two pointwise ops: one kernel). A generic
// whose result has another user, one with a broadcast input, and one reading a strided
// memref keep their reshape.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-reshape-elementwise)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-reshape-elementwise, func.func(linalg-fuse-elementwise-ops), canonicalize, cse)' | FileCheck %s --check-prefix=FUSED

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// CHECK-LABEL: func.func @view_between(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x?xf32>, %[[Y:[a-z0-9_]+]]: tensor<?x?xf32>
// CHECK-DAG: %[[SHAPE:.+]] = arith.constant dense<[4, 16, 48]> : tensor<3xindex>
// CHECK-DAG: %[[XR:.+]] = tensor.reshape %[[X]](%[[SHAPE]]) : (tensor<?x?xf32>, tensor<3xindex>) -> tensor<4x16x48xf32>
// CHECK-DAG: %[[YR:.+]] = tensor.reshape %[[Y]](%[[SHAPE]]) : (tensor<?x?xf32>, tensor<3xindex>) -> tensor<4x16x48xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]{{.*}} ins(%[[XR]], %[[YR]] : tensor<4x16x48xf32>, tensor<4x16x48xf32>)
// CHECK: arith.addf
// CHECK-NOT: tensor.reshape
// FUSED-LABEL: func.func @view_between(
// FUSED-COUNT-1: linalg.generic
// FUSED-NOT: linalg.generic
// FUSED: arith.addf
// FUSED-NEXT: arith.mulf
func.func @view_between(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %o: tensor<?x?xf32>) -> tensor<4x16x48xf32> {
  %sum = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  %shape = arith.constant dense<[4, 16, 48]> : tensor<3xindex>
  %view = tensor.reshape %sum(%shape) : (tensor<?x?xf32>, tensor<3xindex>) -> tensor<4x16x48xf32>
  %init = tensor.empty() : tensor<4x16x48xf32>
  %sq = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%view : tensor<4x16x48xf32>) outs(%init : tensor<4x16x48xf32>) {
  ^bb0(%a: f32, %out: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x16x48xf32>
  return %sq : tensor<4x16x48xf32>
}

// CHECK-LABEL: func.func @kept(
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?xf32>)
// CHECK: tensor.reshape
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<?x?xf32>)
// CHECK: tensor.reshape
// CHECK: %[[T:.+]] = bufferization.to_tensor
// CHECK-NEXT: %[[SQ:.+]] = linalg.generic {{.*}} ins(%[[T]] : tensor<8x8xf32>)
// CHECK: tensor.reshape %[[SQ]]
func.func @kept(%x: tensor<?x?xf32>, %b: tensor<?xf32>, %o: tensor<?x?xf32>, %m: memref<8x8xf32, strided<[16, 1]>>,
                %o2: tensor<8x8xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<?x?xf32>, tensor<64xf32>) {
  %shape = arith.constant dense<[64]> : tensor<1xindex>
  // a broadcast input
  %bc = linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<?x?xf32>, tensor<?xf32>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%a: f32, %c: f32, %out: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  %v1 = tensor.reshape %bc(%shape) : (tensor<?x?xf32>, tensor<1xindex>) -> tensor<64xf32>
  // a second user
  %neg = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%a: f32, %out: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<?x?xf32>
  %v2 = tensor.reshape %neg(%shape) : (tensor<?x?xf32>, tensor<1xindex>) -> tensor<64xf32>
  // a strided memref's tensor
  %t = bufferization.to_tensor %m : memref<8x8xf32, strided<[16, 1]>> to tensor<8x8xf32>
  %sq = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<8x8xf32>) outs(%o2 : tensor<8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %q = arith.mulf %a, %a : f32
    linalg.yield %q : f32
  } -> tensor<8x8xf32>
  %v3 = tensor.reshape %sq(%shape) : (tensor<8x8xf32>, tensor<1xindex>) -> tensor<64xf32>
  return %v1, %v2, %neg, %v3 : tensor<64xf32>, tensor<64xf32>, tensor<?x?xf32>, tensor<64xf32>
}

// A reshape read by several generics moves too: cross-entropy's `logits.float().view(-1, V)`
// read by the max and the exp-sum reductions. The cast then reads the reshaped bf16 input
// (a view of it), and each reduction reads the cast instead of a float32 copy of the logits.
// CHECK-LABEL: func.func @read_by_two(
// CHECK: %[[XR:.+]] = tensor.reshape %arg0
// CHECK-SAME: -> tensor<32x1000xbf16>
// CHECK: %[[F:.+]] = linalg.generic {{.*}} ins(%[[XR]] : tensor<32x1000xbf16>)
// CHECK: arith.extf
// CHECK: linalg.generic {{.*}} ins(%[[F]] : tensor<32x1000xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[F]] : tensor<32x1000xf32>)
// CHECK-NOT: tensor.reshape
#red = affine_map<(d0, d1) -> (d0)>
func.func @read_by_two(%x: tensor<?x?x?xbf16>, %o: tensor<?x?x?xf32>, %acc: tensor<32xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %f = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<?x?x?xbf16>) outs(%o : tensor<?x?x?xf32>) {
  ^bb0(%a: bf16, %out: f32):
    %e = arith.extf %a : bf16 to f32
    linalg.yield %e : f32
  } -> tensor<?x?x?xf32>
  %shape = arith.constant dense<[32, 1000]> : tensor<2xindex>
  %v = tensor.reshape %f(%shape) : (tensor<?x?x?xf32>, tensor<2xindex>) -> tensor<32x1000xf32>
  %max = linalg.generic {indexing_maps = [#id2, #red], iterator_types = ["parallel", "reduction"]}
      ins(%v : tensor<32x1000xf32>) outs(%acc : tensor<32xf32>) {
  ^bb0(%a: f32, %m: f32):
    %r = arith.maximumf %a, %m : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #red], iterator_types = ["parallel", "reduction"]}
      ins(%v : tensor<32x1000xf32>) outs(%acc : tensor<32xf32>) {
  ^bb0(%a: f32, %s: f32):
    %r = arith.addf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  return %max, %sum : tensor<32xf32>, tensor<32xf32>
}

// At a fusion's end: an elementwise generic reading a reshape of a computed value, its result
// read by no generic (cross-entropy's gradient cast to bf16 after the view back to
// [batch, seq, vocab]), is computed before the reshape: it fuses into the producer (a
// broadcasting generic here, which the first rule would not move) and the reshape is left on
// the result, for output-views-in-place to write through.
// CHECK-LABEL: func.func @cast_at_the_end(
// CHECK: %[[G:.+]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<32x1000xf32>, tensor<32xf32>)
// CHECK: %[[C:.+]] = linalg.generic {{.*}} ins(%[[G]] : tensor<32x1000xf32>) outs(%{{.+}} : tensor<32x1000xbf16>)
// CHECK: arith.truncf
// CHECK: %[[R:.+]] = tensor.reshape %[[C]](%{{.+}}) : (tensor<32x1000xbf16>, tensor<3xindex>) -> tensor<2x16x1000xbf16>
// CHECK: return %[[R]]
// FUSED-LABEL: func.func @cast_at_the_end(
// FUSED: linalg.generic
// FUSED: arith.subf
// FUSED-NEXT: arith.truncf
// FUSED-NOT: linalg.generic
// FUSED: tensor.reshape
#col = affine_map<(d0, d1) -> (d0)>
func.func @cast_at_the_end(%x: tensor<32x1000xf32>, %m: tensor<32xf32>, %o: tensor<32x1000xf32>) -> tensor<2x16x1000xbf16> {
  %g = linalg.generic {indexing_maps = [#id2, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : tensor<32x1000xf32>, tensor<32xf32>) outs(%o : tensor<32x1000xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<32x1000xf32>
  %shape = arith.constant dense<[2, 16, 1000]> : tensor<3xindex>
  %v = tensor.reshape %g(%shape) : (tensor<32x1000xf32>, tensor<3xindex>) -> tensor<2x16x1000xf32>
  %init = tensor.empty() : tensor<2x16x1000xbf16>
  %c = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v : tensor<2x16x1000xf32>) outs(%init : tensor<2x16x1000xbf16>) {
  ^bb0(%a: f32, %out: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x16x1000xbf16>
  return %c : tensor<2x16x1000xbf16>
}

// The same with a second, contiguous input (the logits' other gradient added to it): that
// input is reshaped to the value's shape (a view) and the sum computed before the reshape.
// CHECK-LABEL: func.func @cast_add_at_the_end(
// CHECK: %[[G:.+]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<32x1000xf32>, tensor<32xf32>)
// CHECK: %[[W:.+]] = tensor.reshape %arg3(%{{.+}}) : (tensor<2x16x1000xbf16>, tensor<2xindex>) -> tensor<32x1000xbf16>
// CHECK: %[[C:.+]] = linalg.generic {{.*}} ins(%[[G]], %[[W]] : tensor<32x1000xf32>, tensor<32x1000xbf16>) outs(%{{.+}} : tensor<32x1000xbf16>)
// CHECK: %[[R:.+]] = tensor.reshape %[[C]](%{{.+}}) : (tensor<32x1000xbf16>, tensor<3xindex>) -> tensor<2x16x1000xbf16>
// CHECK: return %[[R]]
func.func @cast_add_at_the_end(%x: tensor<32x1000xf32>, %m: tensor<32xf32>, %o: tensor<32x1000xf32>,
                               %w: tensor<2x16x1000xbf16>) -> tensor<2x16x1000xbf16> {
  %g = linalg.generic {indexing_maps = [#id2, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : tensor<32x1000xf32>, tensor<32xf32>) outs(%o : tensor<32x1000xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<32x1000xf32>
  %shape = arith.constant dense<[2, 16, 1000]> : tensor<3xindex>
  %v = tensor.reshape %g(%shape) : (tensor<32x1000xf32>, tensor<3xindex>) -> tensor<2x16x1000xf32>
  %init = tensor.empty() : tensor<2x16x1000xbf16>
  %c = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v, %w : tensor<2x16x1000xf32>, tensor<2x16x1000xbf16>) outs(%init : tensor<2x16x1000xbf16>) {
  ^bb0(%a: f32, %b: bf16, %out: bf16):
    %t = arith.truncf %a : f32 to bf16
    %r = arith.addf %t, %b : bf16
    linalg.yield %r : bf16
  } -> tensor<2x16x1000xbf16>
  return %c : tensor<2x16x1000xbf16>
}

// A generic reading its source at its own indices (a slice of padded logits, cast to f32)
// moves past the collapse to rows too: its body reads the indices mapped back to its own
// shape (row r of [6, 300] is (r / 3, r % 3) of [2, 3, 300]; columns are the same), so the
// reduction that reads the rows fuses with it and reads the bf16 source in place.
// CHECK-LABEL: func.func @indexed_slice(
// CHECK-SAME: %[[W:[a-z0-9_]+]]: tensor<2x3x304xbf16>
// CHECK-DAG: %[[C3:.+]] = arith.constant 3 : index
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} outs({{.*}} : tensor<6x300xf32>)
// CHECK: %[[R:.+]] = linalg.index 0 : index
// CHECK: %[[C:.+]] = linalg.index 1 : index
// CHECK-DAG: %[[J:.+]] = arith.remui %[[R]], %[[C3]] : index
// CHECK-DAG: %[[I:.+]] = arith.divui %[[R]], %[[C3]] : index
// CHECK: tensor.extract %[[W]][%[[I]], %[[J]], %[[C]]] : tensor<2x3x304xbf16>
// CHECK-NOT: tensor.reshape
// FUSED-LABEL: func.func @indexed_slice(
// FUSED-COUNT-1: linalg.generic
// FUSED-NOT: linalg.generic
// FUSED: tensor.extract
// FUSED: arith.maximumf
func.func @indexed_slice(%w: tensor<2x3x304xbf16>, %acc: tensor<6xf32>) -> tensor<6xf32> {
  %init = tensor.empty() : tensor<2x3x300xf32>
  %cast = linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%init : tensor<2x3x300xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %k = linalg.index 2 : index
    %e = tensor.extract %w[%i, %j, %k] : tensor<2x3x304xbf16>
    %f = arith.extf %e : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<2x3x300xf32>
  %shape = arith.constant dense<[6, 300]> : tensor<2xindex>
  %rows = tensor.reshape %cast(%shape) : (tensor<2x3x300xf32>, tensor<2xindex>) -> tensor<6x300xf32>
  %max = linalg.generic {indexing_maps = [#id2, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%rows : tensor<6x300xf32>) outs(%acc : tensor<6xf32>) {
  ^bb0(%a: f32, %out: f32):
    %m = arith.maximumf %out, %a : f32
    linalg.yield %m : f32
  } -> tensor<6xf32>
  return %max : tensor<6xf32>
}

// Its indices read inside a nested region (a guarded read) are mapped there too.
// CHECK-LABEL: func.func @indexed_nested(
// CHECK-SAME: %[[W:[a-z0-9_]+]]: tensor<4x8xf32>
// CHECK: linalg.generic {{.*}}outs({{.*}} : tensor<32xf32>)
// CHECK: %[[L:.+]] = linalg.index 0 : index
// CHECK-DAG: %[[J:.+]] = arith.remui %[[L]], %{{.+}} : index
// CHECK-DAG: %[[I:.+]] = arith.divui %[[L]], %{{.+}} : index
// CHECK: scf.if
// CHECK: tensor.extract %[[W]][%[[I]], %[[J]]] : tensor<4x8xf32>
// CHECK-NOT: tensor.reshape
func.func @indexed_nested(%w: tensor<4x8xf32>, %acc: tensor<f32>) -> tensor<f32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %c2 = arith.constant 2 : index
  %guarded = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
      outs(%init : tensor<4x8xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %inside = arith.cmpi ult, %j, %c2 : index
    %v = scf.if %inside -> f32 {
      %e = tensor.extract %w[%i, %j] : tensor<4x8xf32>
      scf.yield %e : f32
    } else {
      %z = arith.constant 0.0 : f32
      scf.yield %z : f32
    }
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %shape = arith.constant dense<[32]> : tensor<1xindex>
  %flat = tensor.reshape %guarded(%shape) : (tensor<4x8xf32>, tensor<1xindex>) -> tensor<32xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%flat : tensor<32xf32>) outs(%acc : tensor<f32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %out, %a : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %sum : tensor<f32>
}

// Rows of dynamic extents, columns of a static one: the column index is the reshaped
// generic's own (no division by the row length per element), and only the row index is
// split by the dynamic extent.
// CHECK-LABEL: func.func @indexed_dynamic_rows(
// CHECK-SAME: %[[W:[a-z0-9_]+]]: tensor<?x?x304xbf16>
// CHECK: linalg.generic {{.*}}outs({{.*}} : tensor<?x300xf32>)
// CHECK: %[[R:.+]] = linalg.index 0 : index
// CHECK: %[[C:.+]] = linalg.index 1 : index
// CHECK-DAG: %[[J:.+]] = arith.remui %[[R]], %[[S:.+]] : index
// CHECK-DAG: %[[I:.+]] = arith.divui %[[R]], %[[S]] : index
// CHECK: tensor.extract %[[W]][%[[I]], %[[J]], %[[C]]] : tensor<?x?x304xbf16>
func.func @indexed_dynamic_rows(%w: tensor<?x?x304xbf16>, %acc: tensor<?xf32>, %b: index, %s: index,
                                %rows: index) -> tensor<?xf32> {
  %init = tensor.empty(%b, %s) : tensor<?x?x300xf32>
  %cast = linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%init : tensor<?x?x300xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %k = linalg.index 2 : index
    %e = tensor.extract %w[%i, %j, %k] : tensor<?x?x304xbf16>
    %f = arith.extf %e : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<?x?x300xf32>
  %c300 = arith.constant 300 : index
  %shape = tensor.from_elements %rows, %c300 : tensor<2xindex>
  %flat = tensor.reshape %cast(%shape) : (tensor<?x?x300xf32>, tensor<2xindex>) -> tensor<?x300xf32>
  %max = linalg.generic {indexing_maps = [#id2, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%flat : tensor<?x300xf32>) outs(%acc : tensor<?xf32>) {
  ^bb0(%a: f32, %out: f32):
    %m = arith.maximumf %out, %a : f32
    linalg.yield %m : f32
  } -> tensor<?xf32>
  return %max : tensor<?xf32>
}

// The second rule moves a generic only to a value of lower rank (where the reshape merged
// dims: cross-entropy's rows): fuzzer seed 20370 hung the compile, a [1] generic reading a
// [1, 1] value (a broadcast) reshaped and another generic's [1] result computed at [1, 1], then at
// [1] for the other input (read elsewhere too), and so on. Here the adding generic keeps its
// shape; the [1, 1] broadcast of the 0-d value moves past its reshape by the first rule (it
// lacks only dims of size 1), and the pass ends.
// CHECK-LABEL: func.func @no_ping_pong(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<f32>
// CHECK: %[[B:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<1xf32>)
// CHECK: %[[XR:.+]] = tensor.reshape %[[X]]
// CHECK: %[[A:.+]] = linalg.generic {{.*}} ins(%[[XR]] : tensor<1xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<1xf32>, tensor<1xf32>)
func.func @no_ping_pong(%x: tensor<f32>, %y: tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>) {
  %i2 = tensor.empty() : tensor<1x1xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<f32>) outs(%i2 : tensor<1x1xf32>) {
  ^bb0(%v: f32, %out: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<1x1xf32>
  %i1 = tensor.empty() : tensor<1xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%y : tensor<1xf32>) outs(%i1 : tensor<1xf32>) {
  ^bb0(%v: f32, %out: f32):
    %e = math.exp %v : f32
    linalg.yield %e : f32
  } -> tensor<1xf32>
  %shape = arith.constant dense<[1]> : tensor<1xindex>
  %r = tensor.reshape %a(%shape) : (tensor<1x1xf32>, tensor<1xindex>) -> tensor<1xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%r, %b : tensor<1xf32>, tensor<1xf32>) outs(%i1 : tensor<1xf32>) {
  ^bb0(%u: f32, %v: f32, %out: f32):
    %t = arith.addf %u, %v : f32
    linalg.yield %t : f32
  } -> tensor<1xf32>
  return %s, %b : tensor<1xf32>, tensor<1xf32>
}

// A column sum cast to its [1, C] keepdim form (the cast reads the [C] sum: an input without
// the result's size-1 dim), viewed as [C] and cast again: the bias gradient of a bf16 step.
// The first cast moves past the view (its input holds the same elements in the same order)
// and fuses with the second: one pointwise kernel after the reduction, not two.
// CHECK-LABEL: func.func @keepdim_cast(
// CHECK: %[[SUM:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: %[[R:.+]] = tensor.reshape %[[SUM]]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel"]{{.*}} ins(%[[R]] : tensor<?xf32>)
// CHECK: arith.truncf
// FUSED-LABEL: func.func @keepdim_cast(
// FUSED-COUNT-2: linalg.generic
// FUSED-NOT: linalg.generic
// FUSED: arith.truncf
// FUSED-NEXT: arith.extf
func.func @keepdim_cast(%x: tensor<?x?xbf16>, %acc: tensor<?xf32>, %o1: tensor<1x?xbf16>, %o2: tensor<?xf32>,
                        %shape: tensor<1xindex>) -> tensor<?xf32> {
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x?xbf16>) outs(%acc : tensor<?xf32>) {
  ^bb0(%a: bf16, %out: f32):
    %e = arith.extf %a : bf16 to f32
    %s = arith.addf %out, %e : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %kept = linalg.generic {indexing_maps = [#row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%sum : tensor<?xf32>) outs(%o1 : tensor<1x?xbf16>) {
  ^bb0(%a: f32, %out: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<1x?xbf16>
  %view = tensor.reshape %kept(%shape) : (tensor<1x?xbf16>, tensor<1xindex>) -> tensor<?xbf16>
  %wide = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                          iterator_types = ["parallel"]}
      ins(%view : tensor<?xbf16>) outs(%o2 : tensor<?xf32>) {
  ^bb0(%a: bf16, %out: f32):
    %w = arith.extf %a : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<?xf32>
  return %wide : tensor<?xf32>
}

// A gather of rows of a table of dynamic width (BERT's position embeddings: [512, ?]),
// viewed as [1, 512, 768]: the static view fixes the width (the element counts are equal:
// 512 x ? = 1 x 512 x 768, so ? = 768). The column index is the generic's own, the row index
// 512 x d0 + d1: no division per element by the width read at run time, which kept the
// normalization kernel after it from reading the table in vectors (BERT inference,
// embeddings + LayerNorm: 71 us on the H200).
// CHECK-LABEL: func.func @indexed_inferred_width(
// CHECK-SAME: %[[W:[a-z0-9_]+]]: tensor<?x?xbf16>
// CHECK: linalg.generic {{.*}}outs({{.*}} : tensor<1x512x768xf32>)
// CHECK-NOT: arith.remui
// CHECK-NOT: arith.divui
// CHECK: %[[C:.+]] = linalg.index 2 : index
// CHECK: tensor.extract %[[W]][%{{.+}}, %[[C]]] : tensor<?x?xbf16>
// CHECK: linalg.yield
func.func @indexed_inferred_width(%w: tensor<?x?xbf16>, %ids: tensor<512xindex>, %acc: tensor<1x512xf32>) -> tensor<1x512xf32> {
  %c1 = arith.constant 1 : index
  %width = tensor.dim %w, %c1 : tensor<?x?xbf16>
  %init = tensor.empty(%width) : tensor<512x?xf32>
  %rows = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%init : tensor<512x?xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %row = tensor.extract %ids[%i] : tensor<512xindex>
    %e = tensor.extract %w[%row, %j] : tensor<?x?xbf16>
    %f = arith.extf %e : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<512x?xf32>
  %shape = arith.constant dense<[1, 512, 768]> : tensor<3xindex>
  %view = tensor.reshape %rows(%shape) : (tensor<512x?xf32>, tensor<3xindex>) -> tensor<1x512x768xf32>
  %sum = linalg.generic {indexing_maps = [#id3, affine_map<(d0, d1, d2) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%view : tensor<1x512x768xf32>) outs(%acc : tensor<1x512xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %out, %a : f32
    linalg.yield %s : f32
  } -> tensor<1x512xf32>
  return %sum : tensor<1x512xf32>
}

// The same gather when the viewed rows are also a result (Llama's embeddings: the residual
// stream, and the input of the first RMSNorm): a generic reading no input has no siblings of
// its own shape to stay with, so it moves past the reshape all the same, and the function
// returns the rows it computes in the viewed shape.
// CHECK-LABEL: func.func @indexed_result_too(
// CHECK: %[[ROWS:.+]] = linalg.generic {{.*}}outs({{.*}} : tensor<1x512x768xf32>)
// CHECK-NOT: tensor.reshape
// CHECK: linalg.generic {{.*}}ins(%[[ROWS]] : tensor<1x512x768xf32>)
// CHECK: return %[[ROWS]], %{{.+}} : tensor<1x512x768xf32>, tensor<1x512xf32>
func.func @indexed_result_too(%w: tensor<?x?xf32>, %ids: tensor<512xindex>, %acc: tensor<1x512xf32>)
    -> (tensor<1x512x768xf32>, tensor<1x512xf32>) {
  %c1 = arith.constant 1 : index
  %width = tensor.dim %w, %c1 : tensor<?x?xf32>
  %init = tensor.empty(%width) : tensor<512x?xf32>
  %rows = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%init : tensor<512x?xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %row = tensor.extract %ids[%i] : tensor<512xindex>
    %e = tensor.extract %w[%row, %j] : tensor<?x?xf32>
    linalg.yield %e : f32
  } -> tensor<512x?xf32>
  %shape = arith.constant dense<[1, 512, 768]> : tensor<3xindex>
  %view = tensor.reshape %rows(%shape) : (tensor<512x?xf32>, tensor<3xindex>) -> tensor<1x512x768xf32>
  %sum = linalg.generic {indexing_maps = [#id3, affine_map<(d0, d1, d2) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%view : tensor<1x512x768xf32>) outs(%acc : tensor<1x512xf32>) {
  ^bb0(%a: f32, %out: f32):
    %q = arith.mulf %a, %a : f32
    %s = arith.addf %out, %q : f32
    linalg.yield %s : f32
  } -> tensor<1x512xf32>
  return %view, %sum : tensor<1x512x768xf32>, tensor<1x512xf32>
}

// A cast of a multi-result generic's output viewed as rows (autocast's LayerNorm: the float32
// output viewed as [tokens, hidden], cast to bf16 for the matmul, and also a result): the
// first rule cannot move the reshape past a producer of two results, so the cast, one input,
// is computed before the view (a higher rank) and fuses into the producer; the float32 view
// stays a result, and the bf16 one is a view of the cast.
// CHECK-LABEL: func.func @cast_of_a_viewed_multi_result(
// CHECK: %[[Y:.+]]:2 = linalg.generic
// CHECK-DAG: %[[CAST:.+]] = linalg.generic {{.*}}ins(%[[Y]]#1 : tensor<2x3x8xf32>) outs(%{{.+}} : tensor<2x3x8xbf16>)
// CHECK-DAG: %[[F32:.+]] = tensor.reshape %[[Y]]#1
// CHECK-DAG: %[[BF16:.+]] = tensor.reshape %[[CAST]]
// CHECK: return %[[BF16]], %[[F32]] : tensor<6x8xbf16>, tensor<6x8xf32>
func.func @cast_of_a_viewed_multi_result(%x: tensor<2x3x8xf32>) -> (tensor<6x8xbf16>, tensor<6x8xf32>) {
  %i0 = tensor.empty() : tensor<2x3x8xf32>
  %i1 = tensor.empty() : tensor<2x3x8xf32>
  %y:2 = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x3x8xf32>) outs(%i0, %i1 : tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %o0: f32, %o1: f32):
    %e = math.exp %a : f32
    %s = arith.mulf %e, %a : f32
    linalg.yield %e, %s : f32, f32
  } -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  %shape = arith.constant dense<[6, 8]> : tensor<2xindex>
  %view = tensor.reshape %y#1(%shape) : (tensor<2x3x8xf32>, tensor<2xindex>) -> tensor<6x8xf32>
  %init = tensor.empty() : tensor<6x8xbf16>
  %cast = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                          iterator_types = ["parallel", "parallel"]}
      ins(%view : tensor<6x8xf32>) outs(%init : tensor<6x8xbf16>) {
  ^bb0(%a: f32, %out: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<6x8xbf16>
  return %cast, %view : tensor<6x8xbf16>, tensor<6x8xf32>
}
