// src/python/ext/backends.hpp — runs a parscan call on the backend the arrays live on: the host
// backend for CPU arrays, the CUDA backend on the arrays' device and the caller's stream for
// CUDA arrays.
#pragma once

#include <cstdint>
#include <vector>

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

/// cu_seqlens as the library reads them: int64 offsets in the memory of the arrays' device.
/// int64 offsets are used in place; int32 ones (FlashAttention's convention, and JAX's integers
/// without jax_enable_x64) are widened into a temporary: a host copy, or on CUDA a copy on the
/// call's stream from the library's workspace pool, freed stream-ordered when this goes out of
/// scope. Construct it inside run_on's function (the arrays' device current); raises
/// RuntimeError if the temporary cannot be made.
class packed_offsets {
 public:
  packed_offsets(const char* op, const array_arg& offsets, std::uintptr_t stream);
  ~packed_offsets();
  packed_offsets(const packed_offsets&) = delete;
  packed_offsets& operator=(const packed_offsets&) = delete;
  const std::int64_t* get() const { return data_; }

 private:
  void release();
  const std::int64_t* data_ = nullptr;
  std::vector<std::int64_t> host_;  // the widened host copy
  void* device_ = nullptr;          // the widened device copy
  std::size_t bytes_ = 0;
  std::uintptr_t stream_ = 0;
};

/// The CUDA backend on `stream` (a cudaStream_t as an integer), its temporary storage from the
/// library's pool (parscan::cuda_workspace_pool).
inline cuda_backend cuda_backend_on(std::uintptr_t stream) {
  cuda_backend be;
  be.stream = reinterpret_cast<CUstream_st*>(stream);
  return be;
}

/// f(host_backend) for CPU arrays; f(cuda_backend_on(stream)) for CUDA arrays, with their
/// device current.
template <class F>
status run_on(const array_arg& where, std::uintptr_t stream, F&& f) {
  if (where.device == device_kind::cpu) return f(host_backend{});
  device_guard guard(where.device_id);
  if (!guard.ok()) return status::cuda_error;
  return f(cuda_backend_on(stream));
}

/// call(backend, g) on the arrays' backend, g.shape.cu_seqlens set to the offsets as the
/// library reads them (packed_offsets) for the call's duration.
template <class Packed, class Call>
status run_packed(const array_arg& where, std::uintptr_t stream, const char* op, const array_arg& cu_seqlens, Packed& g,
                  Call&& call) {
  return run_on(where, stream, [&](const auto& backend) {
    const packed_offsets offsets(op, cu_seqlens, stream);
    g.shape.cu_seqlens = offsets.get();
    return call(backend, g);
  });
}

/// Runs a recurrence's call on args of type Batch (the batch API) or Packed (cu_seqlens),
/// whichever the axis says, on the arrays' backend, with `fill` setting every field the two
/// share (the tensors, strides and options) and `call(backend, args)` the library's function.
template <class Batch, class Packed, class Fill, class Call>
status run_batch_or_packed(const array_arg& where, std::uintptr_t stream, const scan_axis& axis, Fill&& fill,
                           Call&& call) {
  if (!axis.packed()) {
    Batch g;
    g.shape = {axis.plan.batch, axis.plan.channels, axis.plan.length, recurrence_layout::strided};
    fill(g);
    return run_on(where, stream, [&](const auto& backend) { return call(backend, g); });
  }
  Packed g;
  g.shape = axis.packed_shape();
  fill(g);
  return run_packed(where, stream, axis.op, *axis.cu_seqlens, g, call);
}

}  // namespace parscan::python
