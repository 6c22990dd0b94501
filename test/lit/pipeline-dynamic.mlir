// The grouping pipeline on dynamic sizes (`?` dims, `fusion.size` and index arithmetic as
// operands): fusion-cse, fusion-dce, fusion-group, fusion-strip-bookend-views, fusion-segment.
// Index values a group needs become its `index` arguments; views with index operands move to
// the caller with them; domains are compared by where their sizes come from, not by the
// spelling `?x?` (two `?x?` tensors are one domain only when the IR shows equal sizes).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-group, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-group, fusion-strip-bookend-views, fusion-segment)' | mlir-opt --irdl-file=%irdl > /dev/null
// fusion-group alone does not materialize a value read only for its shape either:
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group)' | FileCheck %s --check-prefix=GROUP
// The same with single-node groups and a small argument limit still verifies:
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-group{single-node=true max-args=4}, fusion-strip-bookend-views{max-args=4}, fusion-segment)' | mlir-opt --irdl-file=%irdl > /dev/null

// LayerNorm -> linear -> tanh-GELU -> flatten, all sizes dynamic, with a duplicate op
// (fusion-cse) and a dead one (fusion-dce): a normalization group, the linear in the caller,
// a pointwise group; the flattening reshape (size from arith.muli) leaves as a view.
// CHECK-LABEL: func.func private @block_group0(
// CHECK-SAME: %arg0: tensor<?x?xf32>, %arg1: index, %arg2: index) -> tensor<?x?xf32> attributes {fusion.group, fusion.segments = ["normalization"]}
// CHECK-NOT: fusion.segment = 1
// CHECK: return
// CHECK-LABEL: func.func private @block_group1(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["pointwise"]}
// CHECK-NOT: fusion.reshape
// CHECK: "fusion.tanh"
// CHECK-NOT: fusion.reshape
// CHECK: return
// CHECK-LABEL: func.func @block(
// CHECK-SAME: attributes {fusion.kernels = 2 : i64}
// CHECK-NOT: "fusion.neg"
// CHECK: %[[D0:.*]] = "fusion.size"(%arg0) {dim = 0 : i64}
// CHECK: %[[D1:.*]] = "fusion.size"(%arg0) {dim = 1 : i64}
// CHECK: %[[N:.*]] = call @block_group0(%arg0, %[[D0]], %[[D1]])
// CHECK: %[[L:.*]] = "fusion.linear"(%[[N]], %arg1)
// CHECK: %[[G:.*]] = call @block_group1(%[[L]]
// CHECK: %[[R:.*]] = "fusion.reshape"(%[[G]], %{{.*}}) {shape = array<i64: -1>}
// CHECK-NEXT: return %[[R]]
func.func @block(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>) -> tensor<?xf32> {
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%x) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %mean = "fusion.mean"(%x) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %mb = "fusion.broadcast_in_dim"(%mean, %d0, %d1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %c = "fusion.sub"(%x, %mb) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %c2 = "fusion.sub"(%x, %mb) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %sq = "fusion.mul"(%c, %c2) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %var = "fusion.mean"(%sq) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %r = "fusion.rsqrt"(%var) : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %rb = "fusion.broadcast_in_dim"(%r, %d0, %d1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %n = "fusion.mul"(%c, %rb) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %dead = "fusion.neg"(%n) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %l = "fusion.linear"(%n, %w) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t = "fusion.tanh"(%l) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %g = "fusion.mul"(%l, %t) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %e0 = "fusion.size"(%w) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %flat = arith.muli %d0, %e0 : index
  %y = "fusion.reshape"(%g, %flat) {shape = array<i64: -1>} : (tensor<?x?xf32>, index) -> tensor<?xf32>
  return %y : tensor<?xf32>
}

// A value read only for its shape is not computed: fusion-dce (and fusion-group, without
// fusion-dce) takes the sizes of tanh(exp(x)) from %x, and exp and tanh go.
// GROUP-LABEL: func.func private @shape_only_group0(
// GROUP-NEXT: "fusion.broadcast_in_dim"
// GROUP-NEXT: "fusion.mul"
// GROUP-NEXT: "fusion.neg"
// GROUP-NEXT: return
// GROUP-LABEL: func.func @shape_only(
// GROUP-NEXT: "fusion.size"(%arg0) {dim = 0 : i64}
// GROUP-NEXT: "fusion.size"(%arg0) {dim = 1 : i64}
// GROUP-NEXT: call @shape_only_group0(
// GROUP-NEXT: return
// CHECK-LABEL: func.func private @shape_only_group0(
// CHECK-NOT: "fusion.exp"
// CHECK: "fusion.mul"
// CHECK-LABEL: func.func @shape_only(
// CHECK-SAME: attributes {fusion.kernels = 1 : i64}
// CHECK-NOT: "fusion.exp"
// CHECK-NOT: "fusion.tanh"
// CHECK: "fusion.size"(%arg0) {dim = 0 : i64}
// CHECK: "fusion.size"(%arg0) {dim = 1 : i64}
func.func @shape_only(%x: tensor<?x?xf32>, %w: tensor<?xf32>) -> tensor<?x?xf32> {
  %e = "fusion.exp"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %t = "fusion.tanh"(%e) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %d0 = "fusion.size"(%t) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%t) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %wb = "fusion.broadcast_in_dim"(%w, %d0, %d1) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, -1>} : (tensor<?xf32>, index, index) -> tensor<?x?xf32>
  %m = "fusion.mul"(%x, %wb) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %n = "fusion.neg"(%m) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %n : tensor<?x?xf32>
}

// A row sum of %x (N x M) broadcast back onto %x's own sizes is a normalization ...
// CHECK-LABEL: func.func private @same_extents_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["normalization"]}
// CHECK-LABEL: func.func @same_extents(
// CHECK-SAME: attributes {fusion.kernels = 1 : i64}
func.func @same_extents(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %s = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%x) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %b = "fusion.broadcast_in_dim"(%s, %d0, %d1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %y = "fusion.div"(%x, %b) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %e = "fusion.exp"(%y) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %e : tensor<?x?xf32>
}

// ... but broadcast onto %z (N x K, only N shared), it is work over another domain: a
// reduction kernel and a pointwise kernel, as for static M != K, although both print `?x?`.
// CHECK-LABEL: func.func private @other_extents_group0(
// CHECK-SAME: attributes {fusion.group, fusion.segments = ["reduction", "pointwise"]}
// CHECK-LABEL: func.func @other_extents(
// CHECK-SAME: attributes {fusion.kernels = 2 : i64}
func.func @other_extents(%x: tensor<?x?xf32>, %z: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %s = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = true} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %d0 = "fusion.size"(%z) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%z) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %b = "fusion.broadcast_in_dim"(%s, %d0, %d1) {broadcast_dims = array<i64: 0, 1>, shape = array<i64: -1, -1>} : (tensor<?x1xf32>, index, index) -> tensor<?x?xf32>
  %y = "fusion.div"(%z, %b) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %e = "fusion.exp"(%y) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %e : tensor<?x?xf32>
}

// Two chains that share only the size values of their broadcasts read no common tensor:
// they are not siblings (horizontal fusion is over non-scalar tensors, as in nvFuser), so
// they stay two groups.
// CHECK-LABEL: func.func private @shared_sizes_group0(
// CHECK-NEXT: "fusion.constant"
// CHECK-NEXT: "fusion.broadcast_in_dim"
// CHECK-NEXT: "fusion.mul"
// CHECK-NEXT: "fusion.exp"
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @shared_sizes_group1(
// CHECK-NEXT: "fusion.constant"
// CHECK-NEXT: "fusion.broadcast_in_dim"
// CHECK-NEXT: "fusion.add"
// CHECK-NEXT: "fusion.tanh"
// CHECK-NEXT: return
// CHECK-LABEL: func.func @shared_sizes(
// CHECK-SAME: attributes {fusion.kernels = 2 : i64}
func.func @shared_sizes(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x?xf32>) -> index
  %d1 = "fusion.size"(%x) {dim = 1 : i64} : (tensor<?x?xf32>) -> index
  %two = "fusion.constant"() {value = 2.0 : f64} : () -> tensor<f32>
  %b2 = "fusion.broadcast_in_dim"(%two, %d0, %d1) {broadcast_dims = array<i64>, shape = array<i64: -1, -1>} : (tensor<f32>, index, index) -> tensor<?x?xf32>
  %m = "fusion.mul"(%x, %b2) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %e = "fusion.exp"(%m) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %one = "fusion.constant"() {value = 1.0 : f64} : () -> tensor<f32>
  %b1 = "fusion.broadcast_in_dim"(%one, %d0, %d1) {broadcast_dims = array<i64>, shape = array<i64: -1, -1>} : (tensor<f32>, index, index) -> tensor<?x?xf32>
  %a = "fusion.add"(%y, %b1) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %t = "fusion.tanh"(%a) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %e, %t : tensor<?x?xf32>, tensor<?x?xf32>
}
