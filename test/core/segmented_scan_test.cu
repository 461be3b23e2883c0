// test/core/segmented_scan_test.cu — the segmented-scan tests on the CUDA backend (nvcc with
// PARSCAN_TEST_CUDA=1); the bodies are those of segmented_scan_test.cpp.
#include "segmented_cases.inl"
