// Round trip of every kind of fusion op through mlirfuse-opt (twice) and through upstream
// mlir-opt with the IRDL definition loaded: same ops, same operands, attributes and types.
// RUN: mlirfuse-opt %s | mlirfuse-opt | FileCheck %s
// RUN: mlir-opt --irdl-file=%irdl %s | FileCheck %s
// RUN: mlirfuse-opt %s | mlir-opt --irdl-file=%irdl | mlirfuse-opt | FileCheck %s

// Every elementwise op of the op table: unary, predicates (-> i1), bitwise (integers),
// logical (i1), binary, comparisons (-> i1) and the ternary where/clamp/lerp.
// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME: %[[A:[a-z0-9_]+]]: tensor<?x4xf32>, %[[B:[a-z0-9_]+]]: tensor<?x4xf32>, %[[E:[a-z0-9_]+]]: tensor<?x4xf32>,
// CHECK-SAME: %[[C:[a-z0-9_]+]]: tensor<?x4xi1>, %[[D:[a-z0-9_]+]]: tensor<?x4xi1>,
// CHECK-SAME: %[[I:[a-z0-9_]+]]: tensor<?x4xi32>, %[[J:[a-z0-9_]+]]: tensor<?x4xi32>) {
func.func @elementwise(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>, %e: tensor<?x4xf32>,
                       %c: tensor<?x4xi1>, %d: tensor<?x4xi1>,
                       %i: tensor<?x4xi32>, %j: tensor<?x4xi32>) {
  // CHECK-NEXT: = "fusion.neg"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %neg = "fusion.neg"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.abs"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %abs = "fusion.abs"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.exp"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %exp = "fusion.exp"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.exp2"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %exp2 = "fusion.exp2"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.expm1"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %expm1 = "fusion.expm1"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.log"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %log = "fusion.log"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.log2"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %log2 = "fusion.log2"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.log1p"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %log1p = "fusion.log1p"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.sqrt"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %sqrt = "fusion.sqrt"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.rsqrt"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %rsqrt = "fusion.rsqrt"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.reciprocal"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %reciprocal = "fusion.reciprocal"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.sin"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %sin = "fusion.sin"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.cos"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %cos = "fusion.cos"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.tanh"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %tanh = "fusion.tanh"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.sigmoid"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %sigmoid = "fusion.sigmoid"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.erf"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %erf = "fusion.erf"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.relu"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %relu = "fusion.relu"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.silu"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %silu = "fusion.silu"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.floor"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %floor = "fusion.floor"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.ceil"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %ceil = "fusion.ceil"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.round"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %round = "fusion.round"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.sign"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %sign = "fusion.sign"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.isnan"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xi1>
  %isnan = "fusion.isnan"(%a) : (tensor<?x4xf32>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.isinf"(%[[A]]) : (tensor<?x4xf32>) -> tensor<?x4xi1>
  %isinf = "fusion.isinf"(%a) : (tensor<?x4xf32>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.logical_not"(%[[C]]) : (tensor<?x4xi1>) -> tensor<?x4xi1>
  %logical_not = "fusion.logical_not"(%c) : (tensor<?x4xi1>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.bitwise_not"(%[[I]]) : (tensor<?x4xi32>) -> tensor<?x4xi32>
  %bitwise_not = "fusion.bitwise_not"(%i) : (tensor<?x4xi32>) -> tensor<?x4xi32>
  // CHECK-NEXT: = "fusion.add"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %add = "fusion.add"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.sub"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %sub = "fusion.sub"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.mul"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %mul = "fusion.mul"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.div"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %div = "fusion.div"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.pow"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %pow = "fusion.pow"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.fmod"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %fmod = "fusion.fmod"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.remainder"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %remainder = "fusion.remainder"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.maximum"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %maximum = "fusion.maximum"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.minimum"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %minimum = "fusion.minimum"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.atan2"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %atan2 = "fusion.atan2"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.eq"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  %eq = "fusion.eq"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.ne"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  %ne = "fusion.ne"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.lt"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  %lt = "fusion.lt"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.le"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  %le = "fusion.le"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.gt"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  %gt = "fusion.gt"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.ge"(%[[A]], %[[B]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  %ge = "fusion.ge"(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.logical_and"(%[[C]], %[[D]]) : (tensor<?x4xi1>, tensor<?x4xi1>) -> tensor<?x4xi1>
  %logical_and = "fusion.logical_and"(%c, %d) : (tensor<?x4xi1>, tensor<?x4xi1>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.logical_or"(%[[C]], %[[D]]) : (tensor<?x4xi1>, tensor<?x4xi1>) -> tensor<?x4xi1>
  %logical_or = "fusion.logical_or"(%c, %d) : (tensor<?x4xi1>, tensor<?x4xi1>) -> tensor<?x4xi1>
  // CHECK-NEXT: = "fusion.bitwise_and"(%[[I]], %[[J]]) : (tensor<?x4xi32>, tensor<?x4xi32>) -> tensor<?x4xi32>
  %bitwise_and = "fusion.bitwise_and"(%i, %j) : (tensor<?x4xi32>, tensor<?x4xi32>) -> tensor<?x4xi32>
  // CHECK-NEXT: = "fusion.bitwise_or"(%[[I]], %[[J]]) : (tensor<?x4xi32>, tensor<?x4xi32>) -> tensor<?x4xi32>
  %bitwise_or = "fusion.bitwise_or"(%i, %j) : (tensor<?x4xi32>, tensor<?x4xi32>) -> tensor<?x4xi32>
  // CHECK-NEXT: = "fusion.bitwise_xor"(%[[I]], %[[J]]) : (tensor<?x4xi32>, tensor<?x4xi32>) -> tensor<?x4xi32>
  %bitwise_xor = "fusion.bitwise_xor"(%i, %j) : (tensor<?x4xi32>, tensor<?x4xi32>) -> tensor<?x4xi32>
  // CHECK-NEXT: = "fusion.where"(%[[C]], %[[A]], %[[B]]) : (tensor<?x4xi1>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %where = "fusion.where"(%c, %a, %b) : (tensor<?x4xi1>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.clamp"(%[[A]], %[[B]], %[[E]]) : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %clamp = "fusion.clamp"(%a, %b, %e) : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: = "fusion.lerp"(%[[A]], %[[B]], %[[E]]) : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %lerp = "fusion.lerp"(%a, %b, %e) : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: return
  return
}

// Reductions: axes/keepdim/correction attributes survive; var_mean has two results.
// CHECK-LABEL: func.func @reductions(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x4xf32>, %[[H:[a-z0-9_]+]]: tensor<?x4xf16>)
// CHECK-NEXT: = "fusion.sum"(%[[X]]) {axes = array<i64: 1>, keepdim = false} : (tensor<?x4xf32>) -> tensor<?xf32>
// CHECK-NEXT: = "fusion.prod"(%[[X]]) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<?x4xf32>) -> tensor<f32>
// CHECK-NEXT: = "fusion.max"(%[[X]]) {axes = array<i64: 0>, keepdim = true} : (tensor<?x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT: = "fusion.min"(%[[H]]) {axes = array<i64: 1>, keepdim = true} : (tensor<?x4xf16>) -> tensor<?x1xf16>
// CHECK-NEXT: = "fusion.mean"(%[[X]]) {axes = array<i64: 1>, keepdim = false} : (tensor<?x4xf32>) -> tensor<?xf32>
// CHECK-NEXT: = "fusion.var"(%[[X]]) {axes = array<i64: 1>, correction = 0.000000e+00 : f64, keepdim = false} : (tensor<?x4xf32>) -> tensor<?xf32>
// CHECK-NEXT: %[[VM:[0-9]+]]:2 = "fusion.var_mean"(%[[X]]) {axes = array<i64: 1>, correction = 1.000000e+00 : f64, keepdim = false} : (tensor<?x4xf32>) -> (tensor<?xf32>, tensor<?xf32>)
// CHECK-NEXT: return %[[VM]]#1, %[[VM]]#0 : tensor<?xf32>, tensor<?xf32>
func.func @reductions(%x: tensor<?x4xf32>, %h: tensor<?x4xf16>) -> (tensor<?xf32>, tensor<?xf32>) {
  %sum = "fusion.sum"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<?x4xf32>) -> tensor<?xf32>
  %prod = "fusion.prod"(%x) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<?x4xf32>) -> tensor<f32>
  %max = "fusion.max"(%x) {keepdim = true, axes = array<i64: 0>} : (tensor<?x4xf32>) -> tensor<1x4xf32>
  %min = "fusion.min"(%h) {axes = array<i64: 1>, keepdim = true} : (tensor<?x4xf16>) -> tensor<?x1xf16>
  %mean = "fusion.mean"(%x) {axes = array<i64: 1>, keepdim = false} : (tensor<?x4xf32>) -> tensor<?xf32>
  %var = "fusion.var"(%x) {axes = array<i64: 1>, keepdim = false, correction = 0.0 : f64} : (tensor<?x4xf32>) -> tensor<?xf32>
  %vm:2 = "fusion.var_mean"(%x) {axes = array<i64: 1>, keepdim = false, correction = 1.0 : f64} : (tensor<?x4xf32>) -> (tensor<?xf32>, tensor<?xf32>)
  return %vm#1, %vm#0 : tensor<?xf32>, tensor<?xf32>
}

// Shape ops. broadcast_in_dim/expand/reshape take their dynamic extents as trailing
// index operands (from fusion.size, or index math on them); a static reshape has none.
// CHECK-LABEL: func.func @shapes(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x4xf32>, %[[V:[a-z0-9_]+]]: tensor<4xf32>, %[[R:[a-z0-9_]+]]: tensor<1x4xf32>, %[[Y:[a-z0-9_]+]]: tensor<2x1x3xf32>)
// CHECK-NEXT: %[[D0:[0-9]+]] = "fusion.size"(%[[X]]) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
// CHECK-NEXT: %[[D1:[0-9]+]] = "fusion.size"(%[[X]]) {dim = 1 : i64} : (tensor<?x4xf32>) -> index
// CHECK-NEXT: %[[N:[0-9]+]] = arith.muli %[[D0]], %[[D1]] : index
// CHECK-NEXT: %[[BC:[0-9]+]] = "fusion.broadcast_in_dim"(%[[V]], %[[D0]]) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, 4>} : (tensor<4xf32>, index) -> tensor<?x4xf32>
// CHECK-NEXT: = "fusion.expand"(%[[R]], %[[D0]]) {shape = array<i64: -1, 4>} : (tensor<1x4xf32>, index) -> tensor<?x4xf32>
// CHECK-NEXT: = "fusion.reshape"(%[[BC]], %[[N]]) {shape = array<i64: -1>} : (tensor<?x4xf32>, index) -> tensor<?xf32>
// CHECK-NEXT: = "fusion.reshape"(%[[Y]]) {shape = array<i64: 3, 2>} : (tensor<2x1x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: = "fusion.permute"(%[[Y]]) {dims = array<i64: 2, 0, 1>} : (tensor<2x1x3xf32>) -> tensor<3x2x1xf32>
// CHECK-NEXT: = "fusion.squeeze"(%[[Y]]) {dims = array<i64: 1>} : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: = "fusion.unsqueeze"(%[[X]]) {dim = 0 : i64} : (tensor<?x4xf32>) -> tensor<1x?x4xf32>
// CHECK-NEXT: return
func.func @shapes(%x: tensor<?x4xf32>, %v: tensor<4xf32>, %r: tensor<1x4xf32>, %y: tensor<2x1x3xf32>) {
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
  %d1 = "fusion.size"(%x) {dim = 1 : i64} : (tensor<?x4xf32>) -> index
  %n = arith.muli %d0, %d1 : index
  %b = "fusion.broadcast_in_dim"(%v, %d0) {broadcast_dims = array<i64: 1>, shape = array<i64: -1, 4>} : (tensor<4xf32>, index) -> tensor<?x4xf32>
  %e = "fusion.expand"(%r, %d0) {shape = array<i64: -1, 4>} : (tensor<1x4xf32>, index) -> tensor<?x4xf32>
  %f = "fusion.reshape"(%b, %n) {shape = array<i64: -1>} : (tensor<?x4xf32>, index) -> tensor<?xf32>
  %g = "fusion.reshape"(%y) {shape = array<i64: 3, 2>} : (tensor<2x1x3xf32>) -> tensor<3x2xf32>
  %p = "fusion.permute"(%y) {dims = array<i64: 2, 0, 1>} : (tensor<2x1x3xf32>) -> tensor<3x2x1xf32>
  %s = "fusion.squeeze"(%y) {dims = array<i64: 1>} : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
  %u = "fusion.unsqueeze"(%x) {dim = 0 : i64} : (tensor<?x4xf32>) -> tensor<1x?x4xf32>
  return
}

// cast (result type says to what), 0-d constants (float incl. non-finite hex, int, bool),
// and the random ops, whose seed/offset are 0-d tensor operands.
// CHECK-LABEL: func.func @other(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x4xf32>, %[[M:[a-z0-9_]+]]: tensor<?x4xi1>, %[[SEED:[a-z0-9_]+]]: tensor<i64>)
// CHECK-NEXT: = "fusion.cast"(%[[X]]) : (tensor<?x4xf32>) -> tensor<?x4xf16>
// CHECK-NEXT: = "fusion.cast"(%[[M]]) : (tensor<?x4xi1>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[LO:[0-9]+]] = "fusion.constant"() {value = 5.000000e-01 : f64} : () -> tensor<f32>
// CHECK-NEXT: %[[HI:[0-9]+]] = "fusion.constant"() {value = 2.000000e+00 : f64} : () -> tensor<f32>
// CHECK-NEXT: %[[OFF:[0-9]+]] = "fusion.constant"() {value = 7 : i64} : () -> tensor<i64>
// CHECK-NEXT: = "fusion.constant"() {value = true} : () -> tensor<i1>
// CHECK-NEXT: = "fusion.constant"() {value = 0x7FF0000000000000 : f64} : () -> tensor<f32>
// CHECK-NEXT: %[[D0:[0-9]+]] = "fusion.size"(%[[X]]) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
// CHECK-NEXT: = "fusion.uniform"(%[[LO]], %[[HI]], %[[SEED]], %[[OFF]], %[[D0]]) {shape = array<i64: -1, 8>} : (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>, index) -> tensor<?x8xf32>
// CHECK-NEXT: = "fusion.uniform"(%[[LO]], %[[HI]], %[[SEED]], %[[OFF]]) {shape = array<i64: 2, 3>} : (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>) -> tensor<2x3xbf16>
// CHECK-NEXT: = "fusion.rand_like"(%[[X]], %[[SEED]], %[[OFF]]) : (tensor<?x4xf32>, tensor<i64>, tensor<i64>) -> tensor<?x4xf32>
// CHECK-NEXT: return
func.func @other(%x: tensor<?x4xf32>, %m: tensor<?x4xi1>, %seed: tensor<i64>) {
  %c16 = "fusion.cast"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf16>
  %cb = "fusion.cast"(%m) : (tensor<?x4xi1>) -> tensor<?x4xf32>
  %lo = "fusion.constant"() {value = 0.5 : f64} : () -> tensor<f32>
  %hi = "fusion.constant"() {value = 2.0 : f64} : () -> tensor<f32>
  %off = "fusion.constant"() {value = 7 : i64} : () -> tensor<i64>
  %t = "fusion.constant"() {value = true} : () -> tensor<i1>
  %inf = "fusion.constant"() {value = 0x7FF0000000000000 : f64} : () -> tensor<f32>
  %d0 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x4xf32>) -> index
  %u = "fusion.uniform"(%lo, %hi, %seed, %off, %d0) {shape = array<i64: -1, 8>} : (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>, index) -> tensor<?x8xf32>
  %us = "fusion.uniform"(%lo, %hi, %seed, %off) {shape = array<i64: 2, 3>} : (tensor<f32>, tensor<f32>, tensor<i64>, tensor<i64>) -> tensor<2x3xbf16>
  %r = "fusion.rand_like"(%x, %seed, %off) : (tensor<?x4xf32>, tensor<i64>, tensor<i64>) -> tensor<?x4xf32>
  return
}
