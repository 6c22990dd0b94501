"""Differential fuzzing of torch.compile(backend="mlirfuse") against eager: N random programs
(test/py/torch_programs.py), forward and backward, in worker processes.

    python bench/fuzz_torch_backend.py --programs 10000 --workers 16

Prints a table (programs run, mismatches, errors, timeouts, seconds) and each failing program with its
seed, and writes JSON under bench/results/. A failure is replayed with --seed N --programs 1.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing as mp
import os
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "py"))


class ProgramTimeout(BaseException):
    """Raised by the alarm: a BaseException, so that no `except Exception` on the way (a
    compile's error report) takes it for a failure of its own."""


def _timeout(signum: int, frame: object) -> None:
    raise ProgramTimeout()


def _run(seed: int, device: str = "cpu", limit: int = 300) -> tuple[int, str, str]:
    """(seed, 'ok' | 'mismatch' | 'error' | 'timeout', the message): a program that runs
    longer than `limit` seconds (a compile that never ends) is a finding, not a stuck pool."""
    import signal

    import torch
    import torch._dynamo as dynamo
    from torch_programs import Draw, check, generate

    torch.manual_seed(seed)
    try:
        program = generate(Draw(rng=random.Random(seed)))
    except Exception:  # noqa: BLE001 - the generator's bug: this seed's finding, not the run's end
        return seed, "error", f"the program generator failed: {traceback.format_exc(limit=3)}"
    dynamo.reset()
    signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(limit)
    try:
        check(program, single_node=seed % 2 == 1, device=device, pad_matmuls="always" if seed % 3 == 0 else "auto")
        return seed, "ok", ""
    except AssertionError as e:
        return seed, "mismatch", str(e)
    except ProgramTimeout:
        return seed, "timeout", f"ran over {limit} s: {traceback.format_exc(limit=-8)}\n{program}"
    except Exception:  # noqa: BLE001 - a crash of the compiled program is a finding too
        return seed, "error", f"{traceback.format_exc(limit=3)}\n{program}"
    finally:
        signal.alarm(0)


def _init() -> None:
    import warnings

    os.environ.setdefault("MLIRFUSE_DISABLE_FALLBACK", "1")  # a region that fails must not hide in torch
    warnings.filterwarnings("ignore")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda for the GPU kernels")
    parser.add_argument("--json", default=None, help="where to write the JSON (default bench/results/)")
    parser.add_argument("--limit", type=int, default=300, help="seconds a program may run (a hang is a finding)")
    args = parser.parse_args()
    seeds = range(args.seed, args.seed + args.programs)
    start = time.perf_counter()
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.workers, initializer=_init, maxtasksperchild=200) as pool:
        results = list(pool.imap_unordered(functools.partial(_run, device=args.device, limit=args.limit), seeds,
                                           chunksize=4))
    seconds = time.perf_counter() - start
    failures = sorted((r for r in results if r[1] != "ok"), key=lambda r: r[0])
    counts = {kind: sum(r[1] == kind for r in results) for kind in ("ok", "mismatch", "error", "timeout")}
    print("| programs | device | ok | mismatches | errors | timeouts | seconds | workers |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {len(results)} | {args.device} | {counts['ok']} | {counts['mismatch']} | {counts['error']} | "
          f"{counts['timeout']} | {seconds:.0f} | {args.workers} |")
    for seed, kind, message in failures[:50]:
        print(f"\n### seed {seed}: {kind}\n{message}")
    default = Path(__file__).parent / "results" / f"fuzz-{args.device}-{time.strftime('%Y-%m-%d')}.json"
    out = Path(args.json) if args.json else default
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"programs": len(results), "device": args.device, "first_seed": args.seed, "seconds": seconds, **counts,
               "failures": [{"seed": s, "kind": k, "message": m} for s, k, m in failures]}
    out.write_text(json.dumps(summary, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
