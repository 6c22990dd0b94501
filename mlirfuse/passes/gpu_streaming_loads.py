"""gpu-streaming-loads: the kernels' loads marked `nontemporal` (data a kernel reads once, as
a column reduction's column operands) become `ld.global.cs`: cached in L1 and L2 with the
evict-first policy, so that they replace each other in L2 rather than the lines other data
holds there, dirty ones included (Inductor's reductions load so, `eviction_policy=
'evict_first'`).

LLVM's NVPTX backend drops the `nontemporal` flag (LLVM 22: a plain `ld.global`), so each such
`llvm.load` of 4, 8 or 16 bytes through a generic or global pointer becomes inline PTX on the
pointer cast to the global address space, its 32-bit words put back into the loaded type;
other loads are left as they are. The asm is marked as having side effects: without, MLIR and
LLVM take it for a pure computation, free to merge two such loads across a store to their
address or to move a store of the same kernel before it (an output written in place over a
column operand, `output-views-in-place`, relies on the loads' program order).

Expects the kernels converted to the LLVM dialect (after `convert-gpu-to-nvvm` in the
`gpu.module`s); host code is not touched.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import llvm

from mlirfuse.passes.common import walk_ops

NAME = "gpu-streaming-loads"
OPTIONS: dict = {}

WORD_BYTES = 4


def run(module: ir.Operation) -> None:
    pointers = (ir.Type.parse("!llvm.ptr"), ir.Type.parse("!llvm.ptr<1>"))  # generic (a kernel's buffers), global
    for kernels in [op for op in walk_ops(module) if op.name == "gpu.module"]:
        for load in [op for op in walk_ops(kernels) if op.name == "llvm.load" and "nontemporal" in op.attributes]:
            words, rest = divmod(_bytes(load.results[0].type), WORD_BYTES)
            if load.operands[0].type in pointers and words in (1, 2, 4) and not rest:
                _streaming(load, words)


def _bytes(t: ir.Type) -> int:
    """The size of a scalar or vector of ints and floats (0 for any other type)."""
    if isinstance(t, ir.VectorType):
        return ir.VectorType(t).shape[0] * _bytes(ir.VectorType(t).element_type)
    if isinstance(t, ir.IntegerType):
        return ir.IntegerType(t).width // 8
    if isinstance(t, ir.FloatType):
        return ir.FloatType(t).width // 8
    return 0


def _streaming(load: ir.Operation, words: int) -> None:
    """`load` as `ld.global.cs` of `words` 32-bit words."""
    i32 = ir.IntegerType.get_signless(32)
    with ir.InsertionPoint(load), load.location:
        pointer = load.operands[0]
        global_ptr = ir.Type.parse("!llvm.ptr<1>")
        address = pointer if pointer.type == global_ptr else llvm.addrspacecast(global_ptr, pointer)
        registers = ", ".join(f"${k}" for k in range(words))
        shape = f".v{words}" if words > 1 else ""
        asm = f"ld.global.cs{shape}.b32 {registers if words == 1 else '{' + registers + '}'}, [${words}];"
        constraints = ",".join(["=r"] * words + ["l"])
        if words == 1:
            word = llvm.inline_asm(i32, [address], asm, constraints, has_side_effects=True)
            value = llvm.bitcast(load.results[0].type, word)
        else:
            struct = llvm.inline_asm(ir.Type.parse(f"!llvm.struct<({', '.join(['i32'] * words)})>"), [address],
                                     asm, constraints, has_side_effects=True)
            vector_type = ir.VectorType.get([words], i32)
            vector = llvm.mlir_undef(vector_type)
            for k in range(words):
                position = llvm.ConstantOp(i32, ir.IntegerAttr.get(i32, k)).result
                vector = llvm.insertelement(vector, llvm.extractvalue(i32, struct, [k]), position)
            value = llvm.bitcast(load.results[0].type, vector)
    load.results[0].replace_all_uses_with(value)
    load.erase()
