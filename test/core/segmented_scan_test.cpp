// test/core/segmented_scan_test.cpp — the segmented-scan tests on the host backend; the bodies
// are backend-neutral and live in segmented_cases.inl (segmented_scan_test.cu runs them on CUDA).
#include "segmented_cases.inl"
