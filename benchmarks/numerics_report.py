#!/usr/bin/env python3
"""Rebuilds docs/numerics.md's tables and plot from the JSON that benchmarks/numerics writes, and
its closing section on the matrix chain's arithmetic modes.

    numerics --json docs/numerics/numerics-host.json
    python3 benchmarks/numerics_report.py docs/numerics/numerics-host.json

The prose of docs/numerics.md lives in this script, so the page and its figures always agree.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
LABELS = {
    "linear_f32": "linear space, float32",
    "linear_bf16": "linear space, bfloat16 storage",
    "log_space": "parscan log space (log_affine_op)",
    "heinsen": "two-pass formula (Heinsen 2023), float32",
}

INTRO = """# Numerics of the first-order recurrence

How accurate are the ways of computing x[t] = a[t]·x[t-1] + b[t] in float32 arithmetic, and
where does each break? `benchmarks/numerics.cpp` measures four methods against a long-double
sequential loop over the same float32 inputs, for T = 1 … 10^6, on three random sequences per
input family (the worst is shown):

- **linear space, float32**: `inclusive_scan` with `affine_op<float>`;
- **linear space, bfloat16 storage**: the same with gates, inputs and results stored as
  bfloat16 (arithmetic in float32);
- **parscan log space**: `inclusive_scan` with `log_affine_op<float>` — log|·| and a sign,
  combined with a stable signed log-add-exp;
- **the two-pass formula** of Heinsen (2023): a* = cumsum(log a), x = exp(a* + logcumsumexp(log b − a*)),
  in float32, with complex logarithms where values are negative (as it is used in PyTorch).

Errors are max|x − ref| / max|ref| over t < T ("relative error in x") and
max|log|x| − log|ref|| ("absolute error in log|x|"; infinite where a sign is wrong or a value is
not finite). The figures on this page come from the host backend when its scans ran as one
sequential loop; the CUDA backend combines in a different (fixed) order, so its figures differ in
the last bits. The host backend now cuts sequences of 2^17 steps or more into chunks (16 of 2^16
steps at T = 10^6, see [design.md](design.md#the-host-backend)), whatever its thread count. The
first two chunks combine exactly as the loop does, so a rerun changes only the T = 10^6 column,
and there one figure visibly: for gates above 1, log space's error at T = 10^6 falls from 0.33 to
0.06 in x and from 0.4 to 0.11 in log|x| (seed 20261121), as shorter chains of roundings add up.
Regenerate with `numerics --json docs/numerics/numerics-host.json` and
`python3 benchmarks/numerics_report.py docs/numerics/numerics-host.json`. Gradients are in
[their own section](#gradients) below.
"""

GRAD_INTRO = """## Gradients

The same four methods, differentiated. The loss is L = Σ_t w[t]·x[t]/s[t] with w ~ N(0,1) and
constant scales s[t] = |x_ref[t]| (not differentiated), so every step contributes about equally
however large x grows. Each method receives the upstream gradient that autograd would hand it,
in its own storage: dL/dx = w/s for the linear methods and the two-pass formula, and
dL/dlog|x| = (w/s)·x for parscan's log space (x its own forward output). Compared are
dL/dlog|a| = a·dL/da and dL/dlog|b| = b·dL/db (the linear methods' outputs are multiplied by a and
b in long double) against a long-double reverse pass; the error is max|g − ref| / max|ref| over
both gradients of a sequence of length T (each T is its own forward and backward run, on the
first T steps of the same sequences).

- **linear space, float32 / bfloat16 storage**: `gated_recurrence_backward` (the reverse scan
  db[t] = dx[t] + a[t+1]·db[t+1], da = db·x[t-1]) with float or bfloat16 storage;
- **parscan log space**: `log_recurrence_backward`, which carries db in log form with
  `log_affine_op<float>` and forms each gradient as exp(sum of logs);
- **the two-pass formula, differentiated**: the backward that PyTorch's autograd runs through
  it, written out in the same float32 (and complex64) precision as the forward: exp's backward
  grad·conj(x), torch's `logcumsumexp_backward` (a reverse logcumsumexp of log(grad) − result,
  split into positive and negative parts for real inputs, with a complex logarithm for signed
  ones) and cumsum's backward (a reverse cumsum). Derived analytically from those formulas, not
  recorded from PyTorch.
"""

COMPLEX_PRODUCTS = """## Complex products

complex<float> and complex<double> values multiply by the textbook formula,
(ac − bd) + (ad + bc)i (`parscan::product`, numeric.hpp), on both backends: the device may fuse
each half into one FMA, as it does for real products, so host and device results may differ in
the last bits as for float. This is not `cuda::std::complex`'s `operator*`, which follows C99
Annex G: where the formula's two parts are both NaN it recomputes with infinities recovered, so
that, for example, (∞ + ∞i)·(1 + 0i) is ∞ + ∞i rather than NaN + NaN i. parscan returns
NaN + NaN i there. With
finite inputs whose products stay within the type's range the two agree to rounding. The
recovery cost two tests and two branches around every product (and its four multiplies were
never fused), which in the scan kernels made each complex product a basic block of its own;
docs/performance.md has what removing it gained.

"""

CHAIN_MODES = """## Matrix chains: what each chain_math mode costs in accuracy

`matrix_chain`'s `chain_math` is a permission. The host backend, T = double, and CUDA chains
with d ≤ 64 (totals and prefixes) compute every mode exactly (fp32 or fp64 products and sums).
Elsewhere on CUDA:

| mode | CUDA engine | operands | bound the tests check (near-orthogonal factors) |
| --- | --- | --- | --- |
| `exact` | library thread engine (d ≤ 16, B·n ≥ 16384) or chunk engine (d ≤ 64), GEMM tree (d > 64 totals and prefixes); cuBLAS `CUBLAS_COMPUTE_32F_PEDANTIC` for float totals with d ≥ 128 | fp32, sums in fp32 | test/matrix's float tolerance: 1e-5 for d ≤ 64, 1e-4 above |
| `tf32` | library `mma` kernel, or cuBLAS `CUBLAS_COMPUTE_32F_FAST_TF32` (float, d ≥ 128 totals) | rounded to 10 mantissa bits (u = 2⁻¹¹), sums in fp32 | 8·u·√n of the largest entry |
| `bf16` | library `mma` kernel, or cuBLAS `CUBLAS_COMPUTE_32F_FAST_16BF` | rounded to 7 mantissa bits (u = 2⁻⁸), sums in fp32 | 8·u·√n of the largest entry |

Each product rounds each operand once, about 2u relative; over the n − 1 products of a chain of
well-conditioned factors these add up like √n. Ill-conditioned factors can grow the error
faster: use `exact` there. The chain tests (test/matrix) and bench_matrix's sub-chain checks
hold every mode to these bounds against a float64 product; the bench measured 3.7e-7 to 8.6e-7
(exact, d = 32…256) and 7.7e-4 to 1.0e-3 (tf32 and bf16, 12 factors) on an H200 at 5a87ff7.
`CUBLAS_COMPUTE_32F_FAST_16BF` is itself a permission: at d = 256 cuBLAS's bf16 chain had the
tf32 chain's error (9.2e-4) and time (279 against 282 µs), so it likely ran TF32 kernels.
"""

SUMMARY = """## In words

- **Linear space, float32** is the most accurate wherever x stays inside float's range: its
  relative error grows only with the gates' memory (about 1e-7 for gates in (0,1), a few 1e-6
  for gates near 1) and not with T. It breaks when products overflow or underflow: with gates
  above 1 it returns Inf once x passes 3.4e38 (between T = 10^4 and 10^5 for these gates).
- **bfloat16 storage** costs its 8-bit mantissa once per stored value (about 5e-3), which is
  harmless for gates well inside (0,1) but wrong for gates near 1: 0.999 … 1 rounds to 0.996 or
  1.0, so the recurrence itself changes (errors of order 1 and beyond). Store such gates in float,
  or as log a.
- **parscan's log space** keeps the error flat in T for gates in (0,1) (≤ 2e-7 up to 10^6) and for
  signed values (≤ 2e-7), and it never overflows: with gates above 1 it still gives x (as log|x|
  and a sign) at T = 10^6, where x ≈ e^5000. Its price is precision when |log x| is large: float
  holds log|x| to about |log x|·6e-8, so relative error in x grows with the size of log|x|
  (3e-5 for gates near 1, where x ≈ 1e3 is remembered over ~10^3 steps; 0.3 at log|x| ≈ 5000).
- **The two-pass formula** loses accuracy linearly in T, because cumsum(log a) grows without
  bound and the subtraction log b − a* cancels: 7e-5 at T = 10^3, 1e-2 at 10^5 and 8e-2 at 10^6
  for gates in (0,1); with signed values its complex logarithms give wrong signs (infinite log
  error) from T ≈ 10^4, and it overflows with the linear methods.

**Value forms of the log-space recurrence.** Its inputs may be given as values and x written as
values (sign·exp(log|x|)) instead of log magnitudes and signs; the conversion costs one logf
per value-form input element and one expf per value-form output element, each rounding once
(about 6e-8 relative, plus bfloat16's mantissa when stored in bfloat16), so where every value
fits float the value forms are as accurate as the log forms. They are the right choice when the
inputs and x are ordinary floats and only the products in between (gates above 1 for a while,
long products) would leave float's range. They are the wrong one when x itself leaves it: a
value-form x overflows to ±inf once |x| > 3.4e38 (log|x| > 88.7) and flushes to 0 below about
1e-45, while log_x keeps it exactly as well as ever (both may be written in one call), and a
value-form input cannot hold a gate or b beyond float at all. The same holds for the backward:
dL/dx as the upstream gradient skips the division by x (no infinity where x = 0), but gradients
written as values overflow where the true gradient exceeds float.

**Which to use.** Linear space (float32 state) whenever |x| and the products of gates stay
within about 1e±30 — the usual case for gated RNN and state-space layers. Log space when gates
exceed 1 or products underflow or overflow float, or when the inputs already come as logs.
Never store gates near 1 in bfloat16. The two-pass formula has no regime in which it is the
better choice.

**Gradients** follow the same pattern (tables and plot in [Gradients](#gradients)).
- Linear float32 stays at or below 4e-6 until x overflows (between T = 10^4 and 10^5 for gates
  above 1), and bfloat16 storage costs its mantissa again (about 5e-3) and diverges for gates
  near 1 (0.3 at T = 10^3, 4 at 10^4).
- parscan's log-space backward carries the gradient in log form, so it works as long as the
  forward does: ≤ 4e-7 up to T = 10^6 for gates in (0,1), ≤ 2e-6 for signed values, 3e-5 for
  gates near 1, and still finite at T = 10^6 with gates above 1, where, as in the forward, the
  error grows with |log x| (2e-3 at 10^5, 0.15 at 10^6, where log|x| ≈ 5000).
- The two-pass formula's gradient inherits the cancellation of its forward and grows about
  linearly in T: 8e-3 at T = 10^4, 0.17 at 10^5 and 8 at 10^6 for gates in (0,1) (cumsum(log a)
  reaches −10^6 there, whose float ulp is 0.06), 5e-3 at 10^5 for signed values (about 8000
  times parscan's), and it overflows with the linear methods. The issue's PyTorch measurement of
  the complex path (relative error 11 at T = 4096) is larger than anything seen here; its loss
  and error measure are not recorded, so the two are not directly comparable.
"""


def fmt(v):
    return "∞" if v is None else ("0" if v == 0 else f"{v:.2g}")


def plot(data, key, ylabel, png):
    """One panel per input family, error against T for each method; False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, fam in zip(axes.flat, data["families"]):
        for m, label in LABELS.items():
            ys = [y if y is not None else float("nan") for y in fam["methods"][m][key]]
            ys = [max(y, 1e-9) for y in ys]
            ax.plot(fam["T"], ys, marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(1e-9, 1e3)
        ax.set_title(fam["name"], fontsize=9)
        ax.set_xlabel("T")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("float32 arithmetic against a long-double reference (missing points: Inf or NaN)", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return True


def main(path):
    with open(path) as f:
        data = json.load(f)
    out_dir = os.path.join(DOCS, "numerics")
    os.makedirs(out_dir, exist_ok=True)
    lines = [INTRO]
    png = os.path.join(out_dir, "error_vs_T.png")
    if plot(data, "rel_x", "relative error in x", png):
        lines += [f"![relative error against T]({os.path.relpath(png, DOCS)})", ""]
    lines.append("## Values")
    lines.append("")
    for fam in data["families"]:
        lines += [f"### {fam['name']}", "", "| method | " + " | ".join(f"T={t}" for t in fam["T"]) + " |",
                  "| --- |" + " ---: |" * len(fam["T"])]
        for m, label in LABELS.items():
            r = fam["methods"][m]
            lines.append(f"| {label}: rel. error in x | " + " | ".join(fmt(v) for v in r["rel_x"]) + " |")
            lines.append(f"| {label}: abs. error in log\\|x\\| | " + " | ".join(fmt(v) for v in r["abs_log"]) + " |")
        lines.append("")
    if all("rel_grad" in fam["methods"][m] for fam in data["families"] for m in LABELS):
        lines.append(GRAD_INTRO)
        gpng = os.path.join(out_dir, "grad_error_vs_T.png")
        if plot(data, "rel_grad", "relative error in dL/dlog|a|, dL/dlog|b|", gpng):
            lines += [f"![gradient error against T]({os.path.relpath(gpng, DOCS)})", ""]
        for fam in data["families"]:
            lines += [f"### gradients: {fam['name']}", "",
                      "| method | " + " | ".join(f"T={t}" for t in fam["T"]) + " |",
                      "| --- |" + " ---: |" * len(fam["T"])]
            for m, label in LABELS.items():
                r = fam["methods"][m]
                lines.append(f"| {label} | " + " | ".join(fmt(v) for v in r["rel_grad"]) + " |")
            lines.append("")
    lines.append(SUMMARY)
    lines.append(COMPLEX_PRODUCTS)
    lines.append(CHAIN_MODES)
    with open(os.path.join(DOCS, "numerics.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
