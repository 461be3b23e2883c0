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

}  // namespace parscan::cuda_detail
