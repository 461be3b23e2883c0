// src/python/ext/packed_offsets.cpp — cu_seqlens handed to the library as int64 offsets on the
// arrays' device, widened from int32 where needed. Only the CUDA runtime's C API is used, so
// this stays a plain C++ file.
#include <cstdint>
#include <string>

#include "backends.hpp"

#if PARSCAN_HAS_CUDA
#include <parscan/cuda/runtime.cuh>
#endif

namespace parscan::python {

packed_offsets::packed_offsets(const char* op, const array_arg& offsets, std::uintptr_t stream) : stream_(stream) {
  if (offsets.type == element_type::int64) {
    data_ = static_cast<const std::int64_t*>(offsets.data);
    return;
  }
  const auto count = static_cast<std::size_t>(offsets.shape[0]);
  const auto* narrow = static_cast<const std::int32_t*>(offsets.data);
  if (offsets.device == device_kind::cpu) {
    host_.assign(narrow, narrow + count);
    data_ = host_.data();
    return;
  }
#if PARSCAN_HAS_CUDA
  // The low words (little-endian) take the values, the high words stay zero: a strided copy
  // of 4-byte rows after a memset, so no kernel of the package's own is needed. A negative
  // int32 offset widens to a value above 2^31, which breaks the offsets' rule as it did.
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  bytes_ = count * sizeof(std::int64_t);
  device_ = cuda_detail::pool_allocate(bytes_, s);
  if (!device_) {
    fail(argument_error::runtime_error, op, std::string(offsets.name) + ": no device memory for the int64 copy");
  }
  if (cudaMemsetAsync(device_, 0, bytes_, s) != cudaSuccess ||
      cudaMemcpy2DAsync(device_, sizeof(std::int64_t), narrow, sizeof(std::int32_t), sizeof(std::int32_t), count,
                        cudaMemcpyDeviceToDevice, s) != cudaSuccess) {
    cudaGetLastError();
    release();  // the destructor of a constructor that throws does not run
    fail(argument_error::runtime_error, op, std::string(offsets.name) + ": widening to int64 failed");
  }
  data_ = static_cast<const std::int64_t*>(device_);
#else
  // Unreachable: require_offsets refuses CUDA arrays in a build without the CUDA backend.
  fail(argument_error::value_error, op, std::string(offsets.name) + " is on a CUDA device, but this parscan has none");
#endif
}

packed_offsets::~packed_offsets() { release(); }

void packed_offsets::release() {
#if PARSCAN_HAS_CUDA
  if (!device_) return;
  auto* s = reinterpret_cast<cudaStream_t>(stream_);
  cudaFreeAsync(device_, s);
  device_ = nullptr;
#endif
}

}  // namespace parscan::python
