"""Distributed training: GPT-2 and Llama configs (bench/models.py's widths) for N steps on every
visible GPU, with eager, Inductor and mlirfuse, under DDP or FSDP2.

    torchrun --nproc-per-node=<GPUs> bench/distributed.py [--models gpt2,llama] [--wrap ddp,fsdp2]
                                                          [--steps 20] [--batch 8] [--seq 512] [--json out.json]

Each rank trains on its own slice of the same global batches (seeded), so the loss curves of
the three implementations must agree (bf16/f32 tolerance); rank 0 prints, per model x wrapping
x implementation, the median step time after the first (compile) steps and the loss curve, and
the loss difference to eager. NCCL on GPUs (gloo on the CPU, for a smoke run without GPUs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "test" / "py"))

from hf_models import build  # noqa: E402

WARMUP = 3  # steps not timed (the compile, the caches)


def wrap(model: torch.nn.Module, how: str, backend: str | None) -> torch.nn.Module:
    """The model as trained: DDP or FSDP2 around it, compiled with `backend` (None: eager)."""
    if how == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        device = [torch.cuda.current_device()] if torch.cuda.is_available() else None
        model = DDP(model, device_ids=device)
    else:
        from torch.distributed.fsdp import fully_shard

        blocks = model.transformer.h if hasattr(model, "transformer") else model.model.layers
        for block in blocks:
            fully_shard(block)
        fully_shard(model)
    return torch.compile(model, backend=backend) if backend else model


def train(family: str, how: str, backend: str | None, steps: int, batch: int,
          seq: int) -> tuple[list[float], list[float]]:
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    model = build(family, widths="real" if device.type == "cuda" else "tiny").to(device)
    run = wrap(model, how, backend)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    losses, times = [], []
    for _ in range(steps):
        ids = torch.randint(0, vocab, (batch * world, seq), generator=g)[rank * batch:(rank + 1) * batch].to(device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = run(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)  # the global batch's loss: the mean of the ranks'
        losses.append(float(total) / world)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return losses, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--wrap", default="ddp,fsdp2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--json")
    opts = parser.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    if rank == 0:
        where = f"{world} x {torch.cuda.get_device_name()}" if cuda else f"{world} CPU processes"
        print(f"{where}; torch {torch.__version__}; {opts.steps} steps, "
              f"batch {opts.batch} per rank x seq {opts.seq}\n")
        print("| model, wrap | ms per step e / i / m | m vs i | max loss diff i / m to eager "
              "| loss curve (mlirfuse) |\n" + "|---" * 5 + "|")
    for family in opts.models.split(","):
        for how in opts.wrap.split(","):
            results = {name: train(family, how, backend, opts.steps, opts.batch, opts.seq)
                       for name, backend in (("eager", None), ("inductor", "inductor"), ("mlirfuse", "mlirfuse"))}
            if rank != 0:
                continue
            ms = {n: statistics.median(t[WARMUP:] or t) for n, (_, t) in results.items()}
            eager = results["eager"][0]
            diff = {n: max(abs(a - b) for a, b in zip(results[n][0], eager)) for n in ("inductor", "mlirfuse")}
            curve = " ".join(f"{v:.3f}" for v in results["mlirfuse"][0])
            print(f"| {family}, {how} | {ms['eager']:.2f} / {ms['inductor']:.2f} / {ms['mlirfuse']:.2f} "
                  f"| {ms['inductor'] / ms['mlirfuse']:.2f}x | {diff['inductor']:.1e} / {diff['mlirfuse']:.1e} "
                  f"| {curve} |",
                  flush=True)
            rows.append({"model": family, "wrap": how, "world": world, "ms": ms, "loss_diff": diff,
                         "losses": {n: r[0] for n, r in results.items()},
                         "step_ms": {n: r[1] for n, r in results.items()}})
    if rank == 0 and opts.json:
        Path(opts.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name() if cuda else "cpu",
                                               "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
                                               "world": world, "rows": rows}, indent=2))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
