"""Differential fuzzing of torch.compile(backend="mlirfuse") against eager: N random programs
(test/py/torch_programs.py), forward and backward, in worker processes.

    python bench/fuzz_torch_backend.py --programs 10000 --workers 16
    python bench/fuzz_torch_backend.py --device emulator --programs 500   # the GPU kernels, no GPU
    python bench/fuzz_torch_backend.py --model-ops --programs 1000        # with the ops of model code too
    python bench/fuzz_torch_backend.py --dynamic --programs 1000          # torch.compile(dynamic=True)

`--device cpu` (or `cuda`) checks the compiled step against eager. `--device emulator` checks
the GPU kernels without a GPU: the step runs on the CPU, and every call of a fused region is
compiled for the GPU too (PTX assembled by ptxas where the toolkit has one) and its kernels
emulated on that call's inputs, against the CPU backend's results (`check_on_emulator`).

Prints a table (programs run, mismatches, errors, timeouts, seconds) and each failing program with its
seed, and writes JSON under bench/results/. A failure is replayed with --seed N --programs 1.

A program that kills its worker process (a crash), or leaves it without a usable CUDA context (a
device-side assert: every later CUDA call of the process fails), is that program's error; a fresh
worker takes the programs left.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "py"))


class ProgramTimeout(BaseException):
    """Raised by the alarm: a BaseException, so that no `except Exception` on the way (a
    compile's error report) takes it for a failure of its own."""


def _timeout(signum: int, frame: object) -> None:
    raise ProgramTimeout()


def _run(seed: int, device: str = "cpu", limit: int = 300, model_ops: bool = False,
         dynamic: bool | None = None) -> tuple[int, str, str]:
    """(seed, 'ok' | 'mismatch' | 'error' | 'timeout', the message): a program that runs
    longer than `limit` seconds (a compile that never ends) is a finding, not a stuck pool.
    `model_ops`: programs drawn with `torch_programs.MODEL_OPS` too; `dynamic`: torch.compile's
    (cpu and cuda: True compiles with symbolic sizes)."""
    import signal

    import torch
    import torch._dynamo as dynamo
    from torch_programs import Draw, check, check_on_emulator, generate

    try:
        torch.manual_seed(seed)
        program = generate(Draw(rng=random.Random(seed)), model_ops=model_ops)
    except Exception:  # noqa: BLE001 - the generator's bug: this seed's finding, not the run's end
        return seed, "error", f"the program generator failed: {traceback.format_exc(limit=3)}"
    dynamo.reset()
    signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(limit)
    try:
        options = {"single_node": seed % 2 == 1, "pad_matmuls": "always" if seed % 3 == 0 else "auto"}
        if device == "emulator":
            from mlirfuse.lowering.gpu import toolchain

            check_on_emulator(program, ptxas=toolchain.find().ptxas, **options)
        else:
            check(program, device=device, dynamic=dynamic, **options)
        return seed, "ok", ""
    except AssertionError as e:
        return seed, "mismatch", str(e)
    except ProgramTimeout:
        return seed, "timeout", f"ran over {limit} s: {traceback.format_exc(limit=-8)}\n{program}"
    except Exception:  # noqa: BLE001 - a crash of the compiled program is a finding too
        return seed, "error", f"{traceback.format_exc(limit=3)}\n{program}"
    finally:
        signal.alarm(0)


def context_lost(message: str) -> bool:
    """An error after which the process's CUDA context is unusable (a device-side assert)."""
    return "CUDA error" in message or "device-side assert" in message


def _worker(conn: Any, device: str, limit: int, runner: Callable) -> None:
    """Run each seed the parent sends until it sends None, sending back each result (a pipe
    write, done before the next program starts: a worker that dies later loses nothing);
    return after an error that lost the CUDA context."""
    _init()
    while (seed := conn.recv()) is not None:
        result = runner(seed, device, limit)
        conn.send(result)
        if result[1] == "error" and context_lost(result[2]):
            return


def fuzz(seeds: Sequence[int], device: str = "cpu", workers: int = 1, limit: int = 300,
         runner: Callable[[int, str, int], tuple[int, str, str]] = _run,
         report: Callable[[tuple[int, str, str]], None] = lambda result: None) -> list[tuple[int, str, str]]:
    """`runner(seed, device, limit)` of every seed in `workers` processes: (seed, kind, message)
    each, also given to `report` as it comes. The parent hands each worker one seed at a time,
    so it knows what a worker that dies was running (that program's error); a worker that
    dies, or returns after losing its CUDA context, is replaced while programs are left."""
    ctx = mp.get_context("spawn")
    pending = list(reversed(seeds))
    done: dict[int, tuple[int, str, str]] = {}
    running: dict[Any, tuple[Any, int | None]] = {}  # the parent's end of a worker's pipe -> (process, seed)

    def start() -> None:
        mine, theirs = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(theirs, device, limit, runner), daemon=True)
        p.start()
        theirs.close()  # the worker's end lives in the worker alone: its exit is our EOF
        running[mine] = (p, None)
        hand_out(mine)

    def hand_out(conn: Any) -> None:
        seed = pending.pop() if pending else None
        running[conn] = (running[conn][0], seed)
        conn.send(seed)

    for _ in range(min(workers, len(seeds))):
        start()
    while running:
        for conn in mp.connection.wait(list(running), timeout=5.0):
            p, seed = running[conn]
            try:
                result = conn.recv()
            except (EOFError, OSError):  # the worker ended: after losing its context, or it died
                del running[conn]
                conn.close()
                p.join()
                if seed is not None and seed not in done:
                    done[seed] = (seed, "error",
                                  f"the worker process died (exit code {p.exitcode}) running this program")
                    report(done[seed])
                if pending:
                    start()
                continue
            done[result[0]] = tuple(result)
            report(done[result[0]])
            if not (result[1] == "error" and context_lost(result[2])):
                hand_out(conn)
                if running[conn][1] is not None:
                    continue
            # it returns: nothing left for it, or its CUDA context is lost (a fresh worker's is not)
            p.join(timeout=30)
            del running[conn]
            conn.close()
            if pending and result[1] == "error":
                start()
    return [done[s] for s in seeds]


def _init() -> None:
    import warnings

    os.environ.setdefault("MLIRFUSE_DISABLE_FALLBACK", "1")  # a region that fails must not hide in torch
    warnings.filterwarnings("ignore")


def _report_failure(result: tuple[int, str, str]) -> None:
    """A failure's seed and kind on stderr as it comes (the table waits for the whole run)."""
    if result[1] != "ok":
        print(f"seed {result[0]}: {result[1]}: {result[2].strip().splitlines()[-1] if result[2].strip() else ''}",
              file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "emulator"),
                        help="cpu; cuda for the GPU kernels; emulator for the GPU kernels without a GPU")
    parser.add_argument("--json", default=None, help="where to write the JSON (default bench/results/)")
    parser.add_argument("--limit", type=int, default=300, help="seconds a program may run (a hang is a finding)")
    parser.add_argument("--model-ops", action="store_true",
                        help="programs with the ops of model code too (torch_programs.MODEL_OPS): other programs "
                             "for the same seeds")
    parser.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True): symbolic sizes "
                                                                  "(cpu and cuda)")
    args = parser.parse_args()
    seeds = range(args.seed, args.seed + args.programs)
    start = time.perf_counter()
    runner = functools.partial(_run, model_ops=args.model_ops, dynamic=True if args.dynamic else None)
    results = fuzz(seeds, device=args.device, workers=args.workers, limit=args.limit, runner=runner,
                   report=_report_failure)
    seconds = time.perf_counter() - start
    failures = sorted((r for r in results if r[1] != "ok"), key=lambda r: r[0])
    counts = {kind: sum(r[1] == kind for r in results) for kind in ("ok", "mismatch", "error", "timeout")}
    print("| programs | device | model ops | dynamic | ok | mismatches | errors | timeouts | seconds | workers |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {len(results)} | {args.device} | {'yes' if args.model_ops else 'no'} | {'yes' if args.dynamic else 'no'} "
          f"| {counts['ok']} | "
          f"{counts['mismatch']} | {counts['error']} | {counts['timeout']} | {seconds:.0f} | {args.workers} |")
    for seed, kind, message in failures[:50]:
        print(f"\n### seed {seed}: {kind}\n{message}")
    default = Path(__file__).parent / "results" / f"fuzz-{args.device}-{time.strftime('%Y-%m-%d')}.json"
    out = Path(args.json) if args.json else default
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"programs": len(results), "device": args.device, "model_ops": args.model_ops, "dynamic": args.dynamic,
               "first_seed": args.seed,
               "seconds": seconds, **counts,
               "failures": [{"seed": s, "kind": k, "message": m} for s, k, m in failures]}
    out.write_text(json.dumps(summary, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
