"""Shape rules shared by the NumPy, PyTorch and JAX front ends (no framework imports here)."""

GATES = ("linear", "log")
SCAN_OPERATORS = ("sum", "max", "min")


def normalize_dim(op, name, ndim, dim):
    """dim as a non-negative axis of an array of rank ndim; ValueError naming the array if not."""
    if ndim == 0:
        raise ValueError(f"parscan.{op}: {name} must have at least one dimension")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"parscan.{op}: dim must be an int, not {type(dim).__name__}")
    if not -ndim <= dim < ndim:
        raise ValueError(f"parscan.{op}: dim={dim} is out of range for {name} of rank {ndim}")
    return dim % ndim


def without(shape, dim):
    """The shape of the per-sequence state: shape with dimension dim removed."""
    return tuple(shape[:dim]) + tuple(shape[dim + 1:])


def check_choice(op, what, value, choices):
    if value not in choices:
        options = ", ".join(f'"{c}"' for c in choices)
        raise ValueError(f"parscan.{op}: {what} must be one of {options}, not {value!r}")
