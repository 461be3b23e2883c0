"""float64 (complex128) reference loops the tests check parscan against: one step at a time, in
the plainest NumPy, with the time dimension moved to the front."""

import numpy as np


def wide(array):
    """array in float64 (complex128 for complex input): the reference's arithmetic."""
    array = np.asarray(array)
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    return array.astype(np.float64)


def gated_forward(a, b, x0=None, dim=-1, reverse=False, gate="linear"):
    """x[t] = a[t]·x[t-1] + b[t] along dim; returns (x, x_final) in float64 / complex128."""
    a, b = np.moveaxis(wide(a), dim, 0), np.moveaxis(wide(b), dim, 0)
    if gate == "log":
        a = np.exp(a)
    steps = range(a.shape[0] - 1, -1, -1) if reverse else range(a.shape[0])
    state = np.zeros(a.shape[1:], a.dtype) if x0 is None else wide(x0).copy()
    x = np.empty_like(a)
    for t in steps:
        state = a[t] * state + b[t]
        x[t] = state
    return np.moveaxis(x, 0, dim), state


def gated_backward(a, b, dx, x0=None, dx_final=None, dim=-1, reverse=False, gate="linear"):
    """(da, db, dx0) by the chain rule, one step at a time, PyTorch's complex convention
    (gradients are conj(∂x/∂input)·upstream); da is dL/dlog a with gate="log"."""
    x, _ = gated_forward(a, b, x0, dim, reverse, gate)
    a, x, dx = (np.moveaxis(wide(v), dim, 0) for v in (a, x, dx))
    gates = np.exp(a) if gate == "log" else a
    n = a.shape[0]
    order = list(range(n - 1, -1, -1)) if reverse else list(range(n))
    carry = np.zeros(a.shape[1:], a.dtype) if dx_final is None else wide(dx_final).copy()
    da, db = np.empty_like(a), np.empty_like(a)
    x_start = np.zeros(a.shape[1:], a.dtype) if x0 is None else wide(x0)
    for i in range(n - 1, -1, -1):  # the forward's steps, last computed first
        t = order[i]
        carry = carry + dx[t]
        db[t] = carry
        previous = x[order[i - 1]] if i > 0 else x_start
        da[t] = carry * np.conj(previous)
        if gate == "log":
            da[t] = da[t] * np.conj(gates[t])
        carry = np.conj(gates[t]) * carry
    dx0 = carry if x0 is not None else None
    return np.moveaxis(da, 0, dim), np.moveaxis(db, 0, dim), dx0


def cumulative(x, op="sum", dim=-1, reverse=False, exclusive=False):
    """The scan one step at a time, in float64 for floats and in the integer type itself."""
    x = np.asarray(x)
    integer_type = x.dtype if x.dtype.kind == "i" else None
    x = np.moveaxis(x.astype(np.int64) if integer_type else wide(x), dim, 0)
    combine = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op]
    if integer_type:
        info = np.iinfo(integer_type)  # an exclusive scan starts from the type's own limits
        identity = {"sum": 0, "max": info.min, "min": info.max}[op]
    else:
        identity = {"sum": 0.0, "max": -np.inf, "min": np.inf}[op]
    out = np.empty_like(x)
    state = np.full(x.shape[1:], identity, x.dtype)
    for t in (range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])):
        if exclusive:
            out[t] = state
        state = combine(state, x[t])
        if not exclusive:
            out[t] = state
    return np.moveaxis(out, 0, dim)


def from_log(log_magnitude, negative=None):
    """v = sign·exp(log|v|) in float64: what a log-form input stands for."""
    v = np.exp(wide(log_magnitude))
    return v if negative is None else np.where(np.asarray(negative) != 0, -v, v)


def log_backward(a, b, dx, x0=None, dlog_x_final=None, dim=-1, reverse=False, a_form="log", b_form="log",
                 x0_form="log", dx_form="log"):
    """(da, db, dx0) of the log-space recurrence by the chain rule, from the values: a, b, x0
    are float64 values here (the caller converts log-form inputs), and each gradient is then
    taken with respect to its input's form: dL/dlog|v| = dL/dv·v for log form."""
    x, x_final = gated_forward(a, b, x0, dim, reverse)
    upstream = wide(dx) if dx_form == "value" else wide(dx) / x
    final = None if dlog_x_final is None else wide(dlog_x_final) / x_final
    da, db, dx0 = gated_backward(a, b, upstream, x0, final, dim, reverse)
    if a_form == "log":
        da = da * a
    if b_form == "log":
        db = db * b
    if x0 is not None and x0_form == "log":
        dx0 = dx0 * x0
    return da, db, dx0


def log_backward_spread(a, b, dx, x0=None, dlog_x_final=None, dim=-1, reverse=False, a_form="log",
                        b_form="log", x0_form="log", dx_form="log", unit=2.0**-24, trials=4, seed=0):
    """How far log_backward's float64 result moves, element by element, when a, b and x0 move by
    one rounding of a unit roundoff (relative, random signs): the gradient's own sensitivity to
    the precision its inputs and states are held in. Signed inputs can drive a state to within
    1e-7 of zero; dividing the upstream gradient by it makes the gradients swing by a large
    fraction of their norm under a float32 rounding, and no float32 implementation can do better
    than that. Tests add a small multiple of this to their tolerance, so a well-conditioned draw
    (spread ~1e-6 of the norm) is checked as tightly as before, and an ill-conditioned one is not
    failed for what float32 cannot represent."""
    rng = np.random.default_rng(seed)
    nudge = (lambda v: None if v is None else
             wide(v) * (1.0 + unit * rng.choice([-1.0, 1.0], size=np.shape(v))))
    want = log_backward(a, b, dx, x0, dlog_x_final, dim, reverse, a_form, b_form, x0_form, dx_form)
    spread = [None if w is None else np.zeros(np.shape(w)) for w in want]
    for _ in range(trials):
        moved = log_backward(nudge(a), nudge(b), dx, nudge(x0), dlog_x_final, dim, reverse, a_form, b_form,
                             x0_form, dx_form)
        spread = [None if w is None else np.maximum(s, np.abs(m - w)) for s, m, w in zip(spread, moved, want)]
    return tuple(spread)


def matrix_forward(W, b, x0=None, dim=-2, reverse=False):
    """x[t] = W[t] @ x[t-1] + b[t] along dim of b; returns (x, x_final) in float64."""
    dim = dim % np.ndim(b)  # W has one more dimension: count dim from the front for both
    b = np.moveaxis(wide(b), dim, 0)
    W = np.moveaxis(wide(W), dim, 0)
    state = np.zeros(b.shape[1:]) if x0 is None else wide(x0).copy()
    x = np.empty_like(b)
    for t in (range(b.shape[0] - 1, -1, -1) if reverse else range(b.shape[0])):
        state = np.einsum("...ij,...j->...i", W[t], state) + b[t]
        x[t] = state
    return np.moveaxis(x, 0, dim), state


def matrix_backward(W, b, dx, x0=None, dx_final=None, dim=-2, reverse=False):
    """(dW, db, dx0) of the matrix recurrence by the chain rule, one step at a time."""
    x, _ = matrix_forward(W, b, x0, dim, reverse)
    dim = dim % np.ndim(b)
    W, x, dx = np.moveaxis(wide(W), dim, 0), np.moveaxis(x, dim, 0), np.moveaxis(wide(dx), dim, 0)
    n = x.shape[0]
    order = list(range(n - 1, -1, -1)) if reverse else list(range(n))
    carry = np.zeros(x.shape[1:]) if dx_final is None else wide(dx_final).copy()
    x_start = np.zeros(x.shape[1:]) if x0 is None else wide(x0)
    dW, db = np.empty_like(W), np.empty_like(x)
    for i in range(n - 1, -1, -1):  # the forward's steps, last computed first
        t = order[i]
        carry = carry + dx[t]
        db[t] = carry
        previous = x[order[i - 1]] if i > 0 else x_start
        dW[t] = carry[..., :, None] * previous[..., None, :]
        carry = np.einsum("...ji,...j->...i", W[t], carry)
    return np.moveaxis(dW, 0, dim), np.moveaxis(db, 0, dim), (carry if x0 is not None else None)


def matrix_chain(M, prefixes=False, order="left_to_right", dim=-3):
    """Products of the matrices of M along dim, in float64: the total or every prefix."""
    M = np.moveaxis(wide(M), dim, 0)
    d = M.shape[-1]
    product = np.broadcast_to(np.eye(d), M.shape[1:]).copy()
    out = np.empty_like(M)
    for k in range(M.shape[0]):
        product = product @ M[k] if order == "left_to_right" else M[k] @ product
        out[k] = product
    return np.moveaxis(out, 0, dim) if prefixes else product


# Tolerances, relative to max(1, |reference|) element by element. The reference runs in float64
# on the very inputs parscan saw (16-bit inputs already rounded), so what is left is parscan's
# compute precision (float32 for every type but float64) over the steps, plus the rounding of
# the stored result: 2^-8 for bfloat16, 2^-11 for float16. A wrong step, order or stride is off
# by O(1), far beyond all of these.
TOLERANCE = {
    "float64": 1e-12,
    "float32": 2e-5,
    "complex64": 2e-5,
    "float16": 2e-3,
    "bfloat16": 1.6e-2,
    # float32 products on tf32 tensor cores (10-bit mantissas) along a chain: measured up to
    # 2.4e-3 on an H100 for the chains of test_jax_log_matrix.
    "tf32": 1e-2,
}


def assert_close(actual, expected, dtype_name, what=""):
    actual, expected = wide(actual), wide(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert not np.isnan(actual).any(), f"{what}: NaN in the result (an element left unwritten?)"
    with np.errstate(invalid="ignore"):  # equal infinities (an exclusive max starts at -inf) are exact
        error = np.where(actual == expected, 0.0, np.abs(actual - expected) / np.maximum(1.0, np.abs(expected)))
    worst = float(error.max()) if error.size else 0.0
    assert worst <= TOLERANCE[dtype_name], f"{what}: relative error {worst:.3g} > {TOLERANCE[dtype_name]:.3g} ({dtype_name})"
