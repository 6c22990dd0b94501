"""bench/column_reductions.py's variants, which need no GPU: a heuristic override changes the
planned column-reduction geometry and register caps; `kernel=PATH` runs that file's kernel in place of the
tree's; `tree=PATH` runs PATH/mlirfuse."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlirfuse.lowering.gpu import toolchain

BENCH = Path(__file__).resolve().parents[2] / "bench" / "column_reductions.py"
PROBE = """
import sys, numpy as np
sys.path.insert(0, {bench!r})
import column_reductions as c
c.configure({variant!r})
import mlirfuse
prologue = mlirfuse.jit(lambda a, e: (a * 2.0, ((a * 2.0) * e).sum(0))).compile(
    np.ones((2100, 64), np.float32), np.ones((2100, 64), np.float32), backend="gpu", arch="sm_90")
print([line for line in prologue.stages["launch_params"].splitlines() if "prologue" in line][0])
compiled = mlirfuse.jit(lambda x: x.sum(0)).compile(np.ones((2100, 64), np.float32), backend="gpu", arch="sm_90")
print(compiled.stages["launch_params"].splitlines()[0])
print("vector partials" if "st.global.v4" in compiled.stages["ptx"] else "scalar partials")
"""


def _probe(variant: str) -> list[str]:
    code = PROBE.format(bench=str(BENCH.parent), variant=variant)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "MLIRFUSE_CACHE_DIR": "off"})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()


@pytest.mark.skipif(toolchain.find().libdevice is None, reason="no libdevice (CUDA toolkit or nvidia-cuda-nvcc wheel)")
def test_variants_override_the_geometry_or_the_kernel(tmp_path) -> None:
    *_, params, partials = _probe("mlirfuse")
    assert "block_x=32, block_y=8" in params and partials == "vector partials"  # (dynamic extents)
    *_, params, _ = _probe("mlirfuse:bx=8,unroll=2")
    assert "block_x=8, block_y=32" in params and "unroll=2" in params
    *_, params, _ = _probe("mlirfuse:by=4")  # blocks of 128 threads
    assert "blockDim=(128, 1, 1)" in params and "block_x=32, block_y=4" in params
    with_prologue, params, _ = _probe("mlirfuse")[-3:]  # the register caps: 64, and none with a prologue
    assert "registers=64)" in params and "registers=0)" in with_prologue
    with_prologue, params, _ = _probe("mlirfuse:regs=0,pregs=72")[-3:]
    assert "registers=0)" in params and "registers=72)" in with_prologue
    other = tmp_path / "column.py"  # another tree's kernel: here the tree's, announcing itself
    other.write_text("from mlirfuse.lowering.gpu.column import emit_column_reduction as emit\n\n\n"
                     "def emit_column_reduction(match, params):\n"
                     "    print('the other kernel')\n"
                     "    return emit(match, params)\n")
    assert _probe(f"kernel={other}")[0] == "the other kernel"
    tree = tmp_path / "tree"  # another checkout: here a copy of this one, announcing itself
    shutil.copytree(Path(toolchain.__file__).parents[2], tree / "mlirfuse",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = tree / "mlirfuse" / "__init__.py"
    init.write_text("print('the other tree')\n" + init.read_text())
    assert _probe(f"tree={tree}")[0] == "the other tree"
