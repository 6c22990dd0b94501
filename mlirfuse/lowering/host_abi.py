"""The entry point both backends export, and how the host passes arguments to it.

`@mlirfuse_entry(inputs..., outputs...)` is destination-passing: tensors are memrefs
(strided where the input is not contiguous), runtime scalars are plain values (so a GPU
kernel receives them as launch parameters, not through device memory), and outputs are
buffers the caller allocated. It calls the lowered `@fusion`, which gets inlined.
"""

from __future__ import annotations

import ctypes
import re
import threading
from typing import Any, Sequence

import numpy as np
from mlir import ir

from mlirfuse.frontend.graph import InputSpec

ENTRY = "mlirfuse_entry"


def memref_type(spec_shape: Sequence[int | None], element: str, contiguous: bool) -> str:
    dims = "".join(f"{'?' if s is None else s}x" for s in spec_shape)
    if contiguous or not spec_shape:
        return f"memref<{dims}{element}>"
    strides = ", ".join("?" for _ in spec_shape)
    return f"memref<{dims}{element}, strided<[{strides}], offset: ?>>"


def _tensor_shape(t: ir.Type) -> list[int | None]:
    rt = ir.RankedTensorType(t)
    return [None if rt.is_dynamic_dim(i) else s for i, s in enumerate(rt.shape)]


def add_entry_point(module: ir.Module, specs: Sequence[InputSpec]) -> None:
    """Wrap the (lowered) @fusion in @mlirfuse_entry; @fusion becomes private."""
    func = next(op for op in module.body.operations if op.operation.name == "func.func")
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    args, lines = [], []
    call_args = []
    for i, (t, spec) in enumerate(zip(ftype.inputs, specs)):
        call_args.append(f"%t{i}")
        if not isinstance(t, ir.RankedTensorType):  # an index (size) argument: by value
            args.append(f"%in{i}: {t}")
            call_args[-1] = f"%in{i}"
            continue
        elem = str(ir.RankedTensorType(t).element_type)
        if spec.scalar:
            args.append(f"%in{i}: {elem}")
            lines.append(f"%t{i} = tensor.from_elements %in{i} : {t}")
            continue
        mt = memref_type(_tensor_shape(t), elem, spec.contiguous)
        args.append(f"%in{i}: {mt}")
        lines.append(f"%t{i} = bufferization.to_tensor %in{i} restrict : {mt} to {t}")
    outs = []
    for j, t in enumerate(ftype.results):
        elem = str(ir.RankedTensorType(t).element_type)
        mt = memref_type(_tensor_shape(t), elem, True)
        args.append(f"%out{j}: {mt}")
        outs.append((mt, t))
    ins = ", ".join(call_args)
    in_types = ", ".join(str(t) for t in ftype.inputs)
    res_types = ", ".join(str(t) for t in ftype.results)
    if outs:
        lines.append(f"%r:{len(outs)} = func.call @fusion({ins}) : ({in_types}) -> ({res_types})")
    for j, (mt, t) in enumerate(outs):
        lines.append(f"bufferization.materialize_in_destination %r#{j} in restrict writable "
                     f"%out{j} : ({t}, {mt}) -> ()")
    text = (f"func.func @{ENTRY}({', '.join(args)}) attributes {{llvm.emit_c_interface}} {{\n  "
            + "\n  ".join(lines) + "\n  return\n}")
    func.attributes["sym_visibility"] = ir.StringAttr.get("private")
    declaration = f"func.func private @fusion({in_types}) -> ({res_types})\n"
    wrapper = ir.Module.parse(declaration + text)
    entry = wrapper.body.operations[1]
    entry.operation.detach_from_parent()
    module.body.append(entry.operation)


def inline_scalar_operands(module: ir.Module) -> None:
    """Read `tensor.from_elements` inputs of linalg.generics (0-d, or viewed as any shape of
    size-1 dims) as captured scalars.

    Runs after inlining, before bufferization: the scalar then never touches memory. A
    one-element tensor of a scalar still read through memory (the only operand giving a loop
    its extent) is made by a `linalg.fill`, a kernel on the GPU: bufferized, the host stored
    the scalar into the buffer, which on the GPU is device memory.
    """
    for func in module.body.operations:
        if func.operation.name != "func.func":
            continue
        for op in list(func.regions[0].blocks[0].operations):
            op = op.operation
            if op.name == "linalg.generic":
                _inline_scalars(op)
        for op in list(func.regions[0].blocks[0].operations):
            op = op.operation
            if op.name == "tensor.from_elements" and len(op.operands) == 1 and list(op.results[0].uses) \
                    and not isinstance(op.operands[0].type, ir.IndexType):  # (index: a reshape's shape, on the host)
                _fill_instead(op)


def _fill_instead(op: ir.Operation) -> None:
    """`tensor.from_elements %s` replaced by a fill of %s into an empty tensor of its type."""
    from mlir.dialects import linalg, tensor  # compile time only

    t = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        filled = linalg.fill(op.operands[0], outs=[tensor.EmptyOp(t.shape, t.element_type).result])
    op.results[0].replace_all_uses_with(filled)
    op.erase()


_ONE_ELEMENT_VIEWS = ("tensor.reshape", "tensor.expand_shape", "tensor.collapse_shape", "tensor.cast")


def scalar_of_tensor(value: ir.Value) -> ir.Value | None:
    """The scalar a one-element tensor holds where it is `tensor.from_elements %s`, viewed in
    any shape of size-1 dims (a runtime scalar reshaped to [1], say), else None."""
    while True:
        t = value.type
        if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape or any(d != 1 for d in t.shape):
            return None
        owner = value.owner
        if isinstance(owner, ir.Block):
            return None
        owner = owner.operation
        if owner.name == "tensor.from_elements" and len(owner.operands) == 1:
            return owner.operands[0]
        if owner.name not in _ONE_ELEMENT_VIEWS:
            return None
        value = owner.operands[0]


def _loop_dims(attr: ir.Attribute) -> set[int]:
    """The loop dims an indexing map's results name."""
    return {e.position for e in ir.AffineMapAttr(attr).value.results if isinstance(e, ir.AffineDimExpr)}


def _inline_scalars(op: ir.Operation) -> None:
    from mlir.dialects import linalg  # compile time only: a warm start does not import it

    n_in = len(op.operands) - len(op.results)
    inputs, outputs = list(op.operands)[:n_in], list(op.operands)[n_in:]
    maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
    scalar_of = {}
    for i, v in enumerate(inputs):
        scalar = scalar_of_tensor(v)
        if scalar is not None:
            scalar_of[i] = scalar
    # a one-element input of rank > 0 may be the only operand giving a loop its extent (a sum
    # of a scalar viewed as [1]): it stays an input then
    defined = {d for i, m in enumerate(maps) if i not in scalar_of for d in _loop_dims(m)}
    scalar_of = {i: v for i, v in scalar_of.items() if _loop_dims(maps[i]) <= defined}
    if not scalar_of:
        return
    keep = [i for i in range(n_in) if i not in scalar_of]
    with ir.InsertionPoint(op), op.location:
        new = linalg.GenericOp([r.type for r in op.results], [inputs[i] for i in keep], outputs,
                               ir.ArrayAttr.get([maps[i] for i in keep] + maps[n_in:]),
                               op.attributes["iterator_types"])
    old_block = op.regions[0].blocks[0]
    old_args = list(old_block.arguments)
    block = new.regions[0].blocks.append(*[old_args[i].type for i in keep + list(range(n_in, len(old_args)))])
    for i, scalar in scalar_of.items():
        old_args[i].replace_all_uses_with(scalar)
    for new_arg, i in zip(block.arguments, keep + list(range(n_in, len(old_args)))):
        old_args[i].replace_all_uses_with(new_arg)
    for inner in list(old_block.operations):
        inner_op = inner.operation
        inner_op.detach_from_parent()
        block.append(inner_op)
    for old, value in zip(op.results, new.results):
        old.replace_all_uses_with(value)
    op.erase()


# The first line of a host module's text: the launches a call makes at most (a kernel's
# variants, launched one instead of another, count once).
LAUNCHES_LINE = r"// mlirfuse: (\d+) launch\(es\) a call\n"


def launches_line(n: int) -> str:
    return f"// mlirfuse: {n} launch(es) a call\n"


# The second line: the (input, output) pairs whose output may be written into the input's
# memory (`mlirfuse.lowering.gpu.in_place`), as `input>output` words.
IN_PLACE_LINE = r"// mlirfuse in place:((?: \d+>\d+)*)\n"


def in_place_line(pairs: frozenset[tuple[int, int]]) -> str:
    return "// mlirfuse in place:" + "".join(f" {i}>{k}" for i, k in sorted(pairs)) + "\n"


def parse_in_place(text: str) -> frozenset[tuple[int, int]]:
    """The pairs of a host module's text (none where it has no such line)."""
    found = re.search(IN_PLACE_LINE, text[:1 << 16])
    if found is None:
        return frozenset()
    return frozenset(tuple(int(x) for x in w.split(">")) for w in found.group(1).split())


# -- calling the entry point: packed arguments -------------------------------------------------
_DESCRIPTOR_CLASSES: dict[int, type] = {}  # explicit cache: one ctypes memref class per rank


def descriptor_class(rank: int) -> type:
    """The ctypes struct of a ranked memref descriptor (allocated, aligned, offset, sizes, strides)."""
    cls = _DESCRIPTOR_CLASSES.get(rank)
    if cls is None:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64)]
        if rank:
            fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        cls = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
        _DESCRIPTOR_CLASSES[rank] = cls
    return cls


def scalar_value(a: np.ndarray) -> ctypes._SimpleCData:
    """A runtime scalar as the C value the entry point takes (by its numpy dtype)."""
    if a.dtype.kind == "f":
        return {8: ctypes.c_double, 4: ctypes.c_float}[a.itemsize](float(a))
    if a.dtype.kind == "b":
        return ctypes.c_int8(bool(a))
    return {8: ctypes.c_int64, 4: ctypes.c_int32}[a.itemsize](int(a))


class ArgumentSlots:
    """The packed argument array of `_mlir_ciface_mlirfuse_entry`, built once per thread and
    argument kinds, then refilled per call (building ctypes objects per call costs ~10 us).

    fill(args): each arg is (pointer, sizes, element strides) for a memref, or a 0-d numpy
    array for a scalar passed by value; returns the packed `void**` array.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def fill(self, args: Sequence[Any]) -> ctypes.Array:
        kinds = tuple(-1 if isinstance(a, np.ndarray) else len(a[1]) for a in args)
        slots = getattr(self._local, "slots", None)
        if slots is None or slots[0] != kinds:
            slots = self._local.slots = (kinds, *self._build(args, kinds))
        _, cells, packed, _keep = slots
        for arg, kind, cell in zip(args, kinds, cells):
            if kind < 0:
                cell.value = arg.item()
                continue
            ptr, sizes, strides = arg
            cell.allocated = ptr
            cell.aligned = ptr
            if kind:
                cell.sizes[:] = sizes
                cell.strides[:] = strides
        return packed

    @staticmethod
    def _build(args: Sequence[Any], kinds: tuple[int, ...]) -> tuple[list, ctypes.Array, list]:
        cells: list = []
        keep: list = []  # what the packed array points at, kept alive with it
        for arg, kind in zip(args, kinds):
            cell = scalar_value(arg) if kind < 0 else descriptor_class(kind)()
            cells.append(cell)
            keep.append(cell if kind < 0 else ctypes.pointer(cell))
        packed = (ctypes.c_void_p * len(keep))(*[ctypes.addressof(k) for k in keep])
        return cells, packed, keep
