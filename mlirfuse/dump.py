"""Debug dumps selected by MLIRFUSE_DUMP (or mlirfuse.set_options(dump="a,b")).

Each dump goes to stderr, or to `<MLIRFUSE_DUMP_DIR>/<fusion hash>-<name>.txt`; inside
`capture()` (nvFuser's `execute(capture_debug_output=True)`) to a string instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import sys
import warnings
from pathlib import Path
from typing import Iterator

from mlirfuse import config
from mlirfuse.frontend.graph import Fusion
from mlirfuse.frontend.symbolic import SymSize

DUMPS = {
    "fusion_ir": "the traced fusion IR",
    "fusion_ir_presched": "after fusion-group and fusion-strip-bookend-views",
    "segmented_fusion": "the fusion IR with every op's segment and every segment's scheduler",
    "segmenter_logging": "why the segmenter rejected each merge",
    "scheduled_ir": "linalg on tensors after fusion (what each kernel computes)",
    "linalg": "alias of scheduled_ir",
    "gpu": "gpu.launch IR (GPU backend)",
    "ptx": "generated PTX (GPU backend)",
    "launch_params": "block/grid of every launch (GPU backend)",
    "kernel_args": "every call's arguments: shapes, strides, dtypes",
    "eff_bandwidth": "bytes moved / kernel time per call (CPU backend; GPU: torch tensors, each call repeated "
                     "10 times back to back between events)",
    "compile_time": "GPU backend: seconds to compile (or take from the disk cache), load and link a fusion",
    "python_definition": "an equivalent FusionDefinition script",
    "pipeline": "the mlirfuse-opt command replaying each stage",
    "fx_graph": "torch.compile backend: each aten FX graph it is given",
    "partition": "torch.compile backend: fused groups, nodes left to torch and why, the compiled graph",
}


if config.options().dump - DUMPS.keys():  # names from MLIRFUSE_DUMP: say so once, then go on
    warnings.warn(f"MLIRFUSE_DUMP: unknown dump(s) {sorted(config.options().dump - DUMPS.keys())} ignored; "
                  f"known: {', '.join(sorted(DUMPS))}", RuntimeWarning, stacklevel=1)


_CAPTURED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("mlirfuse_captured_dumps", default=None)


def enabled(name: str) -> bool:
    return name in config.options().dump


@contextlib.contextmanager
def capture() -> Iterator[list[str]]:
    """The dumps emitted inside the block, as texts in a list (instead of stderr or files)."""
    texts: list[str] = []
    token = _CAPTURED.set(texts)
    try:
        yield texts
    finally:
        _CAPTURED.reset(token)


def emit(name: str, text: str, key: str = "") -> None:
    opts = config.options()
    if name not in opts.dump:
        return
    captured = _CAPTURED.get()
    if captured is not None:
        captured.append(f"===== mlirfuse {name} {key} =====\n{text.rstrip()}\n")
    elif opts.dump_dir:
        folder = Path(opts.dump_dir)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{key or 'mlirfuse'}-{name}.txt"
        with open(path, "a") as f:
            f.write(text.rstrip() + "\n")
    else:
        sys.stderr.write(f"===== mlirfuse {name} {key} =====\n{text.rstrip()}\n")


def key_of(fusion_ir: str) -> str:
    return hashlib.sha256(fusion_ir.encode()).hexdigest()[:12]


@contextlib.contextmanager
def capture_log(logger_name: str) -> Iterator[list[str]]:
    """Collect a logger's records (for segmenter_logging)."""
    lines: list[str] = []

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(logger_name)
    handler = _Handler()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _size(s: object, inputs: dict[int, str]) -> str:
    if isinstance(s, SymSize):
        parts = [f"fd.ops.size({inputs[f[0]]}, {f[1]})" for f in s.factors]
        text = " * ".join(parts)
        if s.coef.numerator != 1:
            text += f" * {s.coef.numerator}"
        if s.coef.denominator != 1:
            text = f"({text}) // {s.coef.denominator}"
        return text if not s.offset else f"{text} + {s.offset}"
    return str(s)


def python_definition(fusion: Fusion) -> str:
    """An equivalent FusionDefinition script for a traced fusion."""
    names: dict[int, str] = {}  # tensor id -> variable
    inputs: dict[int, str] = {}  # input position -> variable (sizes refer to inputs)
    lines = ["from mlirfuse import FusionDefinition, DataType", "", "with FusionDefinition() as fd:"]
    dt = "DataType.{}".format
    for pos, (t, spec) in enumerate(zip(fusion.inputs, fusion.specs)):
        name = f"T{t.id}"
        names[t.id] = inputs[pos] = name
        if spec.scalar:
            lines.append(f"    {name} = fd.define_scalar(None, dtype={dt(spec.dtype.name)})")
        else:
            shape = [-1 if s is None else s for s in spec.shape]
            read_as = f"  # the argument's permute{spec.order}" if spec.order is not None else ""
            lines.append(f"    {name} = fd.define_tensor(shape={shape}, contiguity={spec.contiguous}, "
                         f"dtype={dt(spec.dtype.name)}){read_as}")
    for node in fusion.nodes:
        args = [names[t.id] for t in node.inputs]
        out = node.outputs[0]
        shape = "[" + ", ".join(_size(s, inputs) for s in out.shape) + "]"
        a = node.attrs
        if node.op == "constant":
            call = f"fd.define_scalar({a['value']!r}, dtype={dt(out.dtype.name)})"
        elif node.op == "cast":
            call = f"fd.ops.cast({args[0]}, dtype={dt(out.dtype.name)})"
        elif node.op in ("sum", "prod", "max", "min", "mean"):
            call = f"fd.ops.{node.op}({args[0]}, axes={a['axes']}, keepdim={a['keepdim']})"
        elif node.op in ("var", "var_mean"):
            call = (f"fd.ops.{node.op}({args[0]}, axes={a['axes']}, correction={a['correction']}, "
                    f"keepdim={a['keepdim']})")
        elif node.op == "broadcast_in_dim":
            call = f"fd.ops.broadcast_in_dim({args[0]}, shape={shape}, broadcast_dims={a['broadcast_dims']})"
        elif node.op in ("expand", "reshape"):
            call = f"fd.ops.{node.op}({args[0]}, {shape})"
        elif node.op in ("permute", "squeeze"):
            call = f"fd.ops.{node.op}({args[0]}, {a['dims']})"
        elif node.op == "unsqueeze":
            call = f"fd.ops.unsqueeze({args[0]}, {a['dim']})"
        elif node.op == "uniform":
            call = (f"fd.ops.uniform({args[0]}, {args[1]}, {shape}, seed={args[2]}, offset={args[3]}, "
                    f"dtype={dt(out.dtype.name)})")
        elif node.op == "rand_like":
            call = f"fd.ops.rand_like({args[0]}, seed={args[1]}, offset={args[2]}, dtype={dt(out.dtype.name)})"
        elif node.op == "iota":
            n = _size(out.shape[a["dim"]], inputs)
            call = f"fd.ops.iota({n}, {a['start']!r}, {a['step']!r}, dtype={dt(out.dtype.name)})"
            if len(out.shape) != 1:
                call = f"fd.ops.broadcast_in_dim({call}, shape={shape}, broadcast_dims=[{a['dim']}])"
        elif node.op == "slice":
            ends = [_size(st + (n - 1) * step + 1 if isinstance(n, int) else n * step + (st - step + 1), inputs)
                    for st, step, n in zip(a["starts"], a["steps"], out.shape)]
            call = f"fd.ops.slice({args[0]}, {a['starts']}, [{', '.join(ends)}], {a['steps']})"
        elif node.op == "cat":
            call = f"fd.ops.cat([{', '.join(args)}], {a['dim']})"
        elif node.op == "pad":
            widths = [w for lo, hi in reversed(list(zip(a["low"], a["high"]))) for w in (lo, hi)]
            call = f"fd.ops.pad({args[0]}, {widths}, {args[1]})"
        elif node.op == "gather":
            call = f"fd.ops.gather({args[0]}, {args[1]}, {a['dim']})"
        else:
            call = f"fd.ops.{node.op}({', '.join(args)})"
        targets = [f"T{o.id}" for o in node.outputs]
        for o, target in zip(node.outputs, targets):
            names[o.id] = target
        lines.append(f"    {', '.join(targets)} = {call}")
    for t in fusion.outputs:
        lines.append(f"    fd.add_output({names[t.id]})")
    return "\n".join(lines) + "\n"
