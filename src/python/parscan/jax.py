"""The JAX front end: parscan's operations as XLA FFI custom calls (jax.ffi).

Each call runs inside the compiled XLA program, on the CPU target or, in a CUDA build, on the
CUDA target with XLA's stream; gradients are jax.custom_vjp rules that call parscan's own
backward. They work under jax.jit, jax.grad and jax.vmap (vmap adds leading batch dimensions,
which the operations take as more sequences: the time dimension is named counting from the end
inside, so it does not move).

    import parscan.jax as pj
    x = jax.jit(lambda a, b: pj.gated_recurrence(a, b, dim=1))(a, b)

The FFI handlers are compiled into the extension when jaxlib is importable at build time (build
with ``pip install --no-build-isolation`` in an environment that has jax); otherwise every
function here raises RuntimeError saying so.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import _core
from ._shapes import GATES, SCAN_OPERATORS, check_choice, normalize_dim, without


def _register_targets():
    targets = _core.jax_targets()
    for name, platforms in targets.items():
        for platform, capsule in platforms.items():
            jax.ffi.register_ffi_target(name, capsule, platform=platform)
    return bool(targets)


_HAVE_TARGETS = _register_targets()


def _require_targets(op):
    if not _HAVE_TARGETS:
        raise RuntimeError(
            f"parscan.jax.{op}: this parscan was built without JAX support (jaxlib was not importable when it was "
            "built); reinstall it with jax installed: pip install --no-build-isolation .")


_GATED_TYPES = (jnp.float32, jnp.float64, jnp.bfloat16, jnp.float16, jnp.complex64)


def _check_gated(op, a, b, x0, d):
    """The checks a trace can make, raised as TypeError / ValueError before anything is compiled
    (the handler checks again at run time, and everything else: strides cannot be wrong here)."""
    if a.dtype not in _GATED_TYPES:
        names = ", ".join(jnp.dtype(t).name for t in _GATED_TYPES)
        raise TypeError(f"parscan.{op}: a has dtype {a.dtype}; this operation takes {names}")
    for name, other in (("b", b), ("x0", x0)):
        if other.dtype != a.dtype:
            raise TypeError(f"parscan.{op}: {name} has dtype {other.dtype} but a has dtype {a.dtype}; they must match")
    if b.shape != a.shape:
        raise ValueError(f"parscan.{op}: b has shape {b.shape} but a has shape {a.shape}; they must match")
    state = without(a.shape, a.ndim + d)
    if x0.shape != state:
        raise ValueError(f"parscan.{op}: x0 has shape {x0.shape}; it must have the shape of a without dim, {state}")


def _negative_dim(op, name, array, dim):
    """dim counted from the end, so the leading batch dimensions vmap adds do not move it."""
    return normalize_dim(op, name, array.ndim, dim) - array.ndim


# ---------------------------------------------------------------------------------------------
# The gated recurrence.


def _gated_forward_call(a, b, x0, dim, reverse, gate):
    d = a.ndim + dim
    call = jax.ffi.ffi_call(
        "parscan_gated_forward",
        (jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(without(a.shape, d), a.dtype)),
        vmap_method="broadcast_all")
    return call(a, b, x0, dim=np.int64(dim), reverse=np.int64(reverse), gate=np.int64(GATES.index(gate)))


def _gated_backward_call(a, x, x0, dx, dx_final, dim, reverse, gate):
    shapes = (jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(a.shape, a.dtype),
              jax.ShapeDtypeStruct(x0.shape, a.dtype))
    call = jax.ffi.ffi_call("parscan_gated_backward", shapes, vmap_method="broadcast_all")
    return call(a, x, x0, dx, dx_final, dim=np.int64(dim), reverse=np.int64(reverse), gate=np.int64(GATES.index(gate)))


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _gated(a, b, x0, dim, reverse, gate):
    return _gated_forward_call(a, b, x0, dim, reverse, gate)


def _gated_fwd(a, b, x0, dim, reverse, gate):
    x, x_final = _gated_forward_call(a, b, x0, dim, reverse, gate)
    return (x, x_final), (a, x, x0)


def _gated_bwd(dim, reverse, gate, residuals, cotangents):
    a, x, x0 = residuals
    dx, dx_final = cotangents
    if jnp.iscomplexobj(a):
        # parscan's backward follows PyTorch's convention (da = db·conj(x[t-1])); JAX's
        # cotangents are their conjugates: conj(backward(conj(ct))) is JAX's vjp.
        da, db, dx0 = _gated_backward_call(a, x, x0, jnp.conj(dx), jnp.conj(dx_final), dim, reverse, gate)
        return jnp.conj(da), jnp.conj(db), jnp.conj(dx0)
    return _gated_backward_call(a, x, x0, dx, dx_final, dim, reverse, gate)


_gated.defvjp(_gated_fwd, _gated_bwd)


def gated_recurrence(a, b, x0=None, *, dim=-1, reverse=False, gate="linear", return_final=False):
    """x[t] = a[t] * x[t-1] + b[t] along dimension ``dim``, with x[-1] = x0 (or 0).

    a and b: arrays of one shape and dtype (float32, float64 with jax_enable_x64, bfloat16,
    float16, complex64; 16-bit types compute in float32). x0: the shape of a without ``dim``
    (optional; zeros otherwise). ``reverse`` runs from the last step to the first; gate="log"
    takes log a. Returns x, and with ``return_final`` also the last state computed.
    Differentiable in a, b and x0 (jax.grad, jax.vjp; complex: JAX's convention).
    """
    op = "gated_recurrence"
    _require_targets(op)
    check_choice(op, "gate", gate, GATES)
    a, b = jnp.asarray(a), jnp.asarray(b)
    d = _negative_dim(op, "a", a, dim)
    x0 = jnp.zeros(without(a.shape, a.ndim + d), a.dtype) if x0 is None else jnp.asarray(x0)
    _check_gated(op, a, b, x0, d)
    x, x_final = _gated(a, b, x0, d, bool(reverse), gate)
    return (x, x_final) if return_final else x


# ---------------------------------------------------------------------------------------------
# cumulative and reduce.


def _cumulative_call(x, op, dim, reverse, exclusive):
    call = jax.ffi.ffi_call("parscan_cumulative", jax.ShapeDtypeStruct(x.shape, x.dtype), vmap_method="broadcast_all")
    return call(x, op=np.int64(SCAN_OPERATORS.index(op)), dim=np.int64(dim), reverse=np.int64(reverse),
                exclusive=np.int64(exclusive))


@partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3, 4))
def _cumulative(x, op, dim, reverse, exclusive):
    return _cumulative_call(x, op, dim, reverse, exclusive)


def _cumulative_fwd(x, op, dim, reverse, exclusive):
    return _cumulative_call(x, op, dim, reverse, exclusive), None


def _cumulative_bwd(op, dim, reverse, exclusive, _residuals, grad):
    if op != "sum":
        raise NotImplementedError(f"parscan.jax.cumulative: no gradient for op=\"{op}\" (only \"sum\")")
    # dL/dx[s] sums the cotangent over the steps the scan reaches from s: the reverse scan.
    return (_cumulative_call(grad, "sum", dim, not reverse, exclusive),)


_cumulative.defvjp(_cumulative_fwd, _cumulative_bwd)


def cumulative(x, op="sum", *, dim=-1, reverse=False, exclusive=False):
    """Inclusive (or exclusive) scan of x along ``dim`` with op = "sum", "max" or "min".

    dtypes: float32, float64, bfloat16, float16 (accumulated in float32), int32, int64, complex64
    (sum only). Differentiable for op="sum".
    """
    _require_targets("cumulative")
    check_choice("cumulative", "op", op, SCAN_OPERATORS)
    x = jnp.asarray(x)
    return _cumulative(x, op, _negative_dim("cumulative", "x", x, dim), bool(reverse), bool(exclusive))


def _accumulator_dtype(dtype):
    return jnp.float32 if dtype in (jnp.float16, jnp.bfloat16) else dtype


def _reduce_call(x, op, dim):
    shape = without(x.shape, x.ndim + dim)
    call = jax.ffi.ffi_call("parscan_reduce", jax.ShapeDtypeStruct(shape, _accumulator_dtype(x.dtype)),
                            vmap_method="broadcast_all")
    return call(x, op=np.int64(SCAN_OPERATORS.index(op)), dim=np.int64(dim)).astype(x.dtype)


@partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _reduce(x, op, dim, length):
    return _reduce_call(x, op, dim)


def _reduce_fwd(x, op, dim, length):
    return _reduce_call(x, op, dim), None


def _reduce_bwd(op, dim, length, _residuals, grad):
    if op != "sum":
        raise NotImplementedError(f"parscan.jax.reduce: no gradient for op=\"{op}\" (only \"sum\")")
    spread = jnp.expand_dims(grad, dim)
    shape = list(spread.shape)
    shape[dim] = length
    return (jnp.broadcast_to(spread, tuple(shape)),)


_reduce.defvjp(_reduce_fwd, _reduce_bwd)


def reduce(x, op="sum", *, dim=-1):
    """Reduction of x along ``dim`` (op = "sum", "max" or "min"), in x's dtype; differentiable for "sum"."""
    _require_targets("reduce")
    check_choice("reduce", "op", op, SCAN_OPERATORS)
    x = jnp.asarray(x)
    d = _negative_dim("reduce", "x", x, dim)
    return _reduce(x, op, d, x.shape[d])


__all__ = ["cumulative", "gated_recurrence", "reduce"]
