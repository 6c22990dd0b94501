"""What the kernels share (the schedules' modules build on it):
  - `analyze`: a generic as data (operands, their indexing as loop dims, the body);
  - body cloning (`clone_body`): the generic's scalar body emitted once per element, with
    block arguments mapped to loaded (vector) elements and `linalg.index` to loop indices;
  - host-side views and checks (`collapse`, `aligned`), vector loads and stores, the guarded
    launch.
Each schedule's module has a `match_*` that says which generics it takes, or why not (the
naive path then lowers the op).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from mlirfuse.lowering.linalg_builders import ZERO, index_const
from mlirfuse.passes.common import DimClasses, walk_ops

log = logging.getLogger("mlirfuse.schedules")
SCHEDULE_ATTR = "mlirfuse.schedule"
# On a launch's guard: the launch runs instead of the one before it (their conditions exclude
# each other), a variant of the same kernel compiled apart; a call makes one of the two.
ALTERNATIVE_ATTR = "mlirfuse.alternative"
# On the module, until kernels are outlined: kernel name -> attributes for its gpu.func.
KERNEL_ATTRS = "mlirfuse.kernel_attrs"


# -- a generic as data ----------------------------------------------------------------------
@dataclass
class Operand:
    value: ir.Value  # a memref, or a scalar captured by value (generalized linalg.fill)
    arg: ir.Value  # the body's block argument
    results: list[int]  # per map result: the loop dim, or ZERO (a constant 0 on a size-1 dim)
    is_output: bool
    strided: bool = False  # a memref of any layout (analyze(..., strided_inputs=True) only)
    # a 2-D memref of rows with a stride of their own (a view of a padded buffer's interior;
    # analyze(..., row_strided=True) only): its rows are contiguous, not the rows together
    row_strided: bool = False

    @property
    def is_memref(self) -> bool:
        return isinstance(self.value.type, ir.MemRefType)

    @property
    def type(self) -> ir.MemRefType:
        return ir.MemRefType(self.value.type)

    @property
    def element_bytes(self) -> int:
        return element_bytes(self.type.element_type)


@dataclass
class Generic:
    op: ir.Operation
    operands: list[Operand]
    reduction: list[bool]  # per loop
    static: list[int | None]  # per loop: its static extent, if any
    body: ir.Block
    _extents: list[ir.Value] = field(default_factory=list)

    @property
    def n_loops(self) -> int:
        return len(self.reduction)

    @property
    def inputs(self) -> list[Operand]:
        return [o for o in self.operands if not o.is_output]

    @property
    def outputs(self) -> list[Operand]:
        return [o for o in self.operands if o.is_output]

    def extents(self) -> list[ir.Value]:
        """Loop extents as host index values (emitted at the current insertion point, once)."""
        if not self._extents:
            for d in range(self.n_loops):
                if self.static[d] is not None:
                    self._extents.append(index_const(self.static[d]))
                    continue
                o, pos = next((o, p) for o in self.operands if o.is_memref
                              for p, r in enumerate(o.results) if r == d)
                self._extents.append(memref.dim(o.value, index_const(pos)))
        return self._extents

    def static_numel(self) -> int | None:
        """Iterations of the loop nest where every extent is static."""
        return None if None in self.static else _prod([s for s in self.static if s is not None])

    def body_ops(self) -> int:
        """Operations one copy of the body costs (the yield not counted)."""
        return len(nested_ops(self.body)) - 1

    def has_index_ops(self) -> bool:
        return any(op.name == "linalg.index" for op in nested_ops(self.body))


def element_bytes(t: ir.Type) -> int:
    if isinstance(t, ir.IndexType):
        return 8
    return max(1, t.width // 8) if hasattr(t, "width") else 4


def nested_ops(block: ir.Block) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        found.append(op)
        return ir.WalkResult.ADVANCE

    for op in block.operations:
        op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def host_only(op: ir.Operation) -> bool:
    """Ops that may sit between generics a kernel merges: they touch no buffer's contents."""
    return op.name in ("memref.alloc", "memref.dim") or op.name.startswith("arith.")


VIEWS = ("memref.reshape", "memref.collapse_shape", "memref.expand_shape", "memref.subview", "memref.cast",
         "memref.reinterpret_cast", "memref.view", "memref.transpose")


def passive(op: ir.Operation) -> bool:
    """Host ops a kernel merging the generics around them may span: sizes and allocations
    (`host_only`), views, and stores to the host's shape buffers (`index` elements, read by
    memref.reshape). They touch no device buffer's contents (a merged kernel must still keep
    its generics from meeting through a view: `base_buffer`)."""
    if host_only(op) or op.name in VIEWS:
        return True
    return op.name == "memref.store" and isinstance(ir.MemRefType(op.operands[1].type).element_type, ir.IndexType)


def base_buffer(buffer: ir.Value) -> ir.Value:
    """The buffer a view is of (views alias it)."""
    while not isinstance(buffer.owner, ir.Block) and buffer.owner.operation.name in VIEWS:
        buffer = buffer.owner.operation.operands[0]
    return buffer


def _identity_layout(t: ir.MemRefType) -> bool:
    layout = t.layout
    return (t.memory_space is None and isinstance(layout, ir.AffineMapAttr)
            and layout.value == ir.AffineMap.get_identity(t.rank))


def row_strided_layout(t: ir.MemRefType) -> bool:
    """A 2-D strided layout whose rows are contiguous (inner stride 1): `memref.subview` of a
    buffer's leading columns."""
    if t.rank != 2 or t.memory_space is not None or not isinstance(t.layout, ir.StridedLayoutAttr):
        return False
    return list(ir.StridedLayoutAttr(t.layout).strides)[-1] == 1


def analyze(op: ir.Operation, strided_inputs: bool = False, row_strided: bool = False) -> Generic | str:
    """The generic as data, or why no schedule can take it. With `strided_inputs`, memrefs of
    any strided layout are taken (marked `strided`: only the pointwise kernel reads and writes
    them, element by element at their multi-dimensional indices); with `row_strided`, 2-D
    ones whose rows are contiguous (`row_strided_layout`: marked `row_strided`, for the
    schedules that index them as [row, column] views)."""
    if op.name != "linalg.generic":
        return f"{op.name} is not a linalg.generic"
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    body = op.regions[0].blocks[0]
    values = list(op.operands)
    n_in = len(values) - _n_outputs(op)
    operands, static = [], [None] * len(iterators)
    for i, (v, m, arg) in enumerate(zip(values, maps, body.arguments)):
        results = []
        for e in m.results:
            if isinstance(e, ir.AffineDimExpr):
                results.append(e.position)
            elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
                results.append(ZERO)
            else:
                return f"indexing map {m} is not a projection"
        operand = Operand(v, arg, results, i >= n_in)
        if operand.is_memref:
            t = operand.type
            if not _identity_layout(t):
                if row_strided and row_strided_layout(t):
                    operand.row_strided = True
                elif not strided_inputs or t.memory_space is not None:
                    return f"operand {i} ({t}) is not contiguous"
                else:
                    operand.strided = True
            if isinstance(t.element_type, (ir.IndexType, ir.ComplexType)):
                return f"operand {i} has {t.element_type} elements"
            for pos, r in enumerate(results):
                if r == ZERO and t.shape[pos] != 1:
                    return f"operand {i}: a constant index on a dim that is not 1"
                if r != ZERO and not t.is_dynamic_dim(pos):
                    static[r] = t.shape[pos]
        elif operand.is_output:
            return "an output is not a memref"
        operands.append(operand)
    reduction = ["reduction" in it for it in iterators]
    return Generic(op, operands, reduction, static, body)


def _n_outputs(op: ir.Operation) -> int:
    sizes = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
    return sizes[1]


def in_order(dims: Sequence[int], loops: Sequence[int]) -> bool:
    """`dims` are some of `loops`, in their order: an operand broadcast over the others."""
    position = [loops.index(d) for d in dims if d in loops]
    return len(position) == len(dims) and position == sorted(set(position))


def monotone(results: Sequence[int]) -> bool:
    """The loop dims (constants aside) appear in increasing order: no transpose."""
    dims = [r for r in results if r != ZERO]
    return all(a < b for a, b in zip(dims, dims[1:]))


# -- body cloning -------------------------------------------------------------------------
def clone_body(body: ir.Block, mapping: dict, index_of: Callable[[int], ir.Value],
               cloned: list[ir.Operation] | None = None, replaced: dict[int, ir.Value] | None = None,
               until: ir.Value | None = None, valid: ir.Value | None = None) -> list[ir.Value]:
    """Emit the body at the current insertion point; `mapping` gives the block arguments'
    values, `index_of(d)` the value of `linalg.index d`. Returns the yielded values; the
    copies of the body's ops are appended to `cloned` where given. `replaced`: single-result
    ops (by their place among the body's ops in pre-order, `nested_ops`, nested ones too)
    not copied: their result is the given value. `until`: a value of the body's block (an
    argument or a top-level op's result): the ops up to its definition only, and [its copy].
    `valid`: whether the element is one whose results are kept; where it is not, the body's
    checks (`cf.assert`, a gather's index in range) pass: the element's inputs may be a
    stand-in (a reduction's identity for a row past the last)."""
    mapping = dict(mapping)
    replaced = replaced or {}
    position = 0
    for op in body.operations:
        if until is not None and until in mapping:
            return [mapping[until]]
        op = op.operation
        here, position = position, position + len(walk_ops(op))
        if op.name == "linalg.yield":
            if until is not None:
                raise ValueError("clone_body: `until` is not a value of the body's block")
            return [mapping.get(v, v) for v in op.operands]
        if op.name == "linalg.index":
            mapping[op.results[0]] = index_of(ir.IntegerAttr(op.attributes["dim"]).value)
            continue
        if here in replaced:
            mapping[op.results[0]] = replaced[here]
            continue
        new = op.clone()
        if cloned is not None:
            cloned.append(new.operation)
        copies = walk_ops(new)
        for inner in copies:
            for v in list(inner.operands):
                if v in mapping:
                    inner.replace_uses_of_with(v, mapping[v])
        for k in sorted((k for k in replaced if here < k < position), reverse=True):
            copy = copies[k - here]
            copy.results[0].replace_all_uses_with(replaced[k])
            copy.erase()
        if valid is not None:
            for check in [c for c in walk_ops(new) if c.name == "cf.assert"]:
                with ir.InsertionPoint(check), check.location:
                    ok = check.operands[0]
                    check.replace_uses_of_with(ok, arith.ori(ok, arith.xori(valid, arith.constant(valid.type, 1))))
        for old, value in zip(op.results, new.results):
            mapping[old] = value
    raise ValueError("linalg.generic body without linalg.yield")


def combine(template: ir.Operation, a: ir.Value, b: ir.Value) -> ir.Value:
    """`template`'s operation (a binary combiner, e.g. arith.addf with its fastmath) on a, b.
    Only its `name` and `attributes` are read (`combiners.MAXIMUM` is not an op)."""
    attrs = {name: template.attributes[name] for name in template.attributes}
    return ir.Operation.create(template.name, results=[a.type], operands=[a, b], attributes=attrs).result


# -- host-side helpers ----------------------------------------------------------------------
def product(values: Sequence[ir.Value]) -> ir.Value:
    total = index_const(1)
    for v in values:
        total = arith.muli(total, v)
    return total


def collapse(value: ir.Value, groups: Sequence[Sequence[int]]) -> ir.Value:
    """A memref viewed with its dims grouped (`groups` partition the dims). A strided source
    keeps its layout as MLIR infers it: a group's stride is its last dim's not of size 1 (its
    last dim's where that is dynamic, which may be 1 at run time: then a dynamic stride), the
    offset kept; its groups' dims other than those of size 1 must be contiguous, as its
    static sizes and strides show (MLIR's verifier takes unknown ones, which could be wrong)."""
    t = ir.MemRefType(value.type)
    if len(groups) == t.rank:
        return value
    shape = []
    for g in groups:
        sizes = [t.shape[i] for i in g]
        shape.append(ir.ShapedType.get_dynamic_size() if any(t.is_dynamic_dim(i) for i in g)
                     else _prod(sizes))
    layout = None
    if not (isinstance(t.layout, ir.AffineMapAttr) and t.layout.value == ir.AffineMap.get_identity(t.rank)):
        strides, offset = t.get_strides_and_offset()
        dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
        collapsed = []
        for g in groups:
            last = len(g) - 1
            while last > 0 and t.shape[g[last]] == 1:
                last -= 1
            collapsed.append(strides[g[last]] if last == 0 or not t.is_dynamic_dim(g[last]) else dynamic)
            spanned = [d for d in g if t.shape[d] != 1]  # (a dim of size 1 has no stride to keep)
            for outer, inner in zip(spanned, spanned[1:]):
                if (t.is_dynamic_dim(inner) or dynamic in (strides[outer], strides[inner])
                        or strides[outer] != strides[inner] * t.shape[inner]):
                    raise ValueError(f"dims {list(g)} of {t} are not contiguous (or not known to be): "
                                     "no collapsed view")
        layout = ir.StridedLayoutAttr.get(offset, collapsed)
    out = ir.MemRefType.get(shape, t.element_type, layout, t.memory_space)
    return memref.collapse_shape(out, value, ir.ArrayAttr.get([
        ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), i) for i in g]) for g in groups]))


def flat(value: ir.Value) -> ir.Value:
    t = ir.MemRefType(value.type)
    return collapse(value, [list(range(t.rank))]) if t.rank != 1 else value


def aligned(values: Sequence[ir.Value], align: Sequence[int]) -> ir.Value:
    """Host: every memref's base pointer is a multiple of its alignment (bytes); for a view of
    another layout (a padded buffer's interior), its first element and the start of each of
    its rows too (the offset and the outer strides, in bytes)."""
    ok = arith.constant(ir.IntegerType.get_signless(1), 1)
    for v, a in zip(values, align):
        if a <= 1:
            continue
        ptr = memref.extract_aligned_pointer_as_index(v)
        t = ir.MemRefType(v.type)
        if not _identity_layout(t) and t.memory_space is None:
            meta = memref.ExtractStridedMetadataOp(v).results
            size = index_const(element_bytes(t.element_type))
            ptr = arith.addi(ptr, arith.muli(meta[1], size))
            for stride in list(meta)[2 + t.rank:2 + 2 * t.rank - 1]:
                ptr = arith.ori(ptr, arith.muli(stride, size))  # (a multiple of a, as all of them)
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, arith.remui(ptr, index_const(a)), index_const(0)))
    return ok


def divisible(value: ir.Value, by: int) -> ir.Value:
    return arith.cmpi(arith.CmpIPredicate.eq, arith.remui(value, index_const(by)), index_const(0))


def delinearize(linear: ir.Value, extents: Sequence[ir.Value]) -> list[ir.Value]:
    ivs, rest = [], linear
    for k in reversed(range(len(extents))):
        if k == 0:
            ivs.append(rest)
            break
        ivs.append(arith.remui(rest, extents[k]))
        rest = arith.divui(rest, extents[k])
    return list(reversed(ivs))


def load(view: ir.Value, indices: Sequence[ir.Value], width: int, streaming: bool = False) -> ir.Value:
    """A vector of `width` elements (16-byte-or-less aligned access) or a scalar. `streaming`:
    data the kernel reads once, marked `nontemporal` (`gpu-streaming-loads` loads it with the
    evict-first policy)."""
    t = ir.MemRefType(view.type)
    flag = True if streaming else None
    if width == 1:
        return memref.load(view, list(indices), nontemporal=flag)
    vt = ir.VectorType.get([width], t.element_type)
    return vector.load(vt, view, list(indices), nontemporal=flag, alignment=width * element_bytes(t.element_type))


def store(value: ir.Value | list[ir.Value], view: ir.Value, indices: Sequence[ir.Value]) -> None:
    t = ir.MemRefType(view.type)
    if not isinstance(value, list):
        memref.store(value, view, list(indices))
        return
    if len(value) == 1:
        memref.store(value[0], view, list(indices))
        return
    vt = ir.VectorType.get([len(value)], t.element_type)
    vector.store(vector.from_elements(vt, value), view, list(indices),
                 alignment=len(value) * element_bytes(t.element_type))


def element(loaded: ir.Value, e: int) -> ir.Value:
    if isinstance(loaded.type, ir.VectorType):
        return vector.extract(loaded, [], [e])
    return loaded


def variants(vector_ok: ir.Value | None, vector: int, emit: Callable[[int], None]) -> None:
    """`emit(vector)` where the host found the vector variant's alignment to hold, else
    `emit(1)` (a uniform branch); just `emit(1)` where there is no vector variant."""
    if vector_ok is None:
        emit(1)
        return
    choice = scf.IfOp(vector_ok, has_else=True)
    with ir.InsertionPoint(choice.then_block):
        emit(vector)
        scf.YieldOp([])
    with ir.InsertionPoint(choice.else_block):
        emit(1)
        scf.YieldOp([])


def zeroed_counters(count: ir.Value, cut: ir.Value, kind: str) -> ir.Value:
    """`count` i32 counters of a last-block reduction (blocks count themselves done on them),
    zeroed by a memset before the launch where `cut` (the work is split across blocks; else
    `count` is 0: no allocation, and no memset). The host's `scf.if` is named `<kind>-counters`."""
    i32 = ir.IntegerType.get_signless(32)
    counters = memref.alloc(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], i32), [count], [])
    zero = scf.IfOp(cut)
    zero.operation.attributes[SCHEDULE_ATTR] = ir.StringAttr.get(f"{kind}-counters")
    with ir.InsertionPoint(zero.then_block):
        token = gpu.AsyncTokenType.get()
        cleared = gpu.MemsetOp(token, [gpu.WaitOp(token, []).result], counters, arith.constant(i32, 0)).result
        gpu.WaitOp(None, [cleared])
        scf.YieldOp([])
    return counters


def guarded_launch(generic: Generic, kind: str, nonempty: ir.Value, grid: ir.Value,
                   block: ir.Value, shared: Sequence[ir.Type] = (),
                   alternative: bool = False) -> tuple[ir.Block, scf.IfOp]:
    """`scf.if nonempty { gpu.launch }` in place of the generic; returns the launch body
    (insert before its terminator) and the guard. `alternative`: the launch runs instead of
    the previous one (`ALTERNATIVE_ATTR`)."""
    guard = scf.IfOp(nonempty)
    guard.operation.attributes[SCHEDULE_ATTR] = ir.StringAttr.get(kind)
    if alternative:
        guard.operation.attributes[ALTERNATIVE_ATTR] = ir.UnitAttr.get()
    with ir.InsertionPoint(guard.then_block):
        one = index_const(1)
        launch = gpu.LaunchOp((grid, one, one), (block, one, one))
        body = launch.regions[0].blocks[0]
        for t in shared:
            body.add_argument(t, generic.op.location)
        if shared:
            launch.attributes["workgroup_attributions"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), len(shared))
        with ir.InsertionPoint(body):
            gpu.TerminatorOp()
        scf.YieldOp([])
    return body, guard


def set_kernel_attrs(launch: ir.Operation, attrs: dict[str, ir.Attribute]) -> None:
    """Give the kernel that outlining makes of `launch` these function attributes (NVVM
    launch bounds or a register cap, for a block size known only at run time). A launch's
    own attributes do not reach its outlined function: the launch is given a kernel name
    and the module a name -> attributes entry, which `gpu.merge_kernel_modules` applies."""
    module = launch
    while module.name != "builtin.module":
        module = module.parent
    table = _entries(module.attributes[KERNEL_ATTRS]) if KERNEL_ATTRS in module.attributes else {}
    name = f"kernel_with_attrs_{len(table)}"
    table[name] = ir.DictAttr.get(attrs)
    module.attributes[KERNEL_ATTRS] = ir.DictAttr.get(table)
    launch.attributes["function"] = ir.FlatSymbolRefAttr.get(name)


def requested_kernel_attrs(module: ir.Operation) -> dict[str, dict[str, ir.Attribute]]:
    """The module's `set_kernel_attrs` requests (kernel name -> attributes), removed from it."""
    if KERNEL_ATTRS not in module.attributes:
        return {}
    requested = _entries(module.attributes[KERNEL_ATTRS])
    del module.attributes[KERNEL_ATTRS]
    return {name: _entries(attrs) for name, attrs in requested.items()}


def _entries(attr: ir.Attribute) -> dict[str, ir.Attribute]:
    d = ir.DictAttr(attr)
    return {d[i].name: d[i].attr for i in range(len(d))}


def _prod(values: Sequence[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


# -- which loop extents are equal ---------------------------------------------------------------
class LoopExtents(DimClasses):
    """Union-find over buffer dims `(value, position)`, static sizes and host index values:
    two dims in one class have equal extents whenever the function runs."""

    def __init__(self, ops: list[ir.Operation], generics: dict[int, Generic]):
        super().__init__()
        for op in ops:
            if op.name == "memref.alloc":
                result = op.results[0]
                t = ir.MemRefType(result.type)
                dynamic = iter(op.operands)
                for pos in range(t.rank):
                    if t.is_dynamic_dim(pos):
                        self.union(self.dim(result, pos), self._size(next(dynamic)))
                    else:
                        self.dim(result, pos)
        for g in generics.values():
            for d in range(g.n_loops):
                dims = [self.dim(o.value, pos) for o in g.operands if o.is_memref
                        for pos, r in enumerate(o.results) if r == d]
                for a in dims[1:]:
                    self.union(dims[0], a)

    def class_of(self, v: ir.Value) -> Any:
        """The class of a host index value (an extent)."""
        return self.find(self._size(v))

    def _size(self, v: ir.Value) -> Any:
        owner = v.owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "memref.dim":
            index = owner.operation.operands[1].owner
            if not isinstance(index, ir.Block) and index.operation.name == "arith.constant":
                return self.dim(owner.operation.operands[0], ir.IntegerAttr(index.operation.attributes["value"]).value)
        return ("value", v)

    def loop(self, g: Generic, d: int) -> Any:
        o, pos = next((o, p) for o in g.operands if o.is_memref for p, r in enumerate(o.results) if r == d)
        return self.find(self.dim(o.value, pos))
