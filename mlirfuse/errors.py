"""The one exception type users see."""


class FusionError(ValueError, RuntimeError):
    """A user mistake: bad shapes, dtypes, axes, arguments or IR.

    Messages name the op or argument and the offending shapes/dtypes. A ValueError, and a
    RuntimeError as nvFuser's errors are (programs written against it catch those).
    """
