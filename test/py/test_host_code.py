"""The GPU backend's host code (sizes, grids, scratch memory, launches), JIT-compiled as for a
GPU call but run against a stub of the MLIR CUDA runtime compiled here with `cc`: launches are
recorded, nothing runs on a device, pointers are made up. No GPU needed."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import mlirfuse
from mlirfuse import FusionError, ops
from mlirfuse.lowering.gpu import toolchain
from mlirfuse.lowering.gpu.runtime import ALLOC_FN, FREE_FN, DeviceExecutable

pytestmark = [pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler driver (cc)"),
              pytest.mark.skipif(toolchain.find().libdevice is None, reason="no libdevice")]

STUB = r"""
#include <stdint.h>
#include <stddef.h>
int64_t launches[64][7];
int n_launches = 0;
int fail_launches = 0;  /* the CUresult cuLaunchKernel returns */
void *pushed[64];       /* the contexts pushed, in order */
int n_pushed = 0;
int depth = 0;          /* contexts pushed and not popped */
int fail_pushes = 0;    /* the CUresult cuCtxPushCurrent_v2 returns */
void *current = 0;      /* the calling thread's current context */
void *below[64];        /* the contexts current before each push not yet popped */
static int module;
int cuCtxGetCurrent(void **ctx) { *ctx = current; return 0; }
int cuCtxPushCurrent_v2(void *ctx) {
  if (fail_pushes) return fail_pushes;
  if (n_pushed < 64) pushed[n_pushed] = ctx;
  n_pushed++;
  if (depth < 64) below[depth] = current;
  depth++;
  current = ctx;
  return 0;
}
int cuCtxPopCurrent_v2(void **ctx) {
  depth--;
  if (ctx) *ctx = current;
  current = depth < 64 ? below[depth] : 0;
  return 0;
}
int cuModuleLoadData(void **m, const void *data) { *m = &module; return 0; }
int cuModuleLoadDataEx(void **m, const void *data, unsigned n, int *options, void **values) {
  *m = &module;
  return 0;
}
int cuFuncSetAttribute(void *f, int attribute, int value) { return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, void *stream, void **params, void **extra) {
  if (n_launches < 64) {
    int64_t *l = launches[n_launches];
    l[0] = gx; l[1] = gy; l[2] = gz; l[3] = bx; l[4] = by; l[5] = bz; l[6] = smem;
  }
  n_launches++;
  return fail_launches;
}
int64_t memsets[16][2];
int n_memsets = 0;
int cuMemsetD32Async(uint64_t dst, unsigned value, size_t count, void *stream) {
  if (n_memsets < 16) { memsets[n_memsets][0] = (int64_t)dst; memsets[n_memsets][1] = (int64_t)count; }
  n_memsets++;
  return 0;
}
void mgpuModuleUnload(void *m) {}
int n_get_function = 0;  /* cuModuleGetFunction calls */
int cuModuleGetFunction(void **f, void *m, const char *name) { n_get_function++; *f = (void *)name; return 0; }
void mgpuSetDefaultDevice(int32_t device) {}
void *mgpuMemAlloc(uint64_t size, void *stream, _Bool shared) { return 0; }
void mgpuMemFree(void *ptr, void *stream) {}
void mgpuMemcpy(void *dst, void *src, size_t size, void *stream) {}
void *mgpuStreamCreate(void) { return 0; }
void mgpuStreamSynchronize(void *stream) {}
void mgpuStreamDestroy(void *stream) {}
"""


@pytest.fixture(scope="module")
def stub(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("stub")
    (d / "stub.c").write_text(STUB)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(d / "libstub.so"), str(d / "stub.c")], check=True)
    return str(d / "libstub.so")


class Host:
    """A compiled fusion's host code over the stub: fake device pointers, recorded
    allocations, frees and launches."""

    def __init__(self, stub: str, fn, *example):
        compiled = mlirfuse.jit(fn).compile(*example, backend="gpu", arch="sm_90")
        self.lib = ctypes.CDLL(stub, mode=ctypes.RTLD_GLOBAL)
        self.exe = DeviceExecutable(compiled.kernel.module.host_llvm, 0, runtime=stub)
        self.allocs: list[int] = []
        self.frees: list[int] = []
        self._next = 0x7F0000000000

        def alloc(size, stream):
            self._next += (size + 4095) // 4096 * 4096
            self.allocs.append(size)
            return self._next

        self._callbacks = (ALLOC_FN(alloc), FREE_FN(lambda ptr, stream: self.frees.append(ptr)))
        self.exe.set_allocator(*self._callbacks)

    def call(self, shapes_in, shapes_out, arena: int = 0, arena_bytes: int = 0) -> int:
        self.allocs.clear()
        self.frees.clear()
        ctypes.c_int.in_dll(self.lib, "n_launches").value = 0
        args, address = [], 0x600000000000
        for shape in list(shapes_in) + list(shapes_out):
            strides = [int(np.prod(shape[k + 1:])) for k in range(len(shape))]
            args.append((address, shape, strides))
            address += 1 << 32
        bound = self.exe.bind(args)
        return self.exe.call_unlocked(0x1234, bound.packed, arena, arena_bytes)

    def launches(self) -> list[tuple[int, ...]]:
        n = ctypes.c_int.in_dll(self.lib, "n_launches").value
        table = (ctypes.c_int64 * 7 * 64).in_dll(self.lib, "launches")
        return [tuple(table[i]) for i in range(min(n, 64))]


def _two_column_sums(x):
    return x.sum((0, 1)), (x * x).sum((0, 1))


def test_scratch_comes_from_the_arena_once_its_size_is_known(stub) -> None:
    host = Host(stub, _two_column_sums, np.ones((2, 3, 64), np.float32))
    shapes_in, shapes_out = [(16, 512, 4096)], [(4096,), (4096,)]
    ctypes.c_int.in_dll(host.lib, "n_memsets").value = 0
    need = host.call(shapes_in, shapes_out)  # no arena: every workspace from the allocator
    host.allocs_of_last_cold = list(host.allocs)
    # the two workspaces and the column blocks' counters
    assert len(host.allocs) == 3 and sorted(host.frees) == sorted(set(host.frees)) and len(host.frees) == 3
    assert need == sum((size + 255) // 256 * 256 for size in host.allocs)
    first = host.launches()
    assert len(first) == 1  # the sibling column reductions merged, their last blocks combining the partials
    col_blocks = 4096 // (32 * 4)
    assert first[0][0] % col_blocks == 0 and host.allocs[2] == col_blocks * 4
    # the counters zeroed before the launch: a memset (no kernel), one counter a column block
    assert ctypes.c_int.in_dll(host.lib, "n_memsets").value == 1
    assert (ctypes.c_int64 * 2 * 16).in_dll(host.lib, "memsets")[0][1] == col_blocks

    arena = 0x500000000000
    assert host.call(shapes_in, shapes_out, arena, need) == need
    assert host.allocs == [] and host.frees == []  # no allocator call at all
    assert host.launches() == first

    first_slice = (host.allocs_of_last_cold[0] + 255) // 256 * 256
    assert host.call(shapes_in, shapes_out, arena, first_slice) == need  # the others do not fit
    assert len(host.allocs) == 2 and len(host.frees) == 2
    assert not any(arena <= f < arena + first_slice for f in host.frees)


def _row_and_column_sums(x):
    return x.sum(-1), (x * 2.0).sum(0)


def test_an_executables_engine_outlives_it(stub) -> None:
    """Dropping an executable does not destroy its ExecutionEngine: on the GPU machine a
    destroyed host-module engine left later C++ exceptions (thrown inside the MLIR bindings)
    crashing or hanging the process (test_gpu's
    `test_compiling_after_a_loaded_executable_is_dropped_does_not_crash`)."""
    import gc
    import weakref

    from mlirfuse.lowering.gpu import runtime

    host = Host(stub, lambda x: ops.abs(x) * 2.0, np.ones(4, np.float32))
    host.call([(4,)], [(4,)])
    engine, dropped = host.exe.engine, weakref.ref(host.exe)
    del host
    gc.collect()
    assert dropped() is None
    assert any(e is engine for e in runtime._ENGINES)


def test_each_kernel_is_looked_up_in_its_module_once(stub) -> None:
    """The host code asks the driver for each kernel of its module (cuModuleGetFunction) at
    its first launch only; later calls launch the function it remembered."""
    host = Host(stub, _row_and_column_sums, np.ones((8, 64), np.float32))
    looked_up = ctypes.c_int.in_dll(host.lib, "n_get_function")
    looked_up.value = 0
    host.call([(512, 4096)], [(512,), (4096,)])
    kernels = host.launches()
    assert len(kernels) == 2 and looked_up.value == 2
    for _ in range(3):
        host.call([(512, 4096)], [(512,), (4096,)])
        assert host.launches() == kernels
    assert looked_up.value == 2


def test_launches_and_memsets_run_in_the_executables_context(stub) -> None:
    """Each launch and memset pushes the context of the executable's device (the module's
    `mlirfuse_context`) and pops it after: the MLIR runtime's own entry points would use the
    first device's context whatever the device (cuda:1 launches in cuda:0's context)."""
    host = Host(stub, _two_column_sums, np.ones((2, 3, 64), np.float32))
    context = 0xC0DE0001
    ctypes.c_void_p.from_address(host.exe._global("context")).value = context
    pushed = ctypes.c_int.in_dll(host.lib, "n_pushed")
    pushed.value = 0
    host.call([(16, 512, 4096)], [(4096,), (4096,)])  # a memset and a launch
    assert pushed.value == 2 and ctypes.c_int.in_dll(host.lib, "depth").value == 0
    assert list((ctypes.c_void_p * 64).in_dll(host.lib, "pushed")[:2]) == [context, context]


def test_no_push_where_the_executables_context_is_current_already(stub) -> None:
    """Where the calling thread's context is the executable's (torch's calls on that device),
    launches and memsets neither push nor pop it: the driver's launches, and the caller's
    next runtime calls, were slower after a context pushed and popped around each launch."""
    host = Host(stub, _two_column_sums, np.ones((2, 3, 64), np.float32))
    context = 0xC0DE0001
    ctypes.c_void_p.from_address(host.exe._global("context")).value = context
    current = ctypes.c_void_p.in_dll(host.lib, "current")
    pushed = ctypes.c_int.in_dll(host.lib, "n_pushed")
    current.value, pushed.value = context, 0
    try:
        host.call([(16, 512, 4096)], [(4096,), (4096,)])  # a memset and a launch
        assert pushed.value == 0 and len(host.launches()) == 1
        assert ctypes.c_int.in_dll(host.lib, "depth").value == 0 and current.value == context
        current.value = 0xC0DE0002  # another device's context: pushed and popped
        host.call([(16, 512, 4096)], [(4096,), (4096,)])
        assert pushed.value == 2 and current.value == 0xC0DE0002
    finally:
        current.value = None


def test_no_launch_and_no_pop_where_the_context_could_not_be_made_current(stub) -> None:
    """A failed push: nothing launched, the caller's context not popped, a FusionError; with
    no context set (the stub's executables), nothing is pushed at all."""
    host = Host(stub, _two_column_sums, np.ones((2, 3, 64), np.float32))
    n_pushed, n_launches = (ctypes.c_int.in_dll(host.lib, k) for k in ("n_pushed", "n_launches"))
    n_pushed.value = 0
    host.call([(16, 512, 4096)], [(4096,), (4096,)])
    assert n_pushed.value == 0 and len(host.launches()) == 1  # no context: no push
    ctypes.c_void_p.from_address(host.exe._global("context")).value = 0xC0DE0001
    fail = ctypes.c_int.in_dll(host.lib, "fail_pushes")
    fail.value = 201  # CUDA_ERROR_INVALID_CONTEXT
    try:
        with pytest.raises(FusionError, match="failed"):
            host.call([(16, 512, 4096)], [(4096,), (4096,)])
    finally:
        fail.value = 0
    assert n_launches.value == 0 and ctypes.c_int.in_dll(host.lib, "depth").value == 0
    host.call([(16, 512, 4096)], [(4096,), (4096,)])
    assert len(host.launches()) == 1 and ctypes.c_int.in_dll(host.lib, "depth").value == 0


def test_a_failing_launch_raises(stub) -> None:
    """The driver's error code of a failed launch comes back as a FusionError (the runtime
    only printed it), and is cleared: the next call that works returns normally."""
    host = Host(stub, lambda x: ops.relu(x + 1.0), np.ones((4, 8), np.float32))
    fail = ctypes.c_int.in_dll(host.lib, "fail_launches")
    fail.value = 700  # CUDA_ERROR_ILLEGAL_ADDRESS
    try:
        with pytest.raises(FusionError, match="a launch on CUDA device 0 failed"):
            host.call([(4, 8)], [(4, 8)])
    finally:
        fail.value = 0
    assert host.call([(4, 8)], [(4, 8)]) == 0 and len(host.launches()) == 1


def test_grids_follow_the_sizes_of_each_call(stub) -> None:
    host = Host(stub, lambda x: ops.relu(x + 1.0), np.ones((4, 8), np.float32))
    for rows, cols in [(4096, 1024), (3, 5), (1, 4096)]:
        assert host.call([(rows, cols)], [(rows, cols)]) == 0
        (launch,) = host.launches()
        per_block = 4 * 4 * 256 if (rows * cols) % 4 == 0 else 4 * 256  # vectors of 4 x unroll 4
        assert launch[:6] == (-(-rows * cols // per_block), 1, 1, 256, 1, 1)
    assert host.call([(0, 7)], [(0, 7)]) == 0 and host.launches() == []  # empty: no launch


def test_few_long_rows_are_cut_into_chunks_and_many_are_not(stub) -> None:
    """x.sum(-1): rows of a whole block that are fewer than two blocks per SM are cut into
    chunks of 32768 elements or more (a block each; a [rows, chunks] workspace and a counter
    per row, zeroed by a memset; each row's last block adds the partials, in the same launch);
    many rows, or short ones, take one launch and allocate nothing."""
    host = Host(stub, lambda x: x.sum(-1), np.ones((4, 8), np.float32))
    # 32 chunks of 32768: 128 floats (a 512-byte slice), then 4 counters (a 256-byte slice)
    assert host.call([(4, 1 << 20)], [(4,)]) == 4 * 32 * 4 + 256
    (chunks,) = host.launches()
    assert chunks[:4] == (4 * 32, 1, 1, 512)
    assert host.allocs == [4 * 32 * 4, 4 * 4] and len(host.frees) == 2
    for shape, grid in [((4096, 1 << 12), 2048), ((4, 4096), 2), ((300, 1 << 16), 300)]:  # short rows, or many
        assert host.call([shape], [shape[:1]]) == 0 and host.allocs == []
        (launch,) = host.launches()
        assert launch[:4] == (grid, 1, 1, 512)  # 2 rows of 4096 a block (256 threads each), or 1


def test_a_call_without_scratch_needs_no_arena(stub) -> None:
    host = Host(stub, lambda x, w: (x - x.mean(-1, keepdim=True)) * w, np.ones((4, 8), np.float32),
                np.ones(8, np.float32))
    assert host.call([(64, 1024), (1024,)], [(64, 1024)]) == 0 and host.allocs == []
    assert len(host.launches()) == 1


def test_torch_launcher_sizes_its_arena_after_the_first_call(stub) -> None:
    """The hot path's launcher (torch tensors in and out; a CPU stand-in for torch's CUDA
    allocator here): the first call learns the scratch size from the allocator, later calls
    take it from one arena allocation; a fusion without scratch only sets the stream."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from mlirfuse.torch_launcher import TorchLauncher

    def fake_torch():
        allocations = []

        def empty_strided(size, stride, dtype, device):
            allocations.append(tuple(size))
            return torch.empty_strided(size, stride, dtype=dtype)

        cuda = SimpleNamespace(empty_strided=empty_strided, uint8=torch.uint8, device=lambda kind, index: "cpu",
                               is_grad_enabled=torch.is_grad_enabled,
                               _C=SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0x1234))
        return cuda, allocations

    for fn, n_out, scratch in ((_two_column_sums, 2, True), (lambda x: ops.relu(x + 1.0), 1, False)):
        host = Host(stub, fn, np.ones((2, 3, 64), np.float32))
        shape = (16, 512, 4096)
        outputs = [((4096,), torch.float32)] * 2 if n_out == 2 else [(shape, torch.float32)]
        cuda, allocations = fake_torch()
        launcher = TorchLauncher(cuda, host.exe, host.exe.bind([(0, shape, [512 * 4096, 4096, 1])] + [
            (0, s, [1] * len(s)) for s, _ in outputs]), [False], outputs, 0)
        x = torch.empty(0)
        for call in range(3):
            allocations.clear()
            host.allocs.clear()
            ctypes.c_int.in_dll(host.lib, "n_launches").value = 0
            outs = launcher([x])
            assert [tuple(o.shape) for o in outs] == [s for s, _ in outputs]
            assert len(host.launches()) == 1
            if not scratch:
                assert allocations == [shape] and host.allocs == [] and launcher._scratch == 0
            elif call == 0:  # no arena yet: the workspaces and counters come from the allocator
                assert len(host.allocs) == 3 and launcher._scratch >= sum(host.allocs)
            else:  # one arena, sized by the first call, holds them
                assert host.allocs == [] and allocations == [(4096,), (4096,), (launcher._scratch,)]
        if scratch:  # an arena too small: the allocator serves the rest, the next arena is larger
            need = launcher._scratch
            launcher._scratch = launcher._arena_bytes[0] = 256
            for call in range(2):
                allocations.clear()
                host.allocs.clear()
                launcher([x])
                assert (host.allocs != [], allocations[-1]) == ((True, (256,)) if call == 0 else (False, (need,)))
            # The guarded call allocates the same arena itself (one Python function, no `call`),
            # and grows it alike.
            guarded = launcher.guarded((x,), "(o0, o1, )", None)
            launcher._scratch = launcher._arena_bytes[0] = 256
            for call in range(2):
                allocations.clear()
                host.allocs.clear()
                assert len(guarded((x,))) == 2
                assert (host.allocs != [], allocations[-1]) == ((True, (256,)) if call == 0 else (False, (need,)))


def _cpu_torch_cuda(torch):
    """The torch CUDA entry points a launcher calls, standing in on the CPU (stream 0x1234)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        empty_strided=lambda size, stride, dtype, device: torch.empty_strided(size, stride, dtype=dtype),
        uint8=torch.uint8, device=lambda kind, index: "cpu", is_grad_enabled=torch.is_grad_enabled,
        _C=SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0x1234))


def _scaling_launcher(stub, torch):
    """`x * k` (x float32 [4, 8], k an int64 scalar): its host code over the stub, the stand-in
    for torch's CUDA entry points, and a launcher of it for CPU tensors."""
    from mlirfuse.torch_launcher import TorchLauncher

    host, cuda, shape = Host(stub, lambda x, k: x * k, np.ones((4, 8), np.float32), 3), _cpu_torch_cuda(torch), (4, 8)
    launcher = TorchLauncher(cuda, host.exe, host.exe.bind([(0, shape, [8, 1]), np.asarray(3, np.int64),
                                                           (0, shape, [8, 1])]), [False, True],
                             [(shape, torch.float32)], 0)
    return host, cuda, launcher


@pytest.mark.parametrize("torch_guard", [True, False], ids=["TensorGuards", "python-guard"])
def test_guarded_launcher_launches_only_for_its_layouts(stub, monkeypatch, torch_guard) -> None:
    """A launcher's guarded call (what a repeated `jit` call runs): one generated function
    checks the tensors' class, dtype, sizes, strides and device and the scalars' types and
    ranges, then launches; anything else answers MISS and launches nothing (the caller takes
    the general path, which explains or recompiles). Also with torch's TensorGuards missing."""
    torch = pytest.importorskip("torch")

    import mlirfuse.torch_launcher as torch_launcher
    from mlirfuse.torch_launcher import MISS, TorchLauncher

    if not torch_guard:
        monkeypatch.setattr(torch_launcher, "_tensor_guard", lambda tensors: None)
    host, cuda, launcher = _scaling_launcher(stub, torch)
    shape = (4, 8)
    x = torch.zeros(shape)

    def launches(fn, *args):
        ctypes.c_int.in_dll(host.lib, "n_launches").value = 0
        result = fn(args)
        return result, len(host.launches())

    assert launcher.guarded((x, 3), "o0", None) is None  # before the first call
    launcher([x, 3])
    guarded = launcher.guarded((x, 3), "o0", None)
    assert guarded is launcher.guarded((x, 3), "o0", None)  # generated once
    out, n = launches(guarded, torch.ones(shape), 5)
    assert n == 1 and isinstance(out, torch.Tensor) and tuple(out.shape) == shape
    for args in [(torch.ones(4, 9), 5), (torch.ones(8, 4).t(), 5), (torch.ones(shape, dtype=torch.float64), 5),
                 (torch.ones(shape), 5.0), (torch.ones(shape),), (torch.ones(shape), 5, 5), (np.ones(shape), 5),
                 (torch.ones(shape), 1 << 63), (torch.ones(shape), -(1 << 63) - 1)]:
        assert launches(guarded, *args) == (MISS, 0), args
    assert launches(guarded, torch.ones(shape), (1 << 63) - 1)[1] == 1  # the int64 limits themselves
    with pytest.raises(FusionError, match="input 1: 9223372036854775808 is out of range for the int64"):
        launcher([torch.ones(shape), 1 << 63])  # the unguarded call raises instead of wrapping
    previous = mlirfuse.set_options(dump="compile_time")
    try:
        assert launches(guarded, torch.ones(shape), 5) == (MISS, 0)  # dumps take the general path
    finally:
        mlirfuse.restore_options(previous)
    tupled = TorchLauncher(cuda, host.exe, launcher._bound, [False, True], [(shape, torch.float32)], 0)
    tupled([x, 3])
    (out,), n = launches(tupled.guarded((x, 3), "(o0,)", None), torch.ones(shape), 5)
    assert n == 1 and tuple(out.shape) == shape
    rebuilt = TorchLauncher(cuda, host.exe, launcher._bound, [False, True], [(shape, torch.float32)], 0)
    rebuilt([x, 3])
    out, n = launches(rebuilt.guarded((x, 3), None, lambda outs: {"y": outs[0]}), torch.ones(shape), 5)
    assert n == 1 and list(out) == ["y"]
    # Made for a tensor requiring grad (a parameter read inside AOTAutograd's forward): only
    # while grad mode is off (with it on, autograd must see the call), and only for such tensors.
    graded = TorchLauncher(cuda, host.exe, launcher._bound, [False, True], [(shape, torch.float32)], 0)
    w = torch.zeros(shape, requires_grad=True)
    graded([w, 3])
    guarded = graded.guarded((w, 3), "o0", None)
    assert launches(guarded, torch.ones(shape, requires_grad=True), 5) == (MISS, 0)
    with torch.no_grad():
        assert launches(guarded, torch.ones(shape, requires_grad=True), 5)[1] == 1
        assert launches(guarded, torch.ones(shape), 5) == (MISS, 0)
        assert launches(launcher.guarded((x, 3), "o0", None), torch.ones(shape, requires_grad=True), 5) == (MISS, 0)


def test_a_launchers_entry_takes_its_callers_way_out(stub) -> None:
    """`entry` (a torch.compile region's call): the guarded launch as one generated function
    whose misses (other layouts or scalars, the caller's condition, dumps, a failing launch)
    run the caller's statement instead of launching, whose lines `before` see the unpacked
    arguments before they are checked, and whose result is the caller's expression."""
    torch = pytest.importorskip("torch")
    host, cuda, launcher = _scaling_launcher(stub, torch)
    shape = (4, 8)
    x = torch.zeros(shape)
    launcher([x, 3])
    launcher.guarded((x, 3), "(o0, )", None)
    taken, flag = [], [False]
    entry = launcher.entry("(o0.t(), a1, )", "return general(args)", " or flag[0]", ["    a0 = a0.view(4, 8)"],
                           {"general": lambda args: taken.append(args) or "general", "flag": flag})
    n_launches, failing = (ctypes.c_int.in_dll(host.lib, name) for name in ("n_launches", "fail_launches"))

    def launches(*args):
        n_launches.value = 0
        taken.clear()
        result = entry(args)
        return result, n_launches.value, len(taken)

    (out, k), n, general = launches(torch.ones(32), 5)  # viewed as [4, 8] before the checks
    assert (tuple(out.shape), out.stride(), k, n, general) == ((8, 4), (1, 8), 5, 1, 0)
    for args in [(torch.ones(32, dtype=torch.float64), 5), (torch.ones(32), 5.0), (torch.ones(32),),
                 (torch.ones(32), 1 << 63)]:
        assert launches(*args) == ("general", 0, 1), args
    flag[0] = True
    assert launches(torch.ones(32), 5) == ("general", 0, 1)
    flag[0] = False
    previous = mlirfuse.set_options(dump="compile_time")
    try:
        assert launches(torch.ones(32), 5) == ("general", 0, 1)
    finally:
        mlirfuse.restore_options(previous)
    failing.value = 1  # CUDA_ERROR_INVALID_VALUE: the launch raised FusionError
    try:
        assert launches(torch.ones(32), 5) == ("general", 1, 1)
    finally:
        failing.value = 0
    assert launches(torch.ones(32), 5)[1:] == (1, 0)


def test_a_repeated_region_call_takes_its_launchers_entry(stub, monkeypatch) -> None:
    """A torch.compile region whose jitted function has a guarded launch (as on the GPU: here
    its host code over the stub, so the outputs are never written) makes that launch its own
    entry after its first call: one launch a call, no call of the jitted function. It takes
    the general path (the jitted function's call) for inputs of another layout, under
    torch.profiler (the region's named range) and with check_regions on."""
    torch = pytest.importorskip("torch")

    from test_torch_backend import _one_region

    import mlirfuse.torch_launcher as torch_launcher
    from mlirfuse.torch_launcher import TorchLauncher

    def fn(x):
        return (torch.exp(x) * 2.0).sum(-1)
    x = torch.randn(4, 8)
    compiled, region = _one_region(monkeypatch, fn, x)
    host = Host(stub, lambda t: (ops.exp(t) * 2.0).sum(-1), np.ones((4, 8), np.float32))
    cuda = _cpu_torch_cuda(torch)
    monkeypatch.setattr(torch_launcher, "_tensor_guard", lambda tensors: None)  # (TensorGuards wants CUDA or CPU alike)
    launcher = TorchLauncher(cuda, host.exe, host.exe.bind([(0, (4, 8), [8, 1]), (0, (4,), [1])]), [False],
                             [((4,), torch.float32)], 0)
    launcher([x])
    real, calls = region.jitted, []

    class WithHotPath:  # the jitted function as on the GPU: its first call makes the guarded launch
        _hot = None

        def __call__(self, *args):
            calls.append("general")
            self._hot = launcher.guarded(args, "(o0, )", None)
            return real(*args)
    region.jitted = WithHotPath()
    n_launches = ctypes.c_int.in_dll(host.lib, "n_launches")

    def run(t):
        calls.clear()
        n_launches.value = 0
        assert tuple(compiled([t]).shape) == (4,)
        return calls + ["launch"] * n_launches.value
    assert run(x) == ["general"]
    assert run(torch.randn(4, 8)) == ["launch"] == run(torch.randn(4, 8))
    assert run(torch.randn(8, 4).t()) == ["general"]  # another layout
    with torch.profiler.profile() as prof:
        assert run(x) == ["general"]
    assert any(e.name == region.label for e in prof.events())
    previous = mlirfuse.set_options(check_regions=True)
    try:
        assert run(x) == ["general"]
    finally:
        mlirfuse.restore_options(previous)
    assert run(x) == ["launch"]


def test_guarded_launcher_of_a_fusion_without_outputs(stub) -> None:
    """`fn` returning () (or []): the guarded call's result expression has no outputs."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from mlirfuse.torch_launcher import TorchLauncher
    from mlirfuse.frontend.jit import _result_code

    assert [_result_code((tuple, []), 0), _result_code((list, []), 0)] == ["()", "[]"]
    assert eval(_result_code((tuple, [None, None]), 2), {"o0": 1, "o1": 2}) == (1, 2)  # noqa: S307
    host = Host(stub, lambda x: (), np.ones(4, np.float32))
    cuda = SimpleNamespace(empty_strided=None, uint8=torch.uint8, device=lambda kind, index: "cpu",
                           is_grad_enabled=torch.is_grad_enabled,
                           _C=SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0x1234))
    x = torch.zeros(4)
    for scratch in (0, 256):  # with an arena or without
        launcher = TorchLauncher(cuda, host.exe, host.exe.bind([(0, (4,), [1])]), [False], [], 0)
        assert launcher([x]) == []
        if scratch:
            launcher._grow(scratch)
            launcher._alloc = lambda sizes, strides, dtype: torch.empty_strided(sizes, strides, dtype=dtype)
            launcher.call = launcher._straight_line()
        assert launcher.guarded((x,), "()", None)((x,)) == ()


def test_executables_are_loaded_once_per_fusion_and_device(monkeypatch) -> None:
    """GpuKernels of one fusion (the same function jitted twice) share one loaded executable
    per device, kept for the process: no second load, no unload while launches may run."""
    from mlirfuse import gpu_kernel

    loads = []

    class Loaded:
        lock = __import__("threading").Lock()

    def load(self, device):
        loads.append(device)
        return Loaded()

    monkeypatch.setattr(gpu_kernel.GpuKernel, "_load_executable", load)
    monkeypatch.setattr(gpu_kernel, "_LOADED", {})
    x = np.ones((4, 8), np.float32)
    fn = lambda t: ops.exp(t) * 3.0  # noqa: E731
    first = mlirfuse.jit(fn).compile(x, backend="gpu", arch="sm_90").kernel
    second = mlirfuse.jit(fn).compile(x, backend="gpu", arch="sm_90").kernel
    other = mlirfuse.jit(lambda t: t * 2.0).compile(x, backend="gpu", arch="sm_90").kernel
    assert first.executable(0) is second.executable(0) and loads == [0]
    assert first.executable(1) is not first.executable(0) and loads == [0, 1]
    assert other.executable(0) is not first.executable(0) and loads == [0, 1, 0]
    del first
    assert second.executable(0) is not None and loads == [0, 1, 0]


def test_outputs_come_from_torchs_fast_allocation_path_on_the_current_device() -> None:
    """torch's allocation entry for generated code (no dispatcher; it allocates on the current
    device) serves the only device, and with several devices a call whose device is the
    current one (a DDP rank's); another device takes `torch.empty_strided` with the device."""
    from types import SimpleNamespace

    from mlirfuse.torch_launcher import _torch_allocator

    made = []
    current = [0]

    def fast(sizes, strides, dtype):
        return ("fast", sizes, strides, dtype)

    def empty_strided(sizes, strides, dtype, device):
        made.append(device)
        return ("dispatcher", sizes, strides, dtype)

    def fake(devices: int, with_fast: bool = True):
        guards = SimpleNamespace(_empty_strided_cuda=fast) if with_fast else SimpleNamespace()
        return SimpleNamespace(_C=SimpleNamespace(_dynamo=SimpleNamespace(guards=guards),
                                                  _cuda_getDevice=lambda: current[0]),
                               cuda=SimpleNamespace(device_count=lambda: devices),
                               empty_strided=empty_strided, device=lambda kind, index: f"{kind}:{index}")

    assert _torch_allocator(fake(1), 0)((4, 4), (4, 1), "f32") == ("fast", (4, 4), (4, 1), "f32")
    on_1 = _torch_allocator(fake(2), 1)
    current[0] = 1
    assert on_1((4,), (1,), "f32") == ("fast", (4,), (1,), "f32") and made == []
    current[0] = 0
    for alloc, device in ((on_1, 1), (_torch_allocator(fake(1, with_fast=False), 0), 0)):
        assert alloc((8,), (1,), "f32") == ("dispatcher", (8,), (1,), "f32")
        assert made[-1] == f"cuda:{device}"
