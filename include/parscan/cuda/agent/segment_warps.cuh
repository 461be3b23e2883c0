// parscan/cuda/agent/segment_warps.cuh — the segments of a packed array (segmented_scan.hpp),
// one warp each: the warp reads its segment's offsets, narrows the Problem to the segment, and
// runs the warp loop's scan of one whole sequence (warp_loop.cuh) over it. No workspace, no
// barriers, no inter-block traffic; a segment's elements are combined in the same order as one
// sequence of its length in the warp loop.
//
// A segment starts wherever its offset puts it, so its runs of 16 bytes are mostly misaligned,
// and misaligned runs are read and written an element at a time. So lane 0 first steps through
// the few elements (fewer than a run) before the first 16-byte boundary in processing order,
// and the warp loop takes the rest from there, aligned, so its runs can be staged whole.
//
// One warp per segment suits many short and medium segments (the benchmark's 10^5 segments of
// 2^28 elements); a single very long segment runs on one warp, at a warp's speed.
#pragma once

#include <cstdint>

#include "../thread/step_scan.cuh"
#include "warp_loop.cuh"

namespace parscan::cuda_detail {

/// Stages > 0: the warp keeps its segment's next Stages-1 tiles in flight (staging_ring), as
/// the batched warp loop does (without, the segmented float sum ran at 47% of copy on an H100).
/// Segment s of P is P narrowed to elements [offsets[s], offsets[s+1]) (Problem::segment), its
/// carries at s. A segment of no elements passes its carry in (or init) to its carry out.
template <int Warps, int Chunks, int Stages, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_segments_kernel(Problem P, Op op, const std::int64_t* offsets, index_t segments) {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < segments; s += all_warps) {
    using Acc = typename Problem::acc_type;
    const index_t begin = offsets[s], length = offsets[s + 1] - begin;
    const Problem segment = P.segment(begin, length);
    maybe<Acc> running = segment.initial(s);
    const index_t head = segment.misaligned_head() < length ? segment.misaligned_head() : length;
    if (head > 0) {
      if (lane_id() == 0) scan_steps_in_thread(segment, op, segment.at(s), 0, head, running);
      running = {shfl_idx(running.value, 0), shfl_idx(static_cast<int>(running.has), 0) != 0};
    }
    // The rest: after the head in processing order (before it in memory, reversed).
    if (length > head) {
      const Problem rest = segment.segment(segment.reverse ? 0 : head, length - head);
      if constexpr (Stages > 0)
        scan_sequence_in_warp_staged<Chunks, Stages>(rest, op, s, staging_ring<Warps, Chunks, Stages, Problem>{dynamic_smem},
                                                     running);
      else
        scan_sequence_in_warp<Chunks>(rest, op, s, running);
    } else if (lane_id() == 0 && running.has) {
      segment.finish(s, running.value);
    }
  }
}

}  // namespace parscan::cuda_detail
