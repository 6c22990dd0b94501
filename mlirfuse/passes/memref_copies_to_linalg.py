"""memref-copies-to-linalg: every `memref.copy` in a function body becomes `linalg.copy`.

Expects bufferized IR; leaves the same copies as linalg ops, which both backends turn into
code of their own: loops on the CPU (`convert-linalg-to-loops`), a kernel on the GPU. A
`memref.copy` would lower to a call of the `memrefCopy` runtime function for strided memrefs
(an output equal to a sliced input): the CPU backend links no runtime library (its JIT had
no such symbol, 'entry point missing'), and on the GPU that host call would touch device
memory.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg

from mlirfuse.passes.common import functions, walk_ops

NAME = "memref-copies-to-linalg"
OPTIONS: dict = {}


def copies_to_linalg(func: ir.Operation) -> None:
    for op in walk_ops(func):
        if op.name == "memref.copy":
            with ir.InsertionPoint(op), op.location:
                linalg.copy(op.operands[0], outs=[op.operands[1]])
            op.erase()


def run(module: ir.Operation) -> None:
    for func in functions(module):
        copies_to_linalg(func)
