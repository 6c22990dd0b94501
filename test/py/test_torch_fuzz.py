"""Differential fuzzing of the torch.compile backend: random programs of supported aten ops
(torch_programs.py) through mlirfuse and eagerly, forward and backward. Every mismatch it
finds becomes a named test in test_torch_regressions.py. bench/fuzz_torch_backend.py runs
thousands in parallel."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")

import random  # noqa: E402

import torch  # noqa: E402
import torch._dynamo as dynamo  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch_programs import Draw, check, check_on_emulator, generate  # noqa: E402


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_programs_match_eager(data) -> None:
    program = generate(Draw(data))
    single_node = data.draw(st.booleans())
    pad_matmuls = data.draw(st.sampled_from(["auto", "always"]))
    dynamo.reset()
    check(program, single_node=single_node, pad_matmuls=pad_matmuls)


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_programs_with_model_ops_match_eager(data) -> None:
    """Programs with the ops of model code too (`MODEL_OPS`: -inf and causal masks, RMSNorm,
    logsumexp, cumulative sums, flips, rolls, in-place updates, ...), half of them compiled
    with symbolic sizes (torch.compile(dynamic=True))."""
    program = generate(Draw(data), model_ops=True)
    dynamo.reset()
    check(program, single_node=data.draw(st.booleans()), pad_matmuls=data.draw(st.sampled_from(["auto", "always"])),
          dynamic=data.draw(st.sampled_from([None, True])))


def _toolkit():
    from mlirfuse.lowering.gpu import toolchain

    found = toolchain.find()
    if found.libdevice is None:
        pytest.skip("no libdevice: GPU code is not generated")
    return found


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_programs_gpu_kernels_match_the_cpu_on_the_emulator(data) -> None:
    """The GPU kernels with no GPU: every region of a random training step compiled for sm_90
    (assembled by ptxas where present) and emulated on its inputs, against the CPU backend."""
    ptxas = _toolkit().ptxas
    program = generate(Draw(data), model_ops=data.draw(st.booleans()))
    check_on_emulator(program, single_node=data.draw(st.booleans()),
                      pad_matmuls=data.draw(st.sampled_from(["auto", "always"])), ptxas=ptxas)


def test_the_emulator_fuzzer_reports_a_kernel_that_reads_values_not_yet_written(monkeypatch) -> None:
    """`bench/fuzz_torch_backend.py --device emulator` finds, with no GPU, the wrong answer
    GPU fuzzing found on the H200 in session 73 (seed 782456: a chain's kernel ran after a
    cat whose body reads the chain's row values), with that fix taken out."""
    import sys
    from pathlib import Path

    from mlirfuse.lowering.gpu import normalization

    _toolkit()
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from fuzz_torch_backend import _run

    assert _run(782456, "emulator", 120)[1] == "ok"
    monkeypatch.setattr(normalization, "_read_in_body", lambda g: set())
    seed, kind, message = _run(782456, "emulator", 120)
    assert kind == "mismatch" and "the emulated GPU kernels of fusion" in message and "nan" in message


def test_a_program_whose_every_step_failed_is_drawn() -> None:
    """Seed 723148 draws two inputs and no step that runs: the program returns an input.
    Drawing its second output among the steps' values (there are none) crashed the generator,
    and bench/fuzz_torch_backend.py with it, after 3148 programs of a 5000-program run."""
    program = generate(Draw(rng=random.Random(723148)))
    assert not program.steps and program.outputs == [len(program.inputs) - 1]
    dynamo.reset()
    check(program)


def _dies_or_loses_its_context(seed: int, device: str, limit: int) -> tuple[int, str, str]:
    """A fuzz runner: seed 3 kills its worker, seed 5 reports a device-side assert (the CUDA
    context lost), every other seed passes."""
    import os

    if seed == 3:
        os._exit(7)
    if seed == 5:
        return seed, "error", "torch.AcceleratorError: CUDA error: device-side assert triggered"
    return seed, "ok", ""


def test_the_fuzzer_outlives_a_worker_that_dies_or_loses_its_cuda_context() -> None:
    """On the H200 (session 73) a program's device-side assert left its worker's CUDA context
    unusable; the worker's next program raised outside the program's check, and the pool
    ended the whole run, naming no seed. A dead worker's program is now its error, and fresh
    workers run the rest."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from fuzz_torch_backend import fuzz

    results = sorted(fuzz(range(10), workers=2, limit=60, runner=_dies_or_loses_its_context))
    assert [r[0] for r in results] == list(range(10))
    assert [r[1] for r in results] == ["ok"] * 3 + ["error", "ok", "error"] + ["ok"] * 4
    assert "died (exit code 7)" in results[3][2]


@pytest.mark.parametrize("got, want, fails", [
    ([float("nan"), 5.0], [float("nan"), 1.0], True),  # an element beside a NaN: compared too
    ([float("nan"), 1.0], [float("nan"), 1.0], False),
    ([float("inf"), 1.0], [float("inf"), 1.0], False),
    ([float("-inf"), 1.0], [float("inf"), 1.0], True),
    ([float("nan"), 1.0], [float("inf"), 1.0], True),
    ([2.0, 1.0], [float("nan"), 1.0], True),
])
def test_the_checker_compares_every_element_beside_nans_and_infinities(got, want, fails) -> None:
    """A NaN that eager and mlirfuse both give does not excuse the other elements (the check
    took an output with NaNs at the same places as equal, whatever its other elements were,
    and scaled its tolerance by a NaN); equal infinities are equal."""
    from torch_programs import Program, _close

    check_it = lambda: _close(torch.tensor(got), torch.tensor(want), 1e-6, "output 0", Program([]))  # noqa: E731
    if fails:
        with pytest.raises(AssertionError):
            check_it()
    else:
        check_it()


def test_the_checker_falls_back_to_float64_element_by_element() -> None:
    """Where mlirfuse's result is off eager's, each element must be as close to eager's of
    float64 inputs as eager's is: eager's NaN at one element does not excuse another (the
    fallback compared the largest errors, which eager's NaN made infinite)."""
    from torch_programs import Program, _close

    with pytest.raises(AssertionError):
        _close(torch.tensor([float("nan"), 100.0]), torch.tensor([float("nan"), 1.0]), 1e-6, "output 0", Program([]),
               lambda: torch.tensor([0.5, 1.0]))
    _close(torch.tensor([2.0, 1.0]), torch.tensor([0.0, 1.0]), 1e-6, "output 0", Program([]),
           lambda: torch.tensor([1.0, 1.0]))  # as far from the truth as eager


def test_the_checker_does_not_judge_an_element_that_rounding_alone_moves_past_the_tolerance() -> None:
    """An element whose float64 reference moves by more than the tolerance when the inputs
    move by their rounding (`_float64_spread`) is ill-conditioned: any value in that range is
    as right as eager's. Elsewhere the float64 fallback judges as before."""
    from torch_programs import Program, _close

    got, want, truth = torch.tensor([0.97, 1.0]), torch.tensor([0.79, 1.0]), torch.tensor([0.79, 1.0])
    _close(got, want, 0.04, "output 0", Program([]), lambda: (truth, torch.tensor([0.77, 0.0])))
    with pytest.raises(AssertionError):  # the spread is within the tolerance: judged
        _close(got, want, 0.04, "output 0", Program([]), lambda: (truth, torch.tensor([0.01, 0.0])))
    with pytest.raises(AssertionError):  # the ill-conditioned element does not excuse another
        _close(torch.tensor([0.97, 2.0]), want, 0.04, "output 0", Program([]),
               lambda: (truth, torch.tensor([0.77, 0.0])))


@pytest.mark.parametrize("seed", [1030326, 1030735])
def test_programs_eager_computes_less_accurately_than_mlirfuse_pass(seed: int) -> None:
    """Two findings of session 76's CPU fuzzing that were the checker's, not mlirfuse's:
    - 1030326: sin of a bfloat16 MSE near 4.2e9 (spacing 3.4e7). mlirfuse's loss was the
      correctly rounded one, eager's (its squares rounded to bfloat16 first) a step above; the
      sines 0.18 apart. Now judged ill-conditioned (`_float64_spread`).
    - 1030735: a LayerNorm of a row masked to float32's lowest value. Eager's sum overflows
      (NaN), mlirfuse gives the exact 0; the float64 reference, which masked with float64's
      lowest value, overflowed too. It now keeps the program's dtype's (`finfo_min_mask`)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from fuzz_torch_backend import _run

    assert _run(seed, "cpu", 120, model_ops=True)[1:] == ("ok", "")


def test_the_emulator_check_is_not_blinded_by_an_infinity() -> None:
    """An infinity in a region's inputs or results (a -inf mask) no longer scales the
    tolerance to infinity: a finite value off, and -inf against +inf, are reported."""
    import numpy as np
    from torch_programs import _far, _finite_abs_max

    inputs = np.array([float("-inf"), 2.0, float("nan")])
    tol = 1e-6 * max(1.0, _finite_abs_max(inputs))
    assert tol == 2e-6
    got, want = np.array([5.0, float("-inf"), float("inf"), float("nan")]), np.array([1.0, float("inf"), float("inf"),
                                                                                        float("nan")])
    assert _far(got, want, tol).tolist() == [True, True, False, False]
