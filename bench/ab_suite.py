"""The suite in one run for two checkouts (A: a tree before a change, B: this one), row by row.

    python bench/ab_suite.py --a <checkout> [--rows 0-20] [--json out.json]

For every row, each checkout's `bench/suite.py --row` runs in a process of its own, the
order alternating from row to row (A then B, then B then A) so that drift over the run does
not favour one side; the copy bandwidth is measured once and the torch.compile twins are
compiled before the rows (both sides share them). Prints the Markdown table of mlirfuse's
kernel time on each side (the best of its 3 interleaved rounds, as the suite reports it),
B/A, and torch.compile's time on each side (the same kernels: their ratio shows the noise);
writes the rows to --json.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import suite  # noqa: E402
import torch  # noqa: E402


def run_row(checkout: Path, index: int, copy_gbps: float) -> dict:
    argv = [sys.executable, str(checkout / "bench" / "suite.py"), "--row", str(index), "--copy-gbps", str(copy_gbps)]
    out = subprocess.run(argv, capture_output=True, text=True)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the checkout to compare with (its bench/suite.py runs its rows)")
    parser.add_argument("--rows", default=f"0-{len(suite.CASES) - 1}", help="row indices, e.g. 0-10")
    parser.add_argument("--json", help="write the rows here")
    opts = parser.parse_args()
    first, _, last = opts.rows.partition("-")
    indices = list(range(int(first), int(last or first) + 1))
    sides = {"A": Path(opts.a).resolve(), "B": HERE.parent}
    copy_gbps = suite.copy_bandwidth_gbps()
    suite.prewarm(indices, False)
    print(f"GPU: {torch.cuda.get_device_name()}; A = {sides['A']}, B = {sides['B']}\n")
    print("| workload | shape | dtype | A mlirfuse us | B mlirfuse us | B/A | A compile us | B compile us |\n"
          + "|---" * 8 + "|")
    rows = []
    for k, index in enumerate(indices):
        order = ["A", "B"] if k % 2 == 0 else ["B", "A"]
        got = {side: run_row(sides[side], index, copy_gbps) for side in order}
        case = suite.CASES[index]
        row = {"index": index, "name": case.name, "shape": "x".join(map(str, case.shape)), "order": order, **got}
        rows.append(row)
        a, b = got["A"], got["B"]
        if "error" in a or "error" in b:
            print(f"| {case.name} | {row['shape']} | | failed: A {a.get('error', 'ok')}; B {b.get('error', 'ok')} |")
            continue
        row["ratio"] = b["mlirfuse_us"] / a["mlirfuse_us"]
        print(f"| {case.name} | {row['shape']} | {a['dtype']} | {a['mlirfuse_us']:.1f} | {b['mlirfuse_us']:.1f} | "
              f"{row['ratio']:.3f} | {a['compile_us']:.1f} | {b['compile_us']:.1f} |", flush=True)
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"\nB/A: geometric mean {geo:.3f}, min {min(ratios):.3f}, max {max(ratios):.3f} over {len(ratios)} rows")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
                                               "copy_gbps": copy_gbps, "a": str(sides["A"]), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
