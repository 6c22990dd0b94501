"""When compiling or running a group fails: warn once with a reproducer, then run it with
the reference evaluator (unless MLIRFUSE_DISABLE_FALLBACK=1)."""

from __future__ import annotations

import hashlib
import tempfile
import warnings
from pathlib import Path

from mlirfuse import config
from mlirfuse.errors import FusionError


def write_reproducer(fusion_ir: str) -> Path:
    folder = Path(config.options().dump_dir or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"mlirfuse-repro-{hashlib.sha256(fusion_ir.encode()).hexdigest()[:12]}.mlir"
    path.write_text(fusion_ir)
    return path


def fall_back(fusion_ir: str, error: BaseException, what: str) -> None:
    """Raise (fallback disabled) or warn once for this IR; the caller then runs the reference."""
    path = write_reproducer(fusion_ir)
    if not config.options().fallback:
        raise FusionError(f"{what} failed: {error}\nreproducer: {path}") from error
    warnings.warn(f"mlirfuse: {what} failed ({error}); running it with the reference evaluator "
                  f"instead. Reproducer: {path} (replay: mlirfuse-opt {path} "
                  "--pass-pipeline='builtin.module(fusion-to-linalg)'); set "
                  "MLIRFUSE_DISABLE_FALLBACK=1 to raise instead", RuntimeWarning, stacklevel=3)
