"""A FusionDefinition's call log: what lets a definition that needs concrete sizes be traced
again per input signature (`FusionDefinition._record` / `_replay`), and the `Deferred`
values it hands out until then."""

from __future__ import annotations

from typing import Any, Sequence

from mlirfuse.errors import FusionError
from mlirfuse.frontend import ops as ops_module
from mlirfuse.frontend.complex_ops import ComplexTensor
from mlirfuse.frontend.graph import Fusion, Tensor


class Call:
    """One logged definition call: ("ops" | "fd", name), its arguments, its result and the
    inputs (numbers of execute's inputs) it defined."""

    def __init__(self, key: tuple[str, str], args: tuple, kwargs: dict[str, Any]):
        self.key, self.args, self.kwargs = key, args, kwargs
        self.result: Any = None
        self.user_inputs: list[int] = []


class Deferred:
    """A value of a definition that waits for its inputs' sizes (see `FusionDefinition`):
    it can be passed to `fd.ops`, combined with Python operators and added as an output; its
    shape and dtype are known once the definition is traced with the inputs' sizes."""

    def __init__(self, fd: Any, call: Call, index: int | None):
        self._fd, self._call, self._index = fd, call, index

    def _unknown(self, what: str) -> Any:
        raise FusionError(f"{what} of a deferred value: the definition needs concrete sizes ({self._fd._deferred}), "
                          "so it is traced when executed")

    dtype = property(lambda self: self._unknown("the dtype"))
    shape = property(lambda self: self._unknown("the shape"))
    ndim = property(lambda self: self._unknown("the rank"))

    def __getitem__(self, index: int) -> Any:  # an entry of a deferred vector (`fd.ops.shape(t)[1]`)
        return self._fd.ops.at(self, index)

    def __repr__(self) -> str:
        which = "" if self._index is None else f"[{self._index}]"
        return f"Deferred(fd.ops.{self._call.key[1]}{which})"


def _deferred_binary(name: str, reflected: bool = False) -> Any:
    if reflected:
        return lambda self, other: getattr(self._fd.ops, name)(other, self)
    return lambda self, other: getattr(self._fd.ops, name)(self, other)


for _dunder, _name in {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "pow": "pow",
                       "mod": "remainder", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}.items():
    setattr(Deferred, f"__{_dunder}__", _deferred_binary(_name))
    setattr(Deferred, f"__r{_dunder}__", _deferred_binary(_name, reflected=True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Deferred, f"__{_name}__", _deferred_binary(_name))
Deferred.__hash__ = object.__hash__  # type: ignore[method-assign]
Deferred.__neg__ = lambda self: self._fd.ops.neg(self)  # type: ignore[attr-defined]

RESULTS_OF = {"welford": 3, "var_mean": 2, "sdpfa_fwd": 4, "sdpfa_bwd": 3}  # ops with several results


def deferred_result(fd: Any, call: Call) -> Any:
    n = RESULTS_OF.get(call.key[1], 1) if call.key[0] == "ops" else 1
    if call.key == ("fd", "add_output"):
        return None
    return Deferred(fd, call, None) if n == 1 else tuple(Deferred(fd, call, i) for i in range(n))


def holds_deferred(value: Any) -> bool:
    if isinstance(value, Deferred):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds_deferred(v) for v in value)
    if isinstance(value, dict):
        return any(holds_deferred(v) for v in value.values())
    return False


def in_lists(value: Any, in_list: bool = False) -> list[Any]:
    """The values found inside lists and tuples of call arguments (shapes)."""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in in_lists(v, True)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in in_lists(v, in_list)]
    return [value] if in_list else []


def sized(old: Any, new: Any, sizes: dict[int, int], inputs: Sequence[Any], plan: list, fusion: Fusion) -> Any:
    """A replayed definition call's result with the runtime scalars that sizes depend on
    replaced by constants of their values (lists element-wise, as define_vector's)."""
    if isinstance(old, list) and isinstance(new, list):
        return [sized(o, n, sizes, inputs, plan, fusion) for o, n in zip(old, new)]
    if isinstance(old, Tensor) and id(old) in sizes:
        number = sizes[id(old)]
        return ops_module.constant(inputs[number], plan[number][2], fusion)
    return new


def bind(old: Any, new: Any, table: dict[int, Any]) -> None:
    """Record that the traced-again `new` stands for `old` (matching tuples element-wise)."""
    if isinstance(old, (Tensor, Deferred, ComplexTensor)):
        table[id(old)] = new
    elif isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)) and len(old) == len(new):
        for o, n in zip(old, new):
            bind(o, n, table)
