"""`mlirfuse.jit(fn)`: trace once per input signature, compile, cache, call."""

from __future__ import annotations

import functools
import threading
from collections import namedtuple
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from mlirfuse.compiler import CompiledFusion
from mlirfuse.dtypes import DataType, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import Fusion, InputSpec, Tensor, tracing
from mlirfuse.frontend.symbolic import ConcreteSizeNeeded

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "compiles"])


def _scalar_spec(value: Any) -> InputSpec | None:
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return InputSpec(DataType.Bool, (), scalar=True)
    if isinstance(value, (int, np.integer)):
        return InputSpec(DataType.Int, (), scalar=True)
    if isinstance(value, (float, np.floating)):
        return InputSpec(DataType.Double, (), scalar=True)
    return None


def input_spec(value: Any, static: bool) -> InputSpec:
    """The signature of one argument: dtype, rank, size-1 dims (or all sizes), contiguity."""
    scalar = _scalar_spec(value)
    if scalar is not None:
        return scalar
    if not isinstance(value, np.ndarray):
        if hasattr(value, "__array__") or isinstance(value, (list, tuple)):
            value = np.asarray(value)
        else:
            raise FusionError(f"unsupported argument of type {type(value).__name__}: "
                              "expected an array or a Python scalar")
    dtype = to_dtype(value.dtype)
    shape = tuple(s if static or s == 1 else None for s in value.shape)
    return InputSpec(dtype, shape, contiguous=bool(value.flags.c_contiguous))


class JitFunction:
    """A traced-and-compiled version of `fn`; call it like `fn`."""

    def __init__(self, fn: Callable[..., Any], backend: str | None = None, dynamic: bool = True):
        self.fn = fn
        self.backend = backend or "cpu"
        self.dynamic = dynamic
        self._cache: dict[tuple, tuple[CompiledFusion, bool]] = {}
        self._static_signatures: set[tuple] = set()  # signatures that needed concrete sizes
        self._lock = threading.Lock()
        self._hits = self._misses = self._compiles = 0
        functools.update_wrapper(self, fn)

    # -- tracing ---------------------------------------------------------------------------
    def trace(self, *args: Any) -> tuple[Fusion, bool]:
        """Trace `fn` on `args`; returns the fusion and whether the result is a tuple."""
        static = not self.dynamic or self._signature(args, static=False) in self._static_signatures
        try:
            return self._trace(args, static)
        except ConcreteSizeNeeded:
            if static:
                raise
            self._static_signatures.add(self._signature(args, static=False))
            return self._trace(args, True)

    def _trace(self, args: Sequence[Any], static: bool) -> tuple[Fusion, Any]:
        fusion = Fusion()
        with tracing(fusion):
            traced = [fusion.add_input(input_spec(a, static)) for a in args]
            result = self.fn(*traced)
        leaves: list[Tensor] = []
        structure = _flatten(result, leaves, self.__name__)
        for out in leaves:
            fusion.add_output(out)
        return fusion, structure

    def fusion_ir(self, *args: Any) -> str:
        """The fusion IR `fn` traces to for these arguments."""
        return self.trace(*args)[0].to_mlir()

    # -- compiling -------------------------------------------------------------------------
    def _signature(self, args: Sequence[Any], static: bool) -> tuple:
        return tuple(input_spec(a, static) for a in args)

    def compile(self, *args: Any, backend: str | None = None, **options: Any) -> CompiledFusion:
        """Compile for these example arguments (without running); keeps every stage's IR."""
        fusion, _ = self.trace(*args)
        return CompiledFusion(fusion, backend or self.backend, keep_stages=True, **options)

    def _key(self, args: Sequence[Any]) -> tuple:
        """Cache key: the dynamic signature, or the full shapes where tracing needed them."""
        key = self._signature(args, static=not self.dynamic)
        if key in self._static_signatures:
            key = self._signature(args, static=True)
        return key

    def _lookup(self, args: Sequence[Any]) -> tuple[CompiledFusion, bool]:
        with self._lock:
            entry = self._cache.get(self._key(args))
            if entry is not None:
                self._hits += 1
                return entry
            self._misses += 1
            fusion, structure = self.trace(*args)
            compiled = CompiledFusion(fusion, self.backend)
            self._compiles += 1
            self._cache[self._key(args)] = (compiled, structure)
            return compiled, structure

    def __call__(self, *args: Any) -> Any:
        compiled, structure = self._lookup(args)
        return _unflatten(structure, iter(compiled(args)))

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, self._compiles)

    def cache_clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._hits = self._misses = self._compiles = 0


def _flatten(result: Any, leaves: list[Tensor], where: str) -> Any:
    """Collect the tensors of a (nested) tuple/list result; returns its structure."""
    if isinstance(result, Tensor):
        leaves.append(result)
        return None
    if isinstance(result, (tuple, list)):
        return type(result), [_flatten(r, leaves, where) for r in result]
    raise FusionError(f"{where}: returned {result!r}; a jitted function must return traced "
                      "tensors (or tuples/lists of them)")


def _unflatten(structure: Any, outputs: Iterator[Any]) -> Any:
    if structure is None:
        return next(outputs)
    kind, children = structure
    return kind(_unflatten(c, outputs) for c in children)


def jit(fn: Callable[..., Any] | None = None, *, backend: str | None = None,
        dynamic: bool = True) -> Any:
    """Compile `fn` (numpy-style tensor code) into fused kernels.

    `dynamic=True` compiles one kernel per (rank, dtype, size-1 dims, contiguity) signature
    that serves every shape; code needing concrete sizes is specialized automatically.
    Usable as `@jit` or `@jit(backend="cpu")`.
    """
    if fn is None:
        return lambda f: JitFunction(f, backend, dynamic)
    return JitFunction(fn, backend, dynamic)
