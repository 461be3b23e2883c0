// parscan/cuda/recurrence/log_recurrence_lane_packs.cuh — the log-space forward on lane-major
// (channel-last) layouts as staged lane tiles (agent/staged_lane_tiles.cuh), in packs of K
// adjacent channels a lane as the gated recurrence's (recurrence_lane_packs.cuh): K = 2 for
// bfloat16, so that a lane stages a 4-byte word a step, and 1 for float.
//
// Without them a channel-last call ran on the plain lane tiles, whose blocks hold their steps
// in registers through the look-back: 7.2% of copy for (8, 4096, 1536) f32 on an H100, against
// 33.8% for the same call laid out (B, D, T) (docs/performance.md).
//
// Only log|a| (or a) and log|b| (or b) are staged: a step's signs are K bytes, below the 4 of
// the smallest cp.async, so calls that pass sign arrays for a or b keep the plain lane tiles
// (log_lane_packs_fit). Output signs are written byte by byte.
#pragma once

#include <cstdint>

#include "../block/lane_tile_scan.cuh"
#include "../thread/lane_packs.cuh"
#include "log_recurrence_problem.cuh"
#include "recurrence_lane_packs.cuh"

namespace parscan::cuda_detail {

/// The forward Problem (log_recurrence_problem.cuh) over packs of K channels: pack q is
/// sequences K·q … K·q+K-1. Staged lane tiles only.
template <class T, int K, bool Values>
struct log_forward_lanes : lane_pack_problem<log_recurrence_forward_problem<T, Values>, K> {
  using common = lane_pack_problem<log_recurrence_forward_problem<T, Values>, K>;
  using typename common::acc_type;
  using common::base;
  using sign = std::uint8_t;
  static constexpr bool exclusive = false;

  using common::common;

  static constexpr int staged_lane_tensors = 2;
  static constexpr int staged_lane_bytes = K * static_cast<int>(sizeof(T));
  static_assert(staged_lane_bytes == 4 || staged_lane_bytes == 8 || staged_lane_bytes == 16, "one cp.async a step");
  bool stages_lanes() const { return true; }  // log_lane_packs_fit checked the layouts and pointers

  // Pointers at a thread's first step of a tile, and each tensor's element stride from step to
  // step in processing order (the outputs share one layout). Outputs not written are null.
  struct lane_cursor {
    const T* a;
    const T* b;
    T* log_x;
    sign* x_negative;
    T* x;
    index_t da, db, dx;
  };
  __device__ PARSCAN_INLINE lane_cursor lane_at(index_t q, index_t first) const {
    const auto c = this->at(q);
    const index_t t = base.step(first), dir = base.reverse ? -1 : 1;
    const index_t sa = base.la.step_stride, sb = base.lb.step_stride, sx = base.lx.step_stride;
    const index_t ox = t * sx;
    return {c.log_a + t * sa,
            c.log_b + t * sb,
            c.log_x ? c.log_x + ox : nullptr,
            c.x_negative ? c.x_negative + ox : nullptr,
            c.x ? c.x + ox : nullptr,
            dir * sa,
            dir * sb,
            dir * sx};
  }
  __device__ PARSCAN_INLINE void stage_lane_step(const lane_cursor& c, int i, unsigned char* slot,
                                                 int tensor_stride) const {
    stage_lane_inputs<staged_lane_bytes>(c, i, slot, tensor_stride);
  }
  __device__ PARSCAN_INLINE acc_type staged_element(const unsigned char* slot, int tensor_stride) const {
    T ra[K], rb[K];
    read_lane_inputs(slot, tensor_stride, ra, rb);
    acc_type r;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      if constexpr (Values) r.v[j] = base.element(ra[j], 0, rb[j], 0);
      else r.v[j] = detail::log_affine_bits(static_cast<float>(ra[j]), false, static_cast<float>(rb[j]), false);
    }
    return r;
  }
  __device__ PARSCAN_INLINE void store_staged(const lane_cursor& c, int i, const unsigned char*, int,
                                              const acc_type& v) const {
    const index_t o = i * c.dx;
    if (c.log_x) {
      T rx[K];
#pragma unroll
      for (int j = 0; j < K; ++j) rx[j] = static_cast<T>(v.v[j].log_b);
      write_channels(c.log_x + o, rx);
    }
    if (c.x_negative) {
#pragma unroll
      for (int j = 0; j < K; ++j) c.x_negative[o + j] = v.v[j].neg_b() ? 1 : 0;
    }
    if constexpr (Values) {
      if (c.x) {
        T vx[K];
#pragma unroll
        for (int j = 0; j < K; ++j) vx[j] = static_cast<T>(detail::value_of(v.v[j].log_b, v.v[j].neg_b()));
        write_channels(c.x + o, vx);
      }
    }
  }
};

/// Whether a forward call runs as log_forward_lanes: lane-major, no sign arrays for a or b, and
/// every tensor staged or written in K-channel words keeps its groups whole and aligned.
template <int K, class T, bool Values>
bool log_lane_packs_fit(const log_recurrence_forward_problem<T, Values>& P) {
  if (!P.lane_major || P.length == 0 || P.a_negative || P.b_negative) return false;
  if (!lane_packs_fit<K>(P.la, P.log_a) || !lane_packs_fit<K>(P.lb, P.log_b)) return false;
  if (P.log_x && !lane_packs_fit<K>(P.lx, P.log_x)) return false;
  return !Values || !P.x || lane_packs_fit<K>(P.lx, P.x);
}

}  // namespace parscan::cuda_detail
