"""nvFuser's `pytorch_utils` names, for programs written against nvFuser."""

from __future__ import annotations

from typing import Any

from mlirfuse.dtypes import DataType, to_dtype


def torch_dtype_to_nvfuser_dtype(dtype: Any) -> DataType:
    """A torch dtype (or Python type: int, float, bool, complex) as a DataType."""
    python = {bool: DataType.Bool, int: DataType.Int, float: DataType.Double, complex: DataType.ComplexDouble}
    return python[dtype] if dtype in python else to_dtype(dtype)


def python_scalar_to_nvfuser_dtype(value: Any) -> DataType:
    return torch_dtype_to_nvfuser_dtype(type(value))
