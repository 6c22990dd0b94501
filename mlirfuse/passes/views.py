"""Memory layouts of views: which values are not contiguous, and which view ops must copy.

View ops (reshape, permute, squeeze, unsqueeze, expand, broadcast_in_dim) only change how
memory is read, except a reshape of a value that is not contiguous: that one copies (a
transpose kernel when the value is permuted). A layout is `None` (contiguous, row-major),
`("perm", dims)` (a permutation of a contiguous tensor: result dim i is base dim dims[i];
`dims` empty once size-1 dims were added or dropped) or `("strided",)` (anything else:
broadcast dims of stride 0, or a mix). `transfer` is the rule
per op; `Views` applies it over every graph function and the groups it calls (a group's
arguments have the layouts of the call's operands; call results, like all computed values,
are contiguous buffers). Values written as a group's or a graph's results must be
contiguous, so a non-contiguous one returned is materialized (a copy).
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.passes.common import functions
from mlirfuse.passes.extents import shape_of
from mlirfuse.passes.graph import META_ONLY, short_name

Layout = tuple | None
STRIDED: Layout = ("strided",)
PERMUTED: Layout = ("perm", ())  # a permutation whose order is no longer tracked


def _ints(op: ir.Operation, name: str) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def _permuted(base: list[int], shape: list[int]) -> Layout:
    """The layout of a permutation `base` of a contiguous tensor, now of sizes `shape`: still
    contiguous when the dims that are not statically 1 keep their order."""
    order = [b for b, s in zip(base, shape) if s != 1]
    return None if order == sorted(order) else ("perm", tuple(base))


def _broadcasts(op: ir.Operation) -> bool:
    """Whether a broadcast_in_dim/expand repeats elements (else it only adds size-1 dims)."""
    src, out = shape_of(op.operands[0]) or [], shape_of(op.results[0]) or []
    bdims = _ints(op, "broadcast_dims") if short_name(op) == "broadcast_in_dim" else list(range(len(out)))
    mapped = dict(zip(bdims, src))
    return any(out[d] != 1 and mapped.get(d, 1) == 1 for d in range(len(out)))


def _only_unit_dims(op: ir.Operation) -> bool:
    """Whether a reshape only inserts or removes static size-1 dims (a view of any layout)."""
    src, out = shape_of(op.operands[0]) or [], shape_of(op.results[0]) or []
    kept_src, kept_out = [s for s in src if s != 1], [s for s in out if s != 1]
    return kept_src == kept_out and -1 not in kept_src


def transfer(op: ir.Operation, layout: Layout) -> tuple[Layout, bool]:
    """(layout of the result, whether the op copies) for a view op whose operand has `layout`;
    computed values are contiguous."""
    name = short_name(op) if op.name.startswith("fusion.") else ""
    if name not in META_ONLY:
        return None, False
    if name == "permute":
        dims = _ints(op, "dims")
        if layout is None:
            base = dims
        elif layout[0] == "perm" and layout[1]:
            base = [layout[1][d] for d in dims]
        else:
            return layout, False  # still strided / permuted in an order no longer tracked
        return _permuted(base, shape_of(op.results[0]) or []), False
    if name in ("broadcast_in_dim", "expand"):
        return (STRIDED if _broadcasts(op) or layout is not None else None), False
    if name == "reshape" and layout is not None and not _only_unit_dims(op):
        return None, True  # reads the strided value, writes a contiguous one
    if layout is not None and layout[0] == "perm":  # squeeze/unsqueeze/unit reshape of a permutation
        return PERMUTED, False
    return layout, False


class Views:
    """Layouts of every value of the graph functions and the groups they call, and the view
    ops that copy."""

    def __init__(self, module: ir.Operation, group_attr: str = "fusion.group"):
        self.layouts: dict[ir.Value, Layout] = {}
        self.copies: set[ir.Operation] = set()
        funcs = list(functions(module))
        self._groups = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in funcs if group_attr in f.attributes}
        self._seen: set[str] = set()
        for f in funcs:
            if group_attr not in f.attributes:
                self._function(f, None)
        for name, f in self._groups.items():
            if name not in self._seen:
                self._function(f, None)

    def layout(self, value: ir.Value) -> Layout:
        return self.layouts.get(value)

    def permuted(self, value: ir.Value) -> bool:
        layout = self.layouts.get(value)
        return layout is not None and layout[0] == "perm"

    def _function(self, func: ir.Operation, seeds: list[Layout] | None) -> None:
        block = func.regions[0].blocks[0]
        for i, arg in enumerate(block.arguments):
            if seeds is not None and seeds[i] is not None:
                self.layouts[arg] = seeds[i]
        for op in block.operations:
            op = op.operation
            if op.name == "func.call":
                callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                if callee in self._groups and callee not in self._seen:
                    self._seen.add(callee)
                    self._function(self._groups[callee], [self.layout(v) for v in op.operands])
                continue
            if not op.results or not op.operands:
                continue
            layout, copies = transfer(op, self.layout(op.operands[0]))
            if copies:
                self.copies.add(op)
            if layout is not None:
                self.layouts[op.results[0]] = layout
