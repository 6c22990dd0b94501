"""The performance issue's benchmark suite: mlirfuse vs torch eager vs torch.compile.

    python bench/suite.py [--json bench/results/<gpu>-<date>.json] [--quick] [--only NAME,...] [--rows A:B]
    python bench/suite.py --merge part1.json part2.json ... [--json all.json]

For each workload: median kernel time with L2 flushed between runs
(`gpu_bench.kernel_us`: do_bench's method, but the host's time per call hidden behind a spin
of the stream; the best of 3 interleaved rounds, all kept in the JSON) of
mlirfuse (`mlirfuse.jit` on torch CUDA tensors: the default, one compile for every shape of
the signature; and `static`, `mlirfuse.jit(dynamic=False)`, compiled for the row's shapes as
torch.compile is here), torch eager and `torch.compile(dynamic=False)`; effective GB/s =
ideal bytes (each input and output counted once) / time; % of the device copy bandwidth measured in the same run; speedup over
torch.compile; host time per call (launch loop without synchronization) and compile times
(cold: empty disk cache, with `MLIRFUSE_DUMP=compile_time`'s lines in the JSON as
`cold_parts`; warm: the first call of a fresh process loading from the disk cache, the
process started while the row compiles its torch.compile twin and timed once that is done,
with nothing else running). The Markdown table goes
to stdout, the JSON (GPU kind, driver, torch version, date, rows) to --json.

Each workload runs in its own process (compile caches, torch.compile state and any crash
stay with it: in one shared process, torch.compile's times for some rows came out slower,
bias-dropout-add-RMSNorm 66.6 us against 45.9 us in a process of its own). A row starts
with a throwaway fusion whose time (`first_fusion_s`: imports, CUDA runtime library) is
reported apart, so that its cold compile is that workload's own. Before the rows, the
torch.compile twins are compiled in parallel processes (`--no-prewarm` skips it): the rows
then load Inductor's on-disk caches instead of compiling one after another.

A whole run takes about 11 minutes on an H200 host (the prewarm 74 s, then some 17 s a row,
session 66). Where a command may run 10 minutes at most, run it in parts (`--rows 0:15`,
then `--rows 15:`: positions in the workload list, as a Python slice) and `--merge` their
JSON files: one table, the rows in order, and one summary line over all of them (no GPU).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Compiles stay in-process: Inductor's pool of compile workers would otherwise start in the
# background of the timed loops (once compiles are cache hits, a row reaches its timing while
# the pool still imports torch) and slow torch.compile's host path.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402
from gpu_bench import copy_bandwidth_gbps, driver_version, gelu_backward_t, gelu_bookend_t, host_us_per_call, ideal_bytes, kernel_us  # noqa: E402

import mlirfuse  # noqa: E402
from mlirfuse import DataType, gpu_kernel, ops  # noqa: E402
from mlirfuse.frontend.indexing import iota_like  # noqa: E402

P, EPS = 0.1, 1e-5
ROUNDS = 3  # median kernel times per implementation, interleaved; the best is reported


@dataclass
class Case:
    name: str
    shape: tuple[int, ...]
    small: tuple[int, ...]
    make: Callable[[tuple[int, ...], torch.dtype], list[Any]]  # CUDA tensors (+ scalars)
    fused: Callable[..., Any]  # traced by mlirfuse.jit
    torch_fn: Callable[..., Any]
    dtype: torch.dtype = torch.float32


def _randn(shape, dtype=torch.float32):
    return torch.randn(shape, device="cuda", dtype=dtype)


# -- the workloads: one mlirfuse function (ops on traced tensors) and its torch twin ----------
def layer_norm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    d = x - mean
    return d * ops.rsqrt((d * d).mean(-1, keepdim=True) + EPS) * w + b


def layer_norm_t(x, w, b):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, EPS)


def rms_norm(x, w):
    return x * ops.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def rms_norm_t(x, w):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w


def softmax(x):
    e = ops.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def softmax_t(x):
    return torch.softmax(x, -1)


def bdaln(x, r, w, b1, b2, seed):
    y = ops.where(ops.rand_like(x, seed=seed) >= P, (x + b1) * (1 / (1 - P)), 0.0) + r
    return layer_norm(y, w, b2)


def bdaln_t(x, r, w, b1, b2, seed):
    y = torch.nn.functional.dropout(x + b1, P) + r
    return layer_norm_t(y, w, b2)


def bdarms(x, r, w, b1, seed):
    y = ops.where(ops.rand_like(x, seed=seed) >= P, (x + b1) * (1 / (1 - P)), 0.0) + r
    return rms_norm(y, w)


def bdarms_t(x, r, w, b1, seed):
    return rms_norm_t(torch.nn.functional.dropout(x + b1, P) + r, w)


def gelu_backward(s0, s1, s2, s3, t4, t5, t6):
    t16 = ops.tanh(0.797885 * (t6 + 0.044715 * t6 ** 3))
    t30 = t5 * (0.5 * t6) * (1 - t16 * t16) * s3
    t36 = t30 + t30 * s2 * s1 * t6 ** 2
    return t4.sum((0, 1)), t36 + t5 * (1 + t16) * s0


def gelu_bookend(x):
    n, h = x.shape
    t = x.reshape(64, n // 64, h)
    return (t * 0.5 * (ops.erf(t * 0.7071067811865476) + 1.0)).reshape(n, h)


def transpose_bookend(x):
    a, b, c = x.shape
    return x.reshape(a, b * c).permute(1, 0).reshape(b, c, a) * 1.0


def transpose_bookend_t(x):
    a, b, c = x.shape
    return (x.reshape(a, b * c).permute(1, 0).reshape(b, c, a) * 1.0).contiguous()


def _norm_inputs(shape, dtype, bias2=True):
    h = shape[-1]
    ins = [_randn(shape, dtype), _randn(shape, dtype), _randn(h, dtype), _randn(h, dtype)]
    return ins + ([_randn(h, dtype)] if bias2 else []) + [1234]


CASES = [
    Case("relu(x+1)", (2, 32, 128, 512), (2, 3, 4, 5), lambda s, d: [_randn(s)],
         lambda x: ops.relu(x + 1.0), lambda x: torch.relu(x + 1.0)),
    Case("sum(0,1) + pow 3", (16, 512, 4096), (2, 3, 64), lambda s, d: [_randn(s), _randn(s)],
         lambda a, b: (a.sum((0, 1)), b ** 3.0), lambda a, b: (a.sum((0, 1)), b ** 3.0)),
    Case("GELU-backward + bias-grad", (16, 512, 4096), (2, 3, 64),
         lambda s, d: [0.5, 0.3, 0.2, 0.1, _randn(s), _randn(s), _randn(s)], gelu_backward, gelu_backward_t),
    Case("bias-dropout-add-LayerNorm", (64, 128, 1024), (2, 3, 64), _norm_inputs, bdaln, bdaln_t),
    Case("bias-dropout-add-RMSNorm", (64, 128, 1024), (2, 3, 64),
         lambda s, d: _norm_inputs(s, d, bias2=False), bdarms, bdarms_t),
    Case("GELU between bookend reshapes", (8192, 3072), (128, 48), lambda s, d: [_randn(s)],
         gelu_bookend, gelu_bookend_t),
    Case("transpose between reshapes", (768, 128, 64), (8, 4, 2), lambda s, d: [_randn(s)],
         transpose_bookend, transpose_bookend_t),
]
for _dtype, _tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
    for _shape in ((32768, 4096), (8192, 1024)):
        CASES += [
            Case(f"LayerNorm {_tag}", _shape, (64, 256),
                 lambda s, d: [_randn(s, d), _randn(s[-1:], d), _randn(s[-1:], d)], layer_norm, layer_norm_t, _dtype),
            Case(f"RMSNorm {_tag}", _shape, (64, 256),
                 lambda s, d: [_randn(s, d), _randn(s[-1:], d)], rms_norm, rms_norm_t, _dtype),
            Case(f"softmax {_tag}", _shape, (64, 256), lambda s, d: [_randn(s, d)], softmax, softmax_t, _dtype),
        ]
CASES += [
    Case("exp(a+b)", (1 << 24,), (1000,), lambda s, d: [_randn(s), _randn(s)],
         lambda a, b: ops.exp(a + b), lambda a, b: torch.exp(a + b)),
    Case("column sum over (0,1)", (16, 512, 4096), (2, 3, 64), lambda s, d: [_randn(s)],
         lambda x: x.sum((0, 1)), lambda x: x.sum((0, 1))),
]


# -- what real models showed (bench/models.py): the real-model issue's rows -------------------
def cross_entropy(logits, target):
    """Mean cross-entropy in float32 of bf16 logits and its gradient (softmax - one-hot) / N,
    both ways in one function (HF's loss upcasts the logits)."""
    x = ops.cast(logits, DataType.Float)
    logp = ops.log_softmax(x, -1)
    picked = ops.take_along_axis(logp, ops.unsqueeze(target, 1), 1)
    n = x.shape[0]
    loss = -(picked.sum() / n)
    onehot = ops.cast(ops.eq(iota_like(x, 1), ops.unsqueeze(target, 1)), DataType.Float)
    grad = (ops.exp(logp) - onehot) / n
    return loss, ops.cast(grad, DataType.BFloat16)


def cross_entropy_t(logits, target):
    x = logits.float()
    logp = torch.log_softmax(x, -1)
    n = x.shape[0]
    loss = -(logp.gather(1, target[:, None]).sum() / n)
    onehot = torch.nn.functional.one_hot(target, x.shape[1]).float()
    return loss, ((logp.exp() - onehot) / n).to(torch.bfloat16)


def rotary(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = ops.slice_dim(x, -1, 0, half), ops.slice_dim(x, -1, half, x.shape[-1])
    return x * cos + ops.cat([-x2, x1], -1) * sin


def rotary_t(x, cos, sin):
    x1, x2 = x.chunk(2, -1)
    return x * cos + torch.cat((-x2, x1), -1) * sin


def bias_gelu_dropout(x, b, seed):
    h = ops.gelu(x + b)
    return ops.where(ops.rand_like(h, seed=seed) >= P, h * (1 / (1 - P)), 0.0)


def bias_gelu_dropout_t(x, b, seed):
    return torch.nn.functional.dropout(torch.nn.functional.gelu(x + b), P)


def residual_layer_norm(x, r, w, b):
    """GPT-2's and BERT's LayerNorm in bfloat16: the residual sum normalized in float32."""
    y = ops.cast(x + r, DataType.Float)
    return ops.cast(layer_norm(y, ops.cast(w, DataType.Float), ops.cast(b, DataType.Float)), x.dtype)


def residual_layer_norm_t(x, r, w, b):
    return torch.nn.functional.layer_norm((x + r).float(), x.shape[-1:], w.float(), b.float(), EPS).to(x.dtype)


def keys_transposed(k):
    """BERT's keys in its float32 attention: a matmul's [B, S, H, D] output seen as
    [B, H, S, D] (a permuted argument), transposed to [B, H, D, S] and scaled."""
    return ops.permute(ops.cast(k, DataType.Float), [0, 1, 3, 2]) * 0.125


def keys_transposed_t(k):
    return k.float().transpose(-1, -2) * 0.125


def _heads(shape, dtype):
    b, s, h, d = shape
    return [_randn(shape, dtype).transpose(1, 2)]  # [B, H, S, D], not contiguous


def softmax_f32_math(x):
    """Softmax of bfloat16 scores computed in float32 (torch's upcast)."""
    return ops.cast(softmax(ops.cast(x, DataType.Float)), x.dtype)


def softmax_f32_math_t(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def _ce_inputs(shape, dtype):
    logits = _randn(shape, dtype)
    return [logits, torch.randint(0, shape[1], (shape[0],), device=logits.device)]


def _rotary_inputs(shape, dtype):
    return [_randn(shape, dtype), _randn((1, 1) + shape[2:], dtype), _randn((1, 1) + shape[2:], dtype)]


CASES += [
    Case("cross-entropy fwd+bwd", (8192, 32000), (64, 300), _ce_inputs, cross_entropy, cross_entropy_t,
         torch.bfloat16),
    Case("cross-entropy fwd+bwd", (8192, 128256), (64, 300), _ce_inputs, cross_entropy, cross_entropy_t,
         torch.bfloat16),
    Case("rotary embedding", (8, 32, 2048, 128), (2, 3, 16, 8), _rotary_inputs, rotary, rotary_t, torch.bfloat16),
    Case("silu(a) * b", (16384, 11008), (64, 96), lambda s, d: [_randn(s, d), _randn(s, d)],
         lambda a, b: ops.silu(a) * b, lambda a, b: torch.nn.functional.silu(a) * b, torch.bfloat16),
    Case("middle-axis sum", (64, 1024, 256), (2, 30, 16), lambda s, d: [_randn(s)],
         lambda x: x.sum(1), lambda x: x.sum(1)),
    Case("bias+GELU+dropout", (8192, 3072), (64, 96), lambda s, d: [_randn(s, d), _randn(s[-1:], d), 7],
         bias_gelu_dropout, bias_gelu_dropout_t, torch.bfloat16),
    Case("residual LayerNorm", (4096, 768), (64, 96), lambda s, d: _norm_inputs(s, d, bias2=False)[:4],
         residual_layer_norm, residual_layer_norm_t, torch.bfloat16),
    Case("keys transposed", (8, 512, 12, 64), (2, 24, 3, 8), _heads, keys_transposed, keys_transposed_t,
         torch.bfloat16),
    Case("softmax in float32", (49152, 512), (64, 96), lambda s, d: [_randn(s, d)], softmax_f32_math,
         softmax_f32_math_t, torch.bfloat16),
]

WARM = """
import sys, time, torch
sys.path.insert(0, {bench!r})
import suite
case = [c for c in suite.CASES if c.name == {name!r} and c.shape == {full!r}][0]
torch.manual_seed(0)
args = case.make({shape!r}, case.dtype)
fn = suite.mlirfuse.jit(case.fused)
torch.cuda.synchronize()
sys.stdin.readline()  # the parent's go: its own work (torch.compile) is done
start = time.perf_counter()
fn(*args)
torch.cuda.synchronize()
print(time.perf_counter() - start)
"""


def start_warm(case: Case, shape: tuple[int, ...], cache_dir: str) -> subprocess.Popen:
    """A fresh process that imports torch and mlirfuse and makes the row's inputs, then waits
    for `finish_warm`'s go (its start-up overlaps the parent's torch.compile; its timed first
    call overlaps nothing)."""
    script = WARM.format(bench=str(Path(__file__).resolve().parent), name=case.name, full=case.shape, shape=shape)
    return subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ, MLIRFUSE_CACHE_DIR=cache_dir),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_warm(process: subprocess.Popen) -> float:
    """Seconds of the warm process's first call (a fusion loaded from the disk cache)."""
    out, err = process.communicate("go\n")
    if process.returncode:
        raise RuntimeError(f"warm-start process failed:\n{err}")
    return float(out.strip().splitlines()[-1])


def _max_err(got: Any, want: Any) -> float:
    got = got if isinstance(got, (tuple, list)) else [got]
    want = want if isinstance(want, (tuple, list)) else [want]
    return max(float(((g.float() - w.float()).abs() / (w.float().abs() + 1)).max()) for g, w in zip(got, want))


def prepare_case(case: Case, quick: bool) -> None:
    """Compile the torch.compile twin once so that its artifacts land in Inductor's on-disk
    caches; the timed row process then loads them instead of compiling (run for all rows at
    once, in parallel, before the serial timed rows)."""
    shape = case.small if quick else case.shape
    torch.manual_seed(0)
    args = case.make(shape, case.dtype)
    torch.compile(case.torch_fn, dynamic=False)(*args)
    torch.cuda.synchronize()


def run_case(case: Case, copy_gbps: float, quick: bool) -> dict:
    first = first_fusion_s()
    shape = case.small if quick else case.shape
    phase_s: dict[str, float] = {}  # where the row's wall time goes (the suite's own cost)
    mark = time.perf_counter()
    torch.manual_seed(0)
    args = case.make(shape, case.dtype)
    cache_dir = tempfile.mkdtemp(prefix="mlirfuse-suite-")
    os.environ["MLIRFUSE_CACHE_DIR"] = cache_dir
    # A new process's view: workloads of one signature (the same fusion at another shape)
    # would otherwise reuse the executable an earlier row loaded, skipping the device load
    # and the host library link that the warm start below reads from the disk cache.
    gpu_kernel._LOADED.clear()
    fn = mlirfuse.jit(case.fused)
    dump_dir = tempfile.mkdtemp(prefix="mlirfuse-suite-dump-")  # where the cold call's time goes
    previous = mlirfuse.set_options(dump="compile_time", dump_dir=dump_dir)
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn(*args)
    torch.cuda.synchronize()
    cold = time.perf_counter() - start
    mlirfuse.restore_options(previous)
    cold_parts = [line for f in sorted(Path(dump_dir).glob("*-compile_time.txt")) for line in f.read_text().splitlines()]
    phase_s["mlirfuse_cold"] = time.perf_counter() - mark
    mark = time.perf_counter()
    warm_process = start_warm(case, shape, cache_dir)
    os.environ.pop("MLIRFUSE_CACHE_DIR")
    compiled = torch.compile(case.torch_fn, dynamic=False)
    want = compiled(*args)
    torch.cuda.synchronize()
    phase_s["torch_compile"] = time.perf_counter() - mark
    mark = time.perf_counter()
    warm = finish_warm(warm_process)
    phase_s["warm_process"] = time.perf_counter() - mark  # what remained of it
    mark = time.perf_counter()
    seeded = "dropout" in case.name  # torch's RNG stream is not mlirfuse's: no error to compare
    err = float("nan") if seeded else _max_err(out, want)
    # The like-for-like twin of torch.compile(dynamic=False): the fusion compiled for these
    # shapes (kernels over rows of a known length, constant grids), next to the default one
    # compiled for every shape of its signature.
    fixed = mlirfuse.jit(case.fused, dynamic=False)
    out_fixed = fixed(*args)
    torch.cuda.synchronize()
    err_fixed = float("nan") if seeded else _max_err(out_fixed, want)
    # Interleaved rounds, the best median of each kept: one slow round (a clock change, another
    # process) does not make a workload's ratio.
    rounds: dict[str, list[float]] = {"mlirfuse": [], "static": [], "eager": [], "compile": []}
    for _ in range(ROUNDS):
        rounds["mlirfuse"].append(kernel_us(lambda: fn(*args)))
        rounds["static"].append(kernel_us(lambda: fixed(*args)))
        rounds["eager"].append(kernel_us(lambda: case.torch_fn(*args)))
        rounds["compile"].append(kernel_us(lambda: compiled(*args)))
    t_m, t_s, t_e, t_c = (min(rounds[k]) for k in ("mlirfuse", "static", "eager", "compile"))
    host = host_us_per_call(lambda: fn(*args), n=50)
    phase_s["timing"] = time.perf_counter() - mark
    nbytes = ideal_bytes(args, out)
    gbps = nbytes / (t_m * 1e-6) / 1e9
    return {"name": case.name, "shape": "x".join(map(str, shape)), "dtype": str(case.dtype).replace("torch.", ""),
            "mlirfuse_us": t_m, "eager_us": t_e, "compile_us": t_c, "gbps": gbps,
            "pct_copy": 100 * gbps / copy_gbps, "speedup_vs_compile": t_c / t_m, "speedup_vs_eager": t_e / t_m,
            "static_us": t_s, "static_speedup_vs_compile": t_c / t_s, "static_max_rel_err_vs_compile": err_fixed,
            "host_us": host, "host_minus_kernel_us": host - t_m, "cold_compile_s": cold, "warm_start_s": warm,
            "cold_parts": cold_parts, "max_rel_err_vs_compile": err, "rounds_us": rounds,
            "phase_s": phase_s, "first_fusion_s": first}


def first_fusion_s() -> float:
    """Seconds of the process's first GPU fusion (a throwaway one): the one-time start of
    mlirfuse's compiler and runtime (imports, CUDA runtime library), which the rows' cold
    compiles then do not include."""
    cache_dir = tempfile.mkdtemp(prefix="mlirfuse-suite-")
    os.environ["MLIRFUSE_CACHE_DIR"] = cache_dir
    start = time.perf_counter()
    mlirfuse.jit(lambda x: ops.abs(x) * 2.0)(torch.ones(4, device="cuda"))
    torch.cuda.synchronize()
    os.environ.pop("MLIRFUSE_CACHE_DIR")
    return time.perf_counter() - start


def prewarm(indices: list[int], quick: bool, jobs: int = 8) -> None:
    """Compile every row's torch.compile twin in parallel processes (Inductor's FX-graph and
    Triton caches are on disk): torch.compile's own compile time is not what the suite
    measures, and serially it is most of a row's wall time."""
    start = time.perf_counter()
    pending = list(indices)
    running: list[subprocess.Popen] = []
    while pending or running:
        while pending and len(running) < jobs:
            argv = [sys.executable, __file__, "--row", str(pending.pop(0)), "--prepare"]
            running.append(subprocess.Popen(argv + (["--quick"] if quick else []),
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        running[0].wait()  # a failure here shows again, with its message, in the timed row
        running.pop(0)
    print(f"(torch.compile twins prewarmed in {time.perf_counter() - start:.0f} s)\n", flush=True)


def run_isolated(index: int, copy_gbps: float, quick: bool) -> dict:
    """The row in its own process: compile caches, torch.compile state and any crash stay there."""
    argv = [sys.executable, __file__, "--row", str(index), "--copy-gbps", str(copy_gbps)]
    out = subprocess.run(argv + (["--quick"] if quick else []), capture_output=True, text=True)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        reason = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        return {"name": CASES[index].name, "shape": "x".join(map(str, CASES[index].shape)), "error": reason}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    parser.add_argument("--only", help="run the workloads whose 'name shape' (e.g. 'LayerNorm f32 32768x4096') "
                        "contains one of these comma-separated strings")
    parser.add_argument("--rows", help="run the workloads at these positions of the list (a Python slice, e.g. 15:)")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="print one table of these runs' JSON files (and write them as one to --json)")
    parser.add_argument("--row", type=int, help=argparse.SUPPRESS)  # one case, its row as JSON on stdout
    parser.add_argument("--copy-gbps", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)  # with --row: prewarm only
    parser.add_argument("--no-prewarm", action="store_true",
                        help="do not compile the torch.compile twins in parallel before the timed rows")
    opts = parser.parse_args()
    if opts.row is not None and opts.prepare:
        prepare_case(CASES[opts.row], opts.quick)
        return 0
    if opts.row is not None:
        print(json.dumps(run_case(CASES[opts.row], opts.copy_gbps, opts.quick)))
        return 0
    if opts.merge:
        return merge(opts.merge, opts.json)
    gpu = torch.cuda.get_device_name()
    driver = driver_version()
    copy_gbps = copy_bandwidth_gbps()
    print(f"GPU: {gpu}; driver {driver}; torch {torch.__version__}; copy bandwidth {copy_gbps:.0f} GB/s\n")
    rows: list[dict] = []

    def write_json(rows: list[dict]) -> None:  # after every row: an interrupted run keeps what it measured
        if opts.json:
            Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
            Path(opts.json).write_text(json.dumps({"gpu": gpu, "driver": driver, "torch": torch.__version__,
                                                   "date": time.strftime("%Y-%m-%d"), "copy_gbps": copy_gbps,
                                                   "complete": len(rows) == n_cases, "rows": rows}, indent=2))

    chosen = select(opts.rows, opts.only)
    n_cases = len(chosen)
    if not opts.no_prewarm:
        prewarm(chosen, opts.quick)
    print(HEADER)
    for index in chosen:
        r = run_isolated(index, copy_gbps, opts.quick)
        rows.append(r)
        write_json(rows)
        print(row_line(r), flush=True)
    print(summary(rows))
    write_json(rows)
    return 0


HEADER = ("| workload | shape | dtype | mlirfuse us | eager us | compile us | GB/s | % copy BW | vs compile "
          "| vs eager | static us | static vs compile | host us/call | cold s | warm s |\n" + "|---" * 15 + "|")


def row_line(r: dict) -> str:
    if "error" in r:
        return f"| {r['name']} | {r['shape']} | | failed: {r['error'][:120]} |"
    return (f"| {r['name']} | {r['shape']} | {r['dtype']} | {r['mlirfuse_us']:.1f} | {r['eager_us']:.1f} | "
            f"{r['compile_us']:.1f} | {r['gbps']:.0f} | {r['pct_copy']:.0f}% | {r['speedup_vs_compile']:.2f}x | "
            f"{r['speedup_vs_eager']:.2f}x | {_static(r)} | {r['host_us']:.1f} | {r['cold_compile_s']:.2f} | "
            f"{r['warm_start_s']:.3f} |")


def _static(r: dict) -> str:
    """The static twin's columns (blank in runs from before it was measured)."""
    if "static_us" not in r:
        return " | "
    return f"{r['static_us']:.1f} | {r['static_speedup_vs_compile']:.2f}x"


def summary(rows: list[dict]) -> str:
    ok = [r for r in rows if "error" not in r]
    if not ok:
        return ""
    line = (f"\ngeometric mean speedup over torch.compile: {_geo(ok, 'speedup_vs_compile'):.2f}x over {len(ok)} "
            f"workloads ({len(rows) - len(ok)} failed); min {min(r['speedup_vs_compile'] for r in ok):.2f}x")
    fixed = [r for r in ok if "static_us" in r]
    if fixed:
        line += (f"; compiled for the shapes (static): {_geo(fixed, 'static_speedup_vs_compile'):.2f}x over "
                 f"{len(fixed)}, min {min(r['static_speedup_vs_compile'] for r in fixed):.2f}x")
    return line


def _geo(rows: list[dict], key: str) -> float:
    return math.exp(sum(math.log(r[key]) for r in rows) / len(rows))


def select(rows: str | None, only: str | None) -> list[int]:
    """The positions of the workloads to run: those of the slice `rows` (all where None) whose
    'name shape' contains one of `only`'s comma-separated strings (any where None)."""
    positions = range(len(CASES))[_slice(rows)] if rows else range(len(CASES))

    def wanted(case: Case) -> bool:
        label = f"{case.name} {'x'.join(map(str, case.shape))}"
        return not only or any(part.strip() in label for part in only.split(","))
    return [i for i in positions if wanted(CASES[i])]


def _slice(text: str) -> slice:
    """A Python slice from its text, `15:` or `0:15`."""
    parts = [int(p) if p.strip() else None for p in text.split(":")]
    if len(parts) == 1:
        return slice(parts[0], parts[0] + 1)
    return slice(*parts)


def merge(paths: list[str], out: str | None) -> int:
    """One table of several runs' JSON files (parts of one suite, in the workload list's
    order); the first file's header fields, each part's copy bandwidth kept in `parts`."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    order = {(c.name, "x".join(map(str, c.shape))): k for k, c in enumerate(CASES)}
    rows = sorted((r for run in runs for r in run["rows"]),
                  key=lambda r: order.get((r["name"], r["shape"]), len(order)))
    first = runs[0]
    print(f"GPU: {first['gpu']}; driver {first['driver']}; torch {first['torch']}; copy bandwidth "
          + ", ".join(f"{run['copy_gbps']:.0f}" for run in runs) + f" GB/s ({len(runs)} runs)\n")
    print(HEADER)
    for r in rows:
        print(row_line(r))
    print(summary(rows))
    if out:
        merged = {k: first[k] for k in ("gpu", "driver", "torch", "date", "copy_gbps")}
        parts = [{"file": p, "copy_gbps": run["copy_gbps"], "rows": len(run["rows"])} for p, run in zip(paths, runs)]
        merged.update(complete={(r["name"], r["shape"]) for r in rows} == set(order), rows=rows, parts=parts)
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(merged, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
