// parscan/cuda/segmented_scan.cuh — the CUDA backend of parscan/segmented_scan.hpp. Include
// from a .cu file (header-only, like cuda/scan.cuh). Asynchronous and ordered on
// backend.stream; needs no workspace. The offsets are read on the device only (see
// segmented_scan.hpp for what is checked). Results are deterministic: each segment is combined
// in one fixed order.
#pragma once

#include "../segmented_scan.hpp"
#include "agent/segment_warps.cuh"
#include "device/dispatch_scan.cuh"
#include "generic/generic_problem.cuh"

namespace parscan {

namespace cuda_detail {

/// Warps per block of the segment kernel; accumulators per lane and staged tiles as the warp
/// loop of the batched scans has them (tile_shape).
constexpr int segment_block_warps = 4;

template <class Problem, class Op>
status launch_segments(const Problem& P, const Op& op, const std::int64_t* offsets, index_t segments,
                       const cuda_backend& be) {
  using shape = tile_shape<Problem>;
  constexpr int threads = segment_block_warps * warp_threads;
  const index_t blocks = (segments + segment_block_warps - 1) / segment_block_warps;
  constexpr auto kernel = scan_segments_kernel<segment_block_warps, shape::chunks, shape::loop_stages, Problem, Op>;
  constexpr int smem = [] {
    if constexpr (shape::loop_stages > 0)
      return staging_ring<segment_block_warps, shape::chunks, shape::loop_stages, Problem>::bytes;
    else
      return 0;
  }();
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  if (blocks_per_multiprocessor<kernel>(threads, dev.device, smem) <= 0) return status::exceeds_device_limits;
  return launch(kernel, blocks, threads, smem, be, P, op, offsets, segments);
}

}  // namespace cuda_detail

/// CUDA backend's full form of the segmented algorithms (see parscan/segmented_scan.hpp).
template <class In, class Out, class Acc, class Op>
status run_segmented_scan(const cuda_backend& be, const segmented_problem<In, Out, Acc>& p, const Op& op) {
  if (status s = detail::validate(p); s != status::success) return s;
  if (p.seg.count == 0) return status::success;
  // The problem of segment 0 at offset 0 and length 0: the kernel narrows it to each segment.
  const auto P = cuda_detail::generic_problem<In, Out, Acc>::from(p.segment(0, 0, 0));
  return cuda_detail::launch_segments(P, op, p.seg.offsets, p.seg.count, be);
}

}  // namespace parscan
