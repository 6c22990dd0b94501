"""The suite's normalization rows under one setting of the normalization heuristic, or
torch.compile's: kernel us per row (`gpu_bench.kernel_us`, best of 3), one JSON line each.

    python bench/normalization_sweep.py ref                 # torch.compile(dynamic=False)
    python bench/normalization_sweep.py dyn                 # mlirfuse.jit as the suite runs it
    python bench/normalization_sweep.py static [recip]      # jit(dynamic=False)
    python bench/normalization_sweep.py last                # every last size static (the torch backend)
    python bench/normalization_sweep.py SLOTS MIN_BLOCK [static|last]  # PERSISTENT_SLOTS and the blocks'
                                                            # least threads (a signature as above; default dyn)
    python bench/normalization_sweep.py dyn|static|last noshort  # without the short rows' tiers (SHORT_ROW 0)
    python bench/normalization_sweep.py MODE stream=normalization,...  # heuristics.STREAMING_LOADS
    python bench/normalization_sweep.py MODE regs=48        # heuristics.MIN_REGISTERS (the kernels' cap)
    python bench/normalization_sweep.py MODE nocap          # no register cap at all (ptxas's own choice;
                                                            # a block over its registers fails to launch)

`recip`: float32 quotients by a row-invariant divisor as a reciprocal and a Newton step
(linalg-reciprocal-divisors takes only 16-bit results). Run each setting in a process of its
own with MLIRFUSE_CACHE_DIR=off (the disk cache's key does not hold the heuristic's constants),
in turns; session 83's table: bench/results/h200-2026-11-30-s83-normalization-sweep.md.
"""

import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import suite  # noqa: E402
from gpu_bench import kernel_us  # noqa: E402

from mlirfuse.frontend.jit import JitFunction  # noqa: E402
from mlirfuse.lowering.gpu import heuristics  # noqa: E402
from mlirfuse.passes import linalg_reciprocal_divisors  # noqa: E402

ROWS = [("LayerNorm f32", (8192, 1024)), ("RMSNorm f32", (8192, 1024)), ("softmax f32", (8192, 1024)),
        ("LayerNorm bf16", (8192, 1024)), ("RMSNorm bf16", (8192, 1024)), ("softmax bf16", (8192, 1024)),
        ("LayerNorm f32", (32768, 4096)), ("RMSNorm bf16", (32768, 4096)), ("residual LayerNorm", (4096, 768)),
        ("softmax in float32", (49152, 512)), ("bias-dropout-add-LayerNorm", (64, 128, 1024))]


def main(argv: list[str]) -> None:
    mode = argv[0]
    streams = [a.split("=", 1)[1] for a in argv if a.startswith("stream=")]
    if streams:
        heuristics.STREAMING_LOADS = frozenset(streams[0].split(","))
    regs = [a.split("=", 1)[1] for a in argv if a.startswith("regs=")]
    if regs:
        heuristics.MIN_REGISTERS = int(regs[0])
    if "nocap" in argv:
        from mlirfuse.lowering.gpu import normalization
        normalization.set_kernel_attrs = lambda op, attrs: None
    if "noshort" in argv:
        heuristics.SHORT_ROW = 0
    if "recip" in argv:
        linalg_reciprocal_divisors._rounded_to_16_bits = lambda value: True
    if mode.isdigit():
        slots, min_block = int(argv[0]), int(argv[1])
        heuristics.PERSISTENT_SLOTS = slots
        chosen = heuristics.normalization_heuristic
        heuristics.normalization_heuristic = lambda *a, **k: dataclasses.replace(chosen(*a, **k), min_block=min_block)
        mode = next((a for a in argv[2:] if a in ("static", "last")), "dyn")
    for name, shape in ROWS:
        case = next(c for c in suite.CASES if c.name == name and tuple(c.shape) == shape)
        torch.manual_seed(0)
        args = case.make(case.shape, case.dtype)
        start = time.perf_counter()
        if mode == "ref":
            fn = torch.compile(case.torch_fn, dynamic=False)
        elif mode == "last":
            fn = JitFunction(case.fused, static_last=range(len(args)))
        else:
            fn = suite.mlirfuse.jit(case.fused, dynamic=mode != "static")
        fn(*args)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - start
        us = min(kernel_us(lambda: fn(*args)) for _ in range(3))
        print(json.dumps({"mode": argv, "name": name, "shape": shape, "us": us, "compile_s": compile_s}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
