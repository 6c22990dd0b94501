"""The GPU path replays stage by stage with mlirfuse-opt: for every workload of bench/suite.py
(at its small shape), each stage's dump run through that stage's pipeline of registered
passes gives the next dump, and `mlirfuse-gpu-pipeline` on the fusion IR gives byte-identical
PTX to `jitted.compile(...).ptx`. No GPU needed (PTX is generated on any machine)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mlirfuse  # noqa: E402
from mlirfuse.lowering import gpu, toolchain  # noqa: E402
from mlirfuse.tools import opt  # noqa: E402

pytestmark = pytest.mark.skipif(toolchain.find().libdevice is None, reason="no libdevice")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


def _suite_cases():
    import suite

    suite._randn = lambda shape, dtype=torch.float32: torch.randn(shape, dtype=dtype)  # CPU tensors
    return suite.CASES


def _numpy(a):
    if not isinstance(a, torch.Tensor):
        return a
    if a.dtype == torch.bfloat16:
        import ml_dtypes
        return a.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return a.numpy()


def _timeless(text: str) -> str:
    """The dump without the compile times the NVVM target records in the binary's properties."""
    return re.sub(r"(\w+TimeInMs) = \d+ : i64", r"\1 = ? : i64", text)


def _opt(tmp_path: Path, text: str, pipeline: str, emit: str = "mlir") -> str:
    src, out = tmp_path / "in.mlir", tmp_path / "out.txt"
    src.write_text(text)
    assert opt.main([str(src), f"--pass-pipeline={pipeline}", f"--emit={emit}", "-o", str(out)]) == 0
    return out.read_text()


@pytest.mark.parametrize("case", _suite_cases(), ids=lambda c: f"{c.name} {c.dtype}".replace(" ", "_"))
def test_every_stage_replays_with_mlirfuse_opt(case, tmp_path: Path) -> None:
    args = [_numpy(a) for a in case.make(case.small, case.dtype)]
    compiled = mlirfuse.jit(case.fused).compile(*args, backend="gpu", arch="sm_90")
    if compiled.kernel is None:  # a fusion of several groups: each group replays alike
        pytest.skip("several groups")
    kernel = gpu.compile_gpu(compiled.fusion_ir, compiled.fusion.specs, "sm_90", "isa", keep_stages=True)
    stages = kernel.stages
    previous = "fusion"
    for name, pipeline in gpu.gpu_stages("sm_90", "isa", toolchain.find().root):
        got = _opt(tmp_path, stages[previous], pipeline)
        assert _timeless(got) == _timeless(stages[name]), f"stage {name} from {previous}"
        previous = name
    ptx = _opt(tmp_path, stages["fusion"], "builtin.module(mlirfuse-gpu-pipeline{arch=sm_90})", emit="ptx")
    assert ptx == stages["ptx"] == kernel.ptx
    if compiled.kernel.module.binary_format == "isa":  # (a fatbin where ptxas is installed)
        assert ptx == compiled.ptx
