"""What torch.compile(backend="mlirfuse") fuses in real models: per model x mode, the aten ops
mlirfuse runs and those left to torch (by op, with the partitioner's reason), the fused
regions, and (on a GPU) the kernels one training step launches.

    python bench/model_partition.py --device cuda --widths real --batch 8 --seq 512

HuggingFace models from configs (test/py/hf_models.py), nothing downloaded. Markdown to stdout.
"""

from __future__ import annotations

import argparse
import collections
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "py"))

MODES = ("f32", "bf16_autocast", "bf16")


def _partitions(family: str, mode: str, device: str, widths: str, batch: int, seq: int) -> dict:
    import torch
    import torch._dynamo as dynamo
    from hf_models import build, train_step

    from mlirfuse.torch_backend import capture_partitions
    from mlirfuse.torch_backend.partition import _target_name

    dynamo.reset()
    with capture_partitions() as captured:
        torch.manual_seed(0)
        model = build(family, widths).to(device)
        ids = torch.randint(0, model.config.vocab_size, (batch, seq), device=device)
        train = mode != "bf16"
        if not train:
            model = model.to(torch.bfloat16).eval()
        compiled = torch.compile(model, backend="mlirfuse")
        autocast = torch.bfloat16 if mode == "bf16_autocast" else None
        with torch.set_grad_enabled(train):
            train_step(model, compiled, ids, autocast, backward=train)
            kernels = None
            if device == "cuda":
                from torch.profiler import ProfilerActivity, profile
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    train_step(model, compiled, ids, autocast, backward=train)
                    torch.cuda.synchronize()
                kernels = sum(e.count for e in prof.key_averages() if e.device_type.name == "CUDA"
                              and not e.key.startswith("Memcpy") and not e.key.startswith("Memset"))
    fused, left = 0, collections.Counter()  # (op, reason) -> count
    for _, partition in captured:
        fused += sum(len(g.nodes) for g in partition.groups)
        for node, reason in partition.left.items():
            left[(_target_name(node), reason)] += 1
    return {"fused": fused, "left": left, "regions": sum(len(p.groups) for _, p in captured), "kernels": kernels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--widths", default="tiny", choices=["tiny", "real"])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--families", nargs="+", default=["gpt2", "llama", "bert"])
    parser.add_argument("--modes", nargs="+", default=list(MODES))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    rows = []
    print("| model | mode | aten ops fused | left to torch | regions | kernels per step |")
    print("|---|---|---|---|---|---|")
    for family in args.families:
        for mode in args.modes:
            r = _partitions(family, mode, args.device, args.widths, args.batch, args.seq)
            rows.append((family, mode, r))
            print(f"| {family} | {mode} | {r['fused']} | {sum(r['left'].values())} | {r['regions']} | "
                  f"{r['kernels'] if r['kernels'] is not None else '-'} |", flush=True)
    for family, mode, r in rows:
        print(f"\n{family} {mode}, left to torch: " + ", ".join(
            f"{name} x{n} ({reason})" for (name, reason), n in r["left"].most_common()))


if __name__ == "__main__":
    main()
