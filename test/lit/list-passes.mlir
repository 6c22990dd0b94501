// RUN: mlirfuse-opt --list-passes | FileCheck %s
// RUN: not mlirfuse-opt %s --pass-pipeline='builtin.module(no-such-pass)' 2>&1 | FileCheck %s --check-prefix=BAD
// CHECK-DAG: fusion-cse
// CHECK-DAG: fusion-dce
// CHECK-DAG: fusion-group
// CHECK-DAG: fusion-strip-bookend-views
// CHECK-DAG: fusion-segment
// CHECK-DAG: fusion-to-linalg
// BAD: unknown pass or bad pipeline element 'no-such-pass'
module {}
