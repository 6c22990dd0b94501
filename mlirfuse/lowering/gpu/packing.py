"""Independent pointwise launches packed into one (gpu-pack-launches).

A region often holds pointwise kernels that do not depend on each other: autocast's weight
casts (one per weight, each its own shape), the cos/sin tables and the rotations of a rotary
embedding. Launched one by one, each costs a launch on the host (a few microseconds, which
is most of what a small kernel costs) and a gap on the GPU. Packed, one launch runs them
all: its grid is the sum of theirs, and block b runs the kernel whose block range holds it,
as block b minus the range's start, on the threads that kernel was launched with (the packed
block has as many threads as the widest one).

A run of guarded pointwise launches is packed where nothing between them touches a buffer
on the device (only host arithmetic, views, sizes and allocations sit between) and no
launch reads or writes a buffer another one writes (buffers compared at their roots: the
function argument or allocation under any view). A kernel that reads its grid or block size
or was given kernel attributes is not packed. A transpose kernel (shared memory and a
barrier) joins a run whose launches all have its block size, a constant: every thread of
its blocks then reaches the barrier (BERT's keys transposed beside its values cast, one
launch instead of two); its shared memory becomes the packed launch's.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, scf

from mlirfuse.lowering.gpu.kernels import ALTERNATIVE_ATTR, SCHEDULE_ATTR, VIEWS, base_buffer, walk_ops
from mlirfuse.lowering.linalg_builders import index_const

PACKED_ATTR = "mlirfuse.packed"  # on a packed launch's guard: how many kernels it runs
_HOST = VIEWS + ("memref.alloc", "memref.dim", "memref.extract_aligned_pointer_as_index",
                  "memref.extract_strided_metadata", "affine.apply")
_READS = ("memref.load", "vector.load", "memref.dim", "memref.extract_aligned_pointer_as_index") + VIEWS
_STORES = {"memref.store": 1, "vector.store": 1}  # op -> position of the buffer it writes
_BLOCK_WIDE = ("gpu.barrier", "gpu.shuffle", "gpu.block_dim", "gpu.grid_dim", "gpu.block_id", "gpu.thread_id",
               "gpu.subgroup_reduce", "gpu.all_reduce")
_BLOCK_ID_X, _THREAD_ID_X = 0, 3  # the launch body's arguments it may read
_ARGUMENTS = 12  # a launch body's arguments before its shared memory's (block, thread, grid, block ids)


# Bytes of kernel parameters a packed launch may take: PTX ISA 8.0 allows 4352 (a memref
# argument is its descriptor, 8 bytes a field), less a margin for alignment.
PARAMETER_BYTES = 4096


def packable_runs(func: ir.Operation) -> list[list[ir.Operation]]:
    """The guards of each run of two or more launches that can be packed, in order."""
    runs = []
    for run in _runs(func):
        for part in _with_barriers_apart(run):
            runs += _within_parameter_space(part)
    return [r for r in runs if len(r) > 1]


def _within_parameter_space(run: list[ir.Operation]) -> list[list[ir.Operation]]:
    """The run cut where the packed kernel's parameters would outgrow PARAMETER_BYTES (an
    optimizer step's 28 parameter updates take about 9 KB)."""
    parts: list[list[ir.Operation]] = []
    taken: set = set()
    for guard in run:
        used = _parameters(_packable(guard))
        if parts and _parameter_bytes(taken | used) <= PARAMETER_BYTES:
            parts[-1].append(guard)
            taken |= used
        else:
            parts.append([guard])
            taken = set(used)
    return parts


def _parameters(launch: ir.Operation) -> set:
    """The values a kernel takes from the host (its parameters once outlined; constants are
    copied into the kernel instead)."""
    return {v for v in _used_from_outside(launch)
            if isinstance(v.owner, ir.Block) or v.owner.operation.name != "arith.constant"}


def _parameter_bytes(values: set) -> int:
    return sum(8 * (3 + 2 * v.type.rank) if isinstance(v.type, ir.MemRefType) else 8 for v in values)


def _with_barriers_apart(run: list[ir.Operation]) -> list[list[ir.Operation]]:
    """The run, or where a kernel synchronizing its block would run with fewer threads than
    the packed block (or the blocks are not all constants), the run without such kernels
    and each of them alone."""
    barrier = [g for g in run if _synchronizes(_packable(g))]
    if not barrier:
        return [run]
    blocks = {_constant(_packable(g).operands[3]) for g in run}
    if len(blocks) == 1 and None not in blocks:
        return [run]
    return [[g for g in run if g not in barrier]] + [[g] for g in barrier]


def _constant(v: ir.Value) -> int | None:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def _synchronizes(launch: ir.Operation) -> bool:
    return any(o.name == "gpu.barrier" for o in walk_ops(launch)[1:])


def _runs(func: ir.Operation) -> list[list[ir.Operation]]:
    """The guards of each run of packable launches (any length), in order."""
    runs: list[list[ir.Operation]] = []
    run: list[ir.Operation] = []
    reads: set = set()
    writes: set = set()
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        launch = _packable(op)
        if launch is not None:
            for host in [o.operation for o in op.regions[0].blocks[0].operations][:-2]:
                host.move_before(op)  # the launch's sizes (constants), defined where a packed launch sees them
            r, w = _accesses(launch)
            if _ordered((r, w), (reads, writes)):
                runs.append(run)
                run, reads, writes = [], set(), set()
            run.append(op)
            reads |= r
            writes |= w
        elif not _host_only(op):
            runs.append(run)
            run, reads, writes = [], set(), set()
    runs.append(run)
    return runs


def hoist_independent(func: ir.Operation) -> None:
    """Move each packable pointwise launch up to just after an earlier packable one, past
    what sits between where that is safe: launches (and deallocations) sharing no buffer
    with it in a way that orders them (neither writes a buffer the other reads or writes),
    and host ops whose results it does not use. The labels a cross-entropy keeps for its
    backward, written after its normalization and loss kernels, then pack with the kernel
    before them. A launch with no earlier one to join stays where it is."""
    ops = [o.operation for o in func.regions[0].blocks[0].operations]
    for i in range(len(ops)):
        op = ops[i]
        if _packable(op) is None:
            continue
        accesses = _accesses(op)
        used = _used_from_outside(op)
        carried = []  # host ops it uses (its sizes, pointers and views), moved up with it
        for x in reversed(ops[:i]):
            if _packable(x) is not None:
                if not _ordered(_accesses(x), accesses) and x != ops[i - 1]:
                    for c in reversed(carried):
                        c.move_after(x)
                        x = c
                    op.move_after(x)
                    ops = [o.operation for o in func.regions[0].blocks[0].operations]
                break
            if _host_only(x):
                if x.name == "memref.store" and any(v in used for v in x.operands):
                    break  # fills a shape buffer it (or a view carried with it) reads
                if any(r in used for r in x.results):
                    carried.append(x)
                    used |= set(x.operands)
                continue
            if x.name not in ("scf.if", "memref.dealloc") or _ordered(_accesses(x), accesses) \
                    or any(r in used for r in x.results):
                break


def _ordered(a: tuple[set, set], b: tuple[set, set]) -> bool:
    """Two ops' (reads, writes) make their order matter: one writes what the other touches."""
    return bool(a[1] & (b[0] | b[1]) or a[0] & b[1])


def _used_from_outside(op: ir.Operation) -> set:
    """The values `op` and the ops nested in it use that are defined outside it."""
    inside = walk_ops(op)
    defined = {r for o in inside for r in o.results} | {a for o in inside for region in o.regions
                                                          for block in region.blocks for a in block.arguments}
    return {v for o in inside for v in o.operands if v not in defined}


def _host_only(op: ir.Operation) -> bool:
    """Host arithmetic, views, sizes, allocations, and stores to the host's shape buffers
    (`index` elements, read by memref.reshape)."""
    if op.name == "memref.store":
        return isinstance(ir.MemRefType(op.operands[1].type).element_type, ir.IndexType)
    return op.name.startswith(("arith.", "index.")) or op.name in _HOST


def _packable(op: ir.Operation) -> ir.Operation | None:
    """The gpu.launch of a pointwise or transpose kernel's guard that can be packed, else None."""
    if op.name != "scf.if" or ALTERNATIVE_ATTR in op.attributes or SCHEDULE_ATTR not in op.attributes:
        return None
    kind = ir.StringAttr(op.attributes[SCHEDULE_ATTR]).value
    if kind not in ("pointwise", "transpose") or len(op.regions[1].blocks):
        return None
    inner = [o.operation for o in op.regions[0].blocks[0].operations]
    launches = [o for o in inner if o.name == "gpu.launch"]
    if len(launches) != 1 or not all(_host_only(o) for o in inner[:-2]) or inner[-2] != launches[0]:
        return None
    launch = launches[0]
    attrs = launch.attributes
    attributions = ir.IntegerAttr(attrs["workgroup_attributions"]).value if "workgroup_attributions" in attrs else 0
    if "function" in launch.attributes or len(launch.operands) != 6 \
            or attributions and kind != "transpose":  # shared memory (the transpose's own), async, clusters
        return None
    body = launch.regions[0].blocks[0]
    ids = list(body.arguments)[:_ARGUMENTS]
    if any(len(list(a.uses)) for k, a in enumerate(ids) if k not in (_BLOCK_ID_X, _THREAD_ID_X)):
        return None
    wide = _BLOCK_WIDE if kind == "pointwise" else tuple(n for n in _BLOCK_WIDE if n != "gpu.barrier")
    if any(o.name in wide for o in walk_ops(launch)[1:]):
        return None
    return launch


def _accesses(launch: ir.Operation) -> tuple[set, set]:
    """The root buffers the kernel (or any op with what it nests) reads and those it writes
    (any use but a read counts as a write)."""
    reads, writes = set(), set()
    for op in walk_ops(launch)[1:]:
        for k, v in enumerate(op.operands):
            if not isinstance(v.type, ir.MemRefType):
                continue
            if op.name in _READS or op.name in _STORES and k != _STORES[op.name]:
                reads.add(base_buffer(v))
            else:
                writes.add(base_buffer(v))
    return reads, writes


def pack(guards: list[ir.Operation]) -> None:
    """One guarded launch in place of `guards` (at the last one: every host value they use
    is defined by then)."""
    last = guards[-1]
    launches = [next(o.operation for o in g.regions[0].blocks[0].operations if o.operation.name == "gpu.launch")
                for g in guards]
    with ir.InsertionPoint(last), last.location:
        zero, one = index_const(0), index_const(1)
        starts = [zero]
        block = None
        for g, launch in zip(guards, launches):
            grid = arith.select(g.operands[0], launch.operands[0], zero)  # nothing where the kernel's guard fails
            starts.append(arith.addi(starts[-1], grid))
            block = launch.operands[3] if block is None else arith.maxui(block, launch.operands[3])
        guard = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ugt, starts[-1], zero))
        guard.operation.attributes[SCHEDULE_ATTR] = ir.StringAttr.get("pointwise")
        guard.operation.attributes[PACKED_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(guards))
        with ir.InsertionPoint(guard.then_block):
            packed = gpu.LaunchOp((starts[-1], one, one), (block, one, one))
            body = packed.regions[0].blocks[0]
            shared = [a for launch in launches for a in list(launch.regions[0].blocks[0].arguments)[_ARGUMENTS:]]
            for a in shared:  # the kernels' shared memory, each its own
                a.replace_all_uses_with(body.add_argument(a.type, last.location))
            if shared:
                packed.attributes["workgroup_attributions"] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(64), len(shared))
            with ir.InsertionPoint(body):
                terminator = gpu.TerminatorOp()
            scf.YieldOp([])
        bx, tx = body.arguments[_BLOCK_ID_X], body.arguments[_THREAD_ID_X]
        for k, launch in enumerate(launches):
            with ir.InsertionPoint(terminator):
                mine = arith.andi(arith.andi(arith.cmpi(arith.CmpIPredicate.uge, bx, starts[k]),
                                             arith.cmpi(arith.CmpIPredicate.ult, bx, starts[k + 1])),
                                  arith.cmpi(arith.CmpIPredicate.ult, tx, launch.operands[3]))
                branch = scf.IfOp(mine)
            with ir.InsertionPoint(branch.then_block):
                local = arith.subi(bx, starts[k])
                done = scf.YieldOp([])
            old = launch.regions[0].blocks[0]
            old.arguments[_BLOCK_ID_X].replace_all_uses_with(local)
            old.arguments[_THREAD_ID_X].replace_all_uses_with(tx)
            for inner in list(old.operations)[:-1]:  # all but its gpu.terminator
                inner.operation.move_before(done)
    for g in guards:
        g.erase()
