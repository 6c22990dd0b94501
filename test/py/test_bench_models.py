"""bench/models.py's per-launch times: device events attributed to the region call whose host
range launched them, in the order they ran, and their medians over a region's calls; and a
row measured in a process of its own."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


def test_events_go_to_the_range_that_launched_them_in_the_order_they_ran():
    import models

    ranges = [(200, 300, "b"), (100, 150, "a")]  # given out of order
    launched = [
        (120, 5_000, 30, "k1"),   # a's second kernel (ran later)
        (110, 4_000, 20, "Memset (Device)"),  # a's first
        (250, 9_000, 70, "k3"),   # b
        (170, 6_000, 99, "torch"),  # between the ranges: nobody's
        (None, 7_000, 50, "lost"),  # launch time unknown: not counted
        (400, 8_000, 10, "after"),  # after every range
    ]
    assert models.attribute(ranges, launched) == [[("Memset (Device)", 20), ("k1", 30)], [("k3", 70)]]


def test_launch_medians_take_the_calls_with_the_usual_count():
    import models

    calls = [[("k", 10.0), ("Memset", 1.0), ("k", 30.0)],
             [("k", 12.0), ("Memset", 3.0), ("k", 34.0)],
             [("k", 11.0), ("Memset", 2.0), ("k", 32.0)],
             [("k", 99.0)]]  # another variant launched: left out
    medians = models.launch_medians(calls)
    assert medians == [("kernel", 11.0), ("memset", 2.0), ("kernel", 32.0)]
    assert models.launch_text(medians) == "11.0, memset 2.0, 32.0"
    assert models.launch_medians([]) == []


def test_a_row_runs_in_a_process_of_its_own_with_the_scripts_arguments(monkeypatch, tmp_path):
    """The row's process is this script again with this run's arguments and the row's own; its
    row comes back through the JSON file it writes, and a process that fails is an error."""
    import json
    import subprocess

    import models
    import pytest

    seen = []

    def run(command, stdout=None):
        seen.append(command)
        out = command[command.index("--one-row-json") + 1]
        if "bert,bf16" not in command:
            Path(out).write_text(json.dumps({"model": "gpt2", "mode": "f32", "vs_inductor": 1.0}))
        return subprocess.CompletedProcess(command, 0 if "bert,bf16" not in command else 3)

    monkeypatch.setattr(models.subprocess, "run", run)
    monkeypatch.setattr(sys, "argv", ["models.py", "--models", "gpt2", "--rounds", "3"])
    assert models.row_in_a_process("gpt2", "f32", 4200.0) == {"model": "gpt2", "mode": "f32", "vs_inductor": 1.0}
    command = seen[0]
    assert command[1].endswith("models.py") and command[2:6] == ["--models", "gpt2", "--rounds", "3"]
    assert command[command.index("--one-row") + 1] == "gpt2,f32"
    assert command[command.index("--copy-gbps") + 1] == "4200.0"
    with pytest.raises(RuntimeError, match="status 3"):
        models.row_in_a_process("bert", "bf16", 4200.0)


def test_the_benchmark_model_and_the_fused_region_calls_seen_through_a_wrapper():
    """`model_and_ids`: the mode's dtype, eval mode for inference, ids within the vocabulary;
    `fused_region_calls`: each region call goes through the wrapper while inside, and the
    class's own call is back after it."""
    import models
    import torch

    from mlirfuse.torch_backend import runtime

    model, ids = models.model_and_ids("bert", "bf16", batch=2, seq=8, device="cpu")
    assert next(model.parameters()).dtype == torch.bfloat16 and not model.training
    assert ids.shape == (2, 8) and int(ids.max()) < model.config.vocab_size
    model, _ = models.model_and_ids("bert", "f32", batch=1, seq=4, device="cpu")
    assert next(model.parameters()).dtype == torch.float32 and model.training
    seen = []

    def spying(original):
        def spy(self, *args):
            seen.append(self)
            return original(self, *args)
        return spy
    original = runtime.FusedRegion.__call__
    compiled = torch.compile(lambda x: torch.nn.functional.gelu(x * 2.0 + 1.0), backend="mlirfuse")
    x = torch.randn(4, 8)
    with models.fused_region_calls(spying):
        torch.testing.assert_close(compiled(x), torch.nn.functional.gelu(x * 2.0 + 1.0))
    assert len(seen) == 1 and isinstance(seen[0], runtime.FusedRegion)
    assert runtime.FusedRegion.__call__ is original
