// src/cuda/workspace_pool.cpp — the library's own memory pool per device, where the CUDA
// backend's calls without a workspace or an allocator take their temporary storage
// (parscan/cuda/runtime.cuh). Only the CUDA runtime's host API: a plain C++ file.
#include <atomic>
#include <cstdint>
#include <mutex>

#include <parscan/cuda/runtime.cuh>

namespace parscan {

namespace cuda_detail {

cudaMemPool_t create_workspace_pool(int device) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  cudaMemPool_t pool = nullptr;
  int supported = 0;
  if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess && supported) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    std::uint64_t keep = UINT64_MAX;
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
      pool = nullptr;
    } else if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) {
      cudaMemPoolDestroy(pool);
      pool = nullptr;
    }
  }
  cudaGetLastError();  // not sticky: a failure here only means no pool
  cudaThreadExchangeStreamCaptureMode(&mode);
  return pool;
}

}  // namespace cuda_detail

cudaMemPool_t cuda_workspace_pool(int device) {
  constexpr int max_devices = 64;
  static std::atomic<cudaMemPool_t> pools[max_devices] = {};
  static std::mutex making;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  if (device >= max_devices) return nullptr;
  if (cudaMemPool_t pool = pools[device].load(std::memory_order_acquire)) return pool;
  std::lock_guard<std::mutex> lock(making);
  cudaMemPool_t pool = pools[device].load(std::memory_order_relaxed);
  if (!pool) {  // not cached on failure: a later call tries again
    pool = cuda_detail::create_workspace_pool(device);
    pools[device].store(pool, std::memory_order_release);
  }
  return pool;
}

}  // namespace parscan
