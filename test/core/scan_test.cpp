// test/core/scan_test.cpp — the generic-algorithm tests on the host backend.
// The test bodies are backend-neutral and live in scan_cases.inl; scan_test.cu runs the same
// bodies on the CUDA backend.
#include "scan_cases.inl"
