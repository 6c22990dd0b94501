"""GPU benchmark of the runtime (issue 3): host time per call, compile times, effective GB/s.

    python bench/gpu_bench.py [--json results.json] [--quick]

Prints Markdown tables:
  1. host time per call of a one-kernel fusion on tiny torch tensors (no synchronization in
     the timed loop), next to torch eager and torch.compile of the same function, and the
     cost of the in-memory cache hit (signature lookup) inside it;
  2. per reference workload: cold compile (empty disk cache, first call incl. JIT and module
     load), warm start from the disk cache (first call in a fresh process), kernel time and
     effective GB/s (ideal bytes: each input and output once) of mlirfuse, torch eager and
     torch.compile, and the fraction of the device copy bandwidth measured in this run.
Kernel times are medians over single calls, each timed by CUDA events with L2 flushed before
it, as `triton.testing.do_bench`; but the stream first spins while the host enqueues the flush
and the call, so that a call's host time (torch.compile's guards and wrapper, mlirfuse's
runtime) does not show as GPU time (`kernel_us`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mlirfuse  # noqa: E402
from mlirfuse import workloads  # noqa: E402
from mlirfuse.arrays import classify_all  # noqa: E402

import torch  # noqa: E402

F = np.float32


# -- torch versions of the reference workloads (same math as mlirfuse.workloads' numpy ones) --
def _dropout(x, p, rand):
    return torch.where(rand >= p, x * (1.0 / (1.0 - p)), 0.0)


def relu_add_t(x):
    return torch.relu(x + 1.0)


def layernorm_t(input1, input2, weight, bias1, bias2, rand):
    norm_input = _dropout(input1 + bias1, workloads.DROPOUT_P, rand) + input2
    mean = norm_input.mean(2, keepdim=True)
    diff = norm_input - mean
    var = (diff * diff).mean(2, keepdim=True)
    return weight * ((norm_input - mean) / torch.sqrt(var + workloads.EPS)) + bias2


def rmsnorm_t(input1, input2, weight, bias1, rand):
    norm_input = _dropout(input1 + bias1, workloads.DROPOUT_P, rand) + input2
    ms = (norm_input * norm_input).mean(2, keepdim=True)
    return weight * (norm_input * torch.rsqrt(ms + workloads.EPS))


def gelu_backward_t(s0, s1, s2, s3, t4, t5, t6):
    t16 = torch.tanh(0.797885 * (t6 + 0.044715 * t6 ** 3))
    t30 = t5 * (0.5 * t6) * (1 - t16 * t16) * s3
    t36 = t30 + t30 * s2 * s1 * t6 ** 2
    return t4.sum((0, 1)), t36 + t5 * (1 + t16) * s0


def gelu_bookend_t(x):
    n, h = x.shape
    t = x.reshape(64, n // 64, h)
    y = t * 0.5 * (torch.erf(t * 0.7071067811865476) + 1.0)
    return y.reshape(n, h)


def transformer_block_t(x, w1, b1, w2, b2, gamma, beta, rand):
    h = torch.nn.functional.linear(x, w1) + b1
    h = 0.5 * h * (1.0 + torch.erf(h * 0.7071067811865476))
    y = _dropout(torch.nn.functional.linear(h, w2, b2), workloads.DROPOUT_P, rand) + x
    d = y - y.mean(-1, keepdim=True)
    return d * torch.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * gamma + beta


TORCH_FN = {"relu(x+1)": relu_add_t, "bias-dropout-add-LayerNorm": layernorm_t,
            "bias-dropout-add-RMSNorm": rmsnorm_t, "GELU-backward+bias-grad": gelu_backward_t,
            "GELU between bookend views": gelu_bookend_t, "transformer MLP block (2 linears)": transformer_block_t}


def mlirfuse_callable(w: workloads.Workload):
    if w.definition is not None:
        fd = w.definition()
        return lambda *args: fd.execute(list(args))
    return mlirfuse.jit(w.jit_fn)


def device_inputs(w: workloads.Workload, shape) -> tuple[list, list]:
    """(mlirfuse inputs, torch inputs): CUDA tensors; torch gets the random mask as a tensor."""
    host = w.make_inputs(shape, np.random.default_rng(0))
    to_dev = [torch.from_numpy(a).cuda() if isinstance(a, np.ndarray) else a for a in host]
    if w.numpy_inputs is None:
        return to_dev, to_dev
    rand = torch.rand(host[0].shape, device="cuda")
    return to_dev, to_dev[:-1] + [rand]


def ideal_bytes(args: list, outs) -> int:
    outs = outs if isinstance(outs, (tuple, list)) else [outs]
    tensors = [a for a in list(args) + list(outs) if isinstance(a, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


# The stream's spin before each timed call: at least 200 us (at 2 GHz), twice a call's host time.
SPIN_CYCLES, SPIN_CYCLES_PER_US = 400_000, 2000
FLUSH_BYTES = 256 << 20  # as do_bench: past the L2


def kernel_us(fn, warmup_ms: float = 25, rep_ms: float = 100, most: int = 200) -> float:
    """Median GPU time of one call of `fn` in us, the L2 flushed before it. do_bench records
    its events as the host reaches them, so a call whose host time outlasts the flush before
    it was timed at the host's pace: torch.compile's twin of x.sum(1) over [64, 1024, 256]
    at 35-62 us on one H200 in one session, against 16 us of GPU time (torch.profiler). Here
    the stream spins first (twice the call's host time, at least 200 us) while the host
    enqueues the flush and the call."""
    import torch

    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    end.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate_ms))):
        fn()
    host = time.perf_counter()
    for _ in range(5):
        fn()
    spin = max(SPIN_CYCLES, int(2 * (time.perf_counter() - host) / 5 * 1e6 * SPIN_CYCLES_PER_US))
    n = min(most, max(10, int(rep_ms / estimate_ms)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for begin, done in events:
        torch.cuda._sleep(spin)
        flush.zero_()
        begin.record()
        fn()
        done.record()
    torch.cuda.synchronize()
    return float(np.median([begin.elapsed_time(done) for begin, done in events])) * 1e3


def driver_version() -> str:
    """The NVIDIA driver's version (nvidia-smi prints it once per GPU: the first line)."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    return out.splitlines()[0] if out else "unknown"


def copy_bandwidth_gbps() -> float:
    x = torch.empty(1 << 28, dtype=torch.float32, device="cuda")  # 1 GiB
    y = torch.empty_like(x)
    us = kernel_us(lambda: y.copy_(x))
    return 2 * x.numel() * 4 / (us * 1e-6) / 1e9


def host_us_per_call(fn, n: int = 400) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
        torch.cuda.synchronize()
    return best * 1e6


def host_table() -> list[dict]:
    x = torch.randn(4, 4, device="cuda")
    jitted = mlirfuse.jit(workloads.relu_add)
    jitted(x)
    compiled, _ = jitted._lookup(classify_all([x]), "gpu")
    infos = classify_all([x])
    compiled_fn = torch.compile(relu_add_t, dynamic=False)
    compiled_fn(x)
    rows = [
        {"what": "mlirfuse.jit relu(x+1), 1 kernel", "us": host_us_per_call(lambda: jitted(x))},
        {"what": "  of which: compiled.run (after the in-memory hit)",
         "us": host_us_per_call(lambda: compiled.run(infos))},
        {"what": "torch eager relu(x+1), 2 kernels", "us": host_us_per_call(lambda: relu_add_t(x))},
        {"what": "torch eager x+1, 1 kernel", "us": host_us_per_call(lambda: x + 1.0)},
        {"what": "torch.compile relu(x+1), 1 kernel", "us": host_us_per_call(lambda: compiled_fn(x))},
    ]
    return rows


WARM_SCRIPT = """
import sys, time, numpy as np, torch
sys.path.insert(0, {root!r})
import mlirfuse
from mlirfuse import workloads
sys.path.insert(0, {bench!r})
from gpu_bench import device_inputs, mlirfuse_callable
w = [w for w in workloads.WORKLOADS if w.name == {name!r}][0]
args, _ = device_inputs(w, {shape!r})
fn = mlirfuse_callable(w)
times = []
for f, a in ([(mlirfuse.jit(lambda t: -t), [torch.ones(4, device="cuda")])] if {other!r} else []) + [(fn, args)]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    f(*a)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
print(times[-1])
"""


def warm_start_s(w: workloads.Workload, shape, cache_dir: str, other_first: bool) -> float:
    """First call in a fresh process, its compile in the disk cache; with other_first, after
    another fusion has run (the process's one-time GPU runtime start is then excluded)."""
    root = str(Path(__file__).resolve().parent.parent)
    script = WARM_SCRIPT.format(root=root, bench=str(Path(__file__).resolve().parent), name=w.name,
                                shape=shape, other=other_first)
    env = dict(os.environ, MLIRFUSE_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def workload_rows(copy_gbps: float, quick: bool) -> list[dict]:
    rows = []
    for w in workloads.WORKLOADS:
        shape = w.small if quick else w.shape
        cache_dir = tempfile.mkdtemp(prefix="mlirfuse-bench-")
        os.environ["MLIRFUSE_CACHE_DIR"] = cache_dir
        args, targs = device_inputs(w, shape)
        fn = mlirfuse_callable(w)
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn(*args)
        torch.cuda.synchronize()
        cold = time.perf_counter() - start
        warm_first = warm_start_s(w, shape, cache_dir, other_first=False)
        warm = warm_start_s(w, shape, cache_dir, other_first=True)
        tfn = TORCH_FN[w.name]
        cfn = torch.compile(tfn, dynamic=False)
        cfn(*targs)
        nbytes = ideal_bytes(args, out)
        t_m, t_e, t_c = kernel_us(lambda: fn(*args)), kernel_us(lambda: tfn(*targs)), kernel_us(lambda: cfn(*targs))
        host = host_us_per_call(lambda: fn(*args), n=50)
        gbps = nbytes / (t_m * 1e-6) / 1e9
        rows.append({"name": w.name, "shape": "x".join(map(str, shape)), "cold_compile_s": cold,
                     "warm_start_s": warm, "warm_first_in_process_s": warm_first, "mlirfuse_us": t_m, "eager_us": t_e, "compile_us": t_c,
                     "host_us": host, "gbps": gbps, "pct_copy": 100 * gbps / copy_gbps,
                     "speedup_vs_eager": t_e / t_m, "speedup_vs_compile": t_c / t_m})
        os.environ.pop("MLIRFUSE_CACHE_DIR")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    args = parser.parse_args()
    gpu = torch.cuda.get_device_name()
    copy_gbps = copy_bandwidth_gbps()
    print(f"GPU: {gpu}; torch {torch.__version__}; device copy bandwidth {copy_gbps:.0f} GB/s\n")
    host = host_table()
    print("| host time per call (tiny 4x4 f32 tensors) | us |\n|---|---|")
    for r in host:
        print(f"| {r['what']} | {r['us']:.1f} |")
    rows = workload_rows(copy_gbps, args.quick)
    print("\n| workload | shape | cold compile s | warm start s (first fusion of the process) | mlirfuse us | eager us | compile us "
          "| host us/call | GB/s | % copy BW | vs eager | vs compile |\n" + "|---" * 12 + "|")
    for r in rows:
        print(f"| {r['name']} | {r['shape']} | {r['cold_compile_s']:.3f} | {r['warm_start_s']:.3f} ({r['warm_first_in_process_s']:.3f}) | "
              f"{r['mlirfuse_us']:.1f} | {r['eager_us']:.1f} | {r['compile_us']:.1f} | {r['host_us']:.1f} | "
              f"{r['gbps']:.0f} | {r['pct_copy']:.0f}% | {r['speedup_vs_eager']:.2f}x | "
              f"{r['speedup_vs_compile']:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": gpu, "torch": torch.__version__,
                                               "date": time.strftime("%Y-%m-%d"), "copy_gbps": copy_gbps,
                                               "host": host, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
