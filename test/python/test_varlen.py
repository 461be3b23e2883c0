"""Packed sequences (cu_seqlens) in the gated recurrence from Python: NumPy, PyTorch and JAX
against the float64 loop run on each sequence alone (reference.py), forward and backward, every
packed layout the front ends map (time first or last, several channel dimensions, one
dimension), int64 and int32 offsets, empty sequences, reverse and log gates; bad offsets and
arguments raise errors that name them, and write nothing. PyTorch and JAX parts are skipped
where they are not installed."""

import numpy as np
import pytest

import parscan
from parscan import _core

import reference as ref
from test_numpy import random_gates, random_values  # gates of magnitude in [0.6, 1), normal values

try:
    import torch
except ImportError:
    torch = None

DTYPES = {"float64": np.float64, "float32": np.float32, "complex64": np.complex64, "float16": np.float16}

# (shape with the packed time dimension as T, dim): (total, D), (D, total), (total, H, P), (total,)
LAYOUTS = [((None, 5), 0), ((4, None), 1), ((None, 2, 3), 0), ((None,), 0), ((3, None), -1)]


def packed_shape(layout, total):
    return tuple(total if n is None else n for n in layout)


def random_lengths(rng, count):
    """Lengths with the edges in: empty, one step, a prime, and random ones up to 40."""
    edges = [0, 1, 13, 0, 2]
    lengths = edges + list(rng.integers(0, 40, size=max(0, count - len(edges))))
    rng.shuffle(lengths)
    return np.array(lengths[:count], np.int64)


def offsets_of(lengths, spare=0):
    """cu_seqlens for lengths; the packed tensor gets `spare` steps past the last offset."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return offsets, int(offsets[-1]) + spare


def sequence(array, dim, start, stop):
    """Steps [start, stop) of array along dim."""
    index = [slice(None)] * array.ndim
    index[dim] = slice(start, stop)
    return array[tuple(index)]


def reference_forward(a, b, x0, offsets, dim, reverse=False, gate="linear"):
    """(x, x_final) of each sequence alone, in float64; x is NaN past the last offset."""
    x = np.full(a.shape, np.nan, np.complex128 if a.dtype.kind == "c" else np.float64)
    finals = []
    for n in range(len(offsets) - 1):
        lo, hi = int(offsets[n]), int(offsets[n + 1])
        xn, final = ref.gated_forward(sequence(a, dim, lo, hi), sequence(b, dim, lo, hi),
                                      None if x0 is None else x0[n], dim, reverse, gate)
        sequence(x, dim, lo, hi)[...] = xn
        finals.append(final)
    d = dim % a.ndim
    return x, (np.stack(finals) if finals else np.zeros((0,) + a.shape[:d] + a.shape[d + 1:]))


def reference_backward(a, b, dx, x0, dx_final, offsets, dim, reverse=False, gate="linear"):
    """(da, db, dx0) of each sequence alone, in float64."""
    kind = np.complex128 if a.dtype.kind == "c" else np.float64
    da, db = np.full(a.shape, np.nan, kind), np.full(a.shape, np.nan, kind)
    dx0 = []
    for n in range(len(offsets) - 1):
        lo, hi = int(offsets[n]), int(offsets[n + 1])
        dan, dbn, dx0n = ref.gated_backward(sequence(a, dim, lo, hi), sequence(b, dim, lo, hi),
                                            sequence(dx, dim, lo, hi), None if x0 is None else x0[n],
                                            None if dx_final is None else dx_final[n], dim, reverse, gate)
        sequence(da, dim, lo, hi)[...] = dan
        sequence(db, dim, lo, hi)[...] = dbn
        dx0.append(dx0n)
    return da, db, (np.stack(dx0) if x0 is not None and dx0 else None)


def assert_packed_close(actual, expected, used, dim, dtype_name, what):
    """actual equals expected over the steps [0, used) along dim."""
    ref.assert_close(sequence(actual, dim, 0, used), sequence(expected, dim, 0, used), dtype_name, what)


# ---------------------------------------------------------------------------------------------
# NumPy (the host backend).

@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("layout,dim", LAYOUTS)
@pytest.mark.parametrize("reverse,gate", [(False, "linear"), (True, "linear"), (False, "log")])
def test_numpy_forward_per_sequence(rng, dtype_name, layout, dim, reverse, gate):
    offsets, total = offsets_of(random_lengths(rng, 9), spare=3)
    shape = packed_shape(layout, total)
    a = random_gates(rng, shape, dtype_name)
    if gate == "log":
        a = np.log(ref.wide(a)).astype(a.dtype)
    b = random_values(rng, shape, dtype_name)
    state = (len(offsets) - 1,) + tuple(n for i, n in enumerate(shape) if i != dim % len(shape))
    x0 = random_values(rng, state, dtype_name)
    x, x_final = parscan.gated_recurrence(a, b, x0, dim=dim, reverse=reverse, gate=gate, return_final=True,
                                          cu_seqlens=offsets)
    want, want_final = reference_forward(a, b, x0, offsets, dim, reverse, gate)
    assert x.shape == a.shape and x_final.shape == state and x_final.dtype == a.dtype
    assert_packed_close(x, want, int(offsets[-1]), dim, dtype_name, "x")
    ref.assert_close(x_final, want_final, dtype_name, "x_final")


@pytest.mark.parametrize("dtype_name", ["float64", "float32", "complex64"])
@pytest.mark.parametrize("layout,dim", LAYOUTS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("with_x", [True, False])
def test_numpy_backward_per_sequence(rng, dtype_name, layout, dim, reverse, with_x):
    offsets, total = offsets_of(random_lengths(rng, 8), spare=2)
    shape = packed_shape(layout, total)
    a, b = random_gates(rng, shape, dtype_name), random_values(rng, shape, dtype_name)
    state = (len(offsets) - 1,) + tuple(n for i, n in enumerate(shape) if i != dim % len(shape))
    x0, dx_final = random_values(rng, state, dtype_name), random_values(rng, state, dtype_name)
    dx = random_values(rng, shape, dtype_name)
    x = parscan.gated_recurrence(a, b, x0, dim=dim, reverse=reverse, cu_seqlens=offsets) if with_x else None
    da, db, dx0 = parscan.gated_recurrence_backward(a, dx, x=x, b=None if with_x else b, x0=x0, dx_final=dx_final,
                                                    dim=dim, reverse=reverse, cu_seqlens=offsets)
    want_da, want_db, want_dx0 = reference_backward(a, b, dx, x0, dx_final, offsets, dim, reverse)
    used = int(offsets[-1])
    assert_packed_close(da, want_da, used, dim, dtype_name, "da")
    assert_packed_close(db, want_db, used, dim, dtype_name, "db")
    ref.assert_close(dx0, want_dx0, dtype_name, "dx0")


def test_numpy_int32_offsets_and_no_x0(rng):
    offsets, total = offsets_of(random_lengths(rng, 12))
    a, b = random_gates(rng, (total, 6), "float64"), random_values(rng, (total, 6), "float64")
    x64, f64 = parscan.gated_recurrence(a, b, dim=0, cu_seqlens=offsets, return_final=True)
    x32, f32 = parscan.gated_recurrence(a, b, dim=0, cu_seqlens=offsets.astype(np.int32), return_final=True)
    want, want_final = reference_forward(a, b, None, offsets, 0)
    ref.assert_close(x64, want, "float64", "x")
    ref.assert_close(f64, want_final, "float64", "x_final")
    np.testing.assert_array_equal(x32, x64)
    np.testing.assert_array_equal(f32, f64)


def test_numpy_zero_sequences_and_empty_channels(rng):
    a, b = random_gates(rng, (7, 3), "float32"), random_values(rng, (7, 3), "float32")
    x, x_final = parscan.gated_recurrence(a, b, dim=0, cu_seqlens=np.zeros(1, np.int64), return_final=True)
    assert x.shape == (7, 3) and x_final.shape == (0, 3)
    empty = np.ones((7, 0), np.float32)
    x, x_final = parscan.gated_recurrence(empty, empty, dim=0, cu_seqlens=np.array([0, 3, 7]), return_final=True)
    assert x.shape == (7, 0) and x_final.shape == (2, 0)


def test_numpy_low_level_writes_only_the_packed_steps(rng):
    """Through the extension with poisoned outputs: every step before cu_seqlens[N] is written,
    the steps after it and the inputs are not touched."""
    offsets, used = offsets_of(random_lengths(rng, 10))
    total = used + 5
    a, b = random_gates(rng, (total, 4), "float32"), random_values(rng, (total, 4), "float32")
    x0 = random_values(rng, (10, 4), "float32")
    a_copy, b_copy = a.copy(), b.copy()
    x, x_final = np.full((total, 4), np.nan, np.float32), np.full((10, 4), np.nan, np.float32)
    _core.gated_forward(a, b, x, x0, x_final, 0, False, "linear", cu_seqlens=offsets)
    want, want_final = reference_forward(a, b, x0, offsets, 0)
    ref.assert_close(x[:used], want[:used], "float32", "x")
    ref.assert_close(x_final, want_final, "float32", "x_final")
    assert np.isnan(x[used:]).all(), "a step past cu_seqlens[N] was written"
    np.testing.assert_array_equal(a, a_copy)
    np.testing.assert_array_equal(b, b_copy)


BAD_OFFSETS = [
    (np.array([0, 5, 3, 9]), ValueError, "segment offsets"),       # decreasing
    (np.array([1, 5, 9]), ValueError, "segment offsets"),          # not from 0
    (np.array([0, 5, 99]), ValueError, "segment offsets"),         # past the packed length
    (np.array([0.0, 5.0, 9.0]), TypeError, "cu_seqlens has dtype float64"),
    (np.array([[0, 5, 9]]), ValueError, "cu_seqlens has shape"),
    (np.zeros(0, np.int64), ValueError, "cu_seqlens has shape"),
    (np.arange(0, 20, 2)[::2], ValueError, "cu_seqlens (strides"),  # 0, 4, 8, ... not contiguous
]


@pytest.mark.parametrize("offsets,error,message", BAD_OFFSETS)
def test_numpy_bad_offsets_raise_and_write_nothing(rng, offsets, error, message):
    a, b = random_gates(rng, (12, 3), "float32"), random_values(rng, (12, 3), "float32")
    x, x_final = np.full((12, 3), np.nan, np.float32), np.full((max(len(offsets) - 1, 0), 3), np.nan, np.float32)
    with pytest.raises(error) as caught:
        _core.gated_forward(a, b, x, None, x_final, 0, False, "linear", cu_seqlens=offsets)
    assert message in str(caught.value)
    assert np.isnan(x).all() and np.isnan(x_final).all(), "a refused call wrote its outputs"
    da, db = np.full((12, 3), np.nan, np.float32), np.full((12, 3), np.nan, np.float32)
    with pytest.raises(error):
        _core.gated_backward(a, None, b, None, b, None, da, db, None, 0, False, "linear", cu_seqlens=offsets)
    assert np.isnan(da).all() and np.isnan(db).all()


def test_numpy_bad_arguments_name_them(rng):
    offsets = np.array([0, 4, 9])
    a, b = random_gates(rng, (9, 3), "float32"), random_values(rng, (9, 3), "float32")
    with pytest.raises(ValueError, match="x0 has shape"):
        parscan.gated_recurrence(a, b, np.zeros((3,), np.float32), dim=0, cu_seqlens=offsets)
    with pytest.raises(ValueError, match="x0 has shape"):
        parscan.gated_recurrence(a, b, np.zeros((3, 3), np.float32), dim=0, cu_seqlens=offsets)
    batch = random_values(rng, (2, 9, 3), "float32")
    with pytest.raises(ValueError, match="one strided dimension"):
        parscan.gated_recurrence(batch, batch, dim=1, cu_seqlens=offsets)
    dx = random_values(rng, (9, 3), "float32")
    with pytest.raises(ValueError, match="x0 has shape"):
        parscan.gated_recurrence_backward(a, dx, b=b, x0=np.zeros((9, 3), np.float32), dim=0, cu_seqlens=offsets)


# ---------------------------------------------------------------------------------------------
# PyTorch: CPU tensors on the host backend; CUDA tensors where a GPU is visible.

TORCH_DEVICES = []
if torch is not None:
    TORCH_DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and parscan.built_with_cuda else [])


def _torch_tensor(array, device, requires_grad=False):
    return torch.tensor(array, device=device, requires_grad=requires_grad)


def _numpy(t):
    return t.detach().cpu().numpy()


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("dtype_name", ["float32", "complex64"])
@pytest.mark.parametrize("layout,dim", [((None, 5), 0), ((4, None), 1), ((None, 2, 3), 0)])
@pytest.mark.parametrize("offset_type", [np.int64, np.int32])
def test_torch_forward_and_gradients_per_sequence(rng, device, dtype_name, layout, dim, offset_type):
    import parscan.torch as pt
    offsets, total = offsets_of(random_lengths(rng, 9))
    shape = packed_shape(layout, total)
    a_np, b_np = random_gates(rng, shape, dtype_name), random_values(rng, shape, dtype_name)
    state = (len(offsets) - 1,) + tuple(n for i, n in enumerate(shape) if i != dim % len(shape))
    x0_np, dx_np, dxf_np = (random_values(rng, s, dtype_name) for s in (state, shape, state))
    a, b, x0 = (_torch_tensor(v, device, True) for v in (a_np, b_np, x0_np))
    cu = torch.tensor(offsets.astype(offset_type), device=device)
    x, x_final = pt.gated_recurrence(a, b, x0, dim=dim, return_final=True, cu_seqlens=cu)
    want, want_final = reference_forward(a_np, b_np, x0_np, offsets, dim)
    ref.assert_close(_numpy(x), want, dtype_name, "x")
    ref.assert_close(_numpy(x_final), want_final, dtype_name, "x_final")
    dx, dxf = _torch_tensor(dx_np, device), _torch_tensor(dxf_np, device)
    # PyTorch's complex convention: the gradient of Re<dx, x> is what the backward computes.
    loss = (torch.real(torch.sum(torch.conj(dx) * x)) + torch.real(torch.sum(torch.conj(dxf) * x_final)))
    loss.backward()
    want_da, want_db, want_dx0 = reference_backward(a_np, b_np, dx_np, x0_np, dxf_np, offsets, dim)
    ref.assert_close(_numpy(a.grad), want_da, dtype_name, "a.grad")
    ref.assert_close(_numpy(b.grad), want_db, dtype_name, "b.grad")
    ref.assert_close(_numpy(x0.grad), want_dx0, dtype_name, "x0.grad")


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
def test_torch_gradcheck_and_compile(rng):
    import parscan.torch as pt
    offsets, total = offsets_of(np.array([3, 0, 5, 1]))
    cu = torch.tensor(offsets)
    a = torch.tensor(random_gates(rng, (total, 2), "float64"), requires_grad=True)
    b = torch.tensor(random_values(rng, (total, 2), "float64"), requires_grad=True)
    x0 = torch.tensor(random_values(rng, (4, 2), "float64"), requires_grad=True)

    def f(a, b, x0):
        return pt.gated_recurrence(a, b, x0, dim=0, return_final=True, cu_seqlens=cu)

    assert torch.autograd.gradcheck(f, (a, b, x0))
    compiled = torch.compile(lambda a, b, x0: pt.gated_recurrence(a, b, x0, dim=0, cu_seqlens=cu), fullgraph=True)
    torch.testing.assert_close(compiled(a, b, x0), f(a, b, x0)[0], rtol=0, atol=0)


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
def test_torch_bad_offsets_name_them(rng):
    import parscan.torch as pt
    a = torch.tensor(random_gates(rng, (9, 3), "float32"))
    with pytest.raises(TypeError, match="cu_seqlens has dtype"):
        pt.gated_recurrence(a, a, dim=0, cu_seqlens=torch.tensor([0.0, 9.0]))
    with pytest.raises(ValueError, match="segment offsets"):
        pt.gated_recurrence(a, a, dim=0, cu_seqlens=torch.tensor([0, 7, 4]))
    with pytest.raises(ValueError, match="cu_seqlens has shape"):
        pt.gated_recurrence(a, a, dim=0, cu_seqlens=torch.tensor([[0, 9]]))
    if "cuda" in TORCH_DEVICES:
        with pytest.raises(ValueError, match="cu_seqlens is on cpu"):
            pt.gated_recurrence(a.cuda(), a.cuda(), dim=0, cu_seqlens=torch.tensor([0, 9]))


# ---------------------------------------------------------------------------------------------
# JAX: jit, grad and vmap.

def _jax():
    jax = pytest.importorskip("jax")
    if not _core.jax_targets():
        pytest.skip("parscan was built without JAX support")
    if not parscan.built_with_cuda:
        jax.config.update("jax_default_device", jax.devices("cpu")[0])
    return jax


@pytest.mark.parametrize("offset_type", [np.int32, np.int64])
def test_jax_jit_grad_vmap_per_sequence(rng, offset_type):
    jax = _jax()
    jnp = jax.numpy
    import parscan.jax as pj
    jax.config.update("jax_enable_x64", True)  # float64 references (test_jax.py sets it too)
    offsets, total = offsets_of(random_lengths(rng, 7))
    cu = jnp.asarray(offsets.astype(offset_type))
    a_np, b_np = random_gates(rng, (total, 3), "float64"), random_values(rng, (total, 3), "float64")
    x0_np, dx_np = random_values(rng, (7, 3), "float64"), random_values(rng, (total, 3), "float64")

    def forward(a, b, x0):
        return pj.gated_recurrence(a, b, x0, dim=0, cu_seqlens=cu)

    x = jax.jit(forward)(a_np, b_np, x0_np)
    want, _ = reference_forward(a_np, b_np, x0_np, offsets, 0)
    ref.assert_close(np.asarray(x), want, "float64", "x")
    grads = jax.grad(lambda a, b, x0: jnp.sum(forward(a, b, x0) * dx_np), argnums=(0, 1, 2))(a_np, b_np, x0_np)
    want_da, want_db, want_dx0 = reference_backward(a_np, b_np, dx_np, x0_np, None, offsets, 0)
    for got, expected, name in zip(grads, (want_da, want_db, want_dx0), ("da", "db", "dx0")):
        ref.assert_close(np.asarray(got), expected, "float64", name)
    batched = jax.vmap(forward)(np.stack([a_np, a_np[::-1].copy()]), np.stack([b_np, b_np]),
                                np.stack([x0_np, x0_np]))
    ref.assert_close(np.asarray(batched[0]), want, "float64", "vmap x[0]")
    want_1, _ = reference_forward(a_np[::-1].copy(), b_np, x0_np, offsets, 0)
    ref.assert_close(np.asarray(batched[1]), want_1, "float64", "vmap x[1]")


def test_jax_bad_offsets_raise(rng):
    jax = _jax()
    jnp = jax.numpy
    import parscan.jax as pj
    a = jnp.asarray(random_gates(rng, (9, 3), "float32"))
    with pytest.raises(TypeError, match="cu_seqlens has dtype"):
        pj.gated_recurrence(a, a, dim=0, cu_seqlens=jnp.asarray([0.0, 9.0]))
    with pytest.raises(ValueError, match="x0 has shape"):
        pj.gated_recurrence(a, a, jnp.zeros((3,), a.dtype), dim=0, cu_seqlens=jnp.asarray([0, 4, 9]))
    # Checked on the CPU target only: on CUDA, offsets are the caller's contract (no check).
    cpu = jax.devices("cpu")[0]
    a_cpu, bad = jax.device_put(a, cpu), jax.device_put(jnp.asarray([0, 7, 4]), cpu)
    with pytest.raises(Exception, match="segment offsets"):
        jax.block_until_ready(jax.jit(lambda a, cu: pj.gated_recurrence(a, a, dim=0, cu_seqlens=cu))(a_cpu, bad))


# ---------------------------------------------------------------------------------------------
# The log-space recurrence over packed sequences: each sequence against the batch call on it
# alone (bitwise on the host, where both run the same loops), and against the float64 loop.

from test_numpy_log_matrix import (LOG_DTYPES, SIGNED_GRADIENT_TOLERANCE, assert_log_close,  # noqa: E402
                                   log_inputs)

LOG_FORMS = [("log", "log", True), ("value", "value", True), ("log", "value", False)]


def log_case(rng, layout, dim, a_form, b_form, signed, dtype_name="float32", count=8, spare=2):
    """Packed log-space inputs: (offsets, a, a_neg, b, b_neg, x0, x0_neg, float64 values of a, b, x0)."""
    offsets, total = offsets_of(random_lengths(rng, count), spare=spare)
    shape = packed_shape(layout, total)
    state = (count,) + tuple(n for i, n in enumerate(shape) if i != dim % len(shape))
    a, a_neg, a_val = log_inputs(rng, shape, dtype_name, a_form, signed)
    b, b_neg, b_val = log_inputs(rng, shape, dtype_name, b_form, signed)
    x0, x0_neg, x0_val = log_inputs(rng, state, dtype_name, "log", signed)
    return offsets, a, a_neg, b, b_neg, x0, x0_neg, a_val, b_val, x0_val


def part(array, dim, offsets, n):
    return None if array is None else sequence(array, dim, int(offsets[n]), int(offsets[n + 1]))


@pytest.mark.parametrize("dtype_name", list(LOG_DTYPES))
@pytest.mark.parametrize("a_form,b_form,signed", LOG_FORMS)
@pytest.mark.parametrize("layout,dim", LAYOUTS)
@pytest.mark.parametrize("reverse", [False, True])
def test_numpy_log_forward_per_sequence(rng, dtype_name, a_form, b_form, signed, layout, dim, reverse):
    offsets, a, a_neg, b, b_neg, x0, x0_neg, a_val, b_val, x0_val = log_case(rng, layout, dim, a_form, b_form, signed,
                                                                              dtype_name)
    common = dict(dim=dim, reverse=reverse, a_form=a_form, b_form=b_form, return_final=True)
    log_x, x_neg, log_final, final_neg = parscan.log_recurrence(
        a, b, x0, a_negative=a_neg, b_negative=b_neg, x0_negative=x0_neg, cu_seqlens=offsets, **common)
    assert log_final.shape == x0.shape and final_neg.shape == x0.shape
    for n in range(len(offsets) - 1):
        alone = parscan.log_recurrence(part(a, dim, offsets, n), part(b, dim, offsets, n), x0[n],
                                       a_negative=part(a_neg, dim, offsets, n), b_negative=part(b_neg, dim, offsets, n),
                                       x0_negative=None if x0_neg is None else x0_neg[n], **common)
        for got, want, what in zip((part(log_x, dim, offsets, n), part(x_neg, dim, offsets, n), log_final[n],
                                    final_neg[n]), alone, ("log_x", "x_negative", "log_x_final", "x_final_negative")):
            np.testing.assert_array_equal(got, want, err_msg=f"sequence {n}: {what}")
    want, want_final = reference_forward(a_val, b_val, x0_val, offsets, dim, reverse)
    used = int(offsets[-1])
    x = ref.from_log(sequence(log_x, dim, 0, used), sequence(x_neg, dim, 0, used))
    assert_log_close(x, sequence(want, dim, 0, used), dtype_name, "x")
    assert_log_close(ref.from_log(log_final, final_neg), want_final, dtype_name, "x_final")


@pytest.mark.parametrize("a_form,b_form,signed", LOG_FORMS)
@pytest.mark.parametrize("layout,dim", LAYOUTS[:3])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("with_log_x", [True, False])
def test_numpy_log_backward_per_sequence(rng, a_form, b_form, signed, layout, dim, reverse, with_log_x):
    offsets, a, a_neg, b, b_neg, x0, x0_neg, *_ = log_case(rng, layout, dim, a_form, b_form, signed)
    signs = dict(a_negative=a_neg, b_negative=b_neg, x0_negative=x0_neg)
    options = dict(dim=dim, reverse=reverse, a_form=a_form, b_form=b_form)
    log_x = x_neg = None
    if with_log_x:
        log_x, x_neg = parscan.log_recurrence(a, b, x0, cu_seqlens=offsets, **signs, **options)
    dx = random_values(rng, a.shape, "float32")
    dfinal = random_values(rng, x0.shape, "float32")
    da, db, dx0 = parscan.log_recurrence_backward(a, b, dx, x0=x0, log_x=log_x, x_negative=x_neg, dlog_x_final=dfinal,
                                                  cu_seqlens=offsets, **signs, **options)
    assert dx0.shape == x0.shape
    for n in range(len(offsets) - 1):
        alone = parscan.log_recurrence_backward(
            part(a, dim, offsets, n), part(b, dim, offsets, n), part(dx, dim, offsets, n), x0=x0[n],
            a_negative=part(a_neg, dim, offsets, n), b_negative=part(b_neg, dim, offsets, n),
            x0_negative=None if x0_neg is None else x0_neg[n], log_x=part(log_x, dim, offsets, n),
            x_negative=part(x_neg, dim, offsets, n), dlog_x_final=dfinal[n], **options)
        for got, want, what in zip((part(da, dim, offsets, n), part(db, dim, offsets, n), dx0[n]), alone,
                                   ("da", "db", "dx0")):
            np.testing.assert_array_equal(got, want, err_msg=f"sequence {n}: {what}")


def test_numpy_log_bad_arguments(rng):
    offsets, a, a_neg, b, b_neg, x0, x0_neg, *_ = log_case(rng, (None, 3), 0, "log", "log", True)
    with pytest.raises(ValueError, match="x0 has shape"):
        parscan.log_recurrence(a, b, x0[0], dim=0, cu_seqlens=offsets)
    with pytest.raises(ValueError, match="segment offsets"):
        parscan.log_recurrence(a, b, dim=0, cu_seqlens=offsets[::-1].copy())
    with pytest.raises(TypeError, match="cu_seqlens has dtype"):
        parscan.log_recurrence(a, b, dim=0, cu_seqlens=offsets.astype(np.float32))


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("output", ["log", "value"])
def test_torch_log_forward_and_gradients_per_sequence(rng, device, output):
    import parscan.torch as pt
    offsets, a, a_neg, b, b_neg, x0, x0_neg, *_ = log_case(rng, (None, 4), 0, "log", "value", True, spare=0)
    cu = torch.tensor(offsets.astype(np.int32), device=device)
    t = {k: torch.tensor(v, device=device) for k, v in dict(a=a, a_neg=a_neg, b=b, x0=x0, x0_neg=x0_neg).items()}
    leaves = [t[k].clone().requires_grad_() for k in ("a", "b", "x0")]
    options = dict(dim=0, b_form="value", output=output)
    packed = pt.log_recurrence(*leaves, a_negative=t["a_neg"], x0_negative=t["x0_neg"], cu_seqlens=cu, **options)
    main = packed if output == "value" else packed[0]
    weights = torch.tensor(random_values(rng, a.shape, "float32"), device=device)
    (main * weights).sum().backward()
    for n in range(len(offsets) - 1):
        lo, hi = int(offsets[n]), int(offsets[n + 1])
        alone_leaves = [t["a"][lo:hi].clone().requires_grad_(), t["b"][lo:hi].clone().requires_grad_(),
                        t["x0"][n].clone().requires_grad_()]
        alone = pt.log_recurrence(*alone_leaves, a_negative=t["a_neg"][lo:hi], x0_negative=t["x0_neg"][n], **options)
        alone_main = alone if output == "value" else alone[0]
        torch.testing.assert_close(main[lo:hi], alone_main, rtol=1e-5, atol=1e-6)
        if hi > lo:
            (alone_main * weights[lo:hi]).sum().backward()
            for packed_grad, alone_grad, name in ((leaves[0].grad[lo:hi], alone_leaves[0].grad, "da"),
                                                  (leaves[1].grad[lo:hi], alone_leaves[1].grad, "db"),
                                                  (leaves[2].grad[n], alone_leaves[2].grad, "dx0")):
                if device == "cpu":
                    torch.testing.assert_close(packed_grad, alone_grad, rtol=1e-5, atol=1e-6)
                else:  # the packed and the one-sequence CUDA kernels associate differently, on
                    # signed states that can cancel: normwise, as the JAX test below
                    assert_log_close(packed_grad.cpu().numpy(), alone_grad.cpu().numpy(), "float32",
                                     f"sequence {n}: {name}", SIGNED_GRADIENT_TOLERANCE, normwise=True)


def test_jax_log_jit_grad_per_sequence(rng):
    jax = _jax()
    jnp = jax.numpy
    import parscan.jax as pj
    offsets, a, a_neg, b, b_neg, x0, x0_neg, *_ = log_case(rng, (None, 3), 0, "log", "log", True, spare=0)
    cu = jnp.asarray(offsets.astype(np.int32))
    weights = random_values(rng, a.shape, "float32")

    def loss(a, b, x0):
        log_x, _ = pj.log_recurrence(a, b, x0, dim=0, a_negative=a_neg, x0_negative=x0_neg, cu_seqlens=cu)
        return jnp.sum(log_x * weights)

    value, grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(a, b, x0)
    signs = dict(a_negative=a_neg, x0_negative=x0_neg)
    log_x, _ = parscan.log_recurrence(a, b, x0, dim=0, cu_seqlens=offsets, **signs)
    np.testing.assert_allclose(float(value), float(np.sum(log_x.astype(np.float64) * weights)), rtol=1e-4)
    want = parscan.log_recurrence_backward(a, b, weights, x0=x0, dim=0, cu_seqlens=offsets, **signs)
    # On the CPU the same kernels run: equal to rounding. On a GPU JAX runs the CUDA backward,
    # which associates differently, on signed states that can cancel: normwise, as
    # test_jax_log_matrix.py compares the CUDA and NumPy gradients.
    on_cpu = jax.default_backend() == "cpu"
    for got, expected, name in zip(grads, want, ("da", "db", "dx0")):
        if on_cpu:
            np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-5, atol=1e-6, err_msg=name)
        else:
            assert_log_close(np.asarray(got), expected, "float32", name + " (CUDA against NumPy)",
                             SIGNED_GRADIENT_TOLERANCE, normwise=True)


# ---------------------------------------------------------------------------------------------
# The matrix recurrence over packed sequences: each sequence against the batch call on it alone
# (bitwise on the host), forward and backward.

MATRIX_DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16}


def matrix_case(rng, n, dtype_name, leading=(), count=7, spare=2):
    """(offsets, W, b, x0): W (..., total, N, N) scaled so states stay of order 1; x0 (count, ..., N)."""
    offsets, total = offsets_of(random_lengths(rng, count), spare=spare)
    dtype = MATRIX_DTYPES[dtype_name]
    W = (0.6 / np.sqrt(n) * rng.normal(size=leading + (total, n, n))).astype(dtype)
    b = rng.normal(size=leading + (total, n)).astype(dtype)
    x0 = rng.normal(size=(count,) + leading + (n,)).astype(dtype)
    return offsets, W, b, x0


def steps(array, dim, offsets, k):
    return sequence(array, dim, int(offsets[k]), int(offsets[k + 1]))


@pytest.mark.parametrize("dtype_name", list(MATRIX_DTYPES))
@pytest.mark.parametrize("n", [1, 3, 8])
@pytest.mark.parametrize("leading,dim", [((), 0), ((1,), 1)])
@pytest.mark.parametrize("reverse", [False, True])
def test_numpy_matrix_forward_and_backward_per_sequence(rng, dtype_name, n, leading, dim, reverse):
    offsets, W, b, x0 = matrix_case(rng, n, dtype_name, leading)
    x, x_final = parscan.matrix_recurrence(W, b, x0, dim=dim, reverse=reverse, return_final=True, cu_seqlens=offsets)
    assert x_final.shape == x0.shape
    dx = rng.normal(size=b.shape).astype(b.dtype)
    dx_final = rng.normal(size=x0.shape).astype(b.dtype)
    dW, db, dx0 = parscan.matrix_recurrence_backward(W, dx, x=x, x0=x0, dx_final=dx_final, dim=dim, reverse=reverse,
                                                     cu_seqlens=offsets)
    dW_b, db_b, dx0_b = parscan.matrix_recurrence_backward(W, dx, b=b, x0=x0, dx_final=dx_final, dim=dim,
                                                           reverse=reverse, cu_seqlens=offsets)
    for k in range(len(offsets) - 1):
        x_k, final_k = parscan.matrix_recurrence(steps(W, dim, offsets, k), steps(b, dim, offsets, k), x0[k],
                                                 dim=dim, reverse=reverse, return_final=True)
        np.testing.assert_array_equal(steps(x, dim, offsets, k), x_k, err_msg=f"sequence {k}: x")
        np.testing.assert_array_equal(x_final[k], final_k, err_msg=f"sequence {k}: x_final")
        want = parscan.matrix_recurrence_backward(steps(W, dim, offsets, k), steps(dx, dim, offsets, k), x=x_k,
                                                  x0=x0[k], dx_final=dx_final[k], dim=dim, reverse=reverse)
        for got, expected, what in zip((steps(dW, dim, offsets, k), steps(db, dim, offsets, k), dx0[k]), want,
                                       ("dW", "db", "dx0")):
            np.testing.assert_array_equal(got, expected, err_msg=f"sequence {k}: {what}")
        for got, expected, what in zip((steps(dW_b, dim, offsets, k), steps(db_b, dim, offsets, k), dx0_b[k]), want,
                                       ("dW (x recomputed)", "db (x recomputed)", "dx0 (x recomputed)")):
            ref.assert_close(got, expected, dtype_name, f"sequence {k}: {what}")


def test_numpy_matrix_bad_arguments(rng):
    offsets, W, b, x0 = matrix_case(rng, 2, "float32", leading=(2,))
    with pytest.raises(ValueError, match="packed sequences have no batch dimension"):
        parscan.matrix_recurrence(W, b, dim=1, cu_seqlens=offsets)
    offsets, W, b, x0 = matrix_case(rng, 2, "float32")
    with pytest.raises(ValueError, match="x0 has shape"):
        parscan.matrix_recurrence(W, b, x0[0], dim=0, cu_seqlens=offsets)
    with pytest.raises(ValueError, match="segment offsets"):
        parscan.matrix_recurrence(W, b, x0, dim=0, cu_seqlens=offsets[::-1].copy())
    with pytest.raises(TypeError, match="cu_seqlens has dtype"):
        parscan.matrix_recurrence(W, b, x0, dim=0, cu_seqlens=offsets.astype(np.float64))


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("n", [2, 8])
def test_torch_matrix_forward_and_gradients_per_sequence(rng, device, n):
    import parscan.torch as pt
    offsets, W, b, x0 = (torch.tensor(v, device=device) for v in matrix_case(rng, n, "float64", spare=0))
    cu = offsets.to(torch.int32)
    leaves = [t.clone().requires_grad_() for t in (W, b, x0)]
    x, x_final = pt.matrix_recurrence(*leaves, dim=0, return_final=True, cu_seqlens=cu)
    weights = torch.randn(x.shape, dtype=x.dtype, device=device)
    final_weights = torch.randn(x_final.shape, dtype=x.dtype, device=device)
    ((x * weights).sum() + (x_final * final_weights).sum()).backward()
    for k in range(len(offsets) - 1):
        lo, hi = int(offsets[k]), int(offsets[k + 1])
        alone = [W[lo:hi].clone().requires_grad_(), b[lo:hi].clone().requires_grad_(), x0[k].clone().requires_grad_()]
        x_k, final_k = pt.matrix_recurrence(*alone, dim=0, return_final=True)
        torch.testing.assert_close(x[lo:hi], x_k, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(x_final[k], final_k, rtol=1e-12, atol=1e-12)
        ((x_k * weights[lo:hi]).sum() + (final_k * final_weights[k]).sum()).backward()
        torch.testing.assert_close(leaves[0].grad[lo:hi], alone[0].grad, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(leaves[1].grad[lo:hi], alone[1].grad, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(leaves[2].grad[k], alone[2].grad, rtol=1e-12, atol=1e-12)


def test_jax_matrix_jit_grad_vmap(rng):
    jax = _jax()
    jnp = jax.numpy
    import parscan.jax as pj
    jax.config.update("jax_enable_x64", True)
    offsets, W, b, x0 = matrix_case(rng, 3, "float64", spare=0)
    cu = jnp.asarray(offsets.astype(np.int32))
    weights = rng.normal(size=b.shape)

    def loss(W, b, x0):
        return jnp.sum(pj.matrix_recurrence(W, b, x0, dim=0, cu_seqlens=cu) * weights)

    value, grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(W, b, x0)
    x = parscan.matrix_recurrence(W, b, x0, dim=0, cu_seqlens=offsets)
    np.testing.assert_allclose(float(value), float(np.sum(x * weights)), rtol=1e-12)
    want = parscan.matrix_recurrence_backward(W, weights, x=x, x0=x0, dim=0, cu_seqlens=offsets)
    for got, expected, name in zip(grads, want, ("dW", "db", "dx0")):
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12, atol=1e-12, err_msg=name)
    batched = jax.vmap(lambda W, b: pj.matrix_recurrence(W, b, dim=0, cu_seqlens=cu))(np.stack([W, W]),
                                                                                        np.stack([b, 2 * b]))
    np.testing.assert_allclose(np.asarray(batched[1]), parscan.matrix_recurrence(W, 2 * b, dim=0, cu_seqlens=offsets),
                               rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Segmented scans: cumulative and reduce with cu_seqlens, each segment against the float64 loop
# (reference.cumulative) run on that segment alone.

from test_numpy import SCAN_DTYPES, scan_input  # noqa: E402  (the dtypes and inputs of the plain scans)

# (shape with the packed dimension as None, dim): one dimension, or one packed sequence among
# dimensions of size 1.
SEGMENT_LAYOUTS = [((None,), 0), ((None,), -1), ((1, None, 1), 1), ((None, 1), 0)]


def exact_dtype(dtype_name, op):
    """Integers and max / min give exact results (an exclusive max / min starts from ±inf)."""
    return dtype_name in ("int32", "int64") or op != "sum"


def assert_scan_equal(actual, expected, dtype_name, op, what):
    if exact_dtype(dtype_name, op):
        np.testing.assert_array_equal(ref.wide(actual), ref.wide(expected).astype(ref.wide(actual).dtype), err_msg=what)
    else:
        ref.assert_close(actual, expected, dtype_name, what)


def identity_of(dtype, op):
    """What a reduce of an empty segment gives: op's identity in the accumulator."""
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        return {"sum": 0, "max": info.min, "min": info.max}[op]
    return {"sum": 0.0, "max": -np.inf, "min": np.inf}[op]


def segment_references(x, offsets, op, reverse=False, exclusive=False):
    """(the scan of each segment alone, NaN past the last offset; each segment's reduce), over
    the flattened packed array."""
    flat = x.reshape(-1)
    kind = np.dtype(flat.dtype if flat.dtype.kind == "i" else (np.complex128 if flat.dtype.kind == "c" else np.float64))
    scanned = np.zeros(flat.shape, kind) if kind.kind == "i" else np.full(flat.shape, np.nan, kind)
    totals = []
    for n in range(len(offsets) - 1):
        lo, hi = int(offsets[n]), int(offsets[n + 1])
        scanned[lo:hi] = ref.cumulative(flat[lo:hi], op, 0, reverse, exclusive)
        totals.append(ref.cumulative(flat[lo:hi], op, 0)[-1] if hi > lo else identity_of(flat.dtype, op))
    return scanned, np.array(totals, kind)


@pytest.mark.parametrize("dtype_name", SCAN_DTYPES)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("layout,dim", SEGMENT_LAYOUTS)
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True), (True, True)])
def test_numpy_segmented_scans_per_segment(rng, dtype_name, op, layout, dim, reverse, exclusive):
    if dtype_name == "complex64" and op != "sum":
        pytest.skip("complex numbers have no order")
    offsets, used = offsets_of(random_lengths(rng, 11))
    total = used + 3  # steps past cu_seqlens[N]: neither read nor computed
    x = scan_input(rng, packed_shape(layout, total), dtype_name)
    want, want_totals = segment_references(x, offsets, op, reverse, exclusive)
    out = parscan.cumulative(x, op, dim=dim, reverse=reverse, exclusive=exclusive, cu_seqlens=offsets)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert_scan_equal(out.reshape(-1)[:used], want[:used], dtype_name, op, "out")
    reduced = parscan.reduce(x, op, dim=dim, cu_seqlens=offsets.astype(np.int32))
    d = dim % x.ndim
    assert reduced.shape == (len(offsets) - 1,) + x.shape[:d] + x.shape[d + 1:] and reduced.dtype == x.dtype
    assert_scan_equal(reduced.reshape(-1), want_totals, dtype_name, op, "reduce")


def test_numpy_segmented_low_level_writes_only_the_segments(rng):
    """Through the extension with poisoned outputs: every step before cu_seqlens[N] and every
    segment's result is written, the steps after it and the input are not touched."""
    offsets, used = offsets_of(random_lengths(rng, 12))
    x = random_values(rng, (used + 4,), "float32")
    x_copy = x.copy()
    out = np.full(x.shape, np.nan, np.float32)
    _core.cumulative(x, out, "sum", 0, False, True, cu_seqlens=offsets)
    want, want_totals = segment_references(x, offsets, "sum", exclusive=True)
    ref.assert_close(out[:used], want[:used], "float32", "out")
    assert np.isnan(out[used:]).all(), "a step past cu_seqlens[N] was written"
    totals = np.full(len(offsets) - 1, np.nan, np.float32)
    _core.reduce(x, totals, "sum", 0, cu_seqlens=offsets)
    ref.assert_close(totals, want_totals, "float32", "reduce")
    np.testing.assert_array_equal(x, x_copy)


def test_numpy_segmented_zero_segments_and_empty_input(rng):
    none = np.zeros(1, np.int64)  # N = 0
    x = random_values(rng, (5,), "float32")
    assert parscan.reduce(x, cu_seqlens=none).shape == (0,)
    empty = np.zeros(0, np.float32)
    assert parscan.cumulative(empty, cu_seqlens=np.zeros(3, np.int64)).shape == (0,)
    np.testing.assert_array_equal(parscan.reduce(empty, "max", cu_seqlens=np.zeros(3, np.int64)),
                                  np.full(2, -np.inf, np.float32))


@pytest.mark.parametrize("offsets,error,message", BAD_OFFSETS)
def test_numpy_segmented_bad_offsets_raise_and_write_nothing(rng, offsets, error, message):
    x = random_values(rng, (12,), "float32")
    out = np.full((12,), np.nan, np.float32)
    with pytest.raises(error) as caught:
        _core.cumulative(x, out, "sum", 0, False, False, cu_seqlens=offsets)
    assert message in str(caught.value)
    assert np.isnan(out).all(), "a refused call wrote its output"
    totals = np.full((max(len(offsets) - 1, 0),), np.nan, np.float32)
    with pytest.raises(error) as caught:
        _core.reduce(x, totals, "sum", 0, cu_seqlens=offsets)
    assert message in str(caught.value)
    assert np.isnan(totals).all()


def test_numpy_segmented_bad_arguments_name_them(rng):
    offsets = np.array([0, 4, 9])
    with pytest.raises(ValueError, match=r"x has shape \(2, 9\): with cu_seqlens, .* every other dimension"):
        parscan.cumulative(random_values(rng, (2, 9), "float32"), dim=1, cu_seqlens=offsets)
    with pytest.raises(ValueError, match=r"x has shape \(0, 9\): with cu_seqlens, .* every other dimension"):
        parscan.reduce(np.zeros((0, 9), np.float32), dim=1, cu_seqlens=np.array([0, 7, 4]))
    with pytest.raises(ValueError, match=r"x \(strides \(2,\)\) must be contiguous along dim=0"):
        parscan.reduce(random_values(rng, (18,), "float32")[::2], cu_seqlens=offsets)
    with pytest.raises(TypeError, match="only op=\"sum\" applies"):
        parscan.cumulative(random_values(rng, (9,), "complex64"), "max", cu_seqlens=offsets)
    x = random_values(rng, (9,), "float32")
    with pytest.raises(ValueError, match="out has shape"):
        _core.reduce(x, np.empty(3, np.float32), "sum", 0, cu_seqlens=offsets)
    with pytest.raises(ValueError, match="out has shape"):
        _core.cumulative(x, np.empty(8, np.float32), "sum", 0, False, False, cu_seqlens=offsets)


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("dtype_name", ["float32", "float64", "int64"])
@pytest.mark.parametrize("offset_type", [np.int64, np.int32])
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)])
def test_torch_segmented_scans_and_gradients(rng, device, dtype_name, offset_type, reverse, exclusive):
    import parscan.torch as pt
    offsets, used = offsets_of(random_lengths(rng, 10))
    total = used + 3  # steps past cu_seqlens[N]: out unspecified, gradient zero
    x_np = scan_input(rng, (total,), dtype_name)
    cu = torch.tensor(offsets.astype(offset_type), device=device)
    grad = dtype_name != "int64"
    x = torch.tensor(x_np, device=device, requires_grad=grad)
    want, want_totals = segment_references(x_np, offsets, "sum", reverse, exclusive)
    out = pt.cumulative(x, dim=0, reverse=reverse, exclusive=exclusive, cu_seqlens=cu)
    assert_scan_equal(_numpy(out)[:used], want[:used], dtype_name, "sum", "out")
    totals = pt.reduce(x, cu_seqlens=cu)
    assert_scan_equal(_numpy(totals), want_totals, dtype_name, "sum", "reduce")
    for op in ("max", "min"):
        _, want_op = segment_references(x_np, offsets, op)
        assert_scan_equal(_numpy(pt.reduce(x, op, cu_seqlens=cu)), want_op, dtype_name, op, f"reduce {op}")
    if not grad:
        return
    w_np, v_np = random_values(rng, (total,), dtype_name), random_values(rng, (len(offsets) - 1,), dtype_name)
    w_np[used:] = 0  # the unspecified outputs weigh nothing: the gradient's own zeros are checked
    ((out * torch.tensor(w_np, device=device)).sum() + (totals * torch.tensor(v_np, device=device)).sum()).backward()
    # dL/dx[s]: the weights of the steps whose prefix holds s (the segment's scan the other way),
    # plus the weight of s's segment total; nothing past cu_seqlens[N].
    want_grad, _ = segment_references(w_np, offsets, "sum", not reverse, exclusive)
    want_grad[:used] += np.repeat(v_np, np.diff(offsets))
    want_grad[used:] = 0
    ref.assert_close(_numpy(x.grad), want_grad, dtype_name, "x.grad")


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
def test_torch_segmented_gradcheck_compile_and_bad_input(rng):
    import parscan.torch as pt
    offsets, total = offsets_of(np.array([3, 0, 5, 1]), spare=2)
    cu = torch.tensor(offsets)
    x = torch.tensor(random_values(rng, (total,), "float64"), requires_grad=True)

    def f(x):
        return pt.cumulative(x, cu_seqlens=cu)[:-2], pt.reduce(x, cu_seqlens=cu)

    assert torch.autograd.gradcheck(f, (x,))
    compiled = torch.compile(lambda x: pt.cumulative(x, cu_seqlens=cu)[:-2] * 2 + pt.reduce(x, cu_seqlens=cu).sum(),
                             fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x)[0] * 2 + f(x)[1].sum(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="every other dimension must have size 1"):
        pt.cumulative(x.detach().reshape(1, total).expand(2, total), dim=1, cu_seqlens=cu)
    with pytest.raises(ValueError, match="segment offsets"):
        pt.reduce(x, cu_seqlens=torch.tensor([0, 7, 4]))
    if "cuda" in TORCH_DEVICES:
        with pytest.raises(ValueError, match="cu_seqlens is on cpu"):
            pt.cumulative(x.detach().cuda(), cu_seqlens=cu)


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True)])
def test_torch_segmented_gradient_of_a_plain_sum_zero_past_the_offsets(rng, monkeypatch, device, reverse, exclusive):
    """out.sum().backward() hands the backward an expanded (stride 0) gradient; and the scan
    leaves the steps past cu_seqlens[N] unwritten, so the outputs are made NaN before it writes
    (as uninitialised memory may be): the gradient there must still be exactly zero."""
    import parscan.torch as pt
    monkeypatch.setattr(pt, "_new_dense", lambda t: torch.full_like(t, float("nan"),
                                                                     memory_format=torch.contiguous_format))
    offsets, used = offsets_of(random_lengths(rng, 8))
    x = torch.tensor(random_values(rng, (used + 4,), "float64"), device=device, requires_grad=True)
    cu = torch.tensor(offsets, device=device)
    pt.cumulative(x, reverse=reverse, exclusive=exclusive, cu_seqlens=cu).sum().backward()  # NaN past used
    # dL/dx[s] counts the steps of s's segment whose prefix (suffix, for reverse) holds s.
    want, _ = segment_references(np.ones(used + 4), offsets, "sum", not reverse, exclusive)
    want[used:] = 0
    ref.assert_close(_numpy(x.grad), want, "float64", "x.grad")


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
def test_torch_segmented_arguments_of_other_types(rng):
    """A str subclass for op, ints for the flags and NumPy offsets work in eager mode as their
    plain counterparts do (the wrapper converts or passes them on; nothing takes them for tensors)."""
    import parscan.torch as pt
    offsets, total = offsets_of(np.array([3, 0, 5, 1]))
    x = torch.tensor(random_values(rng, (total,), "float32"))
    cu = torch.tensor(offsets)
    want = pt.cumulative(x, "max", reverse=True, cu_seqlens=cu)
    torch.testing.assert_close(pt.cumulative(x, np.str_("max"), reverse=1, cu_seqlens=cu), want, rtol=0, atol=0)
    torch.testing.assert_close(pt.cumulative(x, "max", reverse=True, cu_seqlens=offsets), want, rtol=0, atol=0)
    torch.testing.assert_close(pt.reduce(x, np.str_("sum"), cu_seqlens=cu), pt.reduce(x, cu_seqlens=cu), rtol=0, atol=0)


@pytest.mark.parametrize("offset_type", [np.int32, np.int64])
def test_jax_segmented_jit_grad_vmap(rng, offset_type):
    jax = _jax()
    jnp = jax.numpy
    import parscan.jax as pj
    jax.config.update("jax_enable_x64", True)
    offsets, total = offsets_of(random_lengths(rng, 9), spare=3)
    used = int(offsets[-1])
    cu = jnp.asarray(offsets.astype(offset_type))
    x_np, w_np = random_values(rng, (total,), "float64"), random_values(rng, (total,), "float64")
    v_np = random_values(rng, (len(offsets) - 1,), "float64")
    want, want_totals = segment_references(x_np, offsets, "sum", reverse=True)
    out = jax.jit(lambda x: pj.cumulative(x, reverse=True, cu_seqlens=cu))(x_np)
    ref.assert_close(np.asarray(out)[:used], want[:used], "float64", "out")
    ref.assert_close(np.asarray(jax.jit(lambda x: pj.reduce(x, cu_seqlens=cu))(x_np)), want_totals, "float64", "reduce")

    w_np[used:] = 0  # the unspecified outputs weigh nothing: the gradient's own zeros are checked

    def loss(x):
        scanned = pj.cumulative(x, reverse=True, cu_seqlens=cu)
        return jnp.sum(scanned * w_np) + jnp.sum(pj.reduce(x, cu_seqlens=cu) * v_np)

    want_grad, _ = segment_references(w_np, offsets, "sum")
    want_grad[:used] += np.repeat(v_np, np.diff(offsets))
    want_grad[used:] = 0
    ref.assert_close(np.asarray(jax.jit(jax.grad(loss))(x_np)), want_grad, "float64", "grad")
    batched = jax.vmap(lambda x: pj.reduce(x, "max", cu_seqlens=cu))(np.stack([x_np, -x_np]))
    _, want_max = segment_references(x_np, offsets, "max")
    _, want_min = segment_references(x_np, offsets, "min")
    np.testing.assert_array_equal(np.asarray(batched[0]), want_max)
    np.testing.assert_array_equal(np.asarray(batched[1]), -want_min)
    with pytest.raises(ValueError, match="every other dimension must have size 1"):
        pj.cumulative(np.stack([x_np, x_np]), dim=1, cu_seqlens=cu)
    # The scan leaves the steps past cu_seqlens[N] unwritten; made NaN here (as uninitialised
    # memory may be), the gradient there must still be exactly zero.
    scan = pj._cumulative_call

    def unwritten_made_nan(x, cu_seqlens, *args):
        out = scan(x, cu_seqlens, *args)
        return out if cu_seqlens is None else out.at[int(offsets[-1]):].set(jnp.nan)

    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as m:
        m.setattr(pj, "_cumulative_call", unwritten_made_nan)
        poisoned = jax.grad(lambda x: jnp.sum(pj.cumulative(x, cu_seqlens=cu)[:used]))(x_np)
    want_ones, _ = segment_references(np.ones(total), offsets, "sum", reverse=True)
    want_ones[used:] = 0
    ref.assert_close(np.asarray(poisoned), want_ones, "float64", "grad of a plain sum")
    with pytest.raises(TypeError, match="cu_seqlens has dtype"):
        pj.reduce(x_np, cu_seqlens=jnp.asarray(offsets.astype(np.float32)))
