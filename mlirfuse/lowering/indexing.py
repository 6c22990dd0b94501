"""Lowering of the indexing ops (iota, slice, cat, pad, gather) to linalg.

Each becomes a `linalg.generic` with no tensor inputs over its result: the body computes,
from the loop indices (`linalg.index`), where each operand is read, and reads it there.
A read of a value that an all-parallel generic computes (the elementwise chain before a
slice, the negation inside `cat((-x2, x1))`, a log-softmax before a gather) recomputes that
generic's body at the read indices instead of loading a materialized tensor (`Reader`), so
the producer chain fuses into the indexing loop; upstream elementwise fusion then fuses the
indexing loop into its consumers (its result is indexed by the identity). Other values are
read with `tensor.extract` (a load after bufferization).

A pad of a value computed from a reduction (a normalization's output, which a kernel writes
anyway) is no generic: its operand is inserted into the padded tensor (`tensor.insert_slice`)
and its border filled, so that bufferized, the operand's kernel writes the padded buffer's
interior (`output-views-in-place`, `eliminate-empty-tensors`).

Every read is in bounds: cat and pad branch (`scf.if`) so that only the operand that holds
an element is read, gather clamps its indices into the dim. An index outside [-size, size)
(negative ones count from the end) fails the gather's `cf.assert` first, as torch raises: a
device-side assert on the GPU (`__assertfail`), an `IndexOutOfRange` from the CPU backend
after the call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, cf, linalg, scf, tensor

from mlirfuse.lowering import linalg_builders as B
from mlirfuse.lowering.gpu.kernels import clone_body
from mlirfuse.lowering.reshape_indices import source_indices
from mlirfuse.lowering.scalar import convert
from mlirfuse.passes.common import use_owner

INLINE_BUDGET = 96  # body ops one read may recompute; past it, the value is loaded
# The message of a gather's check (`cf.assert`): CUDA's device-side assert prints it, and the
# CPU backend raises `IndexOutOfRange` where it fails (`cpu-asserts-as-error-flag`).
GATHER_OUT_OF_RANGE = "mlirfuse: gather index out of range (torch.gather, index_select, embedding, a target)"


def _ints(op: ir.Operation, name: str) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def _int(op: ir.Operation, name: str) -> int:
    return int(ir.IntegerAttr(op.attributes[name]).value)


def _producer(value: ir.Value) -> tuple[ir.Operation, int] | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    for k, r in enumerate(op.results):
        if r == value:
            return op, k
    return None


def _pure_parallel(op: ir.Operation, k: int) -> tuple[list, list[ir.AffineMap]] | None:
    """(input maps, ...) where `op` is an all-parallel linalg.generic whose result k is
    indexed by the identity and whose body reads no output; else None."""
    if op.name != "linalg.generic":
        return None
    if any("reduction" in str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])):
        return None
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    n_out = len(op.results)
    n_in = len(op.operands) - n_out
    if maps[n_in + k] != ir.AffineMap.get_identity(maps[n_in + k].n_dims):
        return None
    body = op.regions[0].blocks[0]
    if any(len(list(arg.uses)) for arg in list(body.arguments)[n_in:]):
        return None
    for m in maps[:n_in]:
        for e in m.results:
            if not isinstance(e, ir.AffineDimExpr) and not (isinstance(e, ir.AffineConstantExpr) and e.value == 0):
                return None
    return maps[:n_in], maps


def _computes_functions(value: ir.Value) -> bool:
    """Whether the all-parallel generics (through reshapes) that compute `value` evaluate a
    math function (exp, log, tanh, ...): work a read should not repeat where the value is
    written anyway. BERT's cross-entropy backward: the pad before the padded matmuls
    recomputed the gradient (exp of the logits) that the kernel of its other reader, the bias
    gradient's column sum, had written: 507 us for a 145 us copy (H200). Generics of fewer
    elements than `value` (broadcast operands: the sin and cos tables of rotary embeddings)
    do not count: a recomputing read reads them as any read does, loading them where they
    are written anyway. Counted, the rotary backward's slices of (g * sin) made that product
    a tensor in memory (8 MB a layer in Llama, written and read twice: H200 session 46)."""
    size = _numel(value.type)
    seen: set = set()
    pending = [value]
    while pending:
        found = _producer(pending.pop())
        if found is None or found[0] in seen:
            continue
        op, k = found
        seen.add(op)
        if size is not None and (smaller := _numel(op.results[k].type)) is not None and smaller < size:
            continue  # a broadcast operand: whether a read recomputes it is decided where it is read
        if op.name in ("tensor.reshape", "tensor.collapse_shape", "tensor.expand_shape"):
            pending.append(op.operands[0])
        elif _pure_parallel(op, k) is not None:
            body = op.regions[0].blocks[0]
            if any(o.operation.name.startswith("math.") for o in body.operations):
                return True
            n_in = len(op.operands) - len(op.results)
            pending.extend(list(op.operands)[:n_in])
    return False


def _numel(t: ir.Type) -> int | None:
    """Elements of a statically shaped tensor type; None otherwise."""
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return None
    return math.prod(t.shape)


class Reader:
    """Reads tensor values at computed indices inside a generic body, recomputing the
    all-parallel generics that produce them (within `INLINE_BUDGET` ops)."""

    def __init__(self, reader: ir.Operation, dense: bool = True) -> None:
        self.reader = reader  # the indexing op being lowered
        # Whether it reads (nearly) every element of its operands (slice, cat, pad; not a
        # gather's one element a row): then a value written for another reader is loaded,
        # not computed again where it takes math functions (`_computes_functions`).
        self.dense = dense
        self.budget = INLINE_BUDGET
        self.memo: dict[tuple, ir.Value] = {}

    def _read_elsewhere(self, value: ir.Value) -> bool:
        """Whether an op of the function other than the indexing op being lowered (and the
        generic being built for it) reads `value`: a consumer it is materialized for. Size
        queries (`tensor.dim`, and `fusion.size` not lowered yet) read no data."""
        block = self.reader.parent.regions[0].blocks[0]

        def top(op: ir.Operation) -> ir.Operation:
            while op.parent is not None and op.parent.regions[0].blocks[0] != block:
                op = op.parent.operation if isinstance(op.parent, ir.OpView) else op.parent
            return op
        building = top(ir.InsertionPoint.current.block.owner)
        for use in value.uses:
            op = top(use_owner(use))
            if op.name not in ("tensor.dim", "fusion.size") and op != self.reader and op != building:
                return True
        return False

    def read(self, value: ir.Value, indices: Sequence[ir.Value]) -> ir.Value:
        key = (value, tuple(indices))
        if key in self.memo:
            return self.memo[key]
        result = self._inline(value, indices)
        if result is None:
            result = tensor.extract(value, list(indices))
        self.memo[key] = result
        return result

    def _inline(self, value: ir.Value, indices: Sequence[ir.Value]) -> ir.Value | None:
        found = _producer(value)
        if found is None:
            return None
        op, k = found
        if op.name == "arith.constant":  # a splat constant: canonicalization folds the extract
            return None
        if self.dense and self._read_elsewhere(value) and _computes_functions(value):
            return None  # written for its other reader: a load, not the chain's exps again
        if op.name == "tensor.reshape":
            return self._through_reshape(op, indices)
        shape = _pure_parallel(op, k)
        if shape is None:
            return None
        input_maps, _ = shape
        body = op.regions[0].blocks[0]
        cost = len(list(body.operations))
        if cost > self.budget:
            return None
        self.budget -= cost
        n_in = len(input_maps)
        zero = None
        mapping = {}
        for arg, operand, m in zip(list(body.arguments)[:n_in], list(op.operands)[:n_in], input_maps):
            at = []
            for e in m.results:
                if isinstance(e, ir.AffineDimExpr):
                    at.append(indices[e.position])
                else:
                    zero = zero or B.index_const(0)
                    at.append(zero)
            mapping[arg] = self.read(operand, at)
        return clone_body(body, mapping, lambda d: indices[d])[k]

    def _through_reshape(self, op: ir.Operation, indices: Sequence[ir.Value]) -> ir.Value | None:
        """A read of a reshape's result as a read of its source, at the same row-major
        position: so the computation behind a view (`logits.float().view(-1, V)` before
        cross-entropy's gather) is recomputed too. Only where the source is computed by a
        generic this reader recomputes; a reshape of anything else is read as it is."""
        source = op.operands[0]
        found = _producer(source)
        if found is None or _pure_parallel(*found) is None:
            return None
        result_t, source_t = ir.RankedTensorType(op.results[0].type), ir.RankedTensorType(source.type)

        def dim(value: ir.Value) -> Callable[[int], ir.Value]:
            return lambda d: tensor.dim(value, B.index_const(d))

        at = source_indices(list(indices), dim(op.results[0]), dim(source), list(source_t.shape), list(result_t.shape))
        return self.read(source, at)

    def branch(self, cond: ir.Value, result_type: ir.Type, then: Callable[[], ir.Value],
               otherwise: Callable[[], ir.Value]) -> ir.Value:
        """scf.if cond then `then()` else `otherwise()`: reads in a branch stay in it."""
        op = scf.IfOp(cond, [result_type], has_else=True)
        for block, fn in ((op.then_block, then), (op.else_block, otherwise)):
            saved = dict(self.memo)
            with ir.InsertionPoint(block):
                scf.YieldOp([fn()])
            self.memo = saved
        return op.results[0]


def _indexing_generic(out_type: ir.RankedTensorType, out_dims: Sequence[ir.Value],
                      body: Callable[[list[ir.Value]], ir.Value]) -> ir.Value:
    """A generic without inputs over the result; body(indices) returns the element."""
    rank = out_type.rank
    init = B.empty(out_type.shape, out_dims, out_type.element_type)

    def element(_: ir.Value) -> ir.Value:
        return body([linalg.IndexOp(d).result for d in range(rank)])

    return B.generic([], [], init, list(range(rank)), rank, [], element)


def _dims(out_type: ir.RankedTensorType, dynamic: Callable[[int], ir.Value]) -> list[ir.Value]:
    return [dynamic(d) if out_type.is_dynamic_dim(d) else B.index_const(s) for d, s in enumerate(out_type.shape)]


def _sized_dims(op: ir.Operation, sizes: Sequence[ir.Value]) -> list[ir.Value]:
    it = iter(sizes)
    return [next(it) if s == -1 else B.index_const(s) for s in _ints(op, "shape")]


def _compute(t: ir.Type) -> ir.Type:
    return B.compute_type(t)


def lower_iota(op: ir.Operation, out_type: ir.RankedTensorType) -> ir.Value:
    dim = _int(op, "dim")
    elem = out_type.element_type
    ct = _compute(elem)
    start, step = op.attributes["start"], op.attributes["step"]
    i64 = ir.IntegerType.get_signless(64)

    def const(attr: ir.Attribute) -> ir.Value:
        if isinstance(ct, ir.IntegerType):
            return arith.constant(ct, int(ir.IntegerAttr(attr).value))
        return arith.constant(ct, float(ir.FloatAttr(attr).value))

    def body(idx: list[ir.Value]) -> ir.Value:
        i = arith.index_cast(i64, idx[dim])
        i = convert(i, ct) if isinstance(ct, ir.IntegerType) else arith.sitofp(ct, i)
        mul, add = (arith.muli, arith.addi) if isinstance(ct, ir.IntegerType) else (arith.mulf, arith.addf)
        return convert(add(const(start), mul(const(step), i)), elem)

    return _indexing_generic(out_type, _sized_dims(op, list(op.operands)), body)


def lower_slice(op: ir.Operation, out_type: ir.RankedTensorType) -> ir.Value:
    """A dim of dynamic length is clamped into the input: its length comes from a size the
    caller vouches for (the torch backend's metadata), and no read may leave the tensor."""
    x = op.operands[0]
    starts, steps = _ints(op, "starts"), _ints(op, "steps")
    in_dims = B.dims_of(x)
    reader = Reader(op)

    def body(idx: list[ir.Value]) -> ir.Value:
        at = []
        for d, (i, s, st) in enumerate(zip(idx, starts, steps)):
            if st != 1:
                i = arith.muli(i, B.index_const(st))
            if s != 0:
                i = arith.addi(i, B.index_const(s))
            if out_type.is_dynamic_dim(d):
                i = arith.minsi(i, arith.subi(in_dims[d], B.index_const(1)))
            at.append(i)
        return reader.read(x, at)

    return _indexing_generic(out_type, _sized_dims(op, list(op.operands)[1:]), body)


def lower_cat(op: ir.Operation, out_type: ir.RankedTensorType) -> ir.Value:
    inputs = list(op.operands)
    dim = _int(op, "dim")
    first_dims = B.dims_of(inputs[0])
    extents = [B.dims_of(x)[dim] for x in inputs]
    ends = []
    total = None
    for e in extents:
        total = e if total is None else arith.addi(total, e)
        ends.append(total)
    out_dims = [total if d == dim else first_dims[d] for d in range(out_type.rank)]
    reader = Reader(op)
    elem = out_type.element_type

    def body(idx: list[ir.Value]) -> ir.Value:
        def part(k: int) -> ir.Value:
            at = list(idx)
            if k:
                at[dim] = arith.subi(idx[dim], ends[k - 1])
            if k == len(inputs) - 1:
                return reader.read(inputs[k], at)
            inside = arith.cmpi(arith.CmpIPredicate.ult, idx[dim], ends[k])
            return reader.branch(inside, elem, lambda: reader.read(inputs[k], at), lambda: part(k + 1))
        return part(0)

    return _indexing_generic(out_type, out_dims, body)


def lower_pad(op: ir.Operation, out_type: ir.RankedTensorType) -> ir.Value:
    x, value = op.operands
    low, high = _ints(op, "low"), _ints(op, "high")
    in_dims = B.dims_of(x)
    if min(low + high, default=0) >= 0 and max(low + high, default=0) > 0 and _after_a_reduction(x):
        return _pad_in_place(x, value, low, high, in_dims, out_type)
    reader = Reader(op)

    def out_dim(d: int) -> ir.Value:
        return arith.addi(in_dims[d], B.index_const(low[d] + high[d]))

    def body(idx: list[ir.Value]) -> ir.Value:
        fill = reader.read(value, [])
        at, inside = [], None
        for d, i in enumerate(idx):
            if low[d] == 0 and high[d] == 0:
                at.append(i)
                continue
            j = arith.subi(i, B.index_const(low[d]))  # may wrap below 0: the unsigned test catches it
            ok = arith.cmpi(arith.CmpIPredicate.ult, j, in_dims[d])
            inside = ok if inside is None else arith.andi(inside, ok)
            at.append(j)
        if inside is None:
            return reader.read(x, at)
        return reader.branch(inside, out_type.element_type, lambda: reader.read(x, at), lambda: fill)

    return _indexing_generic(out_type, _dims(out_type, out_dim), body)


def _after_a_reduction(value: ir.Value) -> bool:
    """`value` is computed from a reduction of this function (a normalization's output, BERT's
    masked-LM gradient): a kernel writes it anyway, and can write it into the padded buffer.
    A pad of values computed elementwise from the inputs stays one kernel reading them
    (`Reader`), its padded output written whole."""
    work, seen = [value], set()
    while work:
        v = work.pop()
        producer = _producer(v)
        if producer is None or producer[0] in seen:
            continue
        op = producer[0]
        seen.add(op)
        if op.name.startswith("fusion.") and "axes" in op.attributes or \
                op.name == "linalg.generic" and "reduction" in str(op.attributes["iterator_types"]):
            return True
        work.extend(op.operands)
    return False


def _mixed(values: Sequence[ir.Value | int]) -> tuple[list[ir.Value], list[int]]:
    """(the dynamic operands, the static list) of an offset, size or stride list."""
    dynamic, static = [], []
    for v in values:
        if isinstance(v, int):
            static.append(v)
            continue
        owner = v.owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "arith.constant":
            static.append(ir.IntegerAttr(owner.operation.attributes["value"]).value)
            continue
        dynamic.append(v)
        static.append(ir.ShapedType.get_dynamic_size())
    return dynamic, static


def _insert(source: ir.Value, dest: ir.Value, offsets: Sequence, sizes: Sequence) -> ir.Value:
    dyn_off, st_off = _mixed(offsets)
    dyn_size, st_size = _mixed(sizes)
    return tensor.insert_slice(source, dest, dyn_off, dyn_size, [], st_off, st_size, [1] * len(sizes))


def _pad_in_place(x: ir.Value, value: ir.Value, low: list[int], high: list[int], in_dims: list[ir.Value],
                  out_type: ir.RankedTensorType) -> ir.Value:
    """A pad that crops nothing: its operand inserted into the padded tensor, whose border
    (one box per padded side: the dims before it inside, the dims after it whole) is filled.
    Bufferized, the operand's producer writes the padded buffer's interior in place (empty
    tensors eliminated) and the fills write only the border."""
    rank = len(low)
    out_dims = [arith.addi(in_dims[d], B.index_const(low[d] + high[d])) if low[d] + high[d] else in_dims[d]
                for d in range(rank)]
    dest = B.empty(out_type.shape, out_dims, out_type.element_type)
    fill = tensor.extract(value, [])
    for d in range(rank):
        for start, size in ((0, low[d]), (arith.addi(in_dims[d], B.index_const(low[d])), high[d])):
            if not size:
                continue
            offsets = [low[k] if k < d else start if k == d else 0 for k in range(rank)]
            sizes = [in_dims[k] if k < d else size if k == d else out_dims[k] for k in range(rank)]
            _, shape = _mixed(sizes)
            box = B.fill(B.empty(shape, [s if not isinstance(s, int) else None for s in sizes],
                                 out_type.element_type), fill)
            dest = _insert(box, dest, offsets, sizes)
    return _insert(x, dest, low, in_dims)


def lower_gather(op: ir.Operation, out_type: ir.RankedTensorType) -> ir.Value:
    x, index = op.operands
    dim = _int(op, "dim")
    size = B.dims_of(x)[dim]
    reader = Reader(op, dense=False)
    idx_type = ir.IndexType.get()

    def body(idx: list[ir.Value]) -> ir.Value:
        raw = reader.read(index, idx)
        i = arith.index_cast(idx_type, raw)
        zero = B.index_const(0)
        # [-size, size), negative ones counted from the end (numpy's take_along_axis, torch's
        # advanced indexing); outside it, the check fails as torch raises
        inside = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, i, arith.subi(zero, size)),
                            arith.cmpi(arith.CmpIPredicate.slt, i, size))
        cf.AssertOp(inside, GATHER_OUT_OF_RANGE)
        i = arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, zero), arith.addi(i, size), i)
        last = arith.subi(size, B.index_const(1))
        i = arith.maxsi(arith.minsi(i, last), zero)  # the read stays in bounds all the same
        at = list(idx)
        at[dim] = i
        return reader.read(x, at)

    result = _indexing_generic(out_type, B.dims_of(index), body)
    if _read_in_part(op.results[0]):
        result.owner.attributes[KEEP_CHECKS] = ir.UnitAttr.get()
    return result


# A gather whose result is read only in part: consumers computing the elements they read
# (fusion copies the gather into them) check only the indices of those elements, so the gather
# itself stays for its checks (`linalg-drop-dead-checks` keeps it though nothing reads it).
KEEP_CHECKS = "mlirfuse.keep_checks"


def _read_in_part(value: ir.Value) -> bool:
    """Some fusion op reads `value` (or what is computed from it) at only some positions: a
    slice, a pad that crops, a gather's input. Each value is visited once (a value read twice
    on the way, y * y + y, would otherwise double the paths at each step)."""
    work, seen = [value], set()
    while work:
        v = work.pop()
        for use in v.uses:
            user = use_owner(use)
            name = user.name
            if name == "fusion.slice" or name == "fusion.gather" and use.operand_number == 0 or \
                    name == "fusion.pad" and min(_ints(user, "low") + _ints(user, "high"), default=0) < 0:
                return True
            for r in user.results:
                if r not in seen:
                    seen.add(r)
                    work.append(r)
    return False


LOWERINGS = {"iota": lower_iota, "slice": lower_slice, "cat": lower_cat, "pad": lower_pad, "gather": lower_gather}
