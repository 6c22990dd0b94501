"""The GPU path replays stage by stage with mlirfuse-opt: for every workload of bench/suite.py
(at its small shape), each stage's dump run through that stage's pipeline of registered
passes gives the next dump, and `mlirfuse-gpu-pipeline` on the fusion IR gives byte-identical
PTX to `jitted.compile(...).ptx`. No GPU needed (PTX is generated on any machine). A
schedule edited by hand in the `scheduled` stage compiles (`compile(..., scheduled_ir=)`),
changes the kernel and runs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mlirfuse  # noqa: E402
from mlirfuse import ops  # noqa: E402
from mlirfuse.lowering.gpu import toolchain  # noqa: E402
from mlirfuse.tools import opt  # noqa: E402
from torch_programs import numpy_of  # noqa: E402

pytestmark = pytest.mark.skipif(toolchain.find().libdevice is None, reason="no libdevice")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


def _suite_cases():
    import suite

    suite._randn = lambda shape, dtype=torch.float32: torch.randn(shape, dtype=dtype)  # CPU tensors
    return suite.CASES


def _timeless(text: str) -> str:
    """The dump without the compile times the NVVM target records in the binary's properties."""
    return re.sub(r"(\w+TimeInMs) = \d+ : i64", r"\1 = ? : i64", text)


def _opt(tmp_path: Path, text: str, pipeline: str, emit: str = "mlir") -> str:
    src, out = tmp_path / "in.mlir", tmp_path / "out.txt"
    src.write_text(text)
    assert opt.main([str(src), f"--pass-pipeline={pipeline}", f"--emit={emit}", "-o", str(out)]) == 0
    return out.read_text()


def _replay_every_stage(compiled, tmp_path: Path) -> None:
    """Each stage's IR, run through its pipeline by mlirfuse-opt, gives the next stage's IR."""
    stages = compiled.stages
    names = [s.name for s in compiled.stage_list()]
    assert list(stages)[0] == "fusion" and [n for n in stages if n in names] == names, list(stages)
    for stage in compiled.stage_list():
        got = _opt(tmp_path, stages[stage.source], stage.pipeline)
        assert _timeless(got) == _timeless(stages[stage.name]), f"stage {stage.name} from {stage.source}"


@pytest.mark.parametrize("case", _suite_cases(), ids=lambda c: f"{c.name} {c.dtype}".replace(" ", "_"))
def test_every_stage_replays_with_mlirfuse_opt(case, tmp_path: Path) -> None:
    args = [numpy_of(a) for a in case.make(case.small, case.dtype)]
    compiled = mlirfuse.jit(case.fused).compile(*args, backend="gpu", arch="sm_90")
    if compiled.kernel is None:  # a fusion of several groups: each group replays alike
        pytest.skip("several groups")
    _replay_every_stage(compiled, tmp_path)
    ptx = _opt(tmp_path, compiled.stages["fusion"], "builtin.module(mlirfuse-gpu-pipeline{arch=sm_90})", emit="ptx")
    assert ptx == compiled.stages["ptx"] == compiled.ptx


@pytest.mark.parametrize("case", _suite_cases()[:8], ids=lambda c: f"{c.name} {c.dtype}".replace(" ", "_"))
def test_every_cpu_stage_replays_with_mlirfuse_opt(case, tmp_path: Path) -> None:
    """The CPU path reads the same stage list: every stage replays, and mlirfuse-cpu-pipeline
    gives the module the compile ran."""
    args = [numpy_of(a) for a in case.make(case.small, case.dtype)]
    compiled = mlirfuse.jit(case.fused).compile(*args, backend="cpu")
    _replay_every_stage(compiled, tmp_path)
    whole = _opt(tmp_path, compiled.stages["fusion"], "builtin.module(mlirfuse-cpu-pipeline)")
    assert whole == compiled.stages["llvm"]


def _hand_scheduled(vector: int, block: int):
    f = mlirfuse.jit(lambda x: ops.relu(x * 2.0 + 1.0))
    x = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    scheduled = f.compile(x, backend="gpu", arch="sm_90").stages["scheduled"]
    assert 'kind = "pointwise"' in scheduled and "vector = 4 : i64" in scheduled and "block = 256 : i64" in scheduled
    edited = scheduled.replace("vector = 4 : i64", f"vector = {vector} : i64").replace(
        "block = 256 : i64", f"block = {block} : i64")
    return f, x, f.compile(x, backend="gpu", arch="sm_90", scheduled_ir=edited)


def test_a_hand_edited_schedule_changes_the_kernel() -> None:
    """Vector width 2 instead of the heuristic's 4: 64-bit loads instead of 128-bit ones, in
    blocks of 128 threads; the kernel (run by the emulator) still computes relu(2x + 1)."""
    from gpu_emulator import emulate

    f, x, compiled = _hand_scheduled(2, 128)
    assert "ld.global.v2.b32" in compiled.ptx and "ld.global.v4" not in compiled.ptx
    assert "blockDim=(128, 1, 1): pointwise: PointwiseParams(vector=2, unroll=4, block=128)" in \
        compiled.stages["launch_params"]
    got = emulate(compiled.stages["gpu"], [x], [np.empty_like(x)])
    np.testing.assert_allclose(got[0], np.maximum(x * 2 + 1, 0), rtol=1e-6)


def test_a_bad_hand_written_schedule_is_an_error_naming_it() -> None:
    with pytest.raises(mlirfuse.FusionError, match="vector width 8 for 4-byte elements"):
        _hand_scheduled(8, 128)


@pytest.mark.gpu
def test_a_hand_edited_schedule_runs_on_the_gpu_and_matches_torch() -> None:
    f, x, compiled = _hand_scheduled(2, 128)
    xt = torch.from_numpy(x).cuda()
    (got,) = compiled([xt])
    torch.testing.assert_close(got, torch.relu(xt * 2.0 + 1.0))


def test_a_scheduled_stage_of_another_signature_is_refused() -> None:
    """The edited IR's entry point must take this fusion's arguments: launched with another
    signature's, its kernels would read and write outside the tensors."""
    f = mlirfuse.jit(lambda x: ops.relu(x * 2.0 + 1.0))
    other = mlirfuse.jit(lambda x, y: x + y).compile(np.ones((4, 8), np.float32), np.ones((4, 8), np.float32),
                                                    backend="gpu", arch="sm_90").stages["scheduled"]
    with pytest.raises(mlirfuse.FusionError, match="scheduled_ir: its @mlirfuse_entry takes"):
        f.compile(np.ones((4, 8), np.float32), backend="gpu", arch="sm_90", scheduled_ir=other)
