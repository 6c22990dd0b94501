"""What the caller passed: host arrays, GPU arrays (torch, CuPy, CUDA array interface,
DLPack) or Python scalars, and how to hand results back in the same kind."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from mlirfuse.dtypes import DataType, to_dtype
from mlirfuse.errors import FusionError

_KDLCUDA = 2  # DLPack device type of CUDA memory


@dataclass
class Arg:
    """One argument, normalized: `value` is a numpy array (host), a torch tensor (GPU or
    torch CPU), or a Python scalar."""

    kind: str  # "scalar" | "host" | "device"
    value: Any
    dtype: DataType
    shape: tuple[int, ...]
    contiguous: bool
    device: int | None = None
    origin: str = "numpy"  # numpy | torch | cupy | foreign
    # Not contiguous, but a permutation of a dense layout: its dims from outermost to innermost
    # in memory (`value` permuted so is contiguous, the same memory); None otherwise.
    order: tuple[int, ...] | None = None


def _torch() -> Any:
    return sys.modules.get("torch")


def classify(value: Any) -> Arg:
    arg = _classify(value)
    if arg.dtype.is_complex:
        raise FusionError(f"unsupported dtype {arg.dtype.value}: complex tensors are offered by FusionDefinition "
                          "only (as pairs of real tensors)")
    return arg


def _classify(value: Any) -> Arg:
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return Arg("scalar", value, _scalar_dtype(value), (), True)
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        if value.requires_grad:
            value = value.detach()
        dt = to_dtype(value.dtype)
        contiguous = value.is_contiguous()
        order = None if contiguous else dense_order(value.shape, value.stride())
        if value.is_cuda:
            return Arg("device", value, dt, tuple(value.shape), contiguous, value.device.index, "torch", order)
        if value.device.type != "cpu":
            raise FusionError(f"a torch tensor on device '{value.device}': mlirfuse runs CPU and CUDA tensors")
        return Arg("host", _torch_cpu_to_numpy(value, torch), dt, tuple(value.shape), contiguous,
                   origin="torch", order=order)
    if isinstance(value, np.ndarray):
        if not value.dtype.isnative:  # big-endian data on a little-endian host: its values, natively
            value = value.astype(value.dtype.newbyteorder("="))
        contiguous = value.flags.c_contiguous
        order = None
        if not contiguous and all(s % value.itemsize == 0 for s in value.strides):
            order = dense_order(value.shape, [s // value.itemsize for s in value.strides])
        return Arg("host", value, to_dtype(value.dtype), value.shape, contiguous, order=order)
    if hasattr(value, "__cuda_array_interface__") or _dlpack_on_cuda(value):
        torch = _import_torch()
        if torch is None:
            raise FusionError("GPU arrays other than torch tensors are passed through torch: "
                              "install torch (pip install 'mlirfuse[torch]')")
        origin = "cupy" if type(value).__module__.startswith("cupy") else "foreign"
        try:
            t = torch.as_tensor(value) if hasattr(value, "__cuda_array_interface__") else torch.from_dlpack(value)
        except (RuntimeError, AssertionError, TypeError, ValueError) as e:
            raise FusionError(f"a GPU array ({type(value).__name__}) that torch cannot take: {e}") from None
        arg = _classify(t)
        arg.origin = origin
        return arg
    if isinstance(value, (complex, np.complexfloating)):
        raise FusionError(f"unsupported argument: a complex scalar {value!r} (complex scalars are taken only by "
                          "FusionDefinition scalar inputs of a complex dtype)")
    if isinstance(value, (list, tuple)) or hasattr(value, "__array__"):
        return classify(np.asarray(value))
    raise FusionError(f"unsupported argument of type {type(value).__name__}: expected an array "
                      "(numpy, torch, CuPy, CUDA array interface, DLPack) or a Python scalar")


def dense_order(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...] | None:
    """The dims of a tensor laid out densely in some order (a permuted view of a contiguous
    tensor: attention's [B, S, H, D] seen as [B, H, S, D]), from outermost to innermost in
    memory; None where the layout is not such a permutation, or is row-major already. A
    size-1 dim (any stride serves it) stays right after the dim before it."""
    n = len(shape)
    if 0 in shape:
        return None
    keys, previous = [], None
    for d in range(n):
        if shape[d] != 1:
            previous = strides[d]
        keys.append((-(strides[d] if shape[d] != 1 else (previous if previous is not None else float("inf"))), d))
    order = tuple(d for _, d in sorted(keys))
    expected = 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != expected:
            return None
        expected *= shape[d]
    return None if order == tuple(range(n)) else order


def _import_torch() -> Any:
    """torch, imported if installed (a GPU array's first call may come before anything
    imported it); None where it is not installed."""
    torch = _torch()
    if torch is None:
        try:
            import torch  # noqa: F811
        except ImportError:
            return None
    return torch


# dtypes numpy has only through ml_dtypes, which torch's numpy bridge does not know: their
# tensors are seen through integers of their width.
_BITS = {DataType.BFloat16: np.dtype(np.int16), DataType.Float8_e4m3fn: np.dtype(np.uint8),
         DataType.Float8_e5m2: np.dtype(np.uint8)}


def _torch_cpu_to_numpy(t: Any, torch: Any) -> np.ndarray:
    """A zero-copy numpy view of a CPU tensor (bfloat16 and float8 through their bits),
    through the array interface: `Tensor.numpy()` would fix the size of the tensor's storage
    for good (FSDP2 then cannot free a parameter that went through a fusion)."""
    dt = to_dtype(t.dtype)
    if t.numel() == 0:
        return np.empty(tuple(t.shape), dt.np)
    view = np.asarray(_TorchMemory(t, _BITS.get(dt, dt.np)))
    return view.view(dt.np) if dt in _BITS else view


def numpy_to_torch(a: np.ndarray) -> Any:
    """The inverse: a torch CPU tensor sharing `a`'s memory; for `torch_empty`'s arrays, the
    tensor torch allocated, so that the result's storage is torch's own (resizable: FSDP2
    frees parameters' storage by resizing it; `Tensor.numpy()` would make it fixed)."""
    torch = _torch()
    owner = a.base
    while isinstance(owner, np.ndarray):
        owner = owner.base
    # A C-ordered array over all of a tensor's memory is that tensor only where the tensor is
    # C-ordered too: over a permuted tensor's memory it is the tensor's permutation.
    if isinstance(owner, _TorchMemory) and a.flags.c_contiguous and a.ctypes.data == owner.tensor.data_ptr() \
            and a.nbytes == owner.tensor.numel() * owner.tensor.element_size() and owner.tensor.is_contiguous():
        tensor = owner.tensor  # itself where the shapes agree: a view would be a view to autograd
        return tensor if tuple(tensor.shape) == a.shape else tensor.view(a.shape)
    dt = to_dtype(a.dtype)
    if dt in _BITS:
        return torch.from_numpy(a.view(_BITS[dt])).view(getattr(torch, dt.value))
    return torch.from_numpy(a)


class _TorchMemory:
    """A CPU tensor's memory seen by numpy through the array interface (not `.numpy()`,
    which would fix the storage's size); numpy arrays over it keep it (and the tensor) alive."""

    def __init__(self, tensor: Any, dtype: np.dtype):
        self.tensor = tensor
        self.__array_interface__ = {"shape": tuple(tensor.shape), "typestr": dtype.str,
                                    "data": (tensor.data_ptr(), False), "version": 3,
                                    "strides": tuple(s * dtype.itemsize for s in tensor.stride())}


def torch_empty(shape: tuple[int, ...], dtype: DataType) -> np.ndarray:
    """An uninitialized numpy array in memory torch allocated (a CPU tensor's, its storage
    left resizable), for results handed back to torch by `numpy_to_torch`."""
    torch = _torch()
    tensor = torch.empty(shape, dtype=getattr(torch, dtype.value))
    if dtype in _BITS:  # numpy's bf16 and float8 are ml_dtypes': seen through their bits
        return np.asarray(_TorchMemory(tensor, _BITS[dtype])).view(dtype.np)
    return np.asarray(_TorchMemory(tensor, np.dtype(dtype.np)))


def classify_all(values: Any) -> list[Arg]:
    """classify() each input; errors name the input's position."""
    args = []
    for i, v in enumerate(values):
        try:
            args.append(classify(v))
        except FusionError as e:
            raise FusionError(f"input {i}: {e}") from None
    return args


def _dlpack_on_cuda(value: Any) -> bool:
    if not hasattr(value, "__dlpack_device__"):
        return False
    try:
        return value.__dlpack_device__()[0] == _KDLCUDA
    except Exception:  # noqa: BLE001 - a foreign object's method
        return False


def _scalar_dtype(value: Any) -> DataType:
    if isinstance(value, (bool, np.bool_)):
        return DataType.Bool
    if isinstance(value, (int, np.integer)):
        return DataType.Int
    return DataType.Double


def placement(args: list[Arg]) -> tuple[str, int | None]:
    """('host', None) or ('device', index); mixing them, or two devices, is an error."""
    devices = {a.device for a in args if a.kind == "device"}
    hosts = [i for i, a in enumerate(args) if a.kind == "host"]
    if devices and hosts:
        raise FusionError(f"inputs mix host arrays (positions {hosts}) and GPU arrays; "
                          "move them to one place first")
    if len(devices) > 1:
        raise FusionError(f"inputs live on several GPUs {sorted(devices)}; mlirfuse runs a fusion on one")
    return ("device", devices.pop()) if devices else ("host", None)


def wrap_output(t: Any, origin: str) -> Any:
    """Hand a torch result back as the caller's array type."""
    if origin == "cupy":
        import cupy  # type: ignore[import-not-found]

        return cupy.asarray(t)
    return t
