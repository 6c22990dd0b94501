"""`mlirfuse.jit(fn)`: trace once per input signature, compile, cache, call."""

from __future__ import annotations

import functools
import inspect
import operator
import sys
import threading
from collections import namedtuple
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from mlirfuse import config
from mlirfuse.arrays import Arg, classify_all, placement
from mlirfuse.autodiff import differentiate
from mlirfuse.compiler import CompiledFusion
from mlirfuse.torch_launcher import MISS
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import Fusion, InputSpec, Tensor, tracing
from mlirfuse.frontend.grad import Differentiated, fused_function, wants_grad
from mlirfuse.frontend.symbolic import ConcreteSizeNeeded, StaticTraceNeeded

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "compiles"])


MAX_LAUNCHERS = 64  # exact argument layouts remembered per function (then forgotten at once)


def _exact_key(args: Sequence[Any]) -> tuple | None:
    """The exact layout of torch CUDA tensors (dtype, sizes, strides, device) and Python
    scalar types, or None when some argument is anything else or dumps are on. Cheap: this
    is all a repeated call computes before it launches."""
    torch = sys.modules.get("torch")
    if torch is None or config.options().dump:
        return None
    tensor = torch.Tensor
    key = []
    for a in args:
        t = type(a)
        if t is tensor or isinstance(a, tensor):
            device = a.get_device()
            if device < 0:
                return None
            key.append((a.dtype, a.shape, a.stride(), device))
        elif t is float or t is int or t is bool:
            key.append(t)
        else:
            return None
    return tuple(key)


def input_spec(arg: Arg, static: bool, static_last: bool = False) -> InputSpec:
    """The signature of one argument: dtype, rank, size-1 dims (or all sizes), contiguity;
    `static_last`: its last dim's size too (the row length of a normalization over it)."""
    if arg.kind == "scalar":
        return InputSpec(arg.dtype, (), scalar=True)
    last = len(arg.shape) - 1
    # a permuted dense layout is read as its contiguous permutation: its dims in that order
    dims = arg.order if arg.order is not None else range(len(arg.shape))
    shape = tuple(arg.shape[d] if static or arg.shape[d] == 1 or (static_last and d == last) else None for d in dims)
    if arg.order is not None:
        return InputSpec(arg.dtype, shape, order=arg.order)
    return InputSpec(arg.dtype, shape, contiguous=arg.contiguous)


def add_inputs(fusion: Fusion, specs: Sequence[InputSpec]) -> list[Tensor]:
    """The fusion's inputs for these specs, as the traced function sees them: an input read
    as the permutation of its argument (`InputSpec.order`) permuted back to the argument's
    dims. Permuted dense arguments thus reach the schedules as contiguous operands with
    permuted indexing (a transpose kernel where the innermost dim changes) instead of
    strided ones read element by element."""
    from mlirfuse.frontend.ops import permute

    traced = []
    for spec in specs:
        t = fusion.add_input(spec)
        if spec.order is not None:
            t = permute(t, [spec.order.index(d) for d in range(len(spec.order))])
        traced.append(t)
    return traced


class JitFunction:
    """A traced-and-compiled version of `fn`; call it like `fn`."""

    def __init__(self, fn: Callable[..., Any], backend: str | None = None, dynamic: bool = True,
                 into: dict[int, int] | None = None, static_last: Sequence[int] = ()):
        if backend not in (None, "cpu", "gpu"):
            raise FusionError(f"unknown backend {backend!r}; choose 'cpu' or 'gpu'")
        self.fn = fn
        self.backend = backend
        self.dynamic = dynamic
        # Positions of the arguments whose last dim's size is part of the signature where the
        # others are dynamic (the torch backend's inputs whose last size Dynamo holds static:
        # kernels over rows of a known length, with no run-time choice of threads per row).
        self.static_last = frozenset(static_last)
        # Result position -> the torch tensor argument it is written into, which is then the
        # result (the torch backend's input mutations: an optimizer's parameters and state).
        # On the GPU's hot path the kernels write it in place where that is safe; elsewhere
        # the result is copied into it.
        self.into = dict(into or {})
        self._cache: dict[tuple, tuple[CompiledFusion, bool]] = {}
        self._static_signatures: set[tuple] = set()  # signatures that needed concrete sizes
        # Static signatures of calls whose sizes the symbolic trace could not take (a slice
        # starting past a dim's end, `StaticTraceNeeded`): they run a trace of their own sizes.
        self._static_shapes: set[tuple] = set()
        # The hot path: exact torch CUDA argument layouts -> (launcher, result builder, result
        # expression), and the guarded call of the layouts last looked up there (`hot`: tried
        # first, it answers `MISS` for other arguments).
        self._launchers: dict[tuple, tuple[Any, Any, str | None]] = {}
        self._hot: Callable[[Sequence[Any]], Any] | None = None
        self.last_compiled: CompiledFusion | None = None  # what the last call not on the hot path ran
        self._lock = threading.Lock()
        self._hits = self._misses = self._compiles = 0
        # Calls under autograd: (signature, inputs needing gradients) -> Differentiated, and
        # the same by exact torch layouts (the repeated call's lookup).
        self._derivatives: dict[tuple, Any] = {}
        self._derivatives_exact: dict[tuple, Any] = {}
        functools.update_wrapper(self, fn)

    # -- tracing ---------------------------------------------------------------------------
    def trace(self, *args: Any) -> tuple[Fusion, Any]:
        """Trace `fn` on `args`; returns the fusion and the structure of its result."""
        return self._trace_infos(classify_all(args))

    def _trace_infos(self, args: Sequence[Arg], then: Callable[[Fusion], Any] | None = None) -> Any:
        """(fusion, structure), or (fusion, structure, then(fusion)): traced with dynamic sizes,
        again with static ones where tracing (or `then`) needs concrete sizes."""
        static = not self.dynamic or self._signature(args, static=False) in self._static_signatures \
            or self._signature(args, static=True) in self._static_shapes
        for attempt in (static, True):
            try:
                fusion, structure = self._trace(args, attempt)
                return (fusion, structure) if then is None else (fusion, structure, then(fusion))
            except ConcreteSizeNeeded:
                if attempt:
                    raise
                self._static_signatures.add(self._signature(args, static=False))
        raise AssertionError("unreachable")

    def _check_arity(self, n: int) -> None:
        try:
            signature = inspect.signature(self.fn)
        except (TypeError, ValueError):
            return
        try:
            signature.bind(*range(n))
        except TypeError as e:
            params = [p for p in signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
            raise FusionError(f"{self.__name__}{signature} takes {len(params)} arguments, "
                              f"called with {n}: {e}") from None

    def _trace(self, args: Sequence[Arg], static: bool) -> tuple[Fusion, Any]:
        self._check_arity(len(args))
        fusion = Fusion()
        with tracing(fusion):
            traced = add_inputs(fusion, list(self._signature(args, static)))
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
    def _signature(self, args: Sequence[Arg], static: bool) -> tuple:
        return tuple(input_spec(a, static, i in self.static_last) for i, a in enumerate(args))

    def compile(self, *args: Any, backend: str | None = None, arch: str | None = None,
                scheduled_ir: str | None = None) -> CompiledFusion:
        """Compile for these example arguments without running them; the result keeps every
        stage's IR (`.stages`) and, for backend='gpu', the PTX (`.ptx`; no GPU needed).
        `scheduled_ir` (GPU): a `stages["scheduled"]` dump, schedules edited by hand, to
        compile from instead (`compiled(inputs)` then runs it)."""
        fusion, _ = self.trace(*args)
        if backend is None:
            where, _ = placement(classify_all(args))
            backend = "gpu" if where == "device" else self.backend or "cpu"
        return CompiledFusion(fusion, backend, keep_stages=True, arch=arch,
                              binary_format="isa" if backend == "gpu" else None, scheduled_ir=scheduled_ir)

    def _key(self, args: Sequence[Arg], backend: str) -> tuple:
        """Cache key: the dynamic signature (or the full shapes where tracing needed them)."""
        key = self._signature(args, static=not self.dynamic)
        if key in self._static_signatures or self._signature(args, static=True) in self._static_shapes:
            key = self._signature(args, static=True)
        return key + (backend,)

    def _traced_statically(self, args: Sequence[Arg]) -> bool:
        """After a `StaticTraceNeeded` call: these sizes get a trace of their own. False where
        they already had one (the error is then the user's)."""
        static = self._signature(args, static=True)
        if static in self._static_shapes or self._key(args, "")[:-1] == static:
            return False
        self._static_shapes.add(static)
        return True

    def _lookup(self, args: Sequence[Arg], backend: str) -> tuple[CompiledFusion, Any]:
        with self._lock:
            entry = self._cache.get(self._key(args, backend))
            if entry is not None:
                self._hits += 1
                return entry
            self._misses += 1
            fusion, structure = self._trace_infos(args)
            compiled = CompiledFusion(fusion, backend)
            self._compiles += 1
            self._cache[self._key(args, backend)] = (compiled, structure)
            return compiled, structure

    # -- autograd --------------------------------------------------------------------------
    def differentiated(self, args: Sequence[Arg], wrt: Sequence[int] | None = None) -> Differentiated:
        """The forward and backward fusions for these arguments and the inputs at `wrt`
        (default: every floating-point tensor), compiled and cached."""
        where, _ = placement(args)
        backend = "gpu" if where == "device" else (self.backend or "cpu")
        if wrt is None:
            wrt = [i for i, a in enumerate(args) if a.kind != "scalar" and a.dtype.is_float]
        with self._lock:
            key = self._key(args, backend) + (tuple(wrt),)
            entry = self._derivatives.get(key)
            if entry is None:
                fusion, structure, derivative = self._trace_infos(args, lambda f: differentiate(f, wrt))
                entry = Differentiated(fusion, structure, derivative, wrt, backend)
                self._compiles += 1
                self._derivatives[self._key(args, backend) + (tuple(wrt),)] = entry
            return entry

    def _call_with_grad(self, args: Sequence[Any]) -> Any:
        """A call torch autograd sees: the fused forward now, the fused backward later."""
        import torch

        wrt = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad)
        key = _exact_key(args)
        entry = self._derivatives_exact.get(key + wrt) if key is not None else None
        if entry is None:
            detached = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
            entry = self.differentiated(classify_all(detached), wrt)
            if key is not None:
                if len(self._derivatives_exact) >= MAX_LAUNCHERS:
                    self._derivatives_exact.clear()
                self._derivatives_exact[key + wrt] = entry
        try:
            outputs = fused_function().apply(entry, key, *args)
        except StaticTraceNeeded:
            if not self._traced_statically(classify_all([a.detach() if isinstance(a, torch.Tensor) else a
                                                         for a in args])):
                raise
            if key is not None:
                self._derivatives_exact.pop(key + wrt, None)
            return self._call_with_grad(args)
        return _unflatten(entry.structure, iter(outputs))

    def _positional(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """The call's arguments by position, keywords bound as Python binds them; a parameter
        skipped before the last one given takes its default. Keyword-only and variadic
        parameters cannot be traced (the trace calls `fn` with positions)."""
        try:
            signature = inspect.signature(self.fn)
            bound = signature.bind(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise FusionError(f"{self.__name__}: {e}") from None
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        names = [p.name for p in signature.parameters.values() if p.kind in positional]
        other = sorted(set(bound.arguments) - set(names))
        if other:
            raise FusionError(f"{self.__name__}: keyword-only or variadic parameters {other} cannot be traced; "
                              "make them positional parameters")
        given = max([len(args)] + [names.index(k) + 1 for k in kwargs])
        bound.apply_defaults()
        return tuple(bound.arguments[n] for n in names[:given])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = self._positional(args, kwargs)
        hot = self._hot
        if hot is not None:
            result = hot(args)
            if result is not MISS:
                self._hits += 1
                return result
        if wants_grad(args):
            if self.into:
                raise FusionError("a function writing results into its arguments cannot be differentiated")
            return self._call_with_grad(args)
        key = _exact_key(args)
        if key is not None:
            entry = self._launchers.get(key)
            if entry is not None:
                self._hits += 1
                launcher, rebuild, result_code = entry
                result = rebuild(launcher.call(args))
                # Later calls with these layouts: one generated function checks and launches
                # (for tensors requiring grad only while grad mode is off, as inside
                # AOTAutograd's compiled forward: with it on, autograd must see the call).
                self._hot = launcher.guarded(args, result_code, rebuild)
                return result
        infos = classify_all(args)
        where, _ = placement(infos)
        backend = "gpu" if where == "device" else (self.backend or "cpu")
        compiled, structure = self._lookup(infos, backend)
        try:
            outputs = compiled.run(infos)
        except StaticTraceNeeded:
            if not self._traced_statically(infos):
                raise
            compiled, structure = self._lookup(infos, backend)
            outputs = compiled.run(infos)
        self.last_compiled = compiled
        outputs = self._written_into(args, outputs)
        if key is not None:
            launcher = compiled.torch_launcher(infos, self.into)
            if launcher is not None:
                if len(self._launchers) >= MAX_LAUNCHERS:
                    self._launchers.clear()
                self._launchers[key] = (launcher, _rebuilder(structure), _result_code(structure, len(outputs)))
        return _unflatten(structure, iter(outputs))

    def _written_into(self, args: Sequence[Any], outputs: Any) -> Any:
        """`outputs` (a flat list) with each result of `into` copied into its argument."""
        for k, j in self.into.items():
            if hasattr(args[j], "copy_"):
                args[j].copy_(outputs[k])
            else:
                np.copyto(args[j], outputs[k])
            outputs[k] = args[j]
        return outputs

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, self._compiles)

    def cache_clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._launchers.clear()
            self._derivatives.clear()
            self._derivatives_exact.clear()
            self._hot = None
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


def _flatten_values(values: Any, structure: Any, where: str) -> list[Any]:
    """The leaves of `values`, nested as a result of `structure` (cotangents, say)."""
    if structure is None:
        return [values]
    kind, children = structure
    if not isinstance(values, (tuple, list)) or len(values) != len(children):
        raise FusionError(f"{where}: expected {len(children)} values nested as the function's result, got {values!r}")
    return [leaf for v, c in zip(values, children) for leaf in _flatten_values(v, c, where)]


def _rebuilder(structure: Any) -> Callable[[list[Any]], Any]:
    """The function making `fn`'s result from the list of its output tensors."""
    if structure is None:
        return operator.itemgetter(0)
    kind, children = structure
    if all(c is None for c in children) and kind in (tuple, list):
        return kind
    return lambda outputs: _unflatten(structure, iter(outputs))


def _result_code(structure: Any, n: int) -> str | None:
    """`fn`'s result as an expression over its outputs o0, o1, ... where it is one output or a
    flat tuple or list of them (None otherwise: the result is rebuilt from their list)."""
    outs = [f"o{k}, " for k in range(n)]
    if structure is None:
        return "o0"
    kind, children = structure
    if kind not in (tuple, list) or any(c is not None for c in children):
        return None
    return f"({''.join(outs)})" if kind is tuple else f"[{''.join(outs)}]"


def _unflatten(structure: Any, outputs: Iterator[Any]) -> Any:
    if structure is None:
        return next(outputs)
    kind, children = structure
    items = [_unflatten(c, outputs) for c in children]
    return kind(*items) if hasattr(kind, "_fields") else kind(items)  # a namedtuple takes fields


def jit(fn: Callable[..., Any] | None = None, *, backend: str | None = None,
        dynamic: bool = True) -> Any:
    """Compile `fn` (numpy-style tensor code) into fused kernels.

    `dynamic=True` compiles one kernel per (rank, dtype, size-1 dims, layout) signature
    that serves every shape; code needing concrete sizes is specialized automatically.
    Usable as `@jit` or `@jit(backend="cpu")`.
    """
    if fn is None:
        return lambda f: JitFunction(f, backend, dynamic)
    return JitFunction(fn, backend, dynamic)
