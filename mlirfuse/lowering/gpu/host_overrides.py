"""The host module's runtime hooks: kernels on the caller's stream, scratch memory from the
caller's arena or allocator.

The stock GPU host lowering creates, synchronizes and destroys a stream around every launch
and allocates with cuMemAlloc. `host_overrides` replaces those runtime entry points in the
host module (LLVM dialect) with definitions driven by module globals that the caller sets
before each call (`gpu_runtime.DeviceExecutable`).
"""

from __future__ import annotations

from mlir import ir

# The JIT does not export data symbols, so each global is reached through a `mlirfuse_slot_*`
# function that returns its address.
#
# Scratch memory: `mgpuMemAlloc` first takes 256-byte-aligned slices of the caller's arena
# (`mlirfuse_arena`, `mlirfuse_arena_size` bytes; a bump allocator, nothing returned to it
# within a call) and counts every request in `mlirfuse_arena_used`, which the caller resets
# before a call and reads after it: the bytes the next call's arena needs. What does not fit
# (or every request, without an arena) goes to the caller's allocator (`mlirfuse_alloc_fn`);
# `mgpuMemFree` hands back only what did not come from the arena. An empty request is answered
# with a null pointer (no allocator call, nothing counted) and freeing null does nothing.
_GLOBALS = ("stream", "alloc_fn", "free_fn", "arena", "arena_size", "arena_used")


def _global(name: str) -> str:
    kind = "i64" if name in ("arena_size", "arena_used") else "!llvm.ptr"
    zero = "llvm.mlir.constant(0 : i64) : i64" if kind == "i64" else "llvm.mlir.zero : !llvm.ptr"
    return f"""
llvm.mlir.global external @mlirfuse_{name}() {{addr_space = 0 : i32}} : {kind} {{
  %0 = {zero}
  llvm.return %0 : {kind}
}}
llvm.func @mlirfuse_slot_{name}() -> !llvm.ptr {{
  %a = llvm.mlir.addressof @mlirfuse_{name} : !llvm.ptr
  llvm.return %a : !llvm.ptr
}}"""


HOST_OVERRIDES = "".join(_global(name) for name in _GLOBALS) + """
llvm.func @mgpuStreamCreate() -> !llvm.ptr {
  %a = llvm.mlir.addressof @mlirfuse_stream : !llvm.ptr
  %s = llvm.load %a : !llvm.ptr -> !llvm.ptr
  llvm.return %s : !llvm.ptr
}
llvm.func @mgpuStreamSynchronize(%s: !llvm.ptr) {
  llvm.return
}
llvm.func @mgpuStreamDestroy(%s: !llvm.ptr) {
  llvm.return
}
llvm.func @mgpuMemAlloc(%size: i64, %s: !llvm.ptr, %shared: i8) -> !llvm.ptr {
  %c255 = llvm.mlir.constant(255 : i64) : i64
  %mask = llvm.mlir.constant(-256 : i64) : i64
  %zero8 = llvm.mlir.constant(0 : i8) : i8
  %zero64 = llvm.mlir.constant(0 : i64) : i64
  %null = llvm.mlir.zero : !llvm.ptr
  %empty = llvm.icmp "eq" %size, %zero64 : i64
  llvm.cond_br %empty, ^none, ^some_bytes
^none:
  llvm.return %null : !llvm.ptr
^some_bytes:
  %padded = llvm.add %size, %c255 : i64
  %slice = llvm.and %padded, %mask : i64
  %ua = llvm.mlir.addressof @mlirfuse_arena_used : !llvm.ptr
  %used = llvm.load %ua : !llvm.ptr -> i64
  %end = llvm.add %used, %slice : i64
  llvm.store %end, %ua : i64, !llvm.ptr
  %sa = llvm.mlir.addressof @mlirfuse_arena_size : !llvm.ptr
  %cap = llvm.load %sa : !llvm.ptr -> i64
  %aa = llvm.mlir.addressof @mlirfuse_arena : !llvm.ptr
  %base = llvm.load %aa : !llvm.ptr -> !llvm.ptr
  %room = llvm.icmp "ule" %end, %cap : i64
  %some = llvm.icmp "ne" %base, %null : !llvm.ptr
  %device = llvm.icmp "eq" %shared, %zero8 : i8
  %both = llvm.and %room, %some : i1
  %fits = llvm.and %both, %device : i1
  llvm.cond_br %fits, ^arena, ^caller
^arena:
  %p = llvm.getelementptr %base[%used] : (!llvm.ptr, i64) -> !llvm.ptr, i8
  llvm.return %p : !llvm.ptr
^caller:
  %fa = llvm.mlir.addressof @mlirfuse_alloc_fn : !llvm.ptr
  %f = llvm.load %fa : !llvm.ptr -> !llvm.ptr
  %q = llvm.call %f(%size, %s) : !llvm.ptr, (i64, !llvm.ptr) -> !llvm.ptr
  llvm.return %q : !llvm.ptr
}
llvm.func @mgpuMemFree(%p: !llvm.ptr, %s: !llvm.ptr) {
  %null = llvm.mlir.zero : !llvm.ptr
  %isnull = llvm.icmp "eq" %p, %null : !llvm.ptr
  llvm.cond_br %isnull, ^done, ^maybe
^maybe:
  %aa = llvm.mlir.addressof @mlirfuse_arena : !llvm.ptr
  %base = llvm.load %aa : !llvm.ptr -> !llvm.ptr
  %sa = llvm.mlir.addressof @mlirfuse_arena_size : !llvm.ptr
  %cap = llvm.load %sa : !llvm.ptr -> i64
  %pi = llvm.ptrtoint %p : !llvm.ptr to i64
  %bi = llvm.ptrtoint %base : !llvm.ptr to i64
  %offset = llvm.sub %pi, %bi : i64
  %inside = llvm.icmp "ult" %offset, %cap : i64
  llvm.cond_br %inside, ^done, ^caller
^done:
  llvm.return
^caller:
  %fa = llvm.mlir.addressof @mlirfuse_free_fn : !llvm.ptr
  %f = llvm.load %fa : !llvm.ptr -> !llvm.ptr
  llvm.call %f(%p, %s) : !llvm.ptr, (!llvm.ptr, !llvm.ptr) -> ()
  llvm.return
}
"""
_OVERRIDDEN = ("mgpuStreamCreate", "mgpuStreamSynchronize", "mgpuStreamDestroy", "mgpuMemAlloc", "mgpuMemFree")


def host_overrides(module: ir.Module) -> None:
    """Replace the runtime's stream/alloc entry points with ones driven by the caller."""
    for op in list(module.body.operations):
        if op.operation.name == "llvm.func" and ir.StringAttr(op.attributes["sym_name"]).value in _OVERRIDDEN:
            op.operation.erase()
    extra = ir.Module.parse(HOST_OVERRIDES)
    for op in list(extra.body.operations):
        op.operation.detach_from_parent()
        module.body.append(op.operation)
