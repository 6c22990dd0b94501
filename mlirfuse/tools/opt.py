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
from mlirfuse.passes import Pipeline, registry


def _pass_list() -> str:
    lines = ["mlirfuse passes (mix freely with upstream MLIR passes):"]
    for info in registry().values():
        summary = info.doc.splitlines()[0] if info.doc else ""
        lines.append(f"  {info.name}: {summary.split(': ', 1)[-1]}")
        for opt, (kind, default, text) in info.options.items():
            lines.append(f"      {opt}={kind.__name__} (default {default}): {text}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mlirfuse-opt", description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_pass_list())
    parser.add_argument("input", nargs="?", default="-", help="input file ('-' for stdin)")
    parser.add_argument("--pass-pipeline", default=None, help="e.g. 'builtin.module(fusion-cse)'")
    parser.add_argument("--list-passes", action="store_true", help="list mlirfuse's passes")
    parser.add_argument("-o", dest="output", default="-", help="output file ('-' for stdout)")
    args = parser.parse_args(argv)
    if args.list_passes:
        print(_pass_list())
        return 0
    text = sys.stdin.read() if args.input == "-" else open(args.input).read()
    with fusion_dialect.context():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as e:
            print(f"{args.input}: error: {e}", file=sys.stderr)
            return 1
        if args.pass_pipeline:
            try:
                Pipeline(args.pass_pipeline).run(module)
            except FusionError as e:
                print(f"{args.input}: error: {e}", file=sys.stderr)
                return 1
        result = str(module)
    if args.output == "-":
        sys.stdout.write(result)
    else:
        with open(args.output, "w") as f:
            f.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
