// parscan/cuda/thread/bulk_copy.cuh — what one thread asks of the bulk copy engine (the
// tensor memory accelerator's non-tensor form, sm_90): a whole tile copied from global to
// shared memory by one instruction, its completion counted in bytes on a shared-memory
// barrier. Thin names over CCCL's cuda::ptx wrappers, so the agents read as what they do.
//
// Both addresses and the size must be multiples of 16 bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda/ptx>

#include "../../config.hpp"
#include "../../layout.hpp"

namespace parscan::cuda_detail {

/// A shared-memory barrier that completes once `bytes` bulk-loaded bytes have landed.
struct bulk_barrier {
  std::uint64_t* word;

  /// One thread: makes the barrier ready for one arrival, visible to the copy engine.
  __device__ PARSCAN_INLINE void init() const {
    cuda::ptx::mbarrier_init(word, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  /// One thread: arrives, so that the barrier's current phase completes when `bytes` more bulk-
  /// loaded bytes (the copies issued after it) have landed.
  __device__ PARSCAN_INLINE void expect(unsigned bytes) const {
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, word,
                                         bytes);
  }
  /// One thread: copies `bytes` (a multiple of 16, possibly 0) from global `src` to shared `dst`,
  /// counted on the barrier (announced by expect).
  __device__ PARSCAN_INLINE void copy(void* dst, const void* src, unsigned bytes) const {
    if (bytes > 0) cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, word);
  }
  /// Any thread: waits for the load of phase `parity` (0, 1, 0, … for successive loads) to
  /// complete; the bytes are then visible to it.
  __device__ PARSCAN_INLINE void wait(unsigned parity = 0) const {
    while (!cuda::ptx::mbarrier_try_wait_parity(word, parity)) {
    }
  }
};

/// Whether p starts on a 16-byte boundary, and so does every sequence of layout l after it
/// (elements of `element_bytes`): where bulk copies can start.
inline bool bulk_aligned(const void* p, const sequence_layout& l, std::size_t element_bytes) {
  // The offset between two sequences (when there are two) is whole 16-byte words.
  const auto whole = [&](index_t elements, index_t used) {
    return used <= 1 || static_cast<std::size_t>(elements) * element_bytes % 16 == 0;
  };
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && whole(l.sequence_stride, l.count) &&
         whole(l.group_stride, l.groups);
}

}  // namespace parscan::cuda_detail
