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
    return isinstance(t, (ir.F16Type, ir.BF16Type))


def is_bool_storage(t: ir.Type) -> bool:
    """i8 only ever stores bools here (mlirfuse has no int8 dtype)."""
    return isinstance(t, ir.IntegerType) and t.width == 8


def storage_type(t: ir.Type) -> ir.Type:
    """Element type in memory: bools as i8 bytes (numpy's layout; LLVM has no i1 memrefs)."""
    return ir.IntegerType.get_signless(8) if isinstance(t, ir.IntegerType) and t.width == 1 else t


def compute_type(t: ir.Type) -> ir.Type:
    """float16/bfloat16 compute in float32; bool bytes as i1."""
    if is_bool_storage(t):
        return ir.IntegerType.get_signless(1)
    return ir.F32Type.get() if is_low_precision(t) else t


def affine_map(n_dims: int, results: Sequence[int]) -> ir.AffineMap:
    return ir.AffineMap.get(n_dims, 0, [ir.AffineDimExpr.get(d) for d in results])


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


def reassociation_dropping(rank: int, dropped: Sequence[int]) -> list[list[int]]:
    """Reassociation that merges the unit dims `dropped` into a neighbouring kept dim."""
    kept = [i for i in range(rank) if i not in dropped]
    if not kept:
        return []
    groups: list[list[int]] = [[] for _ in kept]
    k = 0
    for i in range(rank):
        groups[k].append(i)
        if i in kept and k < len(kept) - 1 and i == kept[k]:
            k += 1
    return groups


def _reassoc_attr(groups: list[list[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])


def drop_unit_dims(value: ir.Value, dropped: Sequence[int]) -> ir.Value:
    """collapse_shape away static size-1 dims."""
    if not dropped:
        return value
    t = ir.RankedTensorType(value.type)
    shape = [s for i, s in enumerate(t.shape) if i not in dropped]
    out = ir.RankedTensorType.get(shape, t.element_type)
    return tensor.collapse_shape(out, value, _reassoc_attr(reassociation_dropping(t.rank, dropped)))


def insert_unit_dims(value: ir.Value, result_type: ir.RankedTensorType, inserted: Sequence[int],
                     out_dims: Sequence[ir.Value]) -> ir.Value:
    """expand_shape adding size-1 dims at `inserted` positions of the result."""
    if not inserted:
        return value
    groups = reassociation_dropping(result_type.rank, inserted)
    dynamic = [d for i, d in enumerate(out_dims) if result_type.is_dynamic_dim(i)]
    static = ir.DenseI64ArrayAttr.get(list(result_type.shape))
    return tensor.expand_shape(result_type, value, _reassoc_attr(groups), dynamic, static)
