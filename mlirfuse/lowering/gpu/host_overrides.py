"""The host module's runtime hooks: kernels on the caller's stream and device, scratch memory
from the caller's arena or allocator.

The stock GPU host lowering creates, synchronizes and destroys a stream around every launch
and allocates with cuMemAlloc; and the MLIR CUDA runtime loads modules and launches kernels
in one context per process, the primary context of the first device it was used with (a
function-local static): a fusion loaded for cuda:1 in a process that had used cuda:0 loaded
and launched in cuda:0's context, on cuda:1's stream (an illegal address). `host_overrides`
replaces those runtime entry points in the host module (LLVM dialect) with definitions driven
by module globals that the caller sets (`gpu_runtime.DeviceExecutable`): the stream of the
call, the allocator, and the context of the executable's device, made current around each
launch and memset; each kernel is looked up in its module once, not at every launch. They
call the CUDA driver directly; a failing driver call leaves its
error code in `mlirfuse_cuda_error`, which the caller checks (the runtime printed it).
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.errors import FusionError

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
#
# Kernel lookup: `mgpuModuleGetFunction` asks the driver (cuModuleGetFunction, about 0.6 us on
# an H200 host) once per module and kernel name and remembers the answer in a 16-slot table
# (`mlirfuse_functions`: module, name, function per slot, indexed by the name's address; a
# slot two kernels share is asked again when they alternate), not at every launch.
#
# The context (`mlirfuse_context`): the primary context of the executable's device. The GPU
# binary is loaded (the module's constructors, `mgpuModuleLoad`) in the context the caller
# made current; launches and memsets push `mlirfuse_context` and pop it after, unless it is
# current already (torch's calls on that device: a context pushed and popped around every
# launch made the driver's launches, and the caller's next runtime calls, slower), and
# neither where it is null (a stub runtime's tests). Once a driver call has failed (`mlirfuse_cuda_error`
# set), the call's later launches and memsets are skipped: the caller raises.
_GLOBALS = {"stream": "!llvm.ptr", "alloc_fn": "!llvm.ptr", "free_fn": "!llvm.ptr", "arena": "!llvm.ptr",
            "arena_size": "i64", "arena_used": "i64", "context": "!llvm.ptr", "cuda_error": "i32"}


def _global(name: str) -> str:
    kind = _GLOBALS[name]
    zero = "llvm.mlir.zero : !llvm.ptr" if kind == "!llvm.ptr" else f"llvm.mlir.constant(0 : {kind}) : {kind}"
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
""" + """
llvm.func @cuCtxGetCurrent(!llvm.ptr) -> i32
llvm.func @cuCtxPushCurrent_v2(!llvm.ptr) -> i32
llvm.func @cuCtxPopCurrent_v2(!llvm.ptr) -> i32
llvm.func @cuModuleLoadData(!llvm.ptr, !llvm.ptr) -> i32
llvm.func @cuModuleLoadDataEx(!llvm.ptr, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr) -> i32
llvm.func @cuFuncSetAttribute(!llvm.ptr, i32, i32) -> i32
llvm.func @cuModuleGetFunction(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
llvm.func @cuLaunchKernel(!llvm.ptr, i32, i32, i32, i32, i32, i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
llvm.func @cuMemsetD32Async(i64, i32, i64, !llvm.ptr) -> i32
llvm.func @mlirfuse_check(%e: i32) {
  %zero = llvm.mlir.constant(0 : i32) : i32
  %failed = llvm.icmp "ne" %e, %zero : i32
  llvm.cond_br %failed, ^record, ^done
^record:
  %a = llvm.mlir.addressof @mlirfuse_cuda_error : !llvm.ptr
  llvm.store %e, %a : i32, !llvm.ptr
  llvm.br ^done
^done:
  llvm.return
}
llvm.func @mlirfuse_failed() -> i1 {
  %a = llvm.mlir.addressof @mlirfuse_cuda_error : !llvm.ptr
  %e = llvm.load %a : !llvm.ptr -> i32
  %zero = llvm.mlir.constant(0 : i32) : i32
  %failed = llvm.icmp "ne" %e, %zero : i32
  llvm.return %failed : i1
}
llvm.func @mlirfuse_push_context() -> i1 {
  %a = llvm.mlir.addressof @mlirfuse_context : !llvm.ptr
  %ctx = llvm.load %a : !llvm.ptr -> !llvm.ptr
  %null = llvm.mlir.zero : !llvm.ptr
  %none = llvm.icmp "eq" %ctx, %null : !llvm.ptr
  %false = llvm.mlir.constant(false) : i1
  %zero0 = llvm.mlir.constant(0 : i32) : i32
  llvm.cond_br %none, ^unset, ^current
^unset:
  llvm.return %false : i1
^current:
  %one = llvm.mlir.constant(1 : i64) : i64
  %slot = llvm.alloca %one x !llvm.ptr : (i64) -> !llvm.ptr
  %got = llvm.call @cuCtxGetCurrent(%slot) : (!llvm.ptr) -> i32
  %current = llvm.load %slot : !llvm.ptr -> !llvm.ptr
  %ok = llvm.icmp "eq" %got, %zero0 : i32
  %same = llvm.icmp "eq" %current, %ctx : !llvm.ptr
  %already = llvm.and %ok, %same : i1
  llvm.cond_br %already, ^unset, ^push
^push:
  %e = llvm.call @cuCtxPushCurrent_v2(%ctx) : (!llvm.ptr) -> i32
  llvm.call @mlirfuse_check(%e) : (i32) -> ()
  %zero = llvm.mlir.constant(0 : i32) : i32
  %pushed = llvm.icmp "eq" %e, %zero : i32
  llvm.return %pushed : i1
}
llvm.func @mlirfuse_pop_context(%pushed: i1) {
  llvm.cond_br %pushed, ^pop, ^done
^done:
  llvm.return
^pop:
  %one = llvm.mlir.constant(1 : i64) : i64
  %popped = llvm.alloca %one x !llvm.ptr : (i64) -> !llvm.ptr
  %e = llvm.call @cuCtxPopCurrent_v2(%popped) : (!llvm.ptr) -> i32
  llvm.call @mlirfuse_check(%e) : (i32) -> ()
  llvm.return
}
llvm.func @mgpuModuleLoad(%data: !llvm.ptr, %size: i64) -> !llvm.ptr {
  %one = llvm.mlir.constant(1 : i64) : i64
  %null = llvm.mlir.zero : !llvm.ptr
  %m = llvm.alloca %one x !llvm.ptr : (i64) -> !llvm.ptr
  llvm.store %null, %m : !llvm.ptr, !llvm.ptr
  %e = llvm.call @cuModuleLoadData(%m, %data) : (!llvm.ptr, !llvm.ptr) -> i32
  llvm.call @mlirfuse_check(%e) : (i32) -> ()
  %module = llvm.load %m : !llvm.ptr -> !llvm.ptr
  llvm.return %module : !llvm.ptr
}
llvm.func @mgpuModuleLoadJIT(%data: !llvm.ptr, %level: i32) -> !llvm.ptr {
  %one = llvm.mlir.constant(1 : i64) : i64
  %one32 = llvm.mlir.constant(1 : i32) : i32
  %opt = llvm.mlir.constant(7 : i32) : i32
  %null = llvm.mlir.zero : !llvm.ptr
  %m = llvm.alloca %one x !llvm.ptr : (i64) -> !llvm.ptr
  llvm.store %null, %m : !llvm.ptr, !llvm.ptr
  %options = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
  llvm.store %opt, %options : i32, !llvm.ptr
  %values = llvm.alloca %one x !llvm.ptr : (i64) -> !llvm.ptr
  %wide = llvm.zext %level : i32 to i64
  %value = llvm.inttoptr %wide : i64 to !llvm.ptr
  llvm.store %value, %values : !llvm.ptr, !llvm.ptr
  %e = llvm.call @cuModuleLoadDataEx(%m, %data, %one32, %options, %values)
      : (!llvm.ptr, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr) -> i32
  llvm.call @mlirfuse_check(%e) : (i32) -> ()
  %module = llvm.load %m : !llvm.ptr -> !llvm.ptr
  llvm.return %module : !llvm.ptr
}
llvm.mlir.global internal @mlirfuse_functions() {addr_space = 0 : i32} : !llvm.array<48 x ptr> {
  %0 = llvm.mlir.zero : !llvm.array<48 x ptr>
  llvm.return %0 : !llvm.array<48 x ptr>
}
llvm.func @mgpuModuleGetFunction(%module: !llvm.ptr, %name: !llvm.ptr) -> !llvm.ptr {
  %c3 = llvm.mlir.constant(3 : i64) : i64
  %c7 = llvm.mlir.constant(7 : i64) : i64
  %c15 = llvm.mlir.constant(15 : i64) : i64
  %zero = llvm.mlir.constant(0 : i32) : i32
  %one = llvm.mlir.constant(1 : i64) : i64
  %null = llvm.mlir.zero : !llvm.ptr
  %address = llvm.ptrtoint %name : !llvm.ptr to i64
  %low = llvm.lshr %address, %c3 : i64
  %high = llvm.lshr %address, %c7 : i64
  %mixed = llvm.xor %low, %high : i64
  %slot = llvm.and %mixed, %c15 : i64
  %first = llvm.mul %slot, %c3 : i64
  %table = llvm.mlir.addressof @mlirfuse_functions : !llvm.ptr
  %entry = llvm.getelementptr %table[%first] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
  %name_at = llvm.getelementptr %entry[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
  %function_at = llvm.getelementptr %entry[2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
  %cached_module = llvm.load %entry : !llvm.ptr -> !llvm.ptr
  %cached_name = llvm.load %name_at : !llvm.ptr -> !llvm.ptr
  %same_module = llvm.icmp "eq" %cached_module, %module : !llvm.ptr
  %same_name = llvm.icmp "eq" %cached_name, %name : !llvm.ptr
  %hit = llvm.and %same_module, %same_name : i1
  llvm.cond_br %hit, ^hit, ^miss
^hit:
  %cached = llvm.load %function_at : !llvm.ptr -> !llvm.ptr
  llvm.return %cached : !llvm.ptr
^miss:
  %f = llvm.alloca %one x !llvm.ptr : (i64) -> !llvm.ptr
  llvm.store %null, %f : !llvm.ptr, !llvm.ptr
  %e = llvm.call @cuModuleGetFunction(%f, %module, %name) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
  llvm.call @mlirfuse_check(%e) : (i32) -> ()
  %function = llvm.load %f : !llvm.ptr -> !llvm.ptr
  %ok = llvm.icmp "eq" %e, %zero : i32
  llvm.cond_br %ok, ^remember, ^done
^remember:
  llvm.store %module, %entry : !llvm.ptr, !llvm.ptr
  llvm.store %name, %name_at : !llvm.ptr, !llvm.ptr
  llvm.store %function, %function_at : !llvm.ptr, !llvm.ptr
  llvm.br ^done
^done:
  llvm.return %function : !llvm.ptr
}
llvm.func @mgpuLaunchKernel(%f: !llvm.ptr, %gx: i64, %gy: i64, %gz: i64, %bx: i64, %by: i64, %bz: i64,
                            %smem: i32, %stream: !llvm.ptr, %params: !llvm.ptr, %extra: !llvm.ptr, %n: i64) {
  %pushed = llvm.call @mlirfuse_push_context() : () -> i1
  %failed = llvm.call @mlirfuse_failed() : () -> i1
  llvm.cond_br %failed, ^skip, ^go
^skip:
  llvm.call @mlirfuse_pop_context(%pushed) : (i1) -> ()
  llvm.return
^go:
  %default_limit = llvm.mlir.constant(49152 : i32) : i32
  %opt_in = llvm.icmp "sgt" %smem, %default_limit : i32
  llvm.cond_br %opt_in, ^opt_in, ^launch
^opt_in:
  %max_dynamic_shared = llvm.mlir.constant(8 : i32) : i32
  %e0 = llvm.call @cuFuncSetAttribute(%f, %max_dynamic_shared, %smem) : (!llvm.ptr, i32, i32) -> i32
  llvm.call @mlirfuse_check(%e0) : (i32) -> ()
  llvm.br ^launch
^launch:
  %gx32 = llvm.trunc %gx : i64 to i32
  %gy32 = llvm.trunc %gy : i64 to i32
  %gz32 = llvm.trunc %gz : i64 to i32
  %bx32 = llvm.trunc %bx : i64 to i32
  %by32 = llvm.trunc %by : i64 to i32
  %bz32 = llvm.trunc %bz : i64 to i32
  %e = llvm.call @cuLaunchKernel(%f, %gx32, %gy32, %gz32, %bx32, %by32, %bz32, %smem, %stream, %params, %extra)
      : (!llvm.ptr, i32, i32, i32, i32, i32, i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
  llvm.call @mlirfuse_check(%e) : (i32) -> ()
  llvm.call @mlirfuse_pop_context(%pushed) : (i1) -> ()
  llvm.return
}
llvm.func @mgpuMemset32(%dst: !llvm.ptr, %value: i32, %count: i64, %stream: !llvm.ptr) {
  %pushed = llvm.call @mlirfuse_push_context() : () -> i1
  %failed = llvm.call @mlirfuse_failed() : () -> i1
  llvm.cond_br %failed, ^skip, ^go
^skip:
  llvm.call @mlirfuse_pop_context(%pushed) : (i1) -> ()
  llvm.return
^go:
  %address = llvm.ptrtoint %dst : !llvm.ptr to i64
  %e = llvm.call @cuMemsetD32Async(%address, %value, %count, %stream) : (i64, i32, i64, !llvm.ptr) -> i32
  llvm.call @mlirfuse_check(%e) : (i32) -> ()
  llvm.call @mlirfuse_pop_context(%pushed) : (i1) -> ()
  llvm.return
}
"""
_OVERRIDDEN = ("mgpuStreamCreate", "mgpuStreamSynchronize", "mgpuStreamDestroy", "mgpuMemAlloc", "mgpuMemFree",
               "mgpuMemset32")
# Runtime entry points the host module may keep: they make no context current (the module
# handle names its context).
_KEPT = ("mgpuModuleUnload",)


def host_overrides(module: ir.Module) -> None:
    """Replace the runtime's stream, allocation, module-loading, launch and memset entry
    points with ones driven by the caller. The loading and launch entry points are not
    declared yet (the translation to LLVM IR adds their calls); the module defines them."""
    for op in list(module.body.operations):
        if op.operation.name != "llvm.func":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if name in _OVERRIDDEN:
            op.operation.erase()
        elif name.startswith("mgpu") and name not in _KEPT:
            raise FusionError(f"gpu-host-overrides: the host module calls the CUDA runtime's {name}, "
                              "which runs in the first device's context; it has no override")
    extra = ir.Module.parse(HOST_OVERRIDES)
    for op in list(extra.body.operations):
        op.operation.detach_from_parent()
        module.body.append(op.operation)
