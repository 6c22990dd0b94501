# lit configuration for mlirfuse's IR tests (FileCheck over mlirfuse-opt / mlir-opt output).
#
#   lit -v test/lit          (from the repository root; no lit.site.cfg.py needed)
#
# Substitutions available in RUN lines:
#   mlirfuse-opt  -> `<this python> -m mlirfuse.tools.opt`, with the repository on PYTHONPATH
#   mlir-opt      -> the mlir-opt shipped in the installed `mlir` Python package (mlir/bin)
#   FileCheck     -> the `filecheck` command of the Python `filecheck` package
#   %irdl         -> mlirfuse/dialects/fusion.irdl.mlir (for `mlir-opt --irdl-file=%irdl`)
#   %python       -> this Python interpreter (sys.executable)
#   %inputs       -> test/lit/Inputs (helper scripts; not tests themselves)
# `not` is lit's internal-shell builtin (there is no `not` binary on PATH here), so the
# internal shell is forced below.
import os
import shutil
import sys
from pathlib import Path

import lit.formats

config.name = "mlirfuse"
config.test_format = lit.formats.ShTest(execute_external=False)  # `not` is a builtin here
config.suffixes = [".mlir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)

root = Path(__file__).resolve().parents[2]
python_path = [str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
config.environment["PYTHONPATH"] = os.pathsep.join(python_path)
for var in ("HOME", "MLIRFUSE_CACHE_DIR", "CUDA_HOME", "PATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

import mlir

mlir_opt = Path(next(iter(mlir.__path__))) / "bin" / "mlir-opt"
if not mlir_opt.exists():
    lit_config.fatal(f"mlir-opt not found at {mlir_opt} (is the MLIR tools wheel installed?)")
filecheck = shutil.which("filecheck", path=os.path.dirname(sys.executable)) or shutil.which("filecheck")
if filecheck is None:
    lit_config.fatal("the `filecheck` command (pip install filecheck) was not found")
python = sys.executable


def tool(name: str) -> str:
    """A pattern matching `name` as a whole command word (not inside a path or a longer name)."""
    return r"(?<![-\w./])" + name.replace("-", r"\-") + r"(?![-\w.])"


# Patterns ahead of lit's own %-substitutions; `mlirfuse-opt` is replaced before `mlir-opt`
# (the anchors keep either from matching inside the other).
config.substitutions.append(("%irdl", str(root / "mlirfuse" / "dialects" / "fusion.irdl.mlir")))
config.substitutions.append(("%python", python))
config.substitutions.append(("%inputs", str(Path(__file__).resolve().parent / "Inputs")))
config.substitutions.append((tool("mlirfuse-opt"), f"{python} -m mlirfuse.tools.opt"))
config.substitutions.append((tool("mlir-opt"), str(mlir_opt)))
config.substitutions.append((tool("FileCheck"), filecheck))
