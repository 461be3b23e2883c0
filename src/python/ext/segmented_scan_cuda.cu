// src/python/ext/segmented_scan_cuda.cu — the built-in-operator scans over packed segments on
// the CUDA backend (compiled only in CUDA builds, apart from scan_cuda.cu so that nvcc builds
// the two sets of kernels in parallel).
#include <parscan/parscan.cuh>

#include "backends.hpp"
#include "scan_impl.hpp"

namespace parscan::python {

status run_segmented_scan_cuda(const scan_request& r, std::uintptr_t stream) {
  return scan_detail::run_scan<true>(cuda_backend_on(stream), r);
}

}  // namespace parscan::python
