"""Print the fusion IR the jit frontend traces for a named program (for lit RUN lines).

    python jit_ir.py relu_add            # dynamic shapes (the jit default)
    python jit_ir.py relu_add_static     # the same, traced with static shapes
    python jit_ir.py mixed               # one of every op family
"""

from __future__ import annotations

import sys

import numpy as np

import mlirfuse
from mlirfuse import ops


def relu_add(x):
    return ops.relu(x + 1.0)


def mixed(x, y, h):
    cond = ops.where(x > y, ops.exp(x), -y)
    v, m = ops.var_mean(ops.clamp(cond, 0.0, 1.0), 1, keepdim=True)
    s = ops.sum(x, 0)
    flat = ops.reshape(x, (-1,))
    t = ops.permute(x, (1, 0))
    sq = ops.squeeze(ops.unsqueeze(s, 0), 0)
    wide = ops.cast(h, "float32")
    e = ops.expand(ops.unsqueeze(s, 0), (ops.size(x, 0), ops.size(x, 1)))
    u = ops.uniform(0.0, 1.0, (ops.size(x, 0), 4), seed=1, offset=2)
    r = ops.rand_like(x, seed=3)
    return v, m, flat, t, sq, wide, e, u, r, ops.lerp(x, y, 0.5)


def main(name: str) -> None:
    x = np.zeros((2, 3), np.float32)
    if name == "relu_add":
        print(mlirfuse.jit(relu_add).fusion_ir(x))
    elif name == "relu_add_static":
        print(mlirfuse.jit(relu_add, dynamic=False).fusion_ir(x))
    elif name == "mixed":
        print(mlirfuse.jit(mixed).fusion_ir(x, x, x.astype(np.float16)))
    else:
        sys.exit(f"unknown program {name!r}")


if __name__ == "__main__":
    main(sys.argv[1])
