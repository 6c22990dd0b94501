"""nvFuser's Python frontend shape: `with FusionDefinition() as fd: ...; fd.execute(inputs)`."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from mlirfuse.arrays import classify_all, numpy_to_torch, placement
from mlirfuse.compiler import CompiledFusion
from mlirfuse.dtypes import DataType, to_dtype
from mlirfuse.errors import FusionError
from mlirfuse.frontend import complex_ops, nvfuser_ops, repro
from mlirfuse.frontend.complex_ops import ComplexTensor
from mlirfuse.frontend.definition_log import Call, Deferred, bind, deferred_result, holds_deferred, in_lists, sized
from mlirfuse.frontend.definition_printer import print_definition, state_indices
from mlirfuse.frontend.fusion_inspection import Inspection
from mlirfuse.frontend.nvfuser_api import FusionCache, compute_contiguity, compute_tensor_descriptor  # noqa: F401
from mlirfuse.frontend import indexing as I
from mlirfuse.frontend import ops as ops_module
from mlirfuse.frontend.graph import SCALAR, Fusion, InputSpec, Tensor, tracing
from mlirfuse.frontend.output_aliases import alias_outputs
from mlirfuse.frontend.symbolic import ConcreteSizeNeeded, SymSize


NVFUSER_NAMES = nvfuser_ops.NVFUSER_NAMES


class _Ops:
    """`fd.ops.<name>`: every mlirfuse op, recorded into this definition."""

    def __init__(self, fd: "FusionDefinition"):
        self._fd = fd

    def __getattr__(self, name: str) -> Any:
        if name == "stride_order":  # a layout the definition keeps for its outputs
            fn = self._fd._stride_order
            return functools.wraps(fn)(lambda *a, **k: self._fd._record(("ops", name), a, k, lambda: fn(*a, **k)))
        module = nvfuser_ops if name in nvfuser_ops.NVFUSER_NAMES else ops_module
        fn = getattr(module, name, None)
        if fn is None or name.startswith("_") or not callable(fn) or name not in module.__all__:
            if name not in complex_ops.RULES:
                raise AttributeError(f"fd.ops has no op {name!r}")
            fn = None  # an op of complex values only (conj)

        def run(args: tuple, kwargs: dict[str, Any]) -> Any:
            if fn is None or complex_ops.involves_complex(args, kwargs):
                return complex_ops.dispatch(self._fd, name, args, kwargs)
            args, kwargs = _dtype_after_shape(name, args, kwargs)
            if name in _SEED_POSITION and not _seed_given(name, args, kwargs):
                kwargs = {**kwargs, **self._fd._stateful_rng()}  # torch's generator picks the numbers
            return fn(*args, **kwargs)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            fd = self._fd
            fd._check_open(f"fd.ops.{name}")
            return fd._record(("ops", name), args, kwargs, lambda: run(args, kwargs))
        if fn is not None:
            recorded = functools.wraps(fn)(recorded)
        return recorded

    def __dir__(self) -> list[str]:
        return list(ops_module.__all__) + NVFUSER_NAMES + ["stride_order"]


def _logged(method: Any) -> Any:
    """A definition method whose calls are logged (for traces per call signature)."""
    @functools.wraps(method)
    def wrapper(self: "FusionDefinition", *args: Any, **kwargs: Any) -> Any:
        return self._record(("fd", method.__name__), args, kwargs, lambda: method(self, *args, **kwargs))
    return wrapper


class FusionDefinition(Inspection):
    """Define a fusion op by op, then execute it (inputs in definition order).

    Sizes are symbolic unless given: one compiled fusion serves every shape. Where an op
    needs a concrete size (a slice, cat or scatter across dynamic sizes, a reshape to sizes
    held in runtime scalars) the definition is kept as the log of its calls and traced again
    with the inputs' sizes (and those scalars' values) when it is executed, once per distinct
    signature; values it defines after that point are `Deferred` until then.
    """

    def __init__(self, id: int | None = None, max_length: int | None = None, **nvfuser_options: Any) -> None:  # noqa: A002
        """A new definition; `FusionDefinition(id)` (nvFuser's) is the cached definition of
        that number, ready to execute. nvFuser's other arguments have no effect here."""
        if id is not None:
            self.__dict__.update(FusionCache.get()._definition(id).__dict__)
            self.ops = _Ops(self)
            return
        self.fusion = Fusion()
        self.ops = _Ops(self)
        self._compiled: dict[tuple[str, bool], CompiledFusion] = {}  # (backend, keeps stages)
        self._tracing = None
        self._finalized = False
        self._aliases: dict[int, int] = {}  # output position -> the input it is written into
        self._id: int | None = None
        self._rng: list[Tensor] | None = None  # hidden seed/offset inputs of stateful random ops
        self._rng_positions: list[int] = []
        self._rng_ops = 0
        # Every definition call, in order, so that a definition that needs concrete sizes
        # can be traced again per call signature (see _record and _replay).
        self._log: list[Call] = []
        self._deferred: str | None = None  # why this definition waits for its inputs' sizes
        self._replays: dict[tuple, FusionDefinition] = {}
        self.fusion.recorder = lambda name, *operands: getattr(self.ops, name)(*operands)
        self.fusion.typed_scalars = True
        # Per user-level input (what execute takes): (kind, its fusion input positions, dtype);
        # kinds: "plain", "complex" (a tensor read as its real parts), "complex_scalar" (two).
        self._inputs: list[tuple[str, list[int], DataType]] = []
        self._complex_outputs: set[int] = set()  # output positions stacked from complex parts
        self._layouts: dict[int, tuple[list[int], Tensor]] = {}  # stride_order result -> (memory order, value in it)
        self._output_perms: dict[int, list[int]] = {}  # output position -> memory order of its dims

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
        if exc[0] is None and not self._replaying:
            self._id = FusionCache.get()._register(self)

    def definition(self) -> None:
        """nvFuser's subclassing form: a subclass defines its fusion here, and the first
        execute (or compile, validate, id) runs it, then its `schedule()` if it has one
        (where adding ops is an error: the definition is complete)."""
        raise NotImplementedError("definition() should be implemented by a subclass of FusionDefinition "
                                  "(or define the fusion in a `with FusionDefinition() as fd:` block)")

    def _ensure_defined(self) -> None:
        if self._finalized or self._tracing is not None:
            return
        with self:
            self.definition()
        schedule = getattr(self, "schedule", None)
        if callable(schedule):
            schedule()

    def id(self) -> int | None:
        """The definition's number in the process's FusionCache (equal definitions share
        one), None before it is defined."""
        self._ensure_defined()
        return self._id

    def inputs(self) -> list[int]:
        """nvFuser's `fd.inputs()`: the state indices (the numbers of the printed `T`/`S`
        names) of the definition's inputs, in definition order (defined constants are not
        inputs)."""
        self._ensure_defined()
        index = state_indices(self._log)
        return [index[id(call.result)] for call in self._log if call.user_inputs]

    def outputs(self) -> list[int]:
        """nvFuser's `fd.outputs()`: the state indices of the added outputs, in order."""
        self._ensure_defined()
        index = state_indices(self._log)
        return [index[id(call.args[0])] for call in self._log if call.key == ("fd", "add_output")]

    def extents(self) -> list[int]:
        """nvFuser's `fd.extents()`: one negative index per dim of every tensor input, -1
        down, in input order (nvFuser's states of the inputs' extents)."""
        self._ensure_defined()
        dims = sum(len(call.result.shape) for call in self._log
                   if call.user_inputs and isinstance(call.result, Tensor) and call.result.priority != SCALAR)
        return list(range(-1, -dims - 1, -1))

    def _check_open(self, what: str) -> None:
        if self._finalized:
            raise FusionError(f"{what}: Attempting to add to a completed definition! (the definition is closed: "
                              "define ops inside its `with` block)")

    @_logged
    def define_tensor(self, shape: Sequence[int] | None = None, contiguity: Any = None,
                      dtype: Any = DataType.Float, is_cpu: bool = False, *,
                      symbolic_sizes: Sequence[int] | None = None, contiguous: Any = None,
                      sizes: Sequence[int] | None = None,
                      strides: Sequence[int] | None = None, stride_order: Any = None,
                      static_sizes: bool = False) -> Tensor:
        """A tensor input. shape: -1 for a symbolic size, 1 for a broadcast dim, else static;
        or, as nvFuser's third form, `define_tensor(sizes, strides, dtype, static_sizes)`;
        `stride_order` (dim i's stride ranked, 0 the innermost) gives a permuted layout, whose
        contiguity is then listed in memory order. `is_cpu=True` declares a 0-d tensor held
        on the host (a CPU scalar tensor beside GPU inputs); nvFuser rejects any other rank."""
        self._check_open("define_tensor")
        if isinstance(shape, int) and not isinstance(shape, bool) and shape >= 0:  # nvFuser's oldest form: a rank
            shape = [-1] * shape
        if _is_int_list(contiguity) and shape is not None:  # (sizes, strides)
            sizes, strides, shape, contiguity = list(shape), list(contiguity), None, None
        shape = shape if shape is not None else symbolic_sizes
        contiguity = contiguity if contiguity is not None else contiguous
        if shape is None and sizes is not None:
            shape = list(sizes) if static_sizes else [1 if s == 1 else -1 for s in sizes]
        if shape is None:
            raise FusionError("define_tensor: give shape (e.g. [-1, -1])")
        if not isinstance(shape, (list, tuple)):
            raise FusionError(f"define_tensor: shape must be a list of sizes (e.g. [-1, -1]), got {shape!r}")
        dims: list[int | None] = []
        for s in shape:
            if isinstance(s, bool) or not isinstance(s, int) or s < -1:
                raise FusionError(f"define_tensor: invalid shape entry {s!r} in {list(shape)}")
            dims.append(None if s == -1 else s)
        if is_cpu and dims:
            raise FusionError(f"define_tensor: CPU non-scalar tensor is not supported! (is_cpu=True with shape "
                              f"{list(shape)}: a CPU input must be 0-d, as nvFuser requires)")
        if contiguity is None:
            contiguous = strides is None or _is_contiguous(sizes or [], strides)
        elif isinstance(contiguity, bool):
            contiguous = contiguity
        else:
            if len(contiguity) != len(dims):
                raise FusionError(f"define_tensor: contiguity {list(contiguity)} has {len(contiguity)} entries "
                                  f"for a shape of rank {len(dims)}")
            contiguous = all(c is None or c for c in contiguity)
        if stride_order is not None and list(stride_order) and list(stride_order) != list(range(len(dims)))[::-1]:
            contiguous = False  # a permuted layout: read through its strides
        dt = DataType.Float if dtype is None else to_dtype(dtype)  # nvFuser's default dtype
        if dt.is_complex:  # its memory as real parts: a trailing dim of 2
            part = complex_ops.PART_OF[dt]
            pair = self._new_input("complex", [InputSpec(part, tuple(dims) + (2,), contiguous)], dt)[0]
            with tracing(self.fusion):
                return ComplexTensor(self, I.select(pair, 0, -1), I.select(pair, 1, -1))
        return self._new_input("plain", [InputSpec(dt, tuple(dims), contiguous)], dt)[0]

    def _new_input(self, kind: str, specs: list[InputSpec], dtype: DataType) -> list[Tensor]:
        """User-level input number len(self._inputs): its fusion inputs."""
        first = len(self.fusion.inputs)
        tensors = [self.fusion.add_input(spec) for spec in specs]
        self._inputs.append((kind, list(range(first, first + len(specs))), dtype))
        return tensors

    @_logged
    def define_scalar(self, value: Any = None, dtype: Any = None) -> Tensor:
        """A runtime scalar input when value is None (float64 unless `dtype` says otherwise;
        `define_scalar(DataType.Int)` as nvFuser's older form), else a constant of `dtype`,
        or of the value's type: int -> Int, float -> Double, bool -> Bool."""
        self._check_open("define_scalar")
        if isinstance(value, DataType) and dtype is None:
            value, dtype = None, value
        if dtype is None or dtype is DataType.Null:
            dtype = DataType.Double if value is None else _python_scalar_dtype(value)
        dt = to_dtype(dtype)
        if dt.is_complex:
            part = complex_ops.PART_OF[dt]
            if value is None:  # a complex number passed to execute: its two parts
                re, im = self._new_input("complex_scalar", [InputSpec(part, (), scalar=True)] * 2, dt)
            else:
                value = complex(value)
                re, im = (ops_module.constant(v, part, self.fusion) for v in (value.real, value.imag))
            return ComplexTensor(self, re, im)
        if value is None:
            if dt.is_low_precision:  # passed as a float32 value, rounded in the fusion
                scalar = self._new_input("plain", [InputSpec(DataType.Float, (), scalar=True)], dt)[0]
                return ops_module.cast(scalar, dt)
            return self._new_input("plain", [InputSpec(dt, (), scalar=True)], dt)[0]
        return ops_module.constant(value, dt, self.fusion)

    define_constant = define_scalar

    def from_pytorch(self, tensor: Any, static_sizes: bool = False) -> Tensor:
        """An input laid out as `tensor` (torch or numpy): its dtype, its rank with size-1 dims
        as broadcast dims, its contiguity; its sizes fixed with `static_sizes`, else symbolic.
        (Logged, and printed, as the `define_tensor` call it makes.)"""
        self._check_open("from_pytorch")
        shape = getattr(tensor, "shape", None)
        if shape is None or not hasattr(tensor, "dtype"):
            raise FusionError(f"from_pytorch: expected a tensor, got {type(tensor).__name__}")
        sizes = [int(s) for s in shape]
        strides = _element_strides(tensor)
        dims = sizes if static_sizes else [1 if s == 1 else -1 for s in sizes]
        return self.define_tensor(dims, dtype=to_dtype(tensor.dtype), contiguity=_is_contiguous(sizes, strides))

    @_logged
    def define_vector(self, values: Any, dtype: Any = DataType.Int) -> list[Any]:
        """nvFuser's vector of scalars, for shapes: a list of ints and scalars (runtime sizes
        included); `define_vector(n)` makes n runtime int scalar inputs."""
        self._check_open("define_vector")
        if isinstance(values, int) and not isinstance(values, bool):
            return [self.define_scalar(dtype=dtype) for _ in range(values)]
        if not isinstance(values, (list, tuple)) or not all(isinstance(v, (int, Tensor, SymSize)) for v in values):
            raise FusionError(f"define_vector: expected a list of ints and scalars, or a length, got {values!r}")
        bad = [v for v in values if isinstance(v, int) and v < -1]
        if bad:
            raise FusionError(f"define_vector: the value {bad[0]} in {list(values)} is neither symbolic (-1) nor "
                              "a size (>= 0)")
        dt = to_dtype(dtype)  # nvFuser's vectors hold Int scalars: others are converted
        return [ops_module.cast(v, dt) if isinstance(v, Tensor) and v.dtype != dt else v for v in values]

    @_logged
    def add_output(self, t: Tensor, alias_input: Any = None, stride_order: Sequence[int] | None = None) -> None:
        """An output; with `alias_input`, written into that input in place (nvFuser's in-place
        update) and not returned by `execute`; with `stride_order` (also nvFuser's positional
        list), laid out in memory in that order, as `fd.ops.stride_order` does."""
        self._check_open("add_output")
        if isinstance(t, ComplexTensor):  # stacked into the complex layout: [..., (re, im)]
            if alias_input is not None or stride_order is not None:
                raise FusionError("add_output: a complex output takes neither alias_input nor stride_order")
            self._complex_outputs.add(len(self.fusion.outputs))
            with tracing(self.fusion):
                t = I.cat([ops_module.unsqueeze(t.re, -1), ops_module.unsqueeze(t.im, -1)], -1)
        if isinstance(alias_input, (list, tuple)):
            alias_input, stride_order = None, alias_input
        if stride_order is not None:
            if alias_input is not None:
                raise FusionError("add_output: an output written into an input has that input's layout; "
                                  "give alias_input or stride_order, not both")
            t = self.ops.stride_order(t, stride_order)
        if alias_input is not None:
            position = next((i for i, x in enumerate(self.fusion.inputs) if x is alias_input), None)
            if position is None or self.fusion.specs[position].scalar:
                raise FusionError("add_output: alias_input must be a tensor input of this definition")
            if alias_input.dtype != t.dtype or alias_input.ndim != t.ndim:
                raise FusionError(f"add_output: cannot write a {t.dtype.value} tensor of rank {t.ndim} into the "
                                  f"{alias_input.dtype.value} input {position} of rank {alias_input.ndim}")
            self._aliases[len(self.fusion.outputs)] = position
        layout = self._layouts.get(id(t))
        if layout is not None and alias_input is None:  # computed in memory order, returned as a view
            self._output_perms[len(self.fusion.outputs)], t = layout
        self.fusion.add_output(t)

    def _stride_order(self, t: Tensor, stride_order: Sequence[int]) -> Tensor:
        """nvFuser's `stride_order(t, order)`: t, laid out so that dim d has the order[d]-th
        smallest stride (0 the innermost); an output of it is returned with those strides."""
        if not isinstance(t, Tensor):
            raise FusionError(f"stride_order: expected a tensor, got {t!r}")
        order = [ops_module.normalize_dim(o, t.ndim, "stride_order") for o in stride_order]
        if sorted(order) != list(range(t.ndim)):
            raise FusionError(f"stride_order: {list(stride_order)} is not a permutation of the {t.ndim} dims")
        perm = sorted(range(t.ndim), key=lambda d: -order[d])  # dims from the outermost in memory
        if perm == list(range(t.ndim)):
            return t  # row-major: every output is
        physical = ops_module.permute(t, perm)
        logical = ops_module.permute(physical, [perm.index(d) for d in range(t.ndim)])  # a new value
        self._layouts[id(logical)] = (perm, physical)
        return logical

    def _finish(self, outputs: list[Any]) -> list[Any]:
        """The fusion's outputs as the definition's: stride-ordered ones as views in logical
        order, complex ones as complex views of their parts."""
        outputs = list(outputs)
        for position, perm in self._output_perms.items():
            outputs[position] = _permuted_view(outputs[position], [perm.index(d) for d in range(len(perm))])
        for position in self._complex_outputs:
            outputs[position] = _as_complex(outputs[position])
        return outputs

    def _stateful_rng(self) -> dict[str, Tensor]:
        """Seed and offset for a random op given none, as nvFuser's: hidden runtime inputs
        that each execute takes from torch's generator state (the seed torch was seeded with,
        and an offset that advances by one per random op per call), so that every call draws
        new numbers and torch.manual_seed repeats them."""
        if self._rng is None:
            first = len(self.fusion.inputs)
            self._rng = [self.fusion.add_input(InputSpec(DataType.Int, (), scalar=True)) for _ in range(2)]
            self._rng_positions = [first, first + 1]
        seed, offset = self._rng
        self._rng_ops += 1
        return {"rng_seed": seed, "rng_offset": ops_module.add(offset, self._rng_ops - 1)}

    def _cache_key(self) -> str:
        """Equal fusion IR, layouts and sequence of calls (by name): nvFuser keys its cache by
        the definition's records, so `add_output(t, stride_order)` and `ops.stride_order` then
        `add_output` are two definitions of one fusion, as there."""
        layout = repr((self.fusion.specs, sorted(self._aliases.items()), sorted(self._complex_outputs),
                       sorted(self._output_perms.items())))  # nvFuser keys its cache by layouts too
        if self._deferred is None:
            return self.fusion.to_mlir() + layout + " ".join(".".join(call.key) for call in self._log)
        names: dict[int, str] = {}

        def text(v: Any) -> str:
            if id(v) in names:
                return names[id(v)]
            if isinstance(v, (list, tuple)):
                return "[" + ", ".join(text(x) for x in v) + "]"
            if isinstance(v, dict):
                return "{" + ", ".join(f"{k}={text(x)}" for k, x in sorted(v.items())) + "}"
            if hasattr(v, "shape") and hasattr(v, "dtype"):  # a from_pytorch example
                return f"<{v.dtype} rank {len(v.shape)}>"
            return repr(v)
        lines = []
        for k, call in enumerate(self._log):
            lines.append(f"{call.key} {text(call.args)} {text(call.kwargs)}")
            for j, r in enumerate(call.result if isinstance(call.result, (list, tuple)) else [call.result]):
                names[id(r)] = f"v{k}.{j}"
        return "\n".join(lines) + layout

    def _fusion_args(self, inputs: Sequence[Any]) -> list[Any]:
        """execute's inputs (one per user-level input) as the fusion's: complex tensors as
        their real parts, complex scalars as two numbers."""
        if all(kind == "plain" for kind, _, _ in self._inputs) and self._rng is None:
            return list(inputs)
        if len(inputs) != len(self._inputs):
            raise FusionError(f"execute: {len(inputs)} inputs for a definition of {len(self._inputs)}")
        args: list[Any] = []
        for x, (kind, _, dtype) in zip(inputs, self._inputs):
            if kind == "complex":
                args.append(_as_real_parts(x, dtype))
            elif kind == "complex_scalar":
                args += [complex(x).real, complex(x).imag]
            else:
                args.append(x)
        if self._rng is not None:
            for position, value in zip(self._rng_positions, _next_philox_state(self._rng_ops)):
                args.insert(position, value)
        return args

    # -- the call log: traces per call signature -----------------------------------------
    _replaying = False  # a trace of the log with concrete sizes: needing one more is an error

    _depth = 0  # calls of definition methods within a logged call are not logged

    def _record(self, key: tuple[str, str], args: tuple, kwargs: dict[str, Any], run: Any) -> Any:
        if self._depth:
            return run()
        call = Call(key, args, kwargs)
        self._log.append(call)
        if self._deferred is not None and holds_deferred((args, kwargs)):
            call.result = deferred_result(self, call)
            return call.result
        self._depth += 1
        first_input = len(self._inputs)
        try:
            with tracing(self.fusion):
                call.result = run()
            call.user_inputs = list(range(first_input, len(self._inputs)))
        except ConcreteSizeNeeded as e:
            if self._replaying or key[0] != "ops":
                self._log.remove(call)
                raise
            self._deferred = self._deferred or str(e)
            call.result = deferred_result(self, call)
        except BaseException:
            self._log.remove(call)  # a call that failed defined nothing
            raise
        finally:
            self._depth -= 1
        return call.result

    def _replay_for(self, inputs: Sequence[Any]) -> "FusionDefinition":
        """This definition traced with the sizes of `inputs` (and the values of the runtime
        scalars it uses as sizes): built once per signature."""
        if len(inputs) != len(self._inputs):
            raise FusionError(f"execute: {len(inputs)} inputs for a definition of {len(self._inputs)}")
        key = self._replay_key(inputs)
        replay = self._replays.get(key)
        if replay is None:
            replay = self._replays[key] = self._replay(inputs, self._size_scalars())
        return replay

    def _replay_key(self, inputs: Sequence[Any]) -> tuple:
        """What a trace per signature is keyed by: the inputs' sizes and the values of the
        runtime scalars used as sizes."""
        sizes = self._size_scalars()
        return tuple(tuple(getattr(x, "shape", ())) for x in inputs), tuple(int(inputs[i]) for i in sizes.values())

    def _size_scalars(self) -> dict[int, int]:
        """id of each runtime scalar input a size depends on (a scalar in a list argument, or
        one computed from it) -> its input number."""
        user = {id(self.fusion.inputs[positions[0]]): i for i, (kind, positions, _) in enumerate(self._inputs)
                if kind == "plain" and self.fusion.specs[positions[0]].scalar}
        found: dict[int, int] = {}
        stack = [v for call in self._log for v in in_lists((call.args, call.kwargs)) if isinstance(v, Tensor)]
        stack += [v for call in self._log if call.key == ("ops", "iota") for v in call.args if isinstance(v, Tensor)]
        seen: set[int] = set()
        while stack:
            v = stack.pop()
            if id(v) in seen or v.ndim != 0:
                continue
            seen.add(id(v))
            if id(v) in user:
                found[id(v)] = user[id(v)]
            elif v.node is not None:
                stack.extend(v.node.inputs)
        return found

    def _replay(self, inputs: Sequence[Any], sizes: dict[int, int]) -> "FusionDefinition":
        """This definition traced again with the sizes of `inputs` (and the values of the
        runtime scalars in `sizes`, input id -> input number) as constants."""
        fd = FusionDefinition()
        fd._replaying = True
        # The traced fusion's input shapes, by its input positions: a size taken from the
        # first trace (`t.shape()` as a slice's end) is that of these inputs.
        shapes: list[tuple[int, ...]] = [()] * len(self.fusion.specs)
        for x, (_, positions, _) in zip(inputs, self._inputs):
            for p in positions:
                shapes[p] = tuple(int(s) for s in getattr(x, "shape", ()))

        def define(call: Call) -> Any:
            number = call.user_inputs[0]
            _, positions, dtype = self._inputs[number]
            return fd.define_tensor([int(s) for s in getattr(inputs[number], "shape", ())], dtype=dtype,
                                    contiguity=self.fusion.specs[positions[0]].contiguous)

        def result_of_fd(call: Call, result: Any) -> Any:  # size scalars: inputs stay, uses see values
            return sized(call.result, result, sizes, inputs, self._inputs, fd.fusion)

        with fd:
            self._retrace(fd, define, lambda size: size.evaluate(shapes), result_of_fd,
                          f"this definition needs concrete sizes ({self._deferred})")
        return fd

    def _retrace(self, fd: "FusionDefinition", define: Callable[[Call], Any], size: Callable[[SymSize], Any],
                 result_of_fd: Callable[[Call, Any], Any], why: str) -> None:
        """Every logged call made again on `fd` (inside its `with`), in order: inputs by
        `define`, sizes of this definition's trace found in arguments by `size`, the results
        of `fd.*` calls through `result_of_fd`."""
        table: dict[int, Any] = {}

        def value(v: Any) -> Any:
            if isinstance(v, SymSize):
                return size(v)
            if isinstance(v, (Tensor, Deferred, ComplexTensor)):
                if id(v) not in table:
                    raise FusionError(f"{why}, and {v!r} was built outside fd.ops, fd.define_* and Python operators "
                                      "(by a tensor method such as t.sum()?), so it cannot be traced again: use fd.ops")
                return table[id(v)]
            if isinstance(v, (list, tuple)):
                return type(v)(value(x) for x in v)
            if isinstance(v, dict):
                return {k: value(x) for k, x in v.items()}
            return v

        for call in self._log:
            kind, name = call.key
            if (kind, name) in (("fd", "define_tensor"), ("fd", "from_pytorch")):
                result = define(call)
            else:
                args, kwargs = value(call.args), value(call.kwargs)
                result = (getattr(fd.ops, name) if kind == "ops" else getattr(fd, name))(*args, **kwargs)
                if kind == "fd":
                    result = result_of_fd(call, result)
            bind(call.result, result, table)

    def clone_into(self, target: "FusionDefinition") -> "FusionDefinition":
        """`target` (a new, empty FusionDefinition) defined by this definition's calls made
        again (nvFuser's `clone(fd, target)`): the same inputs, ops and outputs."""
        self._ensure_defined()
        if not isinstance(target, FusionDefinition) or target._finalized or target._log or target._tracing:
            raise FusionError("clone: the target must be a new, empty FusionDefinition")
        if type(target).definition is not FusionDefinition.definition:
            raise FusionError("clone: the target defines its own fusion (a definition() method)")

        def define(call: Call) -> Any:
            return getattr(target, call.key[1])(*call.args, **call.kwargs)

        with target:
            self._retrace(target, define, lambda size: size, lambda call, result: result,
                          "clone: this definition cannot be copied")
        return target

    def compile(self, backend: str = "cpu") -> CompiledFusion:
        """Compile for `backend` (cached); the result keeps every stage's IR."""
        self._ensure_defined()
        if self._deferred is not None:
            raise FusionError(f"compile: this definition needs concrete sizes ({self._deferred}); it is traced "
                              "and compiled per input signature when executed")
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

    def execute(self, inputs: Sequence[Any], backend: str | None = None, *, device: Any = None,
                **nvfuser_options: Any) -> list[Any]:
        """Run on `inputs` (tensors and runtime scalars in definition order).

        GPU arrays run on the GPU, host arrays on the CPU unless backend='gpu' (or a CUDA
        `device`, nvFuser's argument). `profile=True` keeps a profile (`fd.profile()`),
        `capture_debug_output=True` the dumps' text (`fd.debug_output()`): see
        `fusion_inspection`; `print_repro=True` prints the repro script (`repro_script_for`)
        for these inputs. Outputs given an `alias_input` are written into it and not
        returned; outputs that are an input, a view of one, or a value written into one are
        that input (or the view), as nvFuser returns them (`output_aliases`). nvFuser's other
        options (_enable_options, ...) have no effect here: each warns once.
        """
        if not isinstance(inputs, (list, tuple)):
            raise FusionError("execute: inputs must be a list, in definition order")
        self._ensure_defined()
        inputs = _flatten_vectors(inputs)
        profile = bool(nvfuser_options.pop("profile", False))
        capture_debug_output = bool(nvfuser_options.pop("capture_debug_output", False))
        # nvFuser's repro state (its older name: save_repro_inputs): what the inputs were like
        if nvfuser_options.pop("save_repro_state", False) | nvfuser_options.pop("save_repro_inputs", False):
            self._repro_inputs = repro.describe(inputs)
        if nvfuser_options.pop("print_repro", False):  # nvFuser's: the repro script, before the run
            print(self.repro_script_for(inputs))
        for name in nvfuser_options:
            if name not in _WARNED:
                _WARNED.add(name)
                warnings.warn(f"FusionDefinition.execute: nvFuser option {name!r} has no effect in mlirfuse",
                              UserWarning, stacklevel=2)

        def run() -> list[Any]:
            ran = self._replay_for(inputs) if self._deferred is not None else self
            outputs = ran._run(ran._fusion_args(inputs), backend, device)
            self._ran = ran._ran
            return outputs
        return self._observe(run, profile=profile, capture_debug_output=capture_debug_output)

    def _run(self, inputs: list[Any], backend: str | None, device: Any) -> list[Any]:
        """execute on the fusion's own inputs (complex ones split, random state added)."""
        args = classify_all(inputs)
        where, _ = placement(args)
        wanted = _backend_of(device)
        if wanted == "cpu" and where == "device":
            raise FusionError(f"execute: device={device!r} but the inputs are on the GPU")
        if not any(a.kind != "scalar" for a in args) and wanted is None and backend is None and _cuda_available():
            backend = "gpu"  # nothing to follow: nvFuser's default device, where there is one
        backend = "gpu" if where == "device" else wanted or backend or "cpu"
        self._ran = (self, backend)
        outputs = self._compile(backend, keep_stages=False).run(args)
        if not any(a.kind != "scalar" for a in args) and _torch_module() is not None:
            # No arrays to follow: torch tensors, as nvFuser returns (on the device asked for).
            import torch

            where_to = "cpu" if backend == "cpu" else f"cuda:{device}" if isinstance(device, int) else device or "cuda"
            outputs = [o if isinstance(o, torch.Tensor) else numpy_to_torch(np.ascontiguousarray(o)).to(where_to)
                       for o in outputs]
        outputs = self._finish(outputs)
        for out, position in self._aliases.items():
            _write_into(inputs[position], outputs[out])
        outputs = alias_outputs(self.fusion, outputs, inputs, self._aliases,
                                set(self._output_perms) | self._complex_outputs)
        return [o for i, o in enumerate(outputs) if i not in self._aliases]

    def repro_script_for(self, inputs: Sequence[Any] | None = None) -> str:
        """nvFuser's repro script (`repro`): this definition, defined again and, given
        `inputs`, run on random inputs of their sizes, strides, dtypes and devices (runtime
        scalars as given)."""
        self._ensure_defined()
        import mlirfuse

        header = []
        torch = _torch_module()
        if torch is not None:
            devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
            header += ["CUDA devices:"] + [f" {i}: {torch.cuda.get_device_name(i)}" for i in range(devices)]
            header += [f"torch version: {torch.__version__}", f"cuda version: {torch.version.cuda}"]
        header.append(f"mlirfuse version: {mlirfuse.__version__}")
        number = self.id()
        function = f"nvfuser_fusion_id{number}" if number is not None else "nvfuser_incomplete_fusion"
        described = None if inputs is None else repro.describe(_flatten_vectors(list(inputs)))
        return repro.script(repr(self), function, described, header)

    def _repro_error_str(self, section: str, inputs: Sequence[Any] | None = None) -> str:
        """nvFuser's message for a failure while `section` ("executing", ...) this definition:
        the failure's place, then the repro script for `inputs`."""
        return (f"An error occurred while {section} FusionDefinition {self.id()}.\n"
                "Here's a script to reproduce the error:\n```python\n" + self.repro_script_for(inputs) + "```\n")

    def segment(self, inputs: Sequence[Any]) -> list["FusionDefinition"]:
        """nvFuser's `segment(inputs)`: the pieces the definition executes as, each a
        FusionDefinition, with `segment_index_space_maps[piece]` mapping the piece's state
        indices to this definition's. mlirfuse executes a definition as one unit (its
        segmenter places the kernel boundaries inside that unit when it compiles:
        MLIRFUSE_DUMP=segmented_fusion shows where), so the definition is its one piece: a
        clone, mapped index for index. Where nvFuser would run several segments, this list is
        shorter than nvFuser's."""
        self._ensure_defined()
        if not isinstance(inputs, (list, tuple)) or len(_flatten_vectors(inputs)) != len(self._inputs):
            raise FusionError(f"segment: expected a list of the definition's {len(self._inputs)} inputs (a vector "
                              "of runtime sizes as one list)")
        piece = self.clone_into(FusionDefinition())
        indices = sorted(set(state_indices(self._log).values()))
        self.segments = [piece]
        self.segment_index_space_maps = {piece: {i: i for i in indices}}
        return list(self.segments)

    def last_repro_script(self) -> str:
        """The repro script for the inputs of the last `execute(inputs, save_repro_state=True)`."""
        if getattr(self, "_repro_inputs", None) is None:
            raise AssertionError("fd.last_repro_script() cannot provide a repro because "
                                 "fd.execute(inputs, save_repro_state=True) was not executed!")
        return self.repro_script_for(self._repro_inputs)

    def validate(self, inputs: Sequence[Any], reference_outputs: Sequence[Any] | None = None) -> None:
        """Run, and check every output against `reference_outputs` or, without them, against
        mlirfuse's reference evaluator on the same inputs (as nvFuser checks against eager),
        with dtype-aware tolerances; raises FusionError naming the first output that differs."""
        from mlirfuse import reference

        self._ensure_defined()
        inputs = _flatten_vectors(inputs)
        if self._deferred is not None:
            return self._replay_for(inputs).validate(inputs, reference_outputs)
        args = self._fusion_args(inputs)  # once: the same random state for both runs
        if reference_outputs is None:  # before the run, which may update inputs in place
            arrays = [_to_numpy(x) if hasattr(x, "shape") else x for x in args]
            expected = self._finish(reference.evaluate(self._compile("cpu", keep_stages=False).fusion_ir, arrays))
            reference_outputs = [o for i, o in enumerate(expected) if i not in self._aliases]
        got = self._run(args, None, None)
        if len(got) != len(reference_outputs):
            raise FusionError(f"validate: {len(got)} outputs, {len(reference_outputs)} reference outputs")
        for i, (g, want) in enumerate(zip(got, reference_outputs)):
            g, want = _to_numpy(g), _to_numpy(want)
            # The looser of the two dtypes' tolerances; integers and bools exactly.
            rtol, atol = max(_TOLERANCE.get(str(g.dtype), (0.0, 0.0)), _TOLERANCE.get(str(want.dtype), (0.0, 0.0)))
            try:
                if rtol:
                    wide = np.complex128 if "complex" in (g.dtype.name + want.dtype.name) else np.float64
                    np.testing.assert_allclose(g.astype(wide), want.astype(wide), rtol=rtol, atol=atol, equal_nan=True)
                else:
                    np.testing.assert_array_equal(g, want)
            except AssertionError as e:
                raise FusionError(f"validate: output {i} differs from the reference:{e}") from None

    def __str__(self) -> str:
        """The fusion IR (of each signature's trace, for a definition traced per signature)."""
        if self._deferred is not None:
            return f"// traced per input signature when executed: {self._deferred}\n" + "\n".join(
                str(fd.fusion.to_mlir()) for fd in self._replays.values())
        return self.fusion.to_mlir()

    def __repr__(self) -> str:
        """nvFuser's printed definition: a Python function `nvfuser_fusion_id<N>(fd)` that
        defines this fusion again (see `definition_printer`)."""
        return print_definition(self._log, self._id, self.fusion.inputs)


# Where a seed goes positionally (sdpfa_fwd: none; it draws when given a dropout_p, its fourth).
_SEED_POSITION = {"uniform": 3, "normal": 3, "rand_like": 1, "randn_like": 1, "sdpfa_fwd": None}
_PHILOX: dict[str, Any] = {"seed": None, "offset": 0, "fresh": None}  # torch's seed, our offset


def _dtype_after_shape(name: str, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """nvFuser's `uniform`/`normal(a, b, shape, dtype)`: a dtype right after the shape is the
    dtype (nvFuser takes the seed and offset by keyword only), where mlirfuse's own signature
    has the seed there."""
    if name in ("uniform", "normal") and len(args) == 4 and "dtype" not in kwargs and \
            (isinstance(args[3], (DataType, np.dtype)) or type(args[3]).__name__ == "dtype"):  # (torch.dtype)
        return args[:3], {**kwargs, "dtype": to_dtype(args[3])}
    return args, kwargs


def _seed_given(name: str, args: tuple, kwargs: dict[str, Any]) -> bool:
    position = _SEED_POSITION[name]
    if position is None:  # sdpfa_fwd: a seed only for its dropout
        dropout_p = args[3] if len(args) > 3 else kwargs.get("dropout_p")
        return dropout_p is None or (not isinstance(dropout_p, Tensor) and float(dropout_p) == 0.0)
    if len(args) > position and args[position] is not None:
        return True
    return any(kwargs.get(k) is not None for k in ("seed", "rng_seed"))


def _next_philox_state(n_ops: int) -> tuple[int, int]:
    """(seed, offset) for a call with n_ops stateful random ops: the seed torch was last
    seeded with, and offsets advancing by one per op, restarting at 0 when torch's generator
    was just seeded (torch.manual_seed(s) repeats the numbers). Each call draws one number
    from torch's generator, so that it is never seen as just seeded twice."""
    torch = _torch_module()
    if torch is None:
        seed, fresh = 0, False
    else:
        seed = int(torch.initial_seed())
        if _PHILOX["seed"] != seed or _PHILOX["fresh"] is None:
            generator = torch.Generator()
            generator.manual_seed(seed)
            _PHILOX["seed"], _PHILOX["fresh"], _PHILOX["offset"] = seed, generator.get_state(), 0
        fresh = torch.equal(torch.get_rng_state(), _PHILOX["fresh"])
        torch.randint(0, 2, (1,))  # a draw: the state is no longer the just-seeded one
    if fresh:
        _PHILOX["offset"] = 0
    offset = _PHILOX["offset"]
    _PHILOX["offset"] += n_ops
    return seed % (1 << 63), offset


def _cuda_available() -> bool:
    torch = _torch_module()
    return torch is not None and torch.cuda.is_available()


def _torch_module() -> Any:
    import sys

    return sys.modules.get("torch")


def _is_int_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)


def _python_scalar_dtype(value: Any) -> DataType:
    if isinstance(value, (bool, np.bool_)):
        return DataType.Bool
    if isinstance(value, (int, np.integer)):
        return DataType.Int
    if isinstance(value, (float, np.floating)):
        return DataType.Double
    if isinstance(value, (complex, np.complexfloating)):
        return DataType.ComplexDouble
    raise FusionError(f"define_scalar: no dtype for {value!r} of type {type(value).__name__}")


def _flatten_vectors(inputs: Sequence[Any]) -> list[Any]:
    """Inputs as nvFuser takes them: a list or tuple stands for the scalars of a
    `define_vector(n)`, in order."""
    flat: list[Any] = []
    for x in inputs:
        flat.extend(x) if isinstance(x, (list, tuple)) else flat.append(x)
    return flat


def _as_real_parts(x: Any, dtype: DataType) -> Any:
    """A complex tensor's memory as its real parts (a view with a trailing dim of 2)."""
    if hasattr(x, "detach"):  # torch
        import torch

        if not x.is_complex():
            raise FusionError(f"execute: expected a {dtype.value} tensor, got {x.dtype}")
        return torch.view_as_real(x.detach().resolve_conj())
    x = np.asarray(x)
    if x.dtype.kind != "c":
        raise FusionError(f"execute: expected a {dtype.value} array, got {x.dtype}")
    return x[..., None].view(np.float32 if x.dtype == np.complex64 else np.float64)


def _as_complex(x: Any) -> Any:
    """The inverse: [..., 2] real parts as a complex view."""
    if hasattr(x, "detach"):
        import torch

        return torch.view_as_complex(x.contiguous())
    x = np.ascontiguousarray(x)
    return x.view(np.complex64 if x.dtype == np.float32 else np.complex128)[..., 0]


def _permuted_view(x: Any, perm: list[int]) -> Any:
    return x.permute(*perm) if hasattr(x, "permute") else np.transpose(x, perm)


def _is_contiguous(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    expected = 1
    for size, stride in reversed(list(zip(sizes, strides))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


_WARNED: set[str] = set()  # nvFuser execute options already warned about
_TOLERANCE = {"float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5), "float16": (1e-2, 1e-3), "bfloat16": (2e-2, 1e-2),
              "float8_e4m3fn": (1.25e-1, 1e-2), "float8_e5m2": (2.5e-1, 1e-2), "complex64": (1e-4, 1e-5),
              "complex128": (1e-7, 1e-9)}


def _backend_of(device: Any) -> str | None:
    """nvFuser's `device` argument (an index, 'cuda:N', a torch.device) as a backend."""
    if device is None:
        return None
    text = str(device)
    if text == "cpu":
        return "cpu"
    if isinstance(device, int) or text.startswith("cuda"):
        return "gpu"
    raise FusionError(f"execute: unknown device {device!r} (an index, 'cuda:N' or 'cpu')")


def _element_strides(tensor: Any) -> list[int]:
    stride = getattr(tensor, "stride", None)
    if callable(stride):  # torch
        return list(stride())
    itemsize = getattr(getattr(tensor, "dtype", None), "itemsize", 1) or 1
    return [s // itemsize for s in getattr(tensor, "strides", ())]


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # torch
        import torch

        x = x.detach().cpu()
        if x.dtype is torch.bfloat16:  # numpy has no bfloat16: ml_dtypes' (exact from float32)
            return x.float().numpy().astype(DataType.BFloat16.np)
        if x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):  # ml_dtypes', through the bits
            return x.view(torch.uint8).numpy().view(to_dtype(x.dtype).np)
        return x.numpy()
    return np.asarray(x)


def _write_into(target: Any, value: Any) -> None:
    """An in-place update of an input (torch or numpy) with an output."""
    if hasattr(target, "copy_"):
        import torch

        target.copy_(value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value)))
    else:
        np.copyto(target, np.asarray(value))


def clone(source: FusionDefinition, target: FusionDefinition) -> FusionDefinition:
    """nvFuser's `clone(fd, new_fd)`: `target`, a new FusionDefinition, defined as `source` is
    (its calls made again); it executes as `source` does."""
    if not isinstance(source, FusionDefinition):
        raise FusionError(f"clone: expected a FusionDefinition to copy, got {type(source).__name__}")
    return source.clone_into(target)
