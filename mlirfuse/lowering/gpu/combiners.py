"""How reductions combine, for every reduction kernel: the combiner a generic's body applies
to each output (`output_combiners`) and its identity, warp butterflies of `gpu.shuffle xor`,
and fills of a reduction's outputs folded into its initial values (`fold_fills`).
"""

from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, scf

from mlirfuse.lowering.gpu import heuristics as S
from mlirfuse.lowering.gpu.kernels import Generic, Operand, combine, passive
from mlirfuse.lowering.linalg_builders import index_const

_FLOAT_IDENTITY = {"arith.addf": 0.0, "arith.mulf": 1.0, "arith.maximumf": float("-inf"),
                   "arith.maxnumf": float("-inf"), "arith.minimumf": float("inf"), "arith.minnumf": float("inf")}
_INT_IDENTITY = {"arith.addi": lambda w: 0, "arith.ori": lambda w: 0, "arith.xori": lambda w: 0,
                 "arith.muli": lambda w: 1, "arith.andi": lambda w: -1, "arith.maxsi": lambda w: -(1 << (w - 1)),
                 "arith.minsi": lambda w: (1 << (w - 1)) - 1, "arith.maxui": lambda w: 0, "arith.minui": lambda w: -1}


class _Combiner:
    """A combiner not taken from a body (`combine` reads an op's name and attributes)."""

    def __init__(self, name: str):
        self.name, self.attributes = name, {}


MAXIMUM = _Combiner("arith.maximumf")  # NaN-propagating, as torch's max


def identity(name: str, t: ir.Type) -> ir.Value:
    if isinstance(t, ir.IntegerType):
        return arith.constant(t, _INT_IDENTITY[name](t.width))
    return arith.constant(t, _FLOAT_IDENTITY[name])


def accumulator_combiner(g: Generic, out: Operand, yielded: ir.Value) -> ir.Operation | str:
    owner = yielded.owner
    if isinstance(owner, ir.Block):
        return "an output yields a block argument"
    op = owner.operation
    t = out.type.element_type
    known = _INT_IDENTITY if isinstance(t, ir.IntegerType) else _FLOAT_IDENTITY
    if op.name not in known or len(op.operands) != 2 or out.arg not in list(op.operands):
        return f"combiner {op.name} not recognized"
    if len(list(out.arg.uses)) != 1 or len(list(op.results[0].uses)) != 1:
        return "the accumulator is used besides its combiner"
    if not isinstance(t, (ir.F32Type, ir.F64Type, ir.F16Type, ir.BF16Type, ir.IntegerType)):
        return f"accumulator type {t}"
    return op


def output_combiners(g: Generic) -> list[ir.Operation] | str:
    """Per output, the op combining its accumulator with the body's value (or why not)."""
    yielded = list(g.body.operations[len(g.body.operations) - 1].operands)
    combiners = []
    for out, y in zip(g.outputs, yielded):
        c = accumulator_combiner(g, out, y)
        if isinstance(c, str):
            return c
        combiners.append(c)
    return combiners


def fill_value(g: Generic) -> ir.Value | None:
    """The value a generalized linalg.fill writes (a captured scalar), or None."""
    if any(g.reduction) or len(g.operands) != 2 or g.operands[0].is_memref or not g.operands[1].is_memref:
        return None
    ops = list(g.body.operations)
    if len(ops) != 1 or list(ops[0].operands) != [g.operands[0].arg]:
        return None
    return g.operands[0].value


def fold_fills(ops: list[ir.Operation], generics: dict[int, Generic],
               takes_inits: Callable[[Generic], bool]) -> dict[int, dict]:
    """Fills whose buffer the next generic touching it (past host-only ops and generics that
    neither read nor write it, those of normalization chains included) is a reduction that
    only accumulates into it: fill position -> (reduction position, {buffer: value}). The
    reduction (one `takes_inits` accepts: its kernel can start from given values) then starts
    from the value instead of reading the buffer, and the fill is dropped. Buffers with views
    (other memrefs aliasing them) are left alone: a generic could read the fill through one."""
    folds: dict[int, dict] = {}
    for i, g in generics.items():
        value = fill_value(g)
        if value is None:
            continue
        buffer = g.operands[1].value
        if any(u.owner.name not in ("linalg.generic", "memref.dealloc", "memref.dim") for u in buffer.uses):
            continue
        j = i + 1
        while j < len(ops) and (j not in generics and passive(ops[j])
                                or ops[j].name == "linalg.generic" and buffer not in list(ops[j].operands)):
            j += 1  # past host ops and views, and generics (a normalization chain's too) not touching it
        if j not in generics:
            continue
        r = generics[j]
        if not takes_inits(r) or buffer not in [o.value for o in r.outputs] \
                or buffer in [o.value for o in r.inputs]:
            continue
        folds[i] = {"reduction": j, "buffer": buffer, "value": value}
    return folds


def butterfly(combiners: list[ir.Operation], accs: list[ir.Value], lanes: ir.Value | None = None) -> list[ir.Value]:
    """Combine across groups of `lanes` lanes (a whole warp where None): xor steps of
    offset < lanes, each a uniform branch. Every lane of a group ends with its total."""
    offset = S.WARP // 2
    while offset:
        if lanes is None:
            accs = [combine(c, a, shuffle_xor(a, offset)) for c, a in zip(combiners, accs)]
        else:
            step = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ugt, lanes, index_const(offset)),
                            [a.type for a in accs], has_else=True)
            with ir.InsertionPoint(step.then_block):
                scf.YieldOp([combine(c, a, shuffle_xor(a, offset)) for c, a in zip(combiners, accs)])
            with ir.InsertionPoint(step.else_block):
                scf.YieldOp(accs)
            accs = list(step.results)
        offset //= 2
    return accs


def shuffle_xor(value: ir.Value, offset: int) -> ir.Value:
    """`gpu.shuffle xor` over a warp for any 8/16/32/64-bit scalar (the NVVM lowering takes
    32-bit values: narrower ones are widened, 64-bit ones split in halves)."""
    i32 = ir.IntegerType.get_signless(32)
    off, width = arith.constant(i32, offset), arith.constant(i32, S.WARP)
    mode = ir.Attribute.parse("#gpu<shuffle_mode xor>")

    def shuffle(x: ir.Value) -> ir.Value:
        return gpu.shuffle(x, off, width, mode)[0]

    t = value.type
    bits = t.width
    if bits == 32:
        return shuffle(value)
    as_int = ir.IntegerType.get_signless(bits)
    x = value if isinstance(t, ir.IntegerType) else arith.bitcast(as_int, value)
    if bits == 64:
        i64 = as_int
        c32 = arith.constant(i64, 32)
        lo = shuffle(arith.trunci(i32, x))
        hi = shuffle(arith.trunci(i32, arith.shrui(x, c32)))
        y = arith.ori(arith.extui(i64, lo), arith.shli(arith.extui(i64, hi), c32))
    else:
        y = arith.trunci(as_int, shuffle(arith.extui(i32, x)))
    return y if isinstance(t, ir.IntegerType) else arith.bitcast(t, y)
