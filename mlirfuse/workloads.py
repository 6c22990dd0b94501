"""The reference workloads (../shared/reference): mlirfuse definitions and numpy baselines.

Used by the main example, the benchmarks and the tests. Each workload has a function for
`mlirfuse.jit` written with numpy-style operators, a numpy version (op by op, as a user
would write it), input makers, and a full-size and a small shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from mlirfuse import ops
from mlirfuse.dtypes import DataType
from mlirfuse.frontend.fusion_definition import FusionDefinition
from mlirfuse.reference_philox import uniform as philox_uniform

DROPOUT_P = 0.1
EPS = 1e-12
SEED = 1234


def relu_add(x):
    return ops.relu(x + 1.0)


def relu_add_np(x):
    return np.maximum(x + np.float32(1.0), np.float32(0.0))


def _dropout(x, p: float, seed):
    keep = ops.rand_like(x, seed=seed) >= p
    return ops.where(keep, x * (1.0 / (1.0 - p)), 0.0)


def _dropout_np(x: np.ndarray, p: float, rand: np.ndarray) -> np.ndarray:
    return np.where(rand >= p, x * np.float32(1.0 / (1.0 - p)), np.float32(0.0))


def bias_dropout_add_layernorm(input1, input2, weight, bias1, bias2, seed):
    """The tutorial's primitive definition (normalization over the last axis)."""
    bias1_out = input1 + bias1
    norm_input = _dropout(bias1_out, DROPOUT_P, seed) + input2
    mean = norm_input.mean(2, keepdim=True)
    diff = norm_input - mean
    var = (diff * diff).mean(2, keepdim=True)
    return weight * ((norm_input - mean) / ops.sqrt(var + EPS)) + bias2


def bias_dropout_add_layernorm_np(input1, input2, weight, bias1, bias2, rand):
    norm_input = _dropout_np(input1 + bias1, DROPOUT_P, rand) + input2
    mean = norm_input.mean(2, keepdims=True)
    diff = norm_input - mean
    var = (diff * diff).mean(2, keepdims=True)
    return weight * ((norm_input - mean) / np.sqrt(var + np.float32(EPS))) + bias2


def bias_dropout_add_rmsnorm(input1, input2, weight, bias1, seed):
    norm_input = _dropout(input1 + bias1, DROPOUT_P, seed) + input2
    ms = (norm_input * norm_input).mean(2, keepdim=True)
    return weight * (norm_input * ops.rsqrt(ms + EPS))


def bias_dropout_add_rmsnorm_np(input1, input2, weight, bias1, rand):
    norm_input = _dropout_np(input1 + bias1, DROPOUT_P, rand) + input2
    ms = (norm_input * norm_input).mean(2, keepdims=True)
    return weight * (norm_input / np.sqrt(ms + np.float32(EPS)))


def gelu_bookend(x):
    """GELU (erf form) between two bookend reshapes, from the bookend-view study."""
    n, h = x.shape
    t = ops.reshape(x, [64, n // 64, h])
    y = t * 0.5 * (ops.erf(t * 0.7071067811865476) + 1.0)
    return ops.reshape(y, [n, h])


def _erf_np(x: np.ndarray) -> np.ndarray:
    # numpy has no erf; Abramowitz-Stegun 7.1.26 is far from exact, so use math.erf.
    return np.vectorize(math.erf, otypes=[np.float32])(x)


def gelu_bookend_np(x):
    n, h = x.shape
    t = x.reshape(64, n // 64, h)
    y = t * np.float32(0.5) * (_erf_np(t * np.float32(0.7071067811865476)) + np.float32(1.0))
    return y.reshape(n, h)


def gelu_backward_definition() -> FusionDefinition:
    """nvFuser issue 785's GELU-backward + bias-gradient definition, as written there."""
    with FusionDefinition() as fd:
        S0 = fd.define_scalar(None, dtype=DataType.Double)
        S1 = fd.define_scalar(None, dtype=DataType.Double)
        S2 = fd.define_scalar(None, dtype=DataType.Double)
        S3 = fd.define_scalar(None, dtype=DataType.Double)
        T4 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
        T5 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
        T6 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
        S7 = fd.define_scalar(0.500000, dtype=DataType.Double)
        T8 = fd.ops.mul(S7, T6)
        S9 = fd.define_scalar(3.00000, dtype=DataType.Double)
        T10 = fd.ops.pow(T6, S9)
        S11 = fd.define_scalar(0.0447150, dtype=DataType.Double)
        T12 = fd.ops.mul(S11, T10)
        T13 = fd.ops.add(T6, T12)
        S14 = fd.define_scalar(0.797885, dtype=DataType.Double)
        T15 = fd.ops.mul(S14, T13)
        T16 = fd.ops.tanh(T15)
        S17 = fd.define_scalar(1.00000, dtype=DataType.Double)
        T18 = fd.ops.add(S17, T16)
        T19 = fd.ops.sum(T4, axes=[0, 1], keepdim=False, dtype=DataType.Null)
        T20 = fd.ops.mul(T5, T18)
        T21 = fd.ops.mul(T5, T8)
        S22 = fd.define_scalar(1.00000, dtype=DataType.Double)
        T23 = fd.ops.mul(S22, T21)
        T24 = fd.ops.mul(T16, T16)
        S25 = fd.define_scalar(1.00000, dtype=DataType.Double)
        T26 = fd.ops.sub(S25, T24)
        T27 = fd.ops.mul(T23, T26)
        T28 = fd.ops.mul(T27, S3)
        S29 = fd.define_scalar(1.00000, dtype=DataType.Double)
        T30 = fd.ops.mul(S29, T28)
        T31 = fd.ops.mul(T30, S2)
        T32 = fd.ops.mul(T31, S1)
        S33 = fd.define_scalar(2.00000, dtype=DataType.Double)
        T34 = fd.ops.pow(T6, S33)
        T35 = fd.ops.mul(T32, T34)
        T36 = fd.ops.add(T30, T35)
        T37 = fd.ops.mul(T20, S0)
        T38 = fd.ops.add(T36, T37)
        fd.add_output(T19)
        fd.add_output(T38)
    return fd


def transformer_block(x, w1, b1, w2, b2, gamma, beta, seed):
    """A transformer MLP block: linear -> bias -> GELU -> linear -> dropout -> residual add ->
    LayerNorm. The linears run in a library (numpy/torch); the rest fuses around them."""
    h = ops.linear(x, w1) + b1
    h = 0.5 * h * (1.0 + ops.erf(h * (1.0 / math.sqrt(2.0))))
    y = _dropout(ops.linear(h, w2, b2), DROPOUT_P, seed) + x
    mean = y.mean(-1, keepdim=True)
    d = y - mean
    return d * ops.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * gamma + beta


def transformer_block_np(x, w1, b1, w2, b2, gamma, beta, rand):
    h = np.matmul(x, w1.T) + b1
    h = np.float32(0.5) * h * (np.float32(1.0) + _erf_np(h / np.float32(math.sqrt(2.0))))
    y = _dropout_np(np.matmul(h, w2.T) + b2, DROPOUT_P, rand) + x
    d = y - y.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + np.float32(1e-5)) * gamma + beta


def _transformer_inputs(shape, rng):
    h = shape[-1]
    return [_f32(rng, *shape), _f32(rng, 4 * h, h) / np.float32(math.sqrt(h)), _f32(rng, 4 * h),
            _f32(rng, h, 4 * h) / np.float32(math.sqrt(4 * h)), _f32(rng, h), _f32(rng, h), _f32(rng, h), SEED]


def _transformer_mask(inputs: list[Any]) -> list[Any]:
    return inputs[:-1] + [philox_uniform(inputs[0].shape, inputs[-1], 0, 0.0, 1.0, np.float32)]


def gelu_backward_np(s0, s1, s2, s3, t4, t5, t6):
    f = np.float32
    t16 = np.tanh(f(0.797885) * (t6 + f(0.044715) * t6 ** 3))
    t30 = t5 * (f(0.5) * t6) * (1 - t16 * t16) * f(s3)
    t36 = t30 + t30 * f(s2) * f(s1) * t6 ** 2
    return [t4.sum((0, 1)), t36 + t5 * (1 + t16) * f(s0)]


@dataclass
class Workload:
    name: str
    shape: tuple[int, ...]
    small: tuple[int, ...]
    make_inputs: Callable[[tuple[int, ...], np.random.Generator], list[Any]]
    numpy_fn: Callable[..., Any]
    jit_fn: Callable[..., Any] | None = None
    definition: Callable[[], FusionDefinition] | None = None
    numpy_inputs: Callable[[list[Any]], list[Any]] | None = None  # e.g. seed -> random mask

    def numpy_args(self, inputs: list[Any]) -> list[Any]:
        return self.numpy_inputs(inputs) if self.numpy_inputs else inputs


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def _norm_inputs(with_bias2: bool):
    def make(shape, rng):
        h = shape[-1]
        ins = [_f32(rng, *shape), rng.random(shape, dtype=np.float32), _f32(rng, h), _f32(rng, h)]
        if with_bias2:
            ins.append(_f32(rng, h))
        return ins + [SEED]
    return make


def _philox_mask(inputs: list[Any]) -> list[Any]:
    """numpy gets the same random numbers mlirfuse draws (bit-identical Philox stream)."""
    shape = inputs[0].shape
    return inputs[:-1] + [philox_uniform(shape, inputs[-1], 0, 0.0, 1.0, np.float32)]


WORKLOADS = [
    Workload("relu(x+1)", (2, 32, 128, 512), (2, 3, 4, 5), lambda s, r: [_f32(r, *s)],
             relu_add_np, jit_fn=relu_add),
    Workload("bias-dropout-add-LayerNorm", (64, 128, 1024), (2, 3, 64), _norm_inputs(True),
             bias_dropout_add_layernorm_np, jit_fn=bias_dropout_add_layernorm, numpy_inputs=_philox_mask),
    Workload("bias-dropout-add-RMSNorm", (64, 128, 1024), (2, 3, 64), _norm_inputs(False),
             bias_dropout_add_rmsnorm_np, jit_fn=bias_dropout_add_rmsnorm, numpy_inputs=_philox_mask),
    Workload("GELU-backward+bias-grad", (16, 512, 4096), (2, 3, 8),
             lambda s, r: [0.5, 0.3, 0.2, 0.1] + [_f32(r, *s) for _ in range(3)],
             gelu_backward_np, definition=gelu_backward_definition),
    Workload("GELU between bookend views", (8192, 3072), (128, 48), lambda s, r: [_f32(r, *s)],
             gelu_bookend_np, jit_fn=gelu_bookend),
    Workload("transformer MLP block (2 linears)", (8, 128, 1024), (2, 5, 16), _transformer_inputs,
             transformer_block_np, jit_fn=transformer_block, numpy_inputs=_transformer_mask),
]
