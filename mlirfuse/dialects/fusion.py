"""The `fusion` dialect: loading its IRDL definition into MLIR contexts."""

from __future__ import annotations

import contextlib
from typing import Iterator

from mlir import ir
from mlir.dialects import irdl

from mlirfuse.dialects.gen_irdl import IRDL_PATH

_IRDL_TEXT = IRDL_PATH.read_text()


def load(context: ir.Context) -> None:
    """Register the fusion dialect's ops in `context` (idempotent per context)."""
    if getattr(context, "_mlirfuse_loaded", False):
        return
    with context:
        irdl.load_dialects(ir.Module.parse(_IRDL_TEXT))
    context.allow_unregistered_dialects = False
    context._mlirfuse_loaded = True  # type: ignore[attr-defined]


@contextlib.contextmanager
def context() -> Iterator[ir.Context]:
    """A fresh MLIR context with the fusion dialect loaded, entered with a location."""
    with ir.Context() as ctx, ir.Location.unknown():
        load(ctx)
        yield ctx


def parse(text: str, context: ir.Context) -> ir.Module:
    """Parse fusion IR text; MLIR's diagnostics become a FusionError."""
    from mlirfuse.errors import FusionError

    load(context)
    try:
        with context:
            return ir.Module.parse(text)
    except ir.MLIRError as e:
        raise FusionError(f"invalid fusion IR: {e}") from None
