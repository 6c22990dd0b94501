"""Normalization kernels as the models meet them: GPU kernel us per call through torch.compile,
mlirfuse against Inductor.

    python bench/normalization_micro.py [--impls mlirfuse,inductor] [--reps 50] [--json out.json]
                                        [--no-column-sums]

LayerNorm of a residual sum and of a GELU (GPT-2's and BERT's rows of 768), RMSNorm (rows of
1024), softmax in float32 of bfloat16 rows (attention's 512, 4096), LayerNorm over rows of 4096,
and LayerNorm (rows of 768 and 4096) and RMSNorm (1024) forward + backward, in bfloat16 and
float32. Each case is compiled on its own
(dynamo reset) and timed over `--reps` calls under torch.profiler: the summed device time of
its kernels per call, and kernels per call. The torch backend compiles rows of dynamic length,
as it does for models. To compare two trees, run the script under each (PYTHONPATH) on the
same machine, in turns. `--no-column-sums`: column reductions over a normalization's rows
(LayerNorm's weight and bias gradients) stay kernels of their own, as before session 84 (run it
in a process of its own with MLIRFUSE_CACHE_DIR=off: compiled kernels are shared).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def ln_res(x, r, w, b):
    return F.layer_norm((x + r).float(), (x.shape[-1],), w.float(), b.float(), 1e-12).to(x.dtype)


def gelu_ln(x, w, b):
    return F.layer_norm(F.gelu(x.float()), (x.shape[-1],), w.float(), b.float(), 1e-12).to(x.dtype)


def rms(x, w):
    y = x.float()
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)
    return w * y.to(x.dtype)


def softmax(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def cases() -> list[tuple[str, Callable, list[torch.Tensor], torch.Tensor | None]]:
    """(label, function, inputs, the output's gradient for a forward + backward case or None)."""
    out = []
    for dt, tag in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
        def r(*s, grad=False, dt=dt):
            return torch.randn(*s, dtype=dt, device="cuda", requires_grad=grad)
        out += [(f"LayerNorm(x + r) {tag} 4096x768", ln_res, [r(4096, 768), r(4096, 768), r(768), r(768)], None),
                (f"LayerNorm(gelu(x)) {tag} 4096x768", gelu_ln, [r(4096, 768), r(768), r(768)], None),
                (f"LayerNorm(x + r) {tag} 16384x768", ln_res, [r(16384, 768), r(16384, 768), r(768), r(768)], None),
                (f"RMSNorm {tag} 4096x1024", rms, [r(4096, 1024), r(1024)], None),
                (f"LayerNorm fwd+bwd {tag} 8192x768", layer_norm, [r(8192, 768, grad=True), r(768, grad=True),
                                                                   r(768, grad=True)], r(8192, 768)),
                (f"LayerNorm fwd+bwd {tag} 4096x4096", layer_norm, [r(4096, 4096, grad=True), r(4096, grad=True),
                                                                    r(4096, grad=True)], r(4096, 4096)),
                (f"RMSNorm fwd+bwd {tag} 4096x1024", rms, [r(4096, 1024, grad=True), r(1024, grad=True)],
                 r(4096, 1024))]
    b = torch.bfloat16
    out += [("softmax in f32 bf16 49152x512", softmax, [torch.randn(49152, 512, dtype=b, device="cuda")], None),
            ("softmax in f32 bf16 1024x4096", softmax, [torch.randn(1024, 4096, dtype=b, device="cuda")], None),
            ("LayerNorm(x + r) bf16 8192x4096", ln_res, [torch.randn(8192, 4096, dtype=b, device="cuda"),
                                                         torch.randn(8192, 4096, dtype=b, device="cuda"),
                                                         torch.randn(4096, dtype=b, device="cuda"),
                                                         torch.randn(4096, dtype=b, device="cuda")], None)]
    return out


def kernel_us(fn: Callable[[], Any], reps: int) -> tuple[float, int]:
    """(device us of the kernels per call, kernels per call): memsets not counted."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    kernels = [e.device_time_total for e in prof.events()
               if e.device_type.name == "CUDA" and not e.name.startswith("Memset")]
    return sum(kernels) / reps, len(kernels) // reps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impls", default="mlirfuse,inductor")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--only", help="cases whose label holds this text")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--no-column-sums", action="store_true", help="column reductions apart from normalizations")
    opts = parser.parse_args()
    if opts.no_column_sums:
        from mlirfuse.lowering.gpu import schedule
        schedule._column_sums = lambda *args: {}
    if not torch.cuda.is_available():
        print("no GPU: nothing to time", file=sys.stderr)
        return 1
    import mlirfuse.torch_backend as mb

    impls = opts.impls.split(",")
    rows = []
    for label, fn, args, grad in cases():
        if opts.only and opts.only not in label:
            continue
        row: dict[str, Any] = {"case": label}
        for impl in impls:
            torch._dynamo.reset()
            f = torch.compile(fn, backend=mb.mlirfuse_backend if impl == "mlirfuse" else impl)
            call = (lambda: f(*args)) if grad is None else (lambda: torch.autograd.grad(f(*args), args, grad))
            row[impl], row[f"{impl} kernels"] = kernel_us(call, opts.reps)
        rows.append(row)
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; kernel us per call\n")
    print("| case | " + " | ".join(impls) + " |")
    print("|---" * (len(impls) + 1) + "|")
    for row in rows:
        print(f"| {row['case']} | " + " | ".join(f"{row[i]:.2f} ({row[i + ' kernels']})" for i in impls) + " |")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
