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


def state_shape(op, shape, dim, cu_seqlens=None):
    """The shape of the per-sequence states (x0, x_final, their gradients): shape without dim,
    after (N,) for the N packed sequences of cu_seqlens (N + 1 offsets) when it is given."""
    if cu_seqlens is None:
        return without(shape, dim)
    if len(cu_seqlens.shape) != 1 or cu_seqlens.shape[0] < 1:
        raise ValueError(f"parscan.{op}: cu_seqlens has shape {tuple(cu_seqlens.shape)}; it must hold the N + 1 "
                         "offsets of N packed sequences (one dimension, at least one element)")
    return (cu_seqlens.shape[0] - 1,) + without(shape, dim)


def check_choice(op, what, value, choices):
    if value not in choices:
        options = ", ".join(f'"{c}"' for c in choices)
        raise ValueError(f"parscan.{op}: {what} must be one of {options}, not {value!r}")


FORMS = ("log", "value")
LOG_OUTPUTS = ("log", "value")
CHAIN_ORDERS = ("left_to_right", "right_to_left")
TENSOR_CORES = (None, False, "tf32", "bf16")


def check_log_forms(op, a_form, b_form, x0_form, output=None):
    for what, value in (("a_form", a_form), ("b_form", b_form), ("x0_form", x0_form)):
        check_choice(op, what, value, FORMS)
    if output is not None:
        check_choice(op, "output", output, LOG_OUTPUTS)


def check_signs(op, forms_and_signs):
    """A sign array goes with a log magnitude only: a value carries its own sign."""
    for name, form, sign in forms_and_signs:
        if sign is not None and form == "value":
            raise ValueError(f"parscan.{op}: {name}_negative is given, but {name} is in value form "
                             f"({name}_form=\"value\"): a sign array goes with a log magnitude only")


def chain_math(op, tensor_cores):
    """The extension's name for the arithmetic a matrix chain may use."""
    if tensor_cores is None or tensor_cores is False:
        return "exact"
    if tensor_cores in ("tf32", "bf16"):
        return tensor_cores
    raise ValueError(f"parscan.{op}: tensor_cores must be None, False, \"tf32\" or \"bf16\", not {tensor_cores!r}")


def matrix_step_dim(op, name, ndim, dim):
    """dim as a non-negative step dimension of b (any of its dimensions but the last, the state)."""
    if ndim < 2:
        raise ValueError(f"parscan.{op}: {name} must have a step dimension and the state (rank 2 or more)")
    d = normalize_dim(op, name, ndim, dim)
    if d == ndim - 1:
        raise ValueError(f"parscan.{op}: dim={dim} names the state dimension of {name}; it must name a step dimension")
    return d


def chain_dim(op, ndim, dim):
    """dim as a non-negative chain dimension of M (any but the last two, the matrices)."""
    if ndim < 3:
        raise ValueError(f"parscan.{op}: M must be (..., n, d, d): square matrices after at least one chain dimension")
    d = normalize_dim(op, "M", ndim, dim)
    if d >= ndim - 2:
        raise ValueError(f"parscan.{op}: dim={dim} names a matrix dimension of M; it must name a chain dimension")
    return d
