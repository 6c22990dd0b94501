"""bench/suite.py's parts: a run of some rows (`--rows`) and the merge of several runs' JSON
files into one table (`--merge`), which needs no GPU."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))


def _row(case, speedup: float) -> dict:
    return {"name": case.name, "shape": "x".join(map(str, case.shape)), "dtype": "float32", "mlirfuse_us": 10.0,
            "eager_us": 20.0, "compile_us": 10.0 * speedup, "gbps": 1000.0, "pct_copy": 25.0,
            "speedup_vs_compile": speedup, "speedup_vs_eager": 2.0, "host_us": 8.0, "cold_compile_s": 0.5,
            "warm_start_s": 0.03}


def _run(tmp_path: Path, name: str, rows: list[dict]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"gpu": "G", "driver": "D", "torch": "T", "date": "2026-11-28", "copy_gbps": 4000.0,
                                "complete": True, "rows": rows}))
    return str(path)


def test_rows_is_a_python_slice_of_the_workload_list():
    import suite

    positions = range(len(suite.CASES))
    assert list(positions[suite._slice("15:")]) == list(range(15, len(suite.CASES)))
    assert list(positions[suite._slice("0:2")]) == [0, 1]
    assert list(positions[suite._slice("3")]) == [3]


def test_select_takes_the_slice_then_the_names():
    import suite

    n = len(suite.CASES)
    assert suite.select(None, None) == list(range(n))
    assert suite.select("15:", None) == list(range(15, n))
    names = [f"{c.name} {'x'.join(map(str, c.shape))}" for c in suite.CASES]
    softmax = [i for i, label in enumerate(names) if "softmax" in label]
    assert suite.select(None, "softmax") == softmax
    assert suite.select("0:12", "softmax") == [i for i in softmax if i < 12]


def test_merge_orders_the_rows_as_the_workload_list_and_summarizes_them_all(tmp_path):
    import suite

    cases = suite.CASES
    # the second part first on the command line: the table still follows the list
    late = _run(tmp_path, "late.json", [_row(c, 2.0) for c in cases[2:]])
    early = _run(tmp_path, "early.json", [_row(cases[0], 0.5), _row(cases[1], 1.0)])
    out = tmp_path / "all.json"
    done = subprocess.run([sys.executable, str(BENCH / "suite.py"), "--merge", late, early, "--json", str(out)],
                          capture_output=True, text=True, check=True)
    table = [line for line in done.stdout.splitlines() if line.startswith(f"| {cases[0].name} |")
             or line.startswith(f"| {cases[-1].name} |")]
    assert table[0].startswith(f"| {cases[0].name} |") and "0.50x" in table[0]
    geo = math.exp((math.log(0.5) + (len(cases) - 2) * math.log(2.0)) / len(cases))
    assert f"{geo:.2f}x over {len(cases)} workloads (0 failed); min 0.50x" in done.stdout
    merged = json.loads(out.read_text())
    assert merged["complete"] is True
    assert [r["name"] for r in merged["rows"]] == [c.name for c in cases]
    assert [p["rows"] for p in merged["parts"]] == [len(cases) - 2, 2]


def test_merge_of_some_rows_is_not_complete(tmp_path):
    import suite

    part = _run(tmp_path, "part.json", [_row(suite.CASES[0], 1.0)])
    out = tmp_path / "all.json"
    subprocess.run([sys.executable, str(BENCH / "suite.py"), "--merge", part, "--json", str(out)],
                   capture_output=True, text=True, check=True)
    assert json.loads(out.read_text())["complete"] is False


def test_kernel_us_spins_the_stream_before_each_flush_and_timed_call(monkeypatch):
    """gpu_bench.kernel_us, with CUDA faked: each timed call is enqueued as spin, L2 flush,
    start event, call, end event, the spin at least 200 us and twice the call's host time (a
    call of 2 ms of host time: 8 ms of spin at 2 GHz), so that the host is ahead of the GPU
    when the start event runs; the median of the events' times is returned in us."""
    import time

    import gpu_bench
    import torch

    log: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool = False):
            self.at = None

        def record(self):
            self.at = len(log)
            log.append("record")

        def synchronize(self):
            pass

        def elapsed_time(self, end) -> float:
            return 0.005 * (end.at - self.at)  # ms: 5 us per logged step between the events

    class Flush:
        def zero_(self):
            log.append("flush")

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append(f"spin {cycles}"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch, "empty", lambda *a, **k: Flush())

    def call():
        time.sleep(0.002)
        log.append("call")

    us = gpu_bench.kernel_us(call, warmup_ms=0, rep_ms=0, most=10)
    timed = log[log.index(next(e for e in log if e.startswith("spin"))):]
    assert len(timed) == 10 * 5
    for k in range(10):
        spin, flush, start, called, end = timed[5 * k:5 * k + 5]
        assert (flush, start, called, end) == ("flush", "record", "call", "record")
        assert int(spin.split()[1]) >= 2 * 2000 * 2000  # twice 2 ms of host time, 2000 cycles a us
    assert us == 10.0  # start, call, end: 2 steps of 5 us
