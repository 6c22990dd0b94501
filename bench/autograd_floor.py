"""The autograd engine's own cost of a Python `torch.autograd.Function`: forward (a view) and
backward (the cotangent passed back), no kernels, on 2 and 5 leaf tensors of the tutorial's
block sizes ([64, 128, 1024] and [1024]), per forward + backward iteration. A floor under
any training step that goes through such a Function (`mlirfuse.jit` under autograd,
Inductor's compiled functions), whatever its kernels.

    python bench/autograd_floor.py
"""

from __future__ import annotations

import time

import torch

SHAPE = (64, 128, 1024)


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *args):
        ctx.save_for_backward(*args)
        return args[0].view_as(args[0])

    @staticmethod
    def backward(ctx, g):
        return tuple(g if t.shape == g.shape else None for t in ctx.saved_tensors)


def us_per_iteration(n_inputs: int, iterations: int = 200) -> float:
    xs = [torch.randn(SHAPE if i < 2 else SHAPE[-1:], device="cuda", requires_grad=True) for i in range(n_inputs)]
    g = torch.randn(SHAPE, device="cuda")

    def step() -> None:
        for t in xs:
            t.grad = None
        Identity.apply(*xs).backward(g)

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iterations * 1e6


if __name__ == "__main__":
    for n in (2, 5):
        print(f"{n} inputs: trivial Function forward + backward {us_per_iteration(n):.1f} us per iteration")
