"""A traced fusion, compiled: guards on its inputs, output allocation, and the kernel call."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import Fusion, InputSpec
from mlirfuse.frontend.symbolic import evaluate

BACKENDS = ("cpu",)


def describe(spec: InputSpec) -> str:
    if spec.scalar:
        return f"{spec.dtype.value} scalar"
    dims = ", ".join("?" if s is None else str(s) for s in spec.shape)
    return f"{spec.dtype.value}[{dims}]"


def check_input(i: int, value: Any, spec: InputSpec) -> np.ndarray:
    """The numpy array for input i, or FusionError saying how it differs from its definition."""
    if spec.scalar:
        if isinstance(value, np.ndarray) and value.ndim != 0:
            raise FusionError(f"input {i}: expected a scalar, got an array of shape {value.shape}")
        try:
            return np.asarray(value, dtype=spec.dtype.np)
        except (TypeError, ValueError):
            raise FusionError(f"input {i}: expected a {spec.dtype.value} scalar, got {value!r}") from None
    if not isinstance(value, np.ndarray):
        raise FusionError(f"input {i}: expected an array ({describe(spec)}), got {type(value).__name__}")
    if value.dtype != spec.dtype.np:
        raise FusionError(f"input {i}: expected dtype {spec.dtype.value}, got {value.dtype}")
    if value.ndim != spec.rank:
        raise FusionError(f"input {i}: expected rank {spec.rank} ({describe(spec)}), "
                          f"got shape {value.shape}")
    for d, (want, got) in enumerate(zip(spec.shape, value.shape)):
        if want is not None and want != got:
            raise FusionError(f"input {i}: dim {d} must be {want} ({describe(spec)}), got shape {value.shape}")
        if want is None and got == 1:
            raise FusionError(f"input {i}: dim {d} is 1 but was defined symbolic (not broadcast); "
                              f"got shape {value.shape}")
    if spec.contiguous and not value.flags.c_contiguous:
        value = np.ascontiguousarray(value)
    elif any(s % value.itemsize for s in value.strides):
        value = np.ascontiguousarray(value)
    return value


class CompiledFusion:
    """One fusion compiled for one input signature and backend."""

    def __init__(self, fusion: Fusion, backend: str = "cpu", keep_stages: bool = False):
        if backend not in BACKENDS:
            raise FusionError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
        self.fusion = fusion
        self.backend = backend
        self.fusion_ir = fusion.to_mlir()
        from mlirfuse.lowering.cpu import compile_cpu

        self.kernel = compile_cpu(self.fusion_ir, fusion.specs, keep_stages=keep_stages)
        self.stages = self.kernel.stages
        self.compile_seconds = self.kernel.compile_seconds
        self._output_shapes = [t.shape for t in fusion.outputs]
        self._output_dtypes = [t.dtype.np for t in fusion.outputs]

    def output_shapes(self, shapes: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
        for a, b in self.fusion.constraints:
            va, vb = evaluate(a, shapes), evaluate(b, shapes)
            if va != vb:
                raise FusionError(f"input shapes {[tuple(s) for s in shapes]} are inconsistent: "
                                  f"the fusion needs {a} == {b} (got {va} and {vb}); "
                                  "they do not broadcast or reshape as traced")
        return [tuple(evaluate(s, shapes) for s in shape) for shape in self._output_shapes]

    def __call__(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        specs = self.fusion.specs
        if len(inputs) != len(specs):
            raise FusionError(f"expected {len(specs)} inputs ({', '.join(describe(s) for s in specs)}), "
                              f"got {len(inputs)}")
        arrays = [check_input(i, v, s) for i, (v, s) in enumerate(zip(inputs, specs))]
        shapes = self.output_shapes([a.shape for a in arrays])
        outputs = [np.empty(s, dtype=dt) for s, dt in zip(shapes, self._output_dtypes)]
        self.kernel(arrays, outputs, [s.scalar for s in specs])
        return outputs
