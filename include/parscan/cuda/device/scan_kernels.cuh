// parscan/cuda/device/scan_kernels.cuh — the grid-level kernels. Two ways to cover a batch:
//
//  * warp loop: each warp owns whole sequences and walks their tiles in order, carrying the
//    running prefix in registers. No barriers and no inter-block traffic; chosen when there
//    are enough sequences to give every resident warp its own.
//  * chained tiles: a persistent grid of blocks claims tiles from an atomic counter (so a
//    tile only ever waits on tiles already running) and takes each tile's prefix from the
//    deterministic look-back in tile_state.cuh. Chosen for fewer, longer sequences.
#pragma once

#include <type_traits>

#include "../block/lane_tile_scan.cuh"
#include "../thread/run_io.cuh"
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

/// Whether a Problem can stage its runs through shared memory (stage_run / load_staged).
template <class Problem, class = void>
constexpr bool has_staging = false;
template <class Problem>
constexpr bool has_staging<Problem, std::void_t<decltype(Problem::staged_tensors)>> = true;

/// The warp loop with the next Stages-1 tiles copied into shared memory by cp.async while the
/// current one is scanned, so loads stay in flight without costing registers. Each lane reads
/// back only what it copied itself, so no barrier is needed. Experimental: used only when a
/// tile shape asks for it (benchmarks/bench_tuning.cu), not by the library's default shape.
template <int Warps, int Chunks, int Stages, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_warp_loop_staged_kernel(Problem P, Op op, index_t sequences) {
  using Acc = typename Problem::acc_type;
  using items = tile_items<Problem, Chunks>;
  constexpr int V = Problem::run;
  constexpr index_t chunk = static_cast<index_t>(warp_threads) * V;
  constexpr int tensor_stride = warp_threads * 16;  // one 16-byte run per lane
  constexpr int chunk_bytes = Problem::staged_tensors * tensor_stride;
  __shared__ alignas(16) unsigned char ring[Warps][Stages][Chunks * chunk_bytes];
  __shared__ unsigned staged[Warps][Stages][warp_threads];  // bit j: chunk j of that slot staged
  const int warp = static_cast<int>(threadIdx.x) / warp_threads, lane = lane_id();
  constexpr index_t tile = tile_steps<Problem, 1, Chunks>;
  const index_t tiles = (P.length + tile - 1) / tile;
  auto slot_of = [&](index_t k, int j) { return &ring[warp][k % Stages][j * chunk_bytes + lane * 16]; };
  auto stage = [&](index_t s, index_t k) {
    const auto cur = P.at(s);
    const index_t segment = segment_start<1, Chunks, Problem>(k);
    unsigned mask = 0;
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
      if (P.stage_run(cur, segment + j * chunk + lane * V, slot_of(k, j), tensor_stride)) mask |= 1u << j;
    staged[warp][k % Stages][lane] = mask;
  };
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + warp;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < sequences; s += all_warps) {
    maybe<Acc> running = P.initial(s);
    for (index_t k = 0; k < Stages - 1; ++k) {
      if (k < tiles) stage(s, k);
      async_commit();  // one group per tile, empty or not, so the wait below counts tiles
    }
    for (index_t k = 0; k < tiles; ++k) {
      if (k + Stages - 1 < tiles) stage(s, k + Stages - 1);
      async_commit();
      async_wait<Stages - 1>();  // tile k's group is complete
      const auto cur = P.at(s);
      const index_t segment = segment_start<1, Chunks, Problem>(k);
      const unsigned mask = staged[warp][k % Stages][lane];
      items now;
#pragma unroll
      for (int j = 0; j < Chunks; ++j)
        P.load_staged(cur, segment + j * chunk + lane * V, slot_of(k, j), tensor_stride, (mask >> j) & 1u, now.v[j]);
      scan_tile<1, Chunks>(P, op, s, k, now, static_cast<tile_scan_smem<Acc, 1>*>(nullptr), [&](const Acc& aggregate) {
        const maybe<Acc> before = running;
        running = combine(running, maybe<Acc>{aggregate, true}, op);
        return before;
      });
    }
    async_wait<0>();
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
