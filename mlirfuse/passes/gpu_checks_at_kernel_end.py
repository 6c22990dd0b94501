"""gpu-checks-at-kernel-end: a kernel's checks (`cf.assert`) fail once, at the kernel's end.

Expects the GPU backend's launches (after `gpu-loops-to-launches`, before outlining). A gather
checks its indices where it reads (`lowering/indexing.lower_gather`); on the GPU a failing
`cf.assert` is CUDA's device-side assert, a call of `__assertfail`, and a call in the middle
of a held-row kernel made ptxas keep the row's values across it: the embedding + LayerNorm
kernel took 73 registers instead of 48. So each check here ORs its failure into a flag of the
thread (a private scalar, a register once LLVM promotes it), and one `cf.assert` after the
kernel's body tests the flag: the same device-side assert, with no call among the loads. The
reads stay in bounds meanwhile (the gather clamps its index).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref

from mlirfuse.passes.common import walk_ops

NAME = "gpu-checks-at-kernel-end"
OPTIONS: dict = {}


def run(module: ir.Operation) -> None:
    i32 = ir.IntegerType.get_signless(32)
    for launch in [op for op in walk_ops(module) if op.name == "gpu.launch"]:
        checks = [op for op in walk_ops(launch) if op.name == "cf.assert"]
        if not checks:
            continue
        body = launch.regions[0].blocks[0]
        message = ir.StringAttr(checks[0].attributes["msg"]).value
        with ir.InsertionPoint.at_block_begin(body), launch.location:
            flag = memref.alloca(ir.MemRefType.get([], i32), [], [])
            memref.store(arith.constant(i32, 0), flag, [])
        for check in checks:
            with ir.InsertionPoint(check), check.location:
                failed = arith.extui(i32, arith.xori(check.operands[0],
                                                     arith.constant(ir.IntegerType.get_signless(1), 1)))
                memref.store(arith.ori(memref.load(flag, []), failed), flag, [])
            check.erase()
        terminator = body.operations[len(body.operations) - 1]
        with ir.InsertionPoint(terminator), launch.location:
            ok = arith.cmpi(arith.CmpIPredicate.eq, memref.load(flag, []), arith.constant(i32, 0))
            ir.Operation.create("cf.assert", operands=[ok], attributes={"msg": ir.StringAttr.get(message)})
