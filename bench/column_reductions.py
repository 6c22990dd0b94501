"""Column and middle-axis reductions as the models and the suite meet them: GPU time per call
(kernels and memsets, torch.profiler) through torch.compile, mlirfuse against Inductor, and
against mlirfuse with other column-reduction geometries or another tree's kernel.

    python bench/column_reductions.py [--variants mlirfuse,inductor] [--rounds 3] [--only NAME,...]
                                      [--json out.json] [--kernels] [--timer profiler|kernel_us]

A variant is `inductor`, `mlirfuse`, `mlirfuse:KEY=V,...` (the heuristic's parameters
overridden: bx = lanes across the columns, the rows of threads following unless by = rows of
threads is given (blocks of bx x by threads); unroll = rows in flight, in both geometries;
regs = the register cap (0: none), pregs = that of a reduction computing a pointwise
prologue; stream = 1: evict-first loads (`heuristics.STREAMING_LOADS`); frac = the wave
fraction the slices aim for; minrows = rows a thread at least) or
`kernel=PATH` (mlirfuse with the column-reduction kernel of another tree's
`mlirfuse/lowering/gpu/column.py`) or `tree=PATH` (mlirfuse as a whole from another checkout
or copy of the package, PATH/mlirfuse: a baseline commit), for an A/B in one run. Each
variant runs in its own process (the kernel cache off, lone reductions fused:
`MLIRFUSE_SINGLE_NODE=1`), the variants in turns, `--rounds` times; the table gives each
case's best round. `--timer kernel_us` times each call as the suite does (`gpu_bench.kernel_us`:
the L2 flushed by a write before each call, median) instead of torch.profiler's kernel sum
with the L2 warm: the two order the middle-axis sum and Inductor's differently (session 73's
diagnostics).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16


def _layer_norm_backward_sums(x, dy, mean, rstd):
    """The weight and bias gradients of a LayerNorm (the models' column reduction computing the
    normalized input at each element from per-row mean and rstd)."""
    return (dy * ((x - mean) * rstd)).sum(0), dy.sum(0)


def _gelu_bias_gradient(g, x):
    """GPT-2's MLP under bfloat16 autocast: the tanh GELU's backward (also written, the next
    matmul's input) and its bias gradient, a column reduction computing it at each element."""
    t = torch.ops.aten.gelu_backward(g, x, approximate="tanh")
    return t, t.sum((0, 1))


def _layer_norm_backward_residual(g16, g, w, xhat, rstd):
    """BERT's LayerNorm backward under bfloat16 autocast, one region of its training step: the
    incoming gradient (a float32 residual branch plus a bfloat16 one), dx, the weight and bias
    gradients, and the next Linear's bias gradient (a bfloat16 sum of dx in bfloat16)."""
    d = g + g16.float()
    wd = d * w
    n = d.shape[-1]
    dx = rstd * (wd * n - wd.sum(-1, keepdim=True) - xhat * (wd * xhat).sum(-1, keepdim=True))
    dx16 = dx.to(torch.bfloat16).reshape(-1, n)
    return dx, (d * xhat).sum((0, 1)), d.sum((0, 1)), dx16, dx16.sum(0).float()


# name -> (shape, dtype, function): the suite's middle-axis sum, bias gradients of GPT-2/BERT
# widths (bfloat16 autocast: float32 sums of bfloat16), a column sum with a prologue; a shape
# of shapes gives the function several inputs (the LayerNorm backward's x, dy, mean, rstd), and a
# tuple of dtypes one for each.
CASES = {
    "vocabulary bias grad sum(0) f32 4096x30522": ((4096, 30522), F32, lambda x: x.sum(0)),
    "vocabulary bias grad sum(0) bf16 4096x30522": ((4096, 30522), BF16, lambda x: x.sum(0)),
    "middle-axis sum f32 64x1024x256": ((64, 1024, 256), F32, lambda x: x.sum(1)),
    "middle-axis sum bf16 64x1024x256": ((64, 1024, 256), BF16, lambda x: x.sum(1)),
    "middle-axis sum f32 512x512x64": ((512, 512, 64), F32, lambda x: x.sum(1)),
    "middle-axis sum f32 16x2048x1024": ((16, 2048, 1024), F32, lambda x: x.sum(1)),
    "middle-axis sum bf16 32x2048x512": ((32, 2048, 512), BF16, lambda x: x.sum(1)),
    "middle-axis sum f32 256x128x128": ((256, 128, 128), F32, lambda x: x.sum(1)),
    "sum(0) f32 32768x1024": ((32768, 1024), F32, lambda x: x.sum(0)),
    "sum(0) bf16 8192x768": ((8192, 768), BF16, lambda x: x.sum(0)),
    "sum(0) bf16 8192x3072": ((8192, 3072), BF16, lambda x: x.sum(0)),
    "sum(0,1) f32 8x512x768": ((8, 512, 768), F32, lambda x: x.sum((0, 1))),
    "float(x).sum(0) bf16 4096x4096": ((4096, 4096), BF16, lambda x: x.float().sum(0)),
    "(x*sigmoid(x)).sum(0) f32 4096x3072": ((4096, 3072), F32, lambda x: (x * torch.sigmoid(x)).sum(0)),
    "LayerNorm-backward sums f32 4096x768": (((4096, 768), (4096, 768), (4096, 1), (4096, 1)), F32,
                                             _layer_norm_backward_sums),
    "LayerNorm-backward sums f32 16384x768": (((16384, 768), (16384, 768), (16384, 1), (16384, 1)), F32,
                                              _layer_norm_backward_sums),
    "GELU-backward + bias-grad bf16 8x512x3072": (((8, 512, 3072), (8, 512, 3072)), BF16, _gelu_bias_gradient),
    "LayerNorm backward with residual bf16ac 8x512x768": (
        ((8, 512, 768), (8, 512, 768), (768,), (8, 512, 768), (8, 512, 1)), (BF16, F32, F32, F32, F32),
        _layer_norm_backward_residual),
}


def configure(variant: str) -> str:
    """Set up this process for `variant`; the torch.compile backend it runs."""
    if variant == "inductor":
        return "inductor"
    os.environ["MLIRFUSE_CACHE_DIR"] = "off"
    os.environ["MLIRFUSE_SINGLE_NODE"] = "1"
    if variant.startswith("tree="):
        sys.path.insert(0, str(Path(variant.split("=", 1)[1]).resolve()))  # before mlirfuse is imported
        return "mlirfuse"
    from mlirfuse.lowering.gpu import column
    from mlirfuse.lowering.gpu import heuristics as H

    if variant.startswith("kernel="):
        spec = importlib.util.spec_from_file_location("other_column", variant.split("=", 1)[1])
        other = importlib.util.module_from_spec(spec)
        sys.modules["other_column"] = other  # (its dataclasses look their module up)
        spec.loader.exec_module(other)
        column.emit_column_reduction = other.emit_column_reduction
    elif ":" in variant:
        knobs = {k: int(v) for k, v in (kv.split("=") for kv in variant.split(":", 1)[1].split(","))}
        heuristic = H.column_reduction_heuristic
        H.COLUMN_WAVE_FRACTION = knobs.get("frac", H.COLUMN_WAVE_FRACTION)
        H.COLUMN_MIN_ROWS_PER_THREAD = knobs.get("minrows", H.COLUMN_MIN_ROWS_PER_THREAD)
        H.COLUMN_PROLOGUE_REGISTERS = knobs.get("pregs", H.COLUMN_PROLOGUE_REGISTERS)
        if knobs.get("stream"):
            H.STREAMING_LOADS = H.STREAMING_LOADS | {"column"}

        def overridden(columns, rows, element_bytes, device=H.DeviceProperties(), body_ops=1, batch=1,
                       accumulator_bytes=()):
            p = heuristic(columns, rows, element_bytes, device, body_ops, batch, accumulator_bytes)
            if "bx" in knobs or "by" in knobs:
                bx = knobs.get("bx", p.block_x)
                p = dataclasses.replace(p, block_x=bx, block_y=knobs.get("by", H.COLUMN_BLOCK // bx))
            if "regs" in knobs:  # the cap of one computing no prologue (0: none)
                p = dataclasses.replace(p, registers=knobs["regs"])
            if "unroll" in knobs:  # both geometries
                u = knobs["unroll"]
                p = dataclasses.replace(p, unroll=u, narrow_unroll=u if p.narrow_block_x else 0)
            return p

        H.column_reduction_heuristic = overridden
        if "unroll" in knobs:
            H.column_unroll = lambda vec, loads, body_ops, most=4: knobs["unroll"]
    return "mlirfuse"


def _flat(results) -> list:
    return [r.float() for r in (results if isinstance(results, tuple) else (results,))]


def time_cases(variant: str, names: list[str], reps: int, timer: str = "profiler") -> list[dict]:
    backend = configure(variant)
    import mlirfuse  # noqa: F401  (registers the backend)

    rows = []
    for name in names:
        shape, dtype, fn = CASES[name]
        shapes = shape if isinstance(shape[0], tuple) else (shape,)
        dtypes = dtype if isinstance(dtype, tuple) else (dtype,) * len(shapes)
        xs = [torch.randn(s, device="cuda", dtype=t) for s, t in zip(shapes, dtypes)]
        compiled = torch.compile(fn, backend=backend, dynamic=False)
        expected, got = _flat(fn(*xs)), _flat(compiled(*xs))
        error = float(max((g - e).abs().max() / e.abs().max() for g, e in zip(got, expected)))
        for _ in range(5):
            compiled(*xs)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                compiled(*xs)
            torch.cuda.synchronize()
        gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        us = sum(e.device_time for e in gpu) / reps
        kernels: dict[str, float] = {}  # name -> us per call, in launch order
        for e in gpu:
            kernels[e.name] = kernels.get(e.name, 0.0) + e.device_time / reps
        if timer == "kernel_us":
            from gpu_bench import kernel_us

            us = kernel_us(lambda: compiled(*xs))
        rows.append(dict(case=name, variant=variant, us=us, launches=len(gpu) / reps, error=error,
                         gbps=sum(x.numel() * x.element_size() for x in xs) / 1e3 / us, kernels=kernels))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="mlirfuse,inductor", help="';'-separated where a variant has commas")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--only", help="comma-separated substrings of the case names")
    parser.add_argument("--json")
    parser.add_argument("--kernels", action="store_true", help="each case's kernels and their us, too")
    parser.add_argument("--timer", choices=("profiler", "kernel_us"), default="profiler")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # one variant's process
    opts = parser.parse_args()
    names = [n for n in CASES if not opts.only or any(o in n for o in opts.only.split(","))]
    if opts.worker:
        print(json.dumps(time_cases(opts.worker, names, opts.reps, opts.timer)))
        return
    variants = opts.variants.split(";") if ";" in opts.variants else opts.variants.split(",")
    rows = []
    for _ in range(opts.rounds):
        for v in variants:
            cmd = [sys.executable, __file__, "--worker", v, "--reps", str(opts.reps), "--timer", opts.timer] + (
                ["--only", opts.only] if opts.only else [])
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"variant {v} failed:\n{out.stderr[-3000:]}")
            rows += json.loads(out.stdout.strip().splitlines()[-1])
    best = collections.defaultdict(lambda: float("inf"))
    for r in rows:
        best[r["case"], r["variant"]] = min(best[r["case"], r["variant"]], r["us"])
    how = "kernel_us, L2 flushed" if opts.timer == "kernel_us" else "kernels + memsets, torch.profiler"
    print(f"GPU: {torch.cuda.get_device_name()}; us per call ({how}), best of {opts.rounds} rounds\n")
    print("| case | " + " | ".join(variants) + " |\n|---|" + "---|" * len(variants))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{best[n, v]:.1f}" for v in variants) + " |")
    if opts.kernels:
        print("\nKernels of each case's best round, us per call:\n")
        for n in names:
            for v in variants:
                r = min((r for r in rows if (r["case"], r["variant"]) == (n, v)), key=lambda r: r["us"])
                print(f"- {n}, {v}: " + ", ".join(f"{k[:60]} {t:.1f}" for k, t in r["kernels"].items()))
    wrong = [(r["case"], r["variant"], r["error"]) for r in rows if r["error"] > 1e-2]
    if wrong:
        sys.exit(f"results differ from eager: {wrong}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                                                   rounds=opts.rounds, rows=rows), indent=1))


if __name__ == "__main__":
    main()
