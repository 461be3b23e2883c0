// test/core/scan_test.cu — the generic-algorithm tests on the CUDA backend. The build compiles
// this file with nvcc and PARSCAN_TEST_CUDA=1, which makes support/env.hpp pick
// parscan::cuda_backend and device buffers; the bodies are those of scan_test.cpp.
#include "scan_cases.inl"
