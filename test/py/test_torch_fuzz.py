"""Differential fuzzing of the torch.compile backend: random programs of supported aten ops
(torch_programs.py) through mlirfuse and eagerly, forward and backward. Every mismatch it
finds becomes a named test in test_torch_regressions.py. bench/fuzz_torch_backend.py runs
thousands in parallel."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")

import random  # noqa: E402

import torch._dynamo as dynamo  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch_programs import Draw, check, generate  # noqa: E402


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_programs_match_eager(data) -> None:
    program = generate(Draw(data))
    single_node = data.draw(st.booleans())
    pad_matmuls = data.draw(st.sampled_from(["auto", "always"]))
    dynamo.reset()
    check(program, single_node=single_node, pad_matmuls=pad_matmuls)


def test_a_program_whose_every_step_failed_is_drawn() -> None:
    """Seed 723148 draws two inputs and no step that runs: the program returns an input.
    Drawing its second output among the steps' values (there are none) crashed the generator,
    and bench/fuzz_torch_backend.py with it, after 3148 programs of a 5000-program run."""
    program = generate(Draw(rng=random.Random(723148)))
    assert not program.steps and program.outputs == [len(program.inputs) - 1]
    dynamo.reset()
    check(program)
