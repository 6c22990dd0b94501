// mlirfuse-opt reports diagnostics as mlir-opt does: `<file>:<line>:<col>: error: <message>`,
// with the input's real file name (`<stdin>` when read from standard input), then the
// diagnostic's notes, and exits 1 printing no IR.
// RUN: not mlirfuse-opt %s 2>&1 | FileCheck %s
// RUN: not mlirfuse-opt - < %s 2>&1 | FileCheck %s --check-prefix=STDIN
// RUN: not mlirfuse-opt %s 2>/dev/null | FileCheck %s --check-prefix=QUIET --allow-empty
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse)' 2>&1 | FileCheck %s

// CHECK-NOT: "-"
// CHECK: {{^}}{{.*}}/diagnostic-location.mlir:[[# @LINE + 6]]:8: error: unregistered operation 'fusion.bogus' found in dialect ('fusion')
// CHECK-NEXT: {{^}}{{.*}}/diagnostic-location.mlir:[[# @LINE + 5]]:8: note: see current operation:
// CHECK-NOT: "-"
// STDIN: {{^}}<stdin>:[[# @LINE + 3]]:8: error: unregistered operation 'fusion.bogus'
// QUIET-NOT: {{.}}
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "fusion.bogus"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
