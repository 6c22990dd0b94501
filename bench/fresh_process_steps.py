"""One model x mode's steps in this fresh process, eager vs Inductor vs mlirfuse, then again
after a torch.profiler session of each step: whether a process's state (not the compilers)
moves host-bound steps (session 93: bench/models.py's shared process ran them about twice as
slowly as a fresh one, all three alike; hence a process per row there).

    python bench/fresh_process_steps.py [--model gpt2] [--mode bf16] [--rounds 7] [--steps 20]

ms per step, median (and spread) over interleaved rounds, the order reversed every other
round; the cyclic collector's runs and time during them. Markdown to stdout.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "test" / "py"))

import torch  # noqa: E402
from models import IMPLEMENTATIONS, MODES, kernels_per_step, make_step, model_and_ids  # noqa: E402


def rounds(steps: dict[str, Callable[[], Any]], n: int, per: int) -> dict[str, tuple[float, float]]:
    times: dict[str, list[float]] = {k: [] for k in steps}
    for r in range(n):
        for name, step in list(steps.items())[::1 if r % 2 == 0 else -1]:
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(per):
                step()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - start) * 1e3 / per)
    return {k: (statistics.median(v), max(v) - min(v)) for k, v in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2")
    parser.add_argument("--mode", default="bf16", choices=list(MODES))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    opts = parser.parse_args()
    warnings.filterwarnings("ignore")
    base, ids = model_and_ids(opts.model, opts.mode)
    steps = {}
    for name in IMPLEMENTATIONS:
        model = copy.deepcopy(base)
        steps[name] = make_step(model, model if name == "eager" else torch.compile(model, backend=name), ids, opts.mode)
        steps[name]()
        steps[name]()
    collections: list[float] = []

    def collector(phase: str, info: dict) -> None:
        if phase == "start":
            collector.start = time.perf_counter()  # type: ignore[attr-defined]
        else:
            collections.append(time.perf_counter() - collector.start)  # type: ignore[attr-defined]
    gc.callbacks.append(collector)
    print(f"GPU: {torch.cuda.get_device_name()}; {opts.model} {opts.mode}; "
          f"{opts.rounds} rounds of {opts.steps} steps\n")
    columns = ["run", *IMPLEMENTATIONS, "collections (ms)"]
    print("| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|")
    for label in ("fresh process", "after a torch.profiler session of each step"):
        if label.startswith("after"):
            for step in steps.values():
                kernels_per_step(step)
        collections.clear()
        times = rounds(steps, opts.rounds, opts.steps)
        print(f"| {label} | " + " | ".join(f"{times[n][0]:.3f} ({times[n][1]:.3f})" for n in IMPLEMENTATIONS)
              + f" | {len(collections)} ({sum(collections) * 1e3:.1f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
