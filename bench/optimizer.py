"""Compiled optimizer steps: torch.optim.AdamW over real models' parameters, eager (foreach and
fused) vs `torch.compile(opt.step)` with Inductor and with mlirfuse.

    python bench/optimizer.py [--models gpt2,llama] [--rounds 7] [--steps 10] [--json out.json]

The parameters of GPT-2 and Llama configs (test/py/hf_models.py at real widths, 2 layers,
float32, on the GPU) with fixed random gradients; AdamW(lr=1e-3, weight_decay=0.01). Four
copies step side by side: eager with foreach=True (torch's default on CUDA), eager with
fused=True (torch's single-kernel CUDA AdamW), and the foreach step compiled by each backend.
Per model: ms per step (median of `--rounds` interleaved rounds of `--steps` steps, the order
rotating every round; spread = max - min), GPU kernel ms and kernels per step
(torch.profiler), each compiler's first step (the compile), and the largest difference of
the parameters to eager foreach's after the same steps, relative to the parameter's largest
magnitude. Markdown to stdout; --json writes the rows (the suite's header fields).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "test" / "py"))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

from models import kernels_per_step, timed_rounds  # noqa: E402

IMPLEMENTATIONS = ("eager", "fused", "inductor", "mlirfuse")
WARMUP = 3


def make_steps(family: str) -> tuple[dict[str, Callable[[], Any]], dict[str, list[torch.Tensor]], dict[str, float]]:
    """Per implementation: its step, its parameters, and its first step's seconds."""
    from hf_models import build

    torch.manual_seed(0)
    base = build(family, "real").cuda()
    grads = [torch.randn_like(p) * 1e-2 for p in base.parameters()]
    steps, params, first = {}, {}, {}
    for name in IMPLEMENTATIONS:
        model = copy.deepcopy(base)
        ps = list(model.parameters())
        for p, g in zip(ps, grads):
            p.grad = g.clone()
        opt = torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01, fused=name == "fused", foreach=name != "fused")
        step = torch.compile(opt.step, backend=name) if name in ("inductor", "mlirfuse") else opt.step
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        first[name] = time.perf_counter() - start
        for _ in range(WARMUP - 1):
            step()
        steps[name], params[name] = step, ps
    return steps, params, first


def difference(expected: list[torch.Tensor], got: list[torch.Tensor]) -> float:
    return max(float((e.double() - g.double()).abs().max() / e.double().abs().max().clamp_min(1e-30))
               for e, g in zip(expected, got))


def run_row(family: str, rounds: int, per_round: int) -> dict:
    steps, params, first = make_steps(family)
    times = timed_rounds(steps, rounds, per_round)
    diff = {n: difference(params["eager"], params[n]) for n in IMPLEMENTATIONS}
    kernels = {n: kernels_per_step(steps[n]) for n in IMPLEMENTATIONS}
    count = sum(p.numel() for p in params["eager"])
    return {"model": family, "parameters": count, "tensors": len(params["eager"]),
            "ms": {n: statistics.median(t) for n, t in times.items()},
            "spread_ms": {n: max(t) - min(t) for n, t in times.items()},
            "gpu_kernel_ms": {n: k[0] for n, k in kernels.items()}, "kernels": {n: k[1] for n, k in kernels.items()},
            "first_step_s": first, "diff_to_eager": diff}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10, help="steps per implementation per round")
    parser.add_argument("--json", help="write the rows here")
    opts = parser.parse_args()
    warnings.filterwarnings("ignore")
    import suite

    gpu, driver = torch.cuda.get_device_name(), suite.driver_version()
    print(f"GPU: {gpu}; driver {driver}; torch {torch.__version__}; AdamW, float32 parameters\n")
    print("| model (parameters, tensors) | ms per step eager foreach / eager fused / Inductor / mlirfuse "
          "| spread m | m vs foreach / fused / Inductor | GPU kernel ms e / f / i / m | kernels e / f / i / m "
          "| first step s i / m | diff to eager f / i / m |\n" + "|---" * 7 + "|")
    rows = []
    for family in opts.models.split(","):
        r = run_row(family, opts.rounds, opts.steps)
        rows.append(r)
        ms, g, k, d = r["ms"], r["gpu_kernel_ms"], r["kernels"], r["diff_to_eager"]
        print(f"| {family} ({r['parameters'] / 1e6:.1f} M, {r['tensors']}) | "
              + " / ".join(f"{ms[n]:.3f}" for n in IMPLEMENTATIONS) + f" | {r['spread_ms']['mlirfuse']:.3f} | "
              + " / ".join(f"{ms[n] / ms['mlirfuse']:.2f}x" for n in ("eager", "fused", "inductor")) + " | "
              + " / ".join(f"{g[n]:.3f}" for n in IMPLEMENTATIONS) + " | "
              + " / ".join(str(k[n]) for n in IMPLEMENTATIONS) + " | "
              + f"{r['first_step_s']['inductor']:.1f} / {r['first_step_s']['mlirfuse']:.1f} | "
              + " / ".join(f"{d[n]:.1e}" for n in ("fused", "inductor", "mlirfuse")) + " |", flush=True)
    if opts.json:
        Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.json).write_text(json.dumps({"gpu": gpu, "driver": driver, "torch": torch.__version__,
                                               "date": time.strftime("%Y-%m-%d"), "complete": True, "rows": rows},
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
