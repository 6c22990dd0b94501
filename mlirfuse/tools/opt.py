"""mlirfuse-opt: run pass pipelines over fusion IR, like mlir-opt with mlirfuse's passes added.

    mlirfuse-opt input.mlir --pass-pipeline='builtin.module(fusion-cse, fusion-to-linalg)'
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from mlir import ir

from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.errors import FusionError
from mlirfuse.passes import Pipeline, named_pipelines, registry

STDIN = "<stdin>"


def _where(location: ir.Location, source: str) -> str:
    """`file:line:col` as mlir-opt prints it (`<stdin>` for text parsed from a string; the
    input's name where the diagnostic has no file location)."""
    if location.is_a_file():
        name = STDIN if location.filename == "-" else location.filename
        return f"{name}:{location.start_line}:{location.start_col}"
    return source if str(location) == "loc(unknown)" else str(location)


def _located(diagnostics: Sequence[ir.DiagnosticInfo], source: str) -> list[str]:
    """Each diagnostic and its notes as `<file>:<line>:<col>: error|note: <message>`."""
    lines = []
    for d in diagnostics:
        severity = str(d.severity).rsplit(".", 1)[-1].lower()
        lines.append(f"{_where(d.location, source)}: {severity}: {d.message}")
        lines += [f"{_where(n.location, source)}: note: {n.message}" for n in d.notes]
    return lines


def _pass_list() -> str:
    lines = ["mlirfuse passes (mix freely with upstream MLIR passes):"]
    for info in registry().values():
        summary = info.doc.splitlines()[0] if info.doc else ""
        lines.append(f"  {info.name}: {summary.split(': ', 1)[-1]}")
        for opt, (kind, default, text) in info.options.items():
            lines.append(f"      {opt}={kind.__name__} (default {default}): {text}")
    lines.append("pipelines:")
    for name, (options, _, summary) in named_pipelines().items():
        lines.append(f"  {name}: {summary}")
        for opt, (kind, default, text) in options.items():
            lines.append(f"      {opt}={kind.__name__} (default {default}): {text}")
    return "\n".join(lines)


def _ptx(module: ir.Module) -> str:
    """The PTX of the module's gpu.binary ops (compiled with format isa)."""
    from mlirfuse.lowering.gpu.compile import binary_objects

    objects = binary_objects(module)
    if not objects:
        raise FusionError("--emit=ptx: the module has no gpu.binary (run mlirfuse-gpu-pipeline)")
    texts = [o.rstrip(b"\0").decode(errors="replace") for o in objects]
    if not all(".entry" in t or ".version" in t for t in texts):
        raise FusionError("--emit=ptx: the gpu.binary holds no PTX (compile with format isa)")
    return "\n".join(texts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mlirfuse-opt", description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_pass_list())
    parser.add_argument("input", nargs="?", default="-", help="input file ('-' for stdin)")
    parser.add_argument("--pass-pipeline", default=None, help="e.g. 'builtin.module(fusion-cse)'")
    parser.add_argument("--list-passes", action="store_true", help="list mlirfuse's passes")
    parser.add_argument("-o", dest="output", default="-", help="output file ('-' for stdout)")
    parser.add_argument("--emit", choices=["mlir", "ptx"], default="mlir",
                        help="print the IR (default) or the PTX of its gpu.binary ops")
    args = parser.parse_args(argv)
    if args.list_passes:
        print(_pass_list())
        return 0
    source = STDIN if args.input == "-" else args.input
    with fusion_dialect.context():
        try:
            # parseFile gives every op a file:line:col location; stdin text is parsed as "-".
            module = ir.Module.parse(sys.stdin.read()) if args.input == "-" else ir.Module.parseFile(args.input)
        except ir.MLIRError as e:
            # MLIR's own rendering (test/lit/invalid.mlir matches its `:line:col: message`
            # lines), then mlir-opt's `file:line:col: error: message` lines.
            print(f"{source}: error: {e}", *_located(e.error_diagnostics, source), sep="\n", file=sys.stderr)
            return 1
        if args.pass_pipeline:
            try:
                Pipeline(args.pass_pipeline).run(module)
            except FusionError as e:
                print(f"{source}: error: {e}", *_located(getattr(e, "diagnostics", ()), source), sep="\n",
                      file=sys.stderr)
                return 1
        try:
            result = _ptx(module) if args.emit == "ptx" else str(module)
        except FusionError as e:
            print(f"{source}: error: {e}", file=sys.stderr)
            return 1
    if args.output == "-":
        sys.stdout.write(result)
    else:
        with open(args.output, "w") as f:
            f.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
