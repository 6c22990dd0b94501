"""NumPy reference for mlirfuse's counter-based random numbers (Philox4x32-10).

This is the ground truth the compiled kernels (CPU and GPU) must match bit for
bit.  Element ``i`` (row-major linear index) with seed ``s`` and offset ``o``
uses

    counter = (lo32(i // 4), hi32(i // 4), lo32(o), hi32(o))
    key     = (lo32(s), hi32(s))

and takes word ``i % 4`` of ``philox4x32(counter, key)``.
"""

from __future__ import annotations

import numpy as np

PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10

_MASK32 = np.uint64(0xFFFFFFFF)


def _u32(x: np.ndarray | int) -> np.ndarray:
    """Reduce to the low 32 bits, as uint64 (the working type below)."""
    return np.asarray(x, dtype=np.uint64) & _MASK32


def philox4x32(
    counter: tuple[np.ndarray | int, ...],
    key: tuple[np.ndarray | int, int],
    rounds: int = PHILOX_ROUNDS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Philox4x32-``rounds`` on broadcastable arrays; returns four uint32 arrays.

    Words are held in uint64 so that the 32x32 -> 64-bit products are exact.
    """
    c0, c1, c2, c3 = (_u32(c) for c in counter)
    k0, k1 = (_u32(k) for k in key)
    m0, m1 = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1)
    w0, w1 = np.uint64(PHILOX_W0), np.uint64(PHILOX_W1)
    for r in range(rounds):
        if r > 0:  # bump between rounds: key for round r is k + r*W
            k0 = (k0 + w0) & _MASK32
            k1 = (k1 + w1) & _MASK32
        p0 = m0 * c0
        p1 = m1 * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))  # type: ignore[return-value]


def philox_words(indices: np.ndarray, seed: int, offset: int) -> np.ndarray:
    """Random uint32 word for each linear element index (seed/offset: int64 or uint64)."""
    idx = np.asarray(indices, dtype=np.uint64)
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    o = int(offset) & 0xFFFFFFFFFFFFFFFF
    block = idx >> np.uint64(2)
    counter = (block & _MASK32, block >> np.uint64(32), o & 0xFFFFFFFF, o >> 32)
    words = np.stack(philox4x32(counter, (s & 0xFFFFFFFF, s >> 32)))
    lane = (idx & np.uint64(3)).astype(np.intp)
    return np.take_along_axis(words.reshape(4, -1), lane.reshape(1, -1), axis=0).reshape(idx.shape)


def uniform(
    shape: tuple[int, ...],
    seed: int,
    offset: int,
    minval: float = 0.0,
    maxval: float = 1.0,
    dtype: np.dtype | type = np.float32,
) -> np.ndarray:
    """Uniform [minval, maxval) array of ``shape`` as the compiled kernels produce it.

    float32: ``(w >> 8) * 2**-24``; float64: ``w * 2**-32``; then
    ``minval + u * (maxval - minval)`` in that type.  float16/bfloat16 are
    computed in float32 and rounded at the end.  A value equal to maxval rounded to
    the result's type is minval instead (torch's rule), so values stay below maxval.
    """
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    w = philox_words(np.arange(n, dtype=np.uint64), seed, offset)
    compute = np.float64 if dtype == np.float64 else np.float32
    if compute == np.float64:
        u = w.astype(np.float64) * np.float64(2.0**-32)
    else:
        u = (w >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
    lo, hi = compute(minval), compute(maxval)
    out = (lo + u * (hi - lo)).astype(dtype)
    # [minval, maxval) in the result's type: a value that rounds to maxval is minval (torch's rule)
    out = np.where(out == np.asarray(hi).astype(dtype), np.asarray(lo).astype(dtype), out)
    return out.reshape(shape)
