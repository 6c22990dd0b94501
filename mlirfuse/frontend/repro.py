"""nvFuser's repro scripts: a self-contained Python script that defines a fusion again (its
printed definition, `repr(fd)`) and runs it on inputs like the ones it ran on (same sizes,
strides, dtypes and devices; random values; runtime scalars as they were).

`fd.execute(inputs, save_repro_state=True)` keeps a description of the inputs (not the
tensors), `fd.last_repro_script()` writes the script for them, `fd.repro_script_for(inputs)`
for any inputs. The script imports mlirfuse, whose frontend it was written for.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlirfuse.dtypes import to_dtype


@dataclass(frozen=True)
class TensorInput:
    """What a repro script needs of a tensor input: not its values."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str  # torch's name, e.g. torch.float32
    device: str
    floating: bool
    boolean: bool

    @property
    def contiguous(self) -> bool:
        expected, step = [], 1
        for n in reversed(self.size):
            expected.insert(0, step)
            step *= max(n, 1)
        return all(n == 1 or s == e for n, s, e in zip(self.size, self.stride, expected))


def describe(inputs: Sequence[Any]) -> list[Any]:
    """Each input as a `TensorInput` (torch tensors and numpy arrays) or its value (scalars,
    lists of scalars)."""
    return [_describe(x) for x in inputs]


def _describe(x: Any) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(x, "__cuda_array_interface__") and not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)  # a CuPy or other CUDA array: described as torch sees it
    if torch is not None and isinstance(x, torch.Tensor):
        size, stride, device = tuple(x.size()), tuple(x.stride()), str(x.device)
    elif isinstance(x, np.ndarray):
        size, stride, device = x.shape, tuple(s // x.itemsize for s in x.strides), "cpu"
    else:
        return x
    dtype = to_dtype(x.dtype)  # its value: torch's name of the dtype
    return TensorInput(size, stride, f"torch.{dtype.value}", device, dtype.is_float or dtype.is_complex,
                       dtype.is_bool)


def script(definition: str, function: str, inputs: list[Any] | None, header: list[str]) -> str:
    """The repro script: `header` comment lines, the definition (`repr(fd)`, which defines
    `function`), the fusion defined with it and, with `inputs` (`describe`d), run."""
    lines = [f"# {h}" for h in header] + ["import torch", "from mlirfuse import FusionDefinition, DataType"]
    text = "\n".join(lines) + "\n\n" + definition.strip("\n") + "\n\n"
    text += f"with FusionDefinition() as fd:\n    {function}(fd)\n"
    if inputs is not None:
        text += "\ninputs = [\n" + "".join(f"    {_input(x)},\n" for x in inputs) + "]\nfd.execute(inputs)\n"
    return text


def _input(x: Any) -> str:
    if not isinstance(x, TensorInput):
        return _scalar(x)
    if x.contiguous:
        return f"torch.testing.make_tensor({x.size}, dtype={x.dtype}, device='{x.device}')"
    # the elements up to the last one the strides reach, viewed with them
    n = 0 if 0 in x.size else 1 + sum((k - 1) * s for k, s in zip(x.size, x.stride))
    if x.floating:
        storage = f"torch.randn({n}, dtype={x.dtype}, device='{x.device}')"
    else:
        storage = f"torch.randint(0, {2 if x.boolean else 10}, ({n},), dtype={x.dtype}, device='{x.device}')"
    return f"{storage}.as_strided({x.size}, {x.stride})"


def _scalar(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_scalar(e) for e in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, float) and not math.isfinite(v):
        return 'float("nan")' if math.isnan(v) else ('float("inf")' if v > 0 else '-float("inf")')
    if isinstance(v, complex):
        return f"complex({_scalar(v.real)}, {_scalar(v.imag)})"
    text = repr(v.item() if hasattr(v, "item") else v)
    return re.sub(r"\binf\b", 'float("inf")', re.sub(r"\bnan\b", 'float("nan")', text))
