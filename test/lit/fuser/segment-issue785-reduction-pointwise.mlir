// nvFuser issue 785's simplified example (nvfuser_fusion_id6 with two tensor inputs): a sum of
// T4 over axes [0, 1] and pow(T6, 3), plus mul(0.5, T6) that is not an output. IR = str(fd) of
// the issue's FusionDefinition. It is exactly 2 kernels, a "reduction" and a "pointwise": the
// 0-d constant and cast feeding the pow are scalar work, not kernels, and the dead mul is
// either erased (fusion-dce) or a sibling of the pow that shares its kernel.
// `fusion.kernels` on the graph function is the number of kernels it launches.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-group, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-group{single-node=true}, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s --check-prefix=SN
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-group, fusion-strip-bookend-views, fusion-segment)' | FileCheck %s --check-prefix=NODCE
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-cse, fusion-dce, fusion-group, fusion-strip-bookend-views, fusion-segment)' | mlir-opt --irdl-file=%irdl > /dev/null

// Default options: the pow and the sum each have one compute op: no group is outlined, and
// the graph launches 2 kernels (pow, sum), each op a segment marked with its scheduler; the
// dead mul is gone.
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @fusion(
// CHECK-SAME: attributes {fusion.kernels = 2 : i64}
// CHECK-NOT: "fusion.mul"
// CHECK: "fusion.cast"
// CHECK: "fusion.pow"({{.*}}) {fusion.scheduler = "pointwise"}
// CHECK: "fusion.sum"(%arg0) {axes = array<i64: 0, 1>, fusion.scheduler = "reduction", keepdim = false}
// CHECK-NEXT: return

// single-node=true: a pointwise group and a reduction group, one kernel each.
// SN-LABEL: func.func private @fusion_group0(
// SN-SAME: attributes {fusion.group, fusion.segments = ["pointwise"]}
// SN-NEXT: "fusion.constant"{{.*}}fusion.segment = 0 : i64
// SN-NEXT: "fusion.cast"{{.*}}fusion.segment = 0 : i64
// SN-NEXT: "fusion.broadcast_in_dim"{{.*}}fusion.segment = 0 : i64
// SN-NEXT: "fusion.pow"{{.*}}fusion.segment = 0 : i64
// SN-NEXT: return
// SN-LABEL: func.func private @fusion_group1(
// SN-SAME: attributes {fusion.group, fusion.segments = ["reduction"]}
// SN-NEXT: "fusion.sum"
// SN-NEXT: return
// SN-LABEL: func.func @fusion(
// SN-SAME: attributes {fusion.kernels = 2 : i64}

// Without fusion-dce the dead mul is grouped with the pow (siblings of T6) and shares its
// pointwise segment: still 2 kernels.
// NODCE-LABEL: func.func private @fusion_group0(
// NODCE-SAME: attributes {fusion.group, fusion.segments = ["pointwise"]}
// NODCE: "fusion.mul"{{.*}}fusion.segment = 0 : i64
// NODCE: "fusion.pow"{{.*}}fusion.segment = 0 : i64
// NODCE-NEXT: return
// NODCE-LABEL: func.func @fusion(
// NODCE-SAME: attributes {fusion.kernels = 2 : i64}
// NODCE: call @fusion_group0(
// NODCE-NEXT: "fusion.sum"(%arg0)
// NODCE-NEXT: return
module {
  func.func @fusion(%arg0: tensor<?x?x?xf32>, %arg1: tensor<?x?x?xf32>) -> (tensor<?xf32>, tensor<?x?x?xf32>) {
    %t3 = "fusion.constant"() {value = 0.5 : f64} : () -> tensor<f64>
    %t4 = "fusion.cast"(%t3) : (tensor<f64>) -> tensor<f32>
    %d1_0 = "fusion.size"(%arg1) {dim = 0 : i64} : (tensor<?x?x?xf32>) -> index
    %d1_1 = "fusion.size"(%arg1) {dim = 1 : i64} : (tensor<?x?x?xf32>) -> index
    %d1_2 = "fusion.size"(%arg1) {dim = 2 : i64} : (tensor<?x?x?xf32>) -> index
    %t5 = "fusion.broadcast_in_dim"(%t4, %d1_0, %d1_1, %d1_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
    %t6 = "fusion.mul"(%t5, %arg1) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %t7 = "fusion.constant"() {value = 3.0 : f64} : () -> tensor<f64>
    %t8 = "fusion.cast"(%t7) : (tensor<f64>) -> tensor<f32>
    %t9 = "fusion.broadcast_in_dim"(%t8, %d1_0, %d1_1, %d1_2) {broadcast_dims = array<i64>, shape = array<i64: -1, -1, -1>} : (tensor<f32>, index, index, index) -> tensor<?x?x?xf32>
    %t10 = "fusion.pow"(%arg1, %t9) : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %t11 = "fusion.sum"(%arg0) {axes = array<i64: 0, 1>, keepdim = false} : (tensor<?x?x?xf32>) -> tensor<?xf32>
    return %t11, %t10 : tensor<?xf32>, tensor<?x?x?xf32>
  }
}
