// test/recurrence/recurrence_test.cu — the gated-recurrence tests on the CUDA backend (built by
// nvcc with PARSCAN_TEST_CUDA=1, so support/env.hpp selects parscan::cuda_backend and device
// memory). The cases themselves are backend-neutral: see recurrence_cases.inl.
#include "recurrence/recurrence_cases.inl"
