# lit configuration for mlirfuse's IR tests (FileCheck over mlirfuse-opt / mlir-opt output).
import os
import shutil
import sys
from pathlib import Path

import lit.formats

config.name = "mlirfuse"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)

root = Path(__file__).resolve().parents[2]
config.environment["PYTHONPATH"] = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
for var in ("HOME", "MLIRFUSE_CACHE_DIR", "CUDA_HOME", "PATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

import mlir  # noqa: E402

mlir_bin = Path(list(mlir.__path__)[0]) / "bin"
filecheck = shutil.which("filecheck", path=os.path.dirname(sys.executable)) or shutil.which("filecheck")
if filecheck is None:
    lit_config.fatal("the `filecheck` command (pip install filecheck) was not found")
python = sys.executable
config.substitutions.append(("%irdl", str(root / "mlirfuse" / "dialects" / "fusion.irdl.mlir")))
config.substitutions.append(("%python", python))
config.substitutions.append(("mlirfuse-opt", f"{python} -m mlirfuse.tools.opt"))
config.substitutions.append(("mlir-opt", str(mlir_bin / "mlir-opt")))
config.substitutions.append(("FileCheck", filecheck))
