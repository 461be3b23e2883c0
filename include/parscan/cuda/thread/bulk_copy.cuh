// parscan/cuda/thread/bulk_copy.cuh — what one thread asks of the bulk copy engine (the
// tensor memory accelerator's non-tensor form, sm_90): a whole tile copied from global to
// shared memory by one instruction, its completion counted in bytes on a shared-memory
// barrier. Thin names over CCCL's cuda::ptx wrappers, so the agents read as what they do.
//
// Both addresses and the size must be multiples of 16 bytes.
#pragma once

#include <cstdint>

#include <cuda/ptx>

#include "../../config.hpp"

namespace parscan::cuda_detail {

/// A shared-memory barrier that completes once `bytes` bulk-loaded bytes have landed.
struct bulk_barrier {
  std::uint64_t* word;

  /// One thread: makes the barrier ready for one arrival, visible to the copy engine.
  __device__ PARSCAN_INLINE void init() const {
    cuda::ptx::mbarrier_init(word, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  /// One thread: copies `bytes` (a multiple of 16, possibly 0) from global `src` to shared `dst`
  /// and arrives, so that the barrier's current phase completes when they have landed.
  __device__ PARSCAN_INLINE void load(void* dst, const void* src, unsigned bytes) const {
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, word,
                                         bytes);
    if (bytes > 0) cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, word);
  }
  /// Any thread: waits for the load of phase `parity` (0, 1, 0, … for successive loads) to
  /// complete; the bytes are then visible to it.
  __device__ PARSCAN_INLINE void wait(unsigned parity = 0) const {
    while (!cuda::ptx::mbarrier_try_wait_parity(word, parity)) {
    }
  }
};

}  // namespace parscan::cuda_detail
