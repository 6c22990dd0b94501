"""How the suite's kernel times depend on the timing method: `triton.testing.do_bench`,
`gpu_bench.kernel_us` (do_bench's method with the host's time per call hidden behind a spin
of the stream) and torch.profiler's GPU time per call (kernels and memsets, L2 warm), for
torch.compile, mlirfuse and eager on two small suite rows, in interleaved rounds.

    python bench/timing_methods.py [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import mlirfuse  # noqa: E402
from gpu_bench import kernel_us  # noqa: E402
from mlirfuse import workloads  # noqa: E402

# name -> (torch function, mlirfuse function, shape): the suite's rows of the same names
CASES = {
    "middle-axis sum": (lambda x: x.sum(1), lambda x: x.sum(1), (64, 1024, 256)),
    "relu(x+1)": (lambda x: torch.relu(x + 1), workloads.relu_add, (2, 32, 128, 512)),
}


def profiler_us(fn, reps: int = 30) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return sum(e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA) / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json")
    opts = parser.parse_args()
    import triton.testing

    rows = []
    for name, (fn, ours, shape) in CASES.items():
        x = torch.randn(shape, device="cuda")
        impls = {"torch.compile": torch.compile(fn, dynamic=False), "mlirfuse": mlirfuse.jit(ours), "eager": fn}
        for f in impls.values():
            f(x)
        for r in range(opts.rounds):
            for impl, f in impls.items():
                call = lambda: f(x)  # noqa: E731
                rows.append(dict(case=name, impl=impl, round=r,
                                 do_bench=triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median") * 1e3,
                                 kernel_us=kernel_us(call), profiler=profiler_us(call)))
    print(f"GPU: {torch.cuda.get_device_name()}; us per call, best of {opts.rounds} rounds\n")
    print("| case | impl | do_bench | kernel_us | torch.profiler |\n|---|---|---|---|---|")
    for name in CASES:
        for impl in ("torch.compile", "mlirfuse", "eager"):
            mine = [r for r in rows if r["case"] == name and r["impl"] == impl]
            print(f"| {name} | {impl} | " + " | ".join(f"{min(r[k] for r in mine):.1f}"
                                                    for k in ("do_bench", "kernel_us", "profiler")) + " |")
    if opts.json:
        Path(opts.json).write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))


if __name__ == "__main__":
    main()
