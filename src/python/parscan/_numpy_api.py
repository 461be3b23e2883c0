"""The NumPy front end: NumPy arrays in, new NumPy arrays out, on the host backend.

bfloat16 arrays (ml_dtypes.bfloat16, what JAX uses) are accepted: NumPy has no bfloat16 of its
own, so they reach the extension as uint16 views of their bits.
"""

import numpy as np

from . import _core
from ._shapes import (CHAIN_ORDERS, GATES, SCAN_OPERATORS, chain_dim, chain_math, check_choice, check_log_forms,
                      check_signs, matrix_step_dim, normalize_dim, state_shape, without)


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


def _offsets(cu_seqlens):
    """cu_seqlens as given (the extension checks its dtype, int64 or int32, and layout)."""
    return None if cu_seqlens is None else np.asarray(cu_seqlens)


def gated_recurrence(a, b, x0=None, *, dim=-1, reverse=False, gate="linear", return_final=False, cu_seqlens=None):
    """x[t] = a[t] * x[t-1] + b[t] along dimension ``dim``, with x[-1] = x0 (or 0).

    a and b have one shape (any rank; the time dimension is ``dim``) and one dtype: float32,
    float64, bfloat16, float16 or complex64 (16-bit types compute in float32). Any strides work
    as long as the dimensions other than ``dim`` collapse into two strided ones (every
    contiguous array, transposed or not, and most slices do); otherwise ValueError names the
    array. x0, if given, has the shape of a without ``dim``. With ``reverse`` the recurrence runs
    from the last step to the first: x[t] = a[t] * x[t+1] + b[t]. With gate="log", a holds
    log a[t]. Returns x (C-contiguous, a's shape and dtype), and with ``return_final`` also the
    last state computed (shape of a without ``dim``), which chains chunks through x0.

    Packed sequences: with ``cu_seqlens`` (N + 1 int64 or int32 offsets, non-decreasing from 0),
    dimension ``dim`` holds N sequences one after another, sequence n at steps
    [cu_seqlens[n], cu_seqlens[n+1]), each its own recurrence from x0[n] (or 0) to x_final[n].
    The other dimensions must collapse into one strided dimension ((total, D), (D, total),
    (total, H, P), ...); x0 and x_final then have the shape (N,) + a's shape without ``dim``.
    Steps past cu_seqlens[N] are not computed: their x is unspecified. Offsets that break the
    rule raise ValueError.
    """
    op = "gated_recurrence"
    check_choice(op, "gate", gate, GATES)
    a, b, x0 = _as_array("a", a), _as_array("b", b), _as_array("x0", x0)
    offsets = _offsets(cu_seqlens)
    d = normalize_dim(op, "a", a.ndim, dim)
    x = np.empty(a.shape, a.dtype)
    x_final = np.empty(state_shape(op, a.shape, d, offsets), a.dtype) if return_final else None
    if x0 is not None:
        x0 = np.asarray(x0, order="C")
    _core.gated_forward(_bits(a), _bits(b), _bits(x), _bits(x0), _bits(x_final), d, bool(reverse), gate,
                        cu_seqlens=offsets)
    return (x, x_final) if return_final else x


def gated_recurrence_backward(a, dx, *, x=None, b=None, x0=None, dx_final=None, dim=-1, reverse=False, gate="linear",
                              cu_seqlens=None):
    """Gradients of gated_recurrence: returns (da, db, dx0), dx0 None without x0.

    dx = dL/dx (x's shape), dx_final = dL/dx_final (optional). x is the forward's output; if it
    is not given, it is recomputed from b (and x0). With gate="log", da is dL/dlog a. For complex
    inputs the gradients follow PyTorch's convention (conjugate Wirtinger: da = db * conj(x[t-1])).
    With ``cu_seqlens``, per packed sequence as in gated_recurrence (the states (N,) + ...;
    da and db unspecified past cu_seqlens[N]).
    """
    op = "gated_recurrence_backward"
    check_choice(op, "gate", gate, GATES)
    a, dx = _as_array("a", a), _as_array("dx", dx)
    x, b, x0, dx_final = (_as_array(n, v) for n, v in (("x", x), ("b", b), ("x0", x0), ("dx_final", dx_final)))
    if x is None and b is None:
        raise ValueError(f"parscan.{op}: give the forward's output x, or b to recompute it")
    offsets = _offsets(cu_seqlens)
    d = normalize_dim(op, "a", a.ndim, dim)
    da, db = np.empty(a.shape, a.dtype), np.empty(a.shape, a.dtype)
    dx0 = np.empty(state_shape(op, a.shape, d, offsets), a.dtype) if x0 is not None else None
    if x0 is not None:
        x0 = np.asarray(x0, order="C")
    if dx_final is not None:
        dx_final = np.asarray(dx_final, order="C")
    _core.gated_backward(_bits(a), _bits(x), _bits(b), _bits(x0), _bits(dx), _bits(dx_final), _bits(da), _bits(db),
                         _bits(dx0), d, bool(reverse), gate, cu_seqlens=offsets)
    return da, db, dx0


def cumulative(x, op="sum", *, dim=-1, reverse=False, exclusive=False, cu_seqlens=None):
    """Inclusive (or exclusive) scan of x along ``dim`` with op = "sum", "max" or "min".

    dtypes: float32, float64, bfloat16, float16 (accumulated in float32), int32, int64 (in their
    own type, wrapping on overflow), complex64 (sum only). ``exclusive``: out[t] combines the
    steps before t, starting from op's identity (0, -inf, +inf; the integer limits for ints).
    ``reverse`` scans from the last step to the first. Returns a new array of x's shape and dtype.

    Packed segments: with ``cu_seqlens`` (N + 1 int64 or int32 offsets, non-decreasing from 0),
    dimension ``dim`` holds N segments one after another, segment n at [cu_seqlens[n],
    cu_seqlens[n+1]), each scanned on its own (a segmented scan; no key is read per element).
    x then holds one packed sequence: every other dimension has size 1, and x is contiguous
    along ``dim`` (ValueError otherwise). Elements past cu_seqlens[N] are not computed (their
    out is unspecified). Offsets that break the rule raise ValueError.
    """
    check_choice("cumulative", "op", op, SCAN_OPERATORS)
    x = _as_array("x", x)
    d = normalize_dim("cumulative", "x", x.ndim, dim)
    out = np.empty(x.shape, x.dtype)
    _core.cumulative(_bits(x), _bits(out), op, d, bool(reverse), bool(exclusive), cu_seqlens=_offsets(cu_seqlens))
    return out


def _accumulator_dtype(dtype):
    return np.dtype(np.float32) if dtype == np.float16 or dtype.name == "bfloat16" else dtype


def reduce(x, op="sum", *, dim=-1, cu_seqlens=None):
    """Reduction of x along ``dim`` with op = "sum", "max" or "min" (dtypes as for cumulative).

    Returns x's shape without ``dim``, in x's dtype (16-bit floats are accumulated in float32 and
    rounded once at the end). With ``cu_seqlens`` (as for cumulative), one result per packed
    segment: shape (N,) + x's shape without ``dim``; an empty segment gives op's identity.
    """
    check_choice("reduce", "op", op, SCAN_OPERATORS)
    x = _as_array("x", x)
    d = normalize_dim("reduce", "x", x.ndim, dim)
    offsets = _offsets(cu_seqlens)
    out = np.empty(state_shape("reduce", x.shape, d, offsets), _accumulator_dtype(x.dtype))
    _core.reduce(_bits(x), out, op, d, cu_seqlens=offsets)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


# ---------------------------------------------------------------------------------------------
# The log-space recurrence.


def _sign(name, value):
    if value is None:
        return None
    sign = np.asarray(value)
    if sign.dtype != np.bool_ and sign.dtype != np.uint8:
        raise TypeError(f"parscan: {name} has dtype {sign.dtype}; a sign array is bool or uint8")
    return sign


def _with_sign(magnitude, sign, dense=False):
    """A magnitude and its sign array with one set of element strides, which is how parscan
    addresses them: as given where they already agree, else both as contiguous copies."""
    # np.asarray(order="C"), not np.ascontiguousarray, which turns the 0-d state of a 1-d
    # sequence into shape (1,).
    if dense and magnitude is not None:
        magnitude = np.asarray(magnitude, order="C")
    if sign is None:
        return magnitude, None
    if sign.shape == magnitude.shape and all(
            n <= 1 or m // magnitude.itemsize == s // sign.itemsize
            for n, m, s in zip(magnitude.shape, magnitude.strides, sign.strides)):
        return magnitude, sign
    return np.asarray(magnitude, order="C"), np.asarray(sign, order="C")


def log_recurrence(a, b, x0=None, *, dim=-1, reverse=False, a_negative=None, b_negative=None, x0_negative=None,
                   a_form="log", b_form="log", x0_form="log", output="log", return_final=False,
                   cu_seqlens=None):
    """x[t] = a[t] * x[t-1] + b[t] carried in log space, along dimension ``dim``.

    Each input is given in log form (log|v|, with an optional bool/uint8 sign array
    ``*_negative``, nonzero = negative; none means positive) or in value form (v itself;
    ``*_form="value"``, no sign array). a and b: one shape and dtype, float32 or bfloat16
    (arithmetic in float32). x0 (optional): the shape of a without ``dim``. ``output="log"``
    returns (log|x|, x_negative) with x_negative bool; ``output="value"`` returns x itself (which
    overflows to ±inf or underflows to 0 where |x| leaves the dtype's range; log|x| does not).
    With ``return_final`` the final state follows, always in log form: log|x_final| and
    x_final_negative, which chain chunks through x0 (x0_form="log"). ``cu_seqlens``: packed
    sequences along ``dim``, as for gated_recurrence (every state then (N,) + ...).
    """
    op = "log_recurrence"
    check_log_forms(op, a_form, b_form, x0_form, output)
    check_signs(op, (("a", a_form, a_negative), ("b", b_form, b_negative), ("x0", x0_form, x0_negative)))
    a, b, x0 = _as_array("a", a), _as_array("b", b), _as_array("x0", x0)
    a, a_negative = _with_sign(a, _sign("a_negative", a_negative))
    b, b_negative = _with_sign(b, _sign("b_negative", b_negative))
    x0, x0_negative = _with_sign(x0, _sign("x0_negative", x0_negative), dense=True)
    offsets = _offsets(cu_seqlens)
    d = normalize_dim(op, "a", a.ndim, dim)
    log_x = x_negative = x = log_x_final = x_final_negative = None
    if output == "log":
        log_x, x_negative = np.empty(a.shape, a.dtype), np.empty(a.shape, np.bool_)
    else:
        x = np.empty(a.shape, a.dtype)
    if return_final:
        state = state_shape(op, a.shape, d, offsets)
        log_x_final, x_final_negative = np.empty(state, a.dtype), np.empty(state, np.bool_)
    _core.log_forward(_bits(a), _bits(b), _bits(log_x), x_negative, _bits(x), _bits(x0), a_negative, b_negative,
                      x0_negative, _bits(log_x_final), x_final_negative, a_form, b_form, x0_form, d, bool(reverse),
                      cu_seqlens=offsets)
    result = (log_x, x_negative) if output == "log" else (x,)
    if return_final:
        result += (log_x_final, x_final_negative)
    return result[0] if len(result) == 1 else result


def log_recurrence_backward(a, b, dx, *, x0=None, a_negative=None, b_negative=None, x0_negative=None, log_x=None,
                            x_negative=None, dlog_x_final=None, dim=-1, reverse=False, a_form="log", b_form="log",
                            x0_form="log", dx_form="log", cu_seqlens=None):
    """Gradients of log_recurrence: returns (da, db, dx0), dx0 None without x0.

    Each gradient is with respect to its input in the form it was given: dL/dlog|a| for a in
    log form, dL/da for a in value form, and so on. dx is the upstream gradient dL/dlog|x|, or
    dL/dx with dx_form="value"; dlog_x_final is dL/dlog|x_final| (optional). log_x and
    x_negative are the forward's log-form output; without them x is recomputed. Sign arrays are
    not differentiable. ``cu_seqlens``: packed sequences, as for the forward.
    """
    op = "log_recurrence_backward"
    check_log_forms(op, a_form, b_form, x0_form)
    check_choice(op, "dx_form", dx_form, ("log", "value"))
    check_signs(op, (("a", a_form, a_negative), ("b", b_form, b_negative), ("x0", x0_form, x0_negative)))
    a, b, dx, x0 = _as_array("a", a), _as_array("b", b), _as_array("dx", dx), _as_array("x0", x0)
    log_x, dlog_x_final = _as_array("log_x", log_x), _as_array("dlog_x_final", dlog_x_final)
    a, a_negative = _with_sign(a, _sign("a_negative", a_negative))
    b, b_negative = _with_sign(b, _sign("b_negative", b_negative))
    x0, x0_negative = _with_sign(x0, _sign("x0_negative", x0_negative), dense=True)
    if log_x is not None:
        log_x, x_negative = _with_sign(log_x, _sign("x_negative", x_negative))
    if dlog_x_final is not None:
        dlog_x_final = np.asarray(dlog_x_final, order="C")
    offsets = _offsets(cu_seqlens)
    d = normalize_dim(op, "a", a.ndim, dim)
    da, db = np.empty(a.shape, a.dtype), np.empty(a.shape, a.dtype)
    dx0 = np.empty(state_shape(op, a.shape, d, offsets), a.dtype) if x0 is not None else None
    _core.log_backward(_bits(a), _bits(b), _bits(dx), _bits(da), _bits(db), _bits(x0), a_negative, b_negative,
                       x0_negative, _bits(log_x), x_negative, _bits(dlog_x_final), _bits(dx0), a_form, b_form, x0_form,
                       dx_form, d, bool(reverse), cu_seqlens=offsets)
    return da, db, dx0


# ---------------------------------------------------------------------------------------------
# The matrix recurrence and matrix chains.


def matrix_recurrence(W, b, x0=None, *, dim=-2, reverse=False, return_final=False, cu_seqlens=None):
    """x[t] = W[t] @ x[t-1] + b[t] along dimension ``dim`` of b, with x[-1] = x0 (or 0).

    b: (..., N) with N = 1..64 in its last dimension; ``dim`` names one of the others (default:
    the one before N). W: b's shape followed by N, W[..., t, i, j] (row-major matrices). The
    vectors and matrices must be dense; the dimensions other than ``dim`` must collapse into one
    strided dimension (any contiguous array with dim first or next to the state does). dtypes:
    float32, float64, bfloat16, float16 (16-bit types compute in float32). x0: b's shape without
    ``dim``. Returns x (b's shape), and with ``return_final`` also the last state computed.

    Packed sequences: with ``cu_seqlens`` (N + 1 int64 or int32 offsets), ``dim`` holds N
    sequences one after another, each its own recurrence from x0[n] to x_final[n] (b is
    (total, N) and W (total, N, N), or with more dimensions of size 1); x0 and x_final are
    (N,) + b's shape without ``dim``. Steps past cu_seqlens[N] are not computed.
    """
    op = "matrix_recurrence"
    W, b, x0 = _as_array("W", W), _as_array("b", b), _as_array("x0", x0)
    offsets = _offsets(cu_seqlens)
    d = matrix_step_dim(op, "b", b.ndim, dim)
    x = np.empty(b.shape, b.dtype)
    x_final = np.empty(state_shape(op, b.shape, d, offsets), b.dtype) if return_final else None
    if x0 is not None:
        x0 = np.ascontiguousarray(x0)
    _core.matrix_forward(_bits(W), _bits(b), _bits(x), _bits(x0), _bits(x_final), d, bool(reverse),
                         cu_seqlens=offsets)
    return (x, x_final) if return_final else x


def matrix_recurrence_backward(W, dx, *, x=None, b=None, x0=None, dx_final=None, dim=-2, reverse=False,
                               cu_seqlens=None):
    """Gradients of matrix_recurrence: returns (dW, db, dx0), dx0 None without x0.

    dx = dL/dx, dx_final = dL/dx_final (optional). x is the forward's output; without it, it is
    recomputed from b (and x0). ``cu_seqlens``: packed sequences, as for the forward.
    """
    op = "matrix_recurrence_backward"
    W, dx = _as_array("W", W), _as_array("dx", dx)
    x, b, x0, dx_final = (_as_array(n, v) for n, v in (("x", x), ("b", b), ("x0", x0), ("dx_final", dx_final)))
    if x is None and b is None:
        raise ValueError(f"parscan.{op}: give the forward's output x, or b to recompute it")
    offsets = _offsets(cu_seqlens)
    d = matrix_step_dim(op, "dx", dx.ndim, dim)
    dW, db = np.empty(W.shape, dx.dtype), np.empty(dx.shape, dx.dtype)
    dx0 = np.empty(state_shape(op, dx.shape, d, offsets), dx.dtype) if x0 is not None else None
    if x0 is not None:
        x0 = np.ascontiguousarray(x0)
    if dx_final is not None:
        dx_final = np.ascontiguousarray(dx_final)
    _core.matrix_backward(_bits(W), _bits(x), _bits(b), _bits(x0), _bits(dx), _bits(dx_final), _bits(dW), _bits(db),
                          _bits(dx0), d, bool(reverse), cu_seqlens=offsets)
    return dW, db, dx0


def matrix_chain(M, *, prefixes=False, order="left_to_right", tensor_cores=None, dim=-3):
    """Products of the d×d matrices of M (..., n, d, d) along its chain dimension ``dim``.

    order="left_to_right": P_k = M_0 @ M_1 @ ... @ M_k; "right_to_left": P_k = M_k @ ... @ M_0.
    Returns the whole product (M's shape without ``dim``) or, with ``prefixes``, every P_k
    (M's shape). d = 1..1024; dtypes float32, float64, bfloat16, float16 (products carried in
    float32, or float64). tensor_cores="tf32" or "bf16" allows tensor-core multiplies where the
    backend has them (CUDA; the host computes exactly). Forward only: no gradient.
    """
    op = "matrix_chain"
    check_choice(op, "order", order, CHAIN_ORDERS)
    math = chain_math(op, tensor_cores)
    M = _as_array("M", M)
    d = chain_dim(op, M.ndim, dim)
    out = np.empty(M.shape if prefixes else without(M.shape, d), M.dtype)
    _core.matrix_chain(_bits(M), _bits(out), d, bool(prefixes), order, math)
    return out
