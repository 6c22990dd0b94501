"""A FusionDefinition printed as nvFuser prints one: a Python function that makes the same
definition again (`repr(fd)`), written from the definition's call log.

    def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
        T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        S1 = fd.define_scalar(None, dtype=DataType.Double)
        T2 = fd.ops.mul(T0, S1)
        fd.add_output(T2)

Each call is printed as it was made (Python operators as the `fd.ops` calls they are), so
executing the function traces the same fusion: it is the same entry of the FusionCache, and
what `FusionCache.serialize` writes. Values are named as nvFuser names them: `T` tensors, `S`
scalars, `V` vectors, numbered in definition order. The text needs only `FusionDefinition` and
`DataType` in scope.
"""

from __future__ import annotations

import math
from typing import Any

from mlirfuse.dtypes import DataType, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend.complex_ops import ComplexTensor
from mlirfuse.frontend.definition_log import Call, Deferred
from mlirfuse.frontend.graph import SCALAR, Tensor
from mlirfuse.frontend.symbolic import SymSize

VALUES = (Tensor, Deferred, ComplexTensor)


def print_definition(log: list[Call], number: int | None, inputs: list[Tensor]) -> str:
    """The definition whose calls are `log` as nvFuser's printed Python function; `inputs`
    are its fusion's inputs (symbolic sizes are spelled as their extents, `T0.size(1)`)."""
    name = f"nvfuser_fusion_id{number}" if number is not None else "nvfuser_incomplete_fusion"
    names: dict[int, str] = {}
    lines = [f"\ndef {name}(fd : FusionDefinition) -> None :"]
    # A complex input is a real fusion input with a trailing dim of 2, read as its parts: its
    # other sizes are spelled as the complex value's (`T0.size(1)`)
    inputs = list(inputs)
    for call in log:
        if isinstance(call.result, ComplexTensor):
            inputs = [call.result if t is _source(call.result.re) else t for t in inputs]
    for call in log:
        scope, op = call.key
        args = [_spell(a, names, inputs) for a in call.args]
        args += [f"{k}={_spell(v, names, inputs)}" for k, v in call.kwargs.items()]
        text = f"fd.{'ops.' if scope == 'ops' else ''}{op}({', '.join(args)})"
        target = _name_result(call.result, names)
        lines.append(f"    {target + ' = ' if target else ''}{text}")
    if not log:
        lines.append("    pass")
    return "\n".join(lines) + "\n"


def _source(part: Tensor) -> Tensor | None:
    """The fusion input a complex input's part is read from (a slice and squeeze of its last
    dim), or None for a complex value computed by the definition."""
    t = part
    for _ in range(2):
        if t.node is None or t.node.op not in ("squeeze", "slice"):
            return None
        t = t.node.inputs[0]
    return t if t.node is None else None


def state_indices(log: list[Call]) -> dict[int, int]:
    """nvFuser's state index of each value the calls made (by `id`): the number in its
    printed name (`T3` is 3), as `fd.inputs()` and `fd.outputs()` report them."""
    names: dict[int, str] = {}
    for call in log:
        _name_result(call.result, names)
    return {key: int(name[1:]) for key, name in names.items() if "[" not in name}


def _name_result(result: Any, names: dict[int, str]) -> str:
    """Name a call's result: `T3` (`S3` a scalar), `T3, T4` for several results, `V5` for a
    vector (define_vector's list, a shape), whose elements are `V5[0]`, ...; a size
    (`fd.ops.size`) `S6`."""
    if result is None:
        return ""
    if isinstance(result, list):
        vector = names[id(result)] = f"V{len(names)}"
        for i, element in enumerate(result):
            if isinstance(element, VALUES + (SymSize,)) and id(element) not in names:
                names[id(element)] = f"{vector}[{i}]"
        return vector
    results = result if isinstance(result, tuple) else (result,)
    for value in results:
        if not isinstance(value, VALUES + (SymSize, int)):
            raise FusionError(f"printing the definition: a call returned {value!r}, not a value")
        names.setdefault(id(value), f"{_kind(value)}{len(names)}")
    return ", ".join(names[id(value)] for value in results)


def _kind(value: Any) -> str:
    if isinstance(value, ComplexTensor):
        value = value.re
    return "T" if isinstance(value, Deferred) or isinstance(value, Tensor) and value.priority != SCALAR else "S"


def _spell(value: Any, names: dict[int, str], inputs: list[Tensor]) -> str:
    """An argument as Python source."""
    if isinstance(value, VALUES) or isinstance(value, (list, SymSize)) and id(value) in names:
        if id(value) not in names:
            raise FusionError(f"printing the definition: {value!r} was not made by a call of this definition")
        return names[id(value)]
    if isinstance(value, SymSize):  # coef * extents + offset, from the inputs' sizes
        extents = " * ".join(f"{_spell(inputs[i], names, inputs)}.size({d})" for i, d in value.factors)
        coef = value.coef
        text = f"({extents} * {coef.numerator}) // {coef.denominator}" if coef != 1 else extents
        return f"({text} + {value.offset})" if value.offset else text
    if isinstance(value, DataType):
        return f"DataType.{value.name}"
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "-float('inf')"
        return repr(float(value))
    if isinstance(value, complex):
        return f"complex({_spell(value.real, names, inputs)}, {_spell(value.imag, names, inputs)})"
    if isinstance(value, list):
        return "[" + ", ".join(_spell(v, names, inputs) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_spell(v, names, inputs) for v in value) + ("," if len(value) == 1 else "") + ")"
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # a numpy or torch scalar
        return _spell(value.item(), names, inputs)
    try:
        return f"DataType.{to_dtype(value).name}"  # a torch or numpy dtype
    except FusionError:
        raise FusionError(f"printing the definition: an argument {value!r} ({type(value).__name__}) "
                          "has no Python spelling") from None
