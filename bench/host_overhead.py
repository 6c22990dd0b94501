"""Host time of one fused-region call, taken apart, next to eager's and Inductor's calls of the
same function (a small bf16 pointwise chain: the host, not the GPU, bounds every loop).

    python bench/host_overhead.py [--rounds 5] [--calls 3000] [--json out.json]
    python bench/host_overhead.py --model gpt2 --mode bf16_autocast [--top 8]

Per row: host us per call, the median over interleaved rounds of `--calls` back-to-back calls
(no synchronization inside a round). The rows below "region" are the pieces of its call:
the FusedRegion object, the jitted function's guarded launch (`_hot`), and each step of that
launch alone. With `--model`, the same pieces for each of the `--top` fused regions of one
step of bench/models.py's model x mode that take the most host time, called again with the
arguments the step gave them. Markdown to stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import torch

HERE = Path(__file__).resolve().parent


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6 / calls


def chain(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x * w + 1.0)


def launcher_of(jitted: Any) -> Any:
    """The TorchLauncher whose guarded launch the jitted function calls first."""
    for launcher, _, _ in jitted._launchers.values():
        if launcher._guarded is not None and launcher._guarded is jitted._hot:
            return launcher
    return None


def pieces(region: Any, args: tuple[Any, ...]) -> dict[str, Callable[[], Any]]:
    """The FusedRegion call, its guarded launch and each step of that launch, as callables."""
    from mlirfuse.torch_launcher import MISS, _tensor_guard

    jitted = region.jitted
    launcher = launcher_of(jitted)
    if launcher is None:
        return {"region: FusedRegion call": lambda: region(*args)}
    hot = jitted._hot
    hot_args = list(args[:launcher._n_args])
    for k, widen in region._widen:  # as the region's shortcut passes them
        hot_args[k] = widen(hot_args[k])
    hot_args = tuple(hot_args)
    stream_cell, entry, _ = launcher._exe.entry_point()
    packed, lock, index = launcher._packed, launcher._lock, launcher._index
    stream_of, alloc = launcher._stream, launcher._alloc
    outputs = [launcher._outputs[k] for k in range(len(launcher._outputs)) if k not in launcher._shared]
    tensors = [hot_args[i] for i, _ in launcher._tensors]
    guard = _tensor_guard(tensors) if tensors else None
    # One launch's outputs kept alive: every launch below writes into them (the output cells
    # keep their pointers, rewritten by `pointers` with the same values).
    kept = hot(hot_args)
    if kept is MISS:
        return {"region: FusedRegion call (its guarded launch missed)": lambda: region(*args)}
    cells = [cell for _, cell in launcher._tensors]
    output_cells = [(cell, cell.aligned) for cell in launcher._output_cells]
    scratch = launcher._scratch

    def launch_only() -> None:
        with lock:
            if scratch:
                launcher._exe.call_unlocked(stream_of(index), packed, 0, 0)
            else:
                stream_cell.value = stream_of(index)
                entry(packed)

    def allocations() -> None:
        for shape, strides, dtype in outputs:
            alloc(shape, strides, dtype)

    def pointers() -> None:
        for cell, t in zip(cells, tensors):
            cell.allocated = cell.aligned = t.data_ptr()
        for cell, pointer in output_cells:
            cell.allocated = cell.aligned = pointer

    pieces = {
        "region: FusedRegion call": lambda: region(*args),
        "region: jit guarded launch (_hot)": lambda: hot(hot_args),
        "piece: TensorGuards check": (lambda: guard(*tensors)) if guard else (lambda: None),
        f"piece: output allocations ({len(outputs)})": allocations,
        f"piece: pointers into cells ({len(cells) + len(output_cells)})": pointers,
        f"piece: entry point ({launches(launcher)} launches{', scratch' if scratch else ''})": launch_only,
    }
    launch_only.kept = kept  # type: ignore[attr-defined]
    return pieces


def launches(launcher: Any) -> int:
    """The launches a call of the launcher's host module makes (its first line says)."""
    from mlirfuse.lowering.gpu.runtime import CachedGpuModule

    return CachedGpuModule(launcher._exe.host_llvm).n_launches


def host_us(fn: Callable[[], Any], calls: int) -> float:
    """Host us of one call of `fn` with the GPU idle (synchronized before each call, untimed):
    what the call costs the host inside a step, not the GPU time of back-to-back calls."""
    total = 0.0
    for _ in range(calls):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        total += time.perf_counter() - start
    return total * 1e6 / calls


def run_steps(step: Callable[[], Any], steps: int) -> None:
    """`steps` steps, each waited for (the next starts with the GPU idle)."""
    for _ in range(steps):
        step()
        torch.cuda.synchronize()


TIMED = ("check", "alloc", "launch", "call_unlocked", "copy")


def in_step_pieces(regions: list[Any], step: Callable[[], Any],
                   steps: int) -> dict[Any, dict[str, tuple[float, float]]]:
    """Host us per region call of each piece of each region's guarded launch inside the model's
    step (the generated code's globals, wrapped with timers): what a call costs with the caches
    and the GPU's queue as the step leaves them, where `pieces` times them alone. Regions of
    one fusion share its launcher: their calls are counted together, under the first. Calls
    through another launcher of the fusion (other layouts: the general-path column) or after
    its scratch arena grew (new generated code) are not taken apart: read these rows where
    that column says 0%."""
    from models import fused_region_calls

    calls = "region call (the shortcut or general path)"
    timed: dict[int, tuple[Any, dict[str, list[float]]]] = {}  # launcher -> (first region, buckets)
    patched: list[tuple[dict[str, Any], str, Any]] = []
    region_calls: dict[int, list[float]] = {}  # id(region) -> its launcher's bucket of region calls

    def timer(bucket: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed_call(*a: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*a)
            finally:
                bucket[0] += time.perf_counter() - start
                bucket[1] += 1
        return timed_call

    for region in regions:
        launcher = launcher_of(region.jitted)
        if launcher is None:
            continue
        first = id(launcher) not in timed
        buckets = timed.setdefault(id(launcher), (region, defaultdict(lambda: [0.0, 0])))[1]
        region_calls[id(region)] = buckets[calls]
        envs = [launcher._guarded.__globals__] + ([launcher.call.__globals__] if launcher._scratch else [])
        for env in envs if first else []:
            for name in TIMED:
                if name in env and callable(env[name]):
                    patched.append((env, name, env[name]))
                    env[name] = timer(buckets[name], env[name])

    def counting(original: Callable[..., Any]) -> Callable[..., Any]:
        timed_original = {region_id: timer(bucket, original) for region_id, bucket in region_calls.items()}

        def counted(self: Any, *a: Any) -> Any:
            return timed_original.get(id(self), original)(self, *a)
        return counted
    # (the class's call, not a region's `_enter`, which the region itself replaces when its
    # layouts change)
    try:
        with fused_region_calls(counting):
            run_steps(step, steps)
    finally:
        for env, name, fn in reversed(patched):
            env[name] = fn
    result = {}
    for region, buckets in timed.values():
        n = max(buckets[calls][1], 1)
        result[region] = {name: (b[0] * 1e6 / n, b[1] / n) for name, b in buckets.items()}
    return result


def model_regions(model: str, mode: str, top: int, rounds: int, calls: int) -> None:
    """The pieces of the `top` fused regions of one model step that take the most host time."""
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent / "test" / "py"))
    from models import fused_region_calls, make_step, model_and_ids

    from mlirfuse.frontend.jit import JitFunction

    net, ids = model_and_ids(model, mode)
    step = make_step(net, torch.compile(net, backend="mlirfuse"), ids, mode)
    for _ in range(3):
        step()
    steps = 5
    seen: dict[Any, tuple[tuple[Any, ...], list[float]]] = {}
    general: dict[Any, int] = defaultdict(int)  # calls that took the general path (the jitted function's call)
    current: list[Any] = [None]
    original_jit = JitFunction.__call__

    def spying(original: Callable[..., Any]) -> Callable[..., Any]:
        def spy(self: Any, *a: Any) -> Any:
            current[0] = self
            start = time.perf_counter()
            results = original(self, *a)
            spent = time.perf_counter() - start
            seen.setdefault(self, (a, []))[1].append(spent)
            return results
        return spy

    def jit_spy(self: Any, *a: Any, **k: Any) -> Any:
        general[current[0]] += 1
        return original_jit(self, *a, **k)
    JitFunction.__call__ = jit_spy
    try:
        with fused_region_calls(spying):
            run_steps(step, steps)
    finally:
        JitFunction.__call__ = original_jit
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; {model} {mode}: {len(seen)} regions; "
          f"host us of a call with the GPU idle, median of {rounds} rounds x {calls} calls\n")
    print("| region | calls a step | host us in the step | general path | tensor args | launches |\n"
          "|---|---|---|---|---|---|")
    ranked = sorted(seen.items(), key=lambda kv: -statistics.median(kv[1][1]))
    for region, (args, spent) in ranked:
        launcher = launcher_of(region.jitted)
        print(f"| {region.label} | {len(spent) / steps:g} | {statistics.median(spent) * 1e6:.1f} | "
              f"{general[region] / len(spent):.0%} | {sum(isinstance(x, torch.Tensor) for x in args)} | "
              f"{launches(launcher) if launcher is not None else '?'} |")
    in_step = in_step_pieces([region for region, _ in ranked], step, steps)
    for region, (args, spent) in ranked[:top]:
        if region in in_step:
            print(f"\n### {region.label}: in the step, host us a call (mean of {steps} steps)\n")
            print("| piece | host us per region call | piece calls per region call |\n|---|---|---|")
            for name, (us, count) in in_step[region].items():
                print(f"| {name} | {us:.2f} | {count:g} |")
        with torch.no_grad():
            rows = pieces(region, args)
            times = {name: [] for name in rows}
            for _ in range(rounds):
                for name, fn in rows.items():
                    times[name].append(host_us(fn, calls))
        print(f"\n### {region.label}: {statistics.median(spent) * 1e6:.1f} us in the step\n")
        print("| call | host us per call (median) | min |\n|---|---|---|")
        for name, ts in times.items():
            print(f"| {name} | {statistics.median(ts):.2f} | {min(ts):.2f} |")


def capture_region(compiled: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """The FusedRegion a call of `compiled` runs, and the arguments it is called with."""
    from models import fused_region_calls

    seen: list[tuple[Any, tuple[Any, ...]]] = []

    def spying(original: Callable[..., Any]) -> Callable[..., Any]:
        def spy(self: Any, *a: Any) -> Any:
            seen.append((self, a))
            return original(self, *a)
        return spy
    with fused_region_calls(spying):
        compiled(*args)
    if len(seen) != 1:
        raise SystemExit(f"expected one fused region, the call ran {len(seen)}")
    return seen[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--shape", default="8,256")
    parser.add_argument("--json")
    parser.add_argument("--model", help="a bench/models.py model: break down its step's fused regions")
    parser.add_argument("--mode", default="bf16_autocast")
    parser.add_argument("--top", type=int, default=8)
    opts = parser.parse_args()
    warnings.filterwarnings("ignore")
    if opts.model:
        model_regions(opts.model, opts.mode, opts.top, opts.rounds, min(opts.calls, 200))
        return 0
    shape = tuple(int(s) for s in opts.shape.split(","))
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16)
    inductor = torch.compile(chain, backend="inductor")
    mlirfuse = torch.compile(chain, backend="mlirfuse")
    for f in (inductor, mlirfuse):
        for _ in range(3):
            f(x, w)
    region, region_args = capture_region(mlirfuse, (x, w))
    for _ in range(3):
        region(*region_args)
    rows: dict[str, Callable[[], Any]] = {
        "eager (3 aten ops)": lambda: chain(x, w),
        "Inductor (torch.compile)": lambda: inductor(x, w),
        "mlirfuse (torch.compile)": lambda: mlirfuse(x, w),
        **pieces(region, region_args),
        "empty Python call": lambda: None,
    }
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(opts.rounds):
        for name, fn in rows.items():
            times[name].append(per_call_us(fn, opts.calls))
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; shape {shape} bf16; "
          f"{opts.rounds} rounds x {opts.calls} calls\n")
    print("| call | host us per call (median) | min | max |\n|---|---|---|---|")
    result = {}
    for name, ts in times.items():
        result[name] = {"median_us": statistics.median(ts), "min_us": min(ts), "max_us": max(ts)}
        print(f"| {name} | {statistics.median(ts):.2f} | {min(ts):.2f} | {max(ts):.2f} |")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "shape": shape,
                       "rounds": opts.rounds, "calls": opts.calls, "rows": result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
