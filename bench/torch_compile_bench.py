"""torch.compile(backend="mlirfuse") vs eager vs torch.compile's default backend (inductor).

    python bench/torch_compile_bench.py [--small] [--iters N] [--rounds R] [--json PATH] [--profile]

The getting-started tutorial's measurement: iterations per second of forward + backward
(`output.backward(grad_output)`, gradients cleared each iteration, GPU synchronized around
the timed loop) of its bias-dropout-add-LayerNorm (composite definition, F.dropout and
F.layer_norm) and its RMSNorm block, at 64x128x1024 float32 on the GPU. Prints a Markdown
table with mlirfuse's ratios to eager and to inductor; `--json` writes the rows. Runs on
the CPU too (where there is no GPU, or with --device cpu): use --small there.

Every implementation here is bound by the host on an H100 (Python, dynamo's guards,
AOTAutograd's wrappers, the autograd engine), whose speed drifts within a run: the
implementations are timed in `--rounds` interleaved rounds (the order rotated each round)
and each figure is the median round, with the spread of the rounds next to it. A last row
times a trivial graph (`x * w` on 4x4) the same way: the per-iteration cost of
torch.compile's machinery before any kernel runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mlirfuse.torch_backend  # noqa: E402

P = 0.1


def composite_definition(input1, input2, weight, bias1, bias2):
    bias1_out = input1 + bias1
    dropout_out = F.dropout(bias1_out, P, training=True)
    norm_input = dropout_out + input2
    return F.layer_norm(norm_input, (input1.size(2),), weight, bias2)


def with_rms_norm(input1, input2, weight, bias):
    bias_out = input1 + bias
    dropout_out = F.dropout(bias_out, P, training=True)
    norm_input = dropout_out + input2
    var = norm_input.mul(norm_input).mean(2, True)
    return weight * (norm_input / torch.sqrt(var + 1e-12))


def _parameters(name: str, shape: tuple[int, ...], device: str) -> list[torch.Tensor]:
    input1 = torch.randn(*shape, device=device, requires_grad=True)
    input2 = torch.rand_like(input1).requires_grad_()
    n_vectors = 3 if name == "layernorm" else 2  # weight, bias1(, bias2)
    vectors = [torch.nn.Parameter(torch.randn(shape[-1], device=device)) for _ in range(n_vectors)]
    return [input1, input2, *vectors]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def iterations_per_second(fn: Callable[..., Any], params: list[torch.Tensor], grad: torch.Tensor,
                          iters: int, device: str) -> float:
    """The tutorial's profile_workload: warm-up, then timed forward + backward iterations."""
    def step() -> None:
        fn(*params).backward(grad)
        for p in params:
            p.grad = None
    for _ in range(3):
        step()
    _sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        step()
    _sync(device)
    return iters / (time.perf_counter() - start)


def gpu_time_per_iteration(fn: Callable[..., Any], params: list[torch.Tensor], grad: torch.Tensor,
                           iters: int = 20) -> tuple[float, int]:
    """(kernel time in us, kernel launches) per forward + backward iteration, from
    torch.profiler: set against the wall time per iteration, it says whether an
    implementation is bound by the GPU or by the host."""
    from torch.profiler import ProfilerActivity, profile

    iterations_per_second(fn, params, grad, 1, "cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        iterations_per_second(fn, params, grad, iters, "cuda")
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(getattr(e, "device_time", None) or e.cuda_time for e in kernels)
    n_iters = iters + 3  # iterations_per_second's warm-up steps run under the profiler too
    return busy / n_iters, round(len(kernels) / n_iters)


def trivial(x, w):
    """The trivial graph: torch.compile's own cost per training iteration."""
    return x * w


def _interleaved(impls: dict[str, Callable[..., Any]], params: list[torch.Tensor], grad: torch.Tensor,
                 iters: int, rounds: int, device: str) -> dict[str, list[float]]:
    """Iterations per second of each implementation in `rounds` rounds, the order rotated
    each round (so that a drift of the host's speed reaches all of them alike)."""
    labels = list(impls)
    result: dict[str, list[float]] = {label: [] for label in labels}
    for r in range(rounds):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            result[label].append(iterations_per_second(impls[label], params, grad, iters, device))
    return result


Case = tuple[str, Callable[..., Any], list[torch.Tensor], torch.Tensor]  # workload, function, parameters, grad


def _cases(shape: tuple[int, ...], device: str) -> list[Case]:
    cases = []
    for name, fn in (("layernorm", composite_definition), ("rmsnorm", with_rms_norm)):
        torch.manual_seed(0)
        params = _parameters(name, shape, device)
        workload = f"bias-dropout-add-{'LayerNorm' if name == 'layernorm' else 'RMSNorm'}"
        cases.append((workload, fn, params, torch.rand(*shape, device=device)))
    x = torch.randn(4, 4, device=device, requires_grad=True)
    cases.append(("trivial x * w", trivial, [x, torch.randn(4, device=device, requires_grad=True)],
                  torch.ones(4, 4, device=device)))
    return cases


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    shape = (4, 16, 256) if args.small else (64, 128, 1024)
    iters = args.iters or (20 if args.small or device == "cpu" else 100)
    rows = []
    for workload, fn, params, grad in _cases(shape, device):
        row: dict[str, Any] = {"workload": workload, "shape": list(params[0].shape), "dtype": "float32",
                               "device": device, "iters": iters, "rounds": args.rounds}
        impls = {"eager": fn, "mlirfuse": torch.compile(fn, backend="mlirfuse")}
        if not args.no_inductor:
            impls["inductor"] = torch.compile(fn)
        for compiled in impls.values():  # compile and warm up outside the timed rounds
            iterations_per_second(compiled, params, grad, 1, device)
        before = mlirfuse.torch_backend.stats()
        rounds = _interleaved(impls, params, grad, iters, args.rounds, device)
        after = mlirfuse.torch_backend.stats()
        # graphs and compiles made during the timed rounds: expected 0
        row["mlirfuse_compiles_in_loop"] = after["compiles"] - before["compiles"]
        row["mlirfuse_graphs_in_loop"] = sum(after["graphs"].values()) - sum(before["graphs"].values())
        for label, values in rounds.items():
            row[label] = statistics.median(values)
            row[f"{label}_rounds"] = values
        if args.profile and device == "cuda":
            for label, compiled in impls.items():
                row[f"{label}_gpu_us"], row[f"{label}_kernels"] = gpu_time_per_iteration(compiled, params, grad)
        row["mlirfuse/eager"] = row["mlirfuse"] / row["eager"]
        if "inductor" in row:
            row["mlirfuse/inductor"] = row["mlirfuse"] / row["inductor"]
        rows.append(row)
    return rows


def _spread(row: dict[str, Any], label: str) -> str:
    values = row.get(f"{label}_rounds")
    if label not in row:
        return "-"
    if not values or len(values) < 2:
        return f"{row[label]:.1f}"
    return f"{row[label]:.1f} ({min(values):.0f}-{max(values):.0f})"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| workload | shape | device | eager it/s | inductor it/s | mlirfuse it/s | mlirfuse/eager | "
             "mlirfuse/inductor | compiles in timed loop |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    profiled = [r for r in rows if "eager_gpu_us" in r]
    for r in rows:
        ratio = f"{r['mlirfuse/inductor']:.2f}x" if "mlirfuse/inductor" in r else "-"
        lines.append(f"| {r['workload']} | {'x'.join(map(str, r['shape']))} | {r['device']} | {_spread(r, 'eager')} | "
                     f"{_spread(r, 'inductor')} | {_spread(r, 'mlirfuse')} | {r['mlirfuse/eager']:.2f}x | {ratio} | "
                     f"{r['mlirfuse_compiles_in_loop'] + r['mlirfuse_graphs_in_loop']} |")
    lines.append("")
    lines.append("it/s: median of the interleaved rounds (slowest-fastest round in brackets).")
    if profiled:
        lines += ["", "| workload | implementation | wall us/iter | GPU kernel us/iter | kernels/iter |",
                  "| --- | --- | ---: | ---: | ---: |"]
        for r in profiled:
            for label in ("eager", "inductor", "mlirfuse"):
                if f"{label}_gpu_us" in r:
                    lines.append(f"| {r['workload']} | {label} | {1e6 / r[label]:.0f} | {r[f'{label}_gpu_us']:.0f} | "
                                 f"{r[f'{label}_kernels']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="4x16x256 instead of 64x128x1024 (CPU checks)")
    parser.add_argument("--iters", type=int, default=0,
                        help="timed iterations per round (default 100 on GPU, 20 otherwise)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per implementation (default 5)")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available")
    parser.add_argument("--no-inductor", action="store_true", help="skip torch.compile's default backend")
    parser.add_argument("--json", type=Path, help="write the rows (and the machine) here")
    parser.add_argument("--profile", action="store_true",
                        help="also GPU kernel time and launches per iteration (torch.profiler)")
    args = parser.parse_args()
    rows = run(args)
    print(markdown(rows))
    if args.json:
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        args.json.write_text(json.dumps({"torch": torch.__version__, "gpu": gpu, "host": platform.node(),
                                         "date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
