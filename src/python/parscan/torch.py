"""The PyTorch front end: parscan's operations as torch.library custom ops.

Each op has a fake (meta) implementation, so torch.compile(fullgraph=True) traces through it
without a graph break, and a registered autograd formula that calls parscan's own backward
(another custom op), so torch.autograd.gradcheck and double-precision training work. An op runs
on its tensors' device: CPU tensors on the host backend, CUDA tensors on the CUDA backend on the
current stream of that device (torch.cuda.current_stream), so it orders with the surrounding
PyTorch work and can be captured in a CUDA graph.

A custom op's dispatch costs tens of microseconds a call in Python (docs/performance.md, "Python
call cost"). Where it would add nothing (eager mode, plain tensors, no gradient wanted, no
tracer, transform or mode watching), a call runs the op's own kernel function directly; the
results are the same, bit for bit. Where a gradient is wanted, the op's own formula runs as an
autograd.Function.

    import parscan.torch as pt
    x = pt.gated_recurrence(a, b, dim=1)          # a, b: (B, T, D), scanned along T
"""

from typing import Optional, Tuple

import torch
from torch.utils.dlpack import to_dlpack as _to_dlpack

from . import _core
from ._shapes import (CHAIN_ORDERS, GATES, SCAN_OPERATORS, chain_dim, chain_math, check_choice, check_log_forms,
                      check_signs, matrix_step_dim, normalize_dim, state_shape, without)

_GATED_TYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64)


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(t):
    """The stream parscan runs on: the current one of t's device (0 on the CPU, where none is used).

    torch._C._cuda_getCurrentRawStream (what torch.compile's generated code calls) skips the
    Stream object torch.cuda.current_stream builds, a few microseconds per call."""
    if not t.is_cuda:
        return 0
    if _raw_stream is not None:
        return _raw_stream(t.get_device())
    return torch.cuda.current_stream(t.device).cuda_stream


# The argument types of the ops that are most often not tensors. Testing type(a) against these
# first costs less than isinstance(a, torch.Tensor) alone, which runs the tensor metaclass's
# __instancecheck__: a tiny eager gated forward took 1.4 µs less (docs/performance.md, "Python
# call cost"). Anything else (a str subclass, a NumPy array of offsets) still takes isinstance.
_NOT_TENSORS = (int, float, bool, str, type(None))

# The shape of an empty stand-in for a result not computed (a custom op returns a fixed set of tensors).
_EMPTY = (0,)


def _run(fn, *args):
    """fn(*args) with every tensor handed over as a DLPack capsule from torch's own exporter.

    Given tensors, nanobind calls Tensor.__dlpack__, whose stream bookkeeping (for a consumer on
    another stream; parscan runs on the current one) is Python code run for every tensor; torch's
    C exporter skips it."""
    return fn(*[a if type(a) in _NOT_TENSORS or not isinstance(a, torch.Tensor) else _to_dlpack(a) for a in args])


def _plain(t):
    """t as DLPack can export it: lazily conjugated or negated views are materialised. (torch's C
    exporter takes tensors that require gradients, so no detach is needed.)"""
    if t is None:
        return None
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    return t


_ops = torch.ops.parscan
_C = torch._C
_function_mode_on = getattr(_C, "_is_torch_function_mode_enabled", None)
_dispatch_modes = getattr(_C, "_len_torch_dispatch_stack", None)
_tracing_state = getattr(_C, "_get_tracing_state", None)
_functorch_wrapped = getattr(getattr(_C, "_functorch", None), "is_functorch_wrapped_tensor", None)
_functorch_active = getattr(_C, "_are_functorch_transforms_active", None)
# Without any of these PyTorch internals nothing can be ruled out, and every call dispatches.
_CAN_RUN_DIRECTLY = None not in (_function_mode_on, _dispatch_modes, _tracing_state, _functorch_wrapped,
                                 _functorch_active)
_is_compiling = torch.compiler.is_compiling
# Tensor types an eager call may run directly: nn.Parameter only marks a tensor as a module's
# weight (its __torch_function__ is disabled), so it behaves as the tensor it wraps.
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _eager_path(args):
    """How an eager call on args may skip the custom op's dispatch, which would add nothing but
    time: "direct" (run the op's function) or "autograd" (run it inside an autograd.Function with
    the op's own formula, where a tensor needs a gradient); None (dispatch) when compiling or
    jit-tracing, when a torch function or dispatch mode or a functorch transform is active, or
    when a tensor among args is not a plain CPU or CUDA torch.Tensor or nn.Parameter (another
    subclass, a fake or functorch-wrapped tensor)."""
    if (not _CAN_RUN_DIRECTLY or _is_compiling() or _function_mode_on() or _dispatch_modes()
            or _tracing_state() is not None or _functorch_active()):
        return None
    grad, wants_grad = _C.is_grad_enabled(), False
    for t in args:
        kind = type(t)
        if kind in _NOT_TENSORS:
            continue
        if kind in _PLAIN_TENSORS:
            if _functorch_wrapped(t) or not (t.is_cuda or t.is_cpu):
                return None
            wants_grad = wants_grad or (grad and t.requires_grad)
        elif isinstance(t, torch.Tensor):  # a subclass with behaviour of its own
            return None
    return "autograd" if wants_grad else "direct"


# The op functions that have a gradient formula, each with it as an autograd.Function's apply.
_WITH_GRADIENT = {}


def _call(kernel, op, *args):
    """op(*args), where op is the custom op made from kernel; in eager mode kernel(*args) itself, or
    kernel inside its autograd.Function, as _eager_path(args) allows."""
    return _call_on(_eager_path(args), kernel, op, args)


def _call_on(path, kernel, op, args):
    """_call(kernel, op, *args) with the path _eager_path(args) gave."""
    if path == "direct":
        return kernel(*args)
    if path == "autograd" and kernel in _WITH_GRADIENT:
        return _WITH_GRADIENT[kernel](*args)
    return op(*args)


# The forward op functions with results (x, x_final), each with the autograd.Function's apply
# that returns x alone and computes no x_final.
_WITH_GRADIENT_NO_FINAL = {}


def _forward_with_final(run, kernel, op, args, return_final):
    """x, or (x, x_final) with return_final, of a forward op whose results are (x, x_final): an
    eager call that does not return x_final does not compute it (run(*args, False), directly or
    inside the autograd.Function that returns x alone)."""
    path = _eager_path(args)
    if not return_final:
        if path == "direct":
            return run(*args, False)[0]
        if path == "autograd":
            return _WITH_GRADIENT_NO_FINAL[kernel](*args)
    x, x_final = _call_on(path, kernel, op, args)
    return (x, x_final) if return_final else x


def _backward_call(run, kernel, op, args, has_x0):
    """(gradients..., dx0) of a backward op whose last result is dx0, None without x0: a direct
    eager call without x0 allocates no empty stand-in for dx0 (run(*args))."""
    path = _eager_path(args)
    if path == "direct":
        return run(*args)
    *grads, dx0 = _call_on(path, kernel, op, args)
    return (*grads, dx0 if has_x0 else None)


def _with_stand_in(like, *results):
    """results with None replaced by an empty tensor like `like` (a custom op returns tensors)."""
    return tuple(like.new_empty(_EMPTY) if r is None else r for r in results)


def _register_autograd(kernel, name, backward, setup_context, run=None):
    """The gradient formula of op parscan::<name> made from kernel, registered with the op and kept
    as an autograd.Function for _call. With run (a forward's run(*args, want_final) -> (x,
    x_final)), also the autograd.Function that returns x alone, for _forward_with_final.

    The Functions leave the gradients of unused outputs None (set_materialize_grads(False)), so
    autograd fills no zeros for an x_final nobody reads: each formula takes None for a gradient."""
    torch.library.register_autograd(f"parscan::{name}", backward, setup_context=setup_context)

    def forward(ctx, *args):
        ctx.set_materialize_grads(False)
        output = kernel(*args)
        setup_context(ctx, args, output)
        return output

    _WITH_GRADIENT[kernel] = _function(f"{name}_autograd", forward, backward)
    if run is None:
        return

    def forward_no_final(ctx, *args):
        ctx.set_materialize_grads(False)
        x, _ = run(*args, False)
        setup_context(ctx, args, (x, None))
        return x

    _WITH_GRADIENT_NO_FINAL[kernel] = _function(f"{name}_autograd_no_final", forward_no_final,
                                                lambda ctx, dx: backward(ctx, dx, None))


# torch._C._FunctionBase's own apply: autograd.Function.apply without its Python layer, which
# binds default arguments for Functions with a setup_context (these have none) and routes calls
# under a functorch transform (_eager_path sends those to the custom op instead). That layer took
# about 3.5 µs of a tiny call (a CPU host, docs/performance.md, "Python call cost").
_function_base_apply = getattr(_C, "_FunctionBase", object).__dict__.get("apply")


def _function(name, forward, backward):
    """The apply of an autograd.Function named `name` (its graph node: <name>Backward, as profiles show it)."""
    cls = type(name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})
    return cls.apply if _function_base_apply is None else _function_base_apply.__get__(None, cls)


def _custom_op(name):
    """torch.library.custom_op(name) that returns the decorated function itself, for _call to run
    directly; the op is torch.ops.<name>, and its fake and autograd are registered by name."""
    def register(fn):
        torch.library.custom_op(name, mutates_args=())(fn)
        return fn
    return register


def _new_dense(t):
    """A new contiguous tensor of t's shape, dtype and device (torch.empty_like is the cheapest
    allocation to call from Python: about half the host time of new_empty(shape))."""
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def _state(t):
    """A per-sequence state (x0, dx_final): the extension takes it dense."""
    return None if t is None else _plain(t).contiguous()


def _check_gated(op, a, b, dim, gate):
    check_choice(op, "gate", gate, GATES)
    if a.dtype not in _GATED_TYPES:
        names = ", ".join(str(t).replace("torch.", "") for t in _GATED_TYPES)
        raise TypeError(f"parscan.{op}: a has dtype {a.dtype}; this operation takes {names}")
    return normalize_dim(op, "a", a.dim(), dim)


# ---------------------------------------------------------------------------------------------
# The gated recurrence.


def _gated_run(a, b, x0, cu_seqlens, dim, reverse, gate, want_final):
    """The gated forward into new tensors: (x, x_final), x_final None unless want_final."""
    op = "gated_recurrence"
    d = _check_gated(op, a, b, dim, gate)
    x = _new_dense(a)
    x_final = a.new_empty(state_shape(op, a.shape, d, cu_seqlens)) if want_final else None
    _run(_core.gated_forward, _plain(a), _plain(b), x, _state(x0), x_final, d, reverse, gate, _stream(a), cu_seqlens)
    return x, x_final


@_custom_op("parscan::gated_recurrence")
def _gated_forward(a: torch.Tensor, b: torch.Tensor, x0: Optional[torch.Tensor], cu_seqlens: Optional[torch.Tensor],
                   dim: int, reverse: bool, gate: str) -> Tuple[torch.Tensor, torch.Tensor]:
    return _gated_run(a, b, x0, cu_seqlens, dim, reverse, gate, True)


@torch.library.register_fake("parscan::gated_recurrence")
def _(a, b, x0, cu_seqlens, dim, reverse, gate):
    d = _check_gated("gated_recurrence", a, b, dim, gate)
    return a.new_empty(a.shape), a.new_empty(state_shape("gated_recurrence", a.shape, d, cu_seqlens))


def _gated_backward_run(a, x, x0, cu_seqlens, dx, dx_final, dim, reverse, gate):
    """The gated backward into new tensors: (da, db, dx0), dx0 None without x0."""
    op = "gated_recurrence_backward"
    d = _check_gated(op, a, a, dim, gate)
    da, db = _new_dense(a), _new_dense(a)
    dx0 = None if x0 is None else a.new_empty(state_shape(op, a.shape, d, cu_seqlens))
    # Incoming gradients may have any strides (expanded ones, say); dense ones always describe.
    _run(_core.gated_backward, _plain(a), _plain(x), None, _state(x0), _plain(dx).contiguous(), _state(dx_final), da, db,
         dx0, d, reverse, gate, _stream(a), cu_seqlens)
    return da, db, dx0


@_custom_op("parscan::gated_recurrence_backward")
def _gated_backward(a: torch.Tensor, x: torch.Tensor, x0: Optional[torch.Tensor], cu_seqlens: Optional[torch.Tensor],
                    dx: torch.Tensor, dx_final: Optional[torch.Tensor], dim: int, reverse: bool,
                    gate: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _with_stand_in(a, *_gated_backward_run(a, x, x0, cu_seqlens, dx, dx_final, dim, reverse, gate))


@torch.library.register_fake("parscan::gated_recurrence_backward")
def _(a, x, x0, cu_seqlens, dx, dx_final, dim, reverse, gate):
    op = "gated_recurrence_backward"
    d = _check_gated(op, a, a, dim, gate)
    return (a.new_empty(a.shape), a.new_empty(a.shape),
            a.new_empty(state_shape(op, a.shape, d, cu_seqlens) if x0 is not None else _EMPTY))


def _gated_setup_context(ctx, inputs, output):
    a, _b, x0, cu_seqlens, dim, reverse, gate = inputs
    x, _x_final = output
    ctx.save_for_backward(a, x, x0, cu_seqlens)
    ctx.options = (dim, reverse, gate)


def _gated_autograd(ctx, dx, dx_final):
    a, x, x0, cu_seqlens = ctx.saved_tensors
    dim, reverse, gate = ctx.options
    if dx is None:
        dx = torch.zeros_like(x)
    # dx_final None (x_final unused) reads as zero in the backward.
    da, db, dx0 = _backward_call(_gated_backward_run, _gated_backward, _ops.gated_recurrence_backward,
                                 (a, x, x0, cu_seqlens, dx, dx_final, dim, reverse, gate), x0 is not None)
    return da, db, dx0, None, None, None, None


_register_autograd(_gated_forward, "gated_recurrence", _gated_autograd, _gated_setup_context, _gated_run)


def gated_recurrence(a, b, x0=None, *, dim=-1, reverse=False, gate="linear", return_final=False, cu_seqlens=None):
    """x[t] = a[t] * x[t-1] + b[t] along dimension ``dim``, with x[-1] = x0 (or 0).

    a and b: tensors of one shape, dtype and device (float32, float64, bfloat16, float16,
    complex64; 16-bit types compute in float32), any strides the dimensions other than ``dim``
    can be described by (every contiguous tensor, transposed or not, and most slices). x0: the
    shape of a without ``dim`` (optional). ``reverse`` runs from the last step to the first;
    gate="log" takes log a. Returns x (a new contiguous tensor), and with ``return_final`` also
    the last state computed. Differentiable in a, b and x0 (complex: PyTorch's convention).

    Packed sequences: with ``cu_seqlens`` (N + 1 int64 or int32 offsets on a's device), ``dim``
    holds N sequences one after another, each its own recurrence from x0[n] to x_final[n]; the
    other dimensions collapse into one strided dimension, and x0, x_final are (N,) + a's shape
    without ``dim``. Steps past cu_seqlens[N] are not computed (x and the gradients unspecified
    there). CPU offsets are checked (ValueError); CUDA offsets are read on the device, where
    checking them would cost a synchronisation: offsets that are not non-decreasing from 0 up
    to at most a.shape[dim] are the caller's error there, as in the C++ API.
    """
    return _forward_with_final(_gated_run, _gated_forward, _ops.gated_recurrence,
                               (a, b, x0, cu_seqlens, dim, bool(reverse), gate), return_final)


# ---------------------------------------------------------------------------------------------
# cumulative and reduce.


@_custom_op("parscan::cumulative")
def _cumulative(x: torch.Tensor, cu_seqlens: Optional[torch.Tensor], op: str, dim: int, reverse: bool,
                exclusive: bool) -> torch.Tensor:
    check_choice("cumulative", "op", op, SCAN_OPERATORS)
    d = normalize_dim("cumulative", "x", x.dim(), dim)
    out = _new_dense(x)
    _run(_core.cumulative, _plain(x), out, op, d, reverse, exclusive, _stream(x), cu_seqlens)
    return out


@torch.library.register_fake("parscan::cumulative")
def _(x, cu_seqlens, op, dim, reverse, exclusive):
    check_choice("cumulative", "op", op, SCAN_OPERATORS)
    normalize_dim("cumulative", "x", x.dim(), dim)
    return x.new_empty(x.shape)


def _cumulative_setup_context(ctx, inputs, output):
    _x, cu_seqlens, op, dim, reverse, exclusive = inputs
    ctx.save_for_backward(cu_seqlens)
    ctx.options = (op, dim, reverse, exclusive)


def _cumulative_autograd(ctx, grad):
    op, dim, reverse, exclusive = ctx.options
    if grad is None:  # the result took no part in what is differentiated
        return None, None, None, None, None, None
    if op != "sum":
        raise NotImplementedError(f"parscan.torch.cumulative: no gradient for op=\"{op}\" (only \"sum\")")
    # out[t] sums x over the steps up to t (before t if exclusive) in the scan's direction, so
    # dL/dx[s] sums grad over the steps from s on (after s): the same scan the other way, within
    # each packed segment when there are segments.
    (cu_seqlens,) = ctx.saved_tensors
    if cu_seqlens is not None:  # segmented scans take unit strides (the gradient of a sum is expanded)
        grad = grad.contiguous()
    grad_x = _call(_cumulative, _ops.cumulative, grad, cu_seqlens, "sum", dim, not reverse, exclusive)
    if cu_seqlens is not None:  # the steps past cu_seqlens[N] reach no output, and the scan leaves them unwritten
        grad_x = grad_x.masked_fill(_past_the_segments(cu_seqlens, grad_x, dim), 0)
    return grad_x, None, None, None, None, None


_register_autograd(_cumulative, "cumulative", _cumulative_autograd, _cumulative_setup_context)


@_custom_op("parscan::reduce")
def _reduce(x: torch.Tensor, cu_seqlens: Optional[torch.Tensor], op: str, dim: int) -> torch.Tensor:
    check_choice("reduce", "op", op, SCAN_OPERATORS)
    d = normalize_dim("reduce", "x", x.dim(), dim)
    wide = x.dtype in (torch.float16, torch.bfloat16)  # accumulated, and written, in float32
    out = x.new_empty(state_shape("reduce", x.shape, d, cu_seqlens), dtype=torch.float32 if wide else x.dtype)
    _run(_core.reduce, _plain(x), out, op, d, _stream(x), cu_seqlens)
    return out.to(x.dtype) if wide else out


@torch.library.register_fake("parscan::reduce")
def _(x, cu_seqlens, op, dim):
    check_choice("reduce", "op", op, SCAN_OPERATORS)
    d = normalize_dim("reduce", "x", x.dim(), dim)
    return x.new_empty(state_shape("reduce", x.shape, d, cu_seqlens))


def _reduce_setup_context(ctx, inputs, output):
    x, cu_seqlens, op, dim = inputs
    ctx.save_for_backward(cu_seqlens)
    ctx.options = (op, normalize_dim("reduce", "x", x.dim(), dim), x.shape)


def _past_the_segments(cu_seqlens, like, dim):
    """True at the steps of `like` along dim from cu_seqlens[N] on (no synchronisation with the
    device), shaped to broadcast against `like`."""
    d = normalize_dim("cumulative", "x", like.dim(), dim)
    shape = [1] * like.dim()
    shape[d] = like.shape[d]
    steps = torch.arange(like.shape[d], dtype=cu_seqlens.dtype, device=like.device).view(shape)
    return steps >= cu_seqlens[-1]


def _segment_of_each_step(cu_seqlens, total):
    """For each of the `total` steps of the packed dimension, the index of its segment, or N for
    the steps past cu_seqlens[N] (which belong to none); no synchronisation with the device."""
    steps = torch.arange(total, dtype=cu_seqlens.dtype, device=cu_seqlens.device)
    return torch.searchsorted(cu_seqlens[1:], steps, right=True)


def _reduce_autograd(ctx, grad):
    op, d, shape = ctx.options
    if grad is None:  # the result took no part in what is differentiated
        return None, None, None, None
    if op != "sum":
        raise NotImplementedError(f"parscan.torch.reduce: no gradient for op=\"{op}\" (only \"sum\")")
    (cu_seqlens,) = ctx.saved_tensors
    if cu_seqlens is None:
        return grad.unsqueeze(d).expand(shape), None, None, None
    # Each step takes its segment's gradient; a step past cu_seqlens[N] reaches no result: zero.
    # Every dimension but d has size 1 (the segmented reduce's rule), so steps index x's elements.
    if shape.numel() == 0:
        return grad.new_zeros(shape), None, None, None
    per_segment = torch.cat([grad.reshape(-1), grad.new_zeros(1)])
    return per_segment[_segment_of_each_step(cu_seqlens, shape[d])].reshape(shape), None, None, None


_register_autograd(_reduce, "reduce", _reduce_autograd, _reduce_setup_context)


def cumulative(x, op="sum", *, dim=-1, reverse=False, exclusive=False, cu_seqlens=None):
    """Inclusive (or exclusive) scan of x along ``dim`` with op = "sum", "max" or "min".

    dtypes: float32, float64, bfloat16 and float16 (accumulated in float32), int32 and int64,
    complex64 (sum only). Differentiable for op="sum".

    Packed segments: with ``cu_seqlens`` (N + 1 int64 or int32 offsets on x's device), ``dim``
    holds N segments, each scanned on its own; x's other dimensions have size 1 and x is
    contiguous along ``dim``. Steps past cu_seqlens[N] are not computed (out unspecified there,
    the gradient zero). CPU offsets are checked (ValueError); CUDA offsets are the caller's
    contract, as for gated_recurrence.
    """
    return _call(_cumulative, _ops.cumulative, x, cu_seqlens, op, dim, bool(reverse), bool(exclusive))


def reduce(x, op="sum", *, dim=-1, cu_seqlens=None):
    """Reduction of x along ``dim`` (op = "sum", "max" or "min"), in x's dtype; differentiable for "sum".

    With ``cu_seqlens`` (as for cumulative), one result per packed segment, shape (N,) + x's
    shape without ``dim``; an empty segment gives op's identity.
    """
    return _call(_reduce, _ops.reduce, x, cu_seqlens, op, dim)


# ---------------------------------------------------------------------------------------------
# The log-space recurrence. One op computes log|x| with its sign (kept for the backward where a
# gradient is wanted, and returned for output="log") and/or x itself (output="value"); tensors
# that are not asked for are empty stand-ins, since a custom op returns a fixed set of tensors.


def _signs(magnitude, sign):
    """A sign array with its magnitude's element strides (contiguous copies of both if not)."""
    if sign is None:
        return _plain(magnitude), None
    magnitude, sign = _plain(magnitude), _plain(sign)
    if sign.shape == magnitude.shape and all(n <= 1 or p == q for n, p, q in
                                             zip(magnitude.shape, magnitude.stride(), sign.stride())):
        return magnitude, sign
    return magnitude.contiguous(), sign.contiguous()


def _log_run(a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, dim, reverse, a_form, b_form, x0_form,
             want_log, want_value, want_final):
    """The log-space forward into new tensors: (log|x|, x < 0, x, log|x_final|, x_final < 0), each
    None where want_log, want_value or want_final does not ask for it."""
    d = normalize_dim("log_recurrence", "a", a.dim(), dim)
    log_x, x_neg = (_new_dense(a), torch.empty_like(a, dtype=torch.bool, memory_format=torch.contiguous_format)) \
        if want_log else (None, None)
    x = _new_dense(a) if want_value else None
    final_shape = state_shape("log_recurrence", a.shape, d, cu_seqlens)
    log_final, final_neg = (a.new_empty(final_shape), a.new_empty(final_shape, dtype=torch.bool)) \
        if want_final else (None, None)
    a_, a_negative = _signs(a, a_negative)
    b_, b_negative = _signs(b, b_negative)
    x0_, x0_negative = (None, None) if x0 is None else (_state(x0), _state(x0_negative))
    _run(_core.log_forward, a_, b_, log_x, x_neg, x, x0_, a_negative, b_negative, x0_negative, log_final, final_neg,
         a_form, b_form, x0_form, d, reverse, _stream(a), cu_seqlens)
    return log_x, x_neg, x, log_final, final_neg


@_custom_op("parscan::log_recurrence")
def _log_forward(a: torch.Tensor, b: torch.Tensor, x0: Optional[torch.Tensor], a_negative: Optional[torch.Tensor],
                 b_negative: Optional[torch.Tensor], x0_negative: Optional[torch.Tensor],
                 cu_seqlens: Optional[torch.Tensor], dim: int, reverse: bool, a_form: str, b_form: str, x0_form: str,
                 want_log: bool,
                 want_value: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    log_x, x_neg, x, log_final, final_neg = _log_run(a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, dim,
                                                     reverse, a_form, b_form, x0_form, want_log, want_value, True)
    if not want_log:
        log_x, x_neg = a.new_empty(_EMPTY), a.new_empty(_EMPTY, dtype=torch.bool)
    return log_x, x_neg, x if want_value else a.new_empty(_EMPTY), log_final, final_neg


@torch.library.register_fake("parscan::log_recurrence")
def _(a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, dim, reverse, a_form, b_form, x0_form, want_log,
      want_value):
    d = normalize_dim("log_recurrence", "a", a.dim(), dim)
    full, state = (a.shape if want_log else _EMPTY), state_shape("log_recurrence", a.shape, d, cu_seqlens)
    return (a.new_empty(full), a.new_empty(full, dtype=torch.bool), a.new_empty(a.shape if want_value else _EMPTY),
            a.new_empty(state), a.new_empty(state, dtype=torch.bool))


def _log_backward_run(a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, log_x, x_negative, dx, dlog_x_final,
                      dim, reverse, a_form, b_form, x0_form, dx_form):
    """The log-space backward into new tensors: (da, db, dx0), dx0 None without x0."""
    op = "log_recurrence_backward"
    d = normalize_dim(op, "a", a.dim(), dim)
    da, db = _new_dense(a), _new_dense(a)
    dx0 = None if x0 is None else a.new_empty(state_shape(op, a.shape, d, cu_seqlens))
    a_, a_negative = _signs(a, a_negative)
    b_, b_negative = _signs(b, b_negative)
    log_x_, x_negative = (None, None) if log_x is None else _signs(log_x, x_negative)
    _run(_core.log_backward, a_, b_, _plain(dx).contiguous(), da, db, _state(x0), a_negative, b_negative,
         _state(x0_negative), log_x_, x_negative, _state(dlog_x_final), dx0, a_form, b_form, x0_form, dx_form, d,
         reverse, _stream(a), cu_seqlens)
    return da, db, dx0


@_custom_op("parscan::log_recurrence_backward")
def _log_backward(a: torch.Tensor, b: torch.Tensor, x0: Optional[torch.Tensor], a_negative: Optional[torch.Tensor],
                  b_negative: Optional[torch.Tensor], x0_negative: Optional[torch.Tensor],
                  cu_seqlens: Optional[torch.Tensor], log_x: Optional[torch.Tensor], x_negative: Optional[torch.Tensor],
                  dx: torch.Tensor, dlog_x_final: Optional[torch.Tensor], dim: int, reverse: bool, a_form: str,
                  b_form: str, x0_form: str, dx_form: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _with_stand_in(a, *_log_backward_run(a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, log_x,
                                                 x_negative, dx, dlog_x_final, dim, reverse, a_form, b_form, x0_form,
                                                 dx_form))


@torch.library.register_fake("parscan::log_recurrence_backward")
def _(a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, log_x, x_negative, dx, dlog_x_final, dim, reverse,
      a_form, b_form, x0_form, dx_form):
    op = "log_recurrence_backward"
    d = normalize_dim(op, "a", a.dim(), dim)
    return (a.new_empty(a.shape), a.new_empty(a.shape),
            a.new_empty(state_shape(op, a.shape, d, cu_seqlens) if x0 is not None else _EMPTY))


def _log_setup_context(ctx, inputs, output):
    (a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, dim, reverse, a_form, b_form, x0_form, want_log,
     want_value) = inputs
    log_x, x_negative = output[0], output[1]
    ctx.save_for_backward(a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, log_x, x_negative)
    ctx.options = (dim, reverse, a_form, b_form, x0_form, want_log, want_value)


def _log_autograd(ctx, dlog_x, _dx_negative, dx, dlog_x_final, _dfinal_negative):
    a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, log_x, x_negative = ctx.saved_tensors
    dim, reverse, a_form, b_form, x0_form, want_log, want_value = ctx.options
    # The caller sees log|x| (output="log") or x (output="value"), never both: its gradient is
    # the upstream one, in that form.
    upstream, form = (dx, "value") if want_value else (dlog_x, "log")
    if upstream is None:
        upstream = torch.zeros(a.shape, dtype=a.dtype, device=a.device)
    stored = want_log and log_x.numel() == a.numel()
    log_x, x_negative = (log_x, x_negative) if stored else (None, None)
    # dlog_x_final None (the final state unused) reads as zero in the backward.
    da, db, dx0 = _backward_call(_log_backward_run, _log_backward, _ops.log_recurrence_backward,
                                 (a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, log_x, x_negative,
                                  upstream, dlog_x_final, dim, reverse, a_form, b_form, x0_form, form), x0 is not None)
    return (da, db, dx0) + (None,) * 11


_register_autograd(_log_forward, "log_recurrence", _log_autograd, _log_setup_context)


def log_recurrence(a, b, x0=None, *, dim=-1, reverse=False, a_negative=None, b_negative=None, x0_negative=None,
                   a_form="log", b_form="log", x0_form="log", output="log", return_final=False, cu_seqlens=None):
    """x[t] = a[t] * x[t-1] + b[t] carried in log space, along dimension ``dim``.

    The arguments and results are those of parscan.log_recurrence (float32 or bfloat16 tensors;
    sign arrays bool or uint8; packed sequences with ``cu_seqlens`` as for gated_recurrence). Differentiable in a, b and x0, each with respect to its form
    (log|v| or v); sign arrays are not. With output="value" and gradients wanted, log|x| is
    also computed and kept for the backward (otherwise the backward recomputes it).
    """
    op = "log_recurrence"
    check_log_forms(op, a_form, b_form, x0_form, output)
    check_signs(op, (("a", a_form, a_negative), ("b", b_form, b_negative), ("x0", x0_form, x0_negative)))
    if a.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"parscan.{op}: a has dtype {a.dtype}; this operation takes float32, bfloat16")
    want_value = output == "value"
    args = (a, b, x0, a_negative, b_negative, x0_negative, cu_seqlens, dim, bool(reverse), a_form, b_form, x0_form)
    path = _eager_path(args)
    if path == "direct":  # only what is returned is computed
        log_x, x_negative, x, log_final, final_negative = _log_run(*args, not want_value, want_value, return_final)
    else:
        # With output="value" and a gradient wanted, log|x| is kept for the backward.
        wants_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (a, b, x0))
        log_x, x_negative, x, log_final, final_negative = _call_on(
            path, _log_forward, _ops.log_recurrence, args + (not want_value or wants_grad, want_value))
    result = (x,) if want_value else (log_x, x_negative)
    if return_final:
        result += (log_final, final_negative)
    return result[0] if len(result) == 1 else result


# ---------------------------------------------------------------------------------------------
# The matrix recurrence and matrix chains.

_MATRIX_TYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _check_matrix(op, b, dim):
    if b.dtype not in _MATRIX_TYPES:
        raise TypeError(f"parscan.{op}: b has dtype {b.dtype}; this operation takes float32, float64, bfloat16, float16")
    return matrix_step_dim(op, "b", b.dim(), dim)


def _matrix_run(W, b, x0, cu_seqlens, dim, reverse, want_final):
    """The matrix forward into new tensors: (x, x_final), x_final None unless want_final."""
    op = "matrix_recurrence"
    d = _check_matrix(op, b, dim)
    x = _new_dense(b)
    x_final = b.new_empty(state_shape(op, b.shape, d, cu_seqlens)) if want_final else None
    _run(_core.matrix_forward, _plain(W), _plain(b), x, _state(x0), x_final, d, reverse, _stream(b), cu_seqlens)
    return x, x_final


@_custom_op("parscan::matrix_recurrence")
def _matrix_forward(W: torch.Tensor, b: torch.Tensor, x0: Optional[torch.Tensor], cu_seqlens: Optional[torch.Tensor],
                    dim: int, reverse: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    return _matrix_run(W, b, x0, cu_seqlens, dim, reverse, True)


@torch.library.register_fake("parscan::matrix_recurrence")
def _(W, b, x0, cu_seqlens, dim, reverse):
    d = _check_matrix("matrix_recurrence", b, dim)
    return b.new_empty(b.shape), b.new_empty(state_shape("matrix_recurrence", b.shape, d, cu_seqlens))


def _matrix_backward_run(W, x, x0, cu_seqlens, dx, dx_final, dim, reverse):
    """The matrix backward into new tensors: (dW, db, dx0), dx0 None without x0."""
    op = "matrix_recurrence_backward"
    d = _check_matrix(op, x, dim)
    dW = _new_dense(W)
    db = _new_dense(x)
    dx0 = None if x0 is None else x.new_empty(state_shape(op, x.shape, d, cu_seqlens))
    _run(_core.matrix_backward, _plain(W), _plain(x), None, _state(x0), _plain(dx).contiguous(), _state(dx_final), dW, db,
         dx0, d, reverse, _stream(x), cu_seqlens)
    return dW, db, dx0


@_custom_op("parscan::matrix_recurrence_backward")
def _matrix_backward(W: torch.Tensor, x: torch.Tensor, x0: Optional[torch.Tensor], cu_seqlens: Optional[torch.Tensor],
                     dx: torch.Tensor, dx_final: Optional[torch.Tensor], dim: int,
                     reverse: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _with_stand_in(x, *_matrix_backward_run(W, x, x0, cu_seqlens, dx, dx_final, dim, reverse))


@torch.library.register_fake("parscan::matrix_recurrence_backward")
def _(W, x, x0, cu_seqlens, dx, dx_final, dim, reverse):
    op = "matrix_recurrence_backward"
    d = _check_matrix(op, x, dim)
    return (W.new_empty(W.shape), x.new_empty(x.shape),
            x.new_empty(state_shape(op, x.shape, d, cu_seqlens) if x0 is not None else _EMPTY))


def _matrix_setup_context(ctx, inputs, output):
    W, _b, x0, cu_seqlens, dim, reverse = inputs
    ctx.save_for_backward(W, output[0], x0, cu_seqlens)
    ctx.options = (dim, reverse)


def _matrix_autograd(ctx, dx, dx_final):
    W, x, x0, cu_seqlens = ctx.saved_tensors
    dim, reverse = ctx.options
    if dx is None:
        dx = torch.zeros_like(x)
    # dx_final None (x_final unused) reads as zero in the backward.
    dW, db, dx0 = _backward_call(_matrix_backward_run, _matrix_backward, _ops.matrix_recurrence_backward,
                                 (W, x, x0, cu_seqlens, dx, dx_final, dim, reverse), x0 is not None)
    return dW, db, dx0, None, None, None


_register_autograd(_matrix_forward, "matrix_recurrence", _matrix_autograd, _matrix_setup_context, _matrix_run)


def matrix_recurrence(W, b, x0=None, *, dim=-2, reverse=False, return_final=False, cu_seqlens=None):
    """x[t] = W[t] @ x[t-1] + b[t] along dimension ``dim`` of b, as parscan.matrix_recurrence.

    Differentiable in W, b and x0 through parscan's backward. Packed sequences with
    ``cu_seqlens`` as in parscan.matrix_recurrence.
    """
    return _forward_with_final(_matrix_run, _matrix_forward, _ops.matrix_recurrence,
                               (W, b, x0, cu_seqlens, dim, bool(reverse)), return_final)


@_custom_op("parscan::matrix_chain")
def _matrix_chain(M: torch.Tensor, dim: int, prefixes: bool, order: str, math: str) -> torch.Tensor:
    d = chain_dim("matrix_chain", M.dim(), dim)
    out = _new_dense(M) if prefixes else M.new_empty(without(M.shape, d))
    _run(_core.matrix_chain, _plain(M), out, d, prefixes, order, math, _stream(M))
    return out


@torch.library.register_fake("parscan::matrix_chain")
def _(M, dim, prefixes, order, math):
    d = chain_dim("matrix_chain", M.dim(), dim)
    return M.new_empty(M.shape if prefixes else without(M.shape, d))


def _matrix_chain_setup_context(ctx, inputs, output):
    pass


def _matrix_chain_autograd(ctx, grad):
    raise NotImplementedError("parscan.torch.matrix_chain has no gradient (forward only): parscan has no backward "
                              "kernel for matrix chains; detach M, or use parscan.torch.matrix_recurrence")


_register_autograd(_matrix_chain, "matrix_chain", _matrix_chain_autograd, _matrix_chain_setup_context)


def matrix_chain(M, *, prefixes=False, order="left_to_right", tensor_cores=None, dim=-3):
    """Products of the d×d matrices of M along ``dim``, as parscan.matrix_chain. Forward only:
    a backward through it raises NotImplementedError."""
    check_choice("matrix_chain", "order", order, CHAIN_ORDERS)
    math = chain_math("matrix_chain", tensor_cores)
    return _call(_matrix_chain, _ops.matrix_chain, M, dim, bool(prefixes), order, math)


__all__ = ["cumulative", "gated_recurrence", "log_recurrence", "matrix_chain", "matrix_recurrence", "reduce"]
