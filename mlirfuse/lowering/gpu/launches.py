"""Launches after the loops became kernels: index constants copied into the kernels, Philox's
high multiplies, the launch_params lines and counts (gpu-loops-to-launches), and the outlined
kernels merged into one gpu.module (gpu-merge-kernel-modules).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm

from mlirfuse.lowering.gpu import kernels as gpu_kernels
from mlirfuse.lowering.host_abi import ENTRY


def merge_kernel_modules(module: ir.Module) -> None:
    """Move every outlined kernel into the first gpu.module (renamed `<entry>_kernel_<k>`)
    and point the launches at it. Outlining makes one gpu.module per launch; each would be
    linked with libdevice, optimized and compiled (ptxas) on its own and loaded on its own at
    run time: one module does each of these once. Kernels given attributes by
    `kernels.set_kernel_attrs` get them here."""
    requested = gpu_kernels.requested_kernel_attrs(module.operation)
    modules = [op.operation for op in module.body.operations if op.operation.name == "gpu.module"]
    if not modules:
        return
    target = modules[0]
    target_name = f"{ENTRY}_kernel"  # outlining names modules after their launches' kernel names
    target_block = target.regions[0].blocks[0]
    renamed: dict[tuple[str, str], str] = {}
    for k, m in enumerate(modules):
        m_name = ir.StringAttr(m.attributes["sym_name"]).value
        for fn in list(m.regions[0].blocks[0].operations):
            fn = fn.operation
            if fn.name != "gpu.func":
                continue
            old = ir.StringAttr(fn.attributes["sym_name"]).value
            for name, value in requested.get(old, {}).items():
                fn.attributes[name] = value
            new = f"{target_name}_{k}"
            renamed[(m_name, old)] = new
            fn.attributes["sym_name"] = ir.StringAttr.get(new)
            if m is not target:
                fn.detach_from_parent()
                target_block.append(fn)
    for op in gpu_kernels.walk_ops(module.operation):
        if op.name == "gpu.launch_func":
            m_name, fn_name = ir.SymbolRefAttr(op.attributes["kernel"]).value  # @module::@kernel
            op.attributes["kernel"] = ir.SymbolRefAttr.get([target_name, renamed[(m_name, fn_name)]])
    for m in modules[1:]:
        m.erase()
    target.attributes["sym_name"] = ir.StringAttr.get(target_name)


def sink_constants(func: ir.Operation) -> None:
    """Copy the function's constants into the launches that read them: `index`, float and
    `i1` ones, and other integers where only warp shuffles read them in the launch.

    Folding hoists constants to the function; kernel outlining would make them kernel
    parameters, hiding loop bounds, strides, divisors, shuffle offsets and flags from LLVM (a
    normalization kernel over static rows branched around each butterfly level and divided
    by its row length). Other integer constants stay parameters: inlined, Philox's keys turn
    its 32-bit multiplies into 64-bit ones.
    """
    entry = func.regions[0].blocks[0]
    for launch in _launches(func):
        body = launch.regions[0].blocks[0]
        inside = gpu_kernels.walk_ops(launch)[1:]  # not the launch's own sizes
        shuffled = _shuffle_only(inside)
        copies: dict = {}
        for op in inside:
            for v in list(op.operands):
                owner = v.owner
                if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant" \
                        or owner.operation.block != entry or not _sunk(v, shuffled):
                    continue
                if v not in copies:
                    copies[v] = owner.operation.clone(ip=ir.InsertionPoint.at_block_begin(body)).results[0]
                op.replace_uses_of_with(v, copies[v])


def _sunk(v: ir.Value, shuffled: set) -> bool:
    """Whether the constant `v` is copied into the launch (`sink_constants`)."""
    t = v.type
    return isinstance(t, (ir.IndexType, ir.FloatType)) or v in shuffled \
        or (isinstance(t, ir.IntegerType) and t.width == 1)


def _shuffle_only(ops: list[ir.Operation]) -> set:
    """Values that, among `ops`, only `gpu.shuffle` ops read."""
    readers: dict = {}
    for op in ops:
        for v in op.operands:
            readers.setdefault(v, set()).add(op.name)
    return {v for v, names in readers.items() if names == {"gpu.shuffle"}}


def high_multiplies(func: ir.Operation) -> None:
    """Each 32-bit `arith.mului_extended` in a kernel (Philox's rounds) as `mul.lo` and
    `mul.hi` (`llvm.nvvm.mulhi.ui`).

    The upstream lowering multiplies the zero-extended operands in 64 bits; once LLVM folds a
    `zext(trunc x)` operand into `and x, 0xffffffff` (every round after the first), NVPTX no
    longer sees a widening multiply and emits `mul.lo.s64` plus shifts and conversions: about
    4x the instructions of a round, in the kernel's run time and in LLVM's and ptxas' time."""
    i32 = ir.IntegerType.get_signless(32)
    for launch in _launches(func):
        for op in gpu_kernels.walk_ops(launch):
            if op.name != "arith.mului_extended" or op.operands[0].type != i32:
                continue
            with ir.InsertionPoint(op), op.location:
                a, b = op.operands
                low = arith.muli(a, b)
                high = llvm.call_intrinsic(i32, "llvm.nvvm.mulhi.ui", [a, b], [], [])
            op.results[0].replace_all_uses_with(low)
            op.results[1].replace_all_uses_with(high)
            op.erase()


def launch_dims(func: ir.Operation) -> list[str]:
    """One line per gpu.launch: its gridDim and blockDim, `?` where a size is computed
    from the arguments' extents at run time."""
    def size(v: ir.Value) -> str:
        owner = v.owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "arith.constant":
            return str(ir.IntegerAttr(owner.operation.attributes["value"]).value)
        return "?"

    lines, k = [], -1
    for launch in _launches(func):
        grid, block = launch.operands[0:3], launch.operands[3:6]  # no async dependencies
        alternative = _is_alternative(launch)
        k += not alternative
        lines.append(f"launch {k}{' (or)' if alternative else ''} gridDim=({', '.join(map(size, grid))}) "
                     f"blockDim=({', '.join(map(size, block))})")
    return lines


def launch_counts(func: ir.Operation) -> tuple[int, int]:
    """(kernels, launches a call makes: a kernel's alternative variants count once)."""
    launches = _launches(func)
    return len(launches), sum(not _is_alternative(launch) for launch in launches)


def _launches(func: ir.Operation) -> list[ir.Operation]:
    return [op for op in gpu_kernels.walk_ops(func) if op.name == "gpu.launch"]


def _is_alternative(launch: ir.Operation) -> bool:
    """The launch runs instead of the one before it (`gpu_kernels.ALTERNATIVE_ATTR` on its guard)."""
    guard = launch.parent
    return guard is not None and gpu_kernels.ALTERNATIVE_ATTR in guard.operation.attributes


