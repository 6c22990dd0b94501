"""Lowering fusion IR.

Shared by both backends: `to_linalg` (fusion ops -> linalg on tensors; `scalar`, `approx`,
`philox`, `indexing` for op bodies; `linalg_builders`), `host_abi` (the destination-passing
entry point both backends export). Each backend is a package: `cpu` (loops, LLVM, the
ExecutionEngine) and `gpu` (schedules, kernels, NVVM, PTX, the CUDA runtime). The stages
that run them are listed in `mlirfuse.stages`.
"""
