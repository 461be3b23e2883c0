// parscan/cuda/generic/generic_lane_packs.cuh — the generic scans and reduces on lane-major
// (channel-last) layouts, each lane owning K adjacent sequences whose elements of one step it
// reads and writes with one vector access.
//
// With one sequence a lane (generic_problem's own lane interface) a warp moves 128 bytes of
// 4-byte elements per instruction, and the staged lane tiles spend their per-step addressing,
// ring and loop instructions on one element: the channel-last float sum (8, 4096, 1024) ran at
// 58% of copy on an H100 (docs/performance.md, "Lane packs for the generic channel-last
// scans"). As the gated
// recurrence's lane packs do (recurrence/recurrence_lane_packs.cuh), a pack's accumulator is K
// accumulators side by side and the operator acts on each on its own (lanewise_op), so the
// staged lane tiles and their look-back run unchanged over sequences/K "sequences" of wider
// elements. (Their tiles hold fewer steps than with one sequence a lane, so a
// floating-point result may differ in the last bits from a call that cannot take packs.)
#pragma once

#include <cstdint>
#include <type_traits>

#include "../device/dispatch_scan.cuh"
#include "../thread/lane_packs.cuh"
#include "generic_chunks.cuh"
#include "generic_problem.cuh"

namespace parscan::cuda_detail {

/// Sequences a lane owns for Problem: two of raw pointer elements of 4 bytes (the output, when
/// written, of the same size), so a lane's step is one 8-byte access; else 1 (no packs). On an
/// H100 (bench_tuning --channel-last, float sum (8, 4096, D), D = 512 … 2048) packs of two ran
/// scans at 64–68% of copy against 55–60% with one sequence a lane, and reduces 1.2–1.3×
/// faster; packs of four (16-byte accesses, whose ring holds 8 steps a thread instead of 16)
/// fell between. 8-byte elements keep one sequence a lane: their packs were not measured.
template <class Problem, class = void>
constexpr int generic_lane_pack_width = 1;
template <class Problem>
constexpr int generic_lane_pack_width<Problem, std::enable_if_t<Problem::pointer_in && Problem::pointer_out>> =
    sizeof(typename Problem::in_value) == 4 && sizeof(typename Problem::out_value) == 4 ? 2 : 1;

/// The generic Problem over packs of K sequences: pack q is sequences K·q … K·q+K-1.
template <class Problem, int K>
struct generic_lane_packs {
  using base_type = Problem;
  using in_value = typename Problem::in_value;
  using out_value = typename Problem::out_value;
  using acc_type = lane_pack<typename Problem::acc_type, K>;
  using cursor = typename Problem::cursor;
  Problem base;
  index_t length;
  bool exclusive;

  explicit generic_lane_packs(const Problem& P) : base(P), length(P.length), exclusive(P.exclusive) {}

  __device__ PARSCAN_INLINE cursor at(index_t q) const { return base.at(q * K); }
  /// A carry in or an init is there for every sequence or for none.
  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t q) const {
    acc_type r;
    bool has = false;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const auto c = base.initial(q * K + j);
      r.v[j] = c.value;
      has = c.has;
    }
    return {r, has};
  }
  __device__ PARSCAN_INLINE void finish(index_t q, const acc_type& total) const {
#pragma unroll
    for (int j = 0; j < K; ++j) base.finish(q * K + j, total.v[j]);
  }
  __device__ PARSCAN_INLINE acc_type load_at(const cursor& c, index_t pos) const {
    in_value raw[K];
    read_channels(c.in + base.step(pos) * base.in_layout.step_stride, raw);
    return converted(raw);
  }
  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t pos, const acc_type& v) const {
    if (!c.out) return;  // a reduce
    out_value raw[K];
#pragma unroll
    for (int j = 0; j < K; ++j) raw[j] = static_cast<out_value>(v.v[j]);
    write_channels(c.out + base.step(pos) * base.out_layout.step_stride, raw);
  }

  // Staged lane tiles (agent/staged_lane_tiles.cuh): the pack's K elements of a step.
  static constexpr int staged_lane_tensors = 1;
  static constexpr int staged_lane_bytes = K * static_cast<int>(sizeof(in_value));
  bool stages_lanes() const { return true; }  // generic_lane_packs_fit checked the alignment
  struct lane_cursor {
    cursor c;
    index_t first;
    const in_value* in;
    index_t d_in;
  };
  __device__ PARSCAN_INLINE lane_cursor lane_at(index_t q, index_t first) const {
    const cursor c = at(q);
    const index_t stride = base.in_layout.step_stride;
    return {c, first, c.in + base.step(first) * stride, (base.reverse ? -1 : 1) * stride};
  }
  __device__ PARSCAN_INLINE void stage_lane_step(const lane_cursor& c, int i, unsigned char* slot, int) const {
    stage_bytes<staged_lane_bytes>(slot, c.in + i * c.d_in);
  }
  __device__ PARSCAN_INLINE acc_type staged_element(const unsigned char* slot, int) const {
    in_value raw[K];
    read_staged_bytes(slot, 1, raw);
    return converted(raw);
  }
  __device__ PARSCAN_INLINE void store_staged(const lane_cursor& c, int i, const unsigned char*, int,
                                              const acc_type& v) const {
    store_at(c.c, c.first + i, v);
  }

 private:
  __device__ PARSCAN_INLINE acc_type converted(const in_value (&raw)[K]) const {
    acc_type r;
#pragma unroll
    for (int j = 0; j < K; ++j) r.v[j] = static_cast<typename Problem::acc_type>(raw[j]);
    return r;
  }
};

/// Whether P's sequences run as packs of K: lane-major input (and output, when written) whose
/// K-sequence groups are whole and aligned to K elements.
template <int K, class Problem>
bool generic_lane_packs_fit(const Problem& P) {
  if (!P.lane_major || !lane_packs_fit<K>(P.in_layout, P.in)) return false;
  return P.out == nullptr || lane_packs_fit<K>(P.out_layout, P.out);
}

/// Workspace bytes of Problem over `sequences` × `length` steps, in packs or not.
template <class Problem>
std::size_t generic_workspace_bytes(index_t sequences, index_t length) {
  std::size_t bytes = scan_workspace_bytes<Problem>(sequences, length);
  constexpr int K = generic_lane_pack_width<Problem>;
  if constexpr (K > 1) {
    const std::size_t packed = lane_tile_workspace_bytes<generic_lane_packs<Problem, K>>(sequences / K, length);
    if (packed > bytes) bytes = packed;
  }
  return bytes;
}

/// Runs a validated generic Problem: channel-last batches of 4- or 8-byte elements in the chunk
/// loop where they fill the device (generic_chunks.cuh), else in lane packs where they fit,
/// else as dispatch_scan does.
template <class Problem, class Op>
status dispatch_generic(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  bool taken = false;
  if (status s = run_generic_chunks(P, op, be, &taken); taken || s != status::success) return s;
  constexpr int K = generic_lane_pack_width<Problem>;
  if constexpr (K > 1) {
    if (generic_lane_packs_fit<K>(P))
      return dispatch_lane_tiles(generic_lane_packs<Problem, K>(P), lanewise_op<Op, K>{op}, sequences / K, be);
  }
  return dispatch_scan(P, op, sequences, be);
}

}  // namespace parscan::cuda_detail
