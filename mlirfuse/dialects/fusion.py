"""The `fusion` dialect: loading its IRDL definition into MLIR contexts."""

from __future__ import annotations

import contextlib
from typing import Iterator

from mlir import ir
from mlir._mlir_libs import _mlir
from mlir.dialects import irdl

from mlirfuse.dialects.gen_irdl import IRDL_PATH

_IRDL_TEXT = IRDL_PATH.read_text()

# The bindings look up a Python module for an op's dialect whenever they hand out its OpView
# (`use.owner`, `value.owner`), as `<prefix>.<dialect>`; none found is not remembered, so each
# lookup of a fusion op tried the import again (19 us a use: most of the segmenter's time on a
# function of some hundred ops). This module is the fusion dialect's (its ops have no OpView
# classes of their own: they come as the generic OpView).
if "mlirfuse.dialects" not in _mlir.globals.dialect_search_modules:
    _mlir.globals.append_dialect_search_prefix("mlirfuse.dialects")


def load(context: ir.Context) -> None:
    """Register the fusion dialect's ops in `context` (idempotent per context)."""
    if getattr(context, "_mlirfuse_loaded", False):
        return
    with context:
        irdl.load_dialects(ir.Module.parse(_IRDL_TEXT))
    context.allow_unregistered_dialects = False
    context._mlirfuse_loaded = True  # type: ignore[attr-defined]


def new_context(fusion: bool = True) -> ir.Context:
    """A fresh MLIR context (every context mlirfuse makes comes from here), with the fusion
    dialect loaded unless `fusion=False`.

    MLIR's thread pool is off: a fusion's modules are small, so its worker threads cost more
    than they save, and it keeps pass execution on the thread that compiles (which for a
    torch backward pass is autograd's device thread, not the main one).
    """
    ctx = ir.Context()
    ctx.enable_multithreading(False)
    if fusion:
        load(ctx)
    return ctx


@contextlib.contextmanager
def context() -> Iterator[ir.Context]:
    """A fresh MLIR context with the fusion dialect loaded, entered with a location."""
    with new_context() as ctx, ir.Location.unknown():
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
