#!/usr/bin/env python3
"""Times parscan's operations called from Python (parscan.torch on CUDA tensors; with --jax also
parscan.jax under jax.jit) and writes JSON in the format of the C++ benchmarks, for
benchmarks/report.py:

    python3 benchmarks/bench_python.py [--json OUT.json] [--runs 50] [--cpp bench_recurrence.json]
        [--cpp bench_varlen.json] [--cpp bench_call.json] [--jax] [--tiny] [--host-parts]

Each op runs at a large shape, (B, D, T) = (8, 1536, 4096) laid out channel-last as bench_recurrence's
"channel-last T=4096" rows are, i.e. a (B, T, D) = (8, 4096, 1536) tensor scanned along dim=1, or its
nearest equivalent, and at a tiny one. A sample is CUDA events around a batch of calls issued
back to back on the current stream (enough calls for about 2 ms), as a training loop issues
them; a call's time is the median over --runs samples of sample time / batch. So a call costs
whichever is longer, its GPU time or the host time to issue it. Two figures answer "what does
Python cost":
- overhead_us (tiny shape; the JSON's `extra`): the call's time minus that of an empty torch
  kernel launch, as the median of the differences of pairs of samples taken one right after
  the other (the host's pace drifts over seconds); i.e. what the Python wrapper, the argument
  checks, the output allocations and (where PyTorch needs it: compiling, modes, subclasses) the
  custom op's dispatch add on top of one launch (there the host time is the longer one);
- pct_copy (large shape): bytes the op must move (every input read once, every output written
  once) per second, as a percentage of a torch device-to-device copy of the same number of
  bytes in the same process.
--cpp names a bench_recurrence, bench_varlen or bench_call JSON written in the same sitting
(repeatable; benchmarks/gpu_run.sh runs them): each Python row with a C++ row of the same
operation, dtype and shape then also gets the C++ median and, at the large shape, the ratio
python/cpp (the issue's bar: at most 1.03) or, at the tiny one, the difference python - C++
(bench_call times the same tiny calls from C++ by the host clock, back to back; the issue's bar:
at most 10 µs). The packed rows take bench_varlen's random lengths, so they meet its rows.
--tiny times the tiny shapes only. --host-parts times, by the host's clock alone, the parts of a
tiny gated forward (its checks, allocation, DLPack exports, the extension's call, the eager-path
test, the autograd.Function around it), with inputs that require grad and without. Without a
CUDA GPU (or a parscan built without CUDA) it says so and exits 0.
"""
import argparse
import datetime
import itertools
import json
import os
import statistics
import subprocess
import sys


def commit():
    """PARSCAN_COMMIT where the caller names the commit (as for the C++ benchmarks: a copy of the
    tree may carry stale git metadata), else the checkout's HEAD."""
    if os.environ.get("PARSCAN_COMMIT"):
        return os.environ["PARSCAN_COMMIT"]
    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def batch_us(torch, fn, batch):
    """Microseconds per call of `batch` back-to-back calls, by CUDA events around the batch."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(batch):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3 / batch


def batch_size(torch, fn, warmup=5, sample_us=2000.0):
    """Calls in a sample of about sample_us microseconds (after a warm-up)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    return max(1, min(500, int(sample_us / max(batch_us(torch, fn, 1), 1.0))))


def median_us(torch, fn, runs):
    """Microseconds per call: the median over `runs` samples, each a batch of back-to-back calls."""
    batch = batch_size(torch, fn)
    return statistics.median(batch_us(torch, fn, batch) for _ in range(runs))


def median_overhead_us(torch, fn, floor_fn, runs):
    """Microseconds a call of fn costs over one of floor_fn: the median, over `runs` pairs of
    samples taken one right after the other, of their difference. The host's pace drifts over
    seconds, so pairs in time compare what separate medians would not."""
    batch = min(batch_size(torch, fn), batch_size(torch, floor_fn))
    return statistics.median(batch_us(torch, fn, batch) - batch_us(torch, floor_fn, batch) for _ in range(runs))


def cases(torch, pt, large):
    """(name, dtype name, shape text, bytes moved, the call) for each op at one size."""
    B, T, D = (8, 4096, 1536) if large else (1, 8, 32)
    dev, bf16 = "cuda", torch.bfloat16
    a = torch.rand(B, T, D, device=dev) * 0.5 + 0.5
    b = torch.randn(B, T, D, device=dev)
    x = pt.gated_recurrence(a, b, dim=1)
    dx = torch.randn_like(x)
    a_g, b_g = a.clone().requires_grad_(), b.clone().requires_grad_()  # a training step's forward
    log_a = a.log()
    abf, bbf = a.to(bf16), b.to(bf16)
    n = 4 * B * T * D
    ops = torch.ops.parscan
    out = [
        ("gated_recurrence forward", "f32", 3 * n, lambda: pt.gated_recurrence(a, b, dim=1)),
        ("gated_recurrence forward", "bf16", 3 * n // 2, lambda: pt.gated_recurrence(abf, bbf, dim=1)),
        ("gated_recurrence forward, inputs require grad", "f32", 3 * n, lambda: pt.gated_recurrence(a_g, b_g, dim=1)),
        # The backward as autograd runs it (the formula's call in eager mode, without the op's
        # dispatch; no x0, and x_final unused, so dx_final None: as bench_call's C++ backward).
        ("gated_recurrence backward", "f32", 5 * n,
         lambda: pt._backward_call(pt._gated_backward_run, pt._gated_backward, ops.gated_recurrence_backward,
                                   (a, x, None, None, dx, None, 1, False, "linear"), False)),
        # A training step's recurrence: the forward with inputs that require gradients, then autograd's
        # backward from x (torch.autograd.grad: no accumulation into .grad).
        ("gated_recurrence training step (forward + backward)", "f32", 8 * n,
         lambda: torch.autograd.grad(pt.gated_recurrence(a_g, b_g, dim=1), (a_g, b_g), dx)),
        ("log_recurrence forward (log a, value b -> x)", "f32", 3 * n,
         lambda: pt.log_recurrence(log_a, b, dim=1, b_form="value", output="value")),
        ("cumulative sum", "f32", 2 * n, lambda: pt.cumulative(b, dim=1)),
        ("reduce sum", "f32", n, lambda: pt.reduce(b, dim=1)),
    ]
    shapes = {name: f"{B}x{D}x{T}" for name, *_ in out}  # B x D x T, as bench_recurrence names shapes
    # The matrix recurrence with N = 8 at the same number of state elements: B·D/8 sequences.
    N = 8
    seqs = max(1, B * D // N) if large else 1
    W = torch.randn(seqs, T, N, N, device=dev) * (0.3 / N ** 0.5)
    bm = torch.randn(seqs, T, N, device=dev)
    out.append(("matrix_recurrence forward N=8", "f32", 4 * seqs * T * (N * N + 2 * N),
                lambda: pt.matrix_recurrence(W, bm, dim=1)))
    shapes[out[-1][0]] = f"{seqs}x{T}x{N}"
    M = torch.eye(N, device=dev) + W
    out.append(("matrix_chain total d=8", "f32", 4 * seqs * (T + 1) * N * N, lambda: pt.matrix_chain(M, dim=1)))
    shapes[out[-1][0]] = f"{seqs}x{T}x{N}x{N}"
    # Packed sequences (cu_seqlens): bench_varlen's 64 random lengths over D = 1536, channel-last
    # (total, D), named with its shape text; tiny: two sequences of 3 and 5 steps.
    lengths = varlen_lengths() if large else [3, 5]
    Dp = 1536 if large else 32
    cu = torch.tensor([0] + list(itertools.accumulate(lengths)), dtype=torch.int64, device=dev)
    total = int(cu[-1])
    ap, bp = torch.rand(total, Dp, device=dev) * 0.5 + 0.5, torch.randn(total, Dp, device=dev)
    apbf, bpbf = ap.to(bf16), bp.to(bf16)
    for dtype, (pa, pb), size in (("f32", (ap, bp), 4), ("bf16", (apbf, bpbf), 2)):
        out.append(("gated_recurrence forward, packed", dtype, 3 * size * total * Dp,
                    lambda pa=pa, pb=pb: pt.gated_recurrence(pa, pb, dim=0, cu_seqlens=cu)))
        shapes[out[-1][0] + dtype] = f"{len(lengths)} seqs x{Dp} total {total}"
    return [(name, dtype, shapes.get(name + dtype, shapes.get(name)), moved, fn) for name, dtype, moved, fn in out]


def varlen_lengths(n=64):
    """bench_varlen's random lengths: 1 + floor(16383 u^3), u from its mix of 0x5eed + i."""
    mask = (1 << 64) - 1

    def mix(z):
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & mask
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & mask
        return z ^ (z >> 31)

    units = ((mix(0x5eed + i) >> 11) * (1.0 / 9007199254740992.0) for i in range(n))
    return [1 + int(16383.0 * u * u * u) for u in units]


def floors(torch, large):
    """What any torch.library.custom_op costs, measured the same way: an op that only allocates
    its output, without and with an autograd formula, and parscan's extension called directly
    (the C++ entry point, with no custom op around it). (name, dtype, bytes moved, the call)."""
    from torch.utils.dlpack import to_dlpack
    from parscan import _core

    B, T, D = (8, 4096, 1536) if large else (1, 8, 32)
    a = torch.rand(B, T, D, device="cuda") * 0.5 + 0.5
    b = torch.randn(B, T, D, device="cuda")
    x, x_final = torch.empty_like(a), torch.empty(B, D, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    rows = [("parscan extension called directly (gated forward)", "f32", 3 * 4 * B * T * D,
             lambda: _core.gated_forward(to_dlpack(a), to_dlpack(b), to_dlpack(x), None, to_dlpack(x_final), 1, False,
                                         "linear", stream))]
    if not large:
        if not hasattr(floors, "ops"):
            def empty_op(name, with_autograd):
                @torch.library.custom_op(f"parscan_bench::{name}", mutates_args=())
                def op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
                    return torch.empty_like(a)

                op.register_fake(lambda a, b: torch.empty_like(a))
                if with_autograd:
                    op.register_autograd(lambda ctx, g: (g, g), setup_context=lambda ctx, inputs, output: None)
                return op

            floors.ops = (empty_op("empty", False), empty_op("empty_with_autograd", True))

            class EmptyFunction(torch.autograd.Function):  # what any Python autograd formula costs
                @staticmethod
                def forward(ctx, a, b):
                    return torch.empty_like(a)

                @staticmethod
                def backward(ctx, g):
                    return g, g

            floors.function = EmptyFunction.apply

            # parscan's own forward Function (parscan.torch._function, as the package builds it,
            # with the same arguments and context) around an allocation only: what the Function
            # costs a gated forward whose inputs require grad, without the extension's call.
            import parscan.torch as pt

            def forward_allocating_x(ctx, *args):
                ctx.set_materialize_grads(False)
                x = pt._new_dense(args[0])
                pt._gated_setup_context(ctx, args, (x, None))
                return x

            floors.parscan_function = pt._function("gated_allocation_only", forward_allocating_x,
                                                   lambda ctx, dx: (dx, dx, None, None, None, None, None))
            floors.with_gradient = pt._WITH_GRADIENT_NO_FINAL[pt._gated_forward]
        empty, empty_grad = floors.ops
        a_g, b_g = a.clone().requires_grad_(), b.clone().requires_grad_()
        rows += [("floor: an empty torch custom_op", "f32", 0, lambda: empty(a, b)),
                 ("floor: an empty torch custom_op with autograd", "f32", 0, lambda: empty_grad(a, b)),
                 ("floor: an empty autograd.Function, inputs require grad", "f32", 0,
                  lambda: floors.function(a_g, b_g)),
                 ("floor: a training step through an empty autograd.Function", "f32", 0,
                  lambda: torch.autograd.grad(floors.function(a_g, b_g), (a_g, b_g), a)),
                 ("floor: parscan's gated forward Function allocating x only, inputs require grad", "f32", 0,
                  lambda: floors.parscan_function(a_g, b_g, None, None, 1, False, "linear")),
                 ("gated forward, inputs require grad: parscan's Function called directly", "f32", 0,
                  lambda: floors.with_gradient(a_g, b_g, None, None, 1, False, "linear"))]
    return [(name, dtype, f"{B}x{D}x{T}", moved, fn) for name, dtype, moved, fn in rows]


def host_parts(torch, pt):
    """(name, host µs per call) of the parts of a tiny gated forward: the median over 9 rounds of
    5000 back-to-back calls each, by time.perf_counter (the GPU keeps up with these launches)."""
    import time
    from torch.utils.dlpack import to_dlpack

    def host_us(fn, n=5000, rounds=9):
        for _ in range(200):
            fn()
        samples = []
        for _ in range(rounds):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            samples.append((time.perf_counter() - t) * 1e6 / n)
            torch.cuda.synchronize()
        return statistics.median(samples)

    def without_grad(fn):
        def call():
            with torch.no_grad():
                return fn()
        return call

    a = torch.rand(1, 8, 32, device="cuda") * 0.5 + 0.5
    b = torch.randn(1, 8, 32, device="cuda")
    a_g, b_g = a.clone().requires_grad_(), b.clone().requires_grad_()
    z = torch.empty(1, device="cuda")
    args, args_g = (a, b, None, None, 1, False, "linear"), (a_g, b_g, None, None, 1, False, "linear")
    allocate_only = floors.parscan_function  # (floors(torch, False) made it)
    parts = [
        ("an empty torch launch", lambda: z.zero_()),
        ("to_dlpack, a tensor that requires grad", lambda: to_dlpack(a_g)),
        ("the output's allocation (_new_dense)", lambda: pt._new_dense(a_g)),
        ("the argument checks (_check_gated)", lambda: pt._check_gated("gated_recurrence", a_g, b_g, 1, "linear")),
        ("the eager-path test (_eager_path), inputs require grad", lambda: pt._eager_path(args_g)),
        ("the forward's work (_gated_run: checks, allocation, exports, extension)",
         lambda: pt._gated_run(*args, False)),
        ("the same, inputs require grad", lambda: pt._gated_run(*args_g, False)),
        ("the same under torch.no_grad (as inside the Function)", without_grad(lambda: pt._gated_run(*args_g, False))),
        ("torch.no_grad's context alone", without_grad(lambda: None)),
        ("parscan's forward Function allocating x only, inputs require grad", lambda: allocate_only(*args_g)),
        ("parscan's forward Function called directly, inputs require grad",
         lambda: pt._WITH_GRADIENT_NO_FINAL[pt._gated_forward](*args_g)),
        ("gated_recurrence, inputs require grad", lambda: pt.gated_recurrence(a_g, b_g, dim=1)),
        ("gated_recurrence, no gradient", lambda: pt.gated_recurrence(a, b, dim=1)),
    ]
    return [(name, host_us(fn)) for name, fn in parts]


def jax_rows(runs, copy_gbs, sizes):
    """The same ops from JAX (parscan.jax under jax.jit, XLA's CUDA stream), timed by the host
    clock around a batch of back-to-back calls ended by block_until_ready (JAX dispatches
    asynchronously, so a call costs the longer of its GPU time and its dispatch), beside a
    jitted one-kernel elementwise op timed the same way (a row's overhead is the difference).
    Rows (name, dtype, shape, median_us, bytes moved, floor_us, large), or [] where JAX sees no
    GPU."""
    import time
    try:
        import jax
        import jax.numpy as jnp
        if not jax.devices("gpu"):
            return []
        import parscan.jax as pj
    except Exception as e:  # no JAX, no CUDA plugin, or parscan built without the FFI targets
        print(f"bench_python: JAX rows skipped ({type(e).__name__}: {e})")
        return []

    def median_host_us(fn, args):
        out = fn(*args)
        jax.block_until_ready(out)

        def sample(batch):
            t0 = time.perf_counter()
            for _ in range(batch):
                out = fn(*args)
            jax.block_until_ready(out)
            return (time.perf_counter() - t0) * 1e6 / batch

        batch = max(1, min(500, int(2000.0 / max(sample(1), 1.0))))
        return statistics.median(sample(batch) for _ in range(runs))

    floor = jax.jit(lambda a, b: a + b)
    gated = jax.jit(lambda a, b: pj.gated_recurrence(a, b, dim=1))
    cumsum = jax.jit(lambda b: pj.cumulative(b, dim=1))
    total = jax.jit(lambda b: pj.reduce(b, dim=1))
    rows = []
    for large in sizes:
        B, T, D = (8, 4096, 1536) if large else (1, 8, 32)
        key = jax.random.PRNGKey(0)
        a = jax.random.uniform(key, (B, T, D), jnp.float32) * 0.5 + 0.5
        b = jax.random.normal(key, (B, T, D), jnp.float32)
        floor_us = median_host_us(floor, (a, b))
        n = B * T * D
        for name, dtype, fn, args, moved in [
                ("jax: gated_recurrence forward", "f32", gated, (a, b), 3 * 4 * n),
                ("jax: gated_recurrence forward", "bf16", gated, (a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)),
                 3 * 2 * n),
                ("jax: cumulative sum", "f32", cumsum, (b,), 2 * 4 * n),
                ("jax: reduce sum", "f32", total, (b,), 4 * n),
                ("jax floor: a jitted elementwise op", "f32", floor, (a, b), 3 * 4 * n)]:
            us = median_host_us(fn, args)
            rows.append((name, dtype, f"{B}x{D}x{T}", us, moved, floor_us, large))
    return rows


# Python rows and the C++ rows of the same operation: bench_recurrence's (channel-last,
# T = 4096) and bench_varlen's (random lengths, channel-last) for the large shapes, bench_call's
# (host time a call) for the tiny ones; a tuple of C++ rows is their sum (a forward and a backward).
CPP_ROWS = {
    ("gated_recurrence forward", "f32"): ("fwd f32 channel-last T=4096", "gated forward, library pool"),
    ("gated_recurrence forward", "bf16"): ("fwd bf16 channel-last T=4096", "gated forward, library pool"),
    ("gated_recurrence forward, inputs require grad", "f32"): ("fwd f32 channel-last T=4096",
                                                               "gated forward, library pool"),
    ("gated_recurrence backward", "f32"): ("bwd f32 channel-last T=4096", "gated backward, library pool"),
    ("gated_recurrence training step (forward + backward)", "f32"): (
        ("fwd f32 channel-last T=4096", "bwd f32 channel-last T=4096"),
        ("gated forward, library pool", "gated backward, library pool")),
    ("gated_recurrence forward, packed", "f32"): ("varlen random fwd f32 channel-last",
                                                  "packed gated forward, library pool"),
    ("gated_recurrence forward, packed", "bf16"): ("varlen random fwd bf16 channel-last",),
    ("cumulative sum", "f32"): ("inclusive sum, library pool",),
    ("reduce sum", "f32"): ("reduce sum, library pool",),
}


def cpp_rows(paths):
    """{(case, dtype, shape): median_us} from bench_recurrence / bench_varlen / bench_call JSON
    files (none: {})."""
    rows = {}
    for path in paths or []:
        with open(path) as f:
            run = json.load(f)
        rows.update({(r["case"], r["dtype"], r["shape"]): r["median_us"] for r in run["results"]})
    return rows


def cpp_median(cpp, name, dtype, shape):
    """The C++ median µs of the Python row (name, dtype, shape), or None."""
    for case in CPP_ROWS.get((name, dtype), ()):
        parts = case if isinstance(case, tuple) else (case,)
        if all((part, dtype, shape) in cpp for part in parts):
            return sum(cpp[(part, dtype, shape)] for part in parts)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--runs", type=int, default=50, help="timed calls per case (at least 20)")
    parser.add_argument("--cpp", action="append",
                        help="a bench_recurrence, bench_varlen or bench_call JSON from the same sitting, to compare with "
                             "(repeatable)")
    parser.add_argument("--jax", action="store_true", help="also time the ops from JAX (parscan.jax under jit)")
    parser.add_argument("--tiny", action="store_true", help="only the tiny shapes (the per-call overhead)")
    parser.add_argument("--host-parts", action="store_true",
                        help="only the host time of the parts of a tiny gated forward, with and without grad")
    args = parser.parse_args()
    runs = max(20, args.runs)
    if args.jax:  # before anything starts JAX's GPU client: share the GPU with torch
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import torch
    except ImportError:
        print("bench_python: PyTorch is not installed; nothing to time")
        return 0
    import parscan
    if not (torch.cuda.is_available() and parscan.built_with_cuda):
        print("bench_python: needs a CUDA GPU and parscan built with CUDA "
              f"(torch sees a GPU: {torch.cuda.is_available()}, parscan built with CUDA: {parscan.built_with_cuda}); "
              "skipped")
        return 0
    import parscan.torch as pt

    if args.host_parts:
        floors(torch, False)  # builds the Functions the parts call
        results = []
        for name, us in host_parts(torch, pt):
            print(f"{name:72s} {us:8.2f} us of host time a call")
            results.append({"case": name, "dtype": "f32", "layout": "channel_last", "direction": "forward",
                            "shape": "1x32x8", "median_us": round(us, 3), "gbs": 0, "pct_copy": 0, "extra": 0})
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"program": "bench_python host-parts", "gpu": torch.cuda.get_device_name(),
                           "commit": commit(),
                           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "copy_gbs": 0, "note": "median_us: host time a call (time.perf_counter), no GPU timing",
                           "results": results}, f, indent=1)
        return 0

    # The baselines, measured like the ops: an empty kernel launch, and a copy of N bytes.
    tiny = torch.empty(1, device="cuda")
    launch = tiny.zero_
    launch_us = median_us(torch, launch, runs)
    copy_bytes = 1 << 30
    src, dst = torch.empty(copy_bytes // 2, dtype=torch.uint8, device="cuda"), torch.empty(
        copy_bytes // 2, dtype=torch.uint8, device="cuda")
    copy_us = median_us(torch, lambda: dst.copy_(src), runs)
    copy_gbs = copy_bytes / (copy_us * 1e3)  # read + write

    cpp = cpp_rows(args.cpp)
    results = []
    sizes = (False,) if args.tiny else (True, False)  # large shapes, tiny shapes
    for large in sizes:
        for name, dtype, shape, moved, fn in cases(torch, pt, large) + floors(torch, large):
            us = median_us(torch, fn, runs)
            extra = round(moved / 1e6, 3) if large else round(median_overhead_us(torch, fn, launch, runs), 3)
            gbs = moved / (us * 1e3)
            row = {"case": name, "dtype": dtype, "layout": "channel_last" if "matrix" not in name else "dense",
                   "direction": "backward" if "backward" in name else "forward", "shape": shape, "median_us": round(us, 3), "gbs": round(gbs, 2),
                   "pct_copy": round(100 * gbs / copy_gbs, 2),
                   "extra": extra}
            cpp_us = cpp_median(cpp, name, dtype, shape) if "directly" not in name else None
            if cpp_us and large:
                row["cpp_median_us"], row["python_over_cpp"] = cpp_us, round(us / cpp_us, 4)
            elif cpp_us:
                row["cpp_median_us"], row["python_minus_cpp_us"] = cpp_us, round(us - cpp_us, 3)
            results.append(row)
            print(f"{name:46s} {dtype:5s} {shape:18s} {us:10.2f} us {gbs:8.1f} GB/s {row['pct_copy']:6.1f}% of copy"
                  + (f"  overhead {extra:6.2f} us" if not large else "")
                  + (f"  C++ {cpp_us:.2f} us, python/C++ {us / cpp_us:.3f}" if cpp_us and large else "")
                  + (f"  C++ {cpp_us:.2f} us, python - C++ {us - cpp_us:.2f} us" if cpp_us and not large else ""))
    for name, dtype, shape, us, moved, floor_us, large in (jax_rows(runs, copy_gbs, sizes) if args.jax else []):
        gbs = moved / (us * 1e3)
        results.append({"case": name, "dtype": dtype, "layout": "channel_last", "direction": "forward",
                        "shape": shape, "median_us": round(us, 3), "gbs": round(gbs, 2),
                        "pct_copy": round(100 * gbs / copy_gbs, 2),
                        "extra": round(us - floor_us, 3) if not large else round(moved / 1e6, 3)})
        print(f"{name:46s} {dtype:5s} {shape:18s} {us:10.2f} us {gbs:8.1f} GB/s {100 * gbs / copy_gbs:6.1f}% of copy"
              + (f"  overhead over a jitted elementwise op {us - floor_us:6.2f} us" if not large else ""))
    print(f"empty launch {launch_us:.2f} us; copy bandwidth (read+write) {copy_gbs:.1f} GB/s on "
          f"{torch.cuda.get_device_name()}")
    run = {"program": "bench_python tiny" if args.tiny else "bench_python", "gpu": torch.cuda.get_device_name(),
           "commit": commit(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "launch_us": round(launch_us, 3), "copy_gbs": round(copy_gbs, 2),
           "note": "extra: per-call overhead over an empty torch launch, the median of paired samples (us; jax rows: "
                   "over a jitted elementwise op)"
                   " on tiny shapes; MB moved on large ones",
           "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(run, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
