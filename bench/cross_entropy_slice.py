"""Cross-entropy over bfloat16 logits shifted by a slice of the sequence (`logits[:, :-1]`,
as causal-LM code written before transformers padded the labels instead): GPU us per call of
the forward (no grad) and of a step (forward + backward, the slice's backward included),
and each kernel's, through torch.compile with the given backend.

    python bench/cross_entropy_slice.py mlirfuse|inductor [--vocabularies 32000,30522,50257]

[8, 512, V] logits, labels [8, 512]; 5 calls under torch.profiler after 3 warm-up calls.
Kernels are listed by name, summed over the calls (a name two regions share counts twice).
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

F = torch.nn.functional


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("backend")
    parser.add_argument("--vocabularies", default="32000,30522,50257")
    opts = parser.parse_args()
    for v in (int(s) for s in opts.vocabularies.split(",")):
        torch._dynamo.reset()
        x = torch.randn(8, 512, v, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        y = torch.randint(0, v, (8, 512), device="cuda")
        f = torch.compile(lambda x, y: F.cross_entropy(x[:, :-1].reshape(-1, v).float(), y[:, 1:].reshape(-1)),
                          backend=opts.backend)
        for mode in ("fwd", "step"):
            def call():
                if mode == "fwd":
                    with torch.no_grad():
                        f(x, y)
                else:
                    f(x, y).backward()
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    call()
                torch.cuda.synchronize()
            events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
            print(f"{opts.backend} V={v} {mode}: {sum(e.device_time_total for e in events) / 5:.1f} us")
            for e in sorted(events, key=lambda e: -e.device_time_total):
                print(f"    {e.device_time_total / 5:8.1f} us x{e.count // 5} {e.key[:90]}")


if __name__ == "__main__":
    main()
