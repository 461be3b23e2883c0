// parscan/cuda/block/block_prefix.cuh — each thread's place in an ordered scan over the threads
// of a block: what the threads before it hold, combined in one fixed order (lower thread =
// earlier), so results never depend on timing.
#pragma once

#include "tile_scan.cuh"

namespace parscan::cuda_detail {

/// The fold of v over threads 0 … t-1 for thread t (absent for thread 0), and the fold over
/// 0 … t in `inclusive`. A thread's v may be anything where no earlier thread's result is read
/// from it (threads past the last value). Threads is a multiple of 32, at most 1024; every thread
/// of the block calls it (it holds two block barriers).
template <int Threads, class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> block_exclusive_prefix(const Acc& v, const Op& op, Acc& inclusive) {
  constexpr int warps = Threads / warp_threads;
  static_assert(Threads % warp_threads == 0 && warps <= warp_threads, "a block of whole warps, at most 1024 threads");
  __shared__ tile_scan_smem<Acc, warps> sm;
  auto& st = sm.get();
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  const Acc in_warp = warp_inclusive_scan(v, op);
  if (lane == warp_threads - 1) st.warp_total[warp] = in_warp;
  __syncthreads();
  if (warp == 0) {
    const Acc warps_inclusive = warp_inclusive_scan(st.warp_total[lane < warps ? lane : 0], op);
    if (lane < warps) st.warp_prefix[lane] = maybe<Acc>{warps_inclusive, true};
  }
  __syncthreads();
  const maybe<Acc> before_warp = warp == 0 ? maybe<Acc>{Acc{}, false} : st.warp_prefix[warp - 1];
  const Acc lane_before = shfl_up(in_warp, 1);
  const maybe<Acc> before = combine(before_warp, maybe<Acc>{lane_before, lane > 0}, op);
  inclusive = before_warp.has ? op(before_warp.value, in_warp) : in_warp;
  return before;
}

}  // namespace parscan::cuda_detail
