"""mlirfuse's knobs, read from the environment once and settable from Python.

| variable | default | meaning |
| --- | --- | --- |
| MLIRFUSE_HORIZONTAL | 1 | fusion-group merges siblings sharing an input |
| MLIRFUSE_SINGLE_NODE | 0 | fusion-group also outlines groups of one compute op |
| MLIRFUSE_MAX_ARGS | 128 | most inputs + outputs of one group |
| MLIRFUSE_DISABLE_FALLBACK | 0 | 1: a failing compile raises instead of running the reference evaluator |
| MLIRFUSE_CHECK_REGIONS | 0 | 1: torch.compile backend: every fused region also runs in torch and must agree |
| MLIRFUSE_DUMP | (none) | comma list of dumps (see README) |
| MLIRFUSE_DUMP_DIR | (stderr) | write dumps to files in this folder instead |
| MLIRFUSE_CPU_OPT_LEVEL | 3 | LLVM's optimization level (0-3) for the CPU backend's host code |
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace

from mlirfuse.errors import FusionError


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def _int(name: str, default: int) -> int:
    value = os.environ.get(name)
    try:
        return default if value is None else int(value)
    except ValueError:
        import warnings

        warnings.warn(f"{name}={value!r} is not an integer; using {default}", RuntimeWarning, stacklevel=2)
        return default


CPU_OPT_LEVELS = (0, 1, 2, 3)


def _level(value: int) -> int:
    if value in CPU_OPT_LEVELS:
        return value
    import warnings

    warnings.warn(f"MLIRFUSE_CPU_OPT_LEVEL={value} is not 0-3; using 3", RuntimeWarning, stacklevel=2)
    return 3


@dataclass(frozen=True)
class Options:
    horizontal: bool = True
    single_node: bool = False
    max_args: int = 128
    fallback: bool = True
    pad_matmuls: str = "auto"  # torch backend: "auto" (CUDA half precision), "always", "off"
    unfuse_addmm: str = "auto"  # torch backend: "auto" (CUDA, not half precision), "always", "off"
    check_regions: bool = False  # torch backend: each region also runs in torch, outputs compared
    scatter_embedding_grads: bool = True  # torch backend: embedding gradients as index_add_ (embedding_grad.py)
    dump: frozenset[str] = field(default_factory=frozenset)
    dump_dir: str | None = None
    # LLVM's -O level for host code. 0 generates code about 4x faster (FastISel, no passes: 80
    # of the test suite's modules, 22.1 s at 3, 5.7 s at 0) that runs slower; the tests use it
    # (test/py/conftest.py), users get 3.
    cpu_opt_level: int = 3

    @staticmethod
    def from_env() -> "Options":
        return Options(
            horizontal=_flag("MLIRFUSE_HORIZONTAL", True),
            single_node=_flag("MLIRFUSE_SINGLE_NODE", False),
            max_args=_int("MLIRFUSE_MAX_ARGS", 128),
            fallback=not _flag("MLIRFUSE_DISABLE_FALLBACK", False),
            pad_matmuls=os.environ.get("MLIRFUSE_PAD_MATMULS", "auto").strip().lower(),
            unfuse_addmm=os.environ.get("MLIRFUSE_UNFUSE_ADDMM", "auto").strip().lower(),
            check_regions=_flag("MLIRFUSE_CHECK_REGIONS", False),
            scatter_embedding_grads=_flag("MLIRFUSE_SCATTER_EMBEDDING_GRADS", True),
            dump=frozenset(d.strip() for d in os.environ.get("MLIRFUSE_DUMP", "").split(",") if d.strip()),
            dump_dir=os.environ.get("MLIRFUSE_DUMP_DIR") or None,
            cpu_opt_level=_level(_int("MLIRFUSE_CPU_OPT_LEVEL", 3)),
        )

    def plan_stages(self) -> list:
        """Grouping, bookend-view stripping and segmentation with these knobs (`mlirfuse.stages`)."""
        from mlirfuse.stages import plan_stages

        return plan_stages(self.horizontal, self.single_node, self.max_args)


_current = Options.from_env()  # the one explicit piece of process state: the active knobs


def options() -> Options:
    return _current


def set_options(**changes: object) -> Options:
    """Change knobs for this process, e.g. `mlirfuse.set_options(horizontal=False)`;
    returns the previous options (pass them to `restore_options`)."""
    global _current
    known = {f.name for f in fields(Options)}
    unknown = set(changes) - known
    if unknown:
        raise FusionError(f"unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
    if "dump" in changes and isinstance(changes["dump"], str):
        changes["dump"] = frozenset(d.strip() for d in str(changes["dump"]).split(",") if d.strip())
    for name, value in changes.items():
        kind = _KINDS.get(name)
        if kind is not None and type(value) is not kind:  # bool is no int here, nor a string a bool
            raise FusionError(f"option {name}: expected {kind.__name__}, got {value!r}")
    for name in ("pad_matmuls", "unfuse_addmm"):
        if changes.get(name, "auto") not in GRAPH_REWRITE_MODES:
            raise FusionError(f"option {name}: expected one of {GRAPH_REWRITE_MODES}, got {changes[name]!r}")
    if changes.get("max_args", 1) < 1:  # type: ignore[operator]
        raise FusionError(f"option max_args: expected at least 1, got {changes['max_args']!r}")
    if changes.get("cpu_opt_level", 3) not in CPU_OPT_LEVELS:
        raise FusionError(f"option cpu_opt_level: expected 0, 1, 2 or 3, got {changes['cpu_opt_level']!r}")
    if "dump" in changes:
        from mlirfuse.dump import DUMPS  # (dump reads these options: imported late)

        unknown = set(changes["dump"]) - set(DUMPS)  # type: ignore[arg-type]
        if unknown:
            raise FusionError(f"unknown dump(s) {sorted(unknown)}; known: {sorted(DUMPS)}")
    previous = _current
    _current = replace(_current, **changes)  # type: ignore[arg-type]
    return previous


_KINDS = {"horizontal": bool, "single_node": bool, "fallback": bool, "max_args": int, "pad_matmuls": str,
          "unfuse_addmm": str,
          "check_regions": bool, "scatter_embedding_grads": bool, "cpu_opt_level": int}
GRAPH_REWRITE_MODES = ("auto", "always", "off")  # pad_matmuls, unfuse_addmm


def restore_options(previous: Options) -> None:
    global _current
    _current = previous
