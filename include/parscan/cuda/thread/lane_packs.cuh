// parscan/cuda/thread/lane_packs.cuh — a lane's K adjacent sequences of a lane-major
// (channel-last) layout: their accumulators side by side, an operator applied to each on its
// own, and their K elements of one step read or written with one K·sizeof(T)-byte access. The
// gated recurrence's lane packs (recurrence/recurrence_lane_packs.cuh) and the generic ones
// (generic/generic_lane_packs.cuh) are built on these.
#pragma once

#include <cstddef>
#include <cstring>

#include "../../config.hpp"
#include "run_io.cuh"

namespace parscan::cuda_detail {

/// The accumulators of the K sequences a lane owns, aligned for one vector access where the
/// size allows (the look-back reads and writes them in the tile state).
template <class Acc, int K>
constexpr std::size_t lane_pack_alignment =
    (sizeof(Acc) * K == 8 || sizeof(Acc) * K == 16) ? sizeof(Acc) * K : alignof(Acc);
template <class Acc, int K>
struct alignas(lane_pack_alignment<Acc, K>) lane_pack {
  Acc v[K];
};

/// Op applied to each sequence of a lane_pack on its own.
template <class Op, int K>
struct lanewise_op {
  Op op;
  template <class Acc>
  __device__ PARSCAN_INLINE lane_pack<Acc, K> operator()(const lane_pack<Acc, K>& earlier,
                                                          const lane_pack<Acc, K>& later) const {
    lane_pack<Acc, K> r;
#pragma unroll
    for (int j = 0; j < K; ++j) r.v[j] = op(earlier.v[j], later.v[j]);
    return r;
  }
};

/// out[j] = p[j] for the K channels at p, in one aligned vector access. Copied out of a local
/// word (as run_io.cuh does) so the load stays one ld.global, not K·sizeof(T) byte loads.
template <int K, class T>
__device__ PARSCAN_INLINE void read_channels(const T* p, T (&out)[K]) {
  using W = typename vector_word<sizeof(T) * K>::type;
  const W w = *reinterpret_cast<const W*>(p);
  T tmp[K];
  memcpy(tmp, &w, sizeof(W));
#pragma unroll
  for (int j = 0; j < K; ++j) out[j] = tmp[j];
}

/// p[j] = in[j] for the K channels at p, in one aligned vector access.
template <int K, class T>
__device__ PARSCAN_INLINE void write_channels(T* p, const T (&in)[K]) {
  using W = typename vector_word<sizeof(T) * K>::type;
  T tmp[K];
#pragma unroll
  for (int j = 0; j < K; ++j) tmp[j] = in[j];
  W w;
  memcpy(&w, tmp, sizeof(W));
  *reinterpret_cast<W*>(p) = w;
}

}  // namespace parscan::cuda_detail
