"""CPU benchmark: fused kernels vs numpy op by op (single thread), and cold compile times.

    python bench/cpu_bench.py [--size N]

Prints a Markdown table. numpy's ufuncs run single-threaded, and so does mlirfuse's CPU code.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlirfuse  # noqa: E402
from mlirfuse import ops  # noqa: E402
from mlirfuse.compiler import CompiledFusion  # noqa: E402
from mlirfuse.workloads import WORKLOADS  # noqa: E402

C = np.float32(0.7978845608028654)
K = np.float32(0.044715)


def gelu(x):
    return 0.5 * x * (1.0 + ops.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def gelu_np(x):
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(C * (x + K * x * x * x)))


def layernorm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    d = x - mean
    var = (d * d).mean(-1, keepdim=True)
    return d * ops.rsqrt(var + 1e-5) * w + b


def layernorm_np(x, w, b):
    mean = x.mean(-1, keepdims=True)
    d = x - mean
    var = (d * d).mean(-1, keepdims=True)
    return d / np.sqrt(var + np.float32(1e-5)) * w + b


def relu_add(x):
    return ops.relu(x + 1.0)


def relu_add_np(x):
    return np.maximum(x + np.float32(1.0), np.float32(0.0))


def best_of(fn, repeats: int = 11) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1 << 22, help="elements per tensor (>= 1M)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = args.size // 1024
    x2 = rng.standard_normal((rows, 1024), dtype=np.float32)
    w = rng.standard_normal(1024, dtype=np.float32)
    b = rng.standard_normal(1024, dtype=np.float32)
    cases = [("relu(x+1)", relu_add, relu_add_np, [x2]), ("GELU (tanh)", gelu, gelu_np, [x2]),
             ("LayerNorm", layernorm, layernorm_np, [x2, w, b])]
    print(f"## CPU, {args.size} float32 elements per tensor, single thread\n")
    print("| fused op | mlirfuse ms | numpy ms | speedup vs numpy | max abs err |")
    print("|---|---|---|---|---|")
    for name, fn, ref, inputs in cases:
        f = mlirfuse.jit(fn)
        err = float(np.max(np.abs(f(*inputs) - ref(*inputs))))
        tm, tn = best_of(lambda: f(*inputs)), best_of(lambda: ref(*inputs))
        print(f"| {name} | {tm * 1e3:.2f} | {tn * 1e3:.2f} | {tn / tm:.2f}x | {err:.1e} |")

    print("\n## Cold compile per reference workload (set MLIRFUSE_CACHE_DIR=off for cold figures)\n")
    print("| workload | trace ms | compile ms (all stages + JIT) | total ms (with planning) |")
    print("|---|---|---|---|")
    for w_ in WORKLOADS:
        inputs = w_.make_inputs(w_.small, rng)
        t = time.perf_counter()
        if w_.definition is not None:
            fusion = w_.definition().fusion
        else:
            fusion, _ = mlirfuse.jit(w_.jit_fn).trace(*inputs)
        traced = time.perf_counter() - t
        t = time.perf_counter()
        compiled = CompiledFusion(fusion, "cpu")
        total = time.perf_counter() - t
        print(f"| {w_.name} | {traced * 1e3:.1f} | {compiled.compile_seconds * 1e3:.0f} | {total * 1e3:.0f} |")


if __name__ == "__main__":
    main()
