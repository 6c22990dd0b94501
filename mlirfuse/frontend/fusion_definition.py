"""nvFuser's Python frontend shape: `with FusionDefinition() as fd: ...; fd.execute(inputs)`."""

from __future__ import annotations

import functools
from typing import Any, Sequence

from mlirfuse.arrays import classify_all, placement
from mlirfuse.compiler import CompiledFusion
from mlirfuse.dtypes import DataType, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend import ops as ops_module
from mlirfuse.frontend.graph import Fusion, InputSpec, Tensor, tracing


class _Ops:
    """`fd.ops.<name>`: every mlirfuse op, recorded into this definition."""

    def __init__(self, fd: "FusionDefinition"):
        self._fd = fd

    def __getattr__(self, name: str) -> Any:
        fn = getattr(ops_module, name, None)
        if fn is None or name.startswith("_") or not callable(fn) or name not in ops_module.__all__:
            raise AttributeError(f"fd.ops has no op {name!r}")

        @functools.wraps(fn)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            self._fd._check_open(f"fd.ops.{name}")
            with tracing(self._fd.fusion):
                return fn(*args, **kwargs)
        return recorded

    def __dir__(self) -> list[str]:
        return list(ops_module.__all__)


class FusionDefinition:
    """Define a fusion op by op, then execute it (inputs in definition order)."""

    def __init__(self) -> None:
        self.fusion = Fusion()
        self.ops = _Ops(self)
        self._compiled: dict[tuple[str, bool], CompiledFusion] = {}  # (backend, keeps stages)
        self._tracing = None
        self._finalized = False

    def __enter__(self) -> "FusionDefinition":
        if self._finalized:
            raise FusionError("this FusionDefinition was already defined; create a new one")
        self._tracing = tracing(self.fusion)
        self._tracing.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._tracing is not None
        self._tracing.__exit__(*exc)
        self._tracing = None
        self._finalized = True

    def _check_open(self, what: str) -> None:
        if self._finalized:
            raise FusionError(f"{what}: the definition is closed (define ops inside its `with` block)")

    def define_tensor(self, shape: Sequence[int] | None = None, contiguity: Any = None,
                      dtype: Any = DataType.Float, is_cpu: bool = False, *,
                      symbolic_sizes: Sequence[int] | None = None, contiguous: Any = None,
                      sizes: Sequence[int] | None = None,
                      strides: Sequence[int] | None = None, stride_order: Any = None) -> Tensor:
        """A tensor input. shape: -1 for a symbolic size, 1 for a broadcast dim, else static."""
        self._check_open("define_tensor")
        shape = shape if shape is not None else symbolic_sizes
        contiguity = contiguity if contiguity is not None else contiguous
        if shape is None and sizes is not None:
            shape = [1 if s == 1 else -1 for s in sizes]
        if shape is None:
            raise FusionError("define_tensor: give shape (e.g. [-1, -1])")
        if not isinstance(shape, (list, tuple)):
            raise FusionError(f"define_tensor: shape must be a list of sizes (e.g. [-1, -1]), got {shape!r}")
        dims: list[int | None] = []
        for s in shape:
            if isinstance(s, bool) or not isinstance(s, int) or s < -1:
                raise FusionError(f"define_tensor: invalid shape entry {s!r} in {list(shape)}")
            dims.append(None if s == -1 else s)
        if contiguity is None:
            contiguous = strides is None or _is_contiguous(sizes or [], strides)
        elif isinstance(contiguity, bool):
            contiguous = contiguity
        else:
            if len(contiguity) != len(dims):
                raise FusionError(f"define_tensor: contiguity {list(contiguity)} has {len(contiguity)} entries "
                                  f"for a shape of rank {len(dims)}")
            contiguous = all(c is None or c for c in contiguity)
        dt = DataType.Float if dtype is None else to_dtype(dtype)  # nvFuser's default dtype
        return self.fusion.add_input(InputSpec(dt, tuple(dims), contiguous))

    def define_scalar(self, value: Any = None, dtype: Any = DataType.Double) -> Tensor:
        """A runtime scalar input when value is None, else a constant."""
        self._check_open("define_scalar")
        dt = to_dtype(dtype)
        if value is None:
            if dt.is_low_precision:  # passed as a float32 value, rounded in the fusion
                scalar = self.fusion.add_input(InputSpec(DataType.Float, (), scalar=True))
                return ops_module.cast(scalar, dt)
            return self.fusion.add_input(InputSpec(dt, (), scalar=True))
        return ops_module.constant(value, dt, self.fusion)

    define_constant = define_scalar

    def add_output(self, t: Tensor) -> None:
        self._check_open("add_output")
        self.fusion.add_output(t)

    def compile(self, backend: str = "cpu") -> CompiledFusion:
        """Compile for `backend` (cached); the result keeps every stage's IR."""
        if not isinstance(backend, str):
            raise FusionError(f"compile: backend must be 'cpu' or 'gpu', got a {type(backend).__name__} "
                              "(a definition compiles for its defined inputs: no example inputs)")
        return self._compile(backend, keep_stages=True)

    def _compile(self, backend: str, keep_stages: bool) -> CompiledFusion:
        """A compile that keeps its stages is rebuilt (not loaded from the disk cache), so
        `execute` asks for none: a warm start then loads the kernel from the cache."""
        if self._tracing is not None:
            raise FusionError("execute/compile: leave the `with FusionDefinition()` block first")
        if not self.fusion.outputs:
            raise FusionError("execute: the definition has no outputs (call fd.add_output)")
        compiled = self._compiled.get((backend, True)) or self._compiled.get((backend, keep_stages))
        if compiled is None:
            compiled = self._compiled[(backend, keep_stages)] = CompiledFusion(self.fusion, backend, keep_stages)
        return compiled

    def execute(self, inputs: Sequence[Any], backend: str | None = None) -> list[Any]:
        """Run on `inputs` (tensors and runtime scalars in definition order).

        GPU arrays run on the GPU, host arrays on the CPU unless backend='gpu'.
        """
        if not isinstance(inputs, (list, tuple)):
            raise FusionError("execute: inputs must be a list, in definition order")
        args = classify_all(inputs)
        where, _ = placement(args)
        return self._compile("gpu" if where == "device" else backend or "cpu", keep_stages=False).run(args)

    def __str__(self) -> str:
        return self.fusion.to_mlir()

    __repr__ = __str__


def _is_contiguous(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    expected = 1
    for size, stride in reversed(list(zip(sizes, strides))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True
