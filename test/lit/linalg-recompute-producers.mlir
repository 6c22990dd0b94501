// linalg-recompute-producers: a cheap pointwise producer read by two kernels is cloned for
// each, and elementwise fusion then recomputes it inside them (no full tensor written and
// read back twice). Producers with math functions, reductions or a single consumer stay.
// Chains are taken last producer first: cloning `g / broadcast(s)` for its second reader
// gives the broadcast another reader, which it must be cloned for too (RMSNorm's backward).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-recompute-producers)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-recompute-producers, func.func(linalg-fuse-elementwise-ops), canonicalize, cse)' | FileCheck %s --check-prefix=FUSED

#bc = affine_map<(d0, d1) -> (d0, 0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>
#cols = affine_map<(d0, d1) -> (d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// CHECK-LABEL: func.func @broadcast_read_twice(
// CHECK-COUNT-2: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel"]} ins(%arg1 : tensor<?x1xf32>)
// FUSED-LABEL: func.func @broadcast_read_twice(
// FUSED: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%arg0, %arg1 : tensor<?x?xf32>, tensor<?x1xf32>)
// FUSED: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} ins(%arg0, %arg1 : tensor<?x?xf32>, tensor<?x1xf32>)
// FUSED-NEXT: ^bb0
// FUSED-NOT: linalg.generic
// FUSED: return
// FUSED-LABEL: func.func @chained_producers(
// FUSED: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%arg0, %arg1 : tensor<?x?xf32>, tensor<?x1xf32>)
// FUSED: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%arg0, %arg1 : tensor<?x?xf32>, tensor<?x1xf32>)
// FUSED-NOT: linalg.generic
// FUSED: return
// FUSED-LABEL: func.func @kept(
func.func @broadcast_read_twice(%g: tensor<?x?xf32>, %s: tensor<?x1xf32>, %n: index, %m: index) -> (tensor<?xf32>, tensor<?x?xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n, %m) : tensor<?x?xf32>
  %b = linalg.generic {indexing_maps = [#bc, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<?x1xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  %ec = tensor.empty(%m) : tensor<?xf32>
  %fc = linalg.fill ins(%zero : f32) outs(%ec : tensor<?xf32>) -> tensor<?xf32>
  %col = linalg.generic {indexing_maps = [#t, #t, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%g, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%fc : tensor<?xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  %prod = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    linalg.yield %p : f32
  } -> tensor<?x?xf32>
  return %col, %prod : tensor<?xf32>, tensor<?x?xf32>
}

func.func @chained_producers(%g: tensor<?x?xf32>, %s: tensor<?x1xf32>, %n: index, %m: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n, %m) : tensor<?x?xf32>
  %b = linalg.generic {indexing_maps = [#bc, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<?x1xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  %q = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %d = arith.divf %x, %y : f32
    linalg.yield %d : f32
  } -> tensor<?x?xf32>
  %ec = tensor.empty(%m) : tensor<?xf32>
  %fc = linalg.fill ins(%zero : f32) outs(%ec : tensor<?xf32>) -> tensor<?xf32>
  %col = linalg.generic {indexing_maps = [#t, #t, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%q, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%fc : tensor<?xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  %er = tensor.empty(%n) : tensor<?xf32>
  %fr = linalg.fill ins(%zero : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  %row = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%q : tensor<?x?xf32>) outs(%fr : tensor<?xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  return %col, %row : tensor<?xf32>, tensor<?xf32>
}

// CHECK-LABEL: func.func @kept(
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT: linalg.generic
func.func @kept(%x: tensor<?x?xf32>, %n: index) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %e = tensor.empty(%n, %n) : tensor<?x?xf32>
  %ex = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = math.exp %v : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %v : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.mulf %v, %v : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  return %a, %b : tensor<?x?xf32>, tensor<?x?xf32>
}

// A mask computed from the loop indices (a cat's or a slice's gradient: which half of the
// last dim an element is in) read by two kernels is recomputed in each: `linalg.index` costs
// nothing, so the mask is never written as an i8 tensor and read back.
// CHECK-LABEL: func.func @index_mask_read_twice(
// CHECK-COUNT-2: linalg.index 1 : index
// FUSED-LABEL: func.func @index_mask_read_twice(
// FUSED-COUNT-2: linalg.generic {{.*}} ins(%arg0 : tensor<4x16xf32>)
// FUSED-NOT: linalg.generic
// FUSED: return
func.func @index_mask_read_twice(%x: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %em = tensor.empty() : tensor<4x16xi1>
  %mask = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%em : tensor<4x16xi1>) {
  ^bb0(%o: i1):
    %j = linalg.index 1 : index
    %lo = arith.cmpi ult, %j, %c8 : index
    linalg.yield %lo : i1
  } -> tensor<4x16xi1>
  %e = tensor.empty() : tensor<4x16xf32>
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mask, %x : tensor<4x16xi1>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%m: i1, %v: f32, %o: f32):
    %s = arith.select %m, %v, %zero : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mask, %x : tensor<4x16xi1>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%m: i1, %v: f32, %o: f32):
    %s = arith.select %m, %zero, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %a, %b : tensor<4x16xf32>, tensor<4x16xf32>
}

// Labels shifted by one (a causal LM's: the next token, -100 past the end) read from the
// input at computed indices, under an scf.if: read by two kernels, they are recomputed in
// each (the reads cost what reading the written-out labels would).
// CHECK-LABEL: func.func @shifted_labels_read_twice(
// CHECK-COUNT-2: tensor.extract %arg0
// FUSED-LABEL: func.func @shifted_labels_read_twice(
// FUSED: linalg.generic {{.*}}outs(%{{.+}} : tensor<8x512xi8>)
// FUSED: tensor.extract %arg0
// FUSED: linalg.generic {{.*}}outs(%{{.+}} : tensor<8x512xi64>)
// FUSED: tensor.extract %arg0
// FUSED-NOT: linalg.generic
// FUSED: return
func.func @shifted_labels_read_twice(%labels: tensor<8x512xi64>) -> (tensor<8x512xi8>, tensor<8x512xi64>) {
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %ignore = arith.constant -100 : i64
  %e = tensor.empty() : tensor<8x512xi64>
  %shifted = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<8x512xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %next = arith.addi %j, %c1 : index
    %inside = arith.cmpi ult, %next, %c512 : index
    %l = scf.if %inside -> (i64) {
      %v = tensor.extract %labels[%i, %next] : tensor<8x512xi64>
      scf.yield %v : i64
    } else {
      scf.yield %ignore : i64
    }
    linalg.yield %l : i64
  } -> tensor<8x512xi64>
  %em = tensor.empty() : tensor<8x512xi8>
  %mask = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%shifted : tensor<8x512xi64>) outs(%em : tensor<8x512xi8>) {
  ^bb0(%l: i64, %o: i8):
    %keep = arith.cmpi ne, %l, %ignore : i64
    %k = arith.extui %keep : i1 to i8
    linalg.yield %k : i8
  } -> tensor<8x512xi8>
  %kept = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%shifted : tensor<8x512xi64>) outs(%e : tensor<8x512xi64>) {
  ^bb0(%l: i64, %o: i64):
    %keep = arith.cmpi ne, %l, %ignore : i64
    %z = arith.constant 0 : i64
    %s = arith.select %keep, %l, %z : i64
    linalg.yield %s : i64
  } -> tensor<8x512xi64>
  return %mask, %kept : tensor<8x512xi8>, tensor<8x512xi64>
}

// Conversions are free: the float32 sum of three bfloat16 gradients (five ops, two of them
// adds) read by a column reduction and a row kernel (Llama's RMSNorm backward after the q, k
// and v projections) is recomputed in each, not written out.
// CHECK-LABEL: func.func @converted_sum_read_twice(
// CHECK-COUNT-2: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel"]} ins(%arg0, %arg1, %arg2 : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>)
// CHECK-NOT: ins(%arg0, %arg1, %arg2
// FUSED-LABEL: func.func @converted_sum_read_twice(
// FUSED: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%arg0, %arg1, %arg2 : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>)
// FUSED: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} ins(%arg0, %arg1, %arg2 : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>)
// FUSED-NOT: linalg.generic
// FUSED: return
func.func @converted_sum_read_twice(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>, %c: tensor<?x?xbf16>, %n: index, %m: index) -> (tensor<?xf32>, tensor<?x?xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n, %m) : tensor<?x?xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b, %c : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%x: bf16, %y: bf16, %z: bf16, %o: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %zf = arith.extf %z : bf16 to f32
    %xy = arith.addf %xf, %yf : f32
    %xyz = arith.addf %xy, %zf : f32
    linalg.yield %xyz : f32
  } -> tensor<?x?xf32>
  %ec = tensor.empty(%m) : tensor<?xf32>
  %fc = linalg.fill ins(%zero : f32) outs(%ec : tensor<?xf32>) -> tensor<?xf32>
  %col = linalg.generic {indexing_maps = [#t, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%s : tensor<?x?xf32>) outs(%fc : tensor<?xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %p = arith.mulf %x, %x : f32
    linalg.yield %p : f32
  } -> tensor<?x?xf32>
  return %col, %sq : tensor<?xf32>, tensor<?x?xf32>
}

// A cross-entropy's one-hot gradient, where(iota == label, -1, 0) * (label != -100 ? a / b : 0):
// seven ops, four of them on the row's label and the scalars, computed once for a thread's
// elements along the row: three counted, and it is recomputed. The same body with five ops
// on each element stays shared.
// CHECK-LABEL: func.func @one_hot_read_twice(
// CHECK-COUNT-2: linalg.index 1
// CHECK-LABEL: func.func @varying_ops_counted(
// CHECK: linalg.index 1
// CHECK-NOT: linalg.index 1
// CHECK: return
func.func @one_hot_read_twice(%labels: tensor<?x1xi64>, %a: tensor<f32>, %b: tensor<f32>, %x: tensor<?x?xf32>, %n: index, %m: index) -> (tensor<?xf32>, tensor<?x?xf32>) {
  %zero = arith.constant 0.0 : f32
  %minus = arith.constant -1.0 : f32
  %ignore = arith.constant -100 : i64
  %c0 = arith.constant 0 : i64
  %e = tensor.empty(%n, %m) : tensor<?x?xf32>
  %hot = linalg.generic {indexing_maps = [#bc, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%labels, %a, %b : tensor<?x1xi64>, tensor<f32>, tensor<f32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%l: i64, %va: f32, %vb: f32, %o: f32):
    %keep = arith.cmpi ne, %l, %ignore : i64
    %q = arith.divf %va, %vb : f32
    %scale = arith.select %keep, %q, %zero : f32
    %label = arith.select %keep, %l, %c0 : i64
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i64
    %is = arith.cmpi eq, %ii, %label : i64
    %v = arith.select %is, %minus, %zero : f32
    %r = arith.mulf %v, %scale : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %er = tensor.empty(%n) : tensor<?xf32>
  %fr = linalg.fill ins(%zero : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%hot : tensor<?x?xf32>) outs(%fr : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%hot, %x : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%h: f32, %v: f32, %o: f32):
    %s = arith.subf %h, %v : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %sum, %y : tensor<?xf32>, tensor<?x?xf32>
}

func.func @varying_ops_counted(%labels: tensor<?x1xi64>, %x: tensor<?x?xf32>, %n: index, %m: index) -> (tensor<?xf32>, tensor<?x?xf32>) {
  %zero = arith.constant 0.0 : f32
  %minus = arith.constant -1.0 : f32
  %c3 = arith.constant 3 : i64
  %e = tensor.empty(%n, %m) : tensor<?x?xf32>
  %hot = linalg.generic {indexing_maps = [#bc, #id], iterator_types = ["parallel", "parallel"]}
      ins(%labels : tensor<?x1xi64>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%l: i64, %o: f32):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i64
    %j = arith.muli %ii, %c3 : i64
    %k = arith.addi %j, %c3 : i64
    %is = arith.cmpi eq, %k, %l : i64
    %v = arith.select %is, %minus, %zero : f32
    %r = arith.mulf %v, %v : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %er = tensor.empty(%n) : tensor<?xf32>
  %fr = linalg.fill ins(%zero : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%hot : tensor<?x?xf32>) outs(%fr : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%hot, %x : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%h: f32, %v: f32, %o: f32):
    %s = arith.subf %h, %v : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %sum, %y : tensor<?xf32>, tensor<?x?xf32>
}

// log_softmax's x - where(isinf(m), 0, m): a math function of the row's maximum is computed
// once a row, so the subtraction is recomputed by both readers.
// CHECK-LABEL: func.func @finite_maximum_subtracted(
// CHECK-COUNT-2: math.absf
func.func @finite_maximum_subtracted(%x: tensor<?x?xf32>, %m: tensor<?x1xf32>, %n: index, %k: index) -> (tensor<?xf32>, tensor<?x?xf32>) {
  %zero = arith.constant 0.0 : f32
  %inf = arith.constant 0x7F800000 : f32
  %e = tensor.empty(%n, %k) : tensor<?x?xf32>
  %shifted = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : tensor<?x?xf32>, tensor<?x1xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %mx: f32, %o: f32):
    %a = math.absf %mx : f32
    %isinf = arith.cmpf oeq, %a, %inf : f32
    %r = arith.select %isinf, %zero, %mx : f32
    %s = arith.subf %v, %r : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  %er = tensor.empty(%n) : tensor<?xf32>
  %fr = linalg.fill ins(%zero : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%shifted : tensor<?x?xf32>) outs(%fr : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %ex = math.exp %v : f32
    %t = arith.addf %acc, %ex : f32
    linalg.yield %t : f32
  } -> tensor<?xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%shifted : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = arith.mulf %v, %v : f32
    linalg.yield %t : f32
  } -> tensor<?x?xf32>
  return %sum, %y : tensor<?xf32>, tensor<?x?xf32>
}
