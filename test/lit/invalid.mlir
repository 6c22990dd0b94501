// RUN: not mlirfuse-opt %s 2>&1 | FileCheck %s

// CHECK: error: {{.*}}expected 'tensor<?xf32>' but got 'tensor<?xf16>'
func.func @mismatched(%a: tensor<?xf32>, %b: tensor<?xf16>) -> tensor<?xf32> {
  %0 = "fusion.add"(%a, %b) : (tensor<?xf32>, tensor<?xf16>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
