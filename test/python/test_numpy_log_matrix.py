"""log_recurrence, matrix_recurrence and matrix_chain through the NumPy front end and the
extension module on the host backend, against float64 loops (reference.py) on fresh random
inputs; outputs of the low-level calls are poisoned first, so an element left unwritten fails.

Tolerances (relative to max(1, |reference|), element by element):
- log_recurrence: float32 5e-5 (every step takes a log and an exp in float32, a few ulps more
  than the linear recurrence's multiply-add), bfloat16 1.6e-2 (the stored log magnitudes carry
  8 bits). Gradients: float32 5e-4 (the backward carries the gradient in log form too, and a
  log-form upstream gradient is divided by x: each step adds a few round trips through log and
  exp), bfloat16 6e-2, where the backward reads
  log|x| rounded to 8 bits (an absolute error of up to 2^-9·|log|x||, i.e. a relative one in x,
  at every step) and sums such terms over the steps. With signed inputs, states pass near zero
  and the gradients of neighbouring steps cancel, so there the error is taken relative to the
  largest gradient of the tensor (normwise) rather than element by element, and float32 gets
  1e-2: a state near zero is known to float32 only to an absolute error of about 2^-24 times
  the terms that cancelled in it, and both log|x| and the gradients through it inherit that.
  A draw whose state lands within ~1e-7 of zero makes the gradients themselves swing by tens of
  percent of their norm under one rounding of the inputs, so signed gradient checks also allow
  GRADIENT_SPREAD_FACTOR times that swing (reference.log_backward_spread, element by element):
  nothing for a well-conditioned draw, and what float32 cannot represent for an ill-conditioned one.
- matrix_recurrence and matrix_chain: reference.TOLERANCE for the dtype (float64 1e-12, float32
  2e-5, float16 2e-3, bfloat16 1.6e-2), with N-term dot products per step; inputs keep the
  states of order 1 (spectral norm of W below 1, chain factors near the identity).
"""

import numpy as np
import pytest

import parscan
from parscan import _core

import reference as ref

LOG_DTYPES = {"float32": np.float32}
MATRIX_DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16}
try:  # NumPy's bfloat16 comes from ml_dtypes (installed with JAX)
    import ml_dtypes
    LOG_DTYPES["bfloat16"] = ml_dtypes.bfloat16
    MATRIX_DTYPES["bfloat16"] = ml_dtypes.bfloat16
except ImportError:
    pass

LOG_TOLERANCE = {"float32": 5e-5, "bfloat16": 1.6e-2}
LOG_GRADIENT_TOLERANCE = {"float32": 5e-4, "bfloat16": 6e-2}
SIGNED_GRADIENT_TOLERANCE = {"float32": 1e-2, "bfloat16": 6e-2}  # normwise; see above
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8}
GRADIENT_SPREAD_FACTOR = 8


def assert_log_close(actual, expected, dtype_name, what, tolerance=LOG_TOLERANCE, normwise=False, spread=None):
    """|actual - expected| <= tolerance·scale + GRADIENT_SPREAD_FACTOR·spread, element by element
    (spread: the reference's own swing under one rounding of its inputs, or none)."""
    actual, expected = ref.wide(actual), ref.wide(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert not np.isnan(actual).any(), f"{what}: NaN in the result (an element left unwritten?)"
    # Scales come from the finite values: a zero in log space is -inf, and an infinite scale would
    # excuse every other element. Equal values match, equal infinities included; any other
    # difference from an infinity is an infinite error.
    magnitude = np.where(np.isfinite(expected), np.abs(expected), 0.0)
    scale = np.maximum(1.0, magnitude.max() if normwise and expected.size else magnitude)
    allowed = GRADIENT_SPREAD_FACTOR * (0.0 if spread is None else spread)
    with np.errstate(invalid="ignore"):  # inf - inf, replaced below
        diff = np.where(actual == expected, 0.0, np.abs(actual - expected))
        error = np.where(np.isinf(diff), np.inf, np.maximum(diff - allowed, 0.0) / scale)
    worst = float(error.max()) if error.size else 0.0
    assert worst <= tolerance[dtype_name], (
        f"{what}: relative error {worst:.3g} > {tolerance[dtype_name]} ({dtype_name}) beyond the reference's "
        f"own spread under rounding (largest {float(np.max(spread)) if spread is not None and np.size(spread) else 0:.3g})")


def log_gradient_spread(dtype_name, signed, *args, **kwargs):
    """reference.log_backward_spread at the dtype's unit roundoff for signed inputs (where states
    can cancel to near zero); Nones for unsigned ones, whose states stay away from zero."""
    if not signed:
        return (None, None, None)
    return ref.log_backward_spread(*args, unit=UNIT_ROUNDOFF[dtype_name], **kwargs)


def log_inputs(rng, shape, dtype_name, form, signed):
    """(what is passed, its sign array or None, the float64 value it stands for)."""
    magnitude = rng.uniform(0.3, 1.0, shape)
    negative = rng.random(shape) < 0.3 if signed else np.zeros(shape, bool)
    dtype = LOG_DTYPES[dtype_name]
    if form == "value":
        given = np.where(negative, -magnitude, magnitude).astype(dtype)
        return given, None, ref.wide(given)
    given = np.log(magnitude).astype(dtype)
    sign = negative if signed else None
    return given, sign, ref.from_log(given, sign)


# ---------------------------------------------------------------------------------------------
# log_recurrence.

FORM_CASES = [("log", "log", False), ("log", "log", True), ("value", "value", True), ("log", "value", True)]


@pytest.mark.parametrize("dtype_name", list(LOG_DTYPES))
@pytest.mark.parametrize("a_form,b_form,signed", FORM_CASES)
@pytest.mark.parametrize("shape,dim,reverse", [((3, 40, 4), 1, False), ((3, 4, 40), -1, True), ((33, 5), 0, False)])
def test_log_forward_matches_loop(rng, dtype_name, a_form, b_form, signed, shape, dim, reverse):
    a, a_neg, a_val = log_inputs(rng, shape, dtype_name, a_form, signed)
    b, b_neg, b_val = log_inputs(rng, shape, dtype_name, b_form, signed)
    state = list(shape)
    del state[dim]
    x0, x0_neg, x0_val = log_inputs(rng, tuple(state), dtype_name, "log", signed)
    want, want_final = ref.gated_forward(a_val, b_val, x0_val, dim, reverse)
    common = dict(dim=dim, reverse=reverse, a_negative=a_neg, b_negative=b_neg, x0_negative=x0_neg, a_form=a_form,
                  b_form=b_form, return_final=True)
    log_x, x_neg, log_final, final_neg = parscan.log_recurrence(a, b, x0, output="log", **common)
    assert log_x.dtype == a.dtype and x_neg.dtype == np.bool_ and final_neg.dtype == np.bool_
    assert_log_close(ref.from_log(log_x, x_neg), want, dtype_name, "x from log_x")
    assert_log_close(ref.from_log(log_final, final_neg), want_final, dtype_name, "x_final")
    x, _, _ = parscan.log_recurrence(a, b, x0, output="value", **common)
    assert x.dtype == a.dtype
    assert_log_close(x, want, dtype_name, "x")


def test_log_forward_survives_where_the_linear_one_overflows(rng):
    """Gates of 3 over 200 steps: 3^200 overflows float32, log|x| does not."""
    log_a = np.full((2, 200), np.log(3.0), np.float32)
    log_b = np.zeros((2, 200), np.float32)
    log_x, x_neg = parscan.log_recurrence(log_a, log_b, dim=1)
    # x[t] = sum_{k<=t} 3^k = (3^(t+1) - 1)/2, so log x[t] ≈ (t+1)·log 3 - log 2 for large t.
    want = np.log((3.0 ** np.arange(1, 201) - 1) / 2)
    np.testing.assert_allclose(log_x[0], want, rtol=5e-6, atol=0)
    assert not x_neg.any()
    assert np.isinf(parscan.gated_recurrence(np.exp(log_a), np.exp(log_b), dim=1)[0, -1])


def test_log_chunks_chain_through_the_final_state(rng):
    a, a_neg, _ = log_inputs(rng, (2, 60, 3), "float32", "log", True)
    b, b_neg, _ = log_inputs(rng, (2, 60, 3), "float32", "log", True)
    whole, whole_neg = parscan.log_recurrence(a, b, dim=1, a_negative=a_neg, b_negative=b_neg)
    first, first_neg, state, state_neg = parscan.log_recurrence(a[:, :25], b[:, :25], dim=1, a_negative=a_neg[:, :25],
                                                                b_negative=b_neg[:, :25], return_final=True)
    second, second_neg = parscan.log_recurrence(a[:, 25:], b[:, 25:], state, dim=1, a_negative=a_neg[:, 25:],
                                                b_negative=b_neg[:, 25:], x0_negative=state_neg)
    np.testing.assert_allclose(np.concatenate([first, second], 1), whole, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(np.concatenate([first_neg, second_neg], 1), whole_neg)


def test_log_low_level_writes_every_element(rng):
    a, _, a_val = log_inputs(rng, (4, 31, 6), "float32", "log", False)
    b, b_neg, b_val = log_inputs(rng, (4, 31, 6), "float32", "log", True)
    log_x, x = np.full((4, 31, 6), np.nan, np.float32), np.full((4, 31, 6), np.nan, np.float32)
    x_neg = np.full((4, 31, 6), 7, np.uint8)
    log_final, final_neg = np.full((4, 6), np.nan, np.float32), np.full((4, 6), 7, np.uint8)
    _core.log_forward(a, b, log_x, x_neg, x, b_negative=b_neg, log_x_final=log_final, x_final_negative=final_neg, dim=1)
    want, want_final = ref.gated_forward(a_val, b_val, None, 1)
    assert set(np.unique(x_neg)) <= {0, 1} and set(np.unique(final_neg)) <= {0, 1}
    assert_log_close(ref.from_log(log_x, x_neg), want, "float32", "log_x")
    assert_log_close(x, want, "float32", "x")
    assert_log_close(ref.from_log(log_final, final_neg), want_final, "float32", "x_final")


def test_log_forward_on_strided_views(rng):
    a, a_neg, a_val = log_inputs(rng, (3, 8, 50), "float32", "log", True)
    b, b_neg, b_val = log_inputs(rng, (3, 8, 50), "float32", "value", True)
    view = (lambda t: t.transpose(0, 2, 1))  # (B, D, T) memory scanned as (B, T, D) along dim 1
    log_x, x_neg = parscan.log_recurrence(view(a), view(b), dim=1, a_negative=view(a_neg), b_form="value")
    want = ref.gated_forward(view(a_val), view(b_val), None, 1)[0]
    assert_log_close(ref.from_log(log_x, x_neg), want, "float32", "x")
    # A sign array laid out unlike its magnitudes: the front end passes contiguous copies of both.
    log_x, x_neg = parscan.log_recurrence(view(a), view(b), dim=1, a_negative=np.ascontiguousarray(view(a_neg)),
                                          b_form="value")
    assert_log_close(ref.from_log(log_x, x_neg), want, "float32", "x (sign copied)")


@pytest.mark.parametrize("dtype_name", list(LOG_DTYPES))
@pytest.mark.parametrize("a_form,b_form,signed", FORM_CASES)
@pytest.mark.parametrize("x0_form", ["log", "value"])
@pytest.mark.parametrize("dx_form", ["log", "value"])
@pytest.mark.parametrize("reverse", [False, True])
def test_log_backward_matches_chain_rule(rng, dtype_name, a_form, b_form, signed, x0_form, dx_form, reverse):
    shape, dim = (3, 30, 4), 1
    a, a_neg, a_val = log_inputs(rng, shape, dtype_name, a_form, signed)
    b, b_neg, b_val = log_inputs(rng, shape, dtype_name, b_form, signed)
    x0, x0_neg, x0_val = log_inputs(rng, (3, 4), dtype_name, x0_form, signed)
    dtype = LOG_DTYPES[dtype_name]
    dx = rng.normal(size=shape).astype(dtype)
    dlog_final = rng.normal(size=(3, 4)).astype(dtype)
    want = ref.log_backward(a_val, b_val, dx, x0_val, dlog_final, dim, reverse, a_form, b_form, x0_form, dx_form)
    spreads = log_gradient_spread(dtype_name, signed, a_val, b_val, dx, x0_val, dlog_final, dim, reverse, a_form,
                                  b_form, x0_form, dx_form)
    forms = dict(a_form=a_form, b_form=b_form, x0_form=x0_form, a_negative=a_neg, b_negative=b_neg,
                 x0_negative=x0_neg, dim=dim, reverse=reverse)
    log_x, x_neg = parscan.log_recurrence(a, b, x0, **forms)
    for given in ({"log_x": log_x, "x_negative": x_neg}, {}):  # the stored output, or recomputed
        got = parscan.log_recurrence_backward(a, b, dx, x0=x0, dlog_x_final=dlog_final, dx_form=dx_form, **forms,
                                              **given)
        for name, g, w, spread in zip(("da", "db", "dx0"), got, want, spreads):
            assert_log_close(g, w, dtype_name, f"{name} ({'stored' if given else 'recomputed'} x)",
                             SIGNED_GRADIENT_TOLERANCE if signed else LOG_GRADIENT_TOLERANCE, normwise=signed,
                             spread=spread)


def test_log_backward_matches_finite_differences(rng):
    """Directional derivatives of L = <w, x> in float32 with a wide step (float32 has no room
    for a narrow one); the float64 chain-rule test above is the precise check."""
    shape, dim = (2, 12, 3), 1
    a, a_neg, _ = log_inputs(rng, shape, "float32", "log", True)
    b, _, _ = log_inputs(rng, shape, "float32", "value", True)
    w = rng.normal(size=shape)

    def loss(a_, b_):
        x = parscan.log_recurrence(a_.astype(np.float32), b_.astype(np.float32), dim=dim, a_negative=a_neg,
                                   b_form="value", output="value")
        return float(np.sum(w * x))

    da, db, _ = parscan.log_recurrence_backward(a, b, w.astype(np.float32), a_negative=a_neg, b_form="value",
                                                dx_form="value", dim=dim)
    eps = 1e-2
    for k, (grad, point) in enumerate(((da, a), (db, b))):
        v = rng.normal(size=point.shape)
        plus, minus = [ref.wide(a), ref.wide(b)], [ref.wide(a), ref.wide(b)]
        plus[k], minus[k] = plus[k] + eps * v, minus[k] - eps * v
        numeric = (loss(*plus) - loss(*minus)) / (2 * eps)
        analytic = float(np.sum(ref.wide(grad) * v))
        assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(analytic)), (k, numeric, analytic)


def test_log_bad_input_names_the_argument_and_writes_nothing(rng):
    a, _, _ = log_inputs(rng, (2, 8, 3), "float32", "log", False)
    sign = np.zeros((2, 8, 3), bool)
    with pytest.raises(TypeError, match=r"parscan\.log_recurrence: a has dtype float64; this operation takes float32, bfloat16"):
        parscan.log_recurrence(a.astype(np.float64), a.astype(np.float64))
    with pytest.raises(ValueError, match=r"a_negative is given, but a is in value form"):
        parscan.log_recurrence(a, a, a_negative=sign, a_form="value")
    with pytest.raises(TypeError, match=r"b_negative has dtype float32; a sign array is bool or uint8"):
        parscan.log_recurrence(a, a, b_negative=sign.astype(np.float32))
    with pytest.raises(ValueError, match=r'output must be one of "log", "value"'):
        parscan.log_recurrence(a, a, output="both")
    with pytest.raises(ValueError, match=r"b has shape \(2, 7, 3\) but a has shape \(2, 8, 3\)"):
        parscan.log_recurrence(a, a[:, :7])
    with pytest.raises(ValueError, match=r"x0 has shape \(2, 8\); it must have the shape of a without dim=1"):
        parscan.log_recurrence(a, a, np.zeros((2, 8), np.float32), dim=1)
    log_x, x_neg = np.full(a.shape, np.nan, np.float32), np.full(a.shape, 7, np.uint8)
    with pytest.raises(ValueError, match=r"a_negative \(strides .*\) must have the element strides of a"):
        _core.log_forward(a, a, log_x, x_neg, None, a_negative=np.zeros((2, 3, 8), bool).transpose(0, 2, 1), dim=1)
    with pytest.raises(ValueError, match=r"x_negative is required with log_x"):
        _core.log_forward(a, a, log_x, None, None, dim=1)
    with pytest.raises(ValueError, match=r"output overlaps itself or partly overlaps an input"):
        _core.log_forward(a, a, log_x, x_neg, None, log_x_final=log_x[0, :2], x_final_negative=x_neg[0, :2], dim=1)
    assert np.isnan(log_x).all() and (x_neg == 7).all()


# ---------------------------------------------------------------------------------------------
# matrix_recurrence.


def random_W(rng, shape, n, dtype):
    """Matrices of spectral norm about 0.9 / sqrt(2): states stay of order 1."""
    W = rng.normal(size=tuple(shape) + (n, n)) / np.sqrt(2 * n) * 0.9
    return W.astype(dtype)


@pytest.mark.parametrize("dtype_name", list(MATRIX_DTYPES))
@pytest.mark.parametrize("lead,dim,reverse", [((3, 40), 1, False), ((3, 40), -2, True), ((40, 3), 0, False),
                                              ((2, 3, 25), 2, True), ((50,), 0, False)])
@pytest.mark.parametrize("n", [1, 4, 7])
def test_matrix_forward_matches_loop(rng, dtype_name, lead, dim, reverse, n):
    dtype = MATRIX_DTYPES[dtype_name]
    W = random_W(rng, lead, n, dtype)
    b = rng.normal(size=lead + (n,)).astype(dtype)
    d = dim % (len(lead) + 1)
    x0 = rng.normal(size=(lead + (n,))[:d] + (lead + (n,))[d + 1:]).astype(dtype)
    x, x_final = parscan.matrix_recurrence(W, b, x0, dim=dim, reverse=reverse, return_final=True)
    want, want_final = ref.matrix_forward(W, b, x0, dim, reverse)
    assert x.dtype == b.dtype and x.shape == b.shape
    ref.assert_close(x, want, dtype_name, "x")
    ref.assert_close(x_final, want_final, dtype_name, "x_final")


def test_matrix_low_level_writes_every_element_and_takes_strided_views(rng):
    W = random_W(rng, (6, 30), 3, np.float64).transpose(1, 0, 2, 3)  # (T, B, N, N) seen from (B, T, N, N) memory
    b = rng.normal(size=(6, 30, 3)).transpose(1, 0, 2)
    x = np.full((30, 6, 3), np.nan)
    x_final = np.full((6, 3), np.nan)
    _core.matrix_forward(W, b, x, None, x_final, 0)
    want, want_final = ref.matrix_forward(W, b, None, 0)
    ref.assert_close(x, want, "float64", "x")
    ref.assert_close(x_final, want_final, "float64", "x_final")
    shared = np.broadcast_to(random_W(rng, (1, 30), 3, np.float64), (6, 30, 3, 3))  # one W for every sequence
    b = rng.normal(size=(6, 30, 3))
    ref.assert_close(parscan.matrix_recurrence(shared, b), ref.matrix_forward(shared, b)[0], "float64", "shared W")


@pytest.mark.parametrize("dtype_name", list(MATRIX_DTYPES))
@pytest.mark.parametrize("reverse", [False, True])
def test_matrix_backward_matches_chain_rule(rng, dtype_name, reverse):
    dtype = MATRIX_DTYPES[dtype_name]
    W, b = random_W(rng, (3, 25), 4, dtype), rng.normal(size=(3, 25, 4)).astype(dtype)
    x0, dx_final = rng.normal(size=(3, 4)).astype(dtype), rng.normal(size=(3, 4)).astype(dtype)
    dx = rng.normal(size=(3, 25, 4)).astype(dtype)
    x = parscan.matrix_recurrence(W, b, x0, dim=1, reverse=reverse)
    want = ref.matrix_backward(W, b, dx, x0, dx_final, 1, reverse)
    for given in ({"x": x}, {"b": b}):
        got = parscan.matrix_recurrence_backward(W, dx, x0=x0, dx_final=dx_final, dim=1, reverse=reverse, **given)
        for name, g, w in zip(("dW", "db", "dx0"), got, want):
            ref.assert_close(g, w, dtype_name, f"{name} ({', '.join(given)} given)")
    dW, db, dx0 = parscan.matrix_recurrence_backward(W, dx, b=b, dim=1, reverse=reverse)
    assert dx0 is None


@pytest.mark.parametrize("reverse", [False, True])
def test_matrix_backward_matches_finite_differences(rng, reverse):
    W, b = random_W(rng, (2, 11), 3, np.float64), rng.normal(size=(2, 11, 3))
    x0 = rng.normal(size=(2, 3))
    w, w_final = rng.normal(size=(2, 11, 3)), rng.normal(size=(2, 3))

    def loss(W_, b_, x0_):
        x, x_final = parscan.matrix_recurrence(W_, b_, x0_, dim=1, reverse=reverse, return_final=True)
        return float(np.sum(w * x) + np.sum(w_final * x_final))

    grads = parscan.matrix_recurrence_backward(W, w, b=b, x0=x0, dx_final=w_final, dim=1, reverse=reverse)
    eps = 1e-6
    for k, point in enumerate((W, b, x0)):
        v = rng.normal(size=point.shape)
        plus, minus = [W, b, x0], [W, b, x0]
        plus[k], minus[k] = point + eps * v, point - eps * v
        numeric = (loss(*plus) - loss(*minus)) / (2 * eps)
        analytic = float(np.sum(grads[k] * v))
        assert abs(numeric - analytic) <= 1e-7 * max(1.0, abs(analytic)), (k, numeric, analytic)


def test_matrix_bad_input_names_the_argument_and_writes_nothing(rng):
    W, b = random_W(rng, (2, 8), 3, np.float32), rng.normal(size=(2, 8, 3)).astype(np.float32)
    with pytest.raises(TypeError, match=r"parscan\.matrix_recurrence: b has dtype complex64"):
        parscan.matrix_recurrence(W.astype(np.complex64), b.astype(np.complex64))
    with pytest.raises(TypeError, match=r"W has dtype float64 but b has dtype float32"):
        parscan.matrix_recurrence(W.astype(np.float64), b)
    with pytest.raises(ValueError, match=r"W has shape \(2, 8, 3, 2\); it must be b's shape \(2, 8, 3\) followed by N = 3"):
        parscan.matrix_recurrence(W[..., :2], b)
    with pytest.raises(ValueError, match=r"dim=2 names the state dimension of b"):
        parscan.matrix_recurrence(W, b, dim=2)
    with pytest.raises(ValueError, match=r"b has state size N = 65 .* N = 1\.\.64"):
        parscan.matrix_recurrence(np.zeros((2, 65, 65), np.float32), np.zeros((2, 65), np.float32), dim=0)
    with pytest.raises(ValueError, match=r"x0 has shape \(2, 8\); it must have the shape of b without dim=1"):
        parscan.matrix_recurrence(W, b, np.zeros((2, 8), np.float32))
    x = np.full(b.shape, np.nan, np.float32)
    with pytest.raises(ValueError, match=r"W \(shape \(2, 8, 3, 3\)\) must be dense in its last two dimensions"):
        _core.matrix_forward(np.swapaxes(W, -1, -2), b, x)
    # (B1, T, B2, N) scanned along T: B1 and B2 need two batch strides.
    W4, b4 = random_W(rng, (2, 8, 3), 2, np.float32), rng.normal(size=(2, 8, 3, 2)).astype(np.float32)
    x4 = np.full(b4.shape, np.nan, np.float32)
    with pytest.raises(ValueError, match=r"cannot be scanned along dim=1 in place: .*more than one stride"):
        _core.matrix_forward(W4, b4, x4, dim=1)
    with pytest.raises(ValueError, match=r"output overlaps itself or partly overlaps an input"):
        _core.matrix_forward(W, b, x, x_final=x[0, :2], dim=1)
    assert np.isnan(x).all() and np.isnan(x4).all()


# ---------------------------------------------------------------------------------------------
# matrix_chain.


def chain_factors(rng, shape, d, dtype):
    """I + small noise: long products stay of order 1."""
    return (np.eye(d) + rng.normal(size=tuple(shape) + (d, d)) * (0.3 / np.sqrt(d))).astype(dtype)


@pytest.mark.parametrize("dtype_name", list(MATRIX_DTYPES))
@pytest.mark.parametrize("order", ["left_to_right", "right_to_left"])
@pytest.mark.parametrize("lead,dim", [((3, 20), 1), ((20, 3), 0), ((2, 3, 9), -3), ((17,), 0)])
@pytest.mark.parametrize("d", [1, 3, 8])
def test_matrix_chain_matches_loop(rng, dtype_name, order, lead, dim, d):
    M = chain_factors(rng, lead, d, MATRIX_DTYPES[dtype_name])
    total = parscan.matrix_chain(M, order=order, dim=dim)
    prefixes = parscan.matrix_chain(M, prefixes=True, order=order, dim=dim, tensor_cores="tf32")  # host: exact
    assert total.dtype == M.dtype and prefixes.shape == M.shape
    ref.assert_close(total, ref.matrix_chain(M, False, order, dim), dtype_name, "total")
    ref.assert_close(prefixes, ref.matrix_chain(M, True, order, dim), dtype_name, "prefixes")


def test_matrix_chain_low_level_writes_every_element_and_empty_chains(rng):
    M = chain_factors(rng, (4, 13), 5, np.float32)
    out = np.full((4, 13, 5, 5), np.nan, np.float32)
    _core.matrix_chain(M, out, 1, True)
    ref.assert_close(out, ref.matrix_chain(M, True, "left_to_right", 1), "float32", "prefixes")
    total = np.full((4, 5, 5), np.nan, np.float32)
    _core.matrix_chain(M, total, 1, False, "right_to_left")
    ref.assert_close(total, ref.matrix_chain(M, False, "right_to_left", 1), "float32", "total")
    np.testing.assert_array_equal(parscan.matrix_chain(np.zeros((3, 0, 2, 2))), np.broadcast_to(np.eye(2), (3, 2, 2)))


def test_matrix_chain_bad_input(rng):
    M = chain_factors(rng, (2, 6), 3, np.float32)
    with pytest.raises(ValueError, match=r"M must be \(\.\.\., n, d, d\)"):
        parscan.matrix_chain(M[0, 0])
    with pytest.raises(ValueError, match=r"it must be \(\.\.\., n, d, d\): square matrices"):
        parscan.matrix_chain(M[..., :2])
    with pytest.raises(ValueError, match=r"dim=-1 names a matrix dimension of M"):
        parscan.matrix_chain(M, dim=-1)
    with pytest.raises(ValueError, match=r'order must be one of "left_to_right", "right_to_left"'):
        parscan.matrix_chain(M, order="up")
    with pytest.raises(ValueError, match=r'tensor_cores must be None, False, "tf32" or "bf16"'):
        parscan.matrix_chain(M, tensor_cores="fp8")
    with pytest.raises(TypeError, match=r"M has dtype int32"):
        parscan.matrix_chain(M.astype(np.int32))
    out = np.full((2, 3, 3), np.nan, np.float32)
    with pytest.raises(ValueError, match=r"out has shape \(2, 3, 3\); it must have the shape of M without dim=0"):
        _core.matrix_chain(M, out, 0, False)
    assert np.isnan(out).all()
