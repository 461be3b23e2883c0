// src/python/ext/device_guard.cpp — switching the current CUDA device around a call. Only the
// CUDA runtime's C API is needed, so this stays a plain C++ file.
#include "backends.hpp"

#if PARSCAN_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace parscan::python {

#if PARSCAN_HAS_CUDA
device_guard::device_guard(int device) {
  if (device < 0) return;
  ok_ = cudaGetDevice(&previous_) == cudaSuccess;
  if (ok_ && previous_ != device) {
    ok_ = cudaSetDevice(device) == cudaSuccess;
    restore_ = ok_;
  }
}
device_guard::~device_guard() {
  if (restore_) cudaSetDevice(previous_);
}
#else
device_guard::device_guard(int) {}
device_guard::~device_guard() = default;
#endif

}  // namespace parscan::python
