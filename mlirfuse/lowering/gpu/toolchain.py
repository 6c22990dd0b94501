"""Finding the CUDA tools NVPTX code generation needs: libdevice (math) and ptxas (cubin).

Looked up in order: $MLIRFUSE_CUDA_PATH, $CUDA_HOME, $CUDA_PATH, the `nvidia-cuda-nvcc`
wheel, /usr/local/cuda, and the folder above a `ptxas` on PATH. PTX generation itself needs
no GPU and no ptxas; without ptxas the driver JIT-compiles the PTX.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mlirfuse.errors import FusionError

MISSING_LIBDEVICE = (
    "GPU backend: libdevice.10.bc not found. Install a CUDA toolkit (set CUDA_HOME) or "
    "`pip install nvidia-cuda-nvcc`; mlirfuse needs it to compile math functions for NVPTX.")

# PTX ISA version to ask for, per target (each is the first PTX version supporting it).
_PTX_FOR_ARCH = {"sm_70": 60, "sm_75": 63, "sm_80": 70, "sm_86": 71, "sm_89": 78, "sm_90": 80,
                 "sm_90a": 80, "sm_100": 86, "sm_100a": 86, "sm_120": 87}


@dataclass(frozen=True)
class Toolkit:
    root: str | None
    libdevice: str | None
    ptxas: str | None


def _candidates() -> list[Path]:
    roots = [os.environ.get(v) for v in ("MLIRFUSE_CUDA_PATH", "CUDA_HOME", "CUDA_PATH")]
    try:
        import nvidia.cuda_nvcc as wheel  # type: ignore[import-not-found]

        roots.append(str(Path(list(wheel.__path__)[0])))
    except ImportError:
        pass
    roots.append("/usr/local/cuda")
    ptxas = shutil.which("ptxas")
    if ptxas:
        roots.append(str(Path(ptxas).resolve().parent.parent))
    return [Path(r) for r in roots if r]


@functools.cache
def find() -> Toolkit:
    libdevice = ptxas = root = None
    for candidate in _candidates():
        lib = candidate / "nvvm" / "libdevice" / "libdevice.10.bc"
        exe = candidate / "bin" / "ptxas"
        if lib.exists() and libdevice is None:
            libdevice, root = str(lib), str(candidate)
        if exe.exists() and ptxas is None:
            ptxas = str(exe)
        if libdevice and ptxas:
            break
    return Toolkit(root, libdevice, ptxas)


def check_arch(arch: str) -> str:
    """`arch` if it names an NVIDIA compute capability as `sm_<major><minor>` (with an
    optional `a`/`f` suffix: sm_90, sm_90a, sm_100a); FusionError otherwise, before LLVM sees
    it (it ignores an unknown processor, or asserts on a malformed one)."""
    if not isinstance(arch, str) or not re.fullmatch(r"sm_[1-9][0-9]{1,2}[af]?", arch):
        raise FusionError(f"arch {arch!r}: expected an NVIDIA compute capability as 'sm_<major><minor>', "
                          "e.g. 'sm_90', 'sm_90a' or 'sm_100a'")
    return arch


def ptx_version(arch: str) -> int:
    return _PTX_FOR_ARCH.get(arch, 80)


def ptxas_of(tk: Toolkit) -> str | None:
    """The ptxas that gpu-module-to-binary runs: the toolkit root's, else the one found."""
    if tk.root and (Path(tk.root) / "bin" / "ptxas").exists():
        return str(Path(tk.root) / "bin" / "ptxas")
    return tk.ptxas


@functools.cache
def ptxas_options(ptxas: str | None) -> str:
    """Options for `ptxas` beyond the target and -O3: `--split-compile=0` (compile a module's
    kernels on as many threads as there are CPUs; the same code) where this ptxas has it.
    Asked once per process, on the first cold compile."""
    if not ptxas:
        return ""
    try:
        help_text = subprocess.run([ptxas, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return "--split-compile=0" if "--split-compile" in help_text else ""
