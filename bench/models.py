"""Real models, one step each: torch eager vs Inductor vs mlirfuse (torch.compile backends).

    python bench/models.py [--models gpt2,llama,bert] [--modes f32,bf16_autocast,bf16]
                           [--batch 8] [--seq 512] [--rounds 11] [--steps 10] [--json out.json] [--no-regions]
                           [--compile-mode reduce-overhead] [--dropout 0.1] [--in-process]

HuggingFace GPT-2, Llama and BERT from configs (test/py/hf_models.py at real widths, 2 layers,
random weights, nothing downloaded). Modes: `f32` (a float32 training step), `bf16_autocast`
(a training step under bfloat16 autocast), `bf16` (a bfloat16 inference forward). Per model x
mode: ms per step (median over `--rounds` interleaved rounds of `--steps` steps each, the
order of the three rotating every round; spread = max - min over the rounds), GPU kernel ms
and kernels per step (torch.profiler, one step; memcpy/memset not counted), the loss (or
logits) difference to eager, each compiler's first-step time (the compile) less a step, and
the step's peak memory: the most the CUDA allocator held during one step above what it held
before it (torch.cuda.max_memory_allocated; the parameters, optimizer-free, and the previous
step's gradients are held before; under `--compile-mode reduce-overhead` the compiled steps'
CUDA graph pools stay allocated between steps, so their figure is what the step allocates
outside the pools, not comparable with eager's). `--dropout P` trains with dropout P (GPT-2 and BERT
everywhere, Llama in attention, as HF's default configs have 0.1 / 0.0 / 0.1): each
implementation then draws its own masks, so the difference to eager is that of two samples,
not an error.

Each row runs in a process of its own (this script again, for that row alone): a row's steps
then run where no earlier row's models, compiled graphs, garbage or torch.profiler sessions
are, as in a user's process. `--in-process` runs every row in this one.

Then, for mlirfuse, a per-region table: per fused region, its calls in a step, launches per
call and each launch's schedule, bytes moved per call, GPU us per call (median) and per
launch (each kernel's and memset's median over the calls, in the order they ran), GB/s, % of
the copy bandwidth measured in the same run, and % of a copy of as many bytes (torch's copy of
the region's bytes, half read and half written, from DRAM, timed as the regions are: what a
plain copy that size reaches, its launch and tail included; below about 16 MB it is well under
the copy bandwidth). The time is the device time of the kernels
launched inside the region's named range, from torch.profiler over `REGION_STEPS` ordinary
steps (the hot path, as timed above). Launches, schedules and bytes come from one more step
with `MLIRFUSE_DUMP=eff_bandwidth,launch_params` (each region compiled again, over two steps
as timed); a region the profile did not see keeps that dump's own timing, marked "dump" (its calls counted over the
table's two steps), and
one compiled for the first step only (dynamo compiled that graph again for the second, the
one timed) is marked so and not held to the bandwidth bar. A launch on the naive path
(one thread an element) makes the run exit with status 1, listing it. A region whose compile or
launch fails raises (mlirfuse's fallback to torch's ops is off: it would time torch's kernels).

`--compile-mode reduce-overhead` compiles Inductor and mlirfuse both with
`torch.compile(mode="reduce-overhead")` (each graph replayed as a CUDA graph: the host then
launches one graph, not a kernel at a time); the per-region table then has no profile to read
(replays run no region's Python): take `--no-regions`.

Markdown to stdout; --json writes the rows (the suite's header fields: gpu, driver, torch,
date, copy_gbps, complete).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import copy
import functools
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "test" / "py"))

import torch  # noqa: E402

MODES = {"f32": (True, None, torch.float32), "bf16_autocast": (True, torch.bfloat16, torch.float32),
         "bf16": (False, None, torch.bfloat16)}  # mode -> (training, autocast dtype, parameter dtype)
IMPLEMENTATIONS = ("eager", "inductor", "mlirfuse")
BIG_REGION = 8 << 20  # bytes: regions moving this much must run near the copy bandwidth
REGION_STEPS = 3  # profiled steps behind the per-region GPU times


def model_and_ids(family: str, mode: str, batch: int = 8, seq: int = 512, dropout: float = 0.0,
                  device: str = "cuda") -> tuple[torch.nn.Module, torch.Tensor]:
    """The benchmark's model for `mode` (real widths, seeded, in the mode's parameter dtype,
    in eval mode for inference; dropout for training only) and a batch of token ids."""
    from hf_models import build

    training, _, dtype = MODES[mode]
    torch.manual_seed(0)
    model = build(family, "real", dropout if training else 0.0).to(device, dtype)
    model = model if training else model.eval()
    return model, torch.randint(0, model.config.vocab_size, (batch, seq), device=device)


@contextlib.contextmanager
def fused_region_calls(wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """Every fused region's call (`FusedRegion.__call__`, each region's entry from the compiled
    graph) goes through `wrap(original call)` while inside."""
    from mlirfuse.torch_backend import runtime

    original = runtime.FusedRegion.__call__
    runtime.FusedRegion.__call__ = wrap(original)
    try:
        yield
    finally:
        runtime.FusedRegion.__call__ = original


def make_step(model: torch.nn.Module, run: Callable[..., Any], ids: torch.Tensor, mode: str) -> Callable[[], Any]:
    training, autocast, _ = MODES[mode]

    def step() -> torch.Tensor:
        if not training:
            with torch.no_grad():
                return run(input_ids=ids).logits
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            out = run(input_ids=ids, labels=ids)
        out.loss.backward()
        return out.loss.detach()
    return step


def kernels_per_step(step: Callable[[], Any]) -> tuple[float, int]:
    """(GPU kernel ms, kernels) of one step, from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"
               and not e.name.startswith("Memcpy") and not e.name.startswith("Memset")]
    return sum(e.device_time_total for e in kernels) / 1e3, len(kernels)


def region_gpu_us(step: Callable[[], Any], steps: int = REGION_STEPS,
                  kernels: dict[str, list[list[tuple[str, float]]]] | None = None) -> dict[str, list[float]]:
    """Per fused region (its fusion key): the GPU us of each of its calls over `steps` steps;
    with `kernels`, also each call's device events, (name, us) in the order they ran (filled
    in: key -> calls).

    A call's time is the device time of the kernels and memsets launched inside its named
    range. The profiler does not link a kernel launched through the driver API to a user range
    (its device_time_total stays 0), so each device event is matched to the host event that
    launched it (the flow between them, else their correlation id) and attributed by that
    launch's host time. Where no event could be matched, the GPU-side copies of the named
    ranges (Kineto's gpu_user_annotation: first kernel's start to last kernel's end) are used."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    ranges: list[tuple[int, int, str]] = []
    launched_by_flow: dict[int, int] = {}  # flow id -> host ns of the launch (torch >= 2.12)
    launched_by_correlation: dict[int, int] = {}  # CUPTI correlation id -> host ns of the launch
    op_at: dict[int, int] = {}  # a host op's id -> its start ns (a device event's linked op)
    device: list[tuple[Any, int, int, int, int, str]] = []  # (flow, correlation, linked op id, ns, start ns, name)
    spans: dict[str, list[float]] = {}  # fusion key -> GPU span of each call
    for ev in prof.profiler.kineto_results.events():
        flow = ev.flow_id() if hasattr(ev, "flow_id") else None
        if ev.device_type().name == "CPU":
            if ev.name().startswith("mlirfuse "):
                ranges.append((ev.start_ns(), ev.end_ns(), ev.name().rsplit(" ", 1)[-1]))
            if "Launch" in ev.name() or "Memset" in ev.name():
                if flow and ev.flow_start():
                    launched_by_flow[flow] = ev.start_ns()
                if ev.correlation_id():
                    launched_by_correlation[ev.correlation_id()] = ev.start_ns()
            elif ev.correlation_id():
                op_at[ev.correlation_id()] = ev.start_ns()
        elif ev.name().startswith("mlirfuse "):
            spans.setdefault(ev.name().rsplit(" ", 1)[-1], []).append(ev.duration_ns() / 1e3)
        else:
            device.append((flow, ev.correlation_id(), ev.linked_correlation_id(), ev.duration_ns(), ev.start_ns(),
                           ev.name()))
    launched_at = []
    for flow, correlation, linked, ns, start, name in device:
        at = launched_by_flow.get(flow) if flow else None
        at = at if at is not None else launched_by_correlation.get(correlation) if correlation else None
        at = at if at is not None else op_at.get(linked) if linked else None
        launched_at.append((at, start, ns, name))
    per_call = attribute(ranges, launched_at)
    if not any(per_call):
        return spans
    calls: dict[str, list[float]] = {}
    for (_, _, key), events in zip(sorted(ranges), per_call):
        calls.setdefault(key, []).append(sum(ns for _, ns in events) / 1e3)
        if kernels is not None:
            kernels.setdefault(key, []).append([(name, ns / 1e3) for name, ns in events])
    return calls


def attribute(ranges: list[tuple[int, int, str]],
              launched: list[tuple[int | None, int, int, str]]) -> list[list[tuple[str, int]]]:
    """Per host range (start ns, end ns, key), in order of start: the device events launched
    inside it, (name, duration ns) in the order they ran. `launched`: per device event, the
    host ns of its launch (None: unknown, not counted), its device start ns, duration, name."""
    ranges = sorted(ranges)
    starts = [r[0] for r in ranges]
    found: list[list[tuple[int, int, str]]] = [[] for _ in ranges]
    for at, start, ns, name in launched:
        k = bisect.bisect_right(starts, at) - 1 if at is not None else -1
        if k >= 0 and at <= ranges[k][1]:
            found[k].append((start, ns, name))
    return [[(name, ns) for _, ns, name in sorted(events)] for events in found]


def timed_rounds(steps: dict[str, Callable[[], Any]], rounds: int, per_round: int) -> dict[str, list[float]]:
    """ms per step of each implementation in each round, the order rotating every round."""
    names = list(steps)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(per_round):
                steps[name]()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - start) * 1e3 / per_round)
    return times


def difference(expected: torch.Tensor, got: torch.Tensor) -> float:
    """Largest difference relative to the largest magnitude of the eager value."""
    e, g = expected.double(), got.double()
    return float((e - g).abs().max() / e.abs().max().clamp_min(1e-30))


def peak_mb(step: Callable[[], Any]) -> float:
    """MB the allocator held at most during one step, above what it held before it."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def run_row(family: str, mode: str, batch: int, seq: int, rounds: int, per_round: int,
            compile_mode: str | None = None, dropout: float = 0.0) -> dict:
    import torch._dynamo as dynamo

    dynamo.reset()
    training = MODES[mode][0]
    base, ids = model_and_ids(family, mode, batch, seq, dropout)
    steps, first_step_s, outputs = {}, {}, {}
    for name in IMPLEMENTATIONS:
        model = copy.deepcopy(base)
        run = model if name == "eager" else torch.compile(model, backend=name, mode=compile_mode)
        steps[name] = make_step(model, run, ids, mode)
        torch.cuda.synchronize()
        start = time.perf_counter()
        outputs[name] = steps[name]().clone()  # (a CUDA graph's output is overwritten by its next replay)
        torch.cuda.synchronize()
        first_step_s[name] = time.perf_counter() - start
        steps[name]()  # a second step: recompiles, if any, happen here
    times = timed_rounds(steps, rounds, per_round)
    row: dict[str, Any] = {"model": family, "mode": mode, "batch": batch, "seq": seq,
                           "compile_mode": compile_mode or "default", "dropout": dropout if training else 0.0}
    for name in IMPLEMENTATIONS:
        gpu_ms, kernels = kernels_per_step(steps[name])
        peak = peak_mb(steps[name])
        median = statistics.median(times[name])
        row[name] = {"ms": median, "spread_ms": max(times[name]) - min(times[name]), "rounds_ms": times[name],
                     "gpu_kernel_ms": gpu_ms, "kernels": kernels, "peak_mb": peak,
                     "compile_s": max(first_step_s[name] - median / 1e3, 0.0),
                     "difference_to_eager": difference(outputs["eager"], outputs[name])}
    try:
        kernels: dict[str, list[list[tuple[str, float]]]] = {}
        row["region_gpu_us"] = region_gpu_us(steps["mlirfuse"], kernels=kernels)
        row["region_launch_us"] = {key: launch_medians(calls) for key, calls in kernels.items()}
    except Exception as e:  # noqa: BLE001 - the per-region table then falls back to the dump's times
        print(f"per-region profile failed ({type(e).__name__}: {e}); regions keep the dump's times", file=sys.stderr)
        row["region_gpu_us"], row["region_launch_us"] = {}, {}
    row["vs_eager"] = row["eager"]["ms"] / row["mlirfuse"]["ms"]
    row["vs_inductor"] = row["inductor"]["ms"] / row["mlirfuse"]["ms"]
    return row


_EFF = re.compile(r"GPU kernel \((\d+) launch\(es\)\): (\d+) bytes in ([\d.]+) us")
_KINDS = ("normalization", "inner reduction", "column reduction", "pointwise", "transpose", "naive")


def region_table(family: str, mode: str, batch: int, seq: int, copy_gbps: float,
                 profiled: dict[str, list[float]],
                 launch_us: dict[str, list[tuple[str, float]]] | None = None, dropout: float = 0.0) -> list[dict]:
    """Per fused region (a fusion's hash): its calls, launches and their schedules, bytes per
    call (one mlirfuse step with the eff_bandwidth and launch_params dumps), GPU us per call
    (`profiled`, from region_gpu_us; else the dump's timing) and per launch (`launch_us`)."""
    import torch._dynamo as dynamo

    import mlirfuse
    from mlirfuse import torch_backend

    with tempfile.TemporaryDirectory() as folder:
        previous = mlirfuse.set_options(dump="eff_bandwidth,launch_params", dump_dir=folder)
        try:
            dynamo.reset()
            torch_backend.reset()  # every region compiled again: the compile writes launch_params
            model, ids = model_and_ids(family, mode, batch, seq, dropout)
            step = make_step(model, torch.compile(model, backend="mlirfuse"), ids, mode)
            step()
            step()  # as timed: a graph dynamo compiles again on the second step is the one timed
            torch.cuda.synchronize()
        finally:
            mlirfuse.restore_options(previous)
            dynamo.reset()
            torch_backend.reset()
        regions = []
        for path in sorted(Path(folder).glob("*-eff_bandwidth.txt")):
            key = path.name[:-len("-eff_bandwidth.txt")]
            calls = [m.groups() for m in map(_EFF.search, path.read_text().splitlines()) if m]
            params = Path(folder) / f"{key}-launch_params.txt"
            lines = params.read_text().split(" launch(es):")[1].strip().splitlines() if params.exists() else []
            launches = [line for line in lines if line.startswith("launch ")]
            moved = int(calls[0][1])
            dump_us = statistics.median(float(c[2]) for c in calls)
            seen = [us for us in profiled.get(key, []) if us > 0]  # 0: no kernel attributed to the call
            us = statistics.median(seen) if seen else dump_us
            if us <= 0:  # a region that launches nothing (views or copies of its inputs only)
                continue
            regions.append({"region": key, "calls": len(profiled[key]) / REGION_STEPS if seen else len(calls),
                            # compiled for the first step only (a graph dynamo compiled again): not timed
                            "in_step": key in profiled or not profiled,
                            "launches": int(calls[0][0]),
                            "schedules": [_kind(line) for line in launches] or ["?"],
                            "naive": [line for line in launches if _kind(line) == "naive"],
                            "launch_us": (launch_us or {}).get(key, []) if seen else [],
                            "bytes": moved, "us": us, "timed_by": "profile" if seen else "dump",
                            "dump_us": dump_us, "gbps": moved / us / 1e3,
                            "pct_copy": 100 * moved / us / 1e3 / copy_gbps,
                            "same_size_copy_us": copy_us(moved),
                            "pct_same_size_copy": 100 * copy_us(moved) / us})
        undumped = set(profiled) - {r["region"] for r in regions} - \
            {p.name[:-len("-eff_bandwidth.txt")] for p in Path(folder).glob("*-eff_bandwidth.txt")}
        if undumped:
            print(f"{family} {mode}: regions timed but not compiled again for the table: {sorted(undumped)}",
                  file=sys.stderr)
    return sorted(regions, key=lambda r: -r["us"] * r["calls"])


def launch_medians(calls: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    """Per device event of a region's calls (each call's (name, us), in the order they ran):
    "memset" or "kernel" and the median us over the calls with the most common count of events
    (a call that launched another number of them is left out)."""
    counts = [len(c) for c in calls]
    if not counts:
        return []
    n = max(set(counts), key=lambda k: (counts.count(k), k))
    same = [c for c in calls if len(c) == n]
    return [("memset" if "memset" in same[0][k][0].lower() else "kernel", statistics.median(c[k][1] for c in same))
            for k in range(n)]


def launch_text(launches: list) -> str:
    """`launch_medians`' list as the table shows it: kernels' us, memsets marked."""
    return ", ".join(f"{'memset ' if kind == 'memset' else ''}{us:.1f}" for kind, us in launches)


@functools.lru_cache(maxsize=None)
def copy_us(moved: int, repeats: int = 21) -> float:
    """GPU us of torch's copy moving `moved` bytes (half read, half written, float32; the
    device-to-device copy the suite's copy bandwidth times) from DRAM, the median over
    `repeats` calls of its device time under torch.profiler, as the regions are timed. The L2
    (50 MB on an H200) is flushed before each call: copies of 20-50 MB repeated from it ran
    faster than the copy bandwidth."""
    from torch.profiler import ProfilerActivity, profile

    src = torch.empty(max(1, moved // 8), dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            flush.zero_()
            dst.copy_(src)
        torch.cuda.synchronize()
    times = sorted(e.device_time_total for e in prof.events() if e.device_type.name == "CUDA"
                   and e.name.startswith("Memcpy"))
    return times[len(times) // 2] if times else math.nan


def _kind(launch_line: str) -> str:
    schedule = launch_line.split("): ", 1)[-1]
    return next((k for k in _KINDS if schedule.startswith(k)), schedule.split(":")[0])


def error_text(e: Exception) -> str:
    """A failure as a row reports it."""
    return f"{type(e).__name__}: {str(e)[:300]}"


def measured_row(family: str, mode: str, opts: argparse.Namespace, copy_gbps: float) -> dict:
    """`run_row`'s row for `opts`, with its per-region table unless `--no-regions`."""
    row = run_row(family, mode, opts.batch, opts.seq, opts.rounds, opts.steps,
                  None if opts.compile_mode == "default" else opts.compile_mode, opts.dropout)
    if not opts.no_regions:
        try:
            row["regions"] = region_table(family, mode, opts.batch, opts.seq, copy_gbps, row["region_gpu_us"],
                                          row.get("region_launch_us"), opts.dropout)
        except Exception as e:  # noqa: BLE001 - the row's timings stand; the table's failure is reported
            row["regions"], row["regions_error"] = [], error_text(e)
    return row


def row_in_a_process(family: str, mode: str, copy_gbps: float) -> dict:
    """The row measured by this script run again for it alone, in a process of its own (this
    process's arguments passed on): each row's steps then run where no earlier row's models,
    compiled graphs, profiler sessions and garbage are, as a user's process would run them."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "row.json"
        done = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--one-row", f"{family},{mode}",
                               "--one-row-json", str(out), "--copy-gbps", repr(copy_gbps)], stdout=sys.stderr)
        if done.returncode or not out.exists():
            raise RuntimeError(f"the row's process exited with status {done.returncode}")
        return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,llama,bert")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    # Many short rounds: the inference and autocast steps are bound by host time, which varies
    # by tens of percent from round to round on a shared host; the median of 5 rounds of 5 steps
    # moved from run to run by more than the differences it was to show.
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--steps", type=int, default=10, help="steps per implementation per round")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--no-regions", action="store_true", help="skip the per-region table")
    parser.add_argument("--compile-mode", choices=["default", "reduce-overhead"], default="default",
                        help="torch.compile's mode for Inductor and mlirfuse alike")
    parser.add_argument("--dropout", type=float, default=0.0, help="dropout probability of the training rows")
    parser.add_argument("--in-process", action="store_true",
                        help="run every row in this process (by default each row runs in a process of its own)")
    parser.add_argument("--one-row", help=argparse.SUPPRESS)  # "family,mode": this row alone, into --one-row-json
    parser.add_argument("--one-row-json", help=argparse.SUPPRESS)
    parser.add_argument("--copy-gbps", type=float, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    warnings.filterwarnings("ignore")
    import suite

    import mlirfuse

    mlirfuse.set_options(fallback=False)  # a region that fails raises: its torch ops are not mlirfuse's time

    if opts.one_row:
        family, mode = opts.one_row.split(",")
        try:
            row = measured_row(family, mode, opts, opts.copy_gbps)
        except Exception as e:  # noqa: BLE001 - the parent reports it as the row's error
            row = {"model": family, "mode": mode, "error": error_text(e)}
        Path(opts.one_row_json).write_text(json.dumps(row))
        return 0
    gpu = torch.cuda.get_device_name()
    driver = suite.driver_version()
    copy_gbps = suite.copy_bandwidth_gbps()
    print(f"GPU: {gpu}; driver {driver}; torch {torch.__version__}; copy bandwidth {copy_gbps:.0f} GB/s; "
          f"batch {opts.batch} x seq {opts.seq}; torch.compile mode {opts.compile_mode}; "
          f"training dropout {opts.dropout}\n")
    wanted = [(f, m) for f in opts.models.split(",") for m in opts.modes.split(",")]
    rows: list[dict] = []

    def write_json() -> None:
        if opts.json:
            Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
            Path(opts.json).write_text(json.dumps({"gpu": gpu, "driver": driver, "torch": torch.__version__,
                                                   "date": time.strftime("%Y-%m-%d"), "copy_gbps": copy_gbps,
                                                   "complete": len(rows) == len(wanted), "rows": rows}, indent=2))

    print("| model, mode | ms per step e / i / m (spread m) | GPU kernel ms e / i / m | kernels e / i / m "
          "| vs eager / Inductor | compile s i / m | diff to eager i / m | step peak MB e / i / m |\n"
          + "|---" * 8 + "|")
    for family, mode in wanted:
        try:
            row = measured_row(family, mode, opts, copy_gbps) if opts.in_process else \
                row_in_a_process(family, mode, copy_gbps)
        except Exception as e:  # noqa: BLE001 - a row that fails is reported, the others still run
            row = {"model": family, "mode": mode, "error": error_text(e)}
        if "error" in row:
            rows.append(row)
            print(f"| {family}, {mode} | failed: {row['error'][:160]} |", flush=True)
            write_json()
            continue
        e, i, m = (row[n] for n in IMPLEMENTATIONS)
        print(f"| {family}, {mode} | {e['ms']:.2f} / {i['ms']:.2f} / {m['ms']:.2f} ({m['spread_ms']:.2f}) | "
              f"{e['gpu_kernel_ms']:.2f} / {i['gpu_kernel_ms']:.2f} / {m['gpu_kernel_ms']:.2f} | "
              f"{e['kernels']} / {i['kernels']} / {m['kernels']} | "
              f"{row['vs_eager']:.2f}x / {row['vs_inductor']:.2f}x | "
              f"{i['compile_s']:.1f} / {m['compile_s']:.1f} | {i['difference_to_eager']:.1e} / "
              f"{m['difference_to_eager']:.1e} | {e['peak_mb']:.0f} / {i['peak_mb']:.0f} / {m['peak_mb']:.0f} |",
              flush=True)
        rows.append(row)
        write_json()
    ok = [r for r in rows if "error" not in r]
    if ok:
        geo = math.exp(sum(math.log(r["vs_inductor"]) for r in ok) / len(ok))
        print(f"\ngeometric mean vs Inductor: {geo:.2f}x over {len(ok)} rows ({len(rows) - len(ok)} failed); "
              f"min {min(r['vs_inductor'] for r in ok):.2f}x; vs eager min {min(r['vs_eager'] for r in ok):.2f}x")
    naive, failed_tables = [], []
    if not opts.no_regions:
        for row in ok:
            regions = row["regions"]
            if "regions_error" in row:
                failed_tables.append(f"{row['model']} {row['mode']}: {row['regions_error']}")
            print(f"\n### mlirfuse regions: {row['model']}, {row['mode']}\n\n| region | calls | launches | schedules "
                  "| MB | us | us per launch | GB/s | % copy BW | % of a copy that size |\n" + "|---" * 10 + "|")
            for r in regions:
                slow = " (below 75%)" if r["bytes"] >= BIG_REGION and r["pct_copy"] < 75 and r["in_step"] else ""
                by = "" if r["timed_by"] == "profile" else " (dump)" if r["in_step"] else " (dump; first step only)"
                print(f"| {r['region']} | {r['calls']:g} | {r['launches']} | {', '.join(r['schedules'])} | "
                      f"{r['bytes'] / 1e6:.1f} | {r['us']:.1f}{by} | {launch_text(r['launch_us'])} | "
                      f"{r['gbps']:.0f} | {r['pct_copy']:.0f}%{slow} | {r['pct_same_size_copy']:.0f}% |")
            naive += [f"{row['model']} {row['mode']} region {r['region']}: {line}"
                      for r in regions for line in r["naive"]]
    write_json()
    if failed_tables:
        print(f"\nPER-REGION TABLES THAT FAILED ({len(failed_tables)}):\n" + "\n".join(failed_tables))
    if naive:
        print(f"\nNAIVE KERNELS ({len(naive)}): every launch below runs one thread an element\n" + "\n".join(naive))
    return 1 if naive or failed_tables else 0


if __name__ == "__main__":
    sys.exit(main())
