"""fusion-autodiff: reverse-mode autodiff of a fusion function: its backward, and the forward
rewritten to return what the backward reads.

Expects fusion IR as traced (before `fusion-group`), with a function named by `func`
(default `@fusion`). Leaves `@<func>` returning its outputs and then the residuals (forward
values the backward reads rather than recomputes: reductions' results, library results;
`mlirfuse.autodiff.SavePolicy`), and `@<func>_backward`, whose arguments are `@<func>`'s
arguments, one cotangent per differentiable output, then the residuals, and whose results are
the gradients. Attributes on the backward say how the two connect: `fusion.cotangents` (the
forward outputs taking a cotangent), `fusion.residuals` (the forward results passed as
residuals) and `fusion.gradients` (the arguments whose gradients it returns). Both functions
are ordinary fusion functions: group, segment and schedule them like any other. A gradient
dividing by a dynamic size (mean, var) needs static sizes: that is an error here.
"""

from __future__ import annotations

from mlir import ir

from mlirfuse.autodiff import differentiate
from mlirfuse.errors import FusionError
from mlirfuse.frontend.importer import import_fusion
from mlirfuse.frontend.symbolic import ConcreteSizeNeeded
from mlirfuse.passes.common import functions

NAME = "fusion-autodiff"
OPTIONS = {
    "func": (str, "fusion", "the function to differentiate"),
    "wrt": (str, "", "argument positions taking gradients, comma-separated (default: every float argument)"),
}


def _function(module: ir.Operation, name: str) -> ir.Operation:
    for f in functions(module):
        if ir.StringAttr(f.attributes["sym_name"]).value == name:
            return f
    raise FusionError(f"fusion-autodiff: no function @{name}")


def _parsed_function(fusion, name: str, context: ir.Context) -> ir.Operation:
    parsed = ir.Module.parse(fusion.to_mlir(), context)
    func = next(iter(parsed.body.operations)).operation
    func.attributes["sym_name"] = ir.StringAttr.get(name, context)
    return func, parsed


def _indices(values: list[int], context: ir.Context) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get(values, context)


def run(module: ir.Operation, func: str = "fusion", wrt: str = "") -> None:
    original = _function(module, func)
    fusion = import_fusion(original)
    try:
        positions = [int(p) for p in wrt.split(",")] if wrt.strip() else None
    except ValueError:
        raise FusionError(f"fusion-autodiff: wrt must be argument positions like 0,2, got '{wrt}'") from None
    try:
        d = differentiate(fusion, positions)
    except ConcreteSizeNeeded as e:
        raise FusionError(f"fusion-autodiff: {e} (give the function static sizes)") from None
    context = module.context
    block = module.regions[0].blocks[0]
    new = []
    for fz, name in ((d.forward, func), (d.backward, f"{func}_backward")):
        f, parsed = _parsed_function(fz, name, context)
        new.append((f.clone(ir.InsertionPoint(block)), parsed))
    backward = new[1][0]
    backward.attributes["fusion.cotangents"] = _indices(d.cotangents, context)
    backward.attributes["fusion.residuals"] = _indices(d.residuals, context)
    backward.attributes["fusion.gradients"] = _indices(d.gradients, context)
    original.erase()
