"""The main job: run the reference workloads through mlirfuse, check them, time them.

    python examples/reference_workloads.py [--small] [--backend cpu|gpu]

Each workload (mlirfuse/workloads.py) is compiled once, checked against numpy, and timed
next to numpy op by op. GPU when one is present, CPU otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlirfuse  # noqa: E402
from mlirfuse.workloads import WORKLOADS, Workload  # noqa: E402


def default_backend() -> str:
    from mlirfuse.compiler import BACKENDS

    if "gpu" in BACKENDS:
        from mlirfuse.lowering.gpu import runtime as gpu_runtime

        if gpu_runtime.device_count() > 0:
            return "gpu"
    return "cpu"


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def build(w: Workload, backend: str):
    if w.definition is not None:
        fd = w.definition()
        return lambda *args: fd.execute(list(args), backend=backend)
    jitted = mlirfuse.jit(w.jit_fn, backend=backend)
    return jitted


def to_device(inputs: list, backend: str) -> tuple[list, object]:
    """On the GPU: torch CUDA tensors (zero-copy in and out) and a synchronizing timer hook."""
    if backend != "gpu":
        return inputs, lambda: None
    import torch

    moved = [torch.from_numpy(a).cuda() if isinstance(a, np.ndarray) else a for a in inputs]
    return moved, torch.cuda.synchronize


def to_host(value):
    return value.cpu().numpy() if hasattr(value, "cpu") else value


def run(w: Workload, small: bool, backend: str, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    shape = w.small if small else w.shape
    inputs = w.make_inputs(shape, rng)
    dev_inputs, sync = to_device(inputs, backend)
    fn = build(w, backend)
    start = time.perf_counter()
    got = fn(*dev_inputs)
    sync()
    first_call = time.perf_counter() - start
    np_args = w.numpy_args(inputs)
    want = w.numpy_fn(*np_args)
    got_list = [to_host(g) for g in (got if isinstance(got, (list, tuple)) else [got])]
    want_list = list(want) if isinstance(want, (list, tuple)) else [want]
    err = max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(e, np.float64)) /
                        (1.0 + np.abs(np.asarray(e, np.float64)))))
              for g, e in zip(got_list, want_list))
    ok = err < 1e-3
    t_mlirfuse = median_seconds(lambda: (fn(*dev_inputs), sync()), repeats)
    t_numpy = median_seconds(lambda: w.numpy_fn(*np_args), max(1, repeats // 2))
    return {"name": w.name, "shape": "x".join(map(str, shape)), "ok": ok, "err": err,
            "first_call_s": first_call, "mlirfuse_ms": t_mlirfuse * 1e3, "numpy_ms": t_numpy * 1e3}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="small shapes (seconds, for tests)")
    parser.add_argument("--backend", choices=["cpu", "gpu"], default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    backend = args.backend or default_backend()
    print(f"mlirfuse {mlirfuse.__version__}, backend: {backend}")
    print("| workload | shape | check | max rel err | first call (compile) s | mlirfuse ms | numpy ms | speedup |")
    print("|---|---|---|---|---|---|---|---|")
    failed = 0
    for w in WORKLOADS:
        r = run(w, args.small, backend, args.repeats)
        failed += not r["ok"]
        print(f"| {r['name']} | {r['shape']} | {'ok' if r['ok'] else 'MISMATCH'} | {r['err']:.1e} | "
              f"{r['first_call_s']:.3f} | {r['mlirfuse_ms']:.3f} | {r['numpy_ms']:.3f} | "
              f"{r['numpy_ms'] / r['mlirfuse_ms']:.2f}x |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
