// parscan/cuda/device/scan_kernels.cuh — the grid-level kernels. Two ways to cover a batch:
//
//  * warp loop: each warp owns whole sequences and walks their tiles in order, carrying the
//    running prefix in registers. No barriers and no inter-block traffic; chosen when there
//    are enough sequences to give every resident warp its own.
//  * chained tiles: a persistent grid of blocks claims tiles from an atomic counter (so a
//    tile only ever waits on tiles already running) and takes each tile's prefix from the
//    deterministic look-back in tile_state.cuh. Chosen for fewer, longer sequences.
#pragma once

#include "../block/lane_tile_scan.cuh"
#include "../block/tile_scan.cuh"
#include "tile_state.cuh"

namespace parscan::cuda_detail {

template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads) scan_warp_loop_kernel(Problem P, Op op, index_t sequences) {
  using Acc = typename Problem::acc_type;
  using items = tile_items<Problem, Chunks>;
  constexpr index_t tile = tile_steps<Problem, 1, Chunks>;
  const index_t tiles = (P.length + tile - 1) / tile;
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < sequences; s += all_warps) {
    maybe<Acc> running = P.initial(s);
    // No prefetch of tile k+1 here: measured on an H200 it doubled the tile's registers, cut the
    // resident warps from 20 to 12 per SM and lowered the forward from 55% to 38% of copy.
    // Independent warps already overlap one another's loads and scans.
    for (index_t k = 0; k < tiles; ++k) {
      items now;
      load_tile<1, Chunks>(P, s, k, now);
      scan_tile<1, Chunks>(P, op, s, k, now, static_cast<tile_scan_smem<Acc, 1>*>(nullptr), [&](const Acc& aggregate) {
        const maybe<Acc> before = running;
        running = combine(running, maybe<Acc>{aggregate, true}, op);
        return before;
      });
    }
  }
}

/// Persistent blocks claim tiles in order from an atomic counter and prefetch the next claimed
/// tile while scanning the current one. A tile only waits on tiles with smaller indices, all
/// of which are claimed by running blocks, so the grid always makes progress.
template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_chained_kernel(Problem P, Op op, tile_state<typename Problem::acc_type> st, unsigned* tile_counter,
                        index_t tiles_per_sequence, index_t total_tiles) {
  using Acc = typename Problem::acc_type;
  using items = tile_items<Problem, Chunks>;
  __shared__ tile_scan_smem<Acc, Warps> sm;
  __shared__ unsigned claimed[2];
  auto claim = [&](int slot) {
    if (threadIdx.x == 0) claimed[slot] = atomicAdd(tile_counter, 1u);
  };
  claim(0);
  __syncthreads();
  index_t tile = claimed[0];
  items now, next;
  if (tile < total_tiles) load_tile<Warps, Chunks>(P, tile / tiles_per_sequence, tile % tiles_per_sequence, now);
  for (int slot = 1; tile < total_tiles; slot ^= 1) {
    claim(slot);
    __syncthreads();
    const index_t upcoming = claimed[slot];
    if (upcoming < total_tiles)
      load_tile<Warps, Chunks>(P, upcoming / tiles_per_sequence, upcoming % tiles_per_sequence, next);
    const index_t s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
    scan_tile<Warps, Chunks>(P, op, s, k, now, &sm, [&](const Acc& aggregate) {
      const maybe<Acc> carry = k < lookback_super ? P.initial(s) : maybe<Acc>{Acc{}, false};
      return lookback(st, tile - k, k, aggregate, carry, op);
    });
    now = next;
    tile = upcoming;
  }
}

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
    const maybe<Acc> carry = k < lookback_super && s < sequences ? P.initial(s) : maybe<Acc>{Acc{}, false};
    return lookback(st, tile - k, k, aggregate, carry, op);
  });
}

/// Sequences of length 0: their carry out is their carry in (or init), if they have one.
template <class Problem>
__global__ void empty_sequences_kernel(Problem P, index_t sequences) {
  for (index_t s = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; s < sequences;
       s += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const auto c = P.initial(s);
    if (c.has) P.finish(s, c.value);
  }
}

}  // namespace parscan::cuda_detail
