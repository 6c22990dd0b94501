"""Schedules as data in the IR: a kernel's schedule kind and parameters as the
`mlirfuse.schedule` dictionary attribute of its linalg op, and back.

    mlirfuse.schedule = {kind = "pointwise", vector = 4 : i64, unroll = 4 : i64, block = 256 : i64}
    mlirfuse.schedule = {kind = "inner_reduction", vector = 4 : i64, ..., tiers = [{max_row = 16 : i64,
                         threads = 1 : i64}, ..., {threads = 512 : i64}], split_blocks = 264 : i64, ...}
    mlirfuse.schedule = {kind = "naive", reason = "operand 2 is not a contiguous row ([])"}

`gpu-schedule` writes them from the heuristics (`schedules.py`), `gpu-apply-schedules` reads
them; a user may write or edit one by hand. `read` checks what it can without the op (known
kind, fields, block and vector limits); whether the kind fits the op is the applier's check.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mlir import ir

from mlirfuse.errors import FusionError
from mlirfuse.lowering.gpu import heuristics as S

ATTR = "mlirfuse.schedule"
PARAMS: dict[str, type] = {
    "pointwise": S.PointwiseParams,
    "transpose": S.TransposeParams,
    "inner_reduction": S.InnerReductionParams,
    "column_reduction": S.ColumnReductionParams,
    "normalization": S.NormalizationParams,
}
KINDS = tuple(PARAMS) + ("naive",)
MAX_BLOCK = 1024  # threads a block may have on every NVIDIA GPU


class ScheduleError(FusionError):
    """A schedule attribute that cannot be applied (said at its op)."""


def _value_attr(value: Any) -> ir.Attribute:
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    if isinstance(value, tuple):  # row tiers
        return ir.ArrayAttr.get([ir.DictAttr.get({k: _value_attr(v) for k, v in dataclasses.asdict(t).items()
                                                  if v is not None}) for t in value])
    raise TypeError(f"cannot store schedule value {value!r}")


def to_attr(kind: str, params: Any = None, reason: str = "") -> ir.DictAttr:
    """The attribute for a schedule (params: the heuristic's dataclass; naive: its reason)."""
    fields: dict[str, ir.Attribute] = {"kind": ir.StringAttr.get(kind)}
    if kind == "naive":
        fields["reason"] = ir.StringAttr.get(reason)
    else:
        fields.update({f.name: _value_attr(getattr(params, f.name)) for f in dataclasses.fields(params)})
    return ir.DictAttr.get(fields)


def _int(attr: ir.Attribute, what: str) -> int:
    if not isinstance(attr, ir.IntegerAttr):
        raise ScheduleError(f"{what} must be an integer, got {attr}")
    return ir.IntegerAttr(attr).value


def _tiers(attr: ir.Attribute) -> tuple[S.RowTier, ...]:
    if not isinstance(attr, ir.ArrayAttr) or len(attr) == 0:
        raise ScheduleError(f"tiers must be a non-empty array of {{max_row, threads}}, got {attr}")
    tiers = []
    for t in attr:
        if not isinstance(t, ir.DictAttr) or "threads" not in t:
            raise ScheduleError(f"a tier needs threads (and max_row, except the last), got {t}")
        max_row = _int(t["max_row"], "a tier's max_row") if "max_row" in t else None
        tiers.append(S.RowTier(max_row, _int(t["threads"], "a tier's threads")))
    return tuple(tiers)


def read(attr: ir.Attribute) -> tuple[str, Any]:
    """(kind, params) of a schedule attribute; for "naive", params is its reason."""
    if not isinstance(attr, ir.DictAttr) or "kind" not in attr or not isinstance(attr["kind"], ir.StringAttr):
        raise ScheduleError(f'{ATTR} must be a dictionary with a string kind, got {attr}')
    kind = ir.StringAttr(attr["kind"]).value
    if kind not in KINDS:
        raise ScheduleError(f"unknown schedule kind '{kind}' (kinds: {', '.join(KINDS)})")
    if kind == "naive":
        return kind, ir.StringAttr(attr["reason"]).value if "reason" in attr else "written by hand"
    cls = PARAMS[kind]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [a.name for a in attr if a.name != "kind" and a.name not in fields]
    if unknown:
        raise ScheduleError(f"{kind} schedule: unknown parameter(s) {unknown} (parameters: {', '.join(fields)})")
    values = {}
    for name, f in fields.items():
        if name not in attr:
            if f.default is dataclasses.MISSING:
                raise ScheduleError(f"{kind} schedule: missing parameter '{name}'")
            continue
        values[name] = _tiers(attr[name]) if name == "tiers" else _int(attr[name], f"{kind} schedule's {name}")
    params = cls(**values)
    _check_limits(kind, params)
    return kind, params


def _check_limits(kind: str, params: Any) -> None:
    vector = params.vector
    if vector < 1 or vector & (vector - 1) or vector > S.VECTOR_BYTES:
        raise ScheduleError(f"{kind} schedule: vector width {vector} is not a power of two up to {S.VECTOR_BYTES}")
    block = params.block
    if not 1 <= block <= MAX_BLOCK:
        raise ScheduleError(f"{kind} schedule: block of {block} threads (1 to {MAX_BLOCK})")
    if kind == "transpose":
        if params.tile != S.LANES_ACROSS * vector:
            raise ScheduleError(f"transpose schedule: tile {params.tile} must be {S.LANES_ACROSS} x vector "
                                f"({S.LANES_ACROSS * vector})")
        threads, rest = divmod(block, params.squares) if params.squares >= 1 else (0, 1)
        if rest or threads % S.LANES_ACROSS or params.tile % (threads // S.LANES_ACROSS or 1) \
                or threads // S.LANES_ACROSS > params.tile:
            raise ScheduleError(f"transpose schedule: {params.squares} square(s) in blocks of {block} threads: "
                                f"a square's threads must be a multiple of {S.LANES_ACROSS} whose rows of "
                                f"{S.LANES_ACROSS} divide the tile of {params.tile}")
    if getattr(params, "unroll", 1) < 1:
        raise ScheduleError(f"{kind} schedule: unroll {params.unroll} (at least 1)")
    if getattr(params, "narrow_unroll", 0) < 0:
        raise ScheduleError(f"{kind} schedule: narrow_unroll {params.narrow_unroll} (0: unroll, or at least 1)")
    narrow = getattr(params, "narrow_block_x", 0)
    if narrow and (narrow & (narrow - 1) or narrow >= params.block_x):
        raise ScheduleError(f"{kind} schedule: narrow_block_x {narrow} must be 0 or a power of two under "
                            f"block_x ({params.block_x})")
    for t in getattr(params, "tiers", ()):
        if not 1 <= t.threads <= block:
            raise ScheduleError(f"{kind} schedule: a tier of {t.threads} threads in blocks of {block}")
    if kind == "column_reduction" and params.registers and (
            not 1 <= params.registers <= S.MAX_REGISTERS or params.registers * block > S.REGISTER_FILE):
        raise ScheduleError(f"column_reduction schedule: a cap of {params.registers} registers a thread in blocks "
                            f"of {block} (0: none; at most {S.MAX_REGISTERS}, and {S.REGISTER_FILE} a block)")
    if kind == "normalization":  # rows share blocks and warps: powers of two
        for what, n in [("tier", t.threads) for t in params.tiers] + [("loop_threads", params.loop_threads)]:
            if not 1 <= n <= block or n & (n - 1):
                raise ScheduleError(f"normalization schedule: {what} of {n} threads, not a power of two up to "
                                    f"the block of {block}")
        if params.loop_slots < 1:
            raise ScheduleError(f"normalization schedule: loop_slots {params.loop_slots} (at least 1)")
        if not 1 <= params.registers <= S.MAX_REGISTERS or params.registers * block > S.REGISTER_FILE:
            raise ScheduleError(f"normalization schedule: {params.registers} registers a thread in blocks of "
                                f"{block} (at most {S.MAX_REGISTERS}, and {S.REGISTER_FILE} a block)")


def check_vector(kind: str, params: Any, element_bytes: list[int]) -> None:
    """The vector width the op's widest operand can take: vector x its bytes <= 16."""
    widest = max(element_bytes, default=4)
    if params.vector * widest > S.VECTOR_BYTES:
        raise ScheduleError(f"{kind} schedule: vector width {params.vector} for {widest}-byte elements "
                            f"exceeds a {S.VECTOR_BYTES}-byte access (at most {S.VECTOR_BYTES // widest})")
