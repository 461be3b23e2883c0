// test/recurrence/recurrence_test.cpp — the gated-recurrence tests on the host backend.
// The cases themselves are backend-neutral: see recurrence_cases.inl.
#include "recurrence/recurrence_cases.inl"
