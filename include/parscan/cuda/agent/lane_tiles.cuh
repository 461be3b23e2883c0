// parscan/cuda/agent/lane_tiles.cuh — lane tiles, for channel-last batches: 32 adjacent
// sequences per tile, each lane with its own deterministic look-back (tile_state.cuh).
#pragma once

#include "../block/lane_tile_scan.cuh"
#include "tile_state.cuh"

namespace parscan::cuda_detail {

/// Lane tiles (32 adjacent sequences × Warps·Steps steps), one per block, in counter order,
/// each lane with its own deterministic look-back.
template <int Warps, int Steps, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_lane_chained_kernel(Problem P, Op op, tile_state<typename Problem::acc_type, warp_threads> st,
                             unsigned* tile_counter, index_t tiles_per_group, index_t sequences) {
  using Acc = typename Problem::acc_type;
  __shared__ lane_tile_smem<Acc, Warps> sm;
  __shared__ unsigned claimed;
  if (threadIdx.x == 0) claimed = atomicAdd(tile_counter, 1u);
  __syncthreads();
  const index_t tile = claimed, g = tile / tiles_per_group, k = tile % tiles_per_group;
  scan_lane_tile<Warps, Steps>(P, op, sequences, g, k, sm, [&](const maybe<Acc>& aggregate) {
    const index_t s = g * warp_threads + lane_id();
    const maybe<Acc> carry = k < lookback_hyper && s < sequences ? P.initial(s) : maybe<Acc>{Acc{}, false};
    return lookback(st, tile - k, k, aggregate, carry, op);
  });
}

}  // namespace parscan::cuda_detail
