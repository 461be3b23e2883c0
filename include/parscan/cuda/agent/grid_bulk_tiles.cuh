// parscan/cuda/agent/grid_bulk_tiles.cuh — inputs of a few megabytes in one launch: every tile
// staged whole in shared memory by the bulk copy engine at once (sm_90), one tile per block,
// every block resident (a cooperative launch), the tiles meeting at one grid barrier.
//
// The grid tiles (agent/grid_tiles.cuh) hold their tiles in registers, so an SM holds few of
// them: from about 8 MB (an int64 sum of 2^20 steps) they fall back to 32 KB tiles on 8 warps
// an SM, each warp waiting for all its loads and then at the barrier, and run 1.3× CUB's time
// (docs/performance.md, "8-byte sums at 8-16 MB"). The bulk tiles (agent/bulk_tiles.cuh) stage
// in shared memory but chain their look-back through the one wave that such an input makes.
// Here a block's tile costs the copy engine one instruction and no registers, four or five
// blocks an SM hold 64–220 KB of it, and the whole input is in flight from the first cycle:
//  - grid_bulk_tiles_kernel<true, …> (scans): each block stages its tile, reduces it from shared
//    memory (reduce_bulk_tile) and writes its total; after the grid barrier warp 0 folds the
//    totals of the sequence's tiles before it (warp_fold_totals: all loaded at once, one fixed
//    order) and the block scans its tile from shared memory (scan_bulk_runs).
//  - grid_bulk_tiles_kernel<false, …> (reduces): the same totals and barrier; the block of each
//    sequence's first tile folds that sequence's totals (fold_partials).
// Every order of combination is fixed by the tile decomposition, so results are bitwise the
// same from run to run.
#pragma once

#include <cooperative_groups.h>

#include "bulk_tiles.cuh"
#include "grid_tiles.cuh"
#include "reduce_spans.cuh"

namespace parscan::cuda_detail {

/// Stages this block's tile (tile blockIdx.x, at place w) whole, reduces it and writes its total
/// to totals[blockIdx.x]; before any thread waits for the copy, thread 0 has made the barrier
/// ready (a block barrier between).
template <int Warps, int Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE void stage_and_total(const Problem& P, const Op& op, const bulk_tile_place& w,
                                               unsigned char* tile, typename Problem::acc_type* totals,
                                               bulk_tile_storage<typename Problem::acc_type, Warps>& sm) {
  using Acc = typename Problem::acc_type;
  constexpr index_t tile_steps = bulk_tile_steps<typename Problem::bulk_element, Warps, Chunks>;
  constexpr index_t tensor_bytes = bulk_tensor_bytes<Problem, tile_steps>;
  const bulk_barrier loaded{&sm.loaded};
  const auto src = bulk_sources_of(P, w);
  if (threadIdx.x == 0) {
    loaded.init();
    stage_bulk_tile(src, w, tile, tensor_bytes, loaded);
  }
  __syncthreads();
  land_bulk_tile(src, w, tile, tensor_bytes, loaded, 0);
  const Acc total = w.count == tile_steps ? reduce_bulk_tile<true, Warps, Chunks>(P, op, tile, w.count, sm)
                                          : reduce_bulk_tile<false, Warps, Chunks>(P, op, tile, w.count, sm);
  if (threadIdx.x == 0) totals[blockIdx.x] = total;
}

/// Block b stages tile b (tile k of sequence b / tiles_per_sequence) in dynamic shared memory
/// (bulk_tile_steps · sizeof(E) bytes per input) and writes its total; after the grid barrier,
/// with Scans, it scans the tile from the totals of the tiles before it, or else the block of
/// each sequence's first tile folds the sequence's totals (fold_partials) and finishes the
/// reduce. Launched cooperatively, a block a tile.
template <bool Scans, int Warps, int Chunks, int MinBlocks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads, MinBlocks)
    grid_bulk_tiles_kernel(Problem P, Op op, typename Problem::acc_type* totals, index_t tiles_per_sequence) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Acc = typename Problem::acc_type;
  constexpr index_t tile_steps = bulk_tile_steps<typename Problem::bulk_element, Warps, Chunks>;
  extern __shared__ __align__(128) unsigned char tile[];
  __shared__ bulk_tile_smem<Acc, Warps> storage;
  auto& sm = storage.get();
  const index_t t = blockIdx.x;
  const bulk_tile_place w = place_bulk_tile(P, t, tiles_per_sequence, tile_steps);
  stage_and_total<Warps, Chunks>(P, op, w, tile, totals, sm);
  if constexpr (Scans) {
    // The carry in before the barrier: the sequence's last tile writes the carry out after it,
    // and the two may be one array (chunks chained in place).
    maybe<Acc> carry{Acc{}, false};
    if (threadIdx.x < warp_threads) carry = P.initial(w.s);
    cooperative_groups::this_grid().sync();
    if (threadIdx.x < warp_threads)
      spread_bulk_prefix(combine(carry, warp_fold_totals(totals + (t - w.k), w.k, op), op), op, sm);
    __syncthreads();  // the warps' prefixes
    auto* const out = P.bulk_out(w.s) + w.begin;
    const bool last_tile = w.k == tiles_per_sequence - 1;
    if (w.count == tile_steps) scan_bulk_runs<true, Warps, Chunks>(P, op, w.s, last_tile, tile, out, w.count, sm);
    else scan_bulk_runs<false, Warps, Chunks>(P, op, w.s, last_tile, tile, out, w.count, sm);
  } else {
    cooperative_groups::this_grid().sync();
    if (w.k == 0) fold_partials<Warps * warp_threads>(P, op, w.s, totals + t, tiles_per_sequence);
  }
#else
  __trap();  // never launched: grid_bulk_tiles_of checks that the kernel was built for sm_90
#endif
}

/// The grid bulk rounds' workspace: per tile its total, its warps' totals and (from the grid
/// barrier on) its prefix; per sequence its carry in, read before the barrier.
template <class Acc, int Warps>
struct grid_bulk_rounds_state {
  Acc* totals;
  Acc* warp_totals;  // Warps a tile
  maybe<Acc>* prefixes;
  maybe<Acc>* carries;

  static std::size_t bytes(index_t tiles, index_t sequences) {
    return static_cast<std::size_t>(tiles) * ((1 + Warps) * sizeof(Acc) + sizeof(maybe<Acc>)) +
           static_cast<std::size_t>(sequences) * sizeof(maybe<Acc>);
  }
  /// The state in `bytes(tiles, sequences)` bytes at `at` (aligned as the workspace is).
  static grid_bulk_rounds_state carve(void* at, index_t tiles) {
    // maybe<Acc> first: its alignment is at least Acc's.
    auto* const prefixes = static_cast<maybe<Acc>*>(at);
    auto* const totals = reinterpret_cast<Acc*>(prefixes + tiles);
    auto* const warp_totals = totals + tiles;
    auto* const carries = reinterpret_cast<maybe<Acc>*>(warp_totals + tiles * Warps);
    return {totals, warp_totals, prefixes, carries};
  }
};

/// Scans of inputs larger than one resident wave of grid bulk tiles, in rounds: block b of G
/// takes tiles b, b + G, b + 2G, … of all the sequences' tiles. Pass 1 stages each of its tiles
/// in turn, reduces it and writes its totals, keeping the last one staged; after the grid
/// barrier a warp per tile folds the totals before it (warp_fold_totals, as the one-round kernel
/// does: the order of combination depends on the tile decomposition only, not on G), and pass 2
/// scans the staged tile, then stages the block's earlier tiles again, newest first, and scans
/// each. With `keep_in_l2` the tiles read again are loaded with the L2's evict-last priority,
/// and the staged last round and the second reads with evict-first, so that the second reads
/// find in L2 as much as it holds of what shared memory does not.
template <int Warps, int Chunks, int MinBlocks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads, MinBlocks)
    grid_bulk_rounds_kernel(Problem P, Op op, grid_bulk_rounds_state<typename Problem::acc_type, Warps> st,
                            index_t tiles_per_sequence, index_t total_tiles, bool keep_in_l2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Acc = typename Problem::acc_type;
  constexpr index_t tile_steps = bulk_tile_steps<typename Problem::bulk_element, Warps, Chunks>;
  constexpr index_t tensor_bytes = bulk_tensor_bytes<Problem, tile_steps>;
  extern __shared__ __align__(128) unsigned char tile[];
  __shared__ bulk_tile_smem<Acc, Warps> storage;
  auto& sm = storage.get();
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  const index_t grid = gridDim.x, first = blockIdx.x;
  const index_t rounds = (total_tiles - first + grid - 1) / grid;  // at least one: grid ≤ total_tiles
  const bulk_barrier loaded{&sm.loaded};
  if (threadIdx.x == 0) loaded.init();
  __syncthreads();
  unsigned parity = 0;
  for (index_t r = 0;; ++r) {
    const index_t t = first + r * grid;
    const bulk_tile_place w = place_bulk_tile(P, t, tiles_per_sequence, tile_steps);
    const auto src = bulk_sources_of(P, w);
    if (threadIdx.x == 0) {
      const bool again = r + 1 < rounds;  // this tile is read again in pass 2
      stage_bulk_tile(src, w, tile, tensor_bytes, loaded,
                      l2_policy(!again ? l2_priority::evict_first
                                       : keep_in_l2 ? l2_priority::evict_last : l2_priority::evict_normal));
    }
    land_bulk_tile(src, w, tile, tensor_bytes, loaded, parity);
    parity ^= 1u;
    const Acc total = w.count == tile_steps ? reduce_bulk_tile<true, Warps, Chunks>(P, op, tile, w.count, sm)
                                            : reduce_bulk_tile<false, Warps, Chunks>(P, op, tile, w.count, sm);
    if (threadIdx.x < Warps) st.warp_totals[t * Warps + threadIdx.x] = sm.warp_total[threadIdx.x];
    if (threadIdx.x == 0) st.totals[t] = total;
    if (w.k == 0 && warp == 0) {
      // Before the barrier: the sequence's last tile writes the carry out after it, and the
      // two may be one array (chunks chained in place).
      const maybe<Acc> carry = P.initial(w.s);
      if (lane == 0) st.carries[w.s] = carry;
    }
    if (r + 1 == rounds) break;
    __syncthreads();  // every thread is done with the tile (and sm.warp_total) before the next load
  }
  cooperative_groups::this_grid().sync();
  for (index_t r = warp; r < rounds; r += Warps) {  // each tile's prefix, a warp a tile
    const index_t t = first + r * grid, k = t % tiles_per_sequence;
    const maybe<Acc> prefix = combine(st.carries[t / tiles_per_sequence], warp_fold_totals(st.totals + (t - k), k, op), op);
    if (lane == 0) st.prefixes[t] = prefix;
  }
  __syncthreads();  // the prefixes, and every thread done with the staged tile's totals
  for (index_t r = rounds - 1;; --r) {
    const index_t t = first + r * grid;
    const bulk_tile_place w = place_bulk_tile(P, t, tiles_per_sequence, tile_steps);
    if (r + 1 < rounds) {  // the last round's tile is still staged
      const auto src = bulk_sources_of(P, w);
      if (threadIdx.x == 0) stage_bulk_tile(src, w, tile, tensor_bytes, loaded, l2_policy(l2_priority::evict_first));
      land_bulk_tile(src, w, tile, tensor_bytes, loaded, parity);
      parity ^= 1u;
    }
    if (warp == 0) {
      if (lane < Warps) sm.warp_total[lane] = st.warp_totals[t * Warps + lane];
      __syncwarp();
      spread_bulk_prefix(st.prefixes[t], op, sm);
    }
    __syncthreads();  // the warps' prefixes
    auto* const out = P.bulk_out(w.s) + w.begin;
    const bool last_tile = w.k == tiles_per_sequence - 1;
    if (w.count == tile_steps) scan_bulk_runs<true, Warps, Chunks>(P, op, w.s, last_tile, tile, out, w.count, sm);
    else scan_bulk_runs<false, Warps, Chunks>(P, op, w.s, last_tile, tile, out, w.count, sm);
    if (r == 0) break;
    __syncthreads();  // every thread is done with the tile before the next load
  }
#else
  __trap();  // never launched: grid_bulk_rounds_of checks that the kernel was built for sm_90
#endif
}

}  // namespace parscan::cuda_detail
