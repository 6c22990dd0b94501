"""fusion-to-linalg: lower every fusion op to linalg/tensor/arith/math on tensors.

Expects fusion IR (any functions); leaves no fusion op. Elementwise chains come out as
separate `linalg.generic`s: follow with `resolve-shaped-type-result-dims, canonicalize,
func.func(linalg-fuse-elementwise-ops)` to fuse them (the first two rewrite `tensor.dim`s of
intermediates, which would otherwise count as extra uses and block fusion).
Option `target` (cpu|gpu): cpu emits vectorizable float32 approximations of transcendental
functions; gpu keeps `math` ops for libdevice.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.errors import FusionError
from mlirfuse.lowering.to_linalg import lower_module

NAME = "fusion-to-linalg"
OPTIONS = {"target": (str, "cpu", "cpu or gpu")}


def run(module: ir.Operation, target: str = "cpu") -> None:
    if target not in ("cpu", "gpu"):
        raise FusionError(f"target must be cpu or gpu, got '{target}'")
    lower_module(module, target=target)
