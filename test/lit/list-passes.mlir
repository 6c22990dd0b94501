// The pass registry as mlirfuse-opt shows it, and clear errors for bad pipelines.
// RUN: mlirfuse-opt --list-passes | FileCheck %s
// RUN: mlirfuse-opt --list-passes | FileCheck %s --check-prefix=SUMMARY
// RUN: mlirfuse-opt --help | FileCheck %s
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(no-such-pass)' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse{foo=1})' 2>&1 | FileCheck %s --check-prefix=BAD-OPTION
// RUN: not mlirfuse-opt %s --pass-pipeline='fusion-cse' 2>&1 | FileCheck %s --check-prefix=BAD-ANCHOR
// Errors print no IR on stdout:
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(no-such-pass)' 2>/dev/null | FileCheck %s --check-prefix=QUIET --allow-empty

// CHECK-DAG: fusion-cse
// CHECK-DAG: fusion-dce
// CHECK-DAG: fusion-group
// CHECK-DAG: fusion-strip-bookend-views
// CHECK-DAG: fusion-segment
// CHECK-DAG: fusion-to-linalg
// CHECK-DAG: constant-outputs-as-fills
// CHECK-DAG: memref-copies-to-linalg
// CHECK-DAG: gpu-schedule
// CHECK-DAG: gpu-apply-schedules

// Each pass with its one-line summary; options with type and default.
// SUMMARY: mlirfuse passes
// SUMMARY-DAG: {{^  }}fusion-cse: merge identical fusion ops
// SUMMARY-DAG: {{^  }}fusion-dce: erase fusion ops whose results are unused
// SUMMARY-DAG: {{^  }}fusion-to-linalg: lower every fusion op to linalg
// SUMMARY-DAG: target=str (default cpu): cpu or gpu
// SUMMARY-DAG: {{^  }}gpu-schedule: records each GPU kernel's schedule, as data, on its linalg op
// SUMMARY-DAG: arch=str (default sm_90)

// BAD: error: unknown pass or bad pipeline element 'no-such-pass'
// BAD: 'no-such-pass' does not refer to a registered pass or pass pipeline
// BAD-OPTION: error: pass fusion-cse: unknown option 'foo' (options: none)
// BAD-ANCHOR: error: pipeline must be 'builtin.module(...)', got 'fusion-cse'
// QUIET-NOT: {{.}}
module {}
