// test/matrix/matrix_test.cpp — the matrix-recurrence and matrix-chain tests on the host
// backend. The cases themselves are backend-neutral: see matrix_cases.inl.
#include "matrix/matrix_cases.inl"
