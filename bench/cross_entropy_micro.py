"""Cross-entropy over bfloat16 logits sliced from a padded product, as GPT-2's, BERT's and
Llama's language-model losses reach mlirfuse under autocast: the GPU time of the forward's
kernels and of a whole step's (forward + backward), per vocabulary.

    python bench/cross_entropy_micro.py [--json out.json]

[8, 512, pitch] bfloat16 logits (pitch: V rounded up to 8), sliced to V, cast to float32,
labels shifted as a causal LM's; through torch.compile(backend="mlirfuse"). GPU us per call:
every CUDA kernel and memcpy of 5 calls under torch.profiler, median of 3 such profiles. A
heuristic's constants change in another process (MLIRFUSE_CACHE_DIR=off: the disk cache's
key does not hold them). Session 81's figures (heuristics.LOOP_SLOTS) are this code's, run
before the table and --json were added.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

F = torch.nn.functional
VOCABULARIES = (50257, 30522, 32000)  # GPT-2, BERT, Llama


def gpu_us(fn, calls: int = 5) -> float:
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return sum(e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA) / calls


def measure(vocabulary: int) -> dict:
    torch._dynamo.reset()  # else the second vocabulary's recompile makes the vocabulary dynamic
    pitch = (vocabulary + 7) // 8 * 8
    torch.manual_seed(0)
    wide = torch.randn(8, 512, pitch, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocabulary, (8, 512), device="cuda")

    def loss(w, y):
        x = w[..., :vocabulary].float()
        y = F.pad(y, (0, 1), value=-100)[..., 1:]
        return F.cross_entropy(x.reshape(-1, vocabulary), y.reshape(-1))
    f = torch.compile(loss, backend="mlirfuse")
    for _ in range(3):
        f(wide, labels).backward()

    def forward():
        with torch.no_grad():
            f(wide, labels)
    fw = statistics.median(gpu_us(forward) for _ in range(3))
    step = statistics.median(gpu_us(lambda: f(wide, labels).backward()) for _ in range(3))
    return {"vocabulary": vocabulary, "pitch": pitch, "forward_us": fw, "step_us": step, "backward_us": step - fw}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the rows here")
    opts = parser.parse_args()
    rows = [measure(v) for v in VOCABULARIES]
    print(torch.cuda.get_device_name())
    print("\n| V | pitch | forward us | step us | backward us |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['vocabulary']} | {r['pitch']} | {r['forward_us']:.1f} | {r['step_us']:.1f} | "
              f"{r['backward_us']:.1f} |")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
