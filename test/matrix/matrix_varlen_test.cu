// test/matrix/matrix_varlen_test.cu — the packed variable-length (cu_seqlens) matrix-recurrence
// tests on the CUDA backend (nvcc, PARSCAN_TEST_CUDA=1). The cases are backend-neutral: see
// matrix_varlen_cases.inl.
#include "matrix/matrix_varlen_cases.inl"
