"""Training through `mlirfuse.jit`: fused forward and backward kernels under torch.autograd,
and the functional `vjp` / `grad` for numpy arrays and torch tensors.

A jitted function called on tensors that require grad (with grad mode on) runs through
`FusedFunction`: its forward runs the forward fusion rewritten by `autodiff.differentiate`
(outputs, then residuals), its backward runs the backward fusion on the primals, the
cotangents and the residuals. Both are compiled like any fusion and cached per signature.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from mlirfuse.arrays import classify_all
from mlirfuse.autodiff import Derivative, differentiate
from mlirfuse.compiler import CompiledFusion
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import Fusion

MAX_LAUNCHERS = 64
MISSING: Any = object()


class _Runner:
    """A compiled fusion plus its torch launchers per exact argument layout (the jit's hot path)."""

    def __init__(self, compiled: CompiledFusion):
        self.compiled = compiled
        self._launchers: dict[tuple, Any] = {}

    def __call__(self, values: Sequence[Any], key: tuple | None = MISSING) -> list[Any]:
        """Run on `values` (`key`: their `_exact_key`, where the caller has it)."""
        if key is MISSING:
            from mlirfuse.frontend.jit import _exact_key

            key = _exact_key(values)
        launcher = self._launchers.get(key) if key is not None else None
        if launcher is not None:
            return launcher.call(values)
        values = [v.detach() if getattr(v, "requires_grad", False) else v for v in values]
        infos = classify_all(values)
        outputs = self.compiled.run(infos)
        if key is not None:
            launcher = self.compiled.torch_launcher(infos)
            if launcher is not None:
                if len(self._launchers) >= MAX_LAUNCHERS:
                    self._launchers.clear()
                self._launchers[key] = launcher
        return outputs


class Differentiated:
    """One traced signature's forward (with residuals) and its backwards, compiled per
    cotangent layout (contiguous or not: an expanded cotangent is read as it is)."""

    def __init__(self, fusion: Fusion, structure: Any, derivative: Derivative, wrt: Sequence[int], backend: str):
        self.fusion = fusion
        self.structure = structure
        self.derivative = derivative
        self.wrt = list(wrt)
        self.backend = backend
        self.forward = _Runner(CompiledFusion(derivative.forward, backend))
        specs = fusion.specs
        self.tensor_args = [i for i, spec in enumerate(specs) if not spec.scalar]
        self.scalars = len(self.tensor_args) < len(specs)
        flowing = set(derivative.cotangents)
        self.constant_outputs = [k for k in range(derivative.n_outputs) if k not in flowing]
        self._backwards: dict[tuple[bool, ...], _Runner] = {}
        self._lock = threading.Lock()

    def backward(self, contiguous: tuple[bool, ...]) -> _Runner:
        runner = self._backwards.get(contiguous)
        if runner is None:
            with self._lock:
                d = self.derivative
                if not all(contiguous):
                    d = differentiate(self.fusion, self.wrt, contiguous)
                    assert d.residuals == self.derivative.residuals, "autodiff is deterministic"
                runner = self._backwards.setdefault(contiguous, _Runner(CompiledFusion(d.backward, self.backend)))
        return runner

    def in_argument_dims(self, i: int, gradient: Any) -> Any:
        """The gradient of input i in its argument's dims: the fusion's input is the
        argument's permutation where it was read as one (`InputSpec.order`)."""
        order = self.fusion.specs[i].order
        if order is None:
            return gradient
        back = [order.index(d) for d in range(len(order))]
        return np.transpose(gradient, back) if isinstance(gradient, np.ndarray) else gradient.permute(back)

    def run_backward(self, primals: Sequence[Any], cotangents: Sequence[Any], residuals: Sequence[Any],
                     key: tuple | None = None) -> list[Any]:
        """The gradients; `key`: the forward call's exact argument layout, which with the
        cotangents' strides fixes every backward argument's (the residuals are the forward's
        fresh outputs), so that the backward's launcher is found without checking them."""
        layout = tuple(_is_contiguous(c) for c in cotangents)
        values = [*primals, *cotangents, *residuals]
        if key is None:
            return self.backward(layout)(values)
        return self.backward(layout)(values, (key, tuple(c.stride() for c in cotangents)))


def _is_contiguous(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return bool(value.flags.c_contiguous)
    return bool(value.is_contiguous())


def _double_backward_error() -> FusionError:
    return FusionError("mlirfuse.jit: double backward (differentiating a gradient taken with create_graph=True) "
                       "is not supported; the backward kernels are not differentiable themselves")


_FUNCTION = None


def fused_function() -> Any:
    """The torch.autograd.Function (made once torch is imported)."""
    global _FUNCTION
    if _FUNCTION is not None:
        return _FUNCTION
    import torch

    class NotDifferentiableAgain(torch.autograd.Function):
        """The identity on the first n tensors (connected to the rest, the values they were
        computed from), with a backward that says why it cannot run."""

        @staticmethod
        def forward(ctx: Any, n: int, *tensors: Any) -> Any:
            return tuple(t.view_as(t) for t in tensors[:n])

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            raise _double_backward_error()

    class FusedFunction(torch.autograd.Function):
        """Forward: the forward fusion; backward: the backward fusion. Inputs: the
        Differentiated entry, then the jitted function's arguments."""

        @staticmethod
        def forward(ctx: Any, entry: Differentiated, key: tuple | None, *args: Any) -> Any:
            d = entry.derivative
            outputs = entry.forward(args, key)
            ctx.entry, ctx.key = entry, key
            ctx.tensor_args = entry.tensor_args
            ctx.scalars = [None if i in entry.tensor_args else a for i, a in enumerate(args)] if entry.scalars else args
            ctx.save_for_backward(*[args[i] for i in entry.tensor_args], *[outputs[k] for k in d.residuals])
            returned = outputs[:d.n_outputs]
            if entry.constant_outputs:
                ctx.mark_non_differentiable(*[returned[k] for k in entry.constant_outputs])
            return tuple(returned)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            if torch.is_grad_enabled():  # create_graph=True: gradients whose own backward raises
                with torch.no_grad():
                    result = FusedFunction.backward(ctx, *grads)
                tensors = [g for g in result if g is not None]
                sources = [t for t in ctx.saved_tensors if t.requires_grad]  # what they depend on
                marked = iter(NotDifferentiableAgain.apply(len(tensors), *tensors, *sources)) if tensors else iter(())
                return tuple(None if g is None else next(marked) for g in result)
            entry: Differentiated = ctx.entry
            d = entry.derivative
            saved = ctx.saved_tensors
            n = len(ctx.tensor_args)
            primals = list(ctx.scalars)
            for i, t in zip(ctx.tensor_args, saved[:n]):
                primals[i] = t
            cotangents = [grads[k] for k in d.cotangents]  # zeros where unused (materialize_grads)
            result: list[Any] = [None] * (2 + len(primals))
            needs = ctx.needs_input_grad
            if not any(needs[2 + i] for i in d.gradients):
                return tuple(result)
            for i, g in zip(d.gradients, entry.run_backward(primals, cotangents, saved[n:], ctx.key)):
                if needs[2 + i]:
                    result[2 + i] = entry.in_argument_dims(i, g)
            return tuple(result)

    _FUNCTION = FusedFunction
    return _FUNCTION


def wants_grad(args: Sequence[Any]) -> bool:
    """Whether torch autograd must see this call: grad mode on and a tensor requiring grad."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return False
    tensor = torch.Tensor
    return any(isinstance(a, tensor) and a.requires_grad for a in args)


# -- the functional API -------------------------------------------------------------------
def vjp(fn: Callable[..., Any], *args: Any, backend: str | None = None) -> tuple[Any, Callable[[Any], tuple]]:
    """`(outputs, vjp_fn)` as `jax.vjp`: `vjp_fn(cotangents)` (shaped as the outputs) returns
    one gradient per argument: zeros for a floating-point tensor no output depends on, None
    for integer, bool and Python-scalar arguments. `fn` is jitted (or a `mlirfuse.jit`
    function); numpy arrays run on the CPU backend, torch tensors where they live."""
    from mlirfuse.frontend.jit import JitFunction, _flatten_values, _unflatten

    jitted = fn if isinstance(fn, JitFunction) else JitFunction(fn, backend)
    infos = classify_all(args)
    entry = jitted.differentiated(infos)
    d = entry.derivative
    outputs = entry.forward(list(args))
    returned = outputs[:d.n_outputs]
    residuals = [outputs[k] for k in d.residuals]

    def vjp_fn(cotangents: Any) -> tuple:
        flat = _flatten_values(cotangents, entry.structure, "vjp_fn")
        if len(flat) != d.n_outputs:
            raise FusionError(f"vjp_fn: {len(flat)} cotangents for {d.n_outputs} outputs")
        cots = []
        for k in d.cotangents:
            out, c = returned[k], flat[k]
            if tuple(np.shape(c)) != tuple(out.shape):
                raise FusionError(f"vjp_fn: cotangent {k} has shape {tuple(np.shape(c))}, "
                                  f"the output {tuple(out.shape)}")
            cots.append(_like(c, out))
        grads = {i: entry.in_argument_dims(i, g)
                 for i, g in zip(d.gradients, entry.run_backward(list(args), cots, residuals))} if cots else {}
        return tuple(grads[i] if i in grads else _zeros_like(a) for i, a in enumerate(args))

    return _unflatten(entry.structure, iter(returned)), vjp_fn


def grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0, backend: str | None = None) -> Callable[..., Any]:
    """The gradient of `fn` (returning one scalar) with respect to the arguments at `argnums`
    (one gradient, or a tuple for a sequence), as `jax.grad`."""
    def gradient(*args: Any) -> Any:
        out, vjp_fn = vjp(fn, *args, backend=backend)
        if tuple(np.shape(out)) != ():
            raise FusionError(f"grad: the function must return one scalar, got shape {tuple(np.shape(out))}")
        grads = vjp_fn(_like(1.0, out))
        return grads[argnums] if isinstance(argnums, int) else tuple(grads[i] for i in argnums)
    return gradient


def _like(value: Any, out: Any) -> Any:
    """`value` as an array of `out`'s kind, dtype and device."""
    if isinstance(out, np.ndarray):
        return np.asarray(value, dtype=out.dtype)
    import torch

    return torch.as_tensor(value, dtype=out.dtype, device=out.device)


def _zeros_like(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return np.zeros_like(a) if a.dtype.kind == "f" else None
    if hasattr(a, "is_floating_point") and a.is_floating_point():
        import torch

        return torch.zeros_like(a)
    return None
