// test/recurrence/log_varlen_test.cu — the packed variable-length (cu_seqlens) log-space
// recurrence tests on the CUDA backend (nvcc, PARSCAN_TEST_CUDA=1). The cases are
// backend-neutral: see log_varlen_cases.inl.
#include "recurrence/log_varlen_cases.inl"
