// src/python/ext/backends.hpp — runs a parscan call on the backend the arrays live on: the host
// backend for CPU arrays, the CUDA backend on the arrays' device and the caller's stream for
// CUDA arrays.
#pragma once

#include <cstdint>

#include <parscan/backend.hpp>
#include <parscan/status.hpp>

#include "array_args.hpp"

namespace parscan::python {

/// Makes `device` the current CUDA device for its lifetime and restores the previous one, so a
/// call on cuda:1 works whatever device the caller's thread had current. A no-op without CUDA,
/// and for device -1: "the current device" (XLA makes the right one current before it calls).
class device_guard {
 public:
  explicit device_guard(int device);
  ~device_guard();
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  bool ok() const { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = true;
  bool restore_ = false;
};

/// Temporary device storage for the package's calls: stream-ordered allocations from a memory
/// pool of the package's own per device, which keeps what it has reserved across
/// synchronisations. (cudaMallocAsync's default pool gives its memory back to the driver at
/// every synchronisation: each call then mapped its workspace afresh, 100–180 µs on an H100,
/// more than the small kernels themselves.) The caller's default pool is left as it is.
/// Null when the pool cannot be made (the library then falls back to cudaMallocAsync).
device_allocator* workspace_pool(int device);

/// f(host_backend) for CPU arrays; f(cuda_backend on `stream`) for CUDA arrays, with their
/// device current and the package's workspace pool.
template <class F>
status run_on(const array_arg& where, std::uintptr_t stream, F&& f) {
  if (where.device == device_kind::cpu) return f(host_backend{});
  device_guard guard(where.device_id);
  if (!guard.ok()) return status::cuda_error;
  cuda_backend be;
  be.stream = reinterpret_cast<CUstream_st*>(stream);
  be.allocator = workspace_pool(where.device_id);
  return f(be);
}

}  // namespace parscan::python
