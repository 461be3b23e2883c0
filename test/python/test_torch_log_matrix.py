"""parscan.torch's log_recurrence, matrix_recurrence and matrix_chain: values against the float64
loops, autograd against the chain-rule loops (log_recurrence has no float64 build, so
gradcheck runs on matrix_recurrence; log_recurrence's autograd is checked against the float64
chain rule to the tolerances stated in test_numpy_log_matrix.py), torch.compile(fullgraph=True),
bad input; CUDA against the CPU where available. Skipped where PyTorch is not installed."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import parscan  # noqa: E402
import parscan.torch as pt  # noqa: E402

import reference as ref  # noqa: E402
from test_numpy_log_matrix import assert_log_close, log_gradient_spread  # noqa: E402

ON_CUDA = torch.cuda.is_available() and parscan.built_with_cuda
DEVICES = ["cpu"] + (["cuda"] if ON_CUDA else [])


def as_numpy(t):
    return t.detach().cpu().to(torch.float64).numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("output", ["log", "value"])
def test_log_recurrence_values_and_gradients(rng, device, output):
    shape, dim = (3, 30, 4), 1
    log_a = torch.tensor(np.log(rng.uniform(0.3, 1.0, shape)), dtype=torch.float32, device=device).requires_grad_()
    b = torch.tensor(rng.normal(size=shape), dtype=torch.float32, device=device).requires_grad_()
    x0 = torch.tensor(rng.normal(size=(3, 4)), dtype=torch.float32, device=device).requires_grad_()
    a_neg = torch.tensor(rng.random(shape) < 0.3, device=device)
    result = pt.log_recurrence(log_a, b, x0, dim=dim, a_negative=a_neg, b_form="value", x0_form="value",
                               output=output)
    a_val = ref.from_log(as_numpy(log_a), a_neg.cpu().numpy())
    want = ref.gated_forward(a_val, as_numpy(b), as_numpy(x0), dim)[0]
    w = rng.normal(size=shape)
    if output == "log":
        log_x, x_neg = result
        got = ref.from_log(as_numpy(log_x), x_neg.cpu().numpy())
        (log_x * torch.tensor(w, dtype=torch.float32, device=device)).sum().backward()
    else:
        got = as_numpy(result)
        (result * torch.tensor(w, dtype=torch.float32, device=device)).sum().backward()
    np.testing.assert_allclose(got, want, rtol=5e-5, atol=5e-5)
    chain_rule = (a_val, as_numpy(b), w, as_numpy(x0), None, dim, False, "log", "value", "value",
                  "log" if output == "log" else "value")
    grads = ref.log_backward(*chain_rule)
    spreads = log_gradient_spread("float32", True, *chain_rule)
    for name, g, t, spread in zip(("dlog_a", "db", "dx0"), grads, (log_a, b, x0), spreads):
        # signed gates: normwise, with the reference's spread, as in test_numpy_log_matrix.py
        assert_log_close(as_numpy(t.grad), g, "float32", name, {"float32": 1e-2}, normwise=True, spread=spread)


@pytest.mark.parametrize("reverse", [False, True])
def test_matrix_recurrence_gradcheck_float64(rng, reverse):
    W = torch.tensor(rng.normal(size=(2, 7, 3, 3)) * 0.4, dtype=torch.float64).requires_grad_()
    b = torch.tensor(rng.normal(size=(2, 7, 3)), dtype=torch.float64).requires_grad_()
    x0 = torch.tensor(rng.normal(size=(2, 3)), dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda W, b, x0: pt.matrix_recurrence(W, b, x0, dim=1, reverse=reverse, return_final=True), (W, b, x0))
    assert torch.autograd.gradcheck(lambda W, b: pt.matrix_recurrence(W, b, dim=0, reverse=reverse),
                                    (W.detach().transpose(0, 1).requires_grad_(), b.detach().transpose(0, 1).requires_grad_()))


@pytest.mark.parametrize("device", DEVICES)
def test_matrix_recurrence_and_chain_values(rng, device):
    W = rng.normal(size=(4, 20, 5, 5)) * 0.3
    b = rng.normal(size=(4, 20, 5))
    x = pt.matrix_recurrence(torch.tensor(W, device=device), torch.tensor(b, device=device), dim=1)
    ref.assert_close(as_numpy(x), ref.matrix_forward(W, b, None, 1)[0], "float64", "x")
    M = np.eye(5) + W
    for prefixes in (False, True):
        for order in ("left_to_right", "right_to_left"):
            got = pt.matrix_chain(torch.tensor(M, device=device), prefixes=prefixes, order=order, dim=1)
            ref.assert_close(as_numpy(got), ref.matrix_chain(M, prefixes, order, 1), "float64", f"chain {order}")


@pytest.mark.parametrize("device", DEVICES)
def test_eager_calls_return_what_the_op_returns(rng, device):
    """An eager call without gradients computes only what it returns (no x_final unless asked,
    no log|x| for output="value"); what it returns is the op's result, bit for bit."""
    shape = (2, 24, 3)
    log_a = torch.tensor(np.log(rng.uniform(0.3, 1.0, shape)), dtype=torch.float32, device=device)
    b = torch.tensor(rng.normal(size=shape), dtype=torch.float32, device=device)
    x0 = torch.tensor(rng.normal(size=(2, 3)), dtype=torch.float32, device=device)
    a_neg = torch.tensor(rng.random(shape) < 0.3, device=device)
    log_x, x_neg, x, log_final, final_neg = torch.ops.parscan.log_recurrence(
        log_a, b, x0, a_neg, None, None, None, 1, False, "log", "value", "value", True, True)
    for output, want in (("log", (log_x, x_neg)), ("value", (x,))):
        for return_final in (False, True):
            got = pt.log_recurrence(log_a, b, x0, dim=1, a_negative=a_neg, b_form="value", x0_form="value",
                                    output=output, return_final=return_final)
            got = got if isinstance(got, tuple) else (got,)
            expected = want + ((log_final, final_neg) if return_final else ())
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g.dtype == e.dtype and torch.equal(g, e), (output, return_final)

    W = torch.tensor(rng.normal(size=(4, 20, 5, 5)) * 0.3, dtype=torch.float32, device=device)
    bm = torch.tensor(rng.normal(size=(4, 20, 5)), dtype=torch.float32, device=device)
    op_x, op_final = torch.ops.parscan.matrix_recurrence(W, bm, None, None, 1, False)
    assert torch.equal(pt.matrix_recurrence(W, bm, dim=1), op_x)
    got_x, got_final = pt.matrix_recurrence(W, bm, dim=1, return_final=True)
    assert torch.equal(got_x, op_x) and torch.equal(got_final, op_final)
    # A module's weights are nn.Parameters: they run directly too, with gradients where wanted.
    weight = torch.nn.Parameter(W.clone())
    assert pt._eager_path((weight, bm)) == "autograd"
    with torch.no_grad():
        assert pt._eager_path((weight, bm)) == "direct"
        assert torch.equal(pt.matrix_recurrence(weight, bm, dim=1), op_x)


def test_matrix_chain_backward_raises():
    M = torch.eye(3, dtype=torch.float64).repeat(2, 4, 1, 1).requires_grad_()
    total = pt.matrix_chain(M)
    with pytest.raises(NotImplementedError, match=r"parscan.torch.matrix_chain has no gradient"):
        total.sum().backward()


def test_torch_compile_fullgraph(rng):
    torch._dynamo.reset()
    W = torch.tensor(rng.normal(size=(2, 9, 3, 3)) * 0.4).requires_grad_()
    b = torch.tensor(rng.normal(size=(2, 9, 3))).requires_grad_()
    log_a = torch.tensor(np.log(rng.uniform(0.5, 1.0, (2, 9, 3))), dtype=torch.float32).requires_grad_()

    def loss(W, b, log_a):
        x = pt.matrix_recurrence(W, b, dim=1)
        y = pt.log_recurrence(log_a, b.float(), dim=1, b_form="value", output="value")
        return x.sin().sum() + y.sum().double() + pt.matrix_chain(W.detach()).sum()

    compiled = torch.compile(loss, fullgraph=True)
    eager = loss(W, b, log_a)
    eager_grads = torch.autograd.grad(eager, (W, b, log_a))
    value = compiled(W, b, log_a)
    grads = torch.autograd.grad(value, (W, b, log_a))
    torch.testing.assert_close(value, eager, rtol=1e-6, atol=1e-6)
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)


def test_bad_input_names_the_argument(rng):
    a = torch.zeros(2, 8, 3)
    with pytest.raises(TypeError, match=r"parscan.log_recurrence: a has dtype torch.float64"):
        pt.log_recurrence(a.double(), a.double())
    with pytest.raises(ValueError, match=r"a_negative is given, but a is in value form"):
        pt.log_recurrence(a, a, a_negative=torch.zeros(2, 8, 3, dtype=torch.bool), a_form="value")
    with pytest.raises(ValueError, match=r"W has shape \(2, 8, 3, 2\)"):
        pt.matrix_recurrence(torch.zeros(2, 8, 3, 2), a)
    with pytest.raises(ValueError, match=r"dim=2 names the state dimension of b"):
        pt.matrix_recurrence(torch.zeros(2, 8, 3, 3), a, dim=2)
    with pytest.raises(ValueError, match=r"tensor_cores must be"):
        pt.matrix_chain(torch.zeros(2, 3, 3), tensor_cores=True)
