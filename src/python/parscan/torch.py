"""The PyTorch front end: parscan's operations as torch.library custom ops.

Each op has a fake (meta) implementation, so torch.compile(fullgraph=True) traces through it
without a graph break, and a registered autograd formula that calls parscan's own backward
(another custom op), so torch.autograd.gradcheck and double-precision training work. An op runs
on its tensors' device: CPU tensors on the host backend, CUDA tensors on the CUDA backend on the
current stream of that device (torch.cuda.current_stream), so it orders with the surrounding
PyTorch work and can be captured in a CUDA graph.

    import parscan.torch as pt
    x = pt.gated_recurrence(a, b, dim=1)          # a, b: (B, T, D), scanned along T
"""

from typing import Optional, Tuple

import torch

from . import _core
from ._shapes import GATES, SCAN_OPERATORS, check_choice, normalize_dim, without

_GATED_TYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64)


def _stream(t):
    """The stream parscan runs on: the current one of t's device (0 on the CPU, where none is used)."""
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0


def _plain(t):
    """t as DLPack can export it: lazily conjugated or negated views are materialised."""
    if t is None:
        return None
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    return t


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


@torch.library.custom_op("parscan::gated_recurrence", mutates_args=())
def _gated_forward(a: torch.Tensor, b: torch.Tensor, x0: Optional[torch.Tensor], dim: int, reverse: bool,
                   gate: str) -> Tuple[torch.Tensor, torch.Tensor]:
    d = _check_gated("gated_recurrence", a, b, dim, gate)
    x = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    x_final = torch.empty(without(a.shape, d), dtype=a.dtype, device=a.device)
    _core.gated_forward(_plain(a), _plain(b), x, _state(x0), x_final, d, reverse, gate, _stream(a))
    return x, x_final


@_gated_forward.register_fake
def _(a, b, x0, dim, reverse, gate):
    d = _check_gated("gated_recurrence", a, b, dim, gate)
    return a.new_empty(a.shape), a.new_empty(without(a.shape, d))


@torch.library.custom_op("parscan::gated_recurrence_backward", mutates_args=())
def _gated_backward(a: torch.Tensor, x: torch.Tensor, x0: Optional[torch.Tensor], dx: torch.Tensor,
                    dx_final: torch.Tensor, dim: int, reverse: bool,
                    gate: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    d = _check_gated("gated_recurrence_backward", a, a, dim, gate)
    da = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    db = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    # Without x0 there is no dx0: an empty tensor stands for it (a custom op returns tensors).
    dx0 = torch.empty(without(a.shape, d) if x0 is not None else (0,), dtype=a.dtype, device=a.device)
    # Incoming gradients may have any strides (expanded ones, say); dense ones always describe.
    _core.gated_backward(_plain(a), _plain(x), None, _state(x0), _plain(dx).contiguous(), _state(dx_final), da, db,
                         dx0 if x0 is not None else None, d, reverse, gate, _stream(a))
    return da, db, dx0


@_gated_backward.register_fake
def _(a, x, x0, dx, dx_final, dim, reverse, gate):
    d = _check_gated("gated_recurrence_backward", a, a, dim, gate)
    return a.new_empty(a.shape), a.new_empty(a.shape), a.new_empty(without(a.shape, d) if x0 is not None else (0,))


def _gated_setup_context(ctx, inputs, output):
    a, _b, x0, dim, reverse, gate = inputs
    x, _x_final = output
    ctx.save_for_backward(a, x, x0)
    ctx.options = (dim, reverse, gate)


def _gated_autograd(ctx, dx, dx_final):
    a, x, x0 = ctx.saved_tensors
    dim, reverse, gate = ctx.options
    if dx is None:
        dx = torch.zeros_like(x)
    if dx_final is None:
        dx_final = torch.zeros(without(a.shape, normalize_dim("gated_recurrence", "a", a.dim(), dim)), dtype=a.dtype,
                               device=a.device)
    da, db, dx0 = torch.ops.parscan.gated_recurrence_backward(a, x, x0, dx, dx_final, dim, reverse, gate)
    return da, db, (dx0 if x0 is not None else None), None, None, None


_gated_forward.register_autograd(_gated_autograd, setup_context=_gated_setup_context)


def gated_recurrence(a, b, x0=None, *, dim=-1, reverse=False, gate="linear", return_final=False):
    """x[t] = a[t] * x[t-1] + b[t] along dimension ``dim``, with x[-1] = x0 (or 0).

    a and b: tensors of one shape, dtype and device (float32, float64, bfloat16, float16,
    complex64; 16-bit types compute in float32), any strides the dimensions other than ``dim``
    can be described by (every contiguous tensor, transposed or not, and most slices). x0: the
    shape of a without ``dim`` (optional). ``reverse`` runs from the last step to the first;
    gate="log" takes log a. Returns x (a new contiguous tensor), and with ``return_final`` also
    the last state computed. Differentiable in a, b and x0 (complex: PyTorch's convention).
    """
    x, x_final = torch.ops.parscan.gated_recurrence(a, b, x0, dim, reverse, gate)
    return (x, x_final) if return_final else x


# ---------------------------------------------------------------------------------------------
# cumulative and reduce.


@torch.library.custom_op("parscan::cumulative", mutates_args=())
def _cumulative(x: torch.Tensor, op: str, dim: int, reverse: bool, exclusive: bool) -> torch.Tensor:
    check_choice("cumulative", "op", op, SCAN_OPERATORS)
    d = normalize_dim("cumulative", "x", x.dim(), dim)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _core.cumulative(_plain(x), out, op, d, reverse, exclusive, _stream(x))
    return out


@_cumulative.register_fake
def _(x, op, dim, reverse, exclusive):
    check_choice("cumulative", "op", op, SCAN_OPERATORS)
    normalize_dim("cumulative", "x", x.dim(), dim)
    return x.new_empty(x.shape)


def _cumulative_setup_context(ctx, inputs, output):
    _x, op, dim, reverse, exclusive = inputs
    ctx.options = (op, dim, reverse, exclusive)


def _cumulative_autograd(ctx, grad):
    op, dim, reverse, exclusive = ctx.options
    if op != "sum":
        raise NotImplementedError(f"parscan.torch.cumulative: no gradient for op=\"{op}\" (only \"sum\")")
    # out[t] sums x over the steps up to t (before t if exclusive) in the scan's direction, so
    # dL/dx[s] sums grad over the steps from s on (after s): the same scan the other way.
    return torch.ops.parscan.cumulative(grad, "sum", dim, not reverse, exclusive), None, None, None, None


_cumulative.register_autograd(_cumulative_autograd, setup_context=_cumulative_setup_context)


@torch.library.custom_op("parscan::reduce", mutates_args=())
def _reduce(x: torch.Tensor, op: str, dim: int) -> torch.Tensor:
    check_choice("reduce", "op", op, SCAN_OPERATORS)
    d = normalize_dim("reduce", "x", x.dim(), dim)
    wide = x.dtype in (torch.float16, torch.bfloat16)  # accumulated, and written, in float32
    out = torch.empty(without(x.shape, d), dtype=torch.float32 if wide else x.dtype, device=x.device)
    _core.reduce(_plain(x), out, op, d, _stream(x))
    return out.to(x.dtype) if wide else out


@_reduce.register_fake
def _(x, op, dim):
    check_choice("reduce", "op", op, SCAN_OPERATORS)
    d = normalize_dim("reduce", "x", x.dim(), dim)
    return x.new_empty(without(x.shape, d))


def _reduce_setup_context(ctx, inputs, output):
    x, op, dim = inputs
    ctx.options = (op, normalize_dim("reduce", "x", x.dim(), dim), x.shape)


def _reduce_autograd(ctx, grad):
    op, d, shape = ctx.options
    if op != "sum":
        raise NotImplementedError(f"parscan.torch.reduce: no gradient for op=\"{op}\" (only \"sum\")")
    return grad.unsqueeze(d).expand(shape), None, None


_reduce.register_autograd(_reduce_autograd, setup_context=_reduce_setup_context)


def cumulative(x, op="sum", *, dim=-1, reverse=False, exclusive=False):
    """Inclusive (or exclusive) scan of x along ``dim`` with op = "sum", "max" or "min".

    dtypes: float32, float64, bfloat16 and float16 (accumulated in float32), int32 and int64,
    complex64 (sum only). Differentiable for op="sum".
    """
    return torch.ops.parscan.cumulative(x, op, dim, reverse, exclusive)


def reduce(x, op="sum", *, dim=-1):
    """Reduction of x along ``dim`` (op = "sum", "max" or "min"), in x's dtype; differentiable for "sum"."""
    return torch.ops.parscan.reduce(x, op, dim)


__all__ = ["cumulative", "gated_recurrence", "reduce"]
