// parscan/cuda/agent/segment_warps.cuh — the segments of a packed array (segmented_scan.hpp),
// one warp each: the warp reads its segment's offsets, narrows the Problem to the segment, and
// runs the warp loop's scan of one whole sequence (warp_loop.cuh) over it. No workspace, no
// barriers, no inter-block traffic; a segment's elements are combined in the same order as one
// sequence of its length in the warp loop.
//
// One warp per segment suits many short and medium segments (the benchmark's 10^5 segments of
// 2^28 elements); a single very long segment runs on one warp, at a warp's speed.
#pragma once

#include <cstdint>

#include "warp_loop.cuh"

namespace parscan::cuda_detail {

/// Segment s of P is P narrowed to elements [offsets[s], offsets[s+1]) (Problem::segment), its
/// carries at s. A segment of no elements passes its carry in (or init) to its carry out.
template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_segments_kernel(Problem P, Op op, const std::int64_t* offsets, index_t segments) {
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < segments; s += all_warps) {
    const index_t begin = offsets[s], length = offsets[s + 1] - begin;
    const Problem segment = P.segment(begin, length);
    if (length > 0) {
      scan_sequence_in_warp<Chunks>(segment, op, s);
    } else if (lane_id() == 0) {
      const auto c = segment.initial(s);
      if (c.has) segment.finish(s, c.value);
    }
  }
}

}  // namespace parscan::cuda_detail
