// fusion-to-linalg on elementwise ops: each becomes one linalg.generic over identity maps
// with all-parallel iterators, an init from tensor.empty (dynamic extents from tensor.dim),
// and a body of arith/math ops. f16/bf16 compute in f32 (arith.extf ... arith.truncf); bool
// tensors are stored as i8 bytes (the function signature changes accordingly).
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg)' | FileCheck %s
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg)' | FileCheck %s --check-prefix=NOFUSION
// The result is valid upstream IR:
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(fusion-to-linalg)' | mlir-opt | FileCheck %s --check-prefix=NOFUSION

// NOFUSION-NOT: fusion.
// NOFUSION: func.func @add_dynamic
// NOFUSION-NOT: fusion.

// CHECK-DAG: #[[ID2:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ID1:map[0-9]*]] = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func.func @add_dynamic(
// CHECK-SAME: %[[A:[a-z0-9_]+]]: tensor<?x?xf32>, %[[B:[a-z0-9_]+]]: tensor<?x?xf32>) -> tensor<?x?xf32>
// CHECK-DAG: %[[C0:[^ ]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:[^ ]+]] = arith.constant 1 : index
// CHECK-DAG: %[[D0:[^ ]+]] = tensor.dim %[[A]], %[[C0]] : tensor<?x?xf32>
// CHECK-DAG: %[[D1:[^ ]+]] = tensor.dim %[[A]], %[[C1]] : tensor<?x?xf32>
// CHECK: %[[INIT:[^ ]+]] = tensor.empty(%[[D0]], %[[D1]]) : tensor<?x?xf32>
// CHECK: %[[R:[^ ]+]] = linalg.generic {indexing_maps = [#[[ID2]], #[[ID2]], #[[ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[A]], %[[B]] : tensor<?x?xf32>, tensor<?x?xf32>) outs(%[[INIT]] : tensor<?x?xf32>) {
// CHECK-NEXT: ^bb0(%[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: %[[S:[^ ]+]] = arith.addf %[[X]], %[[Y]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK-NEXT: } -> tensor<?x?xf32>
// CHECK-NEXT: return %[[R]] : tensor<?x?xf32>
func.func @add_dynamic(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = "fusion.add"(%a, %b) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// A chain stays a chain of generics (fusing them is linalg-fuse-elementwise-ops' job).
// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %[[A:[a-z0-9_]+]]: tensor<8xf32>, %[[B:[a-z0-9_]+]]: tensor<8xf32>)
// CHECK: %[[M:[^ ]+]] = linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<8xf32>, tensor<8xf32>)
// CHECK: arith.mulf
// CHECK: %[[S:[^ ]+]] = linalg.generic {{.*}} ins(%[[M]] : tensor<8xf32>)
// CHECK: math.sqrt
// CHECK: %[[N:[^ ]+]] = linalg.generic {{.*}} ins(%[[S]] : tensor<8xf32>)
// CHECK: arith.negf
// CHECK: return %[[N]]
func.func @chain(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "fusion.mul"(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = "fusion.sqrt"(%0) : (tensor<8xf32>) -> tensor<8xf32>
  %2 = "fusion.neg"(%1) : (tensor<8xf32>) -> tensor<8xf32>
  return %2 : tensor<8xf32>
}

// CHECK-LABEL: func.func @sub_i32(
// CHECK: ^bb0(%[[X:[^:]+]]: i32, %[[Y:[^:]+]]: i32, %{{[^:]+}}: i32):
// CHECK-NEXT: arith.subi %[[X]], %[[Y]] : i32
func.func @sub_i32(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "fusion.sub"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// Low precision: widen every operand to f32, compute, round the result back once.
// CHECK-LABEL: func.func @add_f16(
// CHECK-SAME: tensor<4xf16>, %{{[a-z0-9_]+}}: tensor<4xf16>) -> tensor<4xf16>
// CHECK: ^bb0(%[[X:[^:]+]]: f16, %[[Y:[^:]+]]: f16, %{{[^:]+}}: f16):
// CHECK-NEXT: %[[XW:[^ ]+]] = arith.extf %[[X]] : f16 to f32
// CHECK-NEXT: %[[YW:[^ ]+]] = arith.extf %[[Y]] : f16 to f32
// CHECK-NEXT: %[[S:[^ ]+]] = arith.addf %[[XW]], %[[YW]] : f32
// CHECK-NEXT: %[[N:[^ ]+]] = arith.truncf %[[S]] : f32 to f16
// CHECK-NEXT: linalg.yield %[[N]] : f16
func.func @add_f16(%a: tensor<4xf16>, %b: tensor<4xf16>) -> tensor<4xf16> {
  %0 = "fusion.add"(%a, %b) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// CHECK-LABEL: func.func @sqrt_bf16(
// CHECK: ^bb0(%[[X:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: %[[XW:[^ ]+]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NEXT: %[[S:[^ ]+]] = math.sqrt %[[XW]] : f32
// CHECK-NEXT: %[[N:[^ ]+]] = arith.truncf %[[S]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[N]] : bf16
func.func @sqrt_bf16(%a: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = "fusion.sqrt"(%a) : (tensor<4xbf16>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// Comparisons produce i1, stored as an i8 byte.
// CHECK-LABEL: func.func @less(
// CHECK-SAME: -> tensor<4xi8>
// CHECK: ^bb0(%[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %{{[^:]+}}: i8):
// CHECK-NEXT: %[[C:[^ ]+]] = arith.cmpf olt, %[[X]], %[[Y]] : f32
// CHECK-NEXT: %[[B:[^ ]+]] = arith.extui %[[C]] : i1 to i8
// CHECK-NEXT: linalg.yield %[[B]] : i8
func.func @less(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xi1> {
  %0 = "fusion.lt"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// Bool operands are read back from bytes (!= 0) before the i1 logic.
// CHECK-LABEL: func.func @logical_and(
// CHECK-SAME: %{{[a-z0-9_]+}}: tensor<4xi8>, %{{[a-z0-9_]+}}: tensor<4xi8>) -> tensor<4xi8>
// CHECK: ^bb0(%[[X:[^:]+]]: i8, %[[Y:[^:]+]]: i8, %{{[^:]+}}: i8):
// CHECK: %[[XB:[^ ]+]] = arith.cmpi ne, %[[X]], %{{[^ ]+}} : i8
// CHECK: %[[YB:[^ ]+]] = arith.cmpi ne, %[[Y]], %{{[^ ]+}} : i8
// CHECK-NEXT: %[[R:[^ ]+]] = arith.andi %[[XB]], %[[YB]] : i1
// CHECK-NEXT: arith.extui %[[R]] : i1 to i8
func.func @logical_and(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %0 = "fusion.logical_and"(%a, %b) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// CHECK-LABEL: func.func @where(
// CHECK: linalg.generic {indexing_maps = [#[[ID1]], #[[ID1]], #[[ID1]], #[[ID1]]], iterator_types = ["parallel"]}
// CHECK-NEXT: ^bb0(%[[C:[^:]+]]: i8, %[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK: %[[CB:[^ ]+]] = arith.cmpi ne, %[[C]], %{{[^ ]+}} : i8
// CHECK-NEXT: %[[R:[^ ]+]] = arith.select %[[CB]], %[[X]], %[[Y]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
func.func @where(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "fusion.where"(%c, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// cast: to bool is "!= 0", to integers truncates toward zero, to f16 rounds.
// CHECK-LABEL: func.func @casts(
// CHECK-SAME: -> (tensor<4xi8>, tensor<4xi64>, tensor<4xf16>)
// CHECK: arith.cmpf une, %{{[^ ]+}}, %{{[^ ]+}} : f32
// CHECK-NEXT: arith.extui %{{[^ ]+}} : i1 to i8
// CHECK: arith.fptosi %{{[^ ]+}} : f32 to i64
// CHECK: arith.truncf %{{[^ ]+}} : f32 to f16
func.func @casts(%a: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xi64>, tensor<4xf16>) {
  %0 = "fusion.cast"(%a) : (tensor<4xf32>) -> tensor<4xi1>
  %1 = "fusion.cast"(%a) : (tensor<4xf32>) -> tensor<4xi64>
  %2 = "fusion.cast"(%a) : (tensor<4xf32>) -> tensor<4xf16>
  return %0, %1, %2 : tensor<4xi1>, tensor<4xi64>, tensor<4xf16>
}

// 0-d constants become dense splats of the result type; fusion.size becomes tensor.dim.
// CHECK-LABEL: func.func @constants_and_size(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x3xf32>) -> (tensor<f16>, tensor<i64>, tensor<i8>, index)
// CHECK-DAG: %[[H:[^ ]+]] = arith.constant dense<2.500000e+00> : tensor<f16>
// CHECK-DAG: %[[I:[^ ]+]] = arith.constant dense<7> : tensor<i64>
// CHECK-DAG: %[[T:[^ ]+]] = arith.constant dense<1> : tensor<i8>
// CHECK-DAG: %[[C0:[^ ]+]] = arith.constant 0 : index
// CHECK: %[[D:[^ ]+]] = tensor.dim %[[X]], %[[C0]] : tensor<?x3xf32>
// CHECK: return %[[H]], %[[I]], %[[T]], %[[D]]
func.func @constants_and_size(%x: tensor<?x3xf32>) -> (tensor<f16>, tensor<i64>, tensor<i1>, index) {
  %0 = "fusion.constant"() {value = 2.5 : f64} : () -> tensor<f16>
  %1 = "fusion.constant"() {value = 7 : i64} : () -> tensor<i64>
  %2 = "fusion.constant"() {value = true} : () -> tensor<i1>
  %3 = "fusion.size"(%x) {dim = 0 : i64} : (tensor<?x3xf32>) -> index
  return %0, %1, %2, %3 : tensor<f16>, tensor<i64>, tensor<i1>, index
}
