// parscan/cuda/block/block_scan.cuh — scan of a tile held in registers across a thread
// block, blocked arrangement (thread i holds items i·ITEMS … i·ITEMS+ITEMS-1).
//
// Order of work: each thread folds its items, warps scan their threads' folds, warp 0 scans
// the warp totals and asks `tile_prefix` (a callable run by all of warp 0 with the block's
// aggregate) for the prefix of everything before the tile — a running carry or a look-back.
// Every combination happens in a fixed order, so the result never depends on timing.
#pragma once

#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

template <class Acc, int Block>
struct block_scan_storage {
  static constexpr int warps = Block / warp_threads;
  Acc warp_total[warps];
  maybe<Acc> warp_prefix[warps];
};

/// Scans items[] (blocked) in place: inclusive, or exclusive when `exclusive` (the first
/// output is then the tile prefix, which must exist). `on_item(j, inclusive_value)` is called
/// for every item after its inclusive value is known (used for the carry out).
template <int Block, int Items, class Acc, class Op, class TilePrefix, class OnItem>
__device__ PARSCAN_INLINE void block_scan_tile(Acc (&items)[Items], bool exclusive, const Op& op,
                                               block_scan_storage<Acc, Block>& sm, TilePrefix&& tile_prefix,
                                               OnItem&& on_item) {
  constexpr int warps = Block / warp_threads;
  static_assert(Block % warp_threads == 0 && warps <= warp_threads, "block must be 32..1024 threads");
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;

  Acc fold = items[0];
#pragma unroll
  for (int j = 1; j < Items; ++j) fold = op(fold, items[j]);
  const Acc lane_inclusive = warp_inclusive_scan(fold, op);
  if (lane == warp_threads - 1) sm.warp_total[warp] = lane_inclusive;
  __syncthreads();

  if (warp == 0) {
    const Acc total = lane < warps ? sm.warp_total[lane] : sm.warp_total[0];
    const Acc warps_inclusive = warp_inclusive_scan(total, op);
    const maybe<Acc> prefix = tile_prefix(shfl_idx(warps_inclusive, warps - 1));
    const Acc before = shfl_up(warps_inclusive, 1);
    if (lane < warps) sm.warp_prefix[lane] = lane == 0 ? prefix : combine(prefix, maybe<Acc>{before, true}, op);
  }
  __syncthreads();

  const Acc lane_before = shfl_up(lane_inclusive, 1);
  const maybe<Acc> warp_prefix = sm.warp_prefix[warp];
  maybe<Acc> run = lane == 0 ? warp_prefix : combine(warp_prefix, maybe<Acc>{lane_before, true}, op);
  if (run.has) {
    Acc r = run.value;
#pragma unroll
    for (int j = 0; j < Items; ++j) {
      const Acc x = items[j];
      if (exclusive) items[j] = r;
      r = op(r, x);
      if (!exclusive) items[j] = r;
      on_item(j, r);
    }
  } else {  // no prefix at all: first items of a sequence with no carry (inclusive scans only)
    on_item(0, items[0]);
#pragma unroll
    for (int j = 1; j < Items; ++j) {
      items[j] = op(items[j - 1], items[j]);
      on_item(j, items[j]);
    }
  }
}

}  // namespace parscan::cuda_detail
