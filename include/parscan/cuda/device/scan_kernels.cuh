// parscan/cuda/device/scan_kernels.cuh — the grid-level kernels. Two ways to cover a batch:
//
//  * carry loop: a block owns whole sequences and walks their tiles in order, carrying the
//    running prefix in registers. No inter-block traffic at all; chosen when there are enough
//    sequences to fill the GPU.
//  * chained tiles: every tile is its own block; tiles get their index from an atomic counter
//    (so a tile only ever waits on tiles already running) and take their prefix from the
//    deterministic look-back in tile_state.cuh. Chosen for few long sequences.
#pragma once

#include "../block/tile_scan.cuh"
#include "tile_state.cuh"

namespace parscan::cuda_detail {

template <int Block, int Items, class Problem, class Op>
__global__ void __launch_bounds__(Block, 512 / Block) scan_carry_loop_kernel(Problem P, Op op, index_t sequences) {
  using Acc = typename Problem::acc_type;
  __shared__ tile_storage<Acc, Block, Items> sm;
  constexpr index_t tile = static_cast<index_t>(Block) * Items;
  const index_t tiles = (P.length + tile - 1) / tile;
  for (index_t s = blockIdx.x; s < sequences; s += gridDim.x) {
    maybe<Acc> running = P.initial(s);  // meaningful in warp 0, which runs the prefix callback
    for (index_t k = 0; k < tiles; ++k)
      scan_one_tile<Block, Items>(P, op, s, k, sm, [&](const Acc& aggregate) {
        const maybe<Acc> before = running;
        running = combine(running, maybe<Acc>{aggregate, true}, op);
        return before;
      });
  }
}

template <int Block, int Items, class Problem, class Op>
__global__ void __launch_bounds__(Block, 512 / Block)
    scan_chained_kernel(Problem P, Op op, tile_state<typename Problem::acc_type, 1> st, unsigned* tile_counter,
                        index_t tiles_per_sequence) {
  using Acc = typename Problem::acc_type;
  __shared__ tile_storage<Acc, Block, Items> sm;
  __shared__ index_t claimed;
  if (threadIdx.x == 0) claimed = atomicAdd(tile_counter, 1u);
  __syncthreads();
  const index_t tile = claimed;
  const index_t s = tile / tiles_per_sequence, k = tile % tiles_per_sequence, first = tile - k;
  scan_one_tile<Block, Items>(P, op, s, k, sm, [&](const Acc& aggregate) {
    st.publish_aggregate(tile, aggregate);
    const maybe<Acc> before = lookback_prefix(st, first, k, k < lookback_window ? P.initial(s) : maybe<Acc>{Acc{}, false}, op);
    if (closes_window(k)) st.publish_inclusive(tile, combine(before, maybe<Acc>{aggregate, true}, op).value);
    return before;
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
