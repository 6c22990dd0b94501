"""torch.compile(backend="mlirfuse") vs eager vs torch.compile's default backend (inductor).

    python bench/torch_compile_bench.py [--small] [--iters N] [--json PATH] [--profile]

The getting-started tutorial's measurement: iterations per second of forward + backward
(`output.backward(grad_output)`, gradients cleared each iteration, GPU synchronized around
the timed loop) of its bias-dropout-add-LayerNorm (composite definition, F.dropout and
F.layer_norm) and its RMSNorm block, at 64x128x1024 float32 on the GPU. Prints a Markdown
table with mlirfuse's ratios to eager and to inductor; `--json` writes the rows. Runs on
the CPU too (where there is no GPU, or with --device cpu): use --small there.
"""

from __future__ import annotations

import argparse
import json
import platform
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


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    shape = (4, 16, 256) if args.small else (64, 128, 1024)
    iters = args.iters or (20 if args.small or device == "cpu" else 100)
    rows = []
    for name, fn in (("layernorm", composite_definition), ("rmsnorm", with_rms_norm)):
        torch.manual_seed(0)
        params = _parameters(name, shape, device)
        grad = torch.rand(*shape, device=device)
        row: dict[str, Any] = {"workload": f"bias-dropout-add-{'LayerNorm' if name == 'layernorm' else 'RMSNorm'}",
                               "shape": list(shape), "dtype": "float32", "device": device}
        for label, compiled in (("eager", fn), ("inductor", torch.compile(fn)),
                                ("mlirfuse", torch.compile(fn, backend="mlirfuse"))):
            if label == "inductor" and args.no_inductor:
                continue
            if label == "mlirfuse":  # warm up and compile outside the timed loop, then count
                iterations_per_second(compiled, params, grad, 1, device)
                before = mlirfuse.torch_backend.stats()
            row[label] = iterations_per_second(compiled, params, grad, iters, device)
            if args.profile and device == "cuda":
                row[f"{label}_gpu_us"], row[f"{label}_kernels"] = gpu_time_per_iteration(compiled, params, grad)
            if label == "mlirfuse":  # graphs and compiles made during the timed loop: expected 0
                after = mlirfuse.torch_backend.stats()
                row["mlirfuse_compiles_in_loop"] = after["compiles"] - before["compiles"]
                row["mlirfuse_graphs_in_loop"] = sum(after["graphs"].values()) - sum(before["graphs"].values())
        row["mlirfuse/eager"] = row["mlirfuse"] / row["eager"]
        if "inductor" in row:
            row["mlirfuse/inductor"] = row["mlirfuse"] / row["inductor"]
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| workload | shape | device | eager it/s | inductor it/s | mlirfuse it/s | mlirfuse/eager | "
             "mlirfuse/inductor | compiles in timed loop |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    profiled = [r for r in rows if "eager_gpu_us" in r]
    for r in rows:
        inductor = f"{r['inductor']:.1f}" if "inductor" in r else "-"
        ratio = f"{r['mlirfuse/inductor']:.2f}x" if "mlirfuse/inductor" in r else "-"
        lines.append(f"| {r['workload']} | {'x'.join(map(str, r['shape']))} | {r['device']} | {r['eager']:.1f} | "
                     f"{inductor} | {r['mlirfuse']:.1f} | {r['mlirfuse/eager']:.2f}x | {ratio} | "
                     f"{r['mlirfuse_compiles_in_loop'] + r['mlirfuse_graphs_in_loop']} |")
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
    parser.add_argument("--iters", type=int, default=0, help="timed iterations (default 100 on GPU, 20 otherwise)")
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
