// src/python/ext/scan_cuda.cu — the built-in-operator scans on the CUDA backend (compiled only
// in CUDA builds; the generic CUDA algorithms are header-only, so their kernels for these
// types and operators are instantiated here).
#include <parscan/parscan.cuh>

#include "backends.hpp"
#include "scan_impl.hpp"

namespace parscan::python {

status run_scan_cuda(const scan_request& r, std::uintptr_t stream) {
  return scan_detail::run_scan<false>(cuda_backend_on(stream), r);
}

}  // namespace parscan::python
