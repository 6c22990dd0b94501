"""cpu-asserts-as-error-flag: each `cf.assert` of the CPU backend's code sets a flag the host
reads after the call, instead of aborting the process.

Expects the CPU backend's loops (after `convert-linalg-to-loops`, before `convert-scf-to-cf`).
Upstream lowers `cf.assert` to a message and `abort()`, which would end the Python process
that called the fusion; torch raises instead (a gather's index out of range). Where the module
has asserts, it gets a public global `@mlirfuse_error` (an i32, 0), and each

    cf.assert %ok, "message"

becomes

    scf.if (not %ok) { memref.store 1, @mlirfuse_error[] }

The computation goes on (the gathers clamp their indices: every read stays in bounds). A
public function `@mlirfuse_take_error() -> i32` returns the flag and clears it: the host calls
it after each call and raises `IndexOutOfRange` where it was set (`lowering/cpu/compile.py`;
a function, since MLIR's ExecutionEngine looks up functions, not data).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from mlirfuse.passes.common import walk_ops

NAME = "cpu-asserts-as-error-flag"
OPTIONS: dict = {}
FLAG = "mlirfuse_error"
TAKE = "mlirfuse_take_error"


def run(module: ir.Operation) -> None:
    asserts = [op for op in walk_ops(module) if op.name == "cf.assert"]
    if not asserts:
        return
    i32 = ir.IntegerType.get_signless(32)
    flag_type = ir.MemRefType.get([], i32)
    body = module.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(body), module.location:
        memref.GlobalOp(FLAG, ir.TypeAttr.get(flag_type), sym_visibility="private",
                        initial_value=ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get([], i32),
                                                                     ir.IntegerAttr.get(i32, 0)))
        take = func.FuncOp(TAKE, ir.FunctionType.get([], [i32]))
        with ir.InsertionPoint(take.add_entry_block()):
            flag = memref.get_global(flag_type, FLAG)
            value = memref.load(flag, [])
            memref.store(arith.constant(i32, 0), flag, [])
            func.ReturnOp([value])
    for op in asserts:
        with ir.InsertionPoint(op), op.location:
            failed = arith.xori(op.operands[0], arith.constant(ir.IntegerType.get_signless(1), 1))
            branch = scf.IfOp(failed)
            with ir.InsertionPoint(branch.then_block):
                memref.store(arith.constant(i32, 1), memref.get_global(flag_type, FLAG), [])
                scf.YieldOp([])
        op.erase()
