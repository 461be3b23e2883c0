// parscan/cuda/device/scan_kernels.cuh — the grid-level kernels. Two ways to cover a batch:
//
//  * warp loop: each warp owns whole sequences and walks their tiles in order, carrying the
//    running prefix in registers. No barriers and no inter-block traffic; chosen when there
//    are enough sequences to give every resident warp its own.
//  * chained tiles: every tile is a block; tiles take their index from an atomic counter (so
//    a tile only ever waits on tiles already running) and their prefix from the
//    deterministic look-back in tile_state.cuh. Chosen for fewer, longer sequences.
#pragma once

#include "../block/tile_scan.cuh"
#include "tile_state.cuh"

namespace parscan::cuda_detail {

template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads) scan_warp_loop_kernel(Problem P, Op op, index_t sequences) {
  using Acc = typename Problem::acc_type;
  constexpr index_t tile = tile_steps<Problem, 1, Chunks>;
  const index_t tiles = (P.length + tile - 1) / tile;
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < sequences; s += all_warps) {
    maybe<Acc> running = P.initial(s);
    for (index_t k = 0; k < tiles; ++k)
      scan_tile<1, Chunks>(P, op, s, k, static_cast<tile_scan_smem<Acc, 1>*>(nullptr), [&](const Acc& aggregate) {
        const maybe<Acc> before = running;
        running = combine(running, maybe<Acc>{aggregate, true}, op);
        return before;
      });
  }
}

template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_chained_kernel(Problem P, Op op, tile_state<typename Problem::acc_type, 1> st, unsigned* tile_counter,
                        index_t tiles_per_sequence) {
  using Acc = typename Problem::acc_type;
  __shared__ tile_scan_smem<Acc, Warps> sm;
  __shared__ unsigned claimed;
  if (threadIdx.x == 0) claimed = atomicAdd(tile_counter, 1u);
  __syncthreads();
  const index_t tile = claimed;
  const index_t s = tile / tiles_per_sequence, k = tile % tiles_per_sequence, first = tile - k;
  scan_tile<Warps, Chunks>(P, op, s, k, &sm, [&](const Acc& aggregate) {
    st.publish_aggregate(tile, aggregate);
    const maybe<Acc> none{Acc{}, false};
    const maybe<Acc> before = lookback_prefix(st, first, k, k < lookback_window ? P.initial(s) : none, op);
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
