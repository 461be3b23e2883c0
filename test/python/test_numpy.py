"""The NumPy front end and the extension module on the host backend, against float64 loops
(reference.py) on fresh random inputs; outputs of the low-level calls are poisoned with NaN
first, so an element left unwritten fails."""

import numpy as np
import pytest

import parscan
from parscan import _core

import reference as ref

DTYPES = {
    "float64": np.float64,
    "float32": np.float32,
    "complex64": np.complex64,
    "float16": np.float16,
}
try:  # NumPy's bfloat16 comes from ml_dtypes (installed with JAX)
    import ml_dtypes
    DTYPES["bfloat16"] = ml_dtypes.bfloat16
except ImportError:
    pass


def random_gates(rng, shape, dtype_name):
    """Gates of magnitude in [0.6, 1): states stay of order 1 over hundreds of steps."""
    magnitude = rng.uniform(0.6, 1.0, shape)
    if dtype_name == "complex64":
        return (magnitude * np.exp(1j * rng.uniform(-0.5, 0.5, shape))).astype(np.complex64)
    return magnitude.astype(DTYPES[dtype_name])


def random_values(rng, shape, dtype_name):
    if dtype_name == "complex64":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)
    return rng.normal(size=shape).astype(DTYPES[dtype_name])


def poisoned(shape, dtype):
    return np.full(shape, np.nan, dtype)


# ---------------------------------------------------------------------------------------------
# The gated recurrence, forward.

@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape,dim", [((3, 50, 4), 1), ((3, 4, 50), -1), ((50, 6), 0), ((2, 3, 37, 5), 2),
                                       ((129,), 0), ((2, 1, 33, 1), 2)])
@pytest.mark.parametrize("reverse", [False, True])
def test_gated_forward_matches_loop(rng, dtype_name, shape, dim, reverse):
    a, b = random_gates(rng, shape, dtype_name), random_values(rng, shape, dtype_name)
    state_shape = shape[:dim % len(shape)] + shape[dim % len(shape) + 1:]
    x0 = random_values(rng, state_shape, dtype_name)
    x, x_final = parscan.gated_recurrence(a, b, x0, dim=dim, reverse=reverse, return_final=True)
    want, want_final = ref.gated_forward(a, b, x0, dim, reverse)
    assert x.dtype == a.dtype and x_final.dtype == a.dtype
    ref.assert_close(x, want, dtype_name, "x")
    ref.assert_close(x_final, want_final, dtype_name, "x_final")


@pytest.mark.parametrize("dtype_name", ["float64", "float32", "complex64"])
def test_gated_forward_log_gates(rng, dtype_name):
    shape = (4, 40, 3)
    log_a = np.log(random_gates(rng, shape, dtype_name)).astype(DTYPES[dtype_name])
    b = random_values(rng, shape, dtype_name)
    x = parscan.gated_recurrence(log_a, b, dim=1, gate="log")
    ref.assert_close(x, ref.gated_forward(log_a, b, None, 1, False, "log")[0], dtype_name, "x")


def test_low_level_forward_writes_every_element(rng):
    a, b = random_gates(rng, (5, 31, 7), "float32"), random_values(rng, (5, 31, 7), "float32")
    x, x_final = poisoned((5, 31, 7), np.float32), poisoned((5, 7), np.float32)
    _core.gated_forward(a, b, x, None, x_final, 1, False, "linear")
    want, want_final = ref.gated_forward(a, b, None, 1)
    ref.assert_close(x, want, "float32", "x")
    ref.assert_close(x_final, want_final, "float32", "x_final")


@pytest.mark.parametrize("make_view", [
    lambda t: t.transpose(0, 2, 1),            # (B, D, T) memory scanned as (B, T, D)
    lambda t: t[:, ::2, :],                    # every other channel
    lambda t: t[1:, :, 3:],                    # an offset window
    lambda t: np.moveaxis(t, 0, 2),            # batch innermost
])
def test_gated_forward_on_strided_views(rng, make_view):
    a = make_view(random_gates(rng, (4, 12, 30), "float64"))
    b = make_view(random_values(rng, (4, 12, 30), "float64"))
    for dim in range(a.ndim):
        x = parscan.gated_recurrence(a, b, dim=dim)
        ref.assert_close(x, ref.gated_forward(a, b, None, dim)[0], "float64", f"x along dim {dim}")


def test_gated_forward_writes_into_a_strided_output(rng):
    a, b = random_gates(rng, (3, 20, 5), "float64"), random_values(rng, (3, 20, 5), "float64")
    storage = poisoned((3, 5, 20), np.float64)
    x = storage.transpose(0, 2, 1)  # the output's time dimension is its innermost in memory
    _core.gated_forward(a, b, x, None, None, 1, False, "linear")
    ref.assert_close(x, ref.gated_forward(a, b, None, 1)[0], "float64", "x")


def test_gated_forward_broadcast_gate(rng):
    """A gate shared by every batch row (stride 0) is read in place, not copied."""
    a = np.broadcast_to(random_gates(rng, (1, 25, 6), "float64"), (4, 25, 6))
    b = random_values(rng, (4, 25, 6), "float64")
    assert a.strides[0] == 0
    ref.assert_close(parscan.gated_recurrence(a, b, dim=1), ref.gated_forward(a, b, None, 1)[0], "float64", "x")


def test_chunks_chain_through_x_final(rng):
    a, b = random_gates(rng, (2, 60, 3), "float64"), random_values(rng, (2, 60, 3), "float64")
    first, state = parscan.gated_recurrence(a[:, :25], b[:, :25], dim=1, return_final=True)
    second = parscan.gated_recurrence(a[:, 25:], b[:, 25:], state, dim=1)
    whole = parscan.gated_recurrence(a, b, dim=1)
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), whole, rtol=1e-13, atol=1e-13)


def test_empty_and_length_zero(rng):
    x0 = random_values(rng, (2, 3), "float64")
    empty = np.zeros((2, 0, 3))
    x, x_final = parscan.gated_recurrence(empty, empty, x0, dim=1, return_final=True)
    assert x.shape == (2, 0, 3)
    np.testing.assert_array_equal(x_final, x0)  # no step: the state passes through
    assert parscan.gated_recurrence(np.zeros((0, 4)), np.zeros((0, 4)), dim=1).shape == (0, 4)


# ---------------------------------------------------------------------------------------------
# The gated recurrence, backward.

@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("gate", ["linear", "log"])
def test_gated_backward_matches_chain_rule(rng, dtype_name, reverse, gate):
    shape, dim = (3, 40, 4), 1
    a = random_gates(rng, shape, dtype_name)
    if gate == "log":
        a = np.log(ref.wide(a)).astype(a.dtype)
    b, dx = random_values(rng, shape, dtype_name), random_values(rng, shape, dtype_name)
    x0, dx_final = random_values(rng, (3, 4), dtype_name), random_values(rng, (3, 4), dtype_name)
    x = parscan.gated_recurrence(a, b, x0, dim=dim, reverse=reverse, gate=gate)
    want = ref.gated_backward(a, b, dx, x0, dx_final, dim, reverse, gate)
    for given in ({"x": x}, {"b": b}):  # the stored output, or recomputed from b
        got = parscan.gated_recurrence_backward(a, dx, x0=x0, dx_final=dx_final, dim=dim, reverse=reverse, gate=gate,
                                                **given)
        for name, g, w in zip(("da", "db", "dx0"), got, want):
            ref.assert_close(g, w, dtype_name, f"{name} ({', '.join(given)} given)")


def test_gated_backward_without_x0_returns_no_dx0(rng):
    a, b = random_gates(rng, (2, 9, 3), "float64"), random_values(rng, (2, 9, 3), "float64")
    dx = random_values(rng, (2, 9, 3), "float64")
    da, db, dx0 = parscan.gated_recurrence_backward(a, dx, b=b, dim=1)
    want_da, want_db, _ = ref.gated_backward(a, b, dx, None, None, 1)
    assert dx0 is None
    ref.assert_close(da, want_da, "float64", "da")
    ref.assert_close(db, want_db, "float64", "db")


@pytest.mark.parametrize("reverse", [False, True])
def test_gated_backward_matches_finite_differences(rng, reverse):
    """Directional derivatives of L = <w, x> + <w_final, x_final> in float64."""
    shape, dim = (2, 17, 3), 1
    a, b = random_gates(rng, shape, "float64"), random_values(rng, shape, "float64")
    x0 = random_values(rng, (2, 3), "float64")
    w, w_final = random_values(rng, shape, "float64"), random_values(rng, (2, 3), "float64")

    def loss(a_, b_, x0_):
        x, x_final = parscan.gated_recurrence(a_, b_, x0_, dim=dim, reverse=reverse, return_final=True)
        return float(np.sum(w * x) + np.sum(w_final * x_final))

    x = parscan.gated_recurrence(a, b, x0, dim=dim, reverse=reverse)
    da, db, dx0 = parscan.gated_recurrence_backward(a, w, x=x, x0=x0, dx_final=w_final, dim=dim, reverse=reverse)
    eps = 1e-6
    for k, (grad, point) in enumerate(((da, a), (db, b), (dx0, x0))):
        v = rng.normal(size=point.shape)
        args_plus, args_minus = [a, b, x0], [a, b, x0]
        args_plus[k], args_minus[k] = point + eps * v, point - eps * v
        numeric = (loss(*args_plus) - loss(*args_minus)) / (2 * eps)
        analytic = float(np.sum(grad * v))
        assert abs(numeric - analytic) <= 1e-7 * max(1.0, abs(analytic)), (k, numeric, analytic)


# ---------------------------------------------------------------------------------------------
# cumulative and reduce.

SCAN_DTYPES = [name for name in DTYPES] + ["int32", "int64"]


def scan_input(rng, shape, dtype_name):
    if dtype_name in ("int32", "int64"):
        return rng.integers(-1000, 1000, shape).astype(dtype_name)
    return random_values(rng, shape, dtype_name)


def scan_tolerance_name(dtype_name):
    return "float64" if dtype_name in ("int32", "int64") else dtype_name


@pytest.mark.parametrize("dtype_name", SCAN_DTYPES)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True), (True, True)])
def test_cumulative_matches_loop(rng, dtype_name, op, dim, reverse, exclusive):
    if dtype_name == "complex64" and op != "sum":
        pytest.skip("complex numbers have no order")
    x = scan_input(rng, (5, 33, 4), dtype_name)
    out = parscan.cumulative(x, op, dim=dim, reverse=reverse, exclusive=exclusive)
    want = ref.cumulative(x, op, dim, reverse, exclusive)
    assert out.dtype == x.dtype
    if dtype_name in ("int32", "int64") or op != "sum":
        # Integers and max / min are exact; an exclusive max / min starts from ±inf.
        np.testing.assert_array_equal(ref.wide(out), ref.wide(want).astype(ref.wide(out).dtype))
    else:
        ref.assert_close(out, want, dtype_name, "out")


@pytest.mark.parametrize("dtype_name", SCAN_DTYPES)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_reduce_matches_loop(rng, dtype_name, op, dim):
    if dtype_name == "complex64" and op != "sum":
        pytest.skip("complex numbers have no order")
    x = scan_input(rng, (6, 45, 3), dtype_name)
    out = parscan.reduce(x, op, dim=dim)
    want = np.take(ref.cumulative(x, op, dim), -1, axis=dim)
    assert out.dtype == x.dtype and out.shape == want.shape
    if dtype_name in ("int32", "int64") or op != "sum":
        np.testing.assert_array_equal(ref.wide(out), ref.wide(want).astype(ref.wide(out).dtype))
    else:
        ref.assert_close(out, want, dtype_name, "out")


def test_low_level_scans_write_every_element(rng):
    x = rng.normal(size=(7, 300)).astype(np.float32).T  # transposed: time is the strided dimension
    out = poisoned(x.shape, np.float32)
    _core.cumulative(x, out, "sum", 0, False, False)
    ref.assert_close(out, ref.cumulative(x, "sum", 0), "float32", "cumulative")
    total = poisoned((7,), np.float32)
    _core.reduce(x, total, "sum", 0)
    ref.assert_close(total, ref.cumulative(x, "sum", 0)[-1], "float32", "reduce")


def test_long_sum_is_chunked_and_still_right(rng):
    """2^17 steps and more are scanned in chunks on the host backend (three passes)."""
    n = 300_001
    x = rng.normal(size=(2, n))
    # Summation error bound for either order: n·2^-53·sum|x| (about 4e-6 here); a lost or
    # doubled element is off by about 1.
    bound = n * 2.0**-53 * np.abs(x).sum()
    np.testing.assert_allclose(parscan.cumulative(x, dim=1), np.cumsum(x, axis=1), rtol=0, atol=bound)
    np.testing.assert_allclose(parscan.reduce(x, dim=1), x.sum(axis=1), rtol=0, atol=bound)


# ---------------------------------------------------------------------------------------------
# Bad input: the right exception, naming the argument, and nothing written.

def test_wrong_dtype_names_the_argument(rng):
    a = random_gates(rng, (2, 8, 3), "float32")
    with pytest.raises(TypeError, match=r"parscan\.gated_recurrence: a has dtype int32"):
        parscan.gated_recurrence(a.astype(np.int32), a)
    with pytest.raises(TypeError, match=r"b has dtype float64 but a has dtype float32"):
        parscan.gated_recurrence(a, a.astype(np.float64))
    with pytest.raises(TypeError, match=r"x is complex64, which has no order"):
        _core.cumulative(a.astype(np.complex64), np.empty((2, 8, 3), np.complex64), "max", 1)
    with pytest.raises(TypeError, match=r"out has dtype float16; a reduce of float16 writes float32"):
        _core.reduce(a.astype(np.float16), np.empty((2, 3), np.float16), "sum", 1)


def test_mismatched_shapes_name_the_argument(rng):
    a = random_gates(rng, (2, 8, 3), "float64")
    with pytest.raises(ValueError, match=r"b has shape \(2, 7, 3\) but a has shape \(2, 8, 3\)"):
        parscan.gated_recurrence(a, a[:, :7])
    with pytest.raises(ValueError, match=r"x0 has shape \(2, 8\); it must have the shape of a without dim=1, \(2, 3\)"):
        parscan.gated_recurrence(a, a, np.zeros((2, 8)), dim=1)
    with pytest.raises(ValueError, match=r"dim=3 is out of range"):
        parscan.gated_recurrence(a, a, dim=3)
    with pytest.raises(ValueError, match=r'gate must be one of "linear", "log"'):
        parscan.gated_recurrence(a, a, gate="exp")


def test_layout_needing_three_strides_is_refused_and_nothing_written(rng):
    base = random_gates(rng, (4, 6, 10, 8), "float64")
    a = base[:, :, :, ::2][::2]  # four non-time dimensions that no two strides describe
    a = a.transpose(0, 2, 1, 3)  # (2, 10, 6, 4), scanned along dim 1
    b = np.ascontiguousarray(a)
    x = poisoned(a.shape, np.float64)
    with pytest.raises(ValueError, match=r"a \(shape \(2, 10, 6, 4\), strides .*\) cannot be scanned along dim=1"):
        _core.gated_forward(a, b, x, None, None, 1, False, "linear")
    assert np.isnan(x).all()
    x = parscan.gated_recurrence(np.ascontiguousarray(a), b, dim=1)  # a copy is the remedy
    ref.assert_close(x, ref.gated_forward(a, b, None, 1)[0], "float64", "x")


def test_negative_strides_are_refused(rng):
    a = random_gates(rng, (3, 9), "float64")
    with pytest.raises(ValueError, match=r"a has a negative stride"):
        parscan.gated_recurrence(a[:, ::-1], a, dim=1)


def test_overlapping_output_is_refused_with_the_status_text(rng):
    a, b = random_gates(rng, (3, 9), "float64"), random_values(rng, (3, 9), "float64")
    x = poisoned((3, 9), np.float64)
    x_final = x[0, :3]  # the final states would overwrite part of x
    with pytest.raises(ValueError, match=r"output overlaps itself or partly overlaps an input"):
        _core.gated_forward(a, b, x, None, x_final, 1, False, "linear")
    assert np.isnan(x).all()


def test_read_only_output_is_refused(rng):
    a = random_gates(rng, (2, 5), "float64")
    x = np.zeros((2, 5))
    x.flags.writeable = False
    with pytest.raises(TypeError):
        _core.gated_forward(a, a, x)
