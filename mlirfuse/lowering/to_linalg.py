"""fusion ops -> linalg/tensor/arith on tensors, one op at a time.

Elementwise ops become `linalg.generic`s over identity maps (operands already agree in
shape: the frontends insert broadcasts), broadcasts become generics with projected maps,
reductions generics with reduction loops, metadata ops `tensor` reshapes. Upstream
`linalg-fuse-elementwise-ops` then merges the chains into loops.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from mlirfuse.dialects.optable import OPS
from mlirfuse.errors import FusionError
from mlirfuse.lowering import indexing, philox
from mlirfuse.lowering import linalg_builders as B
from mlirfuse.lowering.scalar import Emitter, convert, lowering_target


def _ints(op: ir.Operation, name: str) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def _int(op: ir.Operation, name: str) -> int:
    return int(ir.IntegerAttr(op.attributes[name]).value)


def _tensor(v: ir.Value) -> ir.RankedTensorType:
    return ir.RankedTensorType(v.type)


def _storage_tensor(t: ir.Type) -> ir.Type:
    """Bool tensors are stored as i8 (LLVM cannot lower memrefs of i1); other types stay."""
    if not isinstance(t, ir.RankedTensorType):
        return t
    rt = ir.RankedTensorType(t)
    return ir.RankedTensorType.get(rt.shape, B.storage_type(rt.element_type))


class FusionLowering:
    """Rewrites every fusion op of a function into linalg/tensor/arith ops."""

    def __init__(self, target: str = "cpu"):
        self.target = target

    def lower_function(self, func: ir.Operation) -> None:
        block = func.regions[0].blocks[0]
        for arg in block.arguments:
            arg.set_type(_storage_tensor(arg.type))
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [_storage_tensor(t) for t in ftype.inputs], [_storage_tensor(t) for t in ftype.results]))
        for op in list(block.operations):
            op = op.operation
            if not op.name.startswith("fusion."):
                continue
            with ir.InsertionPoint(op), op.location:
                new = self.lower(op)
            for old, value in zip(op.results, new):
                old.replace_all_uses_with(value)
            op.erase()

    # -- dispatch --------------------------------------------------------------------------
    def lower(self, op: ir.Operation) -> list[ir.Value]:
        name = op.name[len("fusion."):]
        row = OPS.get(name)
        if row is None:
            raise FusionError(f"fusion-to-linalg: unknown op {op.name}")
        if row.kind == "elementwise":
            return [self.elementwise(op, row)]
        if row.kind == "reduction":
            return self.reduction(op, name)
        handler = getattr(self, f"lower_{name}", None) or getattr(self, f"lower_{row.kind}")
        return [handler(op)]

    # -- elementwise ------------------------------------------------------------------------
    def _map_elementwise(self, operands: Sequence[ir.Value], out_type: ir.RankedTensorType,
                         body, input_maps: Sequence[Sequence[int]] | None = None,
                         out_dims: Sequence[ir.Value] | None = None) -> ir.Value:
        rank = out_type.rank
        if out_dims is None:
            out_dims = B.dims_of(operands[0])
        init = B.empty(out_type.shape, out_dims, out_type.element_type)
        maps = input_maps or [list(range(rank))] * len(operands)
        return B.generic(operands, maps, init, list(range(rank)), rank, [], body)

    def elementwise(self, op: ir.Operation, row) -> ir.Value:
        out_type = _storage_tensor(op.results[0].type)
        out_elem = out_type.element_type
        operands = list(op.operands)

        def body(*args: ir.Value) -> ir.Value:
            xs = [convert(a, B.compute_type(a.type)) for a in args[:-1]]
            emitter = Emitter(xs[-1].type, self.target)
            result = row.lower(emitter, *xs)
            return convert(result, out_elem)

        return self._map_elementwise(operands, out_type, body)

    def lower_cast(self, op: ir.Operation) -> ir.Value:
        out_type = _storage_tensor(op.results[0].type)
        out = out_type.element_type

        def body(x: ir.Value, _: ir.Value) -> ir.Value:
            x = convert(x, B.compute_type(x.type))
            return convert(convert(x, B.compute_type(out)), out)

        return self._map_elementwise([op.operands[0]], out_type, body)

    def lower_constant(self, op: ir.Operation) -> ir.Value:
        out_type = _storage_tensor(op.results[0].type)
        elem = out_type.element_type
        value = op.attributes["value"]
        raw = value.value if hasattr(value, "value") else value
        if isinstance(elem, ir.IntegerType):
            scalar = ir.IntegerAttr.get(elem, int(raw) if elem.width > 1 else int(bool(raw)))
        else:
            scalar = ir.FloatAttr.get(elem, float(raw))
        return arith.constant(out_type, ir.DenseElementsAttr.get_splat(out_type, scalar))

    def lower_library(self, op: ir.Operation) -> ir.Value:
        raise FusionError(f"{op.name} is not generated code: it runs in a library between fusion "
                          "groups (run fusion-group first and lower only the groups)")

    def lower_indexing(self, op: ir.Operation) -> ir.Value:
        return indexing.LOWERINGS[op.name[len("fusion."):]](op, _storage_tensor(op.results[0].type))

    def lower_size(self, op: ir.Operation) -> ir.Value:
        return tensor.dim(op.operands[0], B.index_const(_int(op, "dim")))

    # -- shapes -----------------------------------------------------------------------------
    def _out_dims(self, op: ir.Operation, sizes: Sequence[ir.Value]) -> list[ir.Value]:
        it = iter(sizes)
        return [next(it) if s == -1 else B.index_const(s) for s in _ints(op, "shape")]

    def _broadcast(self, op: ir.Operation, bdims: Sequence[int]) -> ir.Value:
        x, sizes = op.operands[0], list(op.operands)[1:]
        out_type = _storage_tensor(op.results[0].type)
        in_shape = _tensor(x).shape
        # A size-1 input dim that grows is read at index 0.
        in_map = [B.ZERO if in_shape[i] == 1 and out_type.shape[d] != 1 else d for i, d in enumerate(bdims)]
        return self._map_elementwise([x], out_type, lambda a, _: a, [in_map], self._out_dims(op, sizes))

    def lower_broadcast_in_dim(self, op: ir.Operation) -> ir.Value:
        return self._broadcast(op, _ints(op, "broadcast_dims"))

    def lower_expand(self, op: ir.Operation) -> ir.Value:
        return self._broadcast(op, list(range(_tensor(op.operands[0]).rank)))

    def lower_reshape(self, op: ir.Operation) -> ir.Value:
        out_type = _storage_tensor(op.results[0].type)
        dims = self._out_dims(op, list(op.operands)[1:])
        shape_type = ir.RankedTensorType.get([len(dims)], ir.IndexType.get())
        shape = tensor.from_elements(shape_type, dims)
        return tensor.reshape(out_type, op.operands[0], shape)

    def lower_permute(self, op: ir.Operation) -> ir.Value:
        perm = _ints(op, "dims")
        x = op.operands[0]
        out_type = _storage_tensor(op.results[0].type)
        in_dims = B.dims_of(x)
        inverse = [perm.index(i) for i in range(len(perm))]
        return self._map_elementwise([x], out_type, lambda a, _: a, [inverse],
                                     [in_dims[p] for p in perm])

    def lower_squeeze(self, op: ir.Operation) -> ir.Value:
        x = op.operands[0]
        dims = _ints(op, "dims")
        kept = [i for i in range(_tensor(x).rank) if i not in dims]
        in_dims = B.dims_of(x)
        # Views become copies that elementwise fusion folds away; tensor reshapes would not fuse.
        it = iter(range(len(kept)))
        in_map = [B.ZERO if i in dims else next(it) for i in range(_tensor(x).rank)]
        return self._map_elementwise([x], _storage_tensor(op.results[0].type), lambda a, _: a,
                                     [in_map], [in_dims[i] for i in kept])

    def lower_unsqueeze(self, op: ir.Operation) -> ir.Value:
        x = op.operands[0]
        d = _int(op, "dim")
        dims = B.dims_of(x)
        in_map = [i if i < d else i + 1 for i in range(len(dims))]
        return self._map_elementwise([x], _storage_tensor(op.results[0].type), lambda a, _: a,
                                     [in_map], dims[:d] + [B.index_const(1)] + dims[d:])

    # -- reductions -------------------------------------------------------------------------
    def _reduce(self, x: ir.Value, axes: Sequence[int], acc: ir.Type, identity: float | int | bool,
                combine, prologue=None, extra: Sequence[tuple[ir.Value, list[int]]] = ()) -> ir.Value:
        """Reduce `x` over `axes` into a kept-dims tensor of `acc` elements."""
        xt = _tensor(x)
        kept = [i for i in range(xt.rank) if i not in axes]
        in_dims = B.dims_of(x)
        identity_value = Emitter(acc, self.target).const(identity)
        if not axes:
            # Nothing to reduce: an elementwise map (a loop-less reduction generic would be
            # taken for elementwise and fused wrongly).
            def single(*args: ir.Value) -> ir.Value:
                elem = convert(args[0], acc)
                if prologue is not None:
                    elem = prologue(elem, *args[1:-1])
                return combine(identity_value, elem)

            out_type = ir.RankedTensorType.get(list(xt.shape), acc)
            maps = [list(range(xt.rank))] + [m for _, m in extra]
            return self._map_elementwise([x] + [v for v, _ in extra], out_type, single, maps, in_dims)
        init = B.empty([xt.shape[i] for i in kept], [in_dims[i] for i in kept], acc)
        init = B.fill(init, identity_value)
        # Loop order: the input's on the CPU (contiguous inner loops vectorize); kept dims
        # first on the GPU, so that parallel loops enclose the reduction loops.
        order = list(range(xt.rank)) if self.target == "cpu" else kept + sorted(axes)
        pos = [order.index(i) for i in range(xt.rank)]
        inputs = [x] + [v for v, _ in extra]
        maps = [pos] + [[pos[d] for d in m] for _, m in extra]

        def body(*args: ir.Value) -> ir.Value:
            elem = convert(args[0], acc)
            if prologue is not None:
                elem = prologue(elem, *args[1:-1])
            return combine(args[-1], elem)

        return B.generic(inputs, maps, init, [pos[i] for i in kept], xt.rank, [pos[a] for a in axes], body)

    def _count(self, x: ir.Value, axes: Sequence[int], acc: ir.Type) -> ir.Value:
        dims = B.dims_of(x)
        n = B.index_const(1)
        for a in axes:
            n = arith.muli(n, dims[a])
        return arith.sitofp(acc, arith.index_cast(ir.IntegerType.get_signless(64), n))

    def _scale(self, t: ir.Value, factor: ir.Value, divide: bool = True) -> ir.Value:
        out_type = _tensor(t)
        fn = arith.divf if divide else arith.mulf
        return self._map_elementwise([t], out_type, lambda a, _: fn(a, factor))

    def _finish(self, t: ir.Value, x: ir.Value, axes: Sequence[int], keepdim: bool,
                result_type: ir.RankedTensorType) -> ir.Value:
        """Round to the result dtype and re-insert reduced dims when keepdim is set."""
        kept_type = ir.RankedTensorType.get(
            [s for i, s in enumerate(result_type.shape) if not (keepdim and i in axes)],
            result_type.element_type)
        if _tensor(t).element_type != result_type.element_type:
            t = self._map_elementwise([t], kept_type, lambda a, _: convert(a, result_type.element_type))
        if not keepdim:
            return t
        in_dims = B.dims_of(x)
        out_dims = [B.index_const(1) if i in axes else d for i, d in enumerate(in_dims)]
        kept = [i for i in range(len(in_dims)) if i not in axes]
        return self._map_elementwise([t], result_type, lambda a, _: a, [kept], out_dims)

    def reduction(self, op: ir.Operation, name: str) -> list[ir.Value]:
        x = op.operands[0]
        axes = _ints(op, "axes")
        keepdim = bool(ir.BoolAttr(op.attributes["keepdim"]).value)
        result_type = _storage_tensor(op.results[0].type)
        acc = B.storage_type(B.compute_type(result_type.element_type))
        if self.target == "cpu" and name not in ("prod", "max", "min") and \
                isinstance(result_type.element_type, ir.F32Type):
            # The host's loops add one element after another: in float32 the error of a sum
            # grows with its length (a mean of 2^20 float32 values was off by 5e-4, where
            # torch's and numpy's blocked sums are off by 1e-8). float64 keeps it at one
            # rounding to the float32 result. (Half-precision results round far more than a
            # float32 sum errs, and float64 -> bfloat16 has no JIT runtime routine. A GPU
            # kernel's threads and blocks add in a tree.)
            acc = ir.F64Type.get()
        e = Emitter(acc, self.target)
        fast = ir.Attribute.parse("#arith.fastmath<reassoc>")
        if name in ("sum", "prod", "max", "min"):
            if e.is_float:
                combine = {"sum": lambda a, b: arith.addf(a, b, fastmath=fast),
                           "prod": lambda a, b: arith.mulf(a, b, fastmath=fast),
                           "max": arith.maximumf, "min": arith.minimumf}[name]
                identity = {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[name]
            elif B.is_bool_storage(acc):  # 0/1 bytes
                combine = {"max": arith.maxui, "min": arith.minui}[name]
                identity = int(name == "min")
            else:
                combine = {"sum": arith.addi, "prod": arith.muli, "max": arith.maxsi, "min": arith.minsi}[name]
                width = acc.width
                identity = {"sum": 0, "prod": 1, "max": -(2 ** (width - 1)), "min": 2 ** (width - 1) - 1}[name]
            t = self._reduce(x, axes, acc, identity, combine)
            return [self._finish(t, x, axes, keepdim, result_type)]
        add = lambda a, b: arith.addf(a, b, fastmath=fast)  # noqa: E731
        count = self._count(x, axes, acc)
        mean = self._scale(self._reduce(x, axes, acc, 0.0, add), count)
        if name == "mean":
            return [self._finish(mean, x, axes, keepdim, result_type)]
        kept = [i for i in range(_tensor(x).rank) if i not in axes]

        def square_dev(elem: ir.Value, m: ir.Value) -> ir.Value:
            d = arith.subf(elem, m)
            return arith.mulf(d, d)

        sq = self._reduce(x, axes, acc, 0.0, add, square_dev, extra=[(mean, kept)])
        correction = e.const(ir.FloatAttr(op.attributes["correction"]).value)
        denom = arith.maximumf(arith.subf(count, correction), e.const(0.0))
        var = self._scale(sq, denom)
        results = [self._finish(var, x, axes, keepdim, result_type)]
        if name == "var_mean":
            results.append(self._finish(mean, x, axes, keepdim, _storage_tensor(op.results[1].type)))
        return results

    # -- random -----------------------------------------------------------------------------
    def _random(self, op: ir.Operation, lo: ir.Value | None, hi: ir.Value | None,
                seed: ir.Value, offset: ir.Value, out_dims: Sequence[ir.Value]) -> ir.Value:
        out_type = _storage_tensor(op.results[0].type)
        elem = out_type.element_type
        ft = B.compute_type(elem)
        e = Emitter(ft, self.target)
        default_lo = e.const(0.0) if lo is None else None  # rand_like's [0, 1): constants
        default_hi = e.const(1.0) if hi is None else None
        init = B.empty(out_type.shape, out_dims, elem)
        # The 0-d operands are the generic's inputs, read in its body: a value the fusion
        # computes lives in device memory on the GPU, where host code may not load it.
        scalars = [v for v in (lo, hi, seed, offset) if v is not None]

        def body(*elems: ir.Value) -> ir.Value:
            values = list(elems[:-1])
            lo_v = convert(values.pop(0), ft) if lo is not None else default_lo
            hi_v = convert(values.pop(0), ft) if hi is not None else default_hi
            seed_v, offset_v = values
            index = B.index_const(0)
            for d, extent in enumerate(out_dims):
                index = arith.addi(arith.muli(index, extent), linalg.IndexOp(d).result)
            value = convert(philox.emit_uniform(index, seed_v, offset_v, lo_v, hi_v, ft), elem)
            # [minval, maxval) in the result's type: a value that rounds to maxval (a
            # half-precision one near the top, or lo + u * (hi - lo) rounding up) is minval,
            # as torch's uniform_ does
            top = arith.cmpf(arith.CmpFPredicate.OEQ, convert(value, ft), convert(convert(hi_v, elem), ft))
            return arith.select(top, convert(lo_v, elem), value)

        rank = out_type.rank
        return B.generic(scalars, [[] for _ in scalars], init, list(range(rank)), rank, [], body)

    def lower_uniform(self, op: ir.Operation) -> ir.Value:
        lo, hi, seed, offset, *sizes = op.operands
        return self._random(op, lo, hi, seed, offset, self._out_dims(op, sizes))

    def lower_rand_like(self, op: ir.Operation) -> ir.Value:
        x, seed, offset = op.operands
        return self._random(op, None, None, seed, offset, B.dims_of(x))


def lower_module(module: ir.Operation, target: str = "cpu") -> None:
    """Lower every fusion op in every function of `module`."""
    lowering = FusionLowering(target)
    with lowering_target(target):
        for op in module.regions[0].blocks[0].operations:
            if op.operation.name == "func.func":
                lowering.lower_function(op.operation)
