"""The CPU backend: `compile` (the stages of `mlirfuse.stages.cpu_stages`, the ExecutionEngine
or a linked library, the call) and `host_library` (linking the JIT-compiled code into a shared
library a later process dlopens)."""
