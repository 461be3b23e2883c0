// test/matrix/matrix_test.cu — the matrix-recurrence and matrix-chain tests on the CUDA backend
// (built by nvcc with PARSCAN_TEST_CUDA=1, so support/env.hpp selects parscan::cuda_backend and
// device memory). The cases themselves are backend-neutral: see matrix_cases.inl.
#include "matrix/matrix_cases.inl"
