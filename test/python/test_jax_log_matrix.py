"""parscan.jax's log_recurrence, matrix_recurrence and matrix_chain: the FFI custom calls under
jit, grad and vmap, against the float64 loops of reference.py and parscan's NumPy backward, with
the tolerances stated in test_numpy_log_matrix.py (whose input generators are reused here); bad
input. Skipped where JAX is not installed or the extension was built without JAX support."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)  # float64 matrices and finite differences
import jax.numpy as jnp  # noqa: E402

import parscan  # noqa: E402
from parscan import _core  # noqa: E402

if not _core.jax_targets():
    pytest.skip("parscan was built without JAX support", allow_module_level=True)
if not parscan.built_with_cuda:  # a host-only build has CPU handlers alone: keep JAX on the CPU
    jax.config.update("jax_default_device", jax.devices("cpu")[0])

import parscan.jax as pj  # noqa: E402

import reference as ref  # noqa: E402
from test_numpy_log_matrix import (FORM_CASES, LOG_DTYPES, LOG_GRADIENT_TOLERANCE, MATRIX_DTYPES,  # noqa: E402
                                   SIGNED_GRADIENT_TOLERANCE, assert_log_close, chain_factors, log_gradient_spread,
                                   log_inputs, random_W)

# ---------------------------------------------------------------------------------------------
# log_recurrence.


@pytest.mark.parametrize("dtype_name", list(LOG_DTYPES))
@pytest.mark.parametrize("a_form,b_form,signed", FORM_CASES)
@pytest.mark.parametrize("shape,dim,reverse", [((3, 40, 4), 1, False), ((3, 4, 40), -1, True), ((33, 5), 0, False)])
def test_log_jit_forward_matches_loop(rng, dtype_name, a_form, b_form, signed, shape, dim, reverse):
    a, a_neg, a_val = log_inputs(rng, shape, dtype_name, a_form, signed)
    b, b_neg, b_val = log_inputs(rng, shape, dtype_name, b_form, signed)
    state = list(shape)
    del state[dim]
    x0, x0_neg, x0_val = log_inputs(rng, tuple(state), dtype_name, "log", signed)
    want, want_final = ref.gated_forward(a_val, b_val, x0_val, dim, reverse)
    common = dict(dim=dim, reverse=reverse, a_form=a_form, b_form=b_form, return_final=True)

    @jax.jit
    def both(a, b, x0, a_neg, b_neg, x0_neg):
        signs = dict(a_negative=a_neg, b_negative=b_neg, x0_negative=x0_neg)
        return (pj.log_recurrence(a, b, x0, output="log", **signs, **common),
                pj.log_recurrence(a, b, x0, output="value", **signs, **common))

    (log_x, x_neg, log_final, final_neg), (x, _, _) = both(a, b, x0, a_neg, b_neg, x0_neg)
    assert log_x.dtype == a.dtype and x_neg.dtype == jnp.bool_ and final_neg.dtype == jnp.bool_ and x.dtype == a.dtype
    assert_log_close(ref.from_log(log_x, x_neg), want, dtype_name, "x from log_x")
    assert_log_close(ref.from_log(log_final, final_neg), want_final, dtype_name, "x_final")
    assert_log_close(x, want, dtype_name, "x")
    # Without x0 the state starts at zero.
    log_x, x_neg = pj.log_recurrence(a, b, dim=dim, reverse=reverse, a_negative=a_neg, b_negative=b_neg, a_form=a_form,
                                     b_form=b_form)
    assert_log_close(ref.from_log(log_x, x_neg), ref.gated_forward(a_val, b_val, None, dim, reverse)[0], dtype_name,
                     "x without x0")


@pytest.mark.parametrize("dtype_name", list(LOG_DTYPES))
@pytest.mark.parametrize("a_form,b_form,signed", FORM_CASES)
@pytest.mark.parametrize("x0_form", ["log", "value"])
@pytest.mark.parametrize("output", ["log", "value"])
@pytest.mark.parametrize("reverse", [False, True])
def test_log_grad_matches_chain_rule(rng, dtype_name, a_form, b_form, signed, x0_form, output, reverse):
    shape, dim = (3, 30, 4), 1
    a, a_neg, a_val = log_inputs(rng, shape, dtype_name, a_form, signed)
    b, b_neg, b_val = log_inputs(rng, shape, dtype_name, b_form, signed)
    x0, x0_neg, x0_val = log_inputs(rng, (3, 4), dtype_name, x0_form, signed)
    dtype = LOG_DTYPES[dtype_name]
    w, w_final = rng.normal(size=shape).astype(dtype), rng.normal(size=(3, 4)).astype(dtype)
    forms = dict(a_form=a_form, b_form=b_form, x0_form=x0_form, a_negative=a_neg, b_negative=b_neg,
                 x0_negative=x0_neg, dim=dim, reverse=reverse)

    def loss(a, b, x0):
        main, *rest = pj.log_recurrence(a, b, x0, output=output, return_final=True, **forms)
        log_final = rest[-2]
        return jnp.sum(w.astype(np.float32) * main.astype(jnp.float32)) + jnp.sum(
            w_final.astype(np.float32) * log_final.astype(jnp.float32))

    got = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(a, b, x0)
    want = ref.log_backward(a_val, b_val, w, x0_val, w_final, dim, reverse, a_form, b_form, x0_form, output)
    spreads = log_gradient_spread(dtype_name, signed, a_val, b_val, w, x0_val, w_final, dim, reverse, a_form, b_form,
                                  x0_form, output)
    for name, g, expected, spread in zip(("da", "db", "dx0"), got, want, spreads):
        assert g.dtype == a.dtype
        assert_log_close(g, expected, dtype_name, name, SIGNED_GRADIENT_TOLERANCE if signed else LOG_GRADIENT_TOLERANCE,
                         normwise=signed, spread=spread)
    # The custom_vjp calls the very backward the NumPy front end calls, on the stored log|x|.
    log_x, x_neg = parscan.log_recurrence(a, b, x0, **forms)
    numpy_grads = parscan.log_recurrence_backward(a, b, w, x0=x0, dlog_x_final=w_final, dx_form=output, log_x=log_x,
                                                  x_negative=x_neg, **forms)
    # On the CPU the same kernel runs: equal to rounding. On a GPU JAX runs the CUDA backward,
    # which associates differently: within the tolerance against the reference above.
    on_cpu = jax.default_backend() == "cpu"
    for name, g, n, spread in zip(("da", "db", "dx0"), got, numpy_grads, spreads):
        if on_cpu:
            np.testing.assert_allclose(ref.wide(g), ref.wide(n), rtol=1e-6, atol=1e-6, err_msg=name)
        else:  # two float32 results, each within the spread of the reference: twice the slack
            assert_log_close(g, ref.wide(n), dtype_name, name + " (CUDA against NumPy)",
                             SIGNED_GRADIENT_TOLERANCE if signed else LOG_GRADIENT_TOLERANCE, normwise=signed,
                             spread=None if spread is None else 2 * spread)


def test_log_grad_matches_finite_differences(rng):
    """As in test_numpy_log_matrix: float32 with a wide step; the chain-rule test is the precise one."""
    shape, dim = (2, 12, 3), 1
    a, a_neg, _ = log_inputs(rng, shape, "float32", "log", True)
    b, _, _ = log_inputs(rng, shape, "float32", "value", True)
    w = rng.normal(size=shape)

    def loss(a_, b_):
        x = pj.log_recurrence(a_.astype(jnp.float32), b_.astype(jnp.float32), dim=dim, a_negative=a_neg,
                              b_form="value", output="value")
        return jnp.sum(w * x)

    da, db = jax.grad(loss, argnums=(0, 1))(jnp.asarray(a), jnp.asarray(b))
    eps = 1e-2
    for k, (grad, point) in enumerate(((da, a), (db, b))):
        v = rng.normal(size=point.shape)
        def at(step):  # the loss at point + step·v
            args = [ref.wide(a), ref.wide(b)]
            args[k] = args[k] + step * v
            return float(loss(*args))

        # Five-point central differences: truncation error O(eps^4), not the O(eps^2) of two
        # points, which alone reached 4e-3 on some seeds.
        numeric = (8 * (at(eps) - at(-eps)) - (at(2 * eps) - at(-2 * eps))) / (12 * eps)
        analytic = float(np.sum(ref.wide(grad) * v))
        assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(analytic)), (k, numeric, analytic)


def test_log_vmap_over_a_batch_and_over_grad(rng):
    a, a_neg, a_val = log_inputs(rng, (4, 3, 20, 2), "float32", "log", True)
    b, b_neg, b_val = log_inputs(rng, (4, 3, 20, 2), "float32", "value", True)
    x0, x0_neg, _ = log_inputs(rng, (4, 3, 2), "float32", "log", True)

    def forward(a, b, a_neg, b_neg):
        return pj.log_recurrence(a, b, dim=1, a_negative=a_neg, b_negative=b_neg, b_form="value", output="value")

    batched = jax.vmap(forward)(a, b, a_neg, b_neg)
    assert_log_close(batched, ref.gated_forward(a_val, b_val, None, 2)[0], "float32", "x")

    def loss(a, b, x0, a_neg, x0_neg):
        log_x, _ = pj.log_recurrence(a, b, x0, dim=1, a_negative=a_neg, x0_negative=x0_neg, b_form="value")
        return jnp.sum(jnp.sin(log_x))

    grads = jax.grad(loss, argnums=(0, 1, 2))
    per_example = jax.vmap(grads)(a, b, x0, a_neg, x0_neg)
    for i in range(a.shape[0]):
        for p, s in zip(per_example, grads(a[i], b[i], x0[i], a_neg[i], x0_neg[i])):
            np.testing.assert_allclose(np.asarray(p[i]), np.asarray(s), rtol=1e-6, atol=1e-6)


def test_log_bad_input_names_the_argument(rng):
    a, _, _ = log_inputs(rng, (2, 8, 3), "float32", "log", False)
    sign = np.zeros((2, 8, 3), bool)
    with pytest.raises(TypeError, match=r"parscan\.log_recurrence: a has dtype float64; this operation takes float32"):
        pj.log_recurrence(a.astype(np.float64), a.astype(np.float64))
    with pytest.raises(TypeError, match=r"b has dtype bfloat16 but a has dtype float32"):
        pj.log_recurrence(a, jnp.asarray(a, jnp.bfloat16))
    with pytest.raises(ValueError, match=r"a_negative is given, but a is in value form"):
        pj.log_recurrence(a, a, a_negative=sign, a_form="value")
    with pytest.raises(TypeError, match=r"b_negative has dtype float32; a sign array is bool or uint8"):
        pj.log_recurrence(a, a, b_negative=sign.astype(np.float32))
    with pytest.raises(ValueError, match=r"a_negative has shape \(2, 7, 3\)"):
        pj.log_recurrence(a, a, a_negative=sign[:, :7])
    with pytest.raises(ValueError, match=r'output must be one of "log", "value"'):
        pj.log_recurrence(a, a, output="both")
    with pytest.raises(ValueError, match=r"b has shape \(2, 7, 3\) but a has shape \(2, 8, 3\)"):
        pj.log_recurrence(a, a[:, :7])
    with pytest.raises(ValueError, match=r"x0 has shape \(2, 8\)"):
        pj.log_recurrence(a, a, np.zeros((2, 8), np.float32), dim=1)
    with pytest.raises(ValueError, match=r"x0_negative is given without x0"):
        pj.log_recurrence(a, a, x0_negative=np.zeros((2, 3), bool), dim=1)
    with pytest.raises(ValueError, match=r"dim=3 is out of range"):
        pj.log_recurrence(a, a, dim=3)


# ---------------------------------------------------------------------------------------------
# matrix_recurrence.


@pytest.mark.parametrize("dtype_name", list(MATRIX_DTYPES))
@pytest.mark.parametrize("lead,dim,reverse", [((3, 40), 1, False), ((3, 40), -2, True), ((40, 3), 0, False),
                                              ((50,), 0, True)])
@pytest.mark.parametrize("n", [1, 4, 7])
def test_matrix_jit_forward_matches_loop(rng, dtype_name, lead, dim, reverse, n):
    dtype = MATRIX_DTYPES[dtype_name]
    W = random_W(rng, lead, n, dtype)
    b = rng.normal(size=lead + (n,)).astype(dtype)
    d = dim % (len(lead) + 1)
    x0 = rng.normal(size=(lead + (n,))[:d] + (lead + (n,))[d + 1:]).astype(dtype)
    f = jax.jit(lambda W, b, x0: pj.matrix_recurrence(W, b, x0, dim=dim, reverse=reverse, return_final=True))
    x, x_final = f(W, b, x0)
    want, want_final = ref.matrix_forward(W, b, x0, dim, reverse)
    assert x.dtype == b.dtype and x.shape == b.shape
    ref.assert_close(np.asarray(x), want, dtype_name, "x")
    ref.assert_close(np.asarray(x_final), want_final, dtype_name, "x_final")
    ref.assert_close(np.asarray(pj.matrix_recurrence(W, b, dim=dim, reverse=reverse)),
                     ref.matrix_forward(W, b, None, dim, reverse)[0], dtype_name, "x without x0")


@pytest.mark.parametrize("dtype_name", list(MATRIX_DTYPES))
@pytest.mark.parametrize("reverse", [False, True])
def test_matrix_grad_matches_chain_rule(rng, dtype_name, reverse):
    dtype = MATRIX_DTYPES[dtype_name]
    W, b = random_W(rng, (3, 25), 4, dtype), rng.normal(size=(3, 25, 4)).astype(dtype)
    x0 = rng.normal(size=(3, 4)).astype(dtype)
    w, w_final = rng.normal(size=(3, 25, 4)).astype(dtype), rng.normal(size=(3, 4)).astype(dtype)

    def loss(W, b, x0):
        x, x_final = pj.matrix_recurrence(W, b, x0, dim=1, reverse=reverse, return_final=True)
        return jnp.sum(w.astype(np.float64) * x.astype(jnp.float64)) + jnp.sum(
            w_final.astype(np.float64) * x_final.astype(jnp.float64))

    got = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(W, b, x0)
    want = ref.matrix_backward(W, b, w, x0, w_final, 1, reverse)
    for name, g, expected in zip(("dW", "db", "dx0"), got, want):
        assert g.dtype == b.dtype
        ref.assert_close(np.asarray(g), expected, dtype_name, name)


@pytest.mark.parametrize("reverse", [False, True])
def test_matrix_grad_matches_finite_differences(rng, reverse):
    W, b = random_W(rng, (2, 11), 3, np.float64), rng.normal(size=(2, 11, 3))
    x0 = rng.normal(size=(2, 3))
    w, w_final = rng.normal(size=(2, 11, 3)), rng.normal(size=(2, 3))

    def loss(W_, b_, x0_):
        x, x_final = pj.matrix_recurrence(W_, b_, x0_, dim=1, reverse=reverse, return_final=True)
        return jnp.sum(w * jnp.sin(x)) + jnp.sum(w_final * x_final)

    grads = jax.grad(loss, argnums=(0, 1, 2))(W, b, x0)
    eps = 1e-6
    for k, point in enumerate((W, b, x0)):
        v = rng.normal(size=point.shape)
        plus, minus = [W, b, x0], [W, b, x0]
        plus[k], minus[k] = point + eps * v, point - eps * v
        numeric = float(loss(*plus) - loss(*minus)) / (2 * eps)
        analytic = float(np.sum(np.asarray(grads[k]) * v))
        assert abs(numeric - analytic) <= 1e-7 * max(1.0, abs(analytic)), (k, numeric, analytic)


def test_matrix_vmap_over_a_batch_and_over_grad(rng):
    W, b = random_W(rng, (4, 3, 20), 3, np.float64), rng.normal(size=(4, 3, 20, 3))
    x0 = rng.normal(size=(4, 3, 3))
    batched = jax.vmap(lambda W, b: pj.matrix_recurrence(W, b, dim=1))(W, b)
    ref.assert_close(np.asarray(batched), ref.matrix_forward(W, b, None, 2)[0], "float64", "x")

    def loss(W, b, x0):
        return jnp.sum(pj.matrix_recurrence(W, b, x0, dim=1) ** 2)

    grads = jax.grad(loss, argnums=(0, 1, 2))
    per_example = jax.vmap(grads)(W, b, x0)
    for i in range(W.shape[0]):
        for p, s in zip(per_example, grads(W[i], b[i], x0[i])):
            np.testing.assert_allclose(np.asarray(p[i]), np.asarray(s), rtol=1e-13, atol=1e-13)


def test_matrix_bad_input_names_the_argument(rng):
    W, b = random_W(rng, (2, 8), 3, np.float32), rng.normal(size=(2, 8, 3)).astype(np.float32)
    with pytest.raises(TypeError, match=r"parscan\.matrix_recurrence: b has dtype complex64"):
        pj.matrix_recurrence(W.astype(np.complex64), b.astype(np.complex64))
    with pytest.raises(TypeError, match=r"W has dtype float64 but b has dtype float32"):
        pj.matrix_recurrence(W.astype(np.float64), b)
    with pytest.raises(ValueError, match=r"W has shape \(2, 8, 3, 2\); it must be b's shape \(2, 8, 3\) followed by N = 3"):
        pj.matrix_recurrence(W[..., :2], b)
    with pytest.raises(ValueError, match=r"dim=2 names the state dimension of b"):
        pj.matrix_recurrence(W, b, dim=2)
    with pytest.raises(ValueError, match=r"x0 has shape \(2, 8\)"):
        pj.matrix_recurrence(W, b, np.zeros((2, 8), np.float32))
    with pytest.raises(ValueError, match=r"b has state size N = 65 .* N = 1\.\.64"):
        pj.matrix_recurrence(np.zeros((2, 65, 65), np.float32), np.zeros((2, 65), np.float32), dim=0)


# ---------------------------------------------------------------------------------------------
# matrix_chain.


@pytest.mark.parametrize("dtype_name", list(MATRIX_DTYPES))
@pytest.mark.parametrize("order", ["left_to_right", "right_to_left"])
@pytest.mark.parametrize("lead,dim", [((3, 20), 1), ((20, 3), 0), ((2, 3, 9), -3), ((17,), 0)])
@pytest.mark.parametrize("d", [1, 3, 8])
def test_matrix_chain_jit_matches_loop(rng, dtype_name, order, lead, dim, d):
    M = chain_factors(rng, lead, d, MATRIX_DTYPES[dtype_name])
    f = jax.jit(lambda M: (pj.matrix_chain(M, order=order, dim=dim),
                           pj.matrix_chain(M, prefixes=True, order=order, dim=dim, tensor_cores="tf32")))
    total, prefixes = f(M)
    assert total.dtype == M.dtype and prefixes.shape == M.shape
    ref.assert_close(np.asarray(total), ref.matrix_chain(M, False, order, dim), dtype_name, "total")
    # The prefixes ask for tf32 tensor cores, which a GPU uses for float32 and float16 (10-bit
    # mantissas; measured up to 3.3e-3 for float16 on an H100).
    tf32 = dtype_name in ("float32", "float16") and jax.default_backend() != "cpu"
    ref.assert_close(np.asarray(prefixes), ref.matrix_chain(M, True, order, dim), "tf32" if tf32 else dtype_name,
                     "prefixes")


def test_matrix_chain_vmap_and_no_gradient(rng):
    M = chain_factors(rng, (4, 3, 12), 3, np.float64)
    batched = jax.vmap(lambda M: pj.matrix_chain(M, prefixes=True, dim=1))(M)
    ref.assert_close(np.asarray(batched), ref.matrix_chain(M, True, "left_to_right", 2), "float64", "prefixes")
    with pytest.raises(NotImplementedError, match=r"matrix_chain has no gradient \(forward only\)"):
        jax.grad(lambda M: jnp.sum(pj.matrix_chain(M, dim=1)))(M[0])
    # Cut off from the gradient, it is a constant.
    g = jax.grad(lambda M: jnp.sum(jax.lax.stop_gradient(pj.matrix_chain(M, dim=1)) * M[:, 0]))(M[0])
    np.testing.assert_allclose(np.asarray(g[:, 0]), ref.matrix_chain(M[0], False, "left_to_right", 1), rtol=1e-12)


def test_matrix_chain_bad_input(rng):
    M = chain_factors(rng, (2, 6), 3, np.float32)
    with pytest.raises(ValueError, match=r"M must be \(\.\.\., n, d, d\)"):
        pj.matrix_chain(M[0, 0])
    with pytest.raises(ValueError, match=r"dim=-1 names a matrix dimension of M"):
        pj.matrix_chain(M, dim=-1)
    with pytest.raises(ValueError, match=r'order must be one of "left_to_right", "right_to_left"'):
        pj.matrix_chain(M, order="up")
    with pytest.raises(ValueError, match=r'tensor_cores must be None, False, "tf32" or "bf16"'):
        pj.matrix_chain(M, tensor_cores="fp8")
    with pytest.raises(TypeError, match=r"M has dtype int32"):
        pj.matrix_chain(M.astype(np.int32))
    with pytest.raises(ValueError, match=r"it must be \(\.\.\., n, d, d\): square matrices"):
        pj.matrix_chain(M[..., :2])
