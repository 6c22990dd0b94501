"""`torch.compile(fn, backend="mlirfuse", mode="reduce-overhead")`: each compiled graph, its
fused regions' kernels and torch's own calls alike, recorded once as a CUDA graph and then
replayed, through torch's CUDA graph trees (what Inductor's reduce-overhead mode and torch's
`cudagraphs` backend use: one memory pool, inputs that are not parameters copied into the
graph's own buffers, outputs overwritten by the next replay unless the caller is done with
them, a recording per new shape). A step then costs the host one replay, not a Python call
per region and a launch per kernel: the mode for host-bound steps (inference, small batches).

mlirfuse's host code is capturable as it is: its launches and memsets go on the caller's
stream, its outputs and scratch memory come from torch's allocator (the graph's pool while
recording), it synchronizes nothing; the first call, which loads the GPU binaries, runs
before the recording (the trees' warm-up). Random ops (dropout) read their Philox seed from
device memory that the graph fills from torch's CUDA generator, a kernel that each replay
runs with the generator's advanced offset: every replay draws new numbers. A graph is not
recorded (it runs as the default mode runs it, and torch's `cudagraph_skips` counter and log
say why) where torch's own checks refuse it (CPU tensors, several devices, ops that cannot be
captured, mutated inputs that are not parameters). The backward of a forward that was not
recorded is not recorded either.
"""

from __future__ import annotations

from typing import Any, Callable

from torch import fx

from mlirfuse import config

MODES = ("default", "reduce-overhead")


def check_mode(mode: str | None, options: Any) -> bool:
    """Whether `mode` records CUDA graphs; a mode or options mlirfuse has not, a ValueError."""
    if options:
        raise ValueError(f"torch.compile(backend='mlirfuse') takes no options (got {sorted(options)}); "
                         "mlirfuse's own settings are in mlirfuse.config and MLIRFUSE_* variables")
    if mode is not None and mode not in MODES:
        raise ValueError(f"torch.compile(backend='mlirfuse') has no mode {mode!r}: it has {', '.join(MODES)} "
                         "(reduce-overhead replays each graph as a CUDA graph; mlirfuse does not autotune)")
    return mode == "reduce-overhead"


class GraphCompilers:
    """AOTAutograd's forward, backward and inference compilers for one dynamo graph: mlirfuse's
    (`compile`: the aten graph -> the rewritten graph, boxed, and its fused regions), each result
    wrapped by torch's CUDA graph trees where it can be recorded."""

    def __init__(self, compile: Callable[[fx.GraphModule, str], tuple[Callable[[list[Any]], Any], list]],
                 n_inputs: int):
        from torch._inductor.cudagraph_utils import BoxedDeviceIndex
        from torch._inductor.utils import BoxedBool

        self._compile = compile
        self._n_inputs = n_inputs  # the dynamo graph's: AOTAutograd's forward adds parameters before them
        self._recording = BoxedBool(True)  # off once a forward is not recorded: its backward is not either
        self._device = BoxedDeviceIndex(None)

    def forward(self, gm: fx.GraphModule, inputs: list[Any], is_inference: bool = False) -> Callable[..., Any]:
        from torch._inductor.utils import BoxedBool, num_fw_fixed_arguments

        plain, recorded = self._wrap(gm, _static_inputs(num_fw_fixed_arguments(self._n_inputs, len(inputs))),
                                     "inference" if is_inference else "forward")
        if recorded is None:
            BoxedBool.disable(self._recording)
            return plain
        return recorded

    def inference(self, gm: fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        return self.forward(gm, inputs, is_inference=True)

    def backward(self, gm: fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        import torch
        from torch._inductor.utils import count_tangents

        if not self._recording:
            return self._compiled(gm, "backward")
        plain, recorded = self._wrap(gm, list(range(count_tangents(gm))), "backward")  # the saved tensors
        if recorded is not None:
            return recorded
        # The forward was recorded: the trees must know their backward runs unrecorded (their
        # manager looked up at each call: a backward compiled before any forward ran, as with
        # symbolic sizes saved for it, finds none yet; none at run time: nothing is recorded)
        device = self._device

        def run(args: list[Any]) -> Any:
            manager = torch._inductor.cudagraph_trees.get_manager(
                device.value if device.value is not None else 0, create_if_none_exists=False)
            if manager is not None:
                manager.set_to_running_backward()
            return plain(args)
        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    def _compiled(self, gm: fx.GraphModule, kind: str) -> Callable[..., Any]:
        return self._compile(gm, kind)[0]

    def _wrap(self, gm: fx.GraphModule, static: list[int],
              kind: str) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
        """The compiled graph, and that graph under the CUDA graph trees (None where it is not
        recorded). `static`: the inputs at the same address every call (parameters, buffers, a
        backward's saved tensors), which the trees do not copy."""
        from torch._dynamo.backends.cudagraphs import find_input_mutations, get_device_index, get_stack_traces
        from torch._inductor.compile_fx import cudagraphify
        from torch._inductor.cudagraph_utils import (
            format_default_skip_message,
            get_placeholder_info,
            log_cudagraph_skip_and_bump_counter,
        )

        # torch's checks read the aten graph as AOTAutograd gave it (before the rewrite)
        reason = _skip_reason(gm, static)
        if reason is None:
            device = get_device_index(gm)
            placeholders, traces = get_placeholder_info(gm.graph), get_stack_traces(gm)
            mutated = find_input_mutations(gm.graph)
        plain, _ = self._compile(gm, kind)
        if reason is None and config.options().check_regions:
            reason = format_default_skip_message("MLIRFUSE_CHECK_REGIONS (its comparison with torch reads "
                                                 "results on the host, which a recording cannot)")
        if reason is not None:
            log_cudagraph_skip_and_bump_counter(reason)
            return plain, None
        self._device.set(device)
        # Inductor's wrapper: the trees are set up at the first call, from its inputs, as
        # Inductor's are. Given the compile's inputs, symbolic sizes and integer arguments are
        # SymInts, not ints: the trees would key no recording by them, and one recording, its
        # sizes and scalars captured, would serve every later value.
        out = cudagraphify(plain, static, device_index=device,
                           is_backward=kind == "backward", is_inference=kind == "inference",
                           stack_traces=traces, placeholders=placeholders, mutated_input_idxs=tuple(sorted(mutated)))
        out._boxed_call = True  # type: ignore[attr-defined]
        return plain, out


def _static_inputs(fixed: int) -> list[int]:
    """A forward's inputs at fixed addresses: AOTAutograd's static inputs where dynamo marked
    them (parameters and buffers of inlined modules are graph inputs after the first `fixed`:
    counted from `fixed` alone, the trees would copy every weight at every replay), as
    Inductor takes them; else the first `fixed`."""
    try:
        from torch._inductor.compile_fx import get_static_input_idxs
    except ImportError:
        return list(range(fixed))
    return list(get_static_input_idxs(fixed))


def _skip_reason(gm: fx.GraphModule, static: list[int]) -> str | None:
    """Why the graph cannot be recorded (torch's `cudagraphs` backend's checks, with the static
    inputs as Inductor counts them): a mutated input the trees would copy, CPU tensors or
    several devices, an op that cannot be captured; and, as Inductor, the trees turned off or
    symbolic sizes where torch's config skips those. None where it can."""
    import torch
    from torch._dynamo import config
    from torch._dynamo.backends.cudagraphs import find_input_mutations, get_device_node_mapping
    from torch._inductor import config as inductor_config
    from torch._inductor.cudagraph_utils import (
        check_multiple_devices_or_any_cpu_nodes,
        format_default_skip_message,
        get_mutation_stack_trace,
        get_placeholder_info,
    )
    from torch._inductor.utils import get_first_incompatible_cudagraph_node
    from torch.fx.experimental.symbolic_shapes import free_symbols

    if not inductor_config.triton.cudagraph_trees:
        # torch's other recorder records once, keyed by nothing: one recording would serve every
        # integer argument and size
        return format_default_skip_message("torch._inductor.config.triton.cudagraph_trees off (mlirfuse "
                                           "records through the trees only)")
    if inductor_config.triton.cudagraph_skip_dynamic_graphs and any(
            isinstance(n.meta.get("val"), torch.SymInt) or free_symbols(n.meta.get("val"))
            for n in gm.graph.nodes if n.op == "placeholder"):
        return format_default_skip_message("dynamic shapes (torch._inductor.config.triton."
                                           "cudagraph_skip_dynamic_graphs)")
    mutated = find_input_mutations(gm.graph) - set(static)
    if mutated and not config.cudagraph_backend_support_input_mutation:
        return get_mutation_stack_trace(get_placeholder_info(gm.graph), mutated)
    if skip := check_multiple_devices_or_any_cpu_nodes(get_device_node_mapping(gm)):
        return skip
    if node := get_first_incompatible_cudagraph_node(gm):
        return format_default_skip_message(f"incompatible op ({node.name})")
    return None
