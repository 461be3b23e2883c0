"""parscan.torch: the custom ops against float64 loops, gradcheck in float64, torch.compile with
fullgraph=True, bad input; on CUDA (where available) the CUDA backend against the CPU, on the
current stream, and inside a captured CUDA graph. Skipped where PyTorch is not installed."""

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import parscan  # noqa: E402
import parscan.torch as pt  # noqa: E402

import reference as ref  # noqa: E402

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "complex64": torch.complex64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
ON_CUDA = torch.cuda.is_available() and parscan.built_with_cuda
DEVICES = ["cpu"] + (["cuda"] if ON_CUDA else [])


def test_parscan_imported_before_torch_runs():
    """A fresh process that imports parscan before torch and runs a gated forward on every device
    here: with the extension loaded before NumPy, torch's import crashed (CUDA and host builds)."""
    code = ("import parscan\nimport parscan.torch\nimport torch\n"
            f"for d in {DEVICES!r}:\n"
            "    a = torch.rand(2, 16, 4, device=d)\n"
            "    x = parscan.torch.gated_recurrence(a, a, dim=1)\n"
            "    assert torch.allclose(x[:, 0], a[:, 0])\n"
            "print('ran')\n")
    env = dict(os.environ)  # the child finds this parscan however this process found it
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(parscan.__file__))] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ran"


@pytest.fixture
def gen(rng):
    g = torch.Generator()
    g.manual_seed(int(rng.integers(2**62)))
    return g


def gates(gen, shape, dtype, device="cpu"):
    magnitude = 0.6 + 0.4 * torch.rand(shape, generator=gen, dtype=torch.float64)
    if dtype == torch.complex64:
        phase = torch.rand(shape, generator=gen, dtype=torch.float64) - 0.5
        return torch.polar(magnitude, phase).to(dtype).to(device)
    return magnitude.to(dtype).to(device)


def values(gen, shape, dtype, device="cpu"):
    if dtype == torch.complex64:
        return torch.randn(shape, generator=gen, dtype=torch.complex128).to(dtype).to(device)
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype).to(device)


def as_numpy(t):
    """float64 / complex128 NumPy copy (16-bit values are exact in float64)."""
    t = t.detach().cpu()
    return (t.to(torch.complex128) if t.is_complex() else t.to(torch.float64)).numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("dim,reverse", [(1, False), (1, True), (-1, False), (0, True)])
def test_forward_matches_loop(gen, device, dtype_name, dim, reverse):
    dtype = DTYPES[dtype_name]
    shape = (3, 40, 5)
    a, b = gates(gen, shape, dtype, device), values(gen, shape, dtype, device)
    state = list(shape)
    del state[dim]
    x0 = values(gen, tuple(state), dtype, device)
    x, x_final = pt.gated_recurrence(a, b, x0, dim=dim, reverse=reverse, return_final=True)
    want, want_final = ref.gated_forward(as_numpy(a), as_numpy(b), as_numpy(x0), dim, reverse)
    assert x.dtype == dtype and x.device == a.device
    ref.assert_close(as_numpy(x), want, dtype_name, "x")
    ref.assert_close(as_numpy(x_final), want_final, dtype_name, "x_final")


@pytest.mark.parametrize("device", DEVICES)
def test_strided_inputs_run_in_place(gen, device):
    """A (B, D, T) tensor transposed to (B, T, D) and scanned along T, without a copy."""
    a = gates(gen, (2, 6, 50), torch.float64, device).transpose(1, 2)
    b = values(gen, (2, 6, 50), torch.float64, device).transpose(1, 2)
    assert not a.is_contiguous()
    x = pt.gated_recurrence(a, b, dim=1)
    ref.assert_close(as_numpy(x), ref.gated_forward(as_numpy(a), as_numpy(b), None, 1)[0], "float64", "x")


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("gate", ["linear", "log"])
def test_gradcheck_float64(gen, reverse, gate):
    a = gates(gen, (2, 9, 3), torch.float64)
    if gate == "log":
        a = a.log()
    a.requires_grad_()
    b = values(gen, (2, 9, 3), torch.float64).requires_grad_()
    x0 = values(gen, (2, 3), torch.float64).requires_grad_()

    def f(a, b, x0):
        return pt.gated_recurrence(a, b, x0, dim=1, reverse=reverse, gate=gate, return_final=True)

    assert torch.autograd.gradcheck(f, (a, b, x0))
    assert torch.autograd.gradcheck(lambda a, b: pt.gated_recurrence(a, b, dim=-1, reverse=reverse, gate=gate), (a, b))


def test_complex_gradients_follow_pytorchs_convention(gen):
    """Against autograd through a plain PyTorch loop in complex128 (to complex64 precision)."""
    a64 = gates(gen, (2, 12, 3), torch.complex64)
    b64 = values(gen, (2, 12, 3), torch.complex64)
    w = values(gen, (2, 12, 3), torch.complex64).to(torch.complex128)

    def loop(a, b):
        state, out = torch.zeros_like(a[:, 0]), []
        for t in range(a.shape[1]):
            state = a[:, t] * state + b[:, t]
            out.append(state)
        return torch.stack(out, 1)

    a, b = a64.clone().requires_grad_(), b64.clone().requires_grad_()
    (pt.gated_recurrence(a, b, dim=1).to(torch.complex128) * w).real.sum().backward()
    a_ref, b_ref = a64.to(torch.complex128).requires_grad_(), b64.to(torch.complex128).requires_grad_()
    (loop(a_ref, b_ref) * w).real.sum().backward()
    ref.assert_close(as_numpy(a.grad), as_numpy(a_ref.grad), "complex64", "da")
    ref.assert_close(as_numpy(b.grad), as_numpy(b_ref.grad), "complex64", "db")


def test_gradient_of_x_final_alone(gen):
    a = gates(gen, (2, 7, 3), torch.float64).requires_grad_()
    b = values(gen, (2, 7, 3), torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: pt.gated_recurrence(a, b, dim=1, return_final=True)[1], (a, b))


@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)])
def test_scans_gradcheck_and_values(gen, reverse, exclusive):
    x = values(gen, (3, 11, 2), torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: pt.cumulative(x, dim=1, reverse=reverse, exclusive=exclusive), (x,))
    assert torch.autograd.gradcheck(lambda x: pt.reduce(x, dim=1), (x,))
    for op in ("sum", "max", "min"):
        got = pt.cumulative(x.detach(), op, dim=1, reverse=reverse, exclusive=exclusive)
        want = ref.cumulative(as_numpy(x), op, 1, reverse, exclusive)
        np.testing.assert_allclose(as_numpy(got), want, rtol=1e-12, atol=1e-12)
        total = ref.cumulative(as_numpy(x), op, 1)[:, -1]
        np.testing.assert_allclose(as_numpy(pt.reduce(x.detach(), op, dim=1)), total, rtol=1e-12, atol=1e-12)


def test_reduce_of_bfloat16_accumulates_in_float32(gen):
    x = values(gen, (2, 4000), torch.bfloat16)
    want = as_numpy(x).sum(axis=1)
    got = as_numpy(pt.reduce(x, dim=1))
    assert pt.reduce(x, dim=1).dtype == torch.bfloat16
    np.testing.assert_allclose(got, want, rtol=2**-8, atol=2**-8 * np.abs(as_numpy(x)).sum() / 4000)


def test_torch_compile_fullgraph_forward_and_backward(gen):
    torch._dynamo.reset()
    a = gates(gen, (2, 16, 4), torch.float64).requires_grad_()
    b = values(gen, (2, 16, 4), torch.float64).requires_grad_()

    def loss(a, b):
        x, x_final = pt.gated_recurrence(a, b, dim=1, return_final=True)
        return (x.sin().sum() + pt.cumulative(x, dim=1).sum() + pt.reduce(x_final, dim=-1).sum())

    compiled = torch.compile(loss, fullgraph=True)
    eager_value = loss(a, b)
    eager_grads = torch.autograd.grad(eager_value, (a, b))
    compiled_value = compiled(a, b)
    compiled_grads = torch.autograd.grad(compiled_value, (a, b))
    torch.testing.assert_close(compiled_value, eager_value, rtol=1e-12, atol=1e-12)
    for g, e in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(g, e, rtol=1e-12, atol=1e-12)


def test_bad_input_names_the_argument(gen):
    a = gates(gen, (2, 8, 3), torch.float32)
    with pytest.raises(TypeError, match=r"a has dtype torch.int32"):
        pt.gated_recurrence(a.to(torch.int32), a)
    with pytest.raises(TypeError, match=r"b has dtype float64 but a has dtype float32"):
        pt.gated_recurrence(a, a.double())
    with pytest.raises(ValueError, match=r"b has shape \(2, 7, 3\) but a has shape \(2, 8, 3\)"):
        pt.gated_recurrence(a, a[:, :7].contiguous())
    with pytest.raises(ValueError, match=r"x0 has shape \(2, 8\)"):
        pt.gated_recurrence(a, a, torch.zeros(2, 8), dim=1)
    with pytest.raises(ValueError, match=r"dim=5 is out of range"):
        pt.gated_recurrence(a, a, dim=5)
    with pytest.raises(ValueError, match=r"cannot be scanned along dim=1"):
        base = torch.rand(2, 10, 6, 8)[:, :, ::2, ::2]  # (2, 10, 3, 4): batch, 3 and 4 need three strides
        pt.gated_recurrence(base, base.contiguous(), dim=1)


@pytest.mark.skipif(not ON_CUDA, reason="needs a CUDA GPU and parscan built with CUDA")
def test_device_mismatch_is_refused(gen):
    a = gates(gen, (2, 8, 3), torch.float32)
    with pytest.raises(ValueError, match=r"b is on cuda:0 but a is on cpu"):
        pt.gated_recurrence(a, a.cuda())


@pytest.mark.skipif(not ON_CUDA, reason="needs a CUDA GPU and parscan built with CUDA")
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16", "float64"])
def test_cuda_matches_cpu_forward_and_backward(gen, dtype_name):
    dtype = DTYPES[dtype_name]
    a, b = gates(gen, (4, 300, 64), dtype), values(gen, (4, 300, 64), dtype)
    x0, w = values(gen, (4, 64), dtype), values(gen, (4, 300, 64), dtype)
    results = []
    for device in ("cpu", "cuda"):
        ad, bd, x0d = (t.detach().to(device).requires_grad_() for t in (a, b, x0))  # leaves on each device
        x = pt.gated_recurrence(ad, bd, x0d, dim=1)
        (x.float() * w.to(device).float()).sum().backward()
        results.append([as_numpy(t) for t in (x, ad.grad, bd.grad, x0d.grad)])
    for name, c, g in zip(("x", "da", "db", "dx0"), *results):
        ref.assert_close(g, c, dtype_name, name)


@pytest.mark.skipif(not ON_CUDA, reason="needs a CUDA GPU and parscan built with CUDA")
def test_cuda_runs_on_the_current_stream_and_in_a_graph(gen):
    a = gates(gen, (2, 1000, 256), torch.float32, "cuda")
    b = values(gen, (2, 1000, 256), torch.float32, "cuda")
    want = ref.gated_forward(as_numpy(a), as_numpy(b), None, 1)[0]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x = pt.gated_recurrence(a, b, dim=1)
        total = pt.reduce(pt.cumulative(x, dim=1), dim=1)
    torch.cuda.current_stream().wait_stream(side)
    ref.assert_close(as_numpy(x), want, "float32", "x on a side stream")

    static_a, static_b = a.clone(), b.clone()
    graph = torch.cuda.CUDAGraph()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        pt.gated_recurrence(static_a, static_b, dim=1)  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        static_x = pt.gated_recurrence(static_a, static_b, dim=1)
    for _ in range(2):  # fresh inputs in the same buffers, replayed
        new_a, new_b = gates(gen, a.shape, torch.float32, "cuda"), values(gen, b.shape, torch.float32, "cuda")
        static_a.copy_(new_a)
        static_b.copy_(new_b)
        static_x.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref.assert_close(as_numpy(static_x), ref.gated_forward(as_numpy(new_a), as_numpy(new_b), None, 1)[0],
                         "float32", "x from the graph")
    assert torch.isfinite(total).all()


@pytest.mark.parametrize("device", DEVICES)
def test_eager_calls_skip_the_dispatch_and_match_the_op(gen, device):
    """Plain tensors run parscan's kernel function without the custom op's dispatch (inside an
    autograd.Function with the op's formula where a gradient is wanted); values and gradients are
    the op's, bit for bit. Fake and meta tensors go through the op."""
    from parscan.torch import _eager_path

    a = gates(gen, (2, 64, 8), torch.float32, device)
    b = values(gen, (2, 64, 8), torch.float32, device)
    x0 = values(gen, (2, 8), torch.float32, device)
    assert _eager_path((a, b, None, 1, False, "linear")) == "direct"
    x, x_final = pt.gated_recurrence(a, b, x0, dim=1, return_final=True)
    op_x, op_final = torch.ops.parscan.gated_recurrence(a, b, x0, None, 1, False, "linear")
    assert torch.equal(x, op_x) and torch.equal(x_final, op_final)
    assert torch.equal(pt.gated_recurrence(a, b, x0, dim=1), op_x)  # x alone: x_final is not computed
    ref.assert_close(as_numpy(x), ref.gated_forward(as_numpy(a), as_numpy(b), as_numpy(x0), 1)[0], "float32", "x")
    assert torch.equal(pt.cumulative(b, dim=1), torch.ops.parscan.cumulative(b, None, "sum", 1, False, False))
    assert torch.equal(pt.reduce(b, dim=1), torch.ops.parscan.reduce(b, None, "sum", 1))

    w, w_final = values(gen, a.shape, torch.float32, device), values(gen, x0.shape, torch.float32, device)
    grads = []
    for through_op in (False, True):
        leaves = [t.clone().requires_grad_() for t in (a, b, x0)]
        assert _eager_path(leaves) == "autograd"
        if through_op:
            out, out_final = torch.ops.parscan.gated_recurrence(*leaves, None, 1, False, "linear")
        else:
            out, out_final = pt.gated_recurrence(*leaves, dim=1, return_final=True)
        ((out * w).sum() + (out_final * w_final).sum()).backward()
        grads.append([out.detach()] + [t.grad for t in leaves])
    for name, got, want in zip(("x", "da", "db", "dx0"), *grads):
        assert torch.equal(got, want), name
    with torch.no_grad():
        assert _eager_path((a.clone().requires_grad_(), b)) == "direct"

    def dispatched(call):  # whether the call went through PyTorch's dispatcher to the op
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            call()
        return any(e.name == "parscan::gated_recurrence" for e in prof.events())
    assert dispatched(lambda: torch.ops.parscan.gated_recurrence(a, b, None, None, 1, False, "linear"))
    assert not dispatched(lambda: pt.gated_recurrence(a, b, dim=1))
    assert not dispatched(lambda: pt.gated_recurrence(a.clone().requires_grad_(), b, dim=1))
    assert _eager_path((a.to("meta"), b)) is None

    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake_a, fake_b = mode.from_tensor(a), mode.from_tensor(b)
        assert _eager_path((fake_a, fake_b)) is None
        fake_x = pt.gated_recurrence(fake_a, fake_b, dim=1)
        assert fake_x.shape == a.shape and type(fake_x) is not torch.Tensor


@pytest.mark.parametrize("device", DEVICES)
def test_functorch_transform_over_captured_tensors_that_need_gradients(gen, device):
    """Under torch.func.vmap, a call whose tensors are all plain (captured from outside, one of
    them needing a gradient) dispatches to the custom op, which functorch supports; the eager
    autograd.Function would not run there (it has no setup_context). Values and gradients match
    the calls one at a time."""
    from parscan.torch import _eager_path

    a = gates(gen, (2, 16, 4), torch.float32, device).requires_grad_()
    b = values(gen, (2, 16, 4), torch.float32, device)
    scales = values(gen, (3,), torch.float32, device)

    def scaled(s):
        assert _eager_path((a, b)) is None  # a functorch transform is active
        return pt.gated_recurrence(a, b, dim=1) * s

    batched = torch.func.vmap(scaled)(scales)
    one_by_one = torch.stack([pt.gated_recurrence(a, b, dim=1) * s for s in scales])
    torch.testing.assert_close(batched, one_by_one, rtol=0, atol=0)
    w = values(gen, batched.shape, torch.float32, device)
    (got,) = torch.autograd.grad((batched * w).sum(), a)
    (want,) = torch.autograd.grad((one_by_one * w).sum(), a)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert _eager_path((a, b)) == "autograd"  # and outside the transform, the eager Function


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["gated", "matrix"])
@pytest.mark.parametrize("with_x0", [False, True])
@pytest.mark.parametrize("return_final", [False, True])
def test_training_step_allocates_only_what_it_returns(gen, device, op, with_x0, return_final):
    """An eager forward whose inputs require gradients computes x_final only with return_final;
    its backward gets no zeros from autograd for an x_final the loss does not read and, without
    x0, allocates no stand-in for dx0: the step allocates x, x_final (if returned), the two input
    gradients and dx0 (with x0), and fills nothing. The gradients equal the custom op's (through
    the dispatcher, which materialises zeros), bit for bit."""
    if op == "gated":
        first = gates(gen, (2, 24, 6), torch.float32, device)
        b = values(gen, (2, 24, 6), torch.float32, device)
        x0 = values(gen, (2, 6), torch.float32, device) if with_x0 else None
        public = lambda first, b, x0: pt.gated_recurrence(first, b, x0, dim=1, return_final=return_final)  # noqa
        through_op = lambda first, b, x0: torch.ops.parscan.gated_recurrence(  # noqa: E731
            first, b, x0, None, 1, False, "linear")[0]
    else:
        first = 0.3 * values(gen, (2, 24, 4, 4), torch.float32, device)
        b = values(gen, (2, 24, 4), torch.float32, device)
        x0 = values(gen, (2, 4), torch.float32, device) if with_x0 else None
        public = lambda first, b, x0: pt.matrix_recurrence(first, b, x0, dim=1, return_final=return_final)  # noqa
        through_op = lambda first, b, x0: torch.ops.parscan.matrix_recurrence(  # noqa: E731
            first, b, x0, None, 1, False)[0]
    w = values(gen, b.shape, torch.float32, device)
    grads = []
    for call in (public, through_op):
        leaves = [None if t is None else t.clone().requires_grad_() for t in (first, b, x0)]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            x = call(*leaves)
            (x[0] if isinstance(x, tuple) else x).backward(w)  # x_final, if returned, unused
        grads.append([t.grad for t in leaves if t is not None])
        if call is public:
            events = [e.name for e in prof.events()]
            assert not {"aten::zeros", "aten::zeros_like", "aten::zero_", "aten::fill_"} & set(events), events
            assert events.count("aten::empty_like") == 3, events  # x and the two input gradients
            assert events.count("aten::new_empty") == return_final + with_x0, events  # x_final, dx0
    for got, want in zip(*grads):
        assert torch.equal(got, want)
