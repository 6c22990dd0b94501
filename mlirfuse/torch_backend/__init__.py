"""mlirfuse as a torch.compile backend: `torch.compile(fn, backend="mlirfuse")`.

Registered through the `torch_dynamo_backends` entry point (no import of mlirfuse needed).
Fusible aten ops of the forward and backward graphs run as mlirfuse fusions; matmuls,
convolutions, embeddings and ops mlirfuse lacks stay torch calls between them. See the
README's "torch.compile backend" section.
"""

from mlirfuse.torch_backend.backend import (capture_partitions, compile_graph, decompositions, mlirfuse_backend,
                                            reset, stats)

__all__ = ["capture_partitions", "compile_graph", "decompositions", "mlirfuse_backend", "reset", "stats"]
