"""gpu-unit-loops: every linalg op of the entry point gets at least one parallel loop.

Expects the GPU path's bufferized entry point. A full reduction (no parallel loop) gets a
unit parallel loop in front, with its body's `linalg.index` ops shifted to follow their
loops, so that every kernel has a parallel dimension to launch over.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.lowering.gpu import naive as gpu
from mlirfuse.passes.common import entry_functions

NAME = "gpu-unit-loops"
OPTIONS: dict = {}


def run(module: ir.Operation) -> None:
    for func in entry_functions(module):
        gpu.add_unit_loops(func)
