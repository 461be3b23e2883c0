// parscan/backend.hpp — the two backends every entry point takes as its first argument.
// Plain C++: including it needs no CUDA headers.
#pragma once

#include <cstddef>

struct CUstream_st;  // cudaStream_t is CUstream_st*; declared here so users need no CUDA headers

namespace parscan {

/// Runs on the CPU, synchronously. Needs no GPU and no CUDA runtime. The generic algorithms
/// share large problems out over threads started for the call (parscan/host/scan.hpp); their
/// results are bitwise the same whatever the thread count. The packed (cu_seqlens) gated
/// recurrence shares its sequences out the same way; the other recurrences ignore `threads`.
struct host_backend {
  int threads = 0;  // 0: all hardware threads; 1: run on the calling thread only
};

/// Source of temporary device memory for the CUDA backend. allocate/deallocate are called on
/// the host, ordered on `stream` (like cudaMallocAsync); a null return means out of memory.
struct device_allocator {
  virtual void* allocate(std::size_t bytes, CUstream_st* stream) = 0;
  virtual void deallocate(void* p, std::size_t bytes, CUstream_st* stream) = 0;
  virtual ~device_allocator() = default;
};

/// Runs on the current CUDA device, asynchronously, ordered on `stream`; never synchronises
/// the device. Temporary storage comes from `workspace` when it is non-null (it must hold at
/// least the size the matching *_workspace_size query returns, aligned to 256 bytes), else
/// from `allocator`, else from the library's memory pool of the device (stream-ordered, kept
/// reserved between calls: parscan::cuda_workspace_pool in parscan/cuda/runtime.cuh).
struct cuda_backend {
  CUstream_st* stream = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  device_allocator* allocator = nullptr;
};

}  // namespace parscan
