// test/recurrence/varlen_test.cu — the packed variable-length (cu_seqlens) gated-recurrence tests
// on the CUDA backend (nvcc, PARSCAN_TEST_CUDA=1). The cases are backend-neutral: see
// varlen_cases.inl.
#include "recurrence/varlen_cases.inl"
