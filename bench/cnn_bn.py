"""A BatchNorm CNN's training step on the GPU: conv3x3-BN-ReLU x 3 and a linear head, float32,
batch 64 of 3x64x64 (TF32 convolutions), eager vs Inductor vs mlirfuse in interleaved rounds.

    python bench/cnn_bn.py [--json bench/results/<gpu>-<date>-cnn-bn.json]

Prints ms per step (median of 5 rounds of 10 steps), GPU kernel ms and kernels per step
(torch.profiler) and the first step's loss difference to eager.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import kernels_per_step  # noqa: E402

IMPLEMENTATIONS = ("eager", "inductor", "mlirfuse")


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        chans = [3, 32, 64, 64]
        self.body = torch.nn.Sequential(*[m for i in range(3) for m in (
            torch.nn.Conv2d(chans[i], chans[i + 1], 3, padding=1), torch.nn.BatchNorm2d(chans[i + 1]),
            torch.nn.ReLU())])
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).mean((2, 3)))


def make_step(model: torch.nn.Module, run, x: torch.Tensor, y: torch.Tensor):
    def step() -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(run(x), y)
        loss.backward()
        return loss.detach()
    return step


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    opts = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    base = Net().cuda()
    x = torch.randn(64, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    steps, losses = {}, {}
    for name in IMPLEMENTATIONS:
        model = copy.deepcopy(base)
        steps[name] = make_step(model, model if name == "eager" else torch.compile(model, backend=name), x, y)
        losses[name] = steps[name]()
        steps[name]()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(5):
        for name, step in steps.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(10):
                step()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - start) * 100)
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}\n")
    print("| impl | ms/step | GPU kernel ms | kernels | loss diff to eager |\n|---|---|---|---|---|")
    rows = []
    for name, step in steps.items():
        gpu_ms, kernels = kernels_per_step(step)
        rows.append({"impl": name, "ms": statistics.median(times[name]), "rounds_ms": times[name],
                     "gpu_kernel_ms": gpu_ms, "kernels": kernels,
                     "loss_difference": abs(losses[name] - losses["eager"]).item()})
        r = rows[-1]
        print(f"| {name} | {r['ms']:.2f} | {gpu_ms:.2f} | {kernels} | {r['loss_difference']:.2e} |")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
