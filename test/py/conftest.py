import os
import shutil
import subprocess

import pytest

# Host code at LLVM's -O0 (set before mlirfuse reads its options): code generated about 4x
# faster (at -O3 it was a third of a model test's time, 28% of the suite's), the same arithmetic
# but for the order in which a reduction's loop adds (`reassoc`: -O3 may vectorize it).
# MLIRFUSE_CPU_OPT_LEVEL=3 runs the tests as users' code is compiled.
os.environ.setdefault("MLIRFUSE_CPU_OPT_LEVEL", "0")


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fresh_torch_backend():
    """dynamo's compiled frames and the torch backend's shared fusions reset around a test."""
    import torch._dynamo as dynamo

    from mlirfuse import torch_backend

    dynamo.reset()
    torch_backend.reset()
    yield
    dynamo.reset()
