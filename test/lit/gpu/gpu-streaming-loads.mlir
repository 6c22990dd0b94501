// gpu-streaming-loads: a kernel's `nontemporal` loads of 4, 8 or 16 bytes become
// `ld.global.cs` (evict-first in L1 and L2) on the pointer cast to the global address space,
// their 32-bit words put back into the loaded type; other loads, and the host's, are left.
// The asm has side effects: a pure one could be merged with another across a store to its
// address (canonicalize, cse), or a store moved before it. A shared-memory load is left.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(gpu-streaming-loads)' | FileCheck %s

// CHECK-LABEL: llvm.func @kernel(
// CHECK: %[[G:.+]] = llvm.addrspacecast %arg0 : !llvm.ptr to !llvm.ptr<1>
// CHECK: %[[W:.+]] = llvm.inline_asm has_side_effects "ld.global.cs.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l" %[[G]] : (!llvm.ptr<1>) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK-COUNT-4: llvm.extractvalue %[[W]]
// CHECK: llvm.bitcast %{{.+}} : vector<4xi32> to vector<4xf32>
// CHECK: llvm.inline_asm has_side_effects "ld.global.cs.v4.b32 {$0, $1, $2, $3}, [$4];"
// CHECK: llvm.bitcast %{{.+}} : vector<4xi32> to vector<8xbf16>
// CHECK: llvm.inline_asm has_side_effects "ld.global.cs.v2.b32 {$0, $1}, [$2];", "=r,=r,l"
// CHECK: llvm.bitcast %{{.+}} : vector<2xi32> to vector<2xf32>
// CHECK: %[[S:.+]] = llvm.inline_asm has_side_effects "ld.global.cs.b32 $0, [$1];", "=r,l" %{{.+}} : (!llvm.ptr<1>) -> i32
// CHECK: llvm.bitcast %[[S]] : i32 to f32
// Two bytes: no 32-bit word to load.
// CHECK: llvm.load %arg1 {nontemporal} : !llvm.ptr -> bf16
// Not marked: an ordinary load.
// CHECK: llvm.load %arg0 : !llvm.ptr -> vector<4xf32>
// Global already: no cast.
// CHECK: llvm.inline_asm has_side_effects "ld.global.cs.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l" %arg2 :
// Shared memory: left.
// CHECK: llvm.load %arg3 {nontemporal} : !llvm.ptr<3> -> vector<4xf32>
// CHECK-NOT: ld.global.cs
// CHECK-LABEL: func.func @host(
// CHECK: llvm.load %arg0 {nontemporal} : !llvm.ptr -> f32

module attributes {gpu.container_module} {
  gpu.module @kernels {
    llvm.func @kernel(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr<1>, %arg3: !llvm.ptr<3>) {
      %0 = llvm.load %arg0 {nontemporal} : !llvm.ptr -> vector<4xf32>
      %1 = llvm.load %arg1 {nontemporal} : !llvm.ptr -> vector<8xbf16>
      %2 = llvm.load %arg0 {nontemporal} : !llvm.ptr -> vector<2xf32>
      %3 = llvm.load %arg0 {nontemporal} : !llvm.ptr -> f32
      %4 = llvm.load %arg1 {nontemporal} : !llvm.ptr -> bf16
      %5 = llvm.load %arg0 : !llvm.ptr -> vector<4xf32>
      %6 = llvm.load %arg2 {nontemporal} : !llvm.ptr<1> -> vector<4xf32>
      %7 = llvm.load %arg3 {nontemporal} : !llvm.ptr<3> -> vector<4xf32>
      llvm.store %0, %arg0 : vector<4xf32>, !llvm.ptr
      llvm.store %1, %arg1 : vector<8xbf16>, !llvm.ptr
      llvm.store %2, %arg0 : vector<2xf32>, !llvm.ptr
      llvm.store %3, %arg0 : f32, !llvm.ptr
      llvm.store %4, %arg1 : bf16, !llvm.ptr
      llvm.store %5, %arg0 : vector<4xf32>, !llvm.ptr
      llvm.store %6, %arg2 : vector<4xf32>, !llvm.ptr<1>
      llvm.store %7, %arg3 : vector<4xf32>, !llvm.ptr<3>
      llvm.return
    }
  }
  func.func @host(%arg0: !llvm.ptr) -> f32 {
    %0 = llvm.load %arg0 {nontemporal} : !llvm.ptr -> f32
    return %0 : f32
  }
}

// A load, a store to its address, the same load again: both loads stay (cse keeps a load
// with side effects), the second after the store.
// RUN: mlirfuse-opt %s --pass-pipeline='builtin.module(gpu-streaming-loads, canonicalize, cse)' | FileCheck %s --check-prefix=ORDER
// ORDER-LABEL: llvm.func @reload(
// ORDER: llvm.inline_asm has_side_effects "ld.global.cs.b32
// ORDER: llvm.store
// ORDER: llvm.inline_asm has_side_effects "ld.global.cs.b32
module attributes {gpu.container_module} {
  gpu.module @reloads {
    llvm.func @reload(%arg0: !llvm.ptr, %arg1: !llvm.ptr) {
      %0 = llvm.load %arg0 {nontemporal} : !llvm.ptr -> f32
      %c = llvm.mlir.constant(2.0 : f32) : f32
      llvm.store %c, %arg0 : f32, !llvm.ptr
      %1 = llvm.load %arg0 {nontemporal} : !llvm.ptr -> f32
      %2 = llvm.fadd %0, %1 : f32
      llvm.store %2, %arg1 : f32, !llvm.ptr
      llvm.return
    }
  }
}
