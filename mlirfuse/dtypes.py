"""Element types: names, numpy/MLIR spellings and PyTorch's type promotion."""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from mlirfuse.errors import FusionError


class DataType(enum.Enum):
    """Element types, named as nvFuser's `DataType` names them."""

    Float = "float32"
    Double = "float64"
    Half = "float16"
    BFloat16 = "bfloat16"
    Int = "int64"
    Int32 = "int32"
    Bool = "bool"
    Float8_e4m3fn = "float8_e4m3fn"  # storage types: computed in float32, converted on load and store
    Float8_e5m2 = "float8_e5m2"
    # Complex values exist in FusionDefinition only, as pairs of real tensors (frontend/complex_ops.py).
    ComplexFloat = "complex64"
    ComplexDouble = "complex128"
    Null = "null"  # nvFuser's "no dtype given": means the op's default

    @property
    def np(self) -> np.dtype:
        return _NUMPY[self]

    @property
    def mlir(self) -> str:
        if self not in _MLIR:
            raise FusionError(f"{self.value} has no element type in fusion IR (complex values are pairs of real "
                              "tensors, in FusionDefinition only)")
        return _MLIR[self]

    @property
    def is_float(self) -> bool:
        return self in (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16) or self.is_float8

    @property
    def is_complex(self) -> bool:
        return self in (DataType.ComplexFloat, DataType.ComplexDouble)

    @property
    def is_float8(self) -> bool:
        return self in (DataType.Float8_e4m3fn, DataType.Float8_e5m2)

    @property
    def is_int(self) -> bool:
        return self in (DataType.Int, DataType.Int32)

    @property
    def is_bool(self) -> bool:
        return self is DataType.Bool

    @property
    def is_low_precision(self) -> bool:
        """16- and 8-bit floats: computed in float32, rounded on output."""
        return self in (DataType.Half, DataType.BFloat16) or self.is_float8

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    def __repr__(self) -> str:
        return f"DataType.{self.name}"


_NUMPY = {
    DataType.Float: np.dtype(np.float32),
    DataType.Double: np.dtype(np.float64),
    DataType.Half: np.dtype(np.float16),
    DataType.BFloat16: np.dtype(ml_dtypes.bfloat16),
    DataType.Int: np.dtype(np.int64),
    DataType.Int32: np.dtype(np.int32),
    DataType.Bool: np.dtype(np.bool_),
    DataType.Float8_e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn),
    DataType.Float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
    DataType.ComplexFloat: np.dtype(np.complex64),
    DataType.ComplexDouble: np.dtype(np.complex128),
}
_MLIR = {
    DataType.Float: "f32",
    DataType.Double: "f64",
    DataType.Half: "f16",
    DataType.BFloat16: "bf16",
    DataType.Int: "i64",
    DataType.Int32: "i32",
    DataType.Bool: "i1",
    DataType.Float8_e4m3fn: "f8E4M3FN",
    DataType.Float8_e5m2: "f8E5M2",
}
_FROM_MLIR = {v: k for k, v in _MLIR.items()}
_BY_NUMPY = {v: k for k, v in _NUMPY.items()}
_ALIASES = {
    "float": DataType.Float, "float32": DataType.Float, "f32": DataType.Float,
    "double": DataType.Double, "float64": DataType.Double, "f64": DataType.Double,
    "half": DataType.Half, "float16": DataType.Half, "f16": DataType.Half,
    "bfloat16": DataType.BFloat16, "bf16": DataType.BFloat16,
    "int": DataType.Int, "int64": DataType.Int, "long": DataType.Int, "i64": DataType.Int,
    "int32": DataType.Int32, "i32": DataType.Int32,
    "bool": DataType.Bool, "i1": DataType.Bool,
    "float8_e4m3fn": DataType.Float8_e4m3fn, "f8e4m3fn": DataType.Float8_e4m3fn,
    "float8_e5m2": DataType.Float8_e5m2, "f8e5m2": DataType.Float8_e5m2,
    "complex64": DataType.ComplexFloat, "cfloat": DataType.ComplexFloat,
    "complex128": DataType.ComplexDouble, "cdouble": DataType.ComplexDouble,
}


def to_dtype(value: object) -> DataType:
    """Accept a DataType, a name ('float32', 'bf16'), a numpy dtype, or a torch dtype."""
    if value is None:  # np.dtype(None) would read it as float64
        raise FusionError("dtype None: give a DataType, a name such as 'float32', or a numpy/torch dtype")
    fast = _BY_NUMPY.get(value) if isinstance(value, np.dtype) else None
    if fast is not None:
        return fast
    if isinstance(value, DataType) and value is not DataType.Null:
        return value
    if isinstance(value, str) and value.lower() in _ALIASES:
        return _ALIASES[value.lower()]
    text = str(value)
    if text.startswith("torch."):
        name = text[len("torch."):]
        if name in _ALIASES:
            return _ALIASES[name]
    try:
        npd = np.dtype(value)  # type: ignore[arg-type]
    except TypeError:
        npd = None
    if npd is not None:
        for dt, candidate in _NUMPY.items():
            if candidate == npd:
                return dt
    raise FusionError(
        f"unsupported dtype {value!r}: mlirfuse supports "
        + ", ".join(d.value for d in DataType if d is not DataType.Null)
    )


def from_mlir(type_text: str) -> DataType:
    """DataType of an MLIR element type spelling ('f32', 'i1', ...)."""
    if type_text not in _FROM_MLIR:
        raise FusionError(f"unsupported MLIR element type {type_text}")
    return _FROM_MLIR[type_text]


# Category order used by promotion: bool < integer < floating point.
def _category(dt: DataType) -> int:
    return 0 if dt.is_bool else 1 if dt.is_int else 2


_FLOAT_ORDER = [DataType.Half, DataType.BFloat16, DataType.Float, DataType.Double]
_INT_ORDER = [DataType.Int32, DataType.Int]


def promote_pair(a: DataType, b: DataType) -> DataType:
    """torch.promote_types for the supported dtypes."""
    if a is b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if a.is_float:
        if a.is_float8 or b.is_float8:  # as torch: no float8 promotion
            raise FusionError(f"no type promotion between {a.value} and {b.value}: cast one of them first")
        if {a, b} == {DataType.Half, DataType.BFloat16}:
            return DataType.Float
        return max(a, b, key=_FLOAT_ORDER.index)
    return max(a, b, key=_INT_ORDER.index)


# float8_e4m3fn has no infinity: conversions saturate to its largest finite value (448), as
# nvFuser (PTX's cvt.satfinite) and torch 2.13 do (torch 2.11 and ml_dtypes give NaN);
# float8_e5m2 overflows to inf.
FLOAT8_E4M3FN_MAX = 448.0


def to_storage(values: np.ndarray, dt: DataType) -> np.ndarray:
    """numpy values converted to dt as the backends convert them (float8 through float32,
    float8_e4m3fn saturating)."""
    if not dt.is_float8 or values.dtype == dt.np:
        return values.astype(dt.np, copy=False)
    f32 = values.astype(np.float32)
    if dt is DataType.Float8_e4m3fn:
        f32 = np.where(np.isnan(f32), f32, np.clip(f32, -FLOAT8_E4M3FN_MAX, FLOAT8_E4M3FN_MAX))
    return f32.astype(dt.np)


DEFAULT_FLOAT = DataType.Float
DEFAULT_INT = DataType.Int


def _combine_categories(higher: DataType | None, lower: DataType | None) -> DataType | None:
    """torch's combine_categories: a lower-priority dtype only wins a higher category."""
    if higher is None:
        return lower
    if lower is None or higher.is_float:
        return higher
    if higher.is_bool or lower.is_float:
        return promote_pair(higher, lower)
    return higher


def result_type(operands: list[tuple[DataType, int]], typed_scalars: bool = False) -> DataType:
    """PyTorch's result type for operands given as (dtype, priority).

    priority 2: a tensor with dimensions; 1: a zero-dim tensor; 0: a Python scalar
    (dtype Double, Int or Bool). As in torch, a Python float counts as the default float
    (float32), and a lower-priority operand decides the result only when its category
    (bool < int < float) is higher than that of every higher-priority operand. With
    `typed_scalars` (nvFuser's scalars carry their dtype), scalars alone promote as they are.
    """
    if typed_scalars and operands and all(p == 0 for _, p in operands):
        result_dt = operands[0][0]
        for other, _ in operands[1:]:
            result_dt = promote_pair(result_dt, other)
        return result_dt
    groups: list[DataType | None] = []
    for priority in (2, 1, 0):
        dt: DataType | None = None
        for other, p in operands:
            if p != priority:
                continue
            if priority == 0 and other.is_float:
                other = DEFAULT_FLOAT
            dt = other if dt is None else promote_pair(dt, other)
        groups.append(dt)
    result = _combine_categories(groups[0], _combine_categories(groups[1], groups[2]))
    assert result is not None, "result_type of no operands"
    return result
