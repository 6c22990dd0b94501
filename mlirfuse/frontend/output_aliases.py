"""Outputs of a FusionDefinition that are its inputs, as nvFuser returns them: not copies.

nvFuser's alias analysis hands back an output that only views an input (a reshape, permute,
squeeze or unsqueeze of it) as a view of that input's memory, an output equal to an input as
the input itself, and an output whose value was also written into an input (`add_output(t,
alias_input=x)`) as that input, which then holds it. Called after the kernels ran and the
in-place updates were written, so every such output shows the inputs' current values.
"""

from __future__ import annotations

from typing import Any, Sequence

from mlirfuse.frontend.graph import Fusion, Tensor
from mlirfuse.frontend.symbolic import SymSize

VIEWS = ("reshape", "permute", "squeeze", "unsqueeze")


def alias_outputs(fusion: Fusion, outputs: list[Any], inputs: Sequence[Any], aliases: dict[int, int],
                  skip: set[int]) -> list[Any]:
    """`outputs` with each one that is an input, a view of one, or a value written into one
    replaced by that input (or the view of it); outputs in `skip` (laid out by a stride
    order, complex) and inputs that are not torch tensors stay as they are."""
    written = {id(fusion.outputs[o]): position for o, position in aliases.items()}
    positions = {id(t): k for k, t in enumerate(fusion.inputs)}
    shapes = [tuple(getattr(x, "shape", ())) for x in inputs]
    result = list(outputs)
    for i, value in enumerate(fusion.outputs):
        if i in aliases or i in skip:
            continue
        if id(value) in written and _is_torch(inputs[written[id(value)]]):
            result[i] = inputs[written[id(value)]]
            continue
        chain = _views_of_an_input(value, positions)
        if chain is None or not _is_torch(inputs[chain[0]]):
            continue
        view = _replay(inputs[chain[0]], chain[1], shapes)
        if view is not None:
            result[i] = view
    return result


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _views_of_an_input(value: Tensor, positions: dict[int, int]) -> tuple[int, list[Any]] | None:
    """(input position, the view nodes from it to `value`) where `value` is an input seen
    through views only; else None."""
    nodes = []
    while id(value) not in positions:
        node = value.node
        if node is None or node.op not in VIEWS:
            return None
        nodes.append(node)
        value = node.inputs[0]
    return positions[id(value)], nodes[::-1]


def _replay(x: Any, nodes: list[Any], shapes: list[tuple[int, ...]]) -> Any:
    """The views `nodes` taken of the torch tensor `x` (None where torch cannot view it so)."""
    for node in nodes:
        out = node.outputs[0]
        try:
            if node.op == "reshape":
                x = x.view([s.evaluate(shapes) if isinstance(s, SymSize) else s for s in out.shape])
            elif node.op == "permute":
                x = x.permute(list(node.attrs["dims"]))
            elif node.op == "squeeze":
                x = x.squeeze(tuple(node.attrs["dims"]))
            else:
                x = x.unsqueeze(node.attrs["dim"])
        except RuntimeError:  # not a view of this layout
            return None
    return x
