"""The NumPy front end: NumPy arrays in, new NumPy arrays out, on the host backend.

bfloat16 arrays (ml_dtypes.bfloat16, what JAX uses) are accepted: NumPy has no bfloat16 of its
own, so they reach the extension as uint16 views of their bits.
"""

import numpy as np

from . import _core
from ._shapes import GATES, SCAN_OPERATORS, check_choice, normalize_dim, without


def _as_array(name, value):
    if value is None:
        return None
    array = np.asarray(value)
    if array.dtype.kind not in "fciu" and array.dtype.name != "bfloat16":
        raise TypeError(f"parscan: {name} has dtype {array.dtype}, which parscan does not take")
    return array


def _bits(array):
    """What the extension receives: bfloat16 as its uint16 bit pattern, anything else as is."""
    if array is not None and array.dtype.name == "bfloat16":
        return array.view(np.uint16)
    return array


def gated_recurrence(a, b, x0=None, *, dim=-1, reverse=False, gate="linear", return_final=False):
    """x[t] = a[t] * x[t-1] + b[t] along dimension ``dim``, with x[-1] = x0 (or 0).

    a and b have one shape (any rank; the time dimension is ``dim``) and one dtype: float32,
    float64, bfloat16, float16 or complex64 (16-bit types compute in float32). Any strides work
    as long as the dimensions other than ``dim`` collapse into two strided ones (every
    contiguous array, transposed or not, and most slices do); otherwise ValueError names the
    array. x0, if given, has the shape of a without ``dim``. With ``reverse`` the recurrence runs
    from the last step to the first: x[t] = a[t] * x[t+1] + b[t]. With gate="log", a holds
    log a[t]. Returns x (C-contiguous, a's shape and dtype), and with ``return_final`` also the
    last state computed (shape of a without ``dim``), which chains chunks through x0.
    """
    op = "gated_recurrence"
    check_choice(op, "gate", gate, GATES)
    a, b, x0 = _as_array("a", a), _as_array("b", b), _as_array("x0", x0)
    d = normalize_dim(op, "a", a.ndim, dim)
    x = np.empty(a.shape, a.dtype)
    x_final = np.empty(without(a.shape, d), a.dtype) if return_final else None
    if x0 is not None:
        x0 = np.asarray(x0, order="C")
    _core.gated_forward(_bits(a), _bits(b), _bits(x), _bits(x0), _bits(x_final), d, bool(reverse), gate)
    return (x, x_final) if return_final else x


def gated_recurrence_backward(a, dx, *, x=None, b=None, x0=None, dx_final=None, dim=-1, reverse=False, gate="linear"):
    """Gradients of gated_recurrence: returns (da, db, dx0), dx0 None without x0.

    dx = dL/dx (x's shape), dx_final = dL/dx_final (optional). x is the forward's output; if it
    is not given, it is recomputed from b (and x0). With gate="log", da is dL/dlog a. For complex
    inputs the gradients follow PyTorch's convention (conjugate Wirtinger: da = db * conj(x[t-1])).
    """
    op = "gated_recurrence_backward"
    check_choice(op, "gate", gate, GATES)
    a, dx = _as_array("a", a), _as_array("dx", dx)
    x, b, x0, dx_final = (_as_array(n, v) for n, v in (("x", x), ("b", b), ("x0", x0), ("dx_final", dx_final)))
    if x is None and b is None:
        raise ValueError(f"parscan.{op}: give the forward's output x, or b to recompute it")
    d = normalize_dim(op, "a", a.ndim, dim)
    da, db = np.empty(a.shape, a.dtype), np.empty(a.shape, a.dtype)
    dx0 = np.empty(without(a.shape, d), a.dtype) if x0 is not None else None
    if x0 is not None:
        x0 = np.asarray(x0, order="C")
    if dx_final is not None:
        dx_final = np.asarray(dx_final, order="C")
    _core.gated_backward(_bits(a), _bits(x), _bits(b), _bits(x0), _bits(dx), _bits(dx_final), _bits(da), _bits(db),
                         _bits(dx0), d, bool(reverse), gate)
    return da, db, dx0


def cumulative(x, op="sum", *, dim=-1, reverse=False, exclusive=False):
    """Inclusive (or exclusive) scan of x along ``dim`` with op = "sum", "max" or "min".

    dtypes: float32, float64, bfloat16, float16 (accumulated in float32), int32, int64 (in their
    own type, wrapping on overflow), complex64 (sum only). ``exclusive``: out[t] combines the
    steps before t, starting from op's identity (0, -inf, +inf; the integer limits for ints).
    ``reverse`` scans from the last step to the first. Returns a new array of x's shape and dtype.
    """
    check_choice("cumulative", "op", op, SCAN_OPERATORS)
    x = _as_array("x", x)
    d = normalize_dim("cumulative", "x", x.ndim, dim)
    out = np.empty(x.shape, x.dtype)
    _core.cumulative(_bits(x), _bits(out), op, d, bool(reverse), bool(exclusive))
    return out


def _accumulator_dtype(dtype):
    return np.dtype(np.float32) if dtype == np.float16 or dtype.name == "bfloat16" else dtype


def reduce(x, op="sum", *, dim=-1):
    """Reduction of x along ``dim`` with op = "sum", "max" or "min" (dtypes as for cumulative).

    Returns x's shape without ``dim``, in x's dtype (16-bit floats are accumulated in float32 and
    rounded once at the end).
    """
    check_choice("reduce", "op", op, SCAN_OPERATORS)
    x = _as_array("x", x)
    d = normalize_dim("reduce", "x", x.ndim, dim)
    out = np.empty(without(x.shape, d), _accumulator_dtype(x.dtype))
    _core.reduce(_bits(x), out, op, d)
    return out if out.dtype == x.dtype else out.astype(x.dtype)
