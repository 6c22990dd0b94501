"""Where one real-model step spends its time: the top GPU kernels of each implementation
(torch.profiler) and, for mlirfuse, the host functions (cProfile over several steps).

    python bench/step_profile.py --model llama --mode bf16 [--impls eager,inductor,mlirfuse] [--top 15]

The model x mode pairs are bench/models.py's. Markdown to stdout.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import pstats
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "test" / "py"))

import torch  # noqa: E402
from models import MODES, fused_region_calls, make_step, model_and_ids  # noqa: E402


def top_kernels(step, top: int) -> list[tuple[str, int, float]]:
    """(kernel name, launches, total us) of one step, largest total first."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type.name == "CUDA":
            totals[e.name][0] += 1
            totals[e.name][1] += e.device_time_total
    rows = sorted(((name, int(n), us) for name, (n, us) in totals.items()), key=lambda r: -r[2])
    return rows[:top]


def host_ops(step, top: int) -> list[tuple[str, int, float]]:
    """(op, calls, self CPU us) of one step, largest first: where the host time goes."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
        torch.cuda.synchronize()
    rows = sorted(((e.key, e.count, e.self_cpu_time_total) for e in prof.key_averages()), key=lambda r: -r[2])
    return rows[:top]


def region_host_us(step, steps: int) -> tuple[float, int, list[tuple[str, int, int, float]]]:
    """Host us per step spent inside mlirfuse's fused-region calls, the calls per step, and
    per region (name, tensor arguments, results, host us per call), slowest first."""
    spent: dict[Any, list[float]] = defaultdict(list)
    shape: dict[Any, tuple[int, int]] = {}

    def timing(original):
        def timed(self, *args):
            start = time.perf_counter()
            results = original(self, *args)
            spent[self].append(time.perf_counter() - start)
            shape[self] = (sum(isinstance(a, torch.Tensor) for a in args), len(results))
            return results
        return timed
    with fused_region_calls(timing):
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    rows = sorted(((r.label, *shape[r], sum(ts) * 1e6 / len(ts)) for r, ts in spent.items()), key=lambda r: -r[3])
    calls = sum(len(ts) for ts in spent.values())
    return sum(sum(ts) for ts in spent.values()) * 1e6 / steps, calls // steps, rows


def syncs(step) -> int:
    """Synchronizing torch calls in one step (torch's sync debug mode)."""
    import warnings as w

    torch.cuda.set_sync_debug_mode("warn")
    try:
        with w.catch_warnings(record=True) as caught:
            w.simplefilter("always")
            step()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    for c in caught[:5]:
        print(f"sync: {c.message}")
    return len(caught)


def host_profile(step, steps: int, top: int) -> str:
    profiler = cProfile.Profile()
    torch.cuda.synchronize()
    profiler.enable()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama")
    parser.add_argument("--mode", default="bf16", choices=list(MODES))
    parser.add_argument("--impls", default="eager,inductor,mlirfuse")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--host-steps", type=int, default=10)
    parser.add_argument("--host-profile-all", action="store_true",
                        help="cProfile every implementation's steps (default: mlirfuse's only)")
    opts = parser.parse_args()
    warnings.filterwarnings("ignore")
    base, ids = model_and_ids(opts.model, opts.mode, opts.batch, opts.seq)
    for name in opts.impls.split(","):
        model = copy.deepcopy(base)
        step = make_step(model, model if name == "eager" else torch.compile(model, backend=name), ids, opts.mode)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(10):
            step()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 100
        rows = top_kernels(step, opts.top)
        print(f"\n## {opts.model}, {opts.mode}, {name}: {ms:.2f} ms per step\n")
        print("| kernel | launches | us |\n|---|---|---|")
        for kernel, n, us in rows:
            print(f"| {kernel[:110]} | {n} | {us:.1f} |")
        print(f"\nsynchronizing calls per step: {syncs(step)}\n")
        print("| host op | calls | self CPU us |\n|---|---|---|")
        for op, n, us in host_ops(step, opts.top):
            print(f"| {op[:90]} | {n} | {us:.1f} |")
        if name == "mlirfuse":
            us, calls, per_region = region_host_us(step, opts.host_steps)
            print(f"\nfused-region calls: {calls} per step, {us:.0f} us host per step inside them\n")
            print("| region | tensor args | results | host us per call |\n|---|---|---|---|")
            for label, n_args, n_results, region_us in per_region:
                print(f"| {label} | {n_args} | {n_results} | {region_us:.1f} |")
        if name == "mlirfuse" or opts.host_profile_all:
            print("\n```\n" + host_profile(step, opts.host_steps, 40) + "```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
