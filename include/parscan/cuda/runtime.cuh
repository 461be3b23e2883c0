// parscan/cuda/runtime.cuh — what every CUDA entry point needs around its kernels: error
// checks that report instead of aborting, temporary storage from the caller, the allocator
// hook or the library's own memory pool, and cached device facts.
#pragma once

#include <cuda_runtime.h>

#include "../backend.hpp"
#include "../config.hpp"
#include "../status.hpp"

namespace parscan {

/// The CUDA error behind the calling thread's most recent status::cuda_error.
inline cudaError_t& cuda_last_error() {
  static thread_local cudaError_t last = cudaSuccess;
  return last;
}

/// The memory pool that calls given neither a workspace nor an allocator take their temporary
/// storage from: one per device (`device` < 0: the current one), made on first use, whose
/// release threshold is "never", so memory it reserved once stays reserved for later calls.
/// (cudaMallocAsync's default pool gives its memory back to the driver at every
/// synchronisation unless the application raised its threshold; each call then mapped its
/// workspace afresh, 100–180 µs on an H100 — more than many calls' kernels.) The caller may
/// trim it (cudaMemPoolTrimTo) or set its attributes; it lives as long as the process. Null
/// where it cannot be made: calls then take cudaMallocAsync's default pool.
/// (src/cuda/workspace_pool.cpp)
cudaMemPool_t cuda_workspace_pool(int device = -1);

namespace cuda_detail {

inline status report(cudaError_t e) {
  if (e == cudaSuccess) return status::success;
  cuda_last_error() = e;
  return status::cuda_error;
}

/// After a launch: a bad configuration or a sticky error from earlier work becomes a status.
inline status check_launch() { return report(cudaGetLastError()); }

/// A new pool of cuda_workspace_pool's kind on `device`, or null (the error cleared). Safe
/// inside a stream capture: a call's first use of the pool may come while its stream is
/// captured, where the global capture mode refuses cudaMemPoolCreate and the refusal
/// invalidates the capture; it is made in the relaxed mode.
cudaMemPool_t create_workspace_pool(int device);

/// `bytes` of device memory, stream-ordered on `stream`, from the library's pool (else from
/// cudaMallocAsync's default pool); the error cleared. Given back with cudaFreeAsync.
inline void* pool_allocate(std::size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  cudaMemPool_t pool = cuda_workspace_pool();
  if ((pool ? cudaMallocFromPoolAsync(&p, bytes, pool, stream) : cudaMallocAsync(&p, bytes, stream)) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so later checks see only new errors
    p = nullptr;
  }
  return p;
}

/// Temporary device storage for one call, released (stream-ordered) when it goes out of scope.
class workspace_lease {
 public:
  explicit workspace_lease(const cuda_backend& be) : be_(be) {}
  workspace_lease(const workspace_lease&) = delete;
  workspace_lease& operator=(const workspace_lease&) = delete;
  ~workspace_lease() {
    if (!owned_) return;
    if (be_.allocator) be_.allocator->deallocate(ptr_, bytes_, be_.stream);
    else cudaFreeAsync(ptr_, be_.stream);
  }

  status acquire(std::size_t bytes) {
    if (bytes == 0) return status::success;
    if (be_.workspace) {
      if (be_.workspace_bytes < bytes) return status::insufficient_workspace;
      ptr_ = be_.workspace;
      return status::success;
    }
    ptr_ = be_.allocator ? be_.allocator->allocate(bytes, be_.stream) : pool_allocate(bytes, be_.stream);
    if (!ptr_) return status::allocation_failed;
    owned_ = true;
    bytes_ = bytes;
    return status::success;
  }
  void* get() const { return ptr_; }

 private:
  const cuda_backend& be_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  bool owned_ = false;
};

/// The backend that the next steps of a call run on: the call's own, or, where the call holds
/// workspace of `bytes` whose first `used` bytes it keeps for itself (a backward's recomputed x,
/// a packed plan's slot table), the rest of it.
inline cuda_backend backend_after(const cuda_backend& be, const workspace_lease& ws, std::size_t used,
                                  std::size_t bytes) {
  cuda_backend rest = be;
  if (ws.get()) {
    rest.workspace = static_cast<char*>(ws.get()) + used;
    rest.workspace_bytes = bytes - used;
    rest.allocator = nullptr;
  }
  return rest;
}

/// The most blocks a launch takes (gridDim.x).
constexpr index_t max_grid = 0x7fffffff;

struct device_facts {
  int device = 0;
  int multiprocessors = 0;
  status st = status::success;
};

inline device_facts current_device() {
  device_facts f;
  if ((f.st = report(cudaGetDevice(&f.device))) != status::success) return f;
  f.st = report(cudaDeviceGetAttribute(&f.multiprocessors, cudaDevAttrMultiProcessorCount, f.device));
  return f;
}

/// Each multiprocessor's share of a device's peak DRAM bandwidth in GB/s: the memory clock's two
/// transfers a cycle over the bus width, divided among the SMs. What an SM must keep in flight
/// to draw its share grows with it (Little's law), so a tile that saturates one GPU can starve
/// another.
constexpr int memory_gbs_per_sm(long long memory_khz, int bus_bits, int multiprocessors) {
  return static_cast<int>(2 * memory_khz * 1000 * (bus_bits / 8) / 1000000000 / multiprocessors);
}
static_assert(memory_gbs_per_sm(2619000, 5120, 132) == 25, "an H100 SXM: 3.35 TB/s over 132 SMs");
static_assert(memory_gbs_per_sm(3201000, 6144, 132) == 37, "an H200: 4.9 TB/s over 132 SMs");

/// memory_gbs_per_sm of device dev, computed once per device; 0 where the device does not report
/// its memory clock or bus width.
inline int memory_gbs_per_multiprocessor(const device_facts& dev) {
  constexpr int max_devices = 64;
  static int cached[max_devices] = {};
  const int d = dev.device >= 0 && dev.device < max_devices ? dev.device : 0;
  if (cached[d] == 0 && dev.multiprocessors > 0) {
    int khz = 0, bits = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev.device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev.device) != cudaSuccess) {
      (void)cudaGetLastError();  // not reported: no preference, and no error left for the next check
      return 0;
    }
    cached[d] = memory_gbs_per_sm(khz, bits, dev.multiprocessors);
  }
  return cached[d];
}

/// Resident blocks per multiprocessor for a kernel with `dynamic_smem` bytes of dynamic shared
/// memory, which it is allowed to use beyond the default 48 KB. Computed once per kernel and
/// device (the cache is keyed on the kernel itself, not on its signature, which several kernels
/// may share); 0 if the kernel cannot run with that much.
template <auto Kernel>
int blocks_per_multiprocessor(int block_threads, int device = 0, int dynamic_smem = 0) {
  constexpr int max_devices = 64;
  static int cached[max_devices] = {};
  if (device < 0 || device >= max_devices) device = 0;
  if (cached[device] == 0) {
    int n = 0;
    // Opting in for any dynamic shared memory: the default 48 KB also counts the kernel's own.
    if ((dynamic_smem == 0 ||
         cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_smem) == cudaSuccess) &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, block_threads, dynamic_smem) == cudaSuccess) {
      cached[device] = n > 0 ? n : -1;
    } else {
      cudaGetLastError();  // not sticky: clear it
      cached[device] = -1;
    }
  }
  return cached[device] > 0 ? cached[device] : 0;
}

}  // namespace cuda_detail
}  // namespace parscan
