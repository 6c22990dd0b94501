"""The GPU backend, one module per job, in the order of the stages (`mlirfuse.stages.gpu_stages`):

  heuristics      pure functions: a kernel's schedule parameters from sizes and the device
  schedule_attrs  the `mlirfuse.schedule` attribute: parameters <-> IR, checks of a hand-written one
  schedule        gpu-schedule (record the heuristics' choice on each linalg op) and
                  gpu-apply-schedules (replace each op by its schedule's kernel)
  kernels         what the kernels share: a generic as data, body cloning, vector loads and
                  stores, the guarded launch (philox_sharing: one Philox call per vector)
  pointwise, transpose, reduction (inner), column, normalization: each schedule's match and
                  kernel (normalization_kernel: the chain's kernel itself)
  naive           what no schedule took: unit loops, one thread an iteration, device buffers
  launches        after the loops: kernel constants, launch lines and counts, one gpu.module
  host_overrides  the host's stream, allocation, loading and launch calls: the caller's stream,
                  allocator and device context
  compile         compile_gpu: the stages run, the artifacts kept
  runtime         loading and calling the compiled module (CUDA runtime, torch streams)
  toolchain       libdevice, ptxas, PTX versions

Every kernel is one `gpu.launch` (a column reduction two) under a host `scf.if` (nothing to
do for empty tensors) tagged `mlirfuse.schedule`; run-time variants (vector or scalar) are
uniform branches inside it, so the number of `gpu.launch` ops is the number of launches per
call.
"""
