"""nvFuser's module-level frontend names: the FusionCache, the value classes for isinstance
checks, and the layout helpers (contiguity and stride order of sizes and strides)."""

from __future__ import annotations

import atexit
import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from mlirfuse.errors import FusionError
from mlirfuse.frontend.complex_ops import ComplexTensor
from mlirfuse.frontend.definition_log import Deferred
from mlirfuse.frontend.graph import SCALAR, Tensor

if TYPE_CHECKING:
    from mlirfuse.frontend.fusion_definition import FusionDefinition

class FusionCache:
    """nvFuser's process-wide cache of definitions: equal definitions (the same fusion IR,
    or for definitions traced per signature the same calls) share one number; each number
    holds that definition's compiled kernels, one per signature and backend.

    `serialize(path)` writes the definitions (their printed Python functions, `repr(fd)`) to a
    JSON file and `deserialize(path)` defines them again, under the same numbers in an empty
    cache; the kernels come back from the disk cache. After `enable_automatic_serialization()`
    the cache is written to the default workspace (`default_workspace()`) at exit and read
    from it at the process's first `FusionCache.get()`, as nvFuser's is."""

    _instance: "FusionCache | None" = None
    _automatic = False  # enable_automatic_serialization() was called

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._definitions: dict[int, "FusionDefinition"] = {}
        self._number: int | None = None  # the number deserialize gives the next new definition

    @classmethod
    def get(cls, max_fusions: int | None = None, selected_device: Any = None,
            load_from_default_workspace: bool = True) -> "FusionCache":
        """The process's cache (nvFuser's arguments: its size and device have no effect here)."""
        if cls._instance is None:
            cls._instance = FusionCache()
            workspace = default_workspace()
            if cls._automatic and load_from_default_workspace and workspace is not None and workspace.exists():
                try:
                    cls._instance.deserialize(workspace)
                except (FusionError, OSError, ValueError) as e:
                    warnings.warn(f"FusionCache: the default workspace {workspace} was not loaded ({e})",
                                  RuntimeWarning, stacklevel=2)
        return cls._instance

    def serialize(self, path: str | os.PathLike) -> None:
        """Write every definition, as its printed Python function, to `path` (JSON); one that
        cannot be printed (made with Tensor methods, outside `fd.ops`) is left out, with a
        warning."""
        entries = []
        for number, fd in sorted(self._definitions.items()):
            try:
                entries.append({"number": number, "definition": repr(fd)})
            except FusionError as e:
                warnings.warn(f"FusionCache.serialize: definition {number} left out ({e})", RuntimeWarning,
                              stacklevel=2)
        text = json.dumps({"format": SERIALIZATION_FORMAT, "definitions": entries}, indent=1)
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(target.name + f".{os.getpid()}.tmp")
        temporary.write_text(text)
        os.replace(temporary, target)  # readers never see half a file

    def deserialize(self, path: str | os.PathLike) -> None:
        """Define again every definition `serialize` wrote to `path`, in its order."""
        from mlirfuse.dtypes import DataType
        from mlirfuse.frontend.fusion_definition import FusionDefinition

        data = json.loads(Path(path).read_text())
        if data.get("format") != SERIALIZATION_FORMAT:
            raise FusionError(f"FusionCache.deserialize: {path} is not a serialized mlirfuse FusionCache")
        for entry in data["definitions"]:
            scope = {"FusionDefinition": FusionDefinition, "DataType": DataType}
            exec(entry["definition"], scope)  # noqa: S102 (the file this cache wrote)
            define = next(v for k, v in scope.items() if k.startswith("nvfuser_"))
            self._number = entry["number"]  # the number it had (numbers of left-out ones stay free)
            try:
                with FusionDefinition() as fd:
                    define(fd)
            except FusionError as e:
                self._number = None
                warnings.warn(f"FusionCache.deserialize: definition {entry['number']} not restored ({e})",
                              RuntimeWarning, stacklevel=2)

    @classmethod
    def reset(cls) -> None:
        cls.get()._ids.clear()
        cls.get()._definitions.clear()

    def num_fusions(self) -> int:
        return len(self._ids)

    def _register(self, fd: "FusionDefinition") -> int:
        key = fd._cache_key()
        if key not in self._ids:
            number = self._number if self._number is not None else max(self._definitions, default=-1) + 1
            self._number = None
            self._ids[key] = number
            self._definitions[number] = fd
        return self._ids[key]

    def _definition(self, number: int) -> "FusionDefinition":
        if number not in self._definitions:
            raise FusionError(f"FusionDefinition({number}): no definition of that number in the FusionCache "
                              f"({self.num_fusions()} definitions)")
        return self._definitions[number]


SERIALIZATION_FORMAT = "mlirfuse-fusion-cache-1"


def default_workspace() -> Path | None:
    """Where automatic serialization keeps the FusionCache: in the kernel cache's folder
    (`MLIRFUSE_CACHE_DIR`; None where that is off)."""
    from mlirfuse.cache import cache_dir

    folder = cache_dir()
    return None if folder is None else folder / "nvfuser_fusion_cache.json"


def _serialize_at_exit() -> None:
    workspace = default_workspace()
    if FusionCache._automatic and FusionCache._instance is not None and workspace is not None:
        try:
            FusionCache._instance.serialize(workspace)
        except (FusionError, OSError) as e:
            warnings.warn(f"FusionCache: not written to {workspace} ({e})", RuntimeWarning, stacklevel=1)


def enable_automatic_serialization() -> None:
    """nvFuser's: write the FusionCache to the default workspace when the process exits, and
    read it at the first `FusionCache.get()`."""
    if not FusionCache._automatic:
        atexit.register(_serialize_at_exit)
    FusionCache._automatic = True


def disable_automatic_serialization() -> None:
    FusionCache._automatic = False


class _ValueKind(type):
    """isinstance checks of nvFuser's value classes: a Tensor has dims or came from a tensor
    input; a Scalar is a define_scalar value or arithmetic on scalars alone."""

    def __instancecheck__(cls, value: Any) -> bool:
        if isinstance(value, ComplexTensor):
            value = value.re
        if isinstance(value, Deferred):
            return cls is TensorValue
        if not isinstance(value, Tensor):
            return False
        return (value.priority == SCALAR) == (cls is ScalarValue)


class TensorValue(metaclass=_ValueKind):
    """nvFuser's `Tensor`, for isinstance checks (mlirfuse.Tensor)."""


class ScalarValue(metaclass=_ValueKind):
    """nvFuser's `Scalar`, for isinstance checks (mlirfuse.Scalar)."""


def compute_contiguity(sizes: Sequence[int], strides: Sequence[int]) -> list[Any]:
    """nvFuser's `compute_contiguity(sizes, strides)`, in logical order: None for a broadcast
    dim (size 1 or stride 0), else whether the dim's stride is the next non-broadcast dim's
    stride times its size (1 for the last)."""
    if len(sizes) != len(strides):
        raise FusionError(f"compute_contiguity: {len(sizes)} sizes but {len(strides)} strides")
    contiguity: list[Any] = [None] * len(sizes)
    inner = None
    for d in reversed(range(len(sizes))):
        if sizes[d] == 1 or strides[d] == 0:
            continue
        contiguity[d] = strides[d] == (1 if inner is None else strides[inner] * sizes[inner])
        inner = d
    return contiguity


def compute_tensor_descriptor(sizes: Sequence[int], strides: Sequence[int]) -> tuple[list[Any], list[int]]:
    """nvFuser's `compute_tensor_descriptor(sizes, strides)`: (contiguity, stride_order).

    stride_order[d] ranks dim d's stride (0 the innermost); dims of stride 0 keep their own
    position in that order. Contiguity is listed in memory order (outermost first): None for
    a broadcast dim (size 1 or stride 0), else whether the dim's stride is the extent of the
    next non-broadcast dim inside it (1 for the innermost)."""
    if len(sizes) != len(strides):
        raise FusionError(f"compute_tensor_descriptor: {len(sizes)} sizes but {len(strides)} strides")
    if any(s < 0 for s in strides):
        raise FusionError(f"compute_tensor_descriptor: negative strides {list(strides)} are not supported")
    rank = len(sizes)
    order = sorted((d for d in range(rank) if strides[d] != 0), key=lambda d: -strides[d])  # stable
    for d in range(rank):
        if strides[d] == 0:
            order.insert(d, d)
    stride_order = [0] * rank
    for position, d in enumerate(order):
        stride_order[d] = rank - 1 - position
    dense = [d for d in order if sizes[d] != 1 and strides[d] != 0]
    contiguity: list[Any] = [None] * rank
    for position, d in enumerate(order):
        if d in dense:
            k = dense.index(d)
            inner = dense[k + 1] if k + 1 < len(dense) else None
            contiguity[position] = strides[d] == (1 if inner is None else strides[inner] * sizes[inner])
    return contiguity, stride_order
