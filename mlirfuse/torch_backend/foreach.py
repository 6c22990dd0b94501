"""`torch._foreach_*` ops as one per-tensor op per list element, for AOTAutograd to trace.

torch's optimizers (foreach=True, their default on CUDA) and `clip_grad_norm_` update every
parameter through multi-tensor ops: `_foreach_lerp_(exp_avgs, grads, 1 - beta1)` is one call
on lists of tensors. mlirfuse has no list ops, so a compiled optimizer step left every one of
them to torch, with nothing fused. Decomposed per element, the update of each parameter is a
chain of pointwise ops that fuses into one kernel (torch's eager step runs one multi-tensor
kernel per foreach op, each a pass over all the parameters).

`_foreach_X.overload(lists..., others...)` becomes `[aten.X(element i of each list, others...)]`
(overload chosen by the per-tensor call). Not decomposed, so left to torch as a whole:
`_foreach_addcmul/addcdiv.Tensor` (per-element scalars held in a tensor would need `.item()`),
`_foreach_mm` (a library op) and `_foreach_powsum` (no per-tensor twin).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten

# A per-tensor op of another name or signature than the foreach op's (by name, or by name and
# whether the overload takes scalars: torch.maximum takes tensors only).
_TWINS: dict[Any, Callable[..., Any]] = {
    "norm": lambda x, ord=2, dtype=None: aten.linalg_vector_norm(x, ord, dtype=dtype),
    ("maximum", True): lambda x, s: aten.clamp_min(x, s),
    ("minimum", True): lambda x, s: aten.clamp_max(x, s),
}
_SKIPPED = {("addcmul", "Tensor"), ("addcdiv", "Tensor"), ("mm", "default")}


def _op_names() -> list[str]:
    """Functional (not in-place, not out=) foreach ops known to the dispatcher."""
    names = {n.split("::", 1)[1].split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()
             if n.startswith("aten::_foreach_")}
    return sorted(n for n in names if not n.endswith("_"))


def _signature(twin: Any) -> tuple[int, list[str]]:
    """How many arguments every overload of `twin` takes positionally, and the keyword-only
    names of its first overload (addcmul's `value`)."""
    schemas = [getattr(twin, o)._schema for o in twin.overloads() if "out" not in o]
    schemas = [s for s in schemas if any(str(a.type) == "Tensor" for a in s.arguments)]  # not copy.Dict_str
    positional = min(sum(not a.kwarg_only for a in s.arguments) for s in schemas)
    return positional, [a.name for a in schemas[0].arguments if a.kwarg_only]


def _per_element(twin: Callable[..., Any], positional: int, keywords: list[str]) -> Callable[..., Any]:
    """The foreach overload as a list of twin calls; its arguments past the twin's positional
    ones go to the twin's keyword-only ones in order (`_foreach_addcmul(..., scalars)` to
    addcmul's `value`). A call the twin cannot take returns NotImplemented: the foreach op then
    stays whole (in torch)."""
    def decomposition(*args: Any, **kwargs: Any) -> Any:
        kwargs = {**dict(zip(keywords, args[positional:])), **kwargs}
        args = args[:positional]
        lists = [a for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple))]

        def pick(a: Any, i: int) -> Any:
            return a[i] if isinstance(a, (list, tuple)) else a
        try:
            return [twin(*(pick(a, i) for a in args), **{k: pick(v, i) for k, v in kwargs.items()})
                    for i in range(len(lists[0]))]
        except (RuntimeError, TypeError):
            return NotImplemented
    return decomposition


def foreach_decompositions() -> dict[Any, Callable[..., Any]]:
    """The decomposition of every functional foreach overload that has a per-tensor twin."""
    table: dict[Any, Callable[..., Any]] = {}
    for name in _op_names():
        base = name[len("_foreach_"):]
        packet = getattr(aten, name)
        for overload in packet.overloads():
            if "out" in overload or (base, overload) in _SKIPPED:
                continue
            twin = _TWINS.get((base, overload.startswith("Scalar")), _TWINS.get(base))
            if twin is not None:
                every = len(getattr(packet, overload)._schema.arguments)  # all positional
                table[getattr(packet, overload)] = _per_element(twin, every, [])
                continue
            try:
                twin = getattr(aten, base)
            except AttributeError:
                continue
            table[getattr(packet, overload)] = _per_element(twin, *_signature(twin))
    return table
