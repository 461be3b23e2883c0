// test/recurrence/varlen_test.cpp — the packed variable-length (cu_seqlens) gated-recurrence tests
// on the host backend. The cases themselves are backend-neutral: see varlen_cases.inl.
#include "recurrence/varlen_cases.inl"
