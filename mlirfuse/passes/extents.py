"""Symbolic extents: which dims of which tensors are equal at run time.

A dynamic size prints as `?`, so two `tensor<?x?xf32>` may or may not be one iteration
domain. The IR says where every size comes from: `fusion.size` of a value, the index
operands of broadcast_in_dim/expand/reshape/uniform, the operands of elementwise ops (one
shape), permutes and reductions of their input. `dim_sources` is that rule per op (the
symbolic twin of `mlirfuse.shapes.result_shapes`); `Extents` unifies dims along it over
every graph function and the groups it calls (a group's arguments take the extents of the
call's operands), so segmentation compares domains by their symbols, not by their spelling.
"""

from __future__ import annotations

import itertools

from mlir import ir
from mlir.dialects import arith

from mlirfuse.passes.common import UnionFind, defining_op, functions

Sym = tuple  # ("c", n): the static size n; ("v", k): a size known only at run time
# Where a result dim's size comes from: ("dim", operand, d), ("index", operand), ("static", n).
Source = tuple


def _ints(op: ir.Operation, name: str) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def _int(op: ir.Operation, name: str) -> int:
    return int(ir.IntegerAttr(op.attributes[name]).value)


def shape_of(value: ir.Value) -> list[int] | None:
    """Static sizes (-1 where dynamic), or None for a non-tensor."""
    if not isinstance(value.type, ir.RankedTensorType):
        return None
    t = ir.RankedTensorType(value.type)
    return [-1 if t.is_dynamic_dim(i) else s for i, s in enumerate(t.shape)]


def _sized(op: ir.Operation, first_size: int) -> list[list[Source]]:
    """Dims of a result shaped by a `shape` attribute and index operands for its -1 entries."""
    sizes = itertools.count(first_size)
    return [[("index", next(sizes))] if s == -1 else [("static", s)] for s in _ints(op, "shape")]


def _broadcast(op: ir.Operation, bdims: list[int]) -> list[list[Source]]:
    dims = _sized(op, 1)
    in_shape = shape_of(op.operands[0]) or []
    for i, d in enumerate(bdims):
        if in_shape[i] != 1:  # a size-1 input dim grows; any other keeps its extent
            dims[d].append(("dim", 0, i))
    return dims


def _matmul(a: list[int], b: list[int], rank: int) -> list[list[Source]]:
    dims: list[list[Source]] = [[] for _ in range(rank)]
    if len(b) > 1:
        dims[-1].append(("dim", 1, len(b) - 1))
    if len(a) > 1:
        dims[-1 if len(b) == 1 else -2].append(("dim", 0, len(a) - 2))
    batch = rank - (len(a) > 1) - (len(b) > 1)
    for k, shape in ((0, a), (1, b)):
        lead = len(shape) - 2
        for j in range(max(lead, 0)):
            d = batch - lead + j
            if shape[j] != 1:
                dims[d].append(("dim", k, j))
    return dims


def dim_sources(op: ir.Operation) -> list[list[Source]] | None:
    """For each dim of the op's first tensor result (all results of a fusion op share one
    shape), the operand dims, index operands or static sizes it is equal to; None where
    unknown."""
    if not op.name.startswith("fusion.") or not op.results:
        return None
    name = op.name[len("fusion."):]
    out = shape_of(op.results[0])
    if out is None:
        return None
    operands = [shape_of(v) for v in op.operands]
    if name in ("broadcast_in_dim", "expand"):
        bdims = _ints(op, "broadcast_dims") if name == "broadcast_in_dim" else list(range(len(out)))
        return _broadcast(op, bdims)
    if name == "reshape":
        return _sized(op, 1)
    if name == "uniform":
        return _sized(op, 4)
    if name == "permute":
        return [[("dim", 0, p)] for p in _ints(op, "dims")]
    if name in ("iota", "slice"):
        return _sized(op, 0 if name == "iota" else 1)
    if name == "cat":
        d = _int(op, "dim")
        return [[("static", out[i])] if out[i] >= 0 else [] if i == d else
                [("dim", k, i) for k in range(len(operands))] for i in range(len(out))]
    if name == "pad":
        low, high = _ints(op, "low"), _ints(op, "high")
        return [[("dim", 0, i)] if low[i] == high[i] == 0 else [("static", out[i])] if out[i] >= 0 else []
                for i in range(len(out))]
    if name == "gather":
        return [[("dim", 1, i)] for i in range(len(out))]
    if name == "squeeze":
        dropped = _ints(op, "dims")
        return [[("dim", 0, i)] for i in range(len(operands[0])) if i not in dropped]
    if name == "unsqueeze":
        dims = [[("dim", 0, i)] for i in range(len(operands[0]))]
        return dims[:_int(op, "dim")] + [[("static", 1)]] + dims[_int(op, "dim"):]
    if "axes" in op.attributes:  # reductions
        rank = len(operands[0])
        axes = [a % rank for a in _ints(op, "axes")] if rank else []
        keep = bool(ir.BoolAttr(op.attributes["keepdim"]).value)
        return [[("static", 1)] if i in axes else [("dim", 0, i)]
                for i in range(len(operands[0])) if keep or i not in axes]
    if name == "matmul":
        return _matmul(operands[0], operands[1], len(out))
    if name == "linear":
        dims = [[("dim", 0, i)] for i in range(len(operands[0]) - 1)]
        return dims + ([[("dim", 1, 0)]] if len(operands[1]) == 2 else [])
    # elementwise, cast, rand_like: every operand of the result's rank has the result's shape
    same = [k for k, s in enumerate(operands) if s is not None and len(s) == len(out)]
    return [[("dim", k, d) for k in same] for d in range(len(out))]


class Extents(UnionFind):
    """Union-find over the extents of every tensor dim and index value of a module."""

    def __init__(self, module: ir.Operation, group_attr: str = "fusion.group"):
        super().__init__()
        self.dims_of: dict[ir.Value, list[Sym]] = {}
        self.index_of: dict[ir.Value, Sym] = {}
        self._fresh = itertools.count()
        funcs = list(functions(module))
        self.groups = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in funcs if group_attr in f.attributes}
        self._seen: set[str] = set()
        for f in funcs:
            if group_attr not in f.attributes:
                self._function(f, None)
        for name, f in self.groups.items():
            if name not in self._seen:  # a group nobody calls: its arguments are unknown
                self._function(f, None)

    # -- union-find (UnionFind's find; static sizes stay roots) --------------------------------
    def union(self, a: Sym, b: Sym) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb or (ra[0] == "c" and rb[0] == "c"):
            return
        if ra[0] == "c":  # static sizes stay roots
            ra, rb = rb, ra
        self.parent[ra] = rb

    def fresh(self) -> Sym:
        return ("v", next(self._fresh))

    # -- queries ------------------------------------------------------------------------------
    def dims(self, value: ir.Value) -> tuple[Sym, ...]:
        """The extents of a tensor's dims (roots: equal tuples are equal shapes)."""
        return tuple(self.find(s) for s in self.dims_of.get(value, ()))

    def domain(self, value: ir.Value) -> tuple[Sym, ...]:
        """A tensor's iteration domain: its extents without size-1 dims."""
        return tuple(s for s in self.dims(value) if s != ("c", 1))

    # -- the walk -----------------------------------------------------------------------------
    def _new_value(self, value: ir.Value) -> None:
        shape = shape_of(value)
        if shape is not None:
            self.dims_of[value] = [("c", s) if s >= 0 else self.fresh() for s in shape]
        elif isinstance(value.type, ir.IndexType):
            self.index_of[value] = self.fresh()

    def _function(self, func: ir.Operation, seeds: list[ir.Value] | None) -> None:
        block = func.regions[0].blocks[0]
        for i, arg in enumerate(block.arguments):
            self._new_value(arg)
            if seeds is not None:
                self._bind(arg, seeds[i])
        for op in block.operations:
            self._op(op.operation)

    def _bind(self, value: ir.Value, equal: ir.Value) -> None:
        """`value` has the extents of `equal` (a group argument and the call's operand)."""
        if value in self.index_of and equal in self.index_of:
            self.union(self.index_of[value], self.index_of[equal])
        for a, b in zip(self.dims_of.get(value, ()), self.dims_of.get(equal, ())):
            self.union(a, b)

    def _op(self, op: ir.Operation) -> None:
        for r in op.results:
            self._new_value(r)
        if op.name == "func.call":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            group = self.groups.get(callee)
            if group is not None and callee not in self._seen:
                self._seen.add(callee)
                self._function(group, list(op.operands))
                ret = list(group.regions[0].blocks[0].operations)[-1].operation
                for r, v in zip(op.results, ret.operands):
                    self._bind(r, v)
            return
        if op.name == "fusion.size":
            self.union(self.index_of[op.results[0]], self.dims_of[op.operands[0]][_int(op, "dim")])
            return
        if op.name == "arith.constant" and op.results and op.results[0] in self.index_of:
            self.union(self.index_of[op.results[0]], ("c", int(ir.IntegerAttr(op.attributes["value"]).value)))
            return
        sources = dim_sources(op)
        if sources is None:
            return
        for r in op.results:
            for d, (sym, equal) in enumerate(zip(self.dims_of.get(r, ()), sources)):
                for source in equal:
                    self.union(sym, self._symbol(op, source))

    def _symbol(self, op: ir.Operation, source: Source) -> Sym:
        if source[0] == "static":
            return ("c", source[1])
        value = op.operands[source[1]]
        if source[0] == "index":
            return self.index_of.setdefault(value, self.fresh())
        return self.dims_of[value][source[2]] if value in self.dims_of else self.fresh()


def equal_size(op: ir.Operation, d: int) -> tuple[str, object] | None:
    """A value equal to dim `d` of `op`'s result that does not need the result itself:
    ("dim", (value, dim)) for a size of an operand, ("index", value) for an index operand,
    ("static", n); None where the op's rule does not say. Used to resolve `fusion.size`."""
    sources = dim_sources(op)
    if sources is None or d >= len(sources) or not sources[d]:
        return None
    source = sources[d][0]
    if source[0] == "static":
        return ("static", source[1])
    if source[0] == "index":
        return ("index", op.operands[source[1]])
    return ("dim", (op.operands[source[1]], source[2]))



def resolve_sizes(func: ir.Operation) -> list[ir.Operation]:
    """Point every `fusion.size` of an op result at an equal size that does not need the
    result (a size of an operand, traced back to a function argument where the op rules
    allow, an index operand, or a constant), so that a value read only for its shape is no
    longer used. Returns the ops that lost those uses (candidates for dead-code removal)."""
    released = []
    block = func.regions[0].blocks[0]
    for op in [o.operation for o in block.operations]:
        if op.name != "fusion.size":
            continue
        value, d = op.operands[0], _int(op, "dim")
        first = producer = _producer(value)
        replacement: ir.Value | None = None
        while producer is not None and replacement is None:
            found = equal_size(producer, d)
            if found is None:
                break
            if found[0] == "dim":
                value, d = found[1]
                producer = _producer(value)
            elif found[0] == "index":
                replacement = found[1]
            else:
                index = ir.IndexType.get()
                with ir.InsertionPoint(op), op.location:
                    replacement = arith.ConstantOp(index, ir.IntegerAttr.get(index, found[1])).result
        if first is None or (replacement is None and value == op.operands[0]):
            continue
        released.append(first)
        if replacement is not None:
            op.results[0].replace_all_uses_with(replacement)
            op.erase()
        else:
            op.operands[0] = value
            op.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)
    return released


def _producer(value: ir.Value) -> ir.Operation | None:
    op = defining_op(value)
    return op if op is not None and op.name.startswith("fusion.") else None
