"""Distributed training: GPT-2 and Llama configs (bench/models.py's widths) for N steps on every
visible GPU, with eager, Inductor and mlirfuse, under DDP or FSDP2.

    torchrun --nproc-per-node=<GPUs> bench/distributed.py [--models gpt2,llama] [--wrap ddp,fsdp2]
                [--modes f32,bf16_autocast] [--steps 20] [--batch 8] [--seq 512] [--json out.json]

Each rank trains on its own slice of the same global batches (seeded). The three
implementations train side by side from the same weights, a step of each in turn (hosts
drift), so their loss curves must agree (bf16/f32 tolerance). Rank 0 prints, per model x
wrapping x mode, the median ms per step of each implementation after the first (compile)
steps, the first step's seconds, the largest loss difference to eager and the mlirfuse loss
curve. Modes: float32 training, and training under bf16 autocast. Dynamo's caches are reset
before each model x wrapping x mode (the process compiles the same transformers code many
times: its recompile limit would otherwise leave the later runs' frames to eager). NCCL on
GPUs; gloo on the CPU, for a smoke run without GPUs.
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


IMPLEMENTATIONS = (("eager", None), ("inductor", "inductor"), ("mlirfuse", "mlirfuse"))


def train(family: str, how: str, mode: str, steps: int, batch: int, seq: int) -> dict[str, dict]:
    """The three implementations trained side by side from the same weights on the same
    batches, a step of each in turn (the order rotating each round, as hosts drift): per
    implementation the global loss of each step, each step's ms, and the first step's
    seconds (its compile)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    torch._dynamo.reset()
    runs = {}
    for name, backend in IMPLEMENTATIONS:
        torch.manual_seed(0)
        model = build(family, widths="real" if device.type == "cuda" else "tiny").to(device)
        runs[name] = (wrap(model, how, backend), torch.optim.AdamW(model.parameters(), lr=1e-4))
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    out: dict[str, dict] = {name: {"losses": [], "ms": []} for name in runs}
    names = list(runs)
    for step in range(steps):
        ids = torch.randint(0, vocab, (batch * world, seq), generator=g)[rank * batch:(rank + 1) * batch].to(device)
        for name in names[step % 3:] + names[:step % 3]:
            run, opt = runs[name]
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=mode == "bf16_autocast"):
                loss = run(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            total = loss.detach().clone()
            dist.all_reduce(total)  # the global batch's loss: the mean of the ranks'
            if device.type == "cuda":
                torch.cuda.synchronize()
            out[name]["ms"].append((time.perf_counter() - start) * 1e3)
            out[name]["losses"].append(float(total) / world)
    return out


def report(family: str, how: str, mode: str, results: dict[str, dict]) -> dict:
    """Prints the table row of one model x wrapping x mode; returns its JSON row."""
    ms = {n: statistics.median(r["ms"][WARMUP:] or r["ms"]) for n, r in results.items()}
    spread = {n: max(r["ms"][WARMUP:] or r["ms"]) - min(r["ms"][WARMUP:] or r["ms"]) for n, r in results.items()}
    eager = results["eager"]["losses"]
    diff = {n: max(abs(a - b) for a, b in zip(results[n]["losses"], eager)) for n in ("inductor", "mlirfuse")}
    first = {n: r["ms"][0] / 1e3 for n, r in results.items()}
    curve = " ".join(f"{v:.3f}" for v in results["mlirfuse"]["losses"])
    print(f"| {family}, {how}, {mode} | {ms['eager']:.2f} / {ms['inductor']:.2f} / {ms['mlirfuse']:.2f} "
          f"({spread['mlirfuse']:.2f}) | {ms['inductor'] / ms['mlirfuse']:.2f}x "
          f"| {first['inductor']:.1f} / {first['mlirfuse']:.1f} "
          f"| {diff['inductor']:.1e} / {diff['mlirfuse']:.1e} | {curve} |", flush=True)
    return {"model": family, "wrap": how, "mode": mode, "ms": ms, "spread_ms": spread, "first_step_s": first,
            "loss_diff": diff, "losses": {n: r["losses"] for n, r in results.items()},
            "step_ms": {n: r["ms"] for n, r in results.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--wrap", default="ddp,fsdp2")
    parser.add_argument("--modes", default="f32,bf16_autocast")
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
        print("| model, wrap, mode | ms per step e / i / m (spread m) | m vs i | first step s i / m "
              "| max loss diff i / m to eager | loss curve (mlirfuse) |\n" + "|---" * 6 + "|")
    for family in opts.models.split(","):
        for how in opts.wrap.split(","):
            for mode in opts.modes.split(","):
                results = train(family, how, mode, opts.steps, opts.batch, opts.seq)
                if rank == 0:
                    rows.append(report(family, how, mode, results))
                    if opts.json:  # after every row: a run cut short keeps what it measured
                        Path(opts.json).write_text(json.dumps({
                            "gpu": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
                            "date": time.strftime("%Y-%m-%d"), "world": world, "rows": rows}, indent=2))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
