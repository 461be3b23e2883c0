// parscan/cuda/warp/warp_shuffle.cuh — warp shuffles for any trivially copyable type, and the
// two warp-wide combines the scans build on. Both keep a fixed combination order, so results
// never depend on timing: the library is deterministic run to run.
#pragma once

#include <cstring>
#include <type_traits>

#include "../../config.hpp"

namespace parscan::cuda_detail {

constexpr unsigned full_mask = 0xffffffffu;
constexpr int warp_threads = 32;

template <class T>
struct shuffle_words {
  static_assert(std::is_trivially_copyable_v<T>, "scan values must be trivially copyable");
  static constexpr int count = (sizeof(T) + 3) / 4;
  unsigned w[count];
};

template <class T, class Shuffle>
__device__ PARSCAN_INLINE T shuffle_with(const T& v, Shuffle shuffle) {
  shuffle_words<T> in{}, out;
  memcpy(&in, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < shuffle_words<T>::count; ++i) out.w[i] = shuffle(in.w[i]);
  T r;
  memcpy(&r, &out, sizeof(T));
  return r;
}

// `width` (a power of two up to 32) splits the warp into independent segments of that many
// lanes, as the CUDA intrinsics do; the default is the whole warp.
template <class T>
__device__ PARSCAN_INLINE T shfl_up(const T& v, int delta, int width = warp_threads) {
  return shuffle_with(v, [delta, width](unsigned w) { return __shfl_up_sync(full_mask, w, delta, width); });
}
template <class T>
__device__ PARSCAN_INLINE T shfl_down(const T& v, int delta) {
  return shuffle_with(v, [delta](unsigned w) { return __shfl_down_sync(full_mask, w, delta); });
}
template <class T>
__device__ PARSCAN_INLINE T shfl_idx(const T& v, int lane, int width = warp_threads) {
  return shuffle_with(v, [lane, width](unsigned w) { return __shfl_sync(full_mask, w, lane, width); });
}

__device__ PARSCAN_INLINE int lane_id() { return static_cast<int>(threadIdx.x) & (warp_threads - 1); }

/// Inclusive scan across the 32 lanes: lane i gets v_0 ⊕ … ⊕ v_i (lower lane = earlier). With
/// Lanes < 32, each segment of Lanes lanes scans on its own.
template <int Lanes = warp_threads, class T, class Op>
__device__ PARSCAN_INLINE T warp_inclusive_scan(T v, const Op& op) {
  const int lane = lane_id() & (Lanes - 1);
#pragma unroll
  for (int d = 1; d < Lanes; d *= 2) {
    const T other = shfl_up(v, d, Lanes);
    if (lane >= d) v = op(other, v);
  }
  return v;
}

/// v_0 ⊕ v_1 ⊕ … ⊕ v_{n-1} over lanes 0..n-1 (n ≥ 1), in one fixed tree order; the result is
/// valid in lane 0. Lanes ≥ n take part in the shuffles but contribute nothing.
template <class T, class Op>
__device__ PARSCAN_INLINE T warp_ordered_reduce(T v, int n, const Op& op) {
  const int lane = lane_id();
#pragma unroll
  for (int d = 1; d < warp_threads; d *= 2) {
    const T later = shfl_down(v, d);
    if ((lane & (2 * d - 1)) == 0 && lane + d < n) v = op(v, later);
  }
  return v;
}

/// A value that may be absent: the generic algorithms never assume an identity, so "no
/// prefix yet" is carried explicitly.
template <class T>
struct maybe {
  T value;
  bool has;
};

template <class T, class Op>
__device__ PARSCAN_INLINE maybe<T> combine(const maybe<T>& earlier, const maybe<T>& later, const Op& op) {
  if (!earlier.has) return later;
  if (!later.has) return earlier;
  return {op(earlier.value, later.value), true};
}

}  // namespace parscan::cuda_detail
