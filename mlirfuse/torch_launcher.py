"""Launching a compiled GPU fusion with torch tensors: output allocation from torch's caching
allocator, argument pointers refilled into cells bound once, the host entry point called on
torch's current stream; and, for repeated calls with one layout, all of that as one generated
Python function behind a guard (`TorchLauncher.guarded`, `TorchLauncher.entry`)."""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Sequence

from mlirfuse import config
from mlirfuse.errors import FusionError


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _torch_allocator(torch: Any, device: int) -> Callable[[tuple, tuple, Any], Any]:
    """`(sizes, strides, dtype) -> tensor` on CUDA device `device`, from torch's caching
    allocator: torch's own fast path for generated code (`_empty_strided_cuda`, what
    Inductor's wrappers call: no dispatcher, no option parsing), which allocates on the
    current device, where `device` is the only one or, with several, is current at the call
    (a DDP or FSDP rank's device); else `torch.empty_strided` with the device."""
    fast = getattr(getattr(getattr(getattr(torch, "_C", None), "_dynamo", None), "guards", None),
                   "_empty_strided_cuda", None)
    cuda = getattr(torch, "cuda", None)
    empty, where = torch.empty_strided, torch.device("cuda", device)
    if fast is None or cuda is None:
        return lambda sizes, strides, dtype: empty(sizes, strides, dtype=dtype, device=where)
    if cuda.device_count() == 1 and device == 0:
        return fast
    current = torch._C._cuda_getDevice

    def alloc(sizes: tuple, strides: tuple, dtype: Any) -> Any:
        if current() == device:
            return fast(sizes, strides, dtype)
        return empty(sizes, strides, dtype=dtype, device=where)
    return alloc


# What a launcher's guarded call returns when its arguments are not those it was made for.
MISS = object()


def _integer_range(cell: Any) -> tuple[int, int] | None:
    """The values a ctypes integer cell holds (None for float and bool cells): assigning
    another value to it would wrap silently."""
    if isinstance(cell, (ctypes.c_float, ctypes.c_double, ctypes.c_int8)):
        return None
    bits = 8 * ctypes.sizeof(cell)
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _out_of_range(i: int, value: int, cell: Any) -> None:
    raise FusionError(f"input {i}: {value!r} is out of range for the int{8 * ctypes.sizeof(cell)} scalar "
                      "this fusion takes")


def _tensor_guard(tensors: Sequence[Any]) -> Callable[..., bool] | None:
    """torch's own tensor check (Dynamo's `TensorGuards`: class, dispatch keys, dtype, device,
    sizes, strides, requires_grad, in C++), or None where this torch lacks it or it does not
    accept `tensors` (then Python compares the fields)."""
    try:
        from torch._C._dynamo.guards import TensorGuards

        guards = TensorGuards(*tensors, dynamic_dims_sizes=[list(t.shape) for t in tensors],
                              dynamic_dims_strides=[list(t.stride()) for t in tensors])
        return guards.check if guards.check(*tensors) else None
    except Exception:  # noqa: BLE001 - a private API: any failure means "not available"
        return None


class TorchLauncher:
    """One GPU fusion for fixed torch argument sizes, strides, dtypes and device: allocates the
    outputs with torch, refills argument pointers and scalar values, launches on the current
    stream. `call(args)` is the whole per-call work of a repeated call (the sizes were checked
    when the launcher was made, and the caller keys launchers by them); `guarded(...)` adds the
    check of those sizes, for a caller that has not looked them up."""

    def __init__(self, torch: Any, exe: Any, bound: Any, scalar: Sequence[bool],
                 outputs: Sequence[tuple[tuple[int, ...], Any]], device: int,
                 shared: dict[int, int] | None = None, copied: dict[int, int] | None = None):
        self._alloc = _torch_allocator(torch, device)
        self._stream = torch._C._cuda_getCurrentRawStream
        self._exe = exe
        self._lock = exe.lock
        self._bound = bound  # owns the argument cells that `packed` points to
        self._packed = bound.packed
        self._index = device
        cells = bound.cells
        n = len(scalar)
        self._n_args = n
        self._tensors = [(i, cells[i]) for i in range(n) if not scalar[i]]
        self._scalars = [(i, cells[i], bool if isinstance(cells[i], ctypes.c_int8) else type(cells[i].value))
                         for i in range(n) if scalar[i]]
        self._outputs = [(shape, contiguous_strides(shape), dtype) for shape, dtype in outputs]
        # Output -> the argument whose memory it is written into (`shared`), or into which it
        # is copied after the launch (`copied`); either way that argument is the result.
        self._shared = dict(shared or {})
        self._copied = dict(copied or {})
        self._copy = torch._foreach_copy_ if self._copied else None
        self._output_cells = cells[n:n + len(outputs)]
        self._bytes = torch.uint8
        self._grad_enabled = torch.is_grad_enabled
        # Bytes of scratch memory a call needs, known after the first call (the same sizes
        # always need the same scratch); None before it. Then calls run `_straight_line`'s
        # code (a call without scratch only sets the stream and calls the entry point). The
        # generated functions read the arena's size from `_arena_bytes`, one list they share:
        # a call that outgrows it makes it larger for all of them.
        self._scratch: int | None = None
        self._arena_bytes = [0]
        self.call: Callable[[Sequence[Any]], list[Any]] = self._call_with_scratch
        self._guarded: Callable[[Sequence[Any]], Any] | None = None
        # The argument checks of `guarded` (no tensors kept): its globals, its conditions that
        # answer MISS before and after unpacking the arguments.
        self._guard: tuple[dict[str, Any], str, list[str]] | None = None
        self.result: str | None = None  # `guarded`'s result expression (None: rebuilt)

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        return self.call(args)

    def _fill(self, args: Sequence[Any], outs: list[Any]) -> None:
        for i, cell in self._tensors:
            cell.allocated = cell.aligned = args[i].data_ptr()
        for i, cell, convert in self._scalars:
            value = convert(args[i])
            bounds = _integer_range(cell)
            if bounds is not None and not bounds[0] <= value <= bounds[1]:
                _out_of_range(i, value, cell)
            cell.value = value
        for o, cell in zip(outs, self._output_cells):
            cell.allocated = cell.aligned = o.data_ptr()

    def _call_with_scratch(self, args: Sequence[Any]) -> list[Any]:
        """The first call: learns the bytes of scratch memory these sizes need, then `call`
        becomes `_straight_line`'s code."""
        alloc = self._alloc
        outs = [args[self._shared[k]] if k in self._shared else alloc(shape, strides, dtype)
                for k, (shape, strides, dtype) in enumerate(self._outputs)]
        stream = self._stream(self._index)
        with self._lock:
            self._fill(args, outs)
            used = self._exe.call_unlocked(stream, self._packed)
        self._grow(used)
        self.call = self._straight_line()
        if self._copied:
            self._copy([args[j] for j in self._copied.values()], [outs[k] for k in self._copied])
            for k, j in self._copied.items():
                outs[k] = args[j]
        return outs

    def _grow(self, used: int) -> None:
        """A call asked for `used` bytes of scratch: the arena of the next calls holds them."""
        self._scratch = max(used, self._scratch or 0)
        self._arena_bytes[0] = self._scratch

    def _environment(self) -> dict[str, Any]:
        stream_cell, launch, error_cell = self._exe.entry_point()
        env: dict[str, Any] = {"alloc": self._alloc, "stream_of": self._stream, "index": self._index,
                               "lock": self._lock, "packed": self._packed, "launch": launch,
                               "stream_cell": stream_cell, "error_cell": error_cell,
                               "check_error": self._exe.check_error, "call_unlocked": self._exe.call_unlocked,
                               "grow": self._grow, "arena_bytes": self._arena_bytes, "bytes": self._bytes,
                               "MISS": MISS,
                               "options": config.options, "out_of_range": _out_of_range, "copy": self._copy}
        for k, (shape, strides, dtype) in enumerate(self._outputs):
            env[f"shape{k}"], env[f"strides{k}"], env[f"dtype{k}"] = shape, strides, dtype
        for i, cell in self._tensors:
            env[f"cell{i}"] = cell
        for i, cell, convert in self._scalars:
            env[f"cell{i}"], env[f"convert{i}"] = cell, convert
        for k, cell in enumerate(self._output_cells):
            env[f"out_cell{k}"] = cell
        return env

    def _range_checks(self, on_failure: str) -> list[str]:
        """Lines checking that integer scalars fit their cells (a ctypes cell would wrap)."""
        lines = []
        for i, cell, _ in self._scalars:
            bounds = _integer_range(cell)
            if bounds is not None:
                lines += [f"    if not {bounds[0]} <= a{i} <= {bounds[1]}:", f"        {on_failure.format(i=i)}"]
        return lines

    def _body(self) -> list[str]:
        """Lines from the output allocations to the launch (arguments a0.. unpacked, checked)."""
        code = [f"    o{k} = a{self._shared[k]}" if k in self._shared
                else f"    o{k} = alloc(shape{k}, strides{k}, dtype{k})" for k in range(len(self._outputs))]
        if self._scratch:
            code.append("    size = arena_bytes[0]")
            code.append("    arena = alloc((size,), (1,), bytes)")
        code += ["    stream = stream_of(index)", "    with lock:"]
        code += [f"        cell{i}.allocated = cell{i}.aligned = a{i}.data_ptr()" for i, _ in self._tensors]
        code += [f"        cell{i}.value = convert{i}(a{i})" for i, _, _ in self._scalars]
        code += [f"        out_cell{k}.allocated = out_cell{k}.aligned = o{k}.data_ptr()"
                 for k in range(len(self._output_cells))]
        if self._scratch:
            code += ["        used = call_unlocked(stream, packed, arena.data_ptr(), size)",
                     "    if used > size:", "        grow(used)"]
        else:
            code += ["        stream_cell.value = stream", "        launch(packed)",
                     "        if error_cell.value:", "            check_error('a launch')"]
        if self._copied:  # one multi-tensor copy (one launch) for them all
            code.append(f"    copy([{', '.join(f'a{j}' for j in self._copied.values())}], "
                        f"[{', '.join(f'o{k}' for k in self._copied)}])")
            code += [f"    o{k} = a{j}" for k, j in self._copied.items()]
        return code

    def _unpack(self) -> list[str]:
        n = self._n_args
        return [f"    {''.join(f'a{i}, ' for i in range(n))}= args"] if n else []

    def _straight_line(self) -> Callable[[Sequence[Any]], list[Any]]:
        """`call` for a known scratch size, generated as straight-line Python (as torch's own
        generated wrappers are): every argument cell, shape and converter bound as a global of
        the function, no loops, no method calls beyond the allocations, pointers and launch.
        A call whose scratch outgrows the arena (its excess came from the allocator) makes
        the next calls' arena larger."""
        env = self._environment()
        code = ["def call(args):"] + self._unpack()
        code += self._range_checks("out_of_range({i}, a{i}, cell{i})")
        code += self._body() + [f"    return [{', '.join(f'o{k}' for k in range(len(self._outputs)))}]"]
        exec("\n".join(code), env)  # noqa: S102 - generated from this launcher's own fields
        return env["call"]

    def guarded(self, example: Sequence[Any], result: str | None,
                rebuild: Callable[[list[Any]], Any]) -> Callable[[Sequence[Any]], Any] | None:
        """The whole repeated call for arguments laid out as `example` (torch tensors of its
        classes, dtypes, devices, sizes and strides; Python scalars of its types), with the
        check that they are: `MISS` (nothing done) where they are not, or dumps are on, or
        (where the example's tensors require grad) grad mode is on. The result is `result`,
        an expression over the outputs o0, o1, ..., or `rebuild` of their list. None until
        the first call has run (`call` knows its scratch memory). The function's `launcher`
        is this launcher (`entry` makes a caller's own from it)."""
        if self._scratch is None:
            return None
        if self._guarded is None:
            self._guard = self._guard_of(example)
            self.result = result
            outs = ", ".join(f"o{k}" for k in range(len(self._outputs)))
            self._guarded = self._generate("guarded", result or f"rebuild([{outs}])", "return MISS",
                                           {"rebuild": rebuild})
            self._guarded.launcher = self  # type: ignore[attr-defined]
        return self._guarded

    def entry(self, result: str, miss: str, condition: str = "", before: Sequence[str] = (),
              env: dict[str, Any] | None = None) -> Callable[..., Any]:
        """`guarded`'s call for a caller with a way out of its own: where the arguments are
        not those `guarded` takes, or `condition` holds (over `opts`, the options), or a launch
        fails (FusionError), it runs `miss` instead (a statement over `args` and the globals
        `env` adds); `before` are lines run on the unpacked arguments a0, a1, ... before they
        are checked; the result is `result`, over the outputs o0, o1, ... For a torch.compile
        region, which is called a few hundred times a step: its checks, the launch and its
        results in one Python function. Only after `guarded` has been made."""
        assert self._guard is not None, "entry() before guarded()"
        return self._generate("entry", result, miss, env or {}, condition, before, catch=True)

    def _guard_of(self, example: Sequence[Any]) -> tuple[dict[str, Any], str, list[str]]:
        """The checks that arguments are laid out as `example`: the globals they read, the
        condition (over `args` and `opts`) that misses before unpacking, and the conditions
        over the unpacked a0, a1, ... that must hold."""
        env: dict[str, Any] = {"grad_enabled": self._grad_enabled}
        tensors = [i for i, _ in self._tensors]
        checks = []
        check = _tensor_guard([example[i] for i in tensors]) if tensors else None
        if check is not None:
            env["check"] = check
            checks.append(f"check({', '.join(f'a{i}' for i in tensors)})")
        else:
            for i in tensors:
                t = example[i]
                env[f"class{i}"], env[f"dt{i}"], env[f"sizes{i}"] = type(t), t.dtype, tuple(t.shape)
                env[f"st{i}"], env[f"dev{i}"] = tuple(t.stride()), t.get_device()
                env[f"rg{i}"] = t.requires_grad
                checks.append(f"a{i}.__class__ is class{i} and a{i}.dtype is dt{i} and a{i}.shape == sizes{i} "
                              f"and a{i}.stride() == st{i} and a{i}.get_device() == dev{i} "
                              f"and a{i}.requires_grad is rg{i}")
        for i, _, _ in self._scalars:
            env[f"type{i}"] = type(example[i])
            checks.append(f"a{i}.__class__ is type{i}")
        # Tensors requiring grad (the guard checks that they do, as the example's did): only
        # while grad mode is off, where autograd need not see the call.
        grad = any(getattr(example[i], "requires_grad", False) for i in tensors)
        miss = f"len(args) != {self._n_args} or opts.dump" + (" or grad_enabled()" if grad else "")
        return env, miss, checks

    def _generate(self, name: str, result: str, miss: str, env: dict[str, Any],
                  condition: str = "", before: Sequence[str] = (), catch: bool = False) -> Callable[..., Any]:
        """A guarded call (see `guarded` and `entry`), generated as straight-line Python."""
        assert self._guard is not None
        guard_env, early, checks = self._guard
        env = {**self._environment(), **guard_env, **env, "FusionError": FusionError}
        code = [f"def {name}(args):", "    opts = options()", f"    if {early}{condition}:", f"        {miss}"]
        code += self._unpack() + list(before)
        if checks:
            code += [f"    if not ({' and '.join(checks)}):", f"        {miss}"]
        code += self._range_checks(miss)
        body = self._body()
        if catch:
            body = ["    try:"] + ["    " + line for line in body] + ["    except FusionError:", f"        {miss}"]
        code += body + [f"    return {result}"]
        exec("\n".join(code), env)  # noqa: S102 - generated from this launcher's own fields
        return env[name]
