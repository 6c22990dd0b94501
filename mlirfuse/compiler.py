"""A traced fusion, compiled for one signature: guards on inputs, output allocation, calls."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from mlirfuse import config, dump, reference
from mlirfuse.arrays import Arg, classify_all, numpy_to_torch, placement, torch_empty, wrap_output
from mlirfuse.dialects import fusion as fusion_dialect
from mlirfuse.dialects.optable import OPS
from mlirfuse.errors import FusionError, IndexOutOfRange
from mlirfuse.fallback import fall_back
from mlirfuse.frontend.graph import Fusion, InputSpec
from mlirfuse.frontend.symbolic import StaticTraceNeeded, evaluate
from mlirfuse.torch_launcher import TorchLauncher, contiguous_strides

BACKENDS = ("cpu", "gpu")


def describe(spec: InputSpec) -> str:
    if spec.scalar:
        return f"{spec.dtype.value} scalar"
    dims = ", ".join("?" if s is None else str(s) for s in spec.shape)
    read_as = f" (read as its permute{spec.order})" if spec.order is not None else ""
    return f"{spec.dtype.value}[{dims}]{read_as}"


def check_arg(i: int, arg: Arg, spec: InputSpec) -> Any:
    """The value to pass for input i, or FusionError saying how it differs from its definition."""
    if spec.scalar:
        if arg.kind != "scalar" and arg.shape != ():
            raise FusionError(f"input {i}: expected a scalar, got an array of shape {arg.shape}")
        if (spec.dtype.is_int and arg.dtype.is_float) or (spec.dtype.is_bool and not arg.dtype.is_bool):
            raise FusionError(f"input {i}: expected a {spec.dtype.value} scalar, got {arg.value!r} "
                              f"({arg.dtype.value}); convert it explicitly")
        try:
            return np.asarray(arg.value if arg.kind != "device" else arg.value.item(), dtype=spec.dtype.np)
        except (TypeError, ValueError, OverflowError) as e:
            raise FusionError(f"input {i}: expected a {spec.dtype.value} scalar, got {arg.value!r} ({e})") from None
    if arg.kind == "scalar":
        raise FusionError(f"input {i}: expected an array ({describe(spec)}), got {arg.value!r}")
    if arg.dtype is not spec.dtype:
        raise FusionError(f"input {i}: expected dtype {spec.dtype.value}, got {arg.dtype.value}")
    if spec.order is not None:
        arg = _permuted(i, arg, spec)
    if len(arg.shape) != spec.rank:
        raise FusionError(f"input {i}: expected rank {spec.rank} ({describe(spec)}), got shape {arg.shape}")
    for d, (want, got) in enumerate(zip(spec.shape, arg.shape)):
        if want is not None and want != got:
            raise FusionError(f"input {i}: dim {d} must be {want} ({describe(spec)}), got shape {arg.shape}")
    value = arg.value
    if arg.kind == "device":
        return value if arg.contiguous or not spec.contiguous else value.contiguous()
    if (spec.contiguous and not value.flags.c_contiguous) or any(s % value.itemsize for s in value.strides):
        value = np.ascontiguousarray(value)
    return value


def _permuted(i: int, arg: Arg, spec: InputSpec) -> Arg:
    """The argument as the fusion reads it: its `permute(spec.order)` (contiguous where the
    argument is laid out in that order; else copied as any non-contiguous argument is)."""
    order = spec.order
    if len(arg.shape) != len(order):
        raise FusionError(f"input {i}: expected rank {len(order)} ({describe(spec)}), got shape {arg.shape}")
    value = arg.value.permute(order) if arg.kind == "device" else np.transpose(arg.value, order)
    shape = tuple(arg.shape[d] for d in order)
    contiguous = value.is_contiguous() if arg.kind == "device" else value.flags.c_contiguous
    return Arg(arg.kind, value, arg.dtype, shape, contiguous, arg.device, arg.origin)


class CompiledFusion:
    """One fusion compiled for one input signature and backend (cpu, or gpu for `arch`)."""

    def __init__(self, fusion: Fusion, backend: str = "cpu", keep_stages: bool = False,
                 arch: str | None = None, binary_format: str | None = None, scheduled_ir: str | None = None):
        if backend not in BACKENDS:
            raise FusionError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
        if scheduled_ir is not None and backend != "gpu":
            raise FusionError("scheduled_ir: a GPU stage (compile with backend='gpu')")
        self.fusion = fusion
        self.backend = backend
        self.fusion_ir = fusion.to_mlir()
        self.key = dump.key_of(self.fusion_ir)  # its dump files' names
        self._scalar = [s.scalar for s in fusion.specs]
        self._output_shapes = [t.shape for t in fusion.outputs]
        self._output_dtypes = [t.dtype for t in fusion.outputs]
        self._shape_memo: dict[tuple, list[tuple[int, ...]]] = {}
        self.executor: Any = None
        self.stages: dict[str, str] = {}
        self.compile_seconds = 0.0
        self._library = any(OPS[n.op].kind == "library" for n in fusion.nodes)
        keep_stages = keep_stages or bool(config.options().dump)
        self._planned: tuple[str, int] | None = None
        self._plan_ir: dict[str, str] = {}
        if config.options().dump:
            self._plan()  # the plan's dumps come with the compile
        self.arch = "host"
        self.kernel = None
        self._build(keep_stages, arch, binary_format, scheduled_ir)
        if keep_stages:  # every stage, the plan's too, in order
            if self._planned is None:
                self._plan()
            self.stages = {"fusion": self.fusion_ir, **self._plan_ir, **self.stages}
        if dump.enabled("pipeline"):
            self._dump_pipeline(dump.key_of(self.fusion_ir))

    def _build(self, keep_stages: bool, arch: str | None, binary_format: str | None,
               scheduled_ir: str | None) -> None:
        if self.backend == "cpu":
            if self._library:
                self._build_grouped(keep_stages)
            else:
                self._build_direct(keep_stages)
            return
        from mlirfuse.gpu_kernel import GpuKernel
        from mlirfuse.lowering.gpu import runtime as gpu_runtime
        from mlirfuse.lowering.gpu import toolchain

        self.arch = toolchain.check_arch(arch) if arch is not None else gpu_runtime.device_arch(0)
        if self._library:
            if scheduled_ir is not None:
                raise FusionError("scheduled_ir: this fusion runs group by group around library ops")
            self.kernel = None
            self._build_grouped(keep_stages, arch=self.arch, binary_format=binary_format)
            return
        self.kernel = GpuKernel(self.fusion_ir, self.fusion.specs, self.arch, binary_format, keep_stages, scheduled_ir)
        self.n_launches = self.kernel.n_launches  # today's GPU lowering: one launch per linalg op
        self.stages = self.kernel.stages
        self.compile_seconds = self.kernel.compile_seconds
        self._dump_stages()

    def stage_list(self) -> list:
        """Every stage of this compile in order (`mlirfuse.stages.Stage`: name, source stage,
        pipeline): the plan's, then the backend's. `stages[s.name]` is what mlirfuse-opt
        makes of `stages[s.source]` with `s.pipeline` (for a fusion run group by group, the
        backend's stages lower each group of `executor.group_ir`)."""
        return self._grouping().plan_stages() + self._backend_stages()

    def _backend_stages(self) -> list:
        """The stages that lower this fusion (a group's, for a fusion run group by group)."""
        from mlirfuse import stages

        if self.backend == "cpu":
            return stages.cpu_stages()
        from mlirfuse.lowering.gpu import toolchain

        return stages.gpu_stages(self.arch, "isa", toolchain.find().root)

    def _dump_pipeline(self, key: str) -> None:
        """For every stage, the mlirfuse-opt command turning its source stage's IR (saved from
        `compiled.stages[source]` as `<key>-<source>.mlir`) into its own; then the same in one go."""
        from mlirfuse import stages

        kinds = ["scalar" if s.scalar else "tensor" if s.contiguous else "strided" for s in self.fusion.specs]
        lines = [f"stages of {key} ({self.backend}, {self.arch}); stage 'fusion' is the fusion IR, its @fusion "
                 f"saying how each input is passed: mlirfuse.inputs = {kinds}"]
        lines += stages.replay_commands(self._grouping().plan_stages(), key)
        if self.executor is not None:  # library ops between groups: each group lowers on its own
            lines.append("library ops run between the groups of the 'grouped' stage; each group "
                         f"(`compiled.executor.group_ir`) lowers through the {self.backend} stages below")
        lines += stages.replay_commands(self._backend_stages(), key)
        one_go, emit = (("mlirfuse-cpu-pipeline", "") if self.backend == "cpu"
                        else (f"mlirfuse-gpu-pipeline{{arch={self.arch}}}", " --emit=ptx"))
        lines.append(f"in one go: mlirfuse-opt {key}-fusion.mlir --pass-pipeline='builtin.module({one_go})'{emit}")
        dump.emit("pipeline", "\n".join(lines), key)

    # -- the segmenter's plan: computed on first use (a warm start from the disk cache skips it)
    @property
    def segmented_ir(self) -> str:
        """The fusion IR after grouping, bookend-view stripping and segmentation: every op
        tagged with its segment, every segment with its scheduler."""
        if self._planned is None:
            self._plan()
        return self._planned[0]

    @property
    def n_kernels(self) -> int:
        """Kernels the segmenter plans for this fusion (no-op segments launch nothing)."""
        if self._planned is None:
            self._plan()
        return self._planned[1]

    planned_kernels = n_kernels

    def _grouping(self) -> config.Options:
        """The knobs the plan groups with: on the GPU, a fusion run group by group has every
        fusible op in a group (single-node groups too), so only library ops and views run in torch."""
        opts = config.options()
        return replace(opts, single_node=True) if self.backend == "gpu" and self._library else opts

    def _plan(self) -> None:
        """Group, strip bookend views and segment (`stages.plan_stages`): the kernels this
        fusion needs, and dumps."""
        from mlirfuse import stages
        from mlirfuse.passes.fusion_segment import kernel_count

        key = dump.key_of(self.fusion_ir)
        dump.emit("fusion_ir", self.fusion_ir, key)
        dump.emit("python_definition", dump.python_definition(self.fusion), key)
        record: dict[str, str] = {}
        with fusion_dialect.context() as ctx:
            module = stages.parse_fusion(self.fusion_ir, self.fusion.specs, ctx)
            with dump.capture_log("mlirfuse.segmenter") as rejected:
                module = stages.run(module, self._grouping().plan_stages(), record, "plan")
            self._planned = (str(module), kernel_count(module))
        self._plan_ir = record
        dump.emit("fusion_ir_presched", record["stripped"], key)
        dump.emit("segmented_fusion", self.segmented_ir, key)
        dump.emit("segmenter_logging", "\n".join(rejected) or "(no merge rejected)", key)

    def _dump_stages(self) -> None:
        key = dump.key_of(self.fusion_ir)
        for name, stage in (("scheduled_ir", "linalg"), ("linalg", "linalg"), ("gpu", "gpu"), ("ptx", "ptx")):
            if stage in self.stages:
                dump.emit(name, self.stages[stage], key)
        if "launch_params" in self.stages:
            dump.emit("launch_params", f"{self.n_launches} launch(es):\n" + self.stages["launch_params"], key)

    def _build_direct(self, keep_stages: bool) -> None:
        from mlirfuse.lowering.cpu.compile import compile_cpu

        try:
            self.kernel = compile_cpu(self.fusion_ir, self.fusion.specs, keep_stages=keep_stages)
        except Exception as e:  # noqa: BLE001 - any compiler failure takes the fallback path
            fall_back(self.fusion_ir, e, "compiling the fusion")
            return
        self.stages = self.kernel.stages
        self.compile_seconds = self.kernel.compile_seconds
        self._dump_stages()

    def _build_grouped(self, keep_stages: bool, arch: str | None = None, binary_format: str | None = None) -> None:
        """Fusion groups around library ops, run by the executor: on the GPU every fusible op
        is in a group (single-node groups too), so only library ops and views run in torch."""
        from mlirfuse import stages
        from mlirfuse.executor import DeviceGraphExecutor, GraphExecutor

        start = time.perf_counter()
        record: dict[str, str] = {}
        with fusion_dialect.context() as ctx:
            module = stages.parse_fusion(self.fusion_ir, self.fusion.specs, ctx)
            stages.run(module, self._grouping().plan_stages()[:1], record, "plan")
        self.stages = record
        if self.backend == "gpu":
            self.executor = DeviceGraphExecutor(record["grouped"], arch or "sm_90", binary_format)
        else:
            self.executor = GraphExecutor(record["grouped"])
        if dump.enabled("pipeline"):
            key = dump.key_of(self.fusion_ir)
            for name, text in self.executor.group_ir.items():
                dump.emit("pipeline", f"group @{name} (the 'fusion' stage of the {self.backend} stages below: "
                          f"save as {key}-fusion.mlir):\n{text.rstrip()}", key)
        if keep_stages:
            self.stages["linalg"] = self._groups_linalg()
            self._dump_stages()
        self.compile_seconds = time.perf_counter() - start

    def _groups_linalg(self) -> str:
        """Each group of a grouped fusion lowered to linalg (its kernels are compiled at the
        first call, per argument layout): for the scheduled_ir/linalg dumps."""
        from mlirfuse import stages

        texts = []
        for name, text in self.executor.group_ir.items():
            with fusion_dialect.context() as ctx:
                module = fusion_dialect.parse(text, ctx)
                module = stages.run(module, self._backend_stages()[:1])
                texts.append(f"// group @{name}\n{module}")
        return "\n".join(texts)

    @property
    def ptx(self) -> str:
        if self.backend != "gpu":
            raise FusionError("ptx: compile with backend='gpu'")
        if self.kernel is None:
            raise FusionError("ptx: this fusion runs group by group around library ops; each group "
                              "is compiled at its first call (compiled.executor.kernels)")
        return self.kernel.ptx

    def output_shapes(self, shapes: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
        """Output shapes for these input shapes, after checking the traced constraints."""
        key = tuple(tuple(s) for s in shapes)
        known = self._shape_memo.get(key)
        if known is not None:
            return known
        result = self._output_shapes_uncached(shapes)
        if len(self._shape_memo) > 1024:
            self._shape_memo.clear()
        self._shape_memo[key] = result
        return result

    def _output_shapes_uncached(self, shapes: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
        for a, b in self.fusion.constraints:
            va, vb = evaluate(a, shapes), evaluate(b, shapes)
            if va != vb:
                raise FusionError(self._as_called(f"input shapes {[tuple(s) for s in shapes]} are inconsistent: "
                                                  f"the fusion needs {a} == {b} (got {va} and {vb}); "
                                                  "they do not broadcast or reshape as traced", shapes))
        for size, least, what, clamps in self.fusion.minimums:
            value = evaluate(size, shapes)
            if value < least:
                error = StaticTraceNeeded if clamps else FusionError
                raise error(self._as_called(f"input shapes {[tuple(s) for s in shapes]}: {what} unless "
                                            f"{size} >= {least} (got {value})", shapes))
        return [tuple(evaluate(s, shapes) for s in shape) for shape in self._output_shapes]

    def _as_called(self, message: str, shapes: Sequence[Sequence[int]]) -> str:
        """A shape error in the caller's terms: an input read as its argument's permutation
        (`InputSpec.order`) named by the argument's shape and dims, not the fusion's."""
        orders = {i: spec.order for i, spec in enumerate(self.fusion.specs) if spec.order is not None}
        if not orders:
            return message
        called = [tuple(s) for s in shapes]
        for i, order in orders.items():
            called[i] = tuple(shapes[i][order.index(d)] for d in range(len(order)))
        message = message.replace(str([tuple(s) for s in shapes]), str(called), 1)
        return re.sub(r"in(\d+)\.shape\[(\d+)\]",
                      lambda m: f"in{m[1]}.shape[{orders[int(m[1])][int(m[2])] if int(m[1]) in orders else m[2]}]",
                      message)

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        return self.run(classify_all(inputs))

    def run(self, args: list[Arg]) -> list[Any]:
        specs = self.fusion.specs
        if len(args) != len(specs):
            raise FusionError(f"expected {len(specs)} inputs ({', '.join(describe(s) for s in specs)}), "
                              f"got {len(args)}")
        where, device = placement(args)
        values = [check_arg(i, a, s) for i, (a, s) in enumerate(zip(args, specs))]
        shapes = self.output_shapes([v.shape for v in values])
        if config.options().dump:
            self._dump_call(values, shapes)
        if self.backend == "cpu":
            if where == "device":
                raise FusionError("GPU arrays given to a fusion compiled for the CPU; use backend='gpu'")
            for_torch = any(a.kind == "host" and a.origin == "torch" for a in args)
            if self.executor is not None:
                outputs = self.executor.run(values, for_torch)
            elif self.kernel is None:  # the fallback path
                outputs = reference.evaluate(self.fusion_ir, values)
            else:
                empty = torch_empty if for_torch else lambda s, dt: np.empty(s, dtype=dt.np)
                outputs = [empty(s, dt) for s, dt in zip(shapes, self._output_dtypes)]
                start = time.perf_counter()
                try:
                    self.kernel(values, outputs, self._scalar)
                except IndexOutOfRange:
                    raise  # the inputs' fault, as torch's IndexError: not the compiler's
                except Exception as e:  # noqa: BLE001 - a failing run takes the fallback path too
                    fall_back(self.fusion_ir, e, "running the fusion")
                    self.kernel = None  # from now on: the reference evaluator, no second warning
                    outputs = reference.evaluate(self.fusion_ir, values)
                if dump.enabled("eff_bandwidth"):
                    seconds = time.perf_counter() - start
                    moved = sum(v.nbytes for v in values) + sum(o.nbytes for o in outputs)
                    dump.emit("eff_bandwidth", f"CPU kernel: {moved} bytes in {seconds * 1e6:.1f} us = "
                              f"{moved / max(seconds, 1e-12) / 1e9:.2f} GB/s", dump.key_of(self.fusion_ir))
            origin = next((a.origin for a in args if a.kind == "host"), "numpy")
            return [numpy_to_torch(o) for o in outputs] if origin == "torch" else outputs
        if where == "device":
            return self._run_device(args, values, shapes, device)
        return self._run_staged(values, shapes)

    def _dump_call(self, values: list[Any], shapes: list[tuple[int, ...]]) -> None:
        key = dump.key_of(self.fusion_ir)
        lines = []
        for i, v in enumerate(values):
            strides = getattr(v, "strides", ())
            if callable(strides):
                strides = strides()
            lines.append(f"input {i}: {getattr(v, 'dtype', type(v).__name__)} sizes {tuple(v.shape)} "
                         f"strides {tuple(strides)}")
        lines += [f"output {j}: {dt.value} sizes {s}" for j, (s, dt) in enumerate(zip(shapes, self._output_dtypes))]
        dump.emit("kernel_args", "\n".join(lines), key)

    # -- GPU ---------------------------------------------------------------------------------
    def executable(self, device: int) -> Any:
        return self.kernel.executable(device)

    def _run_device(self, args: list[Arg], values: list[Any], shapes: list[tuple[int, ...]],
                    device: int) -> list[Any]:
        import torch

        origin = next((a.origin for a in args if a.kind == "device"), "torch")
        if self.executor is not None:
            with torch.cuda.device(device):
                outputs = self.executor.run(values)
            return [wrap_output(o, origin) for o in outputs]
        dev = torch.device("cuda", device)
        outputs = [torch.empty(s, dtype=getattr(torch, dt.value), device=dev)
                   for s, dt in zip(shapes, self._output_dtypes)]
        self.kernel.launch_torch(values, outputs, device)
        return [wrap_output(o, origin) for o in outputs]

    def torch_launcher(self, args: list[Arg], into: dict[int, int] | None = None) -> TorchLauncher | None:
        """The hot path for calls with exactly these torch CUDA tensors (sizes, strides, dtype,
        device) and Python scalars of these types; None where the general path is needed.
        `into`: output -> argument it is written into (see `JitFunction`), in place where
        the kernels allow it (`in_place_pairs`) and the argument is laid out as the output
        is and shares no memory with another argument, else copied there after the launch."""
        if self.backend != "gpu" or self.kernel is None or config.options().dump:
            return None
        for arg, spec in zip(args, self.fusion.specs):
            if not (arg.kind == "device" and arg.origin == "torch" and not spec.scalar
                    or arg.kind == "scalar" and spec.scalar and type(arg.value) in (int, float, bool)):
                return None
        import torch

        _, device = placement(args)
        values = [check_arg(i, a, s) for i, (a, s) in enumerate(zip(args, self.fusion.specs))]
        shapes = self.output_shapes([v.shape for v in values])
        exe = self.kernel.torch_executable(device)
        call_args = [v if scalar else (0, v.shape, v.stride()) for v, scalar in zip(values, self._scalar)]
        call_args += [(0, s, contiguous_strides(s)) for s in shapes]
        bound = exe.bind(call_args)
        outputs = [(s, getattr(torch, dt.value)) for s, dt in zip(shapes, self._output_dtypes)]
        shared = {k: j for k, j in (into or {}).items()
                  if (j, k) in self.kernel.in_place and _fits(args, j, outputs[k])}
        copied = {k: j for k, j in (into or {}).items() if k not in shared}
        return TorchLauncher(torch, exe, bound, self._scalar, outputs, device, shared, copied)

    def _run_staged(self, values: list[Any], shapes: list[tuple[int, ...]]) -> list[Any]:
        """numpy in, numpy out, on the GPU: copies through the runtime, synchronized."""
        if self.executor is not None:
            from mlirfuse.lowering.gpu.runtime import device_count

            if device_count() == 0:
                raise FusionError("backend='gpu' needs an NVIDIA GPU and driver; none was found")
            import torch

            outputs = self.executor.run([torch.from_numpy(np.asarray(v, order="C")).cuda()
                                         if isinstance(v, np.ndarray) else v for v in values])
            return [o.cpu().numpy() for o in outputs]
        outputs = [np.empty(s, dtype=dt.np) for s, dt in zip(shapes, self._output_dtypes)]
        self.kernel.run_staged(values, outputs)
        return outputs


def _fits(args: list[Arg], j: int, output: tuple[tuple[int, ...], Any]) -> bool:
    """Argument j can hold the output: its sizes, dtype and dense strides, and no other
    argument's memory overlapping its own."""
    t = args[j].value
    shape, dtype = output
    if args[j].order is not None or t.dtype != dtype or tuple(t.shape) != tuple(shape) or \
            tuple(t.stride()) != contiguous_strides(shape):
        return False
    start, end = _extent(t)
    others = [_extent(a.value) for i, a in enumerate(args) if i != j and a.kind == "device"]
    return not any(first < end and start < last for first, last in others)


def _extent(t: Any) -> tuple[int, int]:
    """The bytes a tensor's elements span: [first, last + 1)."""
    if t.numel() == 0:
        return t.data_ptr(), t.data_ptr()
    last = sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()
