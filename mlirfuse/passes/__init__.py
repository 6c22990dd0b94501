"""The pass registry: every mlirfuse pass by name, and pipelines mixing them with upstream passes.

A pass is a module in this package defining `NAME`, `OPTIONS` (name -> (type, default, help))
and `run(module_op, **options)`; its docstring says what IR it expects and leaves.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from mlir import ir, passmanager

from mlirfuse.errors import FusionError

_MODULES = ["constant_outputs_as_fills", "cpu_asserts_as_error_flag", "entry_point", "fusion_autodiff",
            "fusion_cse", "fusion_dce", "fusion_group", "fusion_reshapes_past_reductions", "fusion_segment",
            "fusion_strip_bookend_views", "fusion_to_linalg", "gpu_apply_schedules", "gpu_checks_at_kernel_end",
            "gpu_float8_conversions",
            "gpu_fp_contract", "gpu_host_overrides",
            "gpu_loops_to_launches", "gpu_merge_kernel_modules", "gpu_pack_launches", "gpu_schedule",
            "gpu_split_reductions", "gpu_streaming_loads", "gpu_unit_loops",
            "inline_scalar_operands", "linalg_drop_dead_checks", "linalg_merge_siblings", "linalg_reciprocal_divisors",
            "linalg_recompute_producers", "linalg_reshape_elementwise", "linalg_scalars_apart", "linalg_unshare_inits",
            "math_expand_constant_powers", "memref_copies_to_linalg", "output_views_in_place"]


@dataclass(frozen=True)
class PassInfo:
    name: str
    run: Callable[..., None]
    options: dict[str, tuple[type, Any, str]]
    doc: str


def named_pipelines() -> dict[str, tuple[dict[str, tuple[type, Any, str]], Callable[..., str], str]]:
    """mlirfuse-opt's named pipelines (the stage lists of `mlirfuse.stages`): name ->
    (options, builder of the pipeline text from them, summary)."""
    from mlirfuse.stages import PIPELINES

    return PIPELINES


def registry() -> dict[str, PassInfo]:
    passes = {}
    for module_name in _MODULES:
        m = importlib.import_module(f"mlirfuse.passes.{module_name}")
        passes[m.NAME] = PassInfo(m.NAME, m.run, dict(m.OPTIONS), (m.__doc__ or "").strip())
    return passes


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _parse_options(info: PassInfo, text: str) -> dict[str, Any]:
    options = {}
    for item in text.split():
        key, _, value = item.partition("=")
        if key not in info.options:
            raise FusionError(f"pass {info.name}: unknown option '{key}' "
                              f"(options: {', '.join(info.options) or 'none'})")
        kind = info.options[key][0]
        if kind is bool:
            if value not in ("", "true", "false", "1", "0"):
                raise FusionError(f"pass {info.name}: option {key} takes true/false, got '{value}'")
            options[key] = value in ("", "true", "1")
        else:
            try:
                options[key] = kind(value)
            except ValueError:
                raise FusionError(f"pass {info.name}: bad value '{value}' for option {key}") from None
    return options


def _python_pass(info: PassInfo, options: dict[str, Any], errors: list[str]) -> Callable:
    def run(op: ir.Operation, pass_: Any) -> None:
        try:
            info.run(op, **options)
        except Exception as e:  # noqa: BLE001 - reported through the pass manager
            errors.append(f"{info.name}: {e}")
            pass_.signal_pass_failure()
    run.__name__ = info.name
    return run


class Pipeline:
    """A parsed pipeline; `run(module)` raises FusionError with the failing pass's reason."""

    def __init__(self, text: str):
        self.text = text
        self.errors: list[str] = []
        self.pass_manager = build_pass_manager(text, self.errors)

    def run(self, module: ir.Module) -> None:
        self.errors.clear()
        try:
            self.pass_manager.run(module.operation)
        except ir.MLIRError as e:
            reason = "; ".join(self.errors) or str(e)
            error = FusionError(f"pipeline failed: {reason}")
            error.diagnostics = list(e.error_diagnostics)  # located, for mlirfuse-opt to print
            raise error from None


def build_pass_manager(pipeline: str, errors: list[str]) -> passmanager.PassManager:
    """A PassManager for `builtin.module(...)` mixing mlirfuse passes (by name) and upstream ones.

    Needs an active MLIR context.
    """
    text = pipeline.strip()
    if not (text.startswith("builtin.module(") and text.endswith(")")):
        raise FusionError(f"pipeline must be 'builtin.module(...)', got '{pipeline}'")
    passes = registry()
    pm = passmanager.PassManager("builtin.module")
    elements = _split_top_level(text[len("builtin.module("):-1])
    while elements:
        element = elements.pop(0)
        name, _, rest = element.partition("{")
        if name.strip() in named_pipelines():  # a named pipeline: its elements in its place
            options, build, _ = named_pipelines()[name.strip()]
            info = PassInfo(name.strip(), build, options, "")
            expanded = build(**_parse_options(info, rest.rstrip("}")))
            elements[:0] = _split_top_level(expanded[len("builtin.module("):-1])
            continue
        info = passes.get(name.strip())
        if info is None:
            try:
                pm.add(element)
            except ValueError as e:
                raise FusionError(f"unknown pass or bad pipeline element '{element}': {e}") from None
            continue
        options = _parse_options(info, rest.rstrip("}"))
        pm.add(_python_pass(info, options, errors), name=info.name)
    return pm


def run_pipeline(module: ir.Module, pipeline: str) -> None:
    Pipeline(pipeline).run(module)
