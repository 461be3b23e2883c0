// parscan/cuda/block/blocked_tile_scan.cuh — one tile of one sequence in blocked order: each
// lane holds R·V consecutive steps (read from the staging ring, agent/staging_ring.cuh), so one
// warp scan serves all of them.
//
// The striped tiles of tile_scan.cuh give a lane V steps per chunk and run one warp scan per
// chunk: for 4-byte sums about 30 instructions per 4 steps, which held the persistent staged
// window chain issue-bound at 58% of copy on an H100 (docs/performance.md). Here a lane's 16
// steps cost a fold, one warp scan and one pass adding the prefix: about 6 instructions a step.
// The tile's layout in memory is the same (Warps segments of R·32 runs of V steps); only which
// lane holds which run differs, so the staging ring swizzles its slots to read them without
// bank conflicts, and writes the results back through shared memory for coalesced stores.
//
// Steps at or past the sequence's end are folded like the others (they hold whatever the ring
// holds there): they change only the scan at or past the end, which is never stored, and the
// aggregate of the sequence's last tile, which no tile reads. The carry out is taken at the
// last step itself.
#pragma once

#include <type_traits>

#include "tile_scan.cuh"

namespace parscan::cuda_detail {

/// A lane's steps of a blocked tile: run i holds steps first + i·V … first + i·V + V-1, with
/// first = segment start + lane·R·V.
template <class Problem, int R>
struct blocked_items {
  typename Problem::acc_type v[R][Problem::run];
};

template <int R, class Problem>
__device__ PARSCAN_INLINE index_t blocked_lane_first(index_t segment) {
  return segment + static_cast<index_t>(lane_id()) * (R * Problem::run);
}

/// The fold of a lane's steps, in order.
template <int R, class Problem, class Op>
__device__ PARSCAN_INLINE typename Problem::acc_type fold_blocked_lane(const Op& op, const blocked_items<Problem, R>& items) {
  auto fold = items.v[0][0];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int v = i == 0 ? 1 : 0; v < Problem::run; ++v) fold = op(fold, items.v[i][v]);
  return fold;
}

/// The inclusive scan of the lanes' folds across the warp: what a lane's steps and the lanes
/// before it add up to (lane 31: the warp's total).
template <int R, class Problem, class Op>
__device__ PARSCAN_INLINE typename Problem::acc_type blocked_lane_inclusive(const Op& op,
                                                                            const blocked_items<Problem, R>& items) {
  return warp_inclusive_scan(fold_blocked_lane<R, Problem>(op, items), op);
}

/// Scans a lane's steps of tile k of sequence s in place (inclusive or exclusive, as P says),
/// given the warp's prefix and blocked_lane_inclusive of the same items, and reports the
/// sequence's total to P.finish at its last step.
template <int Warps, int R, class Problem, class Op>
__device__ PARSCAN_INLINE void scan_blocked_lane(const Problem& P, const Op& op, index_t s, index_t k,
                                                 blocked_items<Problem, R>& items,
                                                 const typename Problem::acc_type& lane_inclusive,
                                                 const maybe<typename Problem::acc_type>& warp_prefix) {
  using Acc = typename Problem::acc_type;
  constexpr int V = Problem::run;
  constexpr int steps = R * V;
  const Acc lane_before = shfl_up(lane_inclusive, 1);
  const maybe<Acc> lane_prefix =
      lane_id() == 0 ? warp_prefix : combine(warp_prefix, maybe<Acc>{lane_before, true}, op);
  const index_t first = blocked_lane_first<R, Problem>(segment_start<Warps, R, Problem>(k));
  const index_t left = P.length - first;  // steps of this lane inside the sequence
  // Checked compares each step with the sequence's end, which only the lane holding it needs.
  auto scan = [&](auto exclusive, auto checked) {
    Acc r = lane_prefix.value;
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const Acc x = items.v[i][v];
        if constexpr (decltype(exclusive)::value) items.v[i][v] = r;
        r = (i == 0 && v == 0 && !lane_prefix.has) ? x : op(r, x);
        if constexpr (!decltype(exclusive)::value) items.v[i][v] = r;
        if constexpr (decltype(checked)::value)
          if (i * V + v == left - 1) P.finish(s, r);
      }
    if constexpr (!decltype(checked)::value)
      if (left == steps) P.finish(s, r);
  };
  using yes = std::true_type;
  using no = std::false_type;
  if (left >= steps) {
    if (P.exclusive) scan(yes{}, no{});
    else scan(no{}, no{});
  } else {
    if (P.exclusive) scan(yes{}, yes{});
    else scan(no{}, yes{});
  }
}

}  // namespace parscan::cuda_detail
