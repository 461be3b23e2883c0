// parscan/cuda/agent/tagged_record.cuh — a value published by one block and polled by others
// (the look-backs' records), without a separate flag: each 4-byte word of the value travels in
// an 8-byte word whose upper half is a nonzero tag, stored and loaded as one relaxed atomic.
// A reader that finds every word with the same tag has the whole value, in one L2 round trip,
// for a value of any size (an affine pair, a 12-byte struct, a small matrix). The words must be
// zeroed before the first store.
#pragma once

#include <cstring>
#include <type_traits>

#include <cuda/atomic>

#include "../../config.hpp"

namespace parscan::cuda_detail {

template <class Acc>
struct tagged_record {
  using word = unsigned long long;
  static_assert(std::is_trivially_copyable_v<Acc>, "scan values must be trivially copyable");
  static constexpr int words = static_cast<int>((sizeof(Acc) + 3) / 4);

  /// Publishes v at r (`words` words) with `tag` (nonzero).
  __device__ static PARSCAN_INLINE void store(word* r, const Acc& v, unsigned tag) {
    unsigned w[words] = {};
    memcpy(w, &v, sizeof(Acc));
#pragma unroll
    for (int i = 0; i < words; ++i)
      cuda::atomic_ref<word, cuda::thread_scope_device>(r[i]).store((word(tag) << 32) | w[i], cuda::memory_order_relaxed);
  }
  /// One poll: the tag every word carries, with the value, or 0 while any word is missing or
  /// the words disagree (a store of another tag half done).
  __device__ static PARSCAN_INLINE unsigned try_load(word* r, Acc& v) {
    unsigned w[words];
    unsigned tag = 0;
#pragma unroll
    for (int i = 0; i < words; ++i) {
      const word x = cuda::atomic_ref<word, cuda::thread_scope_device>(r[i]).load(cuda::memory_order_relaxed);
      const unsigned t = static_cast<unsigned>(x >> 32);
      tag = i == 0 ? t : (tag == t ? tag : 0u);
      w[i] = static_cast<unsigned>(x);
    }
    if (tag != 0) memcpy(&v, w, sizeof(Acc));
    return tag;
  }
};

}  // namespace parscan::cuda_detail
