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
from ._shapes import (CHAIN_ORDERS, GATES, SCAN_OPERATORS, chain_dim, chain_math, check_choice, check_log_forms,
                      check_signs, matrix_step_dim, normalize_dim, state_shape, without)


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


def _check_offsets(op, cu_seqlens):
    if cu_seqlens is not None and cu_seqlens.dtype not in (jnp.int32, jnp.int64):
        raise TypeError(f"parscan.{op}: cu_seqlens has dtype {cu_seqlens.dtype}; offsets are int64 or int32")


def _check_state(op, x0, d, cu_seqlens, ref, ref_name="a"):
    """x0 against the array ref (and the offsets of packed sequences, whose dtype is checked here)."""
    _check_offsets(op, cu_seqlens)
    state = state_shape(op, ref.shape, ref.ndim + d, cu_seqlens)
    if x0.shape != state:
        what = f"the shape of {ref_name} without dim"
        what = f"(N,) + {what}" if cu_seqlens is not None else what
        raise ValueError(f"parscan.{op}: x0 has shape {x0.shape}; it must have {what}, {state}")


def _check_gated(op, a, b, x0, d, cu_seqlens=None):
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
    _check_state(op, x0, d, cu_seqlens, a)


def _negative_dim(op, name, array, dim):
    """dim counted from the end, so the leading batch dimensions vmap adds do not move it."""
    return normalize_dim(op, name, array.ndim, dim) - array.ndim


# ---------------------------------------------------------------------------------------------
# The gated recurrence.


def _target(name, shapes, cu_seqlens):
    """(the FFI call of parscan_<name>, the operands it takes after the common ones). With
    packed sequences (cu_seqlens), the packed target parscan_<family>_varlen_<direction>, which
    takes the offsets last and, having no batch dimension, runs once per vmapped element."""
    if cu_seqlens is None:
        return jax.ffi.ffi_call(f"parscan_{name}", shapes, vmap_method="broadcast_all"), ()
    family, direction = name.split("_")
    return jax.ffi.ffi_call(f"parscan_{family}_varlen_{direction}", shapes, vmap_method="sequential"), (cu_seqlens,)


def _gated_forward_call(a, b, x0, cu_seqlens, dim, reverse, gate):
    shapes = (jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(x0.shape, a.dtype))
    call, offsets = _target("gated_forward", shapes, cu_seqlens)
    return call(a, b, x0, *offsets, dim=np.int64(dim), reverse=np.int64(reverse), gate=np.int64(GATES.index(gate)))


def _gated_backward_call(a, x, x0, dx, dx_final, cu_seqlens, dim, reverse, gate):
    shapes = (jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(a.shape, a.dtype),
              jax.ShapeDtypeStruct(x0.shape, a.dtype))
    call, offsets = _target("gated_backward", shapes, cu_seqlens)
    return call(a, x, x0, dx, dx_final, *offsets, dim=np.int64(dim), reverse=np.int64(reverse),
                gate=np.int64(GATES.index(gate)))


@partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _gated(a, b, x0, cu_seqlens, dim, reverse, gate):
    return _gated_forward_call(a, b, x0, cu_seqlens, dim, reverse, gate)


def _gated_fwd(a, b, x0, cu_seqlens, dim, reverse, gate):
    x, x_final = _gated_forward_call(a, b, x0, cu_seqlens, dim, reverse, gate)
    return (x, x_final), (a, x, x0, cu_seqlens)


def _gated_bwd(dim, reverse, gate, residuals, cotangents):
    a, x, x0, cu_seqlens = residuals
    dx, dx_final = cotangents
    # parscan's backward follows PyTorch's complex convention (da = db·conj(x[t-1])); JAX's
    # cotangents are their conjugates: conj(backward(conj(ct))) is JAX's vjp.
    conj = jnp.conj if jnp.iscomplexobj(a) else (lambda v: v)
    da, db, dx0 = _gated_backward_call(a, x, x0, conj(dx), conj(dx_final), cu_seqlens, dim, reverse, gate)
    return conj(da), conj(db), conj(dx0), None  # the offsets have no cotangent


_gated.defvjp(_gated_fwd, _gated_bwd)


def gated_recurrence(a, b, x0=None, *, dim=-1, reverse=False, gate="linear", return_final=False, cu_seqlens=None):
    """x[t] = a[t] * x[t-1] + b[t] along dimension ``dim``, with x[-1] = x0 (or 0).

    a and b: arrays of one shape and dtype (float32, float64 with jax_enable_x64, bfloat16,
    float16, complex64; 16-bit types compute in float32). x0: the shape of a without ``dim``
    (optional; zeros otherwise). ``reverse`` runs from the last step to the first; gate="log"
    takes log a. Returns x, and with ``return_final`` also the last state computed.
    Differentiable in a, b and x0 (jax.grad, jax.vjp; complex: JAX's convention).

    Packed sequences: with ``cu_seqlens`` (N + 1 int32 or int64 offsets), ``dim`` holds N
    sequences one after another, each its own recurrence from x0[n] to x_final[n]; x0 and
    x_final are (N,) + a's shape without ``dim``, and the other dimensions of a must collapse
    into one. Steps past cu_seqlens[N] are not computed (unspecified). Offsets are checked on
    the CPU (an error); on CUDA they are the caller's contract, as in the C++ API. Under vmap
    the packed call runs once per batch element.
    """
    op = "gated_recurrence"
    _require_targets(op)
    check_choice(op, "gate", gate, GATES)
    a, b = jnp.asarray(a), jnp.asarray(b)
    offsets = None if cu_seqlens is None else jnp.asarray(cu_seqlens)
    d = _negative_dim(op, "a", a, dim)
    state = state_shape(op, a.shape, a.ndim + d, offsets)
    x0 = jnp.zeros(state, a.dtype) if x0 is None else jnp.asarray(x0)
    _check_gated(op, a, b, x0, d, offsets)
    x, x_final = _gated(a, b, x0, offsets, d, bool(reverse), gate)
    return (x, x_final) if return_final else x


# ---------------------------------------------------------------------------------------------
# cumulative and reduce.


def _scan_target(name, shapes, cu_seqlens):
    """(the FFI call of parscan_<name>, the operands after x): with packed segments, the target
    parscan_<name>_varlen, which takes the offsets after x and runs once per vmapped element."""
    if cu_seqlens is None:
        return jax.ffi.ffi_call(f"parscan_{name}", shapes, vmap_method="broadcast_all"), ()
    return jax.ffi.ffi_call(f"parscan_{name}_varlen", shapes, vmap_method="sequential"), (cu_seqlens,)


def _cumulative_call(x, cu_seqlens, op, dim, reverse, exclusive):
    call, offsets = _scan_target("cumulative", jax.ShapeDtypeStruct(x.shape, x.dtype), cu_seqlens)
    return call(x, *offsets, op=np.int64(SCAN_OPERATORS.index(op)), dim=np.int64(dim), reverse=np.int64(reverse),
                exclusive=np.int64(exclusive))


@partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4, 5))
def _cumulative(x, cu_seqlens, op, dim, reverse, exclusive):
    return _cumulative_call(x, cu_seqlens, op, dim, reverse, exclusive)


def _cumulative_fwd(x, cu_seqlens, op, dim, reverse, exclusive):
    return _cumulative_call(x, cu_seqlens, op, dim, reverse, exclusive), cu_seqlens


def _cumulative_bwd(op, dim, reverse, exclusive, cu_seqlens, grad):
    if op != "sum":
        raise NotImplementedError(f"parscan.jax.cumulative: no gradient for op=\"{op}\" (only \"sum\")")
    # dL/dx[s] sums the cotangent over the steps the scan reaches from s: the reverse scan (within
    # each packed segment when there are segments).
    grad_x = _cumulative_call(grad, cu_seqlens, "sum", dim, not reverse, exclusive)
    if cu_seqlens is not None:  # the steps past cu_seqlens[N] reach no output, and the scan leaves them unwritten
        shape = [1] * grad.ndim
        shape[dim] = grad.shape[dim]
        steps = jnp.arange(grad.shape[dim], dtype=cu_seqlens.dtype).reshape(shape)
        grad_x = jnp.where(steps < cu_seqlens[-1], grad_x, jnp.zeros((), grad_x.dtype))
    return grad_x, None  # the offsets have no cotangent


_cumulative.defvjp(_cumulative_fwd, _cumulative_bwd)


def _check_segments(op, x, d, cu_seqlens):
    """With packed segments, what a trace can check: the offsets' dtype and shape, and x holding
    one sequence along d (the handler checks again at run time)."""
    if cu_seqlens is None:
        return
    _check_offsets(op, cu_seqlens)
    state_shape(op, x.shape, x.ndim + d, cu_seqlens)
    if any(n != 1 for i, n in enumerate(x.shape) if i != x.ndim + d):
        raise ValueError(f"parscan.{op}: x has shape {x.shape}: with cu_seqlens, the segments are packed along "
                         f"dim={x.ndim + d} of one sequence, so every other dimension must have size 1")


def cumulative(x, op="sum", *, dim=-1, reverse=False, exclusive=False, cu_seqlens=None):
    """Inclusive (or exclusive) scan of x along ``dim`` with op = "sum", "max" or "min".

    dtypes: float32, float64, bfloat16, float16 (accumulated in float32), int32, int64, complex64
    (sum only). Differentiable for op="sum". With ``cu_seqlens`` (N + 1 int32 or int64 offsets),
    ``dim`` holds N packed segments, each scanned on its own; x's other dimensions have size 1.
    Steps past cu_seqlens[N] are not computed (out unspecified, the gradient zero there).
    Offsets are checked on the CPU (ValueError), not on a GPU (the caller's contract).
    """
    _require_targets("cumulative")
    check_choice("cumulative", "op", op, SCAN_OPERATORS)
    x = jnp.asarray(x)
    offsets = None if cu_seqlens is None else jnp.asarray(cu_seqlens)
    _require_order("cumulative", x, op)
    d = _negative_dim("cumulative", "x", x, dim)
    _check_segments("cumulative", x, d, offsets)
    return _cumulative(x, offsets, op, d, bool(reverse), bool(exclusive))


def _require_order(name, x, op):
    # Checked here, at trace time, like every refusal that shapes and dtypes alone decide: on a
    # GPU the handler's own refusal would surface only when the result is read, not at the call.
    if op != "sum" and jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError(f'parscan.{name}: x is {x.dtype}, which has no order: only op="sum" applies')


def _accumulator_dtype(dtype):
    return jnp.float32 if dtype in (jnp.float16, jnp.bfloat16) else dtype


def _reduce_call(x, cu_seqlens, op, dim):
    shape = state_shape("reduce", x.shape, x.ndim + dim, cu_seqlens)
    call, offsets = _scan_target("reduce", jax.ShapeDtypeStruct(shape, _accumulator_dtype(x.dtype)), cu_seqlens)
    return call(x, *offsets, op=np.int64(SCAN_OPERATORS.index(op)), dim=np.int64(dim)).astype(x.dtype)


@partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _reduce(x, cu_seqlens, op, dim, shape):
    return _reduce_call(x, cu_seqlens, op, dim)


def _reduce_fwd(x, cu_seqlens, op, dim, shape):
    return _reduce_call(x, cu_seqlens, op, dim), cu_seqlens


def _reduce_bwd(op, dim, shape, cu_seqlens, grad):
    if op != "sum":
        raise NotImplementedError(f"parscan.jax.reduce: no gradient for op=\"{op}\" (only \"sum\")")
    if cu_seqlens is None:
        return jnp.broadcast_to(jnp.expand_dims(grad, dim), shape), None
    # Each step takes its segment's cotangent; a step past cu_seqlens[N] reaches no result: zero.
    # Every dimension but dim has size 1, so the steps index x's elements in order.
    steps = jnp.arange(shape[dim], dtype=cu_seqlens.dtype)
    segment = jnp.searchsorted(cu_seqlens[1:], steps, side="right")
    per_segment = jnp.concatenate([grad.reshape(-1), jnp.zeros(1, grad.dtype)])
    return per_segment[segment].reshape(shape), None  # offsets: no cotangent


_reduce.defvjp(_reduce_fwd, _reduce_bwd)


def reduce(x, op="sum", *, dim=-1, cu_seqlens=None):
    """Reduction of x along ``dim`` (op = "sum", "max" or "min"), in x's dtype; differentiable for "sum".

    With ``cu_seqlens`` (as for cumulative), one result per packed segment, shape (N,) + x's
    shape without ``dim``; an empty segment gives op's identity.
    """
    _require_targets("reduce")
    check_choice("reduce", "op", op, SCAN_OPERATORS)
    x = jnp.asarray(x)
    offsets = None if cu_seqlens is None else jnp.asarray(cu_seqlens)
    _require_order("reduce", x, op)
    d = _negative_dim("reduce", "x", x, dim)
    _check_segments("reduce", x, d, offsets)
    return _reduce(x, offsets, op, d, tuple(x.shape))


# ---------------------------------------------------------------------------------------------
# The log-space recurrence.

_LOG_TYPES = (jnp.float32, jnp.bfloat16)
# The handler's flags (see jax_ffi.cpp). forms: a bit set means value form; bit 3 is the
# upstream gradient's form. signs: which sign arrays are real (the others are placeholders).
# outputs: log|x| with its signs, x itself.
_A, _B, _X0, _DX = 1, 2, 4, 8
_OUT_LOG, _OUT_VALUE = 1, 2
_CHAIN_MATH = ("exact", "tf32", "bf16")


def _placeholder():
    """What stands for an absent sign array: the FFI signature has a fixed number of operands."""
    return jnp.zeros((0,), jnp.bool_)


def _sign_of(op, name, sign, magnitude):
    if sign is None:
        return None
    sign = jnp.asarray(sign)
    if sign.dtype not in (jnp.bool_, jnp.uint8):
        raise TypeError(f"parscan.{op}: {name} has dtype {sign.dtype}; a sign array is bool or uint8")
    if sign.shape != magnitude.shape:
        raise ValueError(f"parscan.{op}: {name} has shape {sign.shape}; it must have the shape {magnitude.shape}")
    return sign


def _check_log(op, a, b, x0, d, cu_seqlens=None):
    if a.dtype not in _LOG_TYPES:
        raise TypeError(f"parscan.{op}: a has dtype {a.dtype}; this operation takes float32, bfloat16")
    for name, other in (("b", b), ("x0", x0)):
        if other.dtype != a.dtype:
            raise TypeError(f"parscan.{op}: {name} has dtype {other.dtype} but a has dtype {a.dtype}; they must match")
    if b.shape != a.shape:
        raise ValueError(f"parscan.{op}: b has shape {b.shape} but a has shape {a.shape}; they must match")
    _check_state(op, x0, d, cu_seqlens, a)


def _log_forward_call(a, b, x0, signs, cu_seqlens, dim, reverse, forms, outputs):
    state = x0.shape
    full = (lambda wanted, dtype: jax.ShapeDtypeStruct(a.shape if wanted else (0,), dtype))
    shapes = (full(outputs & _OUT_LOG, a.dtype), full(outputs & _OUT_LOG, jnp.bool_), full(outputs & _OUT_VALUE, a.dtype),
              jax.ShapeDtypeStruct(state, a.dtype), jax.ShapeDtypeStruct(state, jnp.bool_))
    present = [s if s is not None else _placeholder() for s in signs]
    call, offsets = _target("log_forward", shapes, cu_seqlens)
    return call(a, b, x0, *present, *offsets, dim=np.int64(dim), reverse=np.int64(reverse), forms=np.int64(forms),
                signs=np.int64(_sign_mask(signs)), outputs=np.int64(outputs))


def _sign_mask(signs):
    return sum(bit for bit, sign in zip((_A, _B, _X0), signs) if sign is not None)


@partial(jax.custom_vjp, nondiff_argnums=(7, 8, 9, 10))
def _log(a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, dim, reverse, forms, output):
    outputs = _OUT_LOG if output == "log" else _OUT_VALUE
    log_x, x_negative, x, log_final, final_negative = _log_forward_call(
        a, b, x0, (a_negative, b_negative, x0_negative), cu_seqlens, dim, reverse, forms, outputs)
    return (log_x, x_negative) if output == "log" else (x, None), log_final, final_negative


def _log_fwd(a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, dim, reverse, forms, output):
    # log|x| and its signs are always kept: the backward reads them instead of recomputing x.
    outputs = _OUT_LOG | (_OUT_VALUE if output == "value" else 0)
    signs = (a_negative, b_negative, x0_negative)
    log_x, x_negative, x, log_final, final_negative = _log_forward_call(a, b, x0, signs, cu_seqlens, dim, reverse,
                                                                        forms, outputs)
    main = (log_x, x_negative) if output == "log" else (x, None)
    return (main, log_final, final_negative), (a, b, x0, signs, cu_seqlens, log_x, x_negative)


def _log_bwd(dim, reverse, forms, output, residuals, cotangents):
    a, b, x0, signs, cu_seqlens, log_x, x_negative = residuals
    (dx, _), dlog_final, _ = cotangents
    forms = forms | (_DX if output == "value" else 0)
    shapes = (jax.ShapeDtypeStruct(a.shape, a.dtype),) * 2 + (jax.ShapeDtypeStruct(x0.shape, a.dtype),)
    call, offsets = _target("log_backward", shapes, cu_seqlens)
    present = [s if s is not None else _placeholder() for s in signs]
    da, db, dx0 = call(a, b, x0, *present, log_x, x_negative, dx, dlog_final, *offsets, dim=np.int64(dim),
                       reverse=np.int64(reverse), forms=np.int64(forms), signs=np.int64(_sign_mask(signs)))
    return da, db, dx0, None, None, None, None  # sign arrays and offsets are not differentiable


_log.defvjp(_log_fwd, _log_bwd)


def log_recurrence(a, b, x0=None, *, dim=-1, reverse=False, a_negative=None, b_negative=None, x0_negative=None,
                   a_form="log", b_form="log", x0_form="log", output="log", return_final=False, cu_seqlens=None):
    """x[t] = a[t] * x[t-1] + b[t] carried in log space, along dimension ``dim``.

    The arguments and results are those of parscan.log_recurrence (packed sequences with
    ``cu_seqlens`` as for gated_recurrence, one call per element under vmap): float32 or
    bfloat16 arrays in log form (log|v|, with an optional bool or uint8 sign array
    ``*_negative``) or value form; output="log" returns (log|x|, x_negative), output="value"
    returns x; ``return_final`` adds (log|x_final|, x_final_negative). Differentiable in a, b and x0, each with respect to its
    form (log|v| or v); sign arrays are not differentiable.
    """
    op = "log_recurrence"
    _require_targets(op)
    check_log_forms(op, a_form, b_form, x0_form, output)
    check_signs(op, (("a", a_form, a_negative), ("b", b_form, b_negative), ("x0", x0_form, x0_negative)))
    if x0 is None and x0_negative is not None:
        raise ValueError(f"parscan.{op}: x0_negative is given without x0")
    a, b = jnp.asarray(a), jnp.asarray(b)
    offsets = None if cu_seqlens is None else jnp.asarray(cu_seqlens)
    d = _negative_dim(op, "a", a, dim)
    if x0 is None:
        # x[-1] = 0, which is a value (log form has no exact zero): the same forward.
        x0, x0_form = jnp.zeros(state_shape(op, a.shape, a.ndim + d, offsets), a.dtype), "value"
    x0 = jnp.asarray(x0)
    _check_log(op, a, b, x0, d, offsets)
    signs = (_sign_of(op, "a_negative", a_negative, a), _sign_of(op, "b_negative", b_negative, b),
             _sign_of(op, "x0_negative", x0_negative, x0))
    forms = sum(bit for bit, form in zip((_A, _B, _X0), (a_form, b_form, x0_form)) if form == "value")
    (main, main_negative), log_final, final_negative = _log(a, b, x0, *signs, offsets, d, bool(reverse), forms,
                                                            output)
    result = (main, main_negative) if output == "log" else (main,)
    if return_final:
        result += (log_final, final_negative)
    return result[0] if len(result) == 1 else result


# ---------------------------------------------------------------------------------------------
# The matrix recurrence and matrix chains.

_MATRIX_TYPES = (jnp.float32, jnp.float64, jnp.bfloat16, jnp.float16)


def _check_matrix(op, W, b, x0, d, cu_seqlens=None):
    if b.dtype not in _MATRIX_TYPES:
        raise TypeError(f"parscan.{op}: b has dtype {b.dtype}; this operation takes float32, float64, bfloat16, float16")
    for name, other in (("W", W), ("x0", x0)):
        if other.dtype != b.dtype:
            raise TypeError(f"parscan.{op}: {name} has dtype {other.dtype} but b has dtype {b.dtype}; they must match")
    # At trace time, as _require_order says why.
    if b.ndim >= 1 and not 1 <= b.shape[-1] <= 64:
        raise ValueError(f"parscan.{op}: b has state size N = {b.shape[-1]} (its last dimension); parscan takes "
                         "N = 1..64")
    if W.shape != b.shape + b.shape[-1:]:
        raise ValueError(f"parscan.{op}: W has shape {W.shape}; it must be b's shape {b.shape} followed by "
                         f"N = {b.shape[-1]}")
    _check_state(op, x0, d, cu_seqlens, b, "b")


def _matrix_forward_call(W, b, x0, cu_seqlens, dim, reverse):
    shapes = (jax.ShapeDtypeStruct(b.shape, b.dtype), jax.ShapeDtypeStruct(x0.shape, b.dtype))
    call, offsets = _target("matrix_forward", shapes, cu_seqlens)
    return call(W, b, x0, *offsets, dim=np.int64(dim), reverse=np.int64(reverse))


@partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _matrix(W, b, x0, cu_seqlens, dim, reverse):
    return _matrix_forward_call(W, b, x0, cu_seqlens, dim, reverse)


def _matrix_fwd(W, b, x0, cu_seqlens, dim, reverse):
    x, x_final = _matrix_forward_call(W, b, x0, cu_seqlens, dim, reverse)
    return (x, x_final), (W, x, x0, cu_seqlens)


def _matrix_bwd(dim, reverse, residuals, cotangents):
    W, x, x0, cu_seqlens = residuals
    dx, dx_final = cotangents
    shapes = (jax.ShapeDtypeStruct(W.shape, x.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype),
              jax.ShapeDtypeStruct(x0.shape, x.dtype))
    call, offsets = _target("matrix_backward", shapes, cu_seqlens)
    dW, db, dx0 = call(W, x, x0, dx, dx_final, *offsets, dim=np.int64(dim), reverse=np.int64(reverse))
    return dW, db, dx0, None  # the offsets have no cotangent


_matrix.defvjp(_matrix_fwd, _matrix_bwd)


def matrix_recurrence(W, b, x0=None, *, dim=-2, reverse=False, return_final=False, cu_seqlens=None):
    """x[t] = W[t] @ x[t-1] + b[t] along dimension ``dim`` of b, as parscan.matrix_recurrence.

    b: (..., N), N = 1..64; W: b's shape followed by N. dtypes float32, float64 (with
    jax_enable_x64), bfloat16, float16. x0: b's shape without ``dim`` (zeros when not given).
    Differentiable in W, b and x0 through parscan's backward. Packed sequences with
    ``cu_seqlens`` as in parscan.matrix_recurrence (one call per element under vmap).
    """
    op = "matrix_recurrence"
    _require_targets(op)
    W, b = jnp.asarray(W), jnp.asarray(b)
    offsets = None if cu_seqlens is None else jnp.asarray(cu_seqlens)
    d = matrix_step_dim(op, "b", b.ndim, dim) - b.ndim  # from the end: vmap's leading dimensions do not move it
    x0 = jnp.zeros(state_shape(op, b.shape, b.ndim + d, offsets), b.dtype) if x0 is None else jnp.asarray(x0)
    _check_matrix(op, W, b, x0, d, offsets)
    x, x_final = _matrix(W, b, x0, offsets, d, bool(reverse))
    return (x, x_final) if return_final else x


def _matrix_chain_call(M, dim, prefixes, order, math):
    shape = M.shape if prefixes else without(M.shape, M.ndim + dim)
    call = jax.ffi.ffi_call("parscan_matrix_chain", jax.ShapeDtypeStruct(shape, M.dtype), vmap_method="broadcast_all")
    return call(M, dim=np.int64(dim), prefixes=np.int64(prefixes), order=np.int64(CHAIN_ORDERS.index(order)),
                math=np.int64(_CHAIN_MATH.index(math)))


@partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3, 4))
def _matrix_chain(M, dim, prefixes, order, math):
    return _matrix_chain_call(M, dim, prefixes, order, math)


def _matrix_chain_fwd(M, dim, prefixes, order, math):
    return _matrix_chain_call(M, dim, prefixes, order, math), None


def _matrix_chain_bwd(dim, prefixes, order, math, _residuals, _grad):
    raise NotImplementedError("parscan.jax.matrix_chain has no gradient (forward only): parscan has no backward "
                              "kernel for matrix chains; wrap M in jax.lax.stop_gradient, or use "
                              "parscan.jax.matrix_recurrence")


_matrix_chain.defvjp(_matrix_chain_fwd, _matrix_chain_bwd)


def matrix_chain(M, *, prefixes=False, order="left_to_right", tensor_cores=None, dim=-3):
    """Products of the d×d matrices of M along ``dim``, as parscan.matrix_chain. Forward only:
    differentiating through it raises NotImplementedError."""
    op = "matrix_chain"
    _require_targets(op)
    check_choice(op, "order", order, CHAIN_ORDERS)
    math = chain_math(op, tensor_cores)
    M = jnp.asarray(M)
    if M.dtype not in _MATRIX_TYPES:
        raise TypeError(f"parscan.{op}: M has dtype {M.dtype}; this operation takes float32, float64, bfloat16, float16")
    d = chain_dim(op, M.ndim, dim) - M.ndim
    # At trace time, as _require_order says why.
    if M.shape[-1] != M.shape[-2]:
        raise ValueError(f"parscan.{op}: M has shape {tuple(M.shape)}; it must be (..., n, d, d): square matrices "
                         "after at least one chain dimension")
    return _matrix_chain(M, d, bool(prefixes), order, math)


__all__ = ["cumulative", "gated_recurrence", "log_recurrence", "matrix_chain", "matrix_recurrence", "reduce"]
