"""The segmenter's heuristics: which schedule can serve a set of ops, and whether it launches.

Pure decisions over one group's ops, given their symbolic extents (`extents.py`) and view
layouts (`views.py`); `fusion_segment.py` applies them. Schedulers, after nvFuser's:
- pointwise: elementwise work over one iteration domain (domains joined by a reshape,
  squeeze or unsqueeze count as one: those keep the element order; work read only by cats
  or pads, which recompute it at the indices they read, counts in their domain);
- transpose: pointwise work that reads or writes a permuted layout (domains joined by a
  permute count as one), or a copy out of a permuted view;
- reduction: reductions over one input domain and axes, with pointwise prologue (on the
  input domain) and epilogue (on the reduced domain);
- normalization: a reduction whose result is broadcast back into work on its input domain;
- expr-eval: only 0-d (scalar) work, evaluated on the host: no launch;
- no-op: metadata only, or results nobody reads: no launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from mlir import ir

from mlirfuse.passes.common import use_owner
from mlirfuse.passes.extents import Extents, shape_of
from mlirfuse.passes.graph import kind, short_name
from mlirfuse.passes.views import Views

COMPUTE_KINDS = ("elementwise", "reduction", "cast", "random", "indexing")
NO_LAUNCH = ("no-op", "expr-eval")
JOINING_VIEWS = {"reshape", "squeeze", "unsqueeze"}  # same elements in the same order
GATHERING = ("fusion.cat", "fusion.pad")  # loops that read their operands at computed indices


def _ints(op: ir.Operation, name: str) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def is_compute(op: ir.Operation) -> bool:
    return op.name.startswith("fusion.") and kind(op) in COMPUTE_KINDS


def is_tensor_compute(op: ir.Operation) -> bool:
    """Compute over a tensor of rank >= 1 (0-d work is scalar math the host evaluates)."""
    return is_compute(op) and any(len(shape_of(v) or ()) > 0 for v in list(op.operands) + list(op.results))


@dataclass(frozen=True)
class Reduction:
    """What one reduction schedule serves: an input domain and the reduced positions in it."""

    domain: tuple
    reduced: tuple[int, ...]
    out_domain: tuple


class Rules:
    """Schedulability of sets of ops of one group (indices into `ops`)."""

    def __init__(self, ops: Sequence[ir.Operation], extents: Extents, views: Views):
        self.ops = ops
        self.extents = extents
        self.views = views
        self.reductions: dict[int, Reduction] = {}
        self._gathered: dict[tuple[ir.Operation, int], tuple | None] = {}  # `_gathered_into`'s answers
        for i, op in enumerate(ops):
            if kind(op) == "reduction":
                self.reductions[i] = self._reduction(op)

    def _reduction(self, op: ir.Operation) -> Reduction:
        dims = self.extents.dims(op.operands[0])
        axes = {a % len(dims) for a in _ints(op, "axes")} if dims else set()
        kept = [i for i, s in enumerate(dims) if s != ("c", 1)]
        reduced = tuple(k for k, i in enumerate(kept) if i in axes)
        return Reduction(self.extents.domain(op.operands[0]), reduced, self.extents.domain(op.results[0]))

    def domain(self, i: int) -> tuple | None:
        """The iteration domain op i constrains its kernel to; None for views and constants
        (any kernel), () for 0-d work (any kernel too)."""
        op = self.ops[i]
        if not is_compute(op):
            return None
        if i in self.reductions:
            return self.reductions[i].domain
        if not op.results:
            return ()
        return self._gathered_into(op) or self.extents.domain(op.results[0])

    def _gathered_into(self, op: ir.Operation, depth: int = 0) -> tuple | None:
        """The domain of the cats or pads that alone read `op`'s result, directly or through
        ops that are themselves read only by them: their loops read operands at computed
        indices, recomputing the elementwise chain there (`indexing.Reader`), so it belongs
        to their kernel, whatever its own domain (rotate_half: q's half, negated, inside the
        cat over [.., d]). Each (op, depth) is answered once: a value read by many ops, each
        read by many (a recurrence unrolled over a sequence), made the walk exponential."""
        key = (op, depth)
        if key not in self._gathered:
            self._gathered[key] = self._gathered_walk(op, depth)
        return self._gathered[key]

    def _gathered_walk(self, op: ir.Operation, depth: int) -> tuple | None:
        readers = [use_owner(u) for u in op.results[0].uses] if op.results else []
        if not readers or depth > 8:
            return None
        domains = set()
        for r in readers:
            if r.name in GATHERING:
                domains.add(self.extents.domain(r.results[0]))
            elif kind(r) in ("elementwise", "cast", "indexing") and len(r.results) == 1:
                domains.add(self._gathered_into(r, depth + 1))
            else:
                return None
        return domains.pop() if len(domains) == 1 and None not in domains else None

    def _classes(self, members: Sequence[int], through_permute: bool) -> dict:
        """Union-find over domains joined by the members' reshapes (and permutes)."""
        parent: dict = {}

        def find(d: tuple) -> tuple:
            parent.setdefault(d, d)
            while parent[d] != d:
                d = parent[d]
            return d

        joining = JOINING_VIEWS | ({"permute"} if through_permute else set())
        for m in members:
            op = self.ops[m]
            if op.name.startswith("fusion.") and short_name(op) in joining:
                a, b = find(self.extents.domain(op.operands[0])), find(self.extents.domain(op.results[0]))
                if a != b:
                    parent[a] = b
        return {d: find(d) for d in parent}

    def serviceable(self, members: Sequence[int]) -> tuple[bool, str]:
        """Whether one schedule can serve all of `members`, and if not why."""
        keys = {self.reductions[m] for m in members if m in self.reductions}
        if len(keys) > 1:
            return False, f"reductions over different domains/axes {sorted(map(_show, keys))}"
        classes = self._classes(members, through_permute=not keys)
        domains = {classes.get(d, d) for m in members if (d := self.domain(m))}  # () is 0-d work: anywhere
        if not keys:
            if len(domains) > 1:
                return False, f"pointwise work over different domains {sorted(map(_show_domain, domains))}"
            return True, ""
        (key,) = keys
        extra = domains - {classes.get(key.domain, key.domain), classes.get(key.out_domain, key.out_domain)}
        if extra:
            return False, (f"work over domains {sorted(map(_show_domain, extra))} besides the reduction's "
                           f"{_show_domain(key.domain)}")
        return True, ""

    def has_reduction(self, members: Sequence[int]) -> bool:
        return any(m in self.reductions for m in members)

    # -- what a segment launches ------------------------------------------------------------
    def launches(self, members: Sequence[int], escaping: Sequence[ir.Value], returned: Sequence[ir.Value]) -> bool:
        """A segment launches a kernel when it writes a tensor (a result read elsewhere) and
        computes on tensors, copies a view, or must write a non-contiguous view contiguous."""
        if not escaping:
            return False
        ops = [self.ops[m] for m in members]
        return (any(is_tensor_compute(op) or op in self.views.copies for op in ops)
                or any(self.views.layout(v) is not None for v in returned))

    def scheduler(self, members: Sequence[int], escaping: Sequence[ir.Value], returned: Sequence[ir.Value],
                  depends_on: Callable[[int, list[int]], bool]) -> str:
        if not self.launches(members, escaping, returned):
            return "expr-eval" if escaping and any(is_compute(self.ops[m]) for m in members) else "no-op"
        reductions = [m for m in members if m in self.reductions]
        if reductions:
            key = self.reductions[reductions[0]]
            classes = self._classes(members, through_permute=False)
            home = classes.get(key.domain, key.domain)
            downstream = any(m not in self.reductions and (d := self.domain(m)) and classes.get(d, d) == home
                             and depends_on(m, reductions) for m in members)
            return "normalization" if downstream else "reduction"
        values = [v for m in members for v in list(self.ops[m].operands) + list(self.ops[m].results)]
        return "transpose" if any(self.views.permuted(v) for v in values) else "pointwise"


def _show_domain(domain: tuple) -> str:
    return "x".join(str(s[1]) if s[0] == "c" else f"?{s[1]}" for s in domain) or "scalar"


def _show(key: Reduction) -> str:
    return f"{_show_domain(key.domain)} axes {list(key.reduced)}"
