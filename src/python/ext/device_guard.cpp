// src/python/ext/device_guard.cpp — switching the current CUDA device around a call, and the
// package's workspace pools. Only the CUDA runtime's C API is needed, so this stays a plain
// C++ file.
#include "backends.hpp"

#include <cstdint>
#include <mutex>
#include <vector>

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

namespace {

/// A device_allocator over one cudaMemPool_t of the package's, whose release threshold is
/// "never", so memory it reserved once stays reserved for later calls.
class pool_allocator final : public device_allocator {
 public:
  explicit pool_allocator(cudaMemPool_t pool) : pool_(pool) {}
  void* allocate(std::size_t bytes, CUstream_st* stream) override {
    void* p = nullptr;
    if (cudaMallocFromPoolAsync(&p, bytes, pool_, stream) != cudaSuccess) {
      cudaGetLastError();  // not sticky: the caller sees allocation_failed
      return nullptr;
    }
    return p;
  }
  void deallocate(void* p, std::size_t, CUstream_st* stream) override { cudaFreeAsync(p, stream); }

 private:
  cudaMemPool_t pool_;
};

pool_allocator* make_pool(int device) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool;
  if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  std::uint64_t keep = UINT64_MAX;
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  return new pool_allocator(pool);  // lives as long as the process, as the pool does
}

}  // namespace

device_allocator* workspace_pool(int device) {
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) return nullptr;
  static std::mutex m;
  static std::vector<pool_allocator*> pools;  // by device; made on first use
  static std::vector<bool> tried;
  std::lock_guard<std::mutex> lock(m);
  if (static_cast<std::size_t>(device) >= pools.size()) {
    pools.resize(static_cast<std::size_t>(device) + 1, nullptr);
    tried.resize(static_cast<std::size_t>(device) + 1, false);
  }
  if (!tried[static_cast<std::size_t>(device)]) {
    tried[static_cast<std::size_t>(device)] = true;
    pools[static_cast<std::size_t>(device)] = make_pool(device);
  }
  return pools[static_cast<std::size_t>(device)];
}
#else
device_guard::device_guard(int) {}
device_guard::~device_guard() = default;
device_allocator* workspace_pool(int) { return nullptr; }
#endif

}  // namespace parscan::python
