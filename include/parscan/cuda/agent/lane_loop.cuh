// parscan/cuda/agent/lane_loop.cuh — the lane loop: a block owns a group of 32 adjacent
// sequences (one per lane; lane-major layouts such as channel-last) for their whole length,
// and scans their lane tiles (block/lane_tile_scan.cuh) in order, warp 0 carrying each lane's
// running value from tile to tile. No workspace and no inter-block traffic, as the warp loop
// (warp_loop.cuh) for time-contiguous layouts; it needs enough groups to fill the device.
#pragma once

#include <type_traits>

#include "../block/lane_tile_scan.cuh"

namespace parscan::cuda_detail {

/// Group g of P's `sequences` sequences, whole, by the calling block.
template <int Warps, int Steps, class Problem, class Op>
__device__ PARSCAN_INLINE void scan_lane_group_in_block(const Problem& P, const Op& op, index_t sequences, index_t g,
                                                        lane_tile_smem<typename Problem::acc_type, Warps>& sm) {
  using Acc = typename Problem::acc_type;
  constexpr index_t tile = static_cast<index_t>(Warps) * Steps;
  const index_t s = g * warp_threads + lane_id();
  maybe<Acc> running = s < sequences ? P.initial(s) : maybe<Acc>{Acc{}, false};
  const index_t tiles = (P.length + tile - 1) / tile;
  for (index_t k = 0; k < tiles; ++k)
    scan_lane_tile<Warps, Steps>(P, op, sequences, g, k, sm, [&](const maybe<Acc>& aggregate) {
      const maybe<Acc> before = running;
      running = combine(running, aggregate, op);
      return before;
    });
  // A sequence of no steps: its carry out is its carry in.
  if (tiles == 0 && threadIdx.x < warp_threads && s < sequences && running.has) P.finish(s, running.value);
}

/// The lane loop's block: 8 warps of 16 steps per thread, 128-step tiles. (The f32 channel-last
/// forward at (8, 4096, 1536) on an H100: 88.3% of copy with 16 steps, 69.0% with 32, against
/// 51% for the staged lane tiles in the same run.)
constexpr int lane_loop_warps = 8;
constexpr int lane_loop_steps = 16;

/// Whether Problem has the lane tiles' unstaged interface that the lane loop reads and writes
/// through (block/lane_tile_scan.cuh: load_at, store_at); some lane Problems have only the
/// staged lane tiles' (agent/staged_lane_tiles.cuh).
template <class Problem, class = void>
constexpr bool has_lane_loop = false;
template <class Problem>
constexpr bool has_lane_loop<Problem, std::void_t<decltype(&Problem::load_at), decltype(&Problem::store_at)>> = true;

/// Block b takes groups b, b + grid, ... of 32 sequences.
template <int Warps, int Steps, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads) scan_lane_loop_kernel(Problem P, Op op, index_t sequences) {
  __shared__ lane_tile_smem<typename Problem::acc_type, Warps> sm;
  const index_t groups = (sequences + warp_threads - 1) / warp_threads;
  for (index_t g = blockIdx.x; g < groups; g += gridDim.x) scan_lane_group_in_block<Warps, Steps>(P, op, sequences, g, sm);
}

}  // namespace parscan::cuda_detail
