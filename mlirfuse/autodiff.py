"""Reverse-mode autodiff of a traced fusion: the backward fusion and what the forward saves.

`differentiate(fusion, wrt)` walks the forward's ops in reverse, applies each op's
vector-Jacobian product from the op table, and sums the contributions per value. The
backward is a fusion of its own, so it is grouped, segmented and scheduled like any other
(a LayerNorm backward becomes a normalization kernel and a column reduction).

Backward inputs, in order: every forward input (the primals, at their forward positions, so
that the forward's symbolic sizes mean the same there), one cotangent per differentiable
forward output, then the residuals: forward values the backward reads and does not
recompute. The forward is rewritten to also return the residuals it does not return already.

What to save and what to recompute is `SavePolicy` (written down in its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from mlirfuse.dialects.optable import OPS
from mlirfuse.errors import FusionError
from mlirfuse.frontend.graph import Fusion, InputSpec, Node, Tensor, tracing


@dataclass(frozen=True)
class SavePolicy:
    """Which forward values the backward reads from memory rather than recomputing.

    Saved: values the forward returns anyway (free: already written), results of reductions
    (mean, rstd's variance, a softmax's max and sum: small, and a second pass over the rows to
    recompute them would cost more than reading them), library results (matmuls: never
    recomputed), and the operands of max/min reductions, whose gradients compare them for
    equality with the saved maximum (a recomputation in another kernel need not be
    bit-identical, and an element then matching nothing loses its gradient). Recomputed:
    everything else (elementwise, casts, views, indexing, random numbers from the same seed
    and offset, hence the same dropout mask), from the primals and the saved values, inside
    the backward's kernels, so that the forward writes nothing but its outputs and those
    small results. Elementwise work on reduction results alone (`is_statistic`: rstd) is
    saved too, not the reduction result under it; and a reduction's operand computed from
    two or more full-size values (`is_normalized_input`). This is AOTAutograd's min-cut answer for
    pointwise chains around reductions, and what nvFuser's tutorial saves for LayerNorm.
    """

    saved_kinds: frozenset[str] = frozenset({"reduction", "library"})
    compared_by: frozenset[str] = frozenset({"max", "min"})
    statistic_kinds: frozenset[str] = frozenset({"elementwise", "cast"})

    def saves(self, node: Node, users: Sequence[Node]) -> bool:
        """Whether to save the results of `node` (whose results `users` read)."""
        return (OPS[node.op].kind in self.saved_kinds or any(u.op in self.compared_by for u in users)
                or self.is_statistic(node) or self.is_normalized_input(node, users))

    def is_normalized_input(self, node: Node, users: Sequence[Node]) -> bool:
        """A reduction's operand computed from two or more full-size values (LayerNorm after
        dropout and a residual add): a normalization's backward reads it in two kernels (its
        row sums and the weight gradient's column reduction), where recomputing it would read
        all those values twice; saved, it is written once and read back."""
        if not any(OPS[u.op].kind == "reduction" for u in users):
            return False
        shape = node.outputs[0].shape
        leaves: set[int] = set()
        stack, seen = list(node.inputs), set()
        while stack:
            t = stack.pop()
            if t.id in seen:
                continue
            seen.add(t.id)
            n = t.node
            if n is None or OPS[n.op].kind in self.saved_kinds:
                if t.shape == shape:
                    leaves.add(t.id)
            elif n.op not in ("broadcast_in_dim", "expand"):  # a broadcast reads little
                stack.extend(n.inputs)
        return len(leaves) >= 2

    def is_statistic(self, node: Node) -> bool:
        """Elementwise work on reduction results alone (LayerNorm's rstd = rsqrt(var + eps)):
        saved as it stands, as small as the reduction's result, so that the backward reads
        it where it is needed instead of recomputing it in a kernel of its own."""
        if OPS[node.op].kind not in self.statistic_kinds:
            return False
        sources = [t.node for t in node.inputs if not _constant_like(t)]
        return bool(sources) and all(
            n is not None and (OPS[n.op].kind == "reduction" or self.is_statistic(n)) for n in sources)


def _constant_like(t: Tensor) -> bool:
    """A 0-d value, or one broadcast from 0-d values: the same number everywhere."""
    if not t.shape:
        return True
    node = t.node
    return node is not None and node.op in ("broadcast_in_dim", "expand") and all(map(_constant_like, node.inputs))


DEFAULT_POLICY = SavePolicy()


@dataclass
class Derivative:
    forward: Fusion          # the forward, returning its outputs then the new residuals
    backward: Fusion         # primals, cotangents, residuals -> gradients
    n_outputs: int           # the forward's own outputs (the first ones)
    cotangents: list[int]    # indices of the forward outputs that take a cotangent
    residuals: list[int]     # indices into forward.outputs of the residuals, in backward order
    gradients: list[int]     # forward input positions whose gradients the backward returns
    recomputed: list[str] = field(default_factory=list)  # ops the backward recomputes (for tests)


def differentiable_values(fusion: Fusion, wrt: Sequence[int]) -> set[int]:
    """Ids of the float values that depend differentiably on the inputs at `wrt`."""
    live = {fusion.inputs[i].id for i in wrt if fusion.inputs[i].dtype.is_float}
    for node in fusion.nodes:
        if OPS[node.op].vjp is not None and any(t.id in live for t in node.inputs):
            live.update(t.id for t in node.outputs if t.dtype.is_float)
    return live


def _spec_shape(fusion: Fusion, t: Tensor) -> tuple[int | None, ...]:
    return tuple(s if isinstance(s, int) else None for s in (fusion.canonical(d) for d in t.shape))


class _Builder:
    """Builds the backward fusion for one forward."""

    def __init__(self, forward: Fusion, policy: SavePolicy):
        from mlirfuse.frontend import ops

        self.ops = ops
        self.forward = forward
        self.policy = policy
        self.bwd = Fusion()
        for spec in forward.specs:
            self.bwd.add_input(spec)
        # The forward's size equalities hold in the backward too (its sizes are the forward's).
        self.bwd._aliases = dict(forward._aliases)
        self.bwd.constraints = list(forward.constraints)
        self.bwd.minimums = list(forward.minimums)
        self.values: dict[int, Tensor] = {t.id: b for t, b in zip(forward.inputs, self.bwd.inputs)}
        self.output_index = {}
        for k, t in enumerate(forward.outputs):
            self.output_index.setdefault(t.id, k)
        self.users: dict[int, list[Node]] = {}
        for node in forward.nodes:
            for t in node.inputs:
                self.users.setdefault(t.id, []).append(node)
        self.residuals: list[tuple[Tensor, Tensor]] = []  # (forward value, backward input)
        self.recomputed: list[Node] = []  # backward nodes that replay forward ones

    def cotangent(self, t: Tensor, contiguous: bool) -> Tensor:
        """A backward input for the cotangent of forward output t (its sizes checked per call)."""
        g = self.bwd.add_input(InputSpec(t.dtype, _spec_shape(self.forward, t), contiguous=contiguous))
        for have, want in zip(g.shape, t.shape):
            self.bwd.unify(want, have, "cotangent")
        return g

    def value(self, t: Tensor) -> Tensor:
        """The backward's copy of forward value t: a primal, a residual or a recomputation."""
        found = self.values.get(t.id)
        if found is not None:
            return found
        node = t.node
        assert node is not None, "forward inputs are mapped up front"
        users = [u for o in node.outputs for u in self.users.get(o.id, [])]
        if t.id in self.output_index or self.policy.saves(node, users):
            for out in node.outputs:
                self._save(out)
        else:
            inputs = [self.value(i) for i in node.inputs]
            outs = self.bwd.add_node(node.op, inputs, node.attrs, [(o.dtype, o.shape) for o in node.outputs])
            for o, b in zip(node.outputs, outs):
                b.priority = o.priority
                self.values[o.id] = b
            self.recomputed.append(outs[0].node)
        return self.values[t.id]

    def _save(self, t: Tensor) -> None:
        # The residual's sizes are the forward's own (it is the forward's output): no checks.
        b = self.bwd.add_input(InputSpec(t.dtype, _spec_shape(self.forward, t)))
        b.shape, b.priority = t.shape, t.priority
        self.values[t.id] = b
        self.residuals.append((t, b))


def differentiate(fusion: Fusion, wrt: Sequence[int] | None = None,
                  contiguous_cotangents: Sequence[bool] | None = None,
                  policy: SavePolicy = DEFAULT_POLICY) -> Derivative:
    """The backward of `fusion` for the gradients of its inputs at `wrt` (default: every
    floating-point input). Gradients come out in `wrt` order, for the inputs some output
    depends on differentiably; `Derivative.gradients` says which."""
    if wrt is None:
        wrt = [i for i, t in enumerate(fusion.inputs) if t.dtype.is_float and not fusion.specs[i].scalar]
    for i in wrt:
        if not 0 <= i < len(fusion.inputs):
            raise FusionError(f"autodiff: no input {i} (the fusion has {len(fusion.inputs)})")
    live = differentiable_values(fusion, wrt)
    cotangents = [k for k, t in enumerate(fusion.outputs) if t.id in live]
    if contiguous_cotangents is None:
        contiguous_cotangents = [True] * len(cotangents)
    builder = _Builder(fusion, policy)
    ops = builder.ops
    grads: dict[int, Tensor] = {}

    def accumulate(t: Tensor, g: Tensor | None) -> None:
        if g is None or t.id not in live:
            return
        if (g.dtype, g.shape) != (t.dtype, t.shape):
            g = ops.cast(g, t.dtype)
        grads[t.id] = ops.add(grads[t.id], g) if t.id in grads else g

    with tracing(builder.bwd):
        for k, contiguous in zip(cotangents, contiguous_cotangents):
            out = fusion.outputs[k]
            accumulate(out, builder.cotangent(out, contiguous))
        for node in reversed(fusion.nodes):
            gs = [grads.get(t.id) for t in node.outputs]
            if all(g is None for g in gs) or not any(t.id in live for t in node.inputs):
                continue
            op = OPS[node.op]
            ys = [builder.value(t) for t in node.outputs]
            xs = [builder.value(t) for t in node.inputs]
            g, y = (gs[0], ys[0]) if len(gs) == 1 else (tuple(gs), tuple(ys))
            results = op.vjp(ops, g, y, *xs, **node.attrs)
            for x, gx in zip(node.inputs, results):
                accumulate(x, gx)
    gradients = [i for i in wrt if fusion.inputs[i].id in grads]
    for i in gradients:
        builder.bwd.add_output(grads[fusion.inputs[i].id])
    return _finish(fusion, builder, cotangents, gradients)


def _finish(fusion: Fusion, builder: _Builder, cotangents: list[int], gradients: list[int]) -> Derivative:
    """Drop what the gradients do not read (rules may ask for a value they then not use) and
    make the forward return the residuals that remain."""
    bwd = builder.bwd
    needed = {t.id for t in bwd.outputs}
    kept = []
    for node in reversed(bwd.nodes):
        if any(t.id in needed for t in node.outputs):
            kept.append(node)
            needed.update(t.id for t in node.inputs)
    bwd.nodes = kept[::-1]
    n_keep = len(fusion.inputs) + len(cotangents)
    residuals = [(t, b) for t, b in builder.residuals if b.id in needed]
    bwd.inputs = bwd.inputs[:n_keep] + [b for _, b in residuals]
    bwd.specs = bwd.specs[:n_keep] + [InputSpec(t.dtype, _spec_shape(fusion, t)) for t, _ in residuals]
    forward = Fusion.__new__(Fusion)
    forward.__dict__.update(fusion.__dict__)
    forward.outputs = list(fusion.outputs)
    indices = []
    for t, _ in residuals:
        k = builder.output_index.get(t.id)
        if k is None:
            k = len(forward.outputs)
            forward.outputs.append(t)
        indices.append(k)
    replayed = set(map(id, builder.recomputed))
    return Derivative(forward, bwd, len(fusion.outputs), cotangents, indices, gradients,
                      recomputed=[n.op for n in bwd.nodes if id(n) in replayed])
