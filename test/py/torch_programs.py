"""Random small torch programs for differential testing of the torch.compile backend.

A program is a list of steps over a pool of values (its inputs first): pointwise chains,
broadcasts, reductions over random axes, views, permutes, slices and cat between them, casts
between dtypes, softmax / layer_norm, matmuls (library calls between the fused groups, their
operands and results through views; padded to aligned sizes where the check asks), and
indexing: pads, selects, splits, rotate_half,
gathers and index_selects (indices made from arange in the program), argmax, cross-entropy
with ignored targets. Each step is drawn through a `Draw` (hypothesis's
`data.draw` in pytest, so failures shrink; a seeded `random.Random` in the 10,000-program
script) and kept only if eager torch accepts it, so every program is valid torch code.

`check(program)` runs it through `torch.compile(backend="mlirfuse")` and eagerly, forward and
backward (gradients of the inputs that require grad), and raises AssertionError on a mismatch.
"""

from __future__ import annotations

import contextlib
import functools
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

DTYPES = (torch.float32, torch.float64, torch.bfloat16)
TOLERANCE = {torch.float64: 1e-9, torch.float32: 2e-4, torch.bfloat16: 4e-2, torch.float16: 4e-3}


class Draw:
    """The choices a generator makes: hypothesis's `data.draw` or a seeded Random."""

    def __init__(self, data: Any = None, rng: random.Random | None = None):
        self.data, self.rng = data, rng

    def int(self, lo: int, hi: int) -> int:
        if self.data is not None:
            from hypothesis import strategies as st
            return self.data.draw(st.integers(lo, hi))
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.int(0, len(options) - 1)]

    def bool(self) -> bool:
        return self.int(0, 1) == 1


UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "exp": lambda x: torch.exp(x.clamp(-4, 4)), "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "abs": torch.abs, "neg": torch.neg, "sin": torch.sin, "cos": torch.cos,
    "sqrt": lambda x: torch.sqrt(x.abs() + 0.5), "log": lambda x: torch.log(x.abs() + 0.5),
    "rsqrt": lambda x: torch.rsqrt(x * x + 1.0), "gelu": F.gelu, "silu": F.silu, "square": lambda x: x * x,
    "scale": lambda x: x * 2.5 - 1.0, "pow3": lambda x: x ** 3, "erf": torch.erf,
}
BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": lambda x, y: x / (y.abs() + 0.5),
    "maximum": torch.maximum, "minimum": torch.minimum, "where": lambda x, y: torch.where(x > y, x, y * 0.5),
    "masked": lambda x, y: x.masked_fill(y > 0.3, 0.0),
}



def _keep_mask(x: torch.Tensor, d: int) -> torch.Tensor:
    """A mask along dim `d` made from arange, as a model's padding or dropout mask is: every
    third index dropped."""
    shape = [1] * x.dim()
    shape[d] = x.shape[d]
    return (torch.arange(x.shape[d], device=x.device) % 3 != 1).view(shape)


# Ops of model code the other steps do not make (`generate(..., model_ops=True)`): -inf masks
# (softmax of a row masked whole is NaN, as in torch), causal masks, clamps, RMSNorm,
# logsumexp, cumulative sums, std, flips, rolls, repeats, in-place
# updates of a clone, index_fill, masked dropout, MSE, integer steps (position ids, argmax,
# boolean logic), masks by the dtype's lowest value, L2 normalization, nan_to_num, log1p,
# expm1, reciprocal, round, one_hot. name -> f(operands, parameters).
MODEL_OPS: dict[str, Callable[[list[torch.Tensor], tuple], torch.Tensor]] = {
    "masked_fill_inf": lambda xs, p: xs[0].masked_fill(xs[1] > p[0], float("-inf")),
    "tril": lambda xs, p: torch.tril(xs[0], p[0]),
    "triu_mask": lambda xs, p: xs[0] + torch.full(xs[0].shape[-2:], -1e4, dtype=xs[0].dtype,
                                                  device=xs[0].device).triu(1),
    "clamp": lambda xs, p: xs[0].clamp(-0.5, 0.7),
    "rms_norm": lambda xs, p: xs[0] * torch.rsqrt(xs[0].pow(2).mean(-1, keepdim=True) + 1e-6),
    "logsumexp": lambda xs, p: torch.logsumexp(xs[0], p[0], keepdim=p[1]),
    "cumsum": lambda xs, p: torch.cumsum(xs[0], p[0]),
    "where_scalar": lambda xs, p: torch.where(xs[0] > 0.2, xs[0], -1.0),
    "pow_frac": lambda xs, p: (xs[0].abs() + 0.1).pow(1.5),
    # (no correction over one element: 0 / 0, whose numerator a fused kernel computes as a
    # product's rounding error where it contracts x * w - mean into an fma, GPU fuzz seed 911034)
    "std": lambda xs, p: torch.std(xs[0], p[0], keepdim=p[1], correction=int(xs[0].shape[p[0]] > 1)),
    "softplus": lambda xs, p: F.softplus(xs[0]),
    "flip": lambda xs, p: torch.flip(xs[0], [p[0]]),
    "roll": lambda xs, p: torch.roll(xs[0], p[1], p[0]),
    "repeat": lambda xs, p: xs[0].repeat(p[0]),
    "inplace_axpy": lambda xs, p: xs[0].clone().mul_(0.5).add_(xs[1]),
    "index_fill": lambda xs, p: xs[0].index_fill(p[0], torch.arange(0, xs[0].shape[p[0]], 2, device=xs[0].device),
                                                 p[1]),
    "dropout_mask": lambda xs, p: xs[0] * _keep_mask(xs[0], p[0]) * 1.5,
    # (the target in the input's dtype: eager's CUDA backward rejects a float32 input's float64 target)
    "mse": lambda xs, p: F.mse_loss(xs[0], torch.broadcast_to(xs[1], xs[0].shape).to(xs[0].dtype)),
    "silu_mul": lambda xs, p: F.silu(xs[0]) * xs[1],
    # integer steps inside (the other steps keep floating results only): position ids from a
    # mask's cumulative sum, argmax (the first of equal maxima), boolean logic
    "position_ids": lambda xs, p: ((xs[0] > 0).long().cumsum(p[0]) - 1).clamp(min=0).to(xs[0].dtype),
    "argmax_float": lambda xs, p: xs[0].argmax(p[0], keepdim=True).to(xs[0].dtype),
    "bool_logic": lambda xs, p: (((xs[0] > 0) & (xs[0] < 1)) | (xs[0] == 0)).to(xs[0].dtype) * xs[0],
    # the lowest value of the dtype the program has there (p[1]): the float64 reference keeps
    # it (float64's own would overflow a sum that float32's leaves finite, as mlirfuse's does)
    "finfo_min_mask": lambda xs, p: xs[0].masked_fill(xs[1] > p[0], torch.finfo(p[1] if len(p) > 1 else
                                                                                xs[0].dtype).min),
    "normalize": lambda xs, p: F.normalize(xs[0], dim=p[0]),
    "nan_to_num": lambda xs, p: torch.nan_to_num(torch.log(xs[0]), nan=0.0, neginf=-10.0),
    "log1p": lambda xs, p: torch.log1p(xs[0].abs()),
    "expm1": lambda xs, p: torch.expm1(xs[0].clamp(-3, 3)),
    "reciprocal": lambda xs, p: torch.reciprocal(xs[0].abs() + 0.5),
    "round": lambda xs, p: torch.round(xs[0] * 4) / 4 + xs[0],
    "one_hot": lambda xs, p: F.one_hot(xs[0].argmax(-1), xs[0].shape[-1]).to(xs[0].dtype) * xs[0],
}


@dataclass
class Program:
    """Inputs (shape, dtype, requires_grad) and steps (name, operand indices, parameters)."""
    inputs: list[tuple[tuple[int, ...], torch.dtype, bool]]
    steps: list[tuple[str, tuple[int, ...], tuple]] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"v{i} = input {list(s)} {d} requires_grad={g}" for i, (s, d, g) in enumerate(self.inputs)]
        n = len(self.inputs)
        lines += [f"v{n + k} = {name}({', '.join(f'v{i}' for i in ops)}{', ' if p else ''}{', '.join(map(repr, p))})"
                  for k, (name, ops, p) in enumerate(self.steps)]
        return "\n".join(lines + [f"return {', '.join(f'v{i}' for i in self.outputs)}"])


def apply(name: str, xs: list[torch.Tensor], p: tuple) -> torch.Tensor:
    """One step of a program, on torch tensors (traced by dynamo, or run eagerly)."""
    if name in UNARY:
        return UNARY[name](xs[0])
    if name in BINARY:
        return BINARY[name](xs[0], xs[1])
    x = xs[0]
    if name in ("sum", "mean", "amax", "var"):
        dims, keepdim = p
        if name == "var":
            return torch.var(x, dims, keepdim=keepdim, correction=0)
        return getattr(torch, name)(x, dims, keepdim=keepdim)
    if name == "softmax":
        return torch.softmax(x, p[0])
    if name == "log_softmax":
        return torch.log_softmax(x, p[0])
    if name == "layer_norm":
        return F.layer_norm(x, x.shape[-1:])
    if name == "transpose":
        return x.transpose(*p)
    if name == "permute":
        return x.permute(*p)
    if name == "unsqueeze_expand":
        return x.unsqueeze(p[0]).expand(*p[1])
    if name == "flatten":
        return x.flatten(p[0], p[0] + 1)
    if name == "view_split":
        d, a = p
        return x.reshape(*x.shape[:d], a, x.shape[d] // a, *x.shape[d + 1:])
    if name == "contiguous":
        return x.contiguous()
    if name == "slice":
        d, start, stop, step = p
        return x[(slice(None),) * d + (slice(start, stop, step),)]
    if name == "cat":
        return torch.cat([x, xs[1]], p[0])
    if name == "cast":
        return x.to(p[0])
    if name == "pad":
        return F.pad(x, p[0], value=p[1])
    if name == "select":
        return x.select(p[0], p[1])
    if name == "split":
        d, sizes, k = p
        return x.split(list(sizes), d)[k]
    if name == "rotate_half":
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), -1)
    if name in ("gather", "index_select"):
        d, m, k = p
        idx = (torch.arange(m, device=x.device) * k + 1) % x.shape[d]
        if name == "index_select":
            return x.index_select(d, idx)
        shape = [1] * x.dim()
        shape[d] = m
        return x.gather(d, idx.view(shape).expand(*[m if i == d else n for i, n in enumerate(x.shape)]))
    if name == "argmax_gather":
        return x.gather(p[0], x.argmax(p[0], keepdim=True))
    if name == "matmul":
        form = p[0]
        if form == 0:
            return x @ x.mT
        if form == 1:
            return x.mT @ x
        return x @ xs[1]
    if name in MODEL_OPS:
        return MODEL_OPS[name](xs, p)
    if name == "cross_entropy":
        rows, classes = x.shape
        t = (torch.arange(rows, device=x.device) * p[0] + 1) % classes
        t = torch.where(torch.arange(rows, device=x.device) % 3 == 0, torch.full_like(t, -100), t)
        return F.cross_entropy(x, t, ignore_index=-100, reduction=p[1])
    raise ValueError(f"unknown step {name}")


def run(program: Program, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    values = list(inputs)
    for name, ops, p in program.steps:
        values.append(apply(name, [values[i] for i in ops], p))
    return [values[i] for i in program.outputs]


def _step(draw: Draw, values: list[torch.Tensor], model_ops: bool = False) -> tuple[str, tuple[int, ...], tuple]:
    kinds = ["unary", "unary", "binary", "binary", "reduce", "view", "slice", "cast", "norm", "index", "matmul"]
    kind = draw.choice(kinds + ["model", "model", "model"] if model_ops else kinds)
    i = draw.int(0, len(values) - 1)
    x = values[i]
    if kind == "model":
        return _model_step(draw, i, values)
    if kind == "unary":
        return draw.choice(sorted(UNARY)), (i,), ()
    if kind == "binary":
        return draw.choice(sorted(BINARY)), (i, draw.int(0, len(values) - 1)), ()
    if kind == "reduce" and x.dim() > 0:
        dims = tuple(d for d in range(x.dim()) if draw.bool()) or (draw.int(0, x.dim() - 1),)
        return draw.choice(["sum", "mean", "amax", "var"]), (i,), (dims, draw.bool())
    if kind == "norm" and x.dim() > 0:
        return draw.choice(["softmax", "log_softmax", "layer_norm"]), (i,), (draw.int(0, x.dim() - 1),) * 1
    if kind == "view" and x.dim() > 0:
        view = draw.choice(["transpose", "permute", "unsqueeze_expand", "flatten", "view_split", "contiguous"])
        if view == "transpose" and x.dim() >= 2:
            return view, (i,), (draw.int(0, x.dim() - 1), draw.int(0, x.dim() - 1))
        if view == "permute":
            order = list(range(x.dim()))
            for k in range(len(order) - 1, 0, -1):
                j = draw.int(0, k)
                order[k], order[j] = order[j], order[k]
            return view, (i,), tuple(order)
        if view == "unsqueeze_expand":
            d = draw.int(0, x.dim())
            shape = list(x.shape)
            shape.insert(d, draw.choice([1, 3]))
            return view, (i,), (d, tuple(shape))
        if view == "flatten" and x.dim() >= 2:
            return view, (i,), (draw.int(0, x.dim() - 2),)
        if view == "view_split":
            d = draw.int(0, x.dim() - 1)
            return view, (i,), (d, draw.choice([1, 2, 3]))
        return "contiguous", (i,), ()
    if kind == "slice" and x.dim() > 0:
        d = draw.int(0, x.dim() - 1)
        if draw.bool():
            j = draw.int(0, len(values) - 1)
            return "cat", (i, j), (d,)
        n = x.shape[d]
        start = draw.int(0, max(n - 1, 0))
        return "slice", (i,), (d, start, draw.int(start + 1, n + 1), draw.choice([1, 1, 2]))
    if kind == "cast":
        return "cast", (i,), (draw.choice(DTYPES),)
    if kind == "index" and x.dim() > 0:
        return _index_step(draw, i, x)
    if kind == "matmul" and x.dim() >= 2:
        form = draw.int(0, 2)
        return "matmul", (i,) if form < 2 else (i, draw.int(0, len(values) - 1)), (form,)
    return draw.choice(sorted(UNARY)), (i,), ()


def _index_step(draw: Draw, i: int, x: torch.Tensor) -> tuple[str, tuple[int, ...], tuple]:
    """Pads (negative widths crop), selects, splits, rotate_half, gathers and index_selects
    with indices made from arange, argmax's gather, cross-entropy with ignored targets."""
    d = draw.int(0, x.dim() - 1)
    n = x.shape[d]
    what = draw.choice(["pad", "select", "split", "rotate_half", "gather", "index_select", "argmax_gather",
                        "cross_entropy"])
    if what == "pad":
        widths = tuple(draw.int(-1, 2) for _ in range(2 * draw.int(1, x.dim())))
        return "pad", (i,), (widths, draw.choice([0.0, -1.5]))
    if what == "select":
        return "select", (i,), (d, draw.int(-n, n - 1))
    if what == "split" and n >= 2:
        first = draw.int(1, n - 1)
        return "split", (i,), (d, (first, n - first), draw.int(0, 1))
    if what == "rotate_half" and x.shape[-1] % 2 == 0:
        return "rotate_half", (i,), ()
    if what in ("gather", "index_select"):
        return what, (i,), (d, draw.int(1, 4), draw.int(1, 5))
    if what == "cross_entropy" and x.dim() == 2:
        return "cross_entropy", (i,), (draw.int(1, 5), draw.choice(["mean", "sum", "none"]))
    return "argmax_gather", (i,), (d,)


def _model_step(draw: Draw, i: int, values: list[torch.Tensor]) -> tuple[str, tuple[int, ...], tuple]:
    """One of `MODEL_OPS` on value `i` (and, for the binary ones, another value)."""
    x = values[i]
    name = draw.choice(sorted(MODEL_OPS))
    other = draw.int(0, len(values) - 1)
    d = draw.int(0, max(x.dim() - 1, 0))
    if name == "finfo_min_mask":
        return name, (i, other), (draw.choice([0.0, 0.5, 1.5]), x.dtype)
    if name in ("masked_fill_inf", "inplace_axpy", "mse", "silu_mul"):
        return name, (i, other), (draw.choice([0.0, 0.5, 1.5]),)
    if name == "tril":
        return name, (i,), (draw.int(-1, 1),)
    if name in ("logsumexp", "std"):
        return name, (i,), (d, draw.bool())
    if name in ("cumsum", "flip", "dropout_mask", "position_ids", "argmax_float", "normalize"):
        return name, (i,), (d,)
    if name == "roll":
        return name, (i,), (d, draw.int(-2, 2))
    if name == "repeat":
        return name, (i,), (tuple(draw.choice([1, 1, 2]) for _ in range(x.dim())),)
    if name == "index_fill":
        return name, (i,), (d, draw.choice([0.0, -2.0]))
    return name, (i,), ()


def generate(draw: Draw, max_steps: int = 10, model_ops: bool = False) -> Program:
    """A valid program: every step was run eagerly on example inputs when it was drawn. With
    `model_ops`, steps of `MODEL_OPS` too (without, the draws are those of the programs that
    seeds named in tests were drawn with)."""
    rank = draw.int(1, 3)
    shape = tuple(draw.choice([1, 2, 3, 5, 8]) for _ in range(rank))
    inputs = []
    for _ in range(draw.int(1, 3)):
        # a broadcast of the base shape: leading dims dropped, some dims of size 1
        s = tuple(1 if draw.int(0, 3) == 0 else n for n in shape[draw.int(0, rank - 1) if draw.bool() else 0:])
        inputs.append((s, draw.choice(DTYPES[:2]) if draw.int(0, 4) else torch.bfloat16, draw.bool()))
    program = Program(inputs)
    values = example_inputs(program)
    for _ in range(draw.int(2, max_steps)):
        step = _step(draw, values, model_ops)
        try:
            with torch.no_grad():
                out = apply(step[0], [values[i] for i in step[1]], step[2])
        except (RuntimeError, IndexError, ValueError):
            continue
        if out.numel() == 0 or not out.dtype.is_floating_point:
            continue
        program.steps.append(step)
        values.append(out)
    last = len(values) - 1  # (an input where no step ran)
    program.outputs = [last] if draw.bool() or last < len(inputs) else [last, draw.int(len(inputs), last)]
    return program


def example_inputs(program: Program, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64).to(d) for s, d, _ in program.inputs]


def _tolerance(program: Program) -> float:
    """The tolerance of the narrowest float dtype any value of the program has: a float64
    output computed through a float32 or bfloat16 intermediate carries that rounding."""
    values = example_inputs(program)
    dtypes = {t.dtype for t in values}
    with torch.no_grad():
        for name, ops, p in program.steps:
            values.append(apply(name, [values[i] for i in ops], p))
            dtypes.add(values[-1].dtype)
    return max(TOLERANCE[d] for d in dtypes if d in TOLERANCE)


def _close(got: torch.Tensor, want: torch.Tensor, tol: float, what: str, program: Program,
           truth: Callable[[], torch.Tensor | tuple[torch.Tensor, Any]] | None = None) -> None:
    """`got` within `tol` (relative to the largest finite element of `want` and 1) of eager's
    `want`, every element (`_distance`: NaNs and infinities where eager has them); where it
    is not, and `truth` gives the value eager computes from float64 inputs, each element of
    `got` no farther from that than `want`'s is, give or take `tol`: an ill-conditioned program (a LayerNorm of a
    row of equal values, whose gradient is rounding noise times 1/sqrt(eps)) differs from
    eager by that noise, a wrong answer also from the truth. An element that rounding alone
    moves by more than `tol` (`_float64_spread`, where `truth` gives it too) is not judged:
    any value in that range is as right as eager's."""
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: {tuple(got.shape)} {got.dtype} vs eager {tuple(want.shape)} {want.dtype}\n{program}"
    g, w = got.double(), want.double()
    finite = w[torch.isfinite(w)]
    scale = max(float(finite.abs().max()) if finite.numel() else 0.0, 1.0)
    off = _distance(g, w)
    if not off.numel() or float(off.max()) <= tol * scale:
        return
    message = f"{what}: max error {float(off.max()):.3g} (tolerance {tol * scale:.3g})"
    t = truth() if truth is not None else None
    moved: Any = 0.0
    if isinstance(t, tuple):
        t, moved = t
    if t is not None:
        t = t.double()
        fused, eager = _distance(g, t), _distance(w, t)
        # element by element; one that rounding moves by more than the tolerance cannot be judged
        ill_conditioned = torch.as_tensor(moved, dtype=torch.float64) > tol * scale
        if bool(((fused <= eager + tol * scale) | ill_conditioned).all()):
            return
        message += f"; from eager of float64 inputs {float(fused.max()):.3g}, eager's own {float(eager.max()):.3g}"
    raise AssertionError(f"{message}\n{program}")


def _distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a - b| element by element, where equal values (infinities too) and NaNs in both are 0
    apart, and a NaN or an infinity against anything else is infinitely far."""
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    return torch.where(same, 0.0, (a - b).abs().nan_to_num(nan=float("inf")))


def check(program: Program, single_node: bool = False, device: str = "cpu", pad_matmuls: str = "auto",
          dynamic: bool | None = None) -> None:
    """mlirfuse vs eager, forward and backward; AssertionError names the program.
    `single_node`: groups of one op are fused too (every op's lowering is exercised);
    `pad_matmuls="always"`: every misaligned matmul is padded (slices of padded products
    between the groups). `dynamic`: torch.compile's (True: sizes symbolic from the first
    call). The fallback to torch is off: a region that fails must fail the check."""
    import mlirfuse

    previous = mlirfuse.set_options(single_node=single_node, fallback=False, pad_matmuls=pad_matmuls)
    try:
        _check(program, device, dynamic)
    finally:
        mlirfuse.restore_options(previous)


def _check(program: Program, device: str, dynamic: bool | None = None) -> None:
    base = [t.to(device) for t in example_inputs(program)]
    grads = [g and t.dtype.is_floating_point for (_, _, g), t in zip(program.inputs, base)]
    eager_in = [t.clone().requires_grad_(g) for t, g in zip(base, grads)]
    fused_in = [t.clone().requires_grad_(g) for t, g in zip(base, grads)]
    want = run(program, eager_in)
    got = torch.compile(lambda *xs: run(program, list(xs)), backend="mlirfuse", dynamic=dynamic)(*fused_in)
    tol = _tolerance(program)
    g = torch.Generator().manual_seed(1)
    cotangents = [torch.rand(w.shape, generator=g, dtype=torch.float64).to(w) for w in want]
    truth = functools.cache(lambda: _float64_run(program, base, grads, cotangents))
    spread = functools.cache(lambda: _float64_spread(program, base, grads, cotangents, truth()))
    outputs = lambda k: (truth()[0][k], spread()[0][k]) if truth() is not None else None  # noqa: E731
    gradients = lambda k: (truth()[1][k], spread()[1][k]) if truth() is not None else None  # noqa: E731
    for k, (a, b) in enumerate(zip(got, want)):
        _close(a.detach(), b.detach(), tol, f"output {k}", program, functools.partial(outputs, k))
    if not any(grads) or not any(w.requires_grad for w in want):
        return
    pairs = [(o, c) for o, c in zip(want, cotangents) if o.requires_grad]
    torch.autograd.backward([o for o, _ in pairs], [c for _, c in pairs])
    pairs = [(o, c) for o, c in zip(got, cotangents) if o.requires_grad]
    torch.autograd.backward([o for o, _ in pairs], [c for _, c in pairs])
    for k, (a, b) in enumerate(zip(fused_in, eager_in)):
        if b.grad is not None:
            assert a.grad is not None, f"input {k}: no gradient\n{program}"
            _close(a.grad, b.grad, tol, f"gradient of input {k}", program, functools.partial(gradients, k))


def _float64_run(program: Program, base: list[torch.Tensor], grads: list[bool],
                 cotangents: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor | None]] | None:
    """Eager's outputs and input gradients with every float input (and output gradient) in
    float64: the reference an ill-conditioned program's results are judged by (a cast step
    inside the program still rounds there); None where eager fails so."""
    try:
        return _float64_eager(program, base, grads, cotangents)
    except (RuntimeError, TypeError, ValueError, IndexError):
        return None


def _float64_spread(program: Program, base: list[torch.Tensor], grads: list[bool], cotangents: list[torch.Tensor],
                    truth: tuple[list[torch.Tensor], list[torch.Tensor | None]] | None
                    ) -> tuple[list[torch.Tensor | float], list[torch.Tensor | float]]:
    """Per output and input gradient, element by element, how far the float64 reference moves
    when every float input moves by the rounding of the program's narrowest float dtype (two
    draws, relative, half its epsilon): at least what rounding anywhere in the program may
    move a result by. A result moved by more than the tolerance is ill-conditioned and `_close`
    does not judge it (the sine of a bfloat16 loss near 4e9, whose spacing there is 3e7: fuzz
    seed 1030326, where mlirfuse's loss was the correctly rounded one and eager's a bfloat16
    step off, and the sines 0.18 apart); a well-conditioned one moves by far less, so its
    check stays as it was. Infinitely far where a draw fails."""
    if truth is None:
        return [], []
    narrowest = max((torch.finfo(t.dtype).eps for t in base if t.dtype.is_floating_point), default=0.0)
    for name, ops, p in program.steps:  # (a cast step to a narrower dtype counts too)
        for q in p:
            if isinstance(q, torch.dtype) and q.is_floating_point:
                narrowest = max(narrowest, torch.finfo(q).eps)
    g = torch.Generator().manual_seed(2)
    outs = [torch.zeros_like(o, dtype=torch.float64) if o.dtype.is_floating_point else 0.0 for o in truth[0]]
    grad_spread = [torch.zeros_like(x, dtype=torch.float64) if x is not None else 0.0 for x in truth[1]]
    for _ in range(2):
        moved = [t.double() * (1 + narrowest / 2 * (2 * torch.rand(t.shape, generator=g, dtype=torch.float64) - 1))
                 if t.dtype.is_floating_point else t for t in base]
        try:
            run_outs, run_grads = _float64_eager(program, moved, grads, cotangents)
        except (RuntimeError, TypeError, ValueError, IndexError):
            return ([float("inf")] * len(truth[0]), [float("inf")] * len(truth[1]))
        outs = [torch.maximum(s, _distance(o.double(), t.double())) if isinstance(s, torch.Tensor) else s
                for s, o, t in zip(outs, run_outs, truth[0])]
        grad_spread = [torch.maximum(s, _distance(x.double(), t.double())) if isinstance(s, torch.Tensor)
                       and x is not None else s for s, x, t in zip(grad_spread, run_grads, truth[1])]
    return outs, grad_spread


def _float64_eager(program: Program, base: list[torch.Tensor], grads: list[bool],
                   cotangents: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    inputs = [(t.double() if t.dtype.is_floating_point else t.clone()).requires_grad_(g) for t, g in zip(base, grads)]
    outs = run(program, inputs)
    pairs = [(o, c.double()) for o, c in zip(outs, cotangents) if o.requires_grad]
    if pairs:
        torch.autograd.backward([o for o, _ in pairs], [c for _, c in pairs])
    return [o.detach() for o in outs], [x.grad for x in inputs]


def numpy_of(a: Any) -> Any:
    """A CPU tensor as a numpy array of the same strides (bfloat16 as ml_dtypes' bfloat16, bit
    for bit); anything else as it is."""
    if not isinstance(a, torch.Tensor):
        return a
    if a.dtype == torch.bfloat16:
        import ml_dtypes

        return a.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return a.numpy()


def in_memory_order(t: torch.Tensor) -> torch.Tensor:
    """`t`'s dims permuted into their order in memory, dense: what a compiled fusion takes for
    a permuted input (the jit passes such a tensor so, `arrays.dense_order`)."""
    from mlirfuse.arrays import dense_order

    order = None if t.is_contiguous() else dense_order(t.shape, t.stride())
    return t.permute(order).contiguous() if order is not None else t.contiguous()


class RegionCall(NamedTuple):
    """A call of a jitted function: its inputs as they were before it (clones: a region may
    write into an input), its results as they were after it (clones), and the arguments
    themselves."""

    jitted: Any
    inputs: list[Any]
    results: tuple[Any, ...]
    args: tuple[Any, ...]


@contextlib.contextmanager
def recorded_region_calls() -> Iterator[list[RegionCall]]:
    """Inside the block, every call of a jitted function (the torch backend's regions, each
    through `JitFunction.__call__`: the hot path's shortcut is off), as a `RegionCall` whose
    inputs and results are copies as they were then (a later step accumulates gradients into
    the tensors a backward region returned: a recording over several steps compared its first
    backward's bias gradients with their later sums)."""
    from mlirfuse.frontend.jit import JitFunction
    from mlirfuse.torch_backend import runtime as R

    calls: list[RegionCall] = []
    call, shortcut = JitFunction.__call__, R.FusedRegion._shortcut

    def capture(self: Any, *args: Any) -> Any:
        before = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
        out = call(self, *args)
        results = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        calls.append(RegionCall(self, before, tuple(r.detach().clone() if isinstance(r, torch.Tensor) else r
                                                    for r in results), args))
        return out

    JitFunction.__call__, R.FusedRegion._shortcut = capture, lambda self, hot: None
    try:
        yield calls
    finally:
        JitFunction.__call__, R.FusedRegion._shortcut = call, shortcut


def emulate_region_calls(calls: list[RegionCall], ptxas: str | None = None, context: str = "") -> list[Any]:
    """Each recorded call compiled again for the GPU (sm_90; its PTX assembled by `ptxas` if
    given) and emulated (gpu_emulator) on the inputs it had, in the memory order the jit
    hands a compiled fusion (`in_memory_order`), against the CPU backend's results
    (dtype-aware tolerances relative to the magnitudes involved; integers and NaNs exactly).
    AssertionError names the fusion (and `context`). Returns the compiled fusions (calls of
    complex tensors, which the emulator's arrays do not hold, left out)."""
    import numpy as np
    from gpu_emulator import emulate

    from mlirfuse.torch_backend import runtime as R

    compiled_all = []
    for jitted, inputs, results, _ in calls:
        if any(isinstance(a, torch.Tensor) and a.is_complex() for a in inputs + list(results)):
            continue
        compiled = jitted.compile(*inputs, backend="gpu", arch="sm_90")
        if ptxas is not None:
            _assemble(compiled.ptx, ptxas)
        want = [numpy_of(in_memory_order(r.detach())) for r in results]
        got = emulate(compiled.stages["gpu"], [numpy_of(in_memory_order(a)) if isinstance(a, torch.Tensor) else a
                                               for a in inputs], [np.empty_like(w) for w in want])
        floats = [a for a in inputs + list(results) if isinstance(a, torch.Tensor) and a.is_floating_point()]
        scale = max([1.0] + [_finite_abs_max(a.detach().double().numpy()) for a in inputs
                             if isinstance(a, torch.Tensor) and a.is_floating_point()])
        # the narrowest float dtype the call computes in (a float64 product of a float32 cos
        # carries the float32 rounding of libdevice's cosf against the CPU's)
        rounding = max([R.CHECK_TOLERANCE.get(a.dtype, 2e-2) for a in floats], default=0.0)
        for k, (g, w, r) in enumerate(zip(got, want, results)):
            g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
            tol = (rounding if r.is_floating_point() else 0.0) * max(scale, _finite_abs_max(w))
            bad = _far(g, w, tol)
            if bad.any():
                first = tuple(int(i) for i in np.argwhere(bad)[0])
                raise AssertionError(f"the emulated GPU kernels of fusion {compiled.key}, output {k} ({r.dtype}, "
                                     f"{tuple(w.shape)}): {int(bad.sum())} of {w.size} elements off, at {first} "
                                     f"{g[first]!r} where the CPU backend gives {w[first]!r} (tolerance {tol:.3g})"
                                     f"\n{context}")
        compiled_all.append(compiled)
    return compiled_all


def _finite_abs_max(a: Any) -> float:
    """The largest |element| of a numpy array but its NaNs and infinities (0 if none): an
    infinity (a -inf mask) would make a tolerance scaled by it take any value."""
    import numpy as np

    finite = np.abs(a[np.isfinite(a)])
    return float(finite.max()) if finite.size else 0.0


def _far(got: Any, want: Any, tol: float) -> Any:
    """The elements of `got` more than `tol` from `want`'s: equal values (infinities too) and
    NaNs in both are close, a NaN or an infinity against anything else is far."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        return ~((np.abs(got - want) <= tol) | (np.isnan(got) & np.isnan(want)) | (got == want))


def check_on_emulator(program: Program, single_node: bool = False, pad_matmuls: str = "auto",
                      ptxas: str | None = None) -> int:
    """The GPU kernels of the program's training step, without a GPU: the step runs on the
    CPU, and each call of a fused region's jitted function is compiled again for the GPU and
    emulated on the inputs it had, against the CPU backend's results (`emulate_region_calls`).
    AssertionError names the region and the program. Returns the calls checked."""
    import mlirfuse

    previous = mlirfuse.set_options(single_node=single_node, fallback=False, pad_matmuls=pad_matmuls)
    try:
        with recorded_region_calls() as calls:
            torch._dynamo.reset()
            base = example_inputs(program)
            xs = [t.clone().requires_grad_(g and t.dtype.is_floating_point)
                  for (_, _, g), t in zip(program.inputs, base)]
            outs = torch.compile(lambda *xs: run(program, list(xs)), backend="mlirfuse")(*xs)
            pairs = [(o, torch.ones_like(o)) for o in outs if o.requires_grad]
            if pairs:
                torch.autograd.backward([o for o, _ in pairs], [c for _, c in pairs])
    finally:
        mlirfuse.restore_options(previous)
    emulate_region_calls(calls, ptxas, str(program))
    return len(calls)


def _assemble(ptx: str, ptxas: str) -> None:
    """ptxas accepts the PTX for sm_90 (shared memory, registers: what the emulator does not check)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/k.ptx", "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, "-arch=sm_90", f"{d}/k.ptx", "-o", f"{d}/k.cubin"],
                              capture_output=True, text=True)
        assert done.returncode == 0, f"ptxas refused the PTX: {done.stderr}"
