"""The one exception type users see."""


class FusionError(ValueError, RuntimeError):
    """A user mistake: bad shapes, dtypes, axes, arguments or IR.

    Messages name the op or argument and the offending shapes/dtypes. A ValueError, and a
    RuntimeError as nvFuser's errors are (programs written against it catch those).
    """


class IndexOutOfRange(FusionError, IndexError):
    """A gather's index outside its dim at run time (torch.gather, index_select, embedding,
    a cross-entropy's target): raised by the CPU backend after the call, as torch raises (on
    the GPU the kernel's device-side assert stops it, as torch's kernels do)."""
