"""cuBLAS on the models' output projections with the vocabulary padded or not: which dtypes
pad_matmuls should pad (mlirfuse/torch_backend/pad_matmul.py).

    python bench/matmul_padding.py [--json out.json]

Per dtype and vocabulary (GPT-2 50257, BERT 30522, Llama 32000; 4096 rows, hidden 768 or
1024): the forward product x @ W.t(), the input gradient g @ W and the weight gradient
g.t() @ x, with the vocabulary as it is and rounded up to multiples of 4, 8 and 64; ms per
product (CUDA events, the mean of 20 after 3), TF32 off as torch's default. Markdown to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

VOCABULARIES = {"gpt2": (50257, 768), "bert": (30522, 768), "llama": (32000, 1024)}
ROWS = 4096


def ms(fn, repeats: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    opts = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; {ROWS} rows\n")
    print("| dtype | model | vocabulary as run | forward ms | input grad ms | weight grad ms | total ms |\n"
          "|---|---|---|---|---|---|---|")
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for model, (vocab, hidden) in VOCABULARIES.items():
            for padded in sorted({vocab, -(-vocab // 4) * 4, -(-vocab // 8) * 8, -(-vocab // 64) * 64}):
                x = torch.randn(ROWS, hidden, device="cuda", dtype=dtype)
                w = torch.randn(padded, hidden, device="cuda", dtype=dtype)
                g = torch.randn(ROWS, padded, device="cuda", dtype=dtype)
                times = [ms(lambda: torch.mm(x, w.t())), ms(lambda: torch.mm(g, w)), ms(lambda: torch.mm(g.t(), x))]
                rows.append({"dtype": str(dtype), "model": model, "vocabulary": vocab, "padded": padded,
                             "ms": times, "total_ms": sum(times)})
                print(f"| {str(dtype).split('.')[1]} | {model} | {padded} | {times[0]:.3f} | {times[1]:.3f} | "
                      f"{times[2]:.3f} | {sum(times):.3f} |")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
