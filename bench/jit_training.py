"""Training blocks, forward + backward: eager vs Inductor vs torch.compile(backend="mlirfuse")
vs mlirfuse.jit under autograd (the getting-started tutorial's measurement).

    python bench/jit_training.py [--shape 64,128,1024] [--dtypes float32,bfloat16] [--rounds 5]
                                 [--iters 50] [--json out.json]

Blocks: bias-dropout-add-LayerNorm (`x`, `residual` [B, S, H]; weight, two biases [H]) and
RMSNorm (x [B, S, H], weight [H]), all inputs requiring grad, one iteration = forward +
`out.backward(grad)`. Per block x dtype x implementation: iterations per second (median over
`--rounds` interleaved rounds of `--iters` iterations, the order rotating every round), GPU
kernel us and kernels launched per iteration (torch.profiler; memcpy/memset not counted), and
the largest gradient difference to eager. Then the host time autograd adds to a jitted call:
us per call of a plain `jit` call (no grad), of the forward under autograd, and of forward +
backward, on a 8x1024 input where the host is all there is to measure.

Markdown to stdout; --json writes the rows with the suite's header fields.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mlirfuse  # noqa: E402
from mlirfuse import ops  # noqa: E402
from models import kernels_per_step, timed_rounds  # noqa: E402 (bench/models.py: the same measurements)

P = 0.1
SEED = 1234


def bdaln(x, residual, weight, bias1, bias2, seed):
    y = x + bias1
    y = ops.where(ops.rand_like(y, seed, 0) >= P, y / (1 - P), 0.0) + residual
    return ops.layer_norm(y, [y.shape[-1]], weight, bias2)


def bdaln_t(x, residual, weight, bias1, bias2):
    y = F.dropout(x + bias1, P, training=True) + residual
    return F.layer_norm(y, y.shape[-1:], weight, bias2)


def rms(x, weight):
    return ops.rms_norm(x, [x.shape[-1]], weight, 1e-6)


def rms_t(x, weight):
    return F.rms_norm(x, x.shape[-1:], weight, 1e-6)


def _inputs(block: str, shape: tuple[int, ...], dtype: torch.dtype) -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(0)
    h = shape[-1]
    shapes = [shape, shape, (h,), (h,), (h,)] if block == "bdaln" else [shape, (h,)]
    return [torch.randn(s, device="cuda", dtype=dtype, generator=g).requires_grad_() for s in shapes]


def implementations(block: str) -> dict[str, Callable[..., Any]]:
    """name -> forward function of the block's inputs (all built once: compiles happen here)."""
    eager = bdaln_t if block == "bdaln" else rms_t
    jitted = mlirfuse.jit(bdaln if block == "bdaln" else rms)
    jit_fn = (lambda *a: jitted(*a, SEED)) if block == "bdaln" else jitted
    return {"eager": eager, "inductor": torch.compile(eager, dynamic=False),
            "mlirfuse-compile": torch.compile(eager, backend="mlirfuse", dynamic=False), "mlirfuse.jit": jit_fn}


def _iteration(fn: Callable[..., Any], inputs: list[torch.Tensor], grad: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        for t in inputs:
            t.grad = None
        fn(*inputs).backward(grad)
    return step


def _gradient_difference(step: Callable[[], None], inputs: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    step()
    return max((t.grad.float() - r.float()).abs().max().item() / max(r.float().abs().max().item(), 1e-30)
               for t, r in zip(inputs, reference))


def run_row(block: str, shape: tuple[int, ...], dtype: torch.dtype, rounds: int, iters: int) -> dict:
    inputs = _inputs(block, shape, dtype)
    grad = torch.randn(shape, device="cuda", dtype=dtype)
    steps = {name: _iteration(fn, inputs, grad) for name, fn in implementations(block).items()}
    for step in steps.values():  # compile and warm up
        for _ in range(3):
            step()
    torch.cuda.synchronize()
    times = {name: [1e3 / ms for ms in per_round] for name, per_round in timed_rounds(steps, rounds, iters).items()}
    row: dict[str, Any] = {"block": block, "shape": list(shape), "dtype": str(dtype).replace("torch.", "")}
    steps["eager"]()
    reference = [t.grad.clone() for t in inputs]
    for name, step in steps.items():
        step()  # warm (the profiled step must not be a first call)
        kernel_ms, launches = kernels_per_step(step)
        kernel_us = kernel_ms * 1e3
        # dropout masks differ between implementations (each its own RNG): compare RMSNorm only
        diff = _gradient_difference(step, inputs, reference) if block == "rms" else None
        row[name] = {"it_per_s": statistics.median(times[name]), "spread": max(times[name]) - min(times[name]),
                     "kernel_us": kernel_us, "launches": launches, "grad_rel_diff": diff}
    return row


def host_overhead() -> dict[str, float]:
    """us per call, host side: a plain jit call, the same under autograd, and with its backward."""
    from gpu_bench import host_us_per_call

    x = torch.randn(8, 1024, device="cuda")
    w = torch.randn(1024, device="cuda")
    jitted = mlirfuse.jit(lambda x, w: ops.tanh(x * w))
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    g = torch.ones(8, 1024, device="cuda")

    def forward_backward() -> None:
        xg.grad = wg.grad = None
        jitted(xg, wg).backward(g)

    return {"plain_jit_us": host_us_per_call(lambda: jitted(x, w)),
            "autograd_forward_us": host_us_per_call(lambda: jitted(xg, wg)),
            "autograd_forward_backward_us": host_us_per_call(forward_backward),
            "eager_forward_backward_us": host_us_per_call(
                lambda: (setattr(xg, "grad", None), torch.tanh(xg * wg).backward(g)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="64,128,1024")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--blocks", default="bdaln,rms")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--json")
    opts = parser.parse_args()
    shape = tuple(int(s) for s in opts.shape.split(","))
    gpu = torch.cuda.get_device_name()
    from gpu_bench import driver_version

    driver = driver_version()
    print(f"GPU: {gpu}; driver {driver}; torch {torch.__version__}; shape {list(shape)}\n")
    impls = ["eager", "inductor", "mlirfuse-compile", "mlirfuse.jit"]
    print("| block, dtype | it/s " + " / ".join(impls) + " | kernel us | launches | jit vs eager / Inductor "
          "| grad diff jit |\n" + "|---" * 6 + "|")
    rows = []
    for block in opts.blocks.split(","):
        for dtype in opts.dtypes.split(","):
            row = run_row(block, shape, getattr(torch, dtype), opts.rounds, opts.iters)
            rows.append(row)
            cells = [row[n] for n in impls]
            jit = row["mlirfuse.jit"]
            diff = jit["grad_rel_diff"]

            def joined(key: str, form: str) -> str:
                return " / ".join(format(c[key], form) for c in cells)  # noqa: B023
            print(f"| {block}, {dtype} | {joined('it_per_s', '.0f')} | {joined('kernel_us', '.0f')} "
                  f"| {joined('launches', 'd')} "
                  f"| {jit['it_per_s'] / row['eager']['it_per_s']:.2f}x / "
                  f"{jit['it_per_s'] / row['inductor']['it_per_s']:.2f}x "
                  f"| {'-' if diff is None else f'{diff:.1e}'} |", flush=True)
    host = host_overhead()
    print("\nHost time per call (8x1024 float32, tanh(x * w)): "
          + ", ".join(f"{k} {v:.1f}" for k, v in host.items()))
    if opts.json:
        Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.json).write_text(json.dumps({"gpu": gpu, "driver": driver, "torch": torch.__version__,
                                               "date": time.strftime("%Y-%m-%d"), "complete": True,
                                               "rows": rows, "host": host}, indent=2))


if __name__ == "__main__":
    main()
