// test/recurrence/log_varlen_test.cpp — the packed variable-length (cu_seqlens) log-space
// recurrence tests on the host backend. The cases are backend-neutral: see log_varlen_cases.inl.
#include "recurrence/log_varlen_cases.inl"
