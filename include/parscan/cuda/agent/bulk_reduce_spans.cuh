// parscan/cuda/agent/bulk_reduce_spans.cuh — the reduce of few long sequences on bulk tiles
// (sm_90): fixed spans of tiles folded into partials, each tile staged whole in shared memory by
// the bulk copy engine, then each sequence's partials folded in order (fold_partials, from
// agent/reduce_spans.cuh), by the same grid after a grid barrier or by a second launch
// (launch_bulk_reduce chooses by size).
//
// A reduce has no look-back, so nothing waits on another block and a block can keep its copy
// engine busy: a persistent block walks its spans (b, b + grid, …) tile by tile with two slots,
// the next tile loading while this one is reduced. Spans are sized from the length alone
// (reduce_tiles_per_span) and each tile's total has one fixed tree (reduce_bulk_lane_runs), so
// the result does not depend on the grid.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "bulk_tiles.cuh"
#include "reduce_spans.cuh"

namespace parscan::cuda_detail {

/// The total of a staged tile of `count` steps for the reduce, returned in every lane of warp 0.
/// Unlike the scan's reduce_bulk_tile, whose lanes take runs of V steps 32 apart (the layout its
/// scan needs) and so meet in a warp reduce every 32 runs, lane l of warp w here folds one
/// contiguous run of Chunks · V steps in order, from (w · 32 + l) · Chunks · V: each warp
/// reduces once a tile, each lane once a run of Chunks accesses: about five times fewer
/// instructions a tile. The lanes' 16-byte accesses lie Chunks · 16 bytes apart, a two-way bank
/// conflict for even Chunks, which a reduce, reading shared memory far below its rate, can
/// afford. On an H100 this made the 8- and 12-byte reduces faster (argmax at 12 MB 0.90 of CUB's
/// time against 1.35) and the 4-byte sums no faster (docs/performance.md, "Lane runs and one
/// launch for the bulk reduce").
template <bool Full, int Warps, int Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE typename Problem::acc_type reduce_bulk_lane_runs(
    const Problem& P, const Op& op, const unsigned char* tile, index_t count,
    bulk_tile_storage<typename Problem::acc_type, Warps>& sm) {
  using Acc = typename Problem::acc_type;
  using E = typename Problem::bulk_element;
  constexpr int V = bulk_run<E>;
  constexpr index_t run = static_cast<index_t>(Chunks) * V;  // steps a lane folds
  constexpr index_t tensor_bytes = bulk_tensor_bytes<Problem, bulk_tile_steps<E, Warps, Chunks>>;
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  const index_t warp_first = static_cast<index_t>(warp) * warp_threads * run;
  const index_t first = warp_first + lane * run;
  const bool reverse = P.reverse;
  Acc fold{};
  int lanes = warp_threads;  // the lanes with steps: a prefix of the warp
  if constexpr (Full) {
#pragma unroll
    for (int j = 0; j < Chunks; ++j) {
      Acc x[V];
      read_bulk_run<V, true>(P, tile, tensor_bytes, count, first + j * V, reverse, x);
#pragma unroll
      for (int v = 0; v < V; ++v) fold = j == 0 && v == 0 ? x[0] : op(fold, x[v]);
    }
  } else {
    if (warp_first >= count) lanes = 0;
    else if (count - warp_first < warp_threads * run) lanes = static_cast<int>((count - warp_first + run - 1) / run);
#pragma unroll
    for (int j = 0; j < Chunks; ++j) {
      const index_t p = first + j * V;
      if (p >= count) break;  // this lane's run ends here (later lanes' runs start past the end)
      Acc x[V];
      read_bulk_run<V, false>(P, tile, tensor_bytes, count, p, reverse, x);
#pragma unroll
      for (int v = 0; v < V; ++v)
        if (p + v < count) fold = j == 0 && v == 0 ? x[0] : op(fold, x[v]);
    }
  }
  if (lanes > 0) {
    const Acc total = warp_ordered_reduce(fold, lanes, op);  // valid in lane 0
    if (lane == 0) sm.warp_total[warp] = total;
  }
  __syncthreads();
  Acc aggregate{};
  if (warp == 0) {
    const index_t per_warp = warp_threads * run;
    const int warps = Full ? Warps : static_cast<int>((count + per_warp - 1) / per_warp);
    aggregate = shfl_idx(warp_ordered_reduce(sm.warp_total[lane < warps ? lane : 0], warps, op), 0);
  }
  return aggregate;
}

/// The spans of `total_spans` (sequence s's span i is s · spans_per_sequence + i; it holds the
/// tiles [i · tiles_per_span, min((i + 1) · tiles_per_span, tiles_per_sequence)) in processing
/// order) into partials[span], two bulk tiles of Warps × Chunks runs in flight per block.
///
/// With FoldHere the grid is launched cooperatively and finishes the reduce itself: after a grid
/// barrier, block b folds the partials of sequences b, b + grid, … (fold_partials), which saves
/// the second launch of reduce_partials_kernel.
template <int Warps, int Chunks, int MinBlocks, bool FoldHere, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads, MinBlocks)
    reduce_bulk_spans_kernel(Problem P, Op op, typename Problem::acc_type* partials, index_t tiles_per_sequence,
                             index_t tiles_per_span, index_t spans_per_sequence, index_t total_spans) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Acc = typename Problem::acc_type;
  constexpr index_t tile_steps = bulk_tile_steps<typename Problem::bulk_element, Warps, Chunks>;
  constexpr index_t tensor_bytes = bulk_tensor_bytes<Problem, tile_steps>;
  constexpr index_t slot_bytes = Problem::bulk_tensors * tensor_bytes;
  extern __shared__ __align__(128) unsigned char slots[];
  __shared__ bulk_tile_smem<Acc, Warps> storage;
  __shared__ std::uint64_t barriers[2];
  auto& sm = storage.get();
  const auto loaded = [&](int slot) { return bulk_barrier{&barriers[slot]}; };  // no array: it would go to local memory

  // A block's tiles in order: span, then tile within it (global tile index s · tiles + k).
  struct cursor {
    index_t span, k;
  };
  const auto span_end = [&](index_t span) {
    const index_t end = (span % spans_per_sequence + 1) * tiles_per_span;
    return end < tiles_per_sequence ? end : tiles_per_sequence;
  };
  const auto first_of = [&](index_t span) { return cursor{span, (span % spans_per_sequence) * tiles_per_span}; };
  const auto next_of = [&](cursor c) { return ++c.k < span_end(c.span) ? c : first_of(c.span + gridDim.x); };
  const auto tile_of = [&](cursor c) {
    return place_bulk_tile(P, (c.span / spans_per_sequence) * tiles_per_sequence + c.k, tiles_per_sequence, tile_steps);
  };
  const auto load = [&](int slot, cursor c) {  // thread 0
    if (c.span >= total_spans) return;
    const bulk_tile_place w = tile_of(c);
    stage_bulk_tile(bulk_sources_of(P, w), w, slots + slot * slot_bytes, tensor_bytes, loaded(slot));
  };

  cursor now = first_of(blockIdx.x), ahead = next_of(now);
  if (threadIdx.x == 0) {
    loaded(0).init();
    loaded(1).init();
    load(0, now);
    load(1, ahead);
  }
  __syncthreads();
  unsigned parity = 0;  // bit i: the phase of slot i's next load
  maybe<Acc> total{Acc{}, false};
  for (int slot = 0; now.span < total_spans; slot ^= 1) {
    unsigned char* tile = slots + slot * slot_bytes;
    const bulk_tile_place w = tile_of(now);
    land_bulk_tile(bulk_sources_of(P, w), w, tile, tensor_bytes, loaded(slot), (parity >> slot) & 1u);
    parity ^= 1u << slot;
    const Acc aggregate = w.count == tile_steps
                              ? reduce_bulk_lane_runs<true, Warps, Chunks>(P, op, tile, w.count, sm)
                              : reduce_bulk_lane_runs<false, Warps, Chunks>(P, op, tile, w.count, sm);
    total = combine(total, maybe<Acc>{aggregate, true}, op);  // meaningful in warp 0
    if (now.k + 1 == span_end(now.span)) {  // the span's last tile
      if (threadIdx.x == 0) partials[now.span] = total.value;
      total = {Acc{}, false};
    }
    __syncthreads();  // every thread is done with this slot: refill it
    const cursor later = next_of(ahead);
    if (threadIdx.x == 0) load(slot, later);
    now = ahead;
    ahead = later;
  }
  if constexpr (FoldHere) {
    cooperative_groups::this_grid().sync();
    for (index_t s = blockIdx.x; s * spans_per_sequence < total_spans; s += gridDim.x) {
      fold_partials<Warps * warp_threads>(P, op, s, partials + s * spans_per_sequence, spans_per_sequence);
      __syncthreads();  // fold_partials' shared storage serves the next sequence
    }
  }
#else
  __trap();  // never launched: launch_bulk_reduce checks that the kernel was built for sm_90
#endif
}

}  // namespace parscan::cuda_detail
