"""Per-kernel GPU time of the suite's workloads: where a fused workload's time goes.

    python bench/kernel_profile.py [--only NAME,...] [--compile]

For each workload of bench/suite.py: every kernel one mlirfuse call launches (name and mean
time over 20 calls from torch.profiler, L2 not flushed), next to the call's total
kernel time; with --compile, torch.compile's kernels for the same workload too. A diagnosis
tool, not the benchmark: the suite's medians (L2 flushed) are the figures to report.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite  # noqa: E402
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

CALLS = 20


def kernels(fn, args) -> list[tuple[str, float]]:
    """(kernel name, mean us per call) of every kernel one call of fn launches."""
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            fn(*args)
        torch.cuda.synchronize()
    total: dict[str, float] = defaultdict(float)
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        total[e.name] += e.device_time if hasattr(e, "device_time") else e.cuda_time
    return [(name, us / CALLS) for name, us in total.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated substrings of 'name shape'")
    parser.add_argument("--compile", action="store_true", help="torch.compile's kernels too")
    opts = parser.parse_args()
    print("| workload | implementation | kernel | us per call |\n|---|---|---|---|")
    for case in suite.CASES:
        label = f"{case.name} {'x'.join(map(str, case.shape))} {str(case.dtype).replace('torch.', '')}"
        if opts.only and not any(p.strip() in label for p in opts.only.split(",")):
            continue
        torch.manual_seed(0)
        args = case.make(case.shape, case.dtype)
        impls = [("mlirfuse", suite.mlirfuse.jit(case.fused))]
        if opts.compile:
            impls.append(("torch.compile", torch.compile(case.torch_fn, dynamic=False)))
        for impl, fn in impls:
            rows = kernels(fn, args)
            for name, us in rows:
                print(f"| {label} | {impl} | {name[:90]} | {us:.1f} |")
            print(f"| {label} | {impl} | **all {len(rows)} kernels** | **{sum(r[1] for r in rows):.1f}** |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
