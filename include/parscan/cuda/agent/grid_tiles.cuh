// parscan/cuda/agent/grid_tiles.cuh — short inputs in one launch: one tile per block, every
// block resident at once (a cooperative launch), so that tiles meet at a grid barrier instead of
// a look-back whose state needs a memset first.
//
// The other chained paths zero their look-back records with a memset ahead of the kernel, which
// is a second launch: for an input of a few hundred kilobytes the two launches, not the bytes,
// are the time (CUB's scan also runs an init kernel before its scan). Here:
//  - scan_grid_totals_kernel: each block reduces its tile (registers) and writes the total, the
//    grid meets at one barrier, and each block folds the totals before it — all of them loaded
//    at once, one round trip — in one fixed order: lane l folds a contiguous run of them, the
//    lanes meet in warp_ordered_reduce. No chain of look-backs, and nothing to zero. The tile is
//    combined twice (its total, then its scan), which costs little next to its bytes…
//  - scan_grid_chain_kernel: …except for costly combines (costly_combine: small matrices),
//    which instead chain with the window chain as their bulk tiles do, each block zeroing a
//    share of its records before the barrier (the tile's loads fly while the grid waits).
//  - reduce_grid_tiles_kernel: totals, the barrier, and the block of each sequence's first tile
//    folds that sequence's totals (fold_partials).
// Every order of combination is fixed by the tile decomposition, so results are bitwise the
// same from run to run.
#pragma once

#include <cooperative_groups.h>

#include <cuda/atomic>

#include "../block/tile_scan.cuh"
#include "reduce_spans.cuh"
#include "tile_reduce.cuh"
#include "window_chain.cuh"

namespace parscan::cuda_detail {

/// totals[0] ⊕ … ⊕ totals[count-1] (nothing for count 0), in one fixed order, by one whole warp;
/// the same in every lane. Lane l folds the run of ⌈count/32⌉ totals from l·⌈count/32⌉
/// (fold_in_batches), and the lanes meet in warp_ordered_reduce.
template <class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> warp_fold_totals(const Acc* totals, index_t count, const Op& op) {
  if (count == 0) return {Acc{}, false};
  const index_t per_lane = (count + warp_threads - 1) / warp_threads;
  const index_t first = lane_id() * per_lane;
  const index_t end = first + per_lane < count ? first + per_lane : count;
  const maybe<Acc> fold = fold_in_batches(totals, first, end, op);
  const int lanes = static_cast<int>((count + per_lane - 1) / per_lane);  // the lanes with totals
  return {shfl_idx(warp_ordered_reduce(fold.value, lanes, op), 0), true};
}

/// Loads this block's tile (tile k of sequence s) into `now`, reduces it and writes its total to
/// totals[blockIdx.x]: what the totals kernels do before the grid barrier.
template <int Warps, int Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE void load_and_total(const Problem& P, const Op& op, index_t s, index_t k,
                                              tile_items<Problem, Chunks>& now, typename Problem::acc_type* totals,
                                              tile_reduce_smem<typename Problem::acc_type, Warps>& sm) {
  load_tile<Warps, Chunks>(P, s, k, now);
  const typename Problem::acc_type total = reduce_tile<Warps, Chunks>(P, op, k, now, sm);
  if (threadIdx.x == 0) totals[blockIdx.x] = total;
}

/// Block b scans tile b (tile k of sequence b / tiles_per_sequence), its prefix folded from the
/// totals of the tiles before it after the grid barrier. Launched cooperatively, a block a tile.
template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_grid_totals_kernel(Problem P, Op op, typename Problem::acc_type* totals, index_t tiles_per_sequence) {
  using Acc = typename Problem::acc_type;
  __shared__ tile_scan_smem<Acc, Warps> sm;
  __shared__ tile_reduce_smem<Acc, Warps> reduce_sm;
  const index_t tile = blockIdx.x, s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
  tile_items<Problem, Chunks> now;
  load_and_total<Warps, Chunks>(P, op, s, k, now, totals, reduce_sm);
  // The carry in before the barrier: the sequence's last tile writes the carry out after it,
  // and the two may be one array (chunks chained in place).
  maybe<Acc> carry{Acc{}, false};
  if (threadIdx.x < warp_threads) carry = P.initial(s);
  cooperative_groups::this_grid().sync();
  scan_tile<Warps, Chunks>(P, op, s, k, now, &sm, [&](const Acc&) {
    return combine(carry, warp_fold_totals(totals + (tile - k), k, op), op);
  });
}

/// Zeroes `words` 8-byte words at `records`, a share per block (relaxed atomic stores, as the
/// look-back's polls read them), then waits for the whole grid.
__device__ PARSCAN_INLINE void zero_records_and_meet(unsigned long long* records, index_t words) {
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(records[i]).store(0, cuda::memory_order_relaxed);
  cooperative_groups::this_grid().sync();
}

/// Block b scans tile b with the window chain, whose state `st` lies in the `record_words` words
/// at `records`, zeroed here. Launched cooperatively, a block a tile.
template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_grid_chain_kernel(Problem P, Op op, window_chain_state<typename Problem::acc_type> st,
                           unsigned long long* records, index_t record_words, index_t tiles_per_sequence,
                           index_t windows_per_sequence) {
  using Acc = typename Problem::acc_type;
  __shared__ tile_scan_smem<Acc, Warps> sm;
  const index_t tile = blockIdx.x, s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
  tile_items<Problem, Chunks> now;
  load_tile<Warps, Chunks>(P, s, k, now);
  zero_records_and_meet(records, record_words);
  scan_tile<Warps, Chunks>(P, op, s, k, now, &sm, [&](const Acc& aggregate) {
    return window_chain_prefix(st, tile - k, s * windows_per_sequence, k, aggregate, [&] { return P.initial(s); }, op);
  });
}

/// The reduce: block b writes tile b's total to totals[b]; after the grid barrier the block of
/// each sequence's first tile folds the sequence's totals (fold_partials) and finishes it.
template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    reduce_grid_tiles_kernel(Problem P, Op op, typename Problem::acc_type* totals, index_t tiles_per_sequence) {
  using Acc = typename Problem::acc_type;
  __shared__ tile_reduce_smem<Acc, Warps> sm;
  const index_t tile = blockIdx.x, s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
  tile_items<Problem, Chunks> now;
  load_and_total<Warps, Chunks>(P, op, s, k, now, totals, sm);
  cooperative_groups::this_grid().sync();
  if (k == 0) fold_partials<Warps * warp_threads>(P, op, s, totals + tile, tiles_per_sequence);
}

}  // namespace parscan::cuda_detail
