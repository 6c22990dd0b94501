// linalg-merge-siblings: siblings reading one input over the same domain (pointwise work
// elementwise fusion leaves apart; column reductions over one input's rows, e.g. LayerNorm
// backward's weight and bias gradients) become one generic reading each input once; column
// reductions over domains the IR proves equal merge without a shared input; a pointwise
// consumer merges with its pointwise producer where the producer has other users.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(linalg-merge-siblings)' | FileCheck %s

#xy = affine_map<(d0, d1) -> (d1, d0)>
#col = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @weight_and_bias_grads(
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<?x?xf32>, %[[XHAT:[a-z0-9]+]]: tensor<?x?xf32>
// CHECK: %[[R:.+]]:2 = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[G]], %[[XHAT]] : tensor<?x?xf32>, tensor<?x?xf32>)
// CHECK-NEXT: ^bb0(%[[g:.+]]: f32, %[[x:.+]]: f32, %[[dw:.+]]: f32, %[[db:.+]]: f32):
// CHECK-NEXT: %[[P:.+]] = arith.mulf %[[g]], %[[x]]
// CHECK-NEXT: %[[W:.+]] = arith.addf %[[dw]], %[[P]]
// CHECK-NEXT: %[[B:.+]] = arith.addf %[[db]], %[[g]]
// CHECK-NEXT: linalg.yield %[[W]], %[[B]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @weight_and_bias_grads(%g: tensor<?x?xf32>, %xhat: tensor<?x?xf32>, %n: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty(%n) : tensor<?xf32>
  %i0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<?xf32>) -> tensor<?xf32>
  %dw = linalg.generic {indexing_maps = [#xy, #xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%g, %xhat : tensor<?x?xf32>, tensor<?x?xf32>) outs(%i0 : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %i1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %db = linalg.generic {indexing_maps = [#xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%g : tensor<?x?xf32>) outs(%i1 : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %dw, %db : tensor<?xf32>, tensor<?xf32>
}

// Not merged: row reductions (innermost dim reduced: normalization chains take them), a
// sibling that reads the other's result, and different iterators.
// CHECK-LABEL: func.func @kept(
// CHECK-COUNT-4: linalg.generic
func.func @kept(%x: tensor<?x?xf32>, %n: index) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?x?xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty(%n) : tensor<?xf32>
  %r0 = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x?xf32>) outs(%e0 : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x?xf32>) outs(%r0 : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.maximumf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %c0 = linalg.generic {indexing_maps = [#xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x?xf32>) outs(%r1 : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %e2 = tensor.empty(%n, %n) : tensor<?x?xf32>
  %p = linalg.generic {indexing_maps = [#xy, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<?x?xf32>
  return %r0, %r1, %c0, %p : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?x?xf32>
}

// Pointwise siblings (exp(x) and sin(x) * y): one generic with two results.
// CHECK-LABEL: func.func @pointwise_siblings(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x?xf32>, %[[Y:[a-z0-9]+]]: tensor<?x?xf32>
// CHECK: %[[R:.+]]:2 = linalg.generic
// CHECK-SAME: ins(%[[X]], %[[Y]] : tensor<?x?xf32>, tensor<?x?xf32>)
// CHECK: math.exp
// CHECK: math.sin
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @pointwise_siblings(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %n: index) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %e = tensor.empty(%n, %n) : tensor<?x?xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = math.exp %v : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = math.sin %v : f32
    %r = arith.mulf %s, %w : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  return %a, %b : tensor<?x?xf32>, tensor<?x?xf32>
}

// Column reductions without a shared input, over domains the IR proves equal: %dx is
// computed over %g's dims (an elementwise generic ties them), so sum(g * xhat) and sum(dx)
// (a LayerNorm backward's weight and dropout-bias gradients) become one generic at the later
// one's place; the copy of the first result into a [1, ?] output moves after it.
// CHECK-LABEL: func.func @equal_domains(
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<?x?xf32>, %[[XHAT:[a-z0-9]+]]: tensor<?x?xf32>, %[[M:[a-z0-9]+]]: tensor<?x?xf32>
// CHECK: %[[DX:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK: %[[R:.+]]:2 = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[G]], %[[XHAT]], %[[DX]] : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>)
// CHECK: %[[COPY:.+]] = linalg.generic {{.*}} ins(%[[R]]#0 : tensor<?xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[COPY]], %[[DX]], %[[R]]#1
func.func @equal_domains(%g: tensor<?x?xf32>, %xhat: tensor<?x?xf32>, %m: tensor<?x?xf32>) -> (tensor<1x?xf32>, tensor<?x?xf32>, tensor<?xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = tensor.dim %g, %c0 : tensor<?x?xf32>
  %cols = tensor.dim %g, %c1 : tensor<?x?xf32>
  %e0 = tensor.empty(%cols) : tensor<?xf32>
  %i0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<?xf32>) -> tensor<?xf32>
  %dw = linalg.generic {indexing_maps = [#xy, #xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%g, %xhat : tensor<?x?xf32>, tensor<?x?xf32>) outs(%i0 : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %e1 = tensor.empty(%cols) : tensor<1x?xf32>
  %dw2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dw : tensor<?xf32>) outs(%e1 : tensor<1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<1x?xf32>
  %e2 = tensor.empty(%rows, %cols) : tensor<?x?xf32>
  %dx = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %m : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    linalg.yield %p : f32
  } -> tensor<?x?xf32>
  %e3 = tensor.empty(%cols) : tensor<?xf32>
  %i3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<?xf32>) -> tensor<?xf32>
  %db = linalg.generic {indexing_maps = [#xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%dx : tensor<?x?xf32>) outs(%i3 : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %dw2, %dx, %db : tensor<1x?xf32>, tensor<?x?xf32>, tensor<?xf32>
}

// Not merged: column reductions over domains the IR does not tie (%p and %q are unrelated).
// CHECK-LABEL: func.func @unrelated_domains(
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT: linalg.generic
func.func @unrelated_domains(%p: tensor<?x?xf32>, %q: tensor<?x?xf32>, %n: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty(%n) : tensor<?xf32>
  %i0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<?xf32>) -> tensor<?xf32>
  %a = linalg.generic {indexing_maps = [#xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<?x?xf32>) outs(%i0 : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %i1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %b = linalg.generic {indexing_maps = [#xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%q : tensor<?x?xf32>) outs(%i1 : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %a, %b : tensor<?xf32>, tensor<?xf32>
}

// Not merged: two column reductions over one domain that each read a pointwise generic's
// result (two bias gradients of results the function returns): apart, the GPU backend
// computes each producer in its reduction's kernel; merged, one kernel would read both back.
// CHECK-LABEL: func.func @two_computed_reads(
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
func.func @two_computed_reads(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = tensor.dim %x, %c0 : tensor<?x?xf32>
  %cols = tensor.dim %x, %c1 : tensor<?x?xf32>
  %e0 = tensor.empty(%rows, %cols) : tensor<?x?xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%e0 : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  } -> tensor<?x?xf32>
  %e1 = tensor.empty(%rows, %cols) : tensor<?x?xf32>
  %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<?x?xf32>) outs(%e1 : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.exp %a : f32
    linalg.yield %t : f32
  } -> tensor<?x?xf32>
  %e2 = tensor.empty(%cols) : tensor<?xf32>
  %i2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?xf32>) -> tensor<?xf32>
  %sy = linalg.generic {indexing_maps = [#xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<?x?xf32>) outs(%i2 : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %e3 = tensor.empty(%cols) : tensor<?xf32>
  %i3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<?xf32>) -> tensor<?xf32>
  %sz = linalg.generic {indexing_maps = [#xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%z : tensor<?x?xf32>) outs(%i3 : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %y, %z, %sy, %sz : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

// A pointwise consumer of a pointwise producer that has other users (here: the function's
// result; elementwise fusion leaves such producers apart): one generic computing both, the
// consumer taking the producer's value instead of reading it back. The producer's body may
// hold regions (a rotate-half's scf.if): its ops move into the merged body.
// CHECK-LABEL: func.func @consumer_of_a_producer_with_other_users(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x?xf32>, %[[Y:[a-z0-9]+]]: tensor<?x?xf32>
// CHECK: %[[R:.+]]:2 = linalg.generic
// CHECK-SAME: ins(%[[X]], %[[Y]] : tensor<?x?xf32>, tensor<?x?xf32>)
// CHECK-NEXT: ^bb0(%[[x:.+]]: f32, %[[y:.+]]: f32, %{{.+}}: f32, %{{.+}}: bf16):
// CHECK-NEXT: %[[C:.+]] = arith.cmpf ogt, %[[x]], %[[y]]
// CHECK-NEXT: %[[P:.+]] = scf.if %[[C]]
// CHECK: %[[T:.+]] = arith.truncf %[[P]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[P]], %[[T]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @consumer_of_a_producer_with_other_users(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %m: index, %n: index) -> (tensor<?x?xf32>, tensor<?x?xbf16>) {
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %c = arith.cmpf ogt, %a, %b : f32
    %v = scf.if %c -> (f32) {
      scf.yield %a : f32
    } else {
      %d = arith.mulf %a, %b : f32
      scf.yield %d : f32
    }
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  %e16 = tensor.empty(%m, %n) : tensor<?x?xbf16>
  %q = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<?x?xf32>) outs(%e16 : tensor<?x?xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x?xbf16>
  return %p, %q : tensor<?x?xf32>, tensor<?x?xbf16>
}

// Not merged: the consumer reads the producer transposed (another domain, another order).
// CHECK-LABEL: func.func @transposed_consumer(
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT: linalg.generic
func.func @transposed_consumer(%x: tensor<?x?xf32>, %n: index) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %e = tensor.empty(%n, %n) : tensor<?x?xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.mulf %a, %a : f32
    linalg.yield %d : f32
  } -> tensor<?x?xf32>
  %q = linalg.generic {indexing_maps = [#xy, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %a : f32
    linalg.yield %d : f32
  } -> tensor<?x?xf32>
  return %p, %q : tensor<?x?xf32>, tensor<?x?xf32>
}

// Whole-tensor reductions reading one input (a cross-entropy's count of labels kept and its
// loss sum): one generic with both results, each its own type and combiner.
// CHECK-LABEL: func.func @whole_tensor_reductions(
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction"]{{.*}} ins(%{{.*}}, %{{.*}} : tensor<?xi64>, tensor<?xf32>) outs(%{{.*}}, %{{.*}} : tensor<i64>, tensor<f32>)
// CHECK: arith.extui
// CHECK: arith.addi
// CHECK: arith.select
// CHECK: arith.addf
// CHECK: linalg.yield %{{.*}}, %{{.*}} : i64, f32
// CHECK-NOT: linalg.generic
#all = affine_map<(d0) -> (d0)>
#none = affine_map<(d0) -> ()>
func.func @whole_tensor_reductions(%labels: tensor<?xi64>, %v: tensor<?xf32>) -> (tensor<i64>, tensor<f32>) {
  %ignore = arith.constant -100 : i64
  %zi = arith.constant 0 : i64
  %zf = arith.constant 0.0 : f32
  %ei = tensor.empty() : tensor<i64>
  %fi = linalg.fill ins(%zi : i64) outs(%ei : tensor<i64>) -> tensor<i64>
  %count = linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction"]}
      ins(%labels : tensor<?xi64>) outs(%fi : tensor<i64>) {
  ^bb0(%l: i64, %acc: i64):
    %keep = arith.cmpi ne, %l, %ignore : i64
    %one = arith.extui %keep : i1 to i64
    %s = arith.addi %acc, %one : i64
    linalg.yield %s : i64
  } -> tensor<i64>
  %ef = tensor.empty() : tensor<f32>
  %ff = linalg.fill ins(%zf : f32) outs(%ef : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#all, #all, #none], iterator_types = ["reduction"]}
      ins(%labels, %v : tensor<?xi64>, tensor<?xf32>) outs(%ff : tensor<f32>) {
  ^bb0(%l: i64, %x: f32, %acc: f32):
    %keep = arith.cmpi ne, %l, %ignore : i64
    %kept = arith.select %keep, %x, %zf : f32
    %s = arith.addf %acc, %kept : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %count, %loss : tensor<i64>, tensor<f32>
}

// A merge that lets an earlier pair merge: exp(x) and sin(x) are siblings, but the column
// sum of exp(x) sits between them and its result is read before sin(x) (by %v), so exp(x)
// cannot move to sin(x)'s place. The column sum merges with the later column sum of exp(x)^2
// (%v moves after them); then exp(x) and sin(x) merge too. The pass scans on from a merge
// and, at the end, scans once more from the first generic: the result is the fixpoint.
// CHECK-LABEL: func.func @a_merge_unblocks_an_earlier_pair(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK: %[[P:.+]]:2 = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK-SAME: ins(%[[X]] : tensor<4x8xf32>)
// CHECK: %[[S:.+]]:2 = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[P]]#0 : tensor<4x8xf32>)
// CHECK: %[[V:.+]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel"]
// CHECK-SAME: ins(%[[S]]#0 : tensor<8xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[P]]#0, %[[P]]#1, %[[V]], %[[S]]#1
#c1 = affine_map<(d0) -> (d0)>
func.func @a_merge_unblocks_an_earlier_pair(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %ec = tensor.empty() : tensor<8xf32>
  %ic = linalg.fill ins(%zero : f32) outs(%ec : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x8xf32>) outs(%ic : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %v = linalg.generic {indexing_maps = [#c1, #c1], iterator_types = ["parallel"]}
      ins(%sum : tensor<8xf32>) outs(%ec : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %sin = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.sin %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %sq = linalg.generic {indexing_maps = [#xy, #col], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x8xf32>) outs(%ic : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %p = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %ex, %sin, %v, %sq : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}
