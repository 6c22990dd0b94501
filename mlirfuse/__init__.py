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
from mlirfuse.frontend.fusion_definition import FusionDefinition, clone
from mlirfuse.frontend.nvfuser_api import (FusionCache, compute_contiguity, compute_tensor_descriptor,
                                          disable_automatic_serialization, enable_automatic_serialization)
from mlirfuse.frontend.nvfuser_api import ScalarValue as Scalar
from mlirfuse.frontend.nvfuser_api import TensorValue as Tensor
from mlirfuse.frontend.grad import grad, vjp
from mlirfuse.frontend.jit import jit

__version__ = "0.1.0"
__all__ = ["DataType", "FusionCache", "FusionDefinition", "FusionError", "Scalar", "Tensor", "clone",
           "compute_contiguity",
           "compute_tensor_descriptor", "disable_automatic_serialization", "enable_automatic_serialization", "grad",
           "jit", "ops", "options", "reference", "restore_options", "set_options", "version", "vjp"]


def version() -> str:
    """mlirfuse's version, a `nvfuser_version.Version`: a string that compares as a version
    (nvFuser's `version()`)."""
    from mlirfuse.nvfuser_version import Version

    return Version(__version__)
