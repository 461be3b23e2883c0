"""parscan.jax: the FFI custom calls under jit, grad and vmap, against float64 loops and against
JAX's own autodiff of a lax.scan reference; bad input. Skipped where JAX is not installed or the
extension was built without JAX support."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)  # float64 references and finite differences
import jax.numpy as jnp  # noqa: E402

import parscan  # noqa: E402
from parscan import _core  # noqa: E402

if not _core.jax_targets():
    pytest.skip("parscan was built without JAX support", allow_module_level=True)
if not parscan.built_with_cuda:  # a host-only build has CPU handlers alone: keep JAX on the CPU
    jax.config.update("jax_default_device", jax.devices("cpu")[0])

import parscan.jax as pj  # noqa: E402

import reference as ref  # noqa: E402

DTYPES = {"float64": jnp.float64, "float32": jnp.float32, "complex64": jnp.complex64, "float16": jnp.float16,
          "bfloat16": jnp.bfloat16}


def gates(rng, shape, dtype_name):
    magnitude = rng.uniform(0.6, 1.0, shape)
    if dtype_name == "complex64":
        magnitude = magnitude * np.exp(1j * rng.uniform(-0.5, 0.5, shape))
    return jnp.asarray(magnitude, DTYPES[dtype_name])


def values(rng, shape, dtype_name):
    v = rng.normal(size=shape)
    if dtype_name == "complex64":
        v = v + 1j * rng.normal(size=shape)
    return jnp.asarray(v, DTYPES[dtype_name])


def scan_reference(a, b, x0, reverse=False):
    """The recurrence along axis 1 with lax.scan: JAX differentiates it its own way."""
    def step(state, ab):
        state = ab[0] * state + ab[1]
        return state, state
    final, xs = jax.lax.scan(step, x0, (jnp.moveaxis(a, 1, 0), jnp.moveaxis(b, 1, 0)), reverse=reverse)
    return jnp.moveaxis(xs, 0, 1), final


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("dim,reverse", [(1, False), (1, True), (-1, False), (0, True)])
def test_jit_forward_matches_loop(rng, dtype_name, dim, reverse):
    shape = (3, 40, 5)
    a, b = gates(rng, shape, dtype_name), values(rng, shape, dtype_name)
    state = list(shape)
    del state[dim]
    x0 = values(rng, tuple(state), dtype_name)
    f = jax.jit(lambda a, b, x0: pj.gated_recurrence(a, b, x0, dim=dim, reverse=reverse, return_final=True))
    x, x_final = f(a, b, x0)
    want, want_final = ref.gated_forward(np.asarray(a), np.asarray(b), np.asarray(x0), dim, reverse)
    assert x.dtype == a.dtype
    ref.assert_close(np.asarray(x), want, dtype_name, "x")
    ref.assert_close(np.asarray(x_final), want_final, dtype_name, "x_final")


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype_name", ["float64", "complex64"])
def test_grad_matches_lax_scan_autodiff(rng, reverse, dtype_name):
    shape = (2, 15, 3)
    a, b = gates(rng, shape, dtype_name), values(rng, shape, dtype_name)
    x0, w = values(rng, (2, 3), dtype_name), values(rng, shape, dtype_name)

    def loss(f):
        def value(a, b, x0):
            x, x_final = f(a, b, x0)
            return jnp.real(jnp.sum(w * x) + jnp.sum(x_final * x_final))
        return value

    ours = jax.jit(jax.grad(loss(lambda a, b, x0: pj.gated_recurrence(a, b, x0, dim=1, reverse=reverse,
                                                                      return_final=True)), argnums=(0, 1, 2)))
    theirs = jax.grad(loss(lambda a, b, x0: scan_reference(a, b, x0, reverse)), argnums=(0, 1, 2))
    for name, g, t in zip(("da", "db", "dx0"), ours(a, b, x0), theirs(a, b, x0)):
        ref.assert_close(np.asarray(g), np.asarray(t), dtype_name, name)


def test_grad_matches_finite_differences(rng):
    shape = (2, 13, 3)
    a, b = gates(rng, shape, "float64"), values(rng, shape, "float64")
    x0 = values(rng, (2, 3), "float64")

    def loss(a, b, x0):
        return jnp.sum(jnp.sin(pj.gated_recurrence(jnp.log(a), b, x0, dim=1, gate="log")))

    grads = jax.grad(loss, argnums=(0, 1, 2))(a, b, x0)
    eps = 1e-6
    for k, point in enumerate((a, b, x0)):
        v = jnp.asarray(rng.normal(size=point.shape))
        plus, minus = [a, b, x0], [a, b, x0]
        plus[k], minus[k] = point + eps * v, point - eps * v
        numeric = float((loss(*plus) - loss(*minus)) / (2 * eps))
        analytic = float(jnp.sum(grads[k] * v))
        assert abs(numeric - analytic) <= 1e-7 * max(1.0, abs(analytic)), (k, numeric, analytic)


def test_vmap_over_a_batch_and_over_grad(rng):
    a, b = gates(rng, (4, 3, 20, 2), "float64"), values(rng, (4, 3, 20, 2), "float64")
    batched = jax.vmap(lambda a, b: pj.gated_recurrence(a, b, dim=1))(a, b)
    ref.assert_close(np.asarray(batched), ref.gated_forward(np.asarray(a), np.asarray(b), None, 2)[0], "float64", "x")
    x0 = values(rng, (4, 3, 2), "float64")

    def loss(a, b, x0):
        return jnp.sum(pj.gated_recurrence(a, b, x0, dim=1) ** 2)

    per_example = jax.vmap(jax.grad(loss, argnums=(0, 1, 2)))(a, b, x0)
    for i in range(a.shape[0]):
        single = jax.grad(loss, argnums=(0, 1, 2))(a[i], b[i], x0[i])
        for p, s in zip(per_example, single):
            np.testing.assert_allclose(np.asarray(p[i]), np.asarray(s), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("dtype_name", ["float64", "float32", "bfloat16"])
def test_scans_match_loop(rng, op, dtype_name):
    x = values(rng, (5, 33, 4), dtype_name)
    for dim in (0, 1, -1):
        for reverse, exclusive in ((False, False), (True, True)):
            out = jax.jit(lambda x: pj.cumulative(x, op, dim=dim, reverse=reverse, exclusive=exclusive))(x)
            ref.assert_close(np.asarray(out), ref.cumulative(np.asarray(x), op, dim, reverse, exclusive), dtype_name,
                             f"cumulative {op} dim {dim}")
        total = pj.reduce(x, op, dim=dim)
        assert total.dtype == x.dtype
        ref.assert_close(np.asarray(total), np.take(ref.cumulative(np.asarray(x), op, dim), -1, axis=dim), dtype_name,
                         f"reduce {op} dim {dim}")


def test_scan_gradients(rng):
    x = values(rng, (3, 9, 2), "float64")
    w = values(rng, (3, 9, 2), "float64")
    g = jax.grad(lambda x: jnp.sum(w * pj.cumulative(x, dim=1, reverse=True, exclusive=True)))(x)
    want = jax.grad(lambda x: jnp.sum(w * (jnp.flip(jnp.cumsum(jnp.flip(x, 1), 1), 1) - x)))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-13, atol=1e-13)
    g = jax.vmap(jax.grad(lambda x: jnp.sum(pj.reduce(x, dim=0) ** 2)))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(2 * jnp.broadcast_to(x.sum(1, keepdims=True), x.shape)),
                               rtol=1e-13, atol=1e-13)


def test_bad_input_names_the_argument(rng):
    a = gates(rng, (2, 8, 3), "float32")
    with pytest.raises(TypeError, match=r"a has dtype int32"):
        pj.gated_recurrence(a.astype(jnp.int32), a)
    with pytest.raises(TypeError, match=r"b has dtype float64 but a has dtype float32"):
        pj.gated_recurrence(a, a.astype(jnp.float64))
    with pytest.raises(ValueError, match=r"b has shape \(2, 7, 3\) but a has shape \(2, 8, 3\)"):
        pj.gated_recurrence(a, a[:, :7])
    with pytest.raises(ValueError, match=r"x0 has shape \(2, 8\)"):
        pj.gated_recurrence(a, a, jnp.zeros((2, 8), jnp.float32), dim=1)
    with pytest.raises(ValueError, match=r"dim=3 is out of range"):
        pj.gated_recurrence(a, a, dim=3)
    with pytest.raises(TypeError, match=r"parscan.cumulative: x is complex64, which has no order"):
        pj.cumulative(jnp.zeros((2, 3), jnp.complex64), "max")
    with pytest.raises(TypeError, match=r"parscan.reduce: x is complex64, which has no order"):
        pj.reduce(jnp.zeros((2, 3), jnp.complex64), "min")
