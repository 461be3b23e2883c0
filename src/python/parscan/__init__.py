"""parscan from Python: parallel scans and gated recurrences on the CPU and on CUDA.

The functions here take and return NumPy arrays (on the host backend). The same operations for
PyTorch tensors are in ``parscan.torch`` (custom ops with autograd, torch.compile-able) and for
JAX arrays in ``parscan.jax`` (XLA FFI custom calls with custom_vjp). docs/python.md has the
details; every function states its contract in its docstring.
"""

# NumPy's extension before ours: on the GPU machine (Python 3.12, PyTorch 2.11, the module built
# there) a process that loaded _core before NumPy crashed (SIGSEGV) when it then imported torch,
# inside torch's own import; a host-only build did the same, so it is not the CUDA libraries.
# NumPy first, then _core, then torch (or torch first) ran. Not root-caused (no native debugger
# there); pytorch/pytorch#109923 reports the same order-dependent crash for modules carrying
# their own copy of libstdc++ parts. test_torch.py's import-order test runs the failing order in
# a fresh process.
import numpy  # noqa: F401

from . import _core
from ._numpy_api import (cumulative, gated_recurrence, gated_recurrence_backward, log_recurrence,
                         log_recurrence_backward, matrix_chain, matrix_recurrence, matrix_recurrence_backward, reduce)

__version__ = "0.1.0"

built_with_cuda = bool(_core.built_with_cuda)


def cuda_available():
    """True when parscan was built with its CUDA backend and a GPU is visible."""
    return bool(_core.cuda_available())


__all__ = [
    "built_with_cuda",
    "cuda_available",
    "cumulative",
    "gated_recurrence",
    "gated_recurrence_backward",
    "log_recurrence",
    "log_recurrence_backward",
    "matrix_chain",
    "matrix_recurrence",
    "matrix_recurrence_backward",
    "reduce",
]
