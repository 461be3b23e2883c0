// parscan/cuda/thread/bulk_copy.cuh — what one thread asks of the bulk copy engine (the
// tensor memory accelerator's non-tensor form, sm_90): a whole tile copied between global and
// shared memory by one instruction, completion counted in bytes on a shared-memory barrier
// (loads) or waited for as a bulk group (stores). Thin names over CCCL's cuda::ptx wrappers, so
// the agents read as what they do.
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

/// Every thread that wrote shared memory a bulk store will read: orders those writes before
/// the copy engine's reads (then a block barrier, then the store).
__device__ PARSCAN_INLINE void fence_shared_for_bulk() { cuda::ptx::fence_proxy_async(cuda::ptx::space_shared); }

/// One thread: copies `bytes` (a multiple of 16, possibly 0) from shared `src` to global `dst`,
/// then waits until the engine has read `src`, so the block may end or reuse it.
__device__ PARSCAN_INLINE void bulk_store_and_release(void* dst, const void* src, unsigned bytes) {
  if (bytes == 0) return;
  cuda::ptx::cp_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, dst, src, bytes);
  cuda::ptx::cp_async_bulk_commit_group();
  cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
}

}  // namespace parscan::cuda_detail
