"""Small builders for linalg/tensor IR shared by the fusion lowering."""

from __future__ import annotations

from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, tensor

PARALLEL = "#linalg.iterator_type<parallel>"
REDUCTION = "#linalg.iterator_type<reduction>"


def index_const(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def dims_of(value: ir.Value) -> list[ir.Value]:
    """One index value per dim: a constant where static, `tensor.dim` where dynamic."""
    t = ir.RankedTensorType(value.type)
    return [index_const(s) if not t.is_dynamic_dim(i) else tensor.dim(value, index_const(i))
            for i, s in enumerate(t.shape)]


def empty(shape: Sequence[int], dims: Sequence[ir.Value], element: ir.Type) -> ir.Value:
    """tensor.empty of a static shape (-1 = dynamic), dynamic extents taken from `dims`."""
    sizes = [d if s == ir.ShapedType.get_dynamic_size() or s < 0 else s for s, d in zip(shape, dims)]
    return tensor.empty(sizes, element)


def is_low_precision(t: ir.Type) -> bool:
    """16- and 8-bit floats: computed in float32."""
    return isinstance(t, (ir.F16Type, ir.BF16Type, ir.Float8E4M3FNType, ir.Float8E5M2Type))


def is_bool_storage(t: ir.Type) -> bool:
    """i8 only ever stores bools here (mlirfuse has no int8 dtype)."""
    return isinstance(t, ir.IntegerType) and t.width == 8


def storage_type(t: ir.Type) -> ir.Type:
    """Element type in memory: bools as i8 bytes (numpy's layout; LLVM has no i1 memrefs)."""
    return ir.IntegerType.get_signless(8) if isinstance(t, ir.IntegerType) and t.width == 1 else t


def compute_type(t: ir.Type) -> ir.Type:
    """float16/bfloat16/float8 compute in float32; bool bytes as i1."""
    if is_bool_storage(t):
        return ir.IntegerType.get_signless(1)
    return ir.F32Type.get() if is_low_precision(t) else t


ZERO = -1  # in a map's results: the constant index 0 (a size-1 dim being broadcast)


def affine_map(n_dims: int, results: Sequence[int]) -> ir.AffineMap:
    exprs = [ir.AffineConstantExpr.get(0) if d == ZERO else ir.AffineDimExpr.get(d) for d in results]
    return ir.AffineMap.get(n_dims, 0, exprs)


def generic(inputs: Sequence[ir.Value], input_maps: Sequence[Sequence[int]],
            init: ir.Value, output_map: Sequence[int], n_loops: int,
            reduced: Sequence[int], body: Callable[..., ir.Value]) -> ir.Value:
    """A one-result linalg.generic; `body(*input_elems, out_elem)` returns the yield value."""
    maps = [affine_map(n_loops, m) for m in input_maps] + [affine_map(n_loops, output_map)]
    iterators = [ir.Attribute.parse(REDUCTION if i in reduced else PARALLEL) for i in range(n_loops)]
    op = linalg.GenericOp([init.type], list(inputs), [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          ir.ArrayAttr.get(iterators))
    arg_types = [ir.RankedTensorType(v.type).element_type for v in list(inputs) + [init]]
    block = op.regions[0].blocks.append(*arg_types)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments)])
    return op.result


def fill(init: ir.Value, value: ir.Value) -> ir.Value:
    return linalg.fill(value, outs=[init])
