"""mlirfuse: a fusion compiler for tensor code, in Python on upstream MLIR.

    import mlirfuse
    f = mlirfuse.jit(lambda x, b: mlirfuse.ops.relu(x + b))

See README.md for the frontends, the op table and `mlirfuse-opt`.
"""

from mlirfuse import reference
from mlirfuse.config import options, restore_options, set_options
from mlirfuse.dtypes import DataType
from mlirfuse.errors import FusionError
from mlirfuse.frontend import ops
from mlirfuse.frontend.fusion_definition import FusionDefinition, compute_tensor_descriptor
from mlirfuse.frontend.graph import Tensor
from mlirfuse.frontend.grad import grad, vjp
from mlirfuse.frontend.jit import jit

__version__ = "0.1.0"
__all__ = ["DataType", "FusionDefinition", "FusionError", "compute_tensor_descriptor", "Tensor", "grad", "jit", "ops",
           "vjp",
           "options", "reference", "restore_options", "set_options"]
