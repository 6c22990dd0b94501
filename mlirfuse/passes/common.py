"""Helpers shared by passes."""

from __future__ import annotations

from typing import Any, Iterator

from mlir import ir


class ModuleView:
    """What a function written for an `ir.Module` reads of it (`.body`, `.operation`), for the
    `builtin.module` operation a pass is given."""

    def __init__(self, op: ir.Operation) -> None:
        self.operation = op
        self.body = op.regions[0].blocks[0]


def entry_functions(module: ir.Operation, entry: str = "mlirfuse_entry") -> list[ir.Operation]:
    """The module's entry point(s) by name; a pass that needs one raises without it."""
    found = [f for f in functions(module) if ir.StringAttr(f.attributes["sym_name"]).value == entry]
    if not found:
        raise ValueError(f"no @{entry} function (this pass runs after entry-point)")
    return found


def functions(module: ir.Operation) -> Iterator[ir.Operation]:
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func":
            yield op.operation


def walk_ops(op: ir.Operation) -> list[ir.Operation]:
    """`op` and every operation nested in it, in pre-order."""
    found: list[ir.Operation] = []
    op.walk(lambda o: (found.append(o), ir.WalkResult.ADVANCE)[1], ir.WalkOrder.PRE_ORDER)
    return found


def use_owner(use: ir.OpOperand) -> ir.Operation:
    """The operation of a use (the bindings give an OpView or an Operation)."""
    return use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner


def users(value: ir.Value) -> list[ir.Operation]:
    """The operations using `value` (one per use)."""
    return [use_owner(u) for u in value.uses]


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The operation producing `value`, or None for a block argument."""
    owner = value.owner
    return owner.operation if isinstance(owner, (ir.Operation, ir.OpView)) else None


def body_ops(func: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in func.regions[0].blocks[0].operations]


def output_materializations(func: ir.Operation) -> list[ir.Operation]:
    """The `bufferization.materialize_in_destination` ops of the destination-passing entry
    point that write a result into an output buffer (a memref)."""
    return [op for op in body_ops(func) if op.name == "bufferization.materialize_in_destination"
            and isinstance(op.operands[1].type, ir.MemRefType)]


def is_fusion_op(op: ir.Operation) -> bool:
    return op.name.startswith("fusion.")


def has_uses(op: ir.Operation) -> bool:
    return any(len(list(r.uses)) for r in op.results)



def erase_if_dead(func: ir.Operation, ops: list[ir.Operation]) -> None:
    """Erase those of `ops` (fusion ops of `func`'s body) left without uses, then their
    producers left unused by that, transitively: a local dead-code sweep after a rewrite
    released them. Ops are erased only at the end (an erased op cannot be compared)."""
    dead: set[ir.Operation] = set()
    work = list(ops)
    while work:
        op = work.pop()
        if op in dead or not is_fusion_op(op):
            continue
        op_users = [u for r in op.results for u in users(r)]
        if all(u in dead for u in op_users):
            dead.add(op)
            work.extend(p for p in map(defining_op, op.operands) if p is not None)
    for op in reversed(body_ops(func)):
        if op in dead:
            op.erase()


class UnionFind:
    """Disjoint sets of hashable keys (path halving; a key unseen so far is its own set)."""

    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, key: Any) -> Any:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def union(self, a: Any, b: Any) -> None:
        self.parent[self.find(a)] = self.find(b)


class DimClasses(UnionFind):
    """Union-find over the dims `(value, position)` of shaped values (tensors or memrefs),
    static sizes `("static", n)` and whatever keys a user adds: two dims in one class have
    equal extents whenever the function runs."""

    def dim(self, value: ir.Value, pos: int) -> Any:
        key = (value, pos)
        if key not in self.parent:
            self.parent[key] = key
            t = ir.ShapedType(value.type)
            if not t.is_dynamic_dim(pos):
                self.union(key, ("static", t.shape[pos]))
        return key
