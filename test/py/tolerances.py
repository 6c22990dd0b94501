"""Dtype-aware comparison used across the numerics tests."""

from __future__ import annotations

import ml_dtypes
import numpy as np

# Relative tolerance per dtype: a few units in the last place of the result type.
RTOL = {
    np.dtype(np.float64): 1e-12,
    np.dtype(np.float32): 4e-6,
    np.dtype(np.float16): 2e-3,
    np.dtype(ml_dtypes.bfloat16): 1.6e-2,
    np.dtype(ml_dtypes.float8_e4m3fn): 1.25e-1,  # one unit in the last place (3 mantissa bits)
    np.dtype(ml_dtypes.float8_e5m2): 2.5e-1,
}
_ROUNDED_ONCE = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn),
                 np.dtype(ml_dtypes.float8_e5m2)}


def tolerance(dtype: np.dtype, reduction_size: int = 1) -> float:
    rtol = RTOL.get(np.dtype(dtype), 0.0)
    if np.dtype(dtype) in _ROUNDED_ONCE:
        return rtol  # accumulated in float32, rounded once
    return rtol * max(1.0, np.sqrt(reduction_size))


def assert_close(got: np.ndarray, expected: np.ndarray, what: str = "", reduction_size: int = 1) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    rtol = tolerance(expected.dtype, reduction_size)
    if rtol == 0.0:
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    g, e = got.astype(np.float64), expected.astype(np.float64)
    scale = np.max(np.abs(e[np.isfinite(e)]), initial=1.0)
    np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol * scale * 1e-2 + rtol * 1e-3,
                               equal_nan=True, err_msg=what)
