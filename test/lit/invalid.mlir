// Verifier errors: IRDL checks operand/result counts, the shared type `T` of elementwise
// operands, base types, index `sizes` operands and required attributes. mlirfuse-opt must
// print a located diagnostic per bad function and exit non-zero without printing IR.
// RUN: not mlirfuse-opt %s 2>&1 | FileCheck %s
// RUN: not mlirfuse-opt %s 2>/dev/null | FileCheck %s --check-prefix=STDOUT --allow-empty
// RUN: mlir-opt --irdl-file=%irdl --verify-diagnostics %s
// (`not` is lit's internal-shell builtin; see lit.cfg.py.)

// STDOUT-NOT: {{.}}
// CHECK: error: Unable to parse module assembly

func.func @too_few_operands(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: {{.*}}expects exactly 2 operands, but got 1
  // expected-error @+1 {{expects exactly 2 operands, but got 1}}
  %0 = "fusion.add"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @too_many_operands(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: {{.*}}expects exactly 1 operands, but got 2
  // expected-error @+1 {{expects exactly 1 operands, but got 2}}
  %0 = "fusion.neg"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @where_arity(%c: tensor<4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: {{.*}}expects exactly 3 operands, but got 2
  // expected-error @+1 {{expects exactly 3 operands, but got 2}}
  %0 = "fusion.where"(%c, %a) : (tensor<4xi1>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @rand_like_arity(%a: tensor<4xf32>, %seed: tensor<i64>) -> tensor<4xf32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: {{.*}}expects exactly 3 operands, but got 2
  // expected-error @+1 {{expects exactly 3 operands, but got 2}}
  %0 = "fusion.rand_like"(%a, %seed) : (tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @mismatched_element_types(%a: tensor<?xf32>, %b: tensor<?xf16>) -> tensor<?xf32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: expected 'tensor<?xf32>' but got 'tensor<?xf16>'
  // expected-error @+1 {{expected 'tensor<?xf32>' but got 'tensor<?xf16>'}}
  %0 = "fusion.add"(%a, %b) : (tensor<?xf32>, tensor<?xf16>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @mismatched_shapes(%a: tensor<4xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: expected 'tensor<4xf32>' but got 'tensor<8xf32>'
  // expected-error @+1 {{expected 'tensor<4xf32>' but got 'tensor<8xf32>'}}
  %0 = "fusion.mul"(%a, %b) : (tensor<4xf32>, tensor<8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @mismatched_result(%a: tensor<4xf32>) -> tensor<4xf64> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: expected 'tensor<4xf32>' but got 'tensor<4xf64>'
  // expected-error @+1 {{expected 'tensor<4xf32>' but got 'tensor<4xf64>'}}
  %0 = "fusion.exp"(%a) : (tensor<4xf32>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

func.func @compare_operands(%a: tensor<4xf32>, %b: tensor<4xi32>) -> tensor<4xi1> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: expected 'tensor<4xf32>' but got 'tensor<4xi32>'
  // expected-error @+1 {{expected 'tensor<4xf32>' but got 'tensor<4xi32>'}}
  %0 = "fusion.lt"(%a, %b) : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

func.func @clamp_bound(%a: tensor<4xf32>, %lo: tensor<4xf32>, %hi: tensor<4xf16>) -> tensor<4xf32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: expected 'tensor<4xf32>' but got 'tensor<4xf16>'
  // expected-error @+1 {{expected 'tensor<4xf32>' but got 'tensor<4xf16>'}}
  %0 = "fusion.clamp"(%a, %lo, %hi) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @var_mean_one_result(%a: tensor<4xf32>) -> tensor<f32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: {{.*}}expects exactly 2 results, but got 1
  // expected-error @+1 {{expects exactly 2 results, but got 1}}
  %0 = "fusion.var_mean"(%a) {axes = array<i64: 0>, correction = 1.0 : f64, keepdim = false} : (tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

func.func @not_a_tensor(%s: f32) -> f32 {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: expected base type 'builtin.tensor' but got 'builtin.f32'
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  %0 = "fusion.neg"(%s) : (f32) -> f32
  return %0 : f32
}

func.func @missing_attribute(%a: tensor<4xf32>) -> tensor<f32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: 'fusion.sum' op attribute "keepdim" is expected but not provided
  // expected-error @+1 {{attribute "keepdim" is expected but not provided}}
  %0 = "fusion.sum"(%a) {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

func.func @attribute_kind(%a: tensor<4xf32>) -> tensor<f32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: expected base attribute 'builtin.dense_array' but got 'builtin.array'
  // expected-error @+1 {{expected base attribute 'builtin.dense_array' but got 'builtin.array'}}
  %0 = "fusion.sum"(%a) {axes = [0], keepdim = false} : (tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

func.func @size_not_index(%a: tensor<?xf32>) -> i64 {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: expected 'index' but got 'i64'
  // expected-error @+1 {{expected 'index' but got 'i64'}}
  %0 = "fusion.size"(%a) {dim = 0 : i64} : (tensor<?xf32>) -> i64
  return %0 : i64
}

func.func @sizes_operand_not_index(%a: tensor<?xf32>, %n: i64) -> tensor<?xf32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: expected 'index' but got 'i64'
  // expected-error @+1 {{expected 'index' but got 'i64'}}
  %0 = "fusion.reshape"(%a, %n) {shape = array<i64: -1>} : (tensor<?xf32>, i64) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

func.func @unknown_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: :[[# @LINE + 2]]:{{[0-9]+}}: unregistered operation 'fusion.frobnicate'
  // expected-error @+1 {{unregistered operation 'fusion.frobnicate'}}
  %0 = "fusion.frobnicate"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
