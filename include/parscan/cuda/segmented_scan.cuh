// parscan/cuda/segmented_scan.cuh — the CUDA backend of parscan/segmented_scan.hpp. Include
// from a .cu file (header-only, like cuda/scan.cuh). Asynchronous and ordered on
// backend.stream; needs no workspace. The offsets are read on the device only (see
// segmented_scan.hpp for what is checked). Results are deterministic: each segment is combined
// in one fixed order.
#pragma once

#include <type_traits>

#include "../segmented_scan.hpp"
#include "agent/segment_warps.cuh"
#include "device/dispatch_scan.cuh"
#include "generic/generic_problem.cuh"

namespace parscan {

namespace cuda_detail {

/// The segment kernel's shape: blocks of one warp, three staged tiles a warp, runs a lane as
/// the warp loop of the batched scans has them (tile_shape). A block lives as long as its
/// longest segment, so with four warps a block (the batched loop's) the warps of short segments
/// idled beside a long one: the float sum over 10^5 random segments ran at 78.6–78.8% of copy,
/// at 81.6–82.0% in blocks of one warp, 83.6–84.2% with a third stage (bench_varlen
/// --segment-shapes, H200; docs/performance.md).
constexpr int segment_block_warps = 1;
constexpr int segment_stages = 3;

/// The segment kernel in blocks of BlockWarps warps, tiles of Chunks runs a lane, Stages staged
/// tiles a warp (0: none); launch_segments takes the library's shape, benchmarks/bench_varlen.cu
/// --segment-shapes others.
template <int BlockWarps, int Stages, int Chunks, class Problem, class Op>
status launch_segments_shaped(const Problem& P, const Op& op, const std::int64_t* offsets, index_t segments,
                              const cuda_backend& be) {
  constexpr int stages = has_staging<Problem> ? Stages : 0;
  constexpr int threads = BlockWarps * warp_threads;
  const index_t blocks = (segments + BlockWarps - 1) / BlockWarps;
  constexpr auto kernel = scan_segments_kernel<BlockWarps, Chunks, stages, Problem, Op>;
  constexpr int smem = [] {
    if constexpr (stages > 0)
      return staging_ring<BlockWarps, Chunks, stages, Problem>::bytes;
    else
      return 0;
  }();
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  if (blocks_per_multiprocessor<kernel>(threads, dev.device, smem) <= 0) return status::exceeds_device_limits;
  return launch(kernel, blocks, threads, smem, be, P, op, offsets, segments);
}

template <class Problem, class Op>
status launch_segments(const Problem& P, const Op& op, const std::int64_t* offsets, index_t segments,
                       const cuda_backend& be) {
  return launch_segments_shaped<segment_block_warps, segment_stages, tile_shape<Problem>::chunks>(P, op, offsets,
                                                                                                 segments, be);
}

}  // namespace cuda_detail

/// CUDA backend's full form of the segmented algorithms (see parscan/segmented_scan.hpp).
template <class In, class Out, class Acc, class Op>
status run_segmented_scan(const cuda_backend& be, const segmented_problem<In, Out, Acc>& p, const Op& op) {
  if (status s = detail::validate(p); s != status::success) return s;
  if (p.seg.count == 0) return status::success;
  // The vector path: one element type of 4, 8 or 16 bytes throughout, the input aligned to its
  // element and the output to the input modulo 16 bytes (so both cross 16-byte boundaries at the
  // same elements). Everything else takes the general segment kernel.
  if constexpr (std::is_same_v<In, Acc> && std::is_same_v<Out, Acc> && cuda_detail::vector_element<Acc>) {
    if (cuda_detail::vectors_align(p.in, p.out)) {
      const cuda_detail::segment_vectors<Acc> P{p.in,         p.out,
                                                p.opts.carry_in, p.opts.carry_out,
                                                p.init,         p.has_init,
                                                p.kind == scan_kind::exclusive, p.opts.dir == direction::reverse};
      return cuda_detail::launch_segment_vectors(P, op, cuda_detail::packed_segment_places{p.seg.offsets}, p.seg.count,
                                                 be);
    }
  }
  // The problem of segment 0 at offset 0 and length 0: the kernel narrows it to each segment.
  const auto P = cuda_detail::generic_problem<In, Out, Acc>::from(p.segment(0, 0, 0));
  return cuda_detail::launch_segments(P, op, p.seg.offsets, p.seg.count, be);
}

}  // namespace parscan
