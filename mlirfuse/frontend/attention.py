"""nvFuser's scaled dot-product attention ops, `sdpfa_fwd` and `sdpfa_bwd`, as compositions
of mlirfuse ops: the two matmuls of each are library calls, and the softmax (its masks and
dropout) between them is fused work.

    out, log_sumexp, seed, offset = fd.ops.sdpfa_fwd(q, k, v, dropout_p, is_causal, scale)
    grad_q, grad_k, grad_v = fd.ops.sdpfa_bwd(grad_out, q, k, v, out, log_sumexp,
                                              dropout_p, is_causal, seed, offset, scale)

q is [..., L, E], k [..., S, E], v [..., S, Ev]; the scores and the softmax are computed in
float32 (float64 for float64 inputs), as flash attention accumulates; `is_causal` masks the
scores above the diagonal (torch's top-left alignment); `scale` defaults to 1/sqrt(E);
log_sumexp is [..., L] in float32. Dropout draws from the definition's Philox stream, whose
seed and offset the forward returns so that the backward draws the same mask (its numbers are
mlirfuse's, not those of torch's flash kernel). The arguments may be numbers, runtime scalars
or None (no dropout, not causal, the default scale).
"""

from __future__ import annotations

import math
from typing import Any

from mlirfuse.dtypes import DataType
from mlirfuse.errors import FusionError
from mlirfuse.frontend import indexing as I
from mlirfuse.frontend import ops as O
from mlirfuse.frontend.graph import Tensor


def sdpfa_fwd(query: Tensor, key: Tensor, value: Tensor, dropout_p: Any = None, is_causal: Any = None,
              scale: Any = None, *, rng_seed: Any = None, rng_offset: Any = None) -> tuple[Tensor, ...]:
    """(output, log_sumexp, philox_seed, philox_offset) of softmax(q k^T scale + mask) v."""
    compute = _check("sdpfa_fwd", query, key, value)
    s = _scores(query, key, is_causal, scale, compute)
    lse = _logsumexp_rows(s)
    p = O.exp(O.sub(s, O.unsqueeze(lse, -1)))
    seed, offset = _philox(dropout_p, rng_seed, rng_offset)
    p = _dropout(p, dropout_p, seed, offset)
    out = O.cast(O.matmul(p, O.cast(value, compute)), query.dtype)
    return out, O.cast(lse, DataType.Float if compute is DataType.Float else compute), seed, offset


def sdpfa_bwd(grad_output: Tensor, query: Tensor, key: Tensor, value: Tensor, output: Tensor, log_sumexp: Tensor,
              dropout_p: Any = None, is_causal: Any = None, philox_seed: Any = None, philox_offset: Any = None,
              scale: Any = None) -> tuple[Tensor, Tensor, Tensor]:
    """(grad_query, grad_key, grad_value) of `sdpfa_fwd`, its probabilities recomputed from
    log_sumexp and its dropout mask from the seed and offset it returned."""
    compute = _check("sdpfa_bwd", query, key, value)
    s = _scores(query, key, is_causal, scale, compute)
    p = O.exp(O.sub(s, O.unsqueeze(O.cast(log_sumexp, compute), -1)))
    seed, offset = (philox_seed, philox_offset) if philox_seed is not None else (0, 0)
    kept = _dropout(p, dropout_p, seed, offset)
    go = O.cast(grad_output, compute)
    grad_v = O.matmul(_transposed(kept), go)
    grad_kept = O.matmul(go, _transposed(O.cast(value, compute)))
    grad_p = _dropout(grad_kept, dropout_p, seed, offset, mask_of=p)
    grad_s = O.mul(p, O.sub(grad_p, O.sum(O.mul(p, grad_p), [-1], keepdim=True)))
    factor = _scale(query, scale)
    grad_q = O.mul(O.matmul(grad_s, O.cast(key, compute)), factor)
    grad_k = O.mul(O.matmul(_transposed(grad_s), O.cast(query, compute)), factor)
    return O.cast(grad_q, query.dtype), O.cast(grad_k, key.dtype), O.cast(grad_v, value.dtype)


def _check(what: str, query: Tensor, key: Tensor, value: Tensor) -> DataType:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor) or t.ndim < 2 or not t.dtype.is_float:
            raise FusionError(f"{what}: {name} must be a floating-point tensor of rank >= 2, got {t!r}")
    return DataType.Double if query.dtype is DataType.Double else DataType.Float


def _transposed(x: Tensor) -> Tensor:
    dims = list(range(x.ndim))
    dims[-2], dims[-1] = dims[-1], dims[-2]
    return O.permute(x, dims)


def _scale(query: Tensor, scale: Any) -> Any:
    if scale is not None:
        return scale
    e = query.shape[-1]
    return 1.0 / math.sqrt(int(e))  # (a symbolic E asks for concrete sizes)


def _scores(query: Tensor, key: Tensor, is_causal: Any, scale: Any, compute: DataType) -> Tensor:
    """q k^T * scale in `compute`, -inf above the diagonal where causal."""
    s = O.mul(O.matmul(O.cast(query, compute), _transposed(O.cast(key, compute))), _scale(query, scale))
    if is_causal is None or is_causal is False:
        return s
    above = O.gt(I.iota_like(s, -1), I.iota_like(s, -2))
    if isinstance(is_causal, Tensor):
        above = O.logical_and(above, is_causal)
    return O.where(above, float("-inf"), s)


def _logsumexp_rows(s: Tensor) -> Tensor:
    m = O.max(s, [-1], True)
    m = O.where(O.isinf(m), 0.0, m)  # a fully masked row: -inf, not NaN
    return O.squeeze(O.add(O.log(O.sum(O.exp(O.sub(s, m)), [-1], True)), m), [s.ndim - 1])


def _philox(dropout_p: Any, seed: Any, offset: Any) -> tuple[Any, Any]:
    """The Philox seed and offset of the dropout (0-d int64 tensors; zeros without dropout)."""
    if _no_dropout(dropout_p) or seed is None:
        seed, offset = 0, 0
    return (O.as_tensor(O.cast(v, DataType.Int)) if isinstance(v, Tensor) else I.full([], v, DataType.Int)
            for v in (seed, offset))


def _no_dropout(dropout_p: Any) -> bool:
    return dropout_p is None or (not isinstance(dropout_p, Tensor) and float(dropout_p) == 0.0)


def _dropout(x: Tensor, dropout_p: Any, seed: Any, offset: Any, mask_of: Tensor | None = None) -> Tensor:
    """x with the entries dropped where the Philox numbers drawn for `mask_of` (x) fall below
    dropout_p, the others scaled by 1 / (1 - dropout_p)."""
    if _no_dropout(dropout_p):
        return x
    kept = O.ge(O.rand_like(x if mask_of is None else mask_of, seed, offset), dropout_p)
    return O.where(kept, O.div(x, O.sub(1.0, dropout_p)), 0.0)
