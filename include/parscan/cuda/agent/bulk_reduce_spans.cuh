// parscan/cuda/agent/bulk_reduce_spans.cuh — the first pass of the two-pass reduce of few long
// sequences (agent/reduce_spans.cuh has the second) on bulk tiles (sm_90): fixed spans of tiles
// folded into partials, each tile staged whole in shared memory by the bulk copy engine.
//
// A reduce has no look-back, so nothing waits on another block and a block can keep its copy
// engine busy: a persistent block walks its spans (b, b + grid, …) tile by tile with two slots,
// the next tile loading while this one is reduced. Spans are sized from the length alone
// (reduce_tiles_per_span) and each tile's total has one fixed tree (reduce_bulk_tile), so the
// result does not depend on the grid.
#pragma once

#include <cstdint>

#include "bulk_tiles.cuh"

namespace parscan::cuda_detail {

/// The spans of `total_spans` (sequence s's span i is s · spans_per_sequence + i; it holds the
/// tiles [i · tiles_per_span, min((i + 1) · tiles_per_span, tiles_per_sequence)) in processing
/// order) into partials[span], two bulk tiles of Warps × Chunks runs in flight per block.
template <int Warps, int Chunks, int MinBlocks, class Problem, class Op>
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
    const Acc aggregate = w.count == tile_steps ? reduce_bulk_tile<true, Warps, Chunks>(P, op, tile, w.count, sm)
                                                : reduce_bulk_tile<false, Warps, Chunks>(P, op, tile, w.count, sm);
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
#else
  __trap();  // never launched: launch_bulk_reduce checks that the kernel was built for sm_90
#endif
}

}  // namespace parscan::cuda_detail
