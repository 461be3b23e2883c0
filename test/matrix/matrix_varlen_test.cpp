// test/matrix/matrix_varlen_test.cpp — the packed variable-length (cu_seqlens) matrix-recurrence
// tests on the host backend. The cases are backend-neutral: see matrix_varlen_cases.inl.
#include "matrix/matrix_varlen_cases.inl"
