"""GPU code generation checked on any machine: PTX and IR shape (no GPU needed)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mlirfuse
from mlirfuse import ops
from mlirfuse.lowering.gpu import toolchain

pytestmark = pytest.mark.skipif(toolchain.find().libdevice is None,
                                reason="no libdevice (CUDA toolkit or nvidia-cuda-nvcc wheel)")
X = np.ones((4, 8), np.float32)


def compile_gpu(fn, *args, arch: str = "sm_90"):
    return mlirfuse.jit(fn).compile(*args, backend="gpu", arch=arch)


def test_pointwise_ptx() -> None:
    c = compile_gpu(lambda x, y: ops.exp(x) * y + 1.0, X, X[0])
    ptx = c.ptx
    assert ".target sm_90" in ptx and ".version 8.0" in ptx
    assert ".visible .entry" in ptx and "ld.global" in ptx and "st.global" in ptx
    assert "ex2.approx" in ptx  # libdevice's expf, inlined
    assert "setp" in ptx  # the bounds guard
    assert c.n_kernels == 1
    assert "gpu.launch" in c.stages["gpu"] and "scf.if" in c.stages["gpu"]


def test_host_side_uses_caller_stream_and_allocator() -> None:
    c = compile_gpu(lambda x: x.sum(-1) * 2.0, X)
    host = c.stages["llvm"]
    assert "llvm.func @mgpuStreamCreate()" in host and "@mlirfuse_stream" in host
    assert "gpu.launch_func" in host and "gpu.binary" in host
    # defined by mlirfuse (no-ops on the caller's stream), not taken from the runtime:
    assert "llvm.func @mgpuStreamSynchronize(%arg0: !llvm.ptr) {" in host


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.bool_])
def test_dtypes_generate_ptx(dtype) -> None:
    x = np.ones((3, 5), dtype)
    c = compile_gpu(lambda t: (ops.maximum(t, t), t.sum(0)), x)
    assert ".entry" in c.ptx and c.n_kernels >= 2


def test_full_reduction_runs_in_a_kernel_not_on_the_host() -> None:
    c = compile_gpu(lambda x: ops.sum(x), X)
    gpu_stage = c.stages["gpu"]
    # one launch: the row cut into chunks, the last block combining them (the fill folded in)
    assert gpu_stage.count("gpu.launch blocks") == 1
    top_level = [line for line in gpu_stage.splitlines() if line.startswith("    ") and not line.startswith("     ")]
    assert not any("memref.load" in line or "memref.store" in line or "scf.for" in line for line in top_level)


def test_a_column_reductions_slice_partials_are_stored_and_combined_as_vectors() -> None:
    """The vector variant of x.sum(0): each slice's partial goes to the workspace as one
    128-bit store, and the last block loads the partials a vector a slice (an element's load
    each: [8192, 768] bfloat16 x.sum(0) 9.9 us, 8.3 with vectors, H200)."""
    ptx = compile_gpu(lambda x: x.sum(0), np.random.randn(2100, 64).astype(np.float32)).stages["ptx"]
    memory = [line.split()[0] for line in ptx.splitlines() if line.strip().startswith(("ld.global", "st.global",
                                                                                        "atom.global"))]
    counted = memory.index("atom.global.add.u32")  # the vector variant's block counting itself done
    assert memory[counted - 1] == "st.global.v4.b32"  # its partial
    assert memory[counted + 1] == "ld.global.v4.b32"  # the slices' partials, combined by the last block


def test_random_and_scalars_by_value() -> None:
    c = compile_gpu(lambda x, s: ops.rand_like(x, seed=3) * s, X, 2.0)
    # Philox's rounds: 32-bit mul.lo/mul.hi, not 64-bit multiplies of masked words (the few
    # 64-bit multiplies left are index arithmetic).
    assert c.ptx.count("mul.hi.u32") == c.ptx.count("mul.lo.s32") >= 20
    assert c.ptx.count("mul.lo.s64") <= 4
    assert ": f64" in c.stages["gpu"].split("\n")[1]  # the scalar is an f64 argument, not a memref


def test_host_module_translates_to_llvm_ir_with_stream_launches() -> None:
    import re
    import subprocess
    from pathlib import Path

    import mlir

    c = compile_gpu(lambda x: x.sum(0) * 2.0, X)
    translate = Path(list(mlir.__path__)[0]) / "bin" / "mlir-translate"
    result = subprocess.run([str(translate), "--mlir-to-llvmir"], input=c.stages["llvm"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    launches = re.findall(r"call void @mgpuLaunchKernel\(.*\)", result.stdout)
    assert len(launches) == 1  # the column reduction (its fill folded in, the scaling its epilogue)
    assert "@mgpuModuleLoad" in result.stdout  # the binary is loaded by a global constructor


def test_gcd_is_a_loop_and_nextafter_steps_the_bits() -> None:
    """gcd: Euclid's loop (a remainder inside a backward branch) in the kernel; nextafter: an
    integer add/sub on the float's bits, no libdevice call."""
    i = np.arange(8, dtype=np.int64)
    ptx = compile_gpu(lambda a, b: ops.gcd(a, b), i, i).ptx
    assert "rem.s64" in ptx and ptx.count("bra") >= 2
    ptx = compile_gpu(lambda a, b: ops.nextafter(a, b), X, X).ptx
    assert ("add.s32" in ptx or "sub.s32" in ptx) and "call" not in ptx


def test_float32_sqrt_is_correctly_rounded() -> None:
    """sqrt and rsqrt of float32 use sqrt.rn.f32 (torch's CUDA sqrt is correctly rounded):
    libdevice's __nv_sqrtf, which math.sqrt became, is sqrt.approx.f32, up to an ulp off."""
    for fn in (lambda v: ops.sqrt(v), lambda v: ops.rsqrt(v)):
        ptx = compile_gpu(fn, X).ptx
        assert "sqrt.rn.f32" in ptx and "sqrt.approx" not in ptx


def test_fma_is_one_ptx_fma() -> None:
    """ops.fma is one fma.rn (a mul and an add would round twice); bf16 goes through float32."""
    assert "fma.rn.f32" in compile_gpu(lambda a, b, c: ops.fma(a, b, c), X, X, X).ptx
    h = X.astype(ml_dtypes.bfloat16)
    ptx = compile_gpu(lambda a, b, c: ops.fma(a, b, c), h, h, h).ptx
    assert "fma.rn.f32" in ptx and "fma.rn.bf16" not in ptx


@pytest.mark.parametrize("name", ["e4m3fn", "e5m2"])
def test_float8_loads_and_stores_are_bytes_and_convert_by_cvt_from_sm_89(name) -> None:
    """float8 tensors are bytes in memory (LLVM has no 8-bit float): u8 loads and stores. On
    sm_90 the conversions are PTX cvt (to float16 and widened; from float32 round to nearest
    even, satfinite); on sm_80, which has no float8 cvt, integer code on the bits."""
    import ml_dtypes

    dt = getattr(mlirfuse.DataType, f"Float8_{name}")
    x = np.zeros((4, 8), getattr(ml_dtypes, f"float8_{name}"))
    fn = lambda t: ops.cast(ops.cast(t, mlirfuse.DataType.Float) * 2.0, dt)  # noqa: E731
    f8 = name[:4]
    cvt = [f"cvt.rn.f16x2.{f8}x2", f"cvt.rn.satfinite.{f8}x2.f32"]
    ptx = compile_gpu(fn, x).ptx
    assert "ld.global.u8" in ptx or "ld.global.v4.u8" in ptx or "ld.global.b8" in ptx or "ld.global.nc.u8" in ptx
    assert "st.global" in ptx
    assert all(c in ptx for c in cvt), cvt
    ptx = compile_gpu(fn, x, arch="sm_80").ptx
    assert not any(c in ptx for c in cvt) and ".f16" not in ptx


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_float_op_compiles_to_ptx(dtype) -> None:
    """Each float elementwise op of the table lowers through NVVM (libdevice linked in): no
    function is left external for the driver to resolve."""
    from mlirfuse.dialects import optable
    from test_ops import ELEMENTWISE_CASES

    names = [n for n, d in ELEMENTWISE_CASES if d is dtype and n != "where"]
    x = np.full((4, 8), 0.5, dtype)

    def fn(t):
        return tuple(getattr(ops, n)(*[t] * optable.OPS[n].arity) for n in names)
    ptx = compile_gpu(fn, x).ptx
    assert ".entry" in ptx and ".extern" not in ptx


def test_a_packed_transpose_keeps_its_shared_memory_and_barrier() -> None:
    """A transpose kernel packed with a pointwise one: one kernel, the transpose's square of
    shared memory and its barrier in it, accepted by ptxas where the toolkit has it."""
    k = np.ones((2, 40, 3, 64), np.float32).transpose(0, 2, 1, 3)  # a permuted dense layout
    c = compile_gpu(lambda k, v: (ops.permute(k, [0, 1, 3, 2]) * 0.5, v * 2.0), k, k)
    ptx = c.ptx
    assert ptx.count(".entry") == 1 and c.n_launches == 1
    assert "bar.sync" in ptx and ".shared" in ptx
    ptxas = toolchain.find().ptxas
    if ptxas is not None:
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            path = f"{d}/k.ptx"
            with open(path, "w") as f:
                f.write(ptx)
            subprocess.run([ptxas, "-arch=sm_90", path, "-o", f"{d}/k.cubin"], check=True, capture_output=True)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float32], ids=["bfloat16", "float32"])
def test_held_layer_norm_rows_do_not_spill(dtype) -> None:
    """LayerNorm(x + r) over rows known at run time only, as the torch backend compiles it:
    the held variant's register cap (what a thread holds: its float32 row, then the weight's
    and bias's vectors) leaves ptxas no reason to spill to local memory (at the cap of 64,
    116 bytes of spills for bfloat16 rows made the kernel 1.6x slower, H200)."""
    ptxas = toolchain.find().ptxas
    if ptxas is None:
        pytest.skip("no ptxas")
    import subprocess
    import tempfile

    def ln(x, r, w, b):
        y = ops.cast(x + r, "float32")
        out = ops.layer_norm(y, [x.shape[-1]], ops.cast(w, "float32"), ops.cast(b, "float32"), 1e-12)
        return ops.cast(out, x.dtype)

    x, w = np.ones((4, 768), dtype), np.ones(768, dtype)
    c = compile_gpu(ln, x, x, w, w)
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/k.ptx"
        with open(path, "w") as f:
            f.write(c.ptx)
        report = subprocess.run([ptxas, "-v", "-arch=sm_90", path, "-o", f"{d}/k.cubin"], check=True,
                                capture_output=True, text=True).stderr
    held = report.split("entry function 'mlirfuse_entry_kernel_0'")[1].split("Compile time")[0]
    assert " 0 bytes spill stores" in held, held


@pytest.mark.parametrize("fn,shape", [(lambda x: x.sum(1), (64, 1024, 256)),
                                      (lambda x: (x * 2.0).sum(0), (4096, 768))], ids=["x.sum(1)", "x.sum(0)"])
def test_column_reductions_are_capped_at_64_registers_and_do_not_spill(fn, shape) -> None:
    """A column reduction's kernel carries `.maxnreg 64`: its slices aim for 4 blocks of 256
    threads an SM, which leave 64 registers a thread. Left to itself, ptxas -O3 gave the batch
    of column reductions (both geometries) 48 registers and 8-20 bytes of spills, and others
    40-58, too few for their loads in flight (H200: BERT's LayerNorm-backward column
    reductions 18.0 -> 10.8 us capped)."""
    ptxas = toolchain.find().ptxas
    if ptxas is None:
        pytest.skip("no ptxas")
    import subprocess
    import tempfile

    c = compile_gpu(fn, np.ones(shape, np.float32))
    assert ".maxntid 256, 1, 1\n.maxnreg 64\n" in c.ptx
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/k.ptx"
        with open(path, "w") as f:
            f.write(c.ptx)
        report = subprocess.run([ptxas, "-v", "-O3", "-arch=sm_90", path, "-o", f"{d}/k.cubin"], check=True,
                                capture_output=True, text=True).stderr
    used = int(report.split("Used ")[1].split(" registers")[0])
    assert " 0 bytes spill stores" in report and used <= 64, report


def test_a_column_reduction_computing_a_prologue_keeps_ptxas_register_choice() -> None:
    """A column reduction that computes a pointwise prologue at each element (BERT's embedding
    LayerNorm backward: the sum of four gradients, also written) carries no register cap:
    capped at 64, ptxas spilled GPT-2's and BERT's bfloat16 GELU-backward bias gradients."""
    def fn(a, b, c, d, e):
        t = a + b + c + d
        return (t * e).sum((0, 1)), t.sum((0, 1)), t

    x = np.ones((8, 512, 768), ml_dtypes.bfloat16)
    c = compile_gpu(fn, *[x] * 5)
    launches = c.stages["launch_params"]
    assert "computing its pointwise prologue" in launches and "registers=0)" in launches, launches
    assert ".maxnreg" not in c.ptx


def test_float32_multiply_adds_fuse_and_bfloat16_ops_keep_their_rounding() -> None:
    """gpu-fp-contract: a float32 `a * b + c` is one `fma.rn.f32` (as nvcc's and Triton's
    kernels compute it); a product of bfloat16 values rounded back to bfloat16 (torch's op on
    that type) stays a rounded `mul.rn.bf16`, not fused with the add after it."""
    ptx = compile_gpu(lambda a, b, c: a * b + c, X, X, X).ptx
    assert "fma.rn.f32" in ptx and "mul.rn.f32" not in ptx and "mul.f32" not in ptx
    h = X.astype(ml_dtypes.bfloat16)
    ptx = compile_gpu(lambda a, b, c: a * b + c, h, h, h).ptx
    assert "mul.rn.bf16" in ptx and "add.rn.bf16" in ptx and "fma.rn.bf16" not in ptx
    assert "mul.bf16" not in ptx and "add.bf16" not in ptx  # (without .rn ptxas may fuse them)
