"""The one exception type users see."""


class FusionError(ValueError):
    """A user mistake: bad shapes, dtypes, axes, arguments or IR.

    Messages name the op or argument and the offending shapes/dtypes.
    """
