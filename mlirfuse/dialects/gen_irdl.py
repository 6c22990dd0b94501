"""Generate `fusion.irdl.mlir` from the op table: `python -m mlirfuse.dialects.gen_irdl`."""

from __future__ import annotations

from pathlib import Path

from mlirfuse.dialects.optable import OPS, OpDef

IRDL_PATH = Path(__file__).with_name("fusion.irdl.mlir")

_ATTR_BASE: dict[str, str | None] = {
    "axes": "#builtin.dense_array", "shape": "#builtin.dense_array",
    "broadcast_dims": "#builtin.dense_array", "dims": "#builtin.dense_array",
    "keepdim": "#builtin.integer", "reverse": "#builtin.integer", "dim": "#builtin.integer",
    "max": "#builtin.integer",
    "correction": "#builtin.float",
    "value": None, "starts": "#builtin.dense_array", "steps": "#builtin.dense_array",
    "low": "#builtin.dense_array", "high": "#builtin.dense_array", "start": None, "step": None,
}


def _operation(op: OpDef) -> list[str]:
    lines = [f"  irdl.operation @{op.name} {{"]
    constraints: dict[str, str] = {}

    def var(name: str) -> str:
        if op.kind == "size" and name == "result":
            key, text = "idx", "irdl.is index"
        elif name in op.same_type:
            key, text = "T", 'irdl.base "!builtin.tensor"'
        else:
            key, text = name, 'irdl.base "!builtin.tensor"'
        if key not in constraints:
            constraints[key] = f"%{key}"
            lines.append(f"    %{key} = {text}")
        return constraints[key]

    operands = [f"{n}: {'optional ' if n in op.optional else ''}{var(n)}" for n in op.operands]
    if op.variadic_sizes:
        lines.append("    %index = irdl.is index")
        operands.append("sizes: variadic %index")
    results = [f"{n}: {var(n)}" for n in op.results]
    if op.attributes:
        attrs = []
        for a in op.attributes:
            base = _ATTR_BASE[a]
            lines.append(f'    %{a}_attr = ' + (f'irdl.base "{base}"' if base else "irdl.any"))
            attrs.append(f'"{a}" = %{a}_attr')
        lines.append("    irdl.attributes {" + ", ".join(attrs) + "}")
    lines.append(f"    irdl.operands({', '.join(operands)})")
    lines.append(f"    irdl.results({', '.join(results)})")
    lines.append("  }")
    return lines


def generate() -> str:
    lines = ["// The fusion dialect. Generated from mlirfuse/dialects/optable.py by",
             "// `python -m mlirfuse.dialects.gen_irdl`; do not edit by hand.",
             "irdl.dialect @fusion {"]
    for op in OPS.values():
        lines += _operation(op)
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    IRDL_PATH.write_text(generate())
    print(f"wrote {IRDL_PATH}")
