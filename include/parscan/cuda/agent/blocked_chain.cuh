// parscan/cuda/agent/blocked_chain.cuh — chained tiles of a few long sequences, read in blocked
// order from the staging ring, with the look-back in a warp of its own one tile behind.
//
// scan_chained_staged_kernel (chained_tiles.cuh) runs each tile's look-back in warp 0 while its
// other warps wait at a block barrier: about three L2 round trips per tile in every block's
// critical path. Reading the tiles in blocked order there (one warp scan per 16 steps instead
// of one per 4) cut the instructions per step by about a third and moved a 2^28 int32 sum on an
// H100 from 57.8% to 56.0% of copy: the barrier waits, not the instructions, bound it
// (docs/performance.md). Here a block is Warps compute warps and one look-back warp, and tile i
// takes one block barrier:
//
//   compute warps:  [stage i+S-1] [reduce i+1 → warp totals] ─ barrier ─ [scan i, store] ...
//   look-back warp:  [warp totals of i → aggregate, look-back, warp prefixes of i] ─ barrier ─ ...
//
// so the look-back of tile i+1 runs while the compute warps scan tile i and reduce tile i+2.
// A lane keeps the warp scan of its fold from the reduce for the scan, so each step is folded
// twice (reduce, then the scan from the prefix) and read from shared memory twice.
//
// The grid is persistent (launched cooperatively) and takes tiles round-robin; chained_tiles.cuh
// says why it always makes progress. Each look-back warp handles its block's tiles in order and
// needs only smaller tiles' aggregates and window records, so the same argument holds.
// Results are bitwise identical from run to run: every combination has one fixed order.
#pragma once

#include "../block/blocked_tile_scan.cuh"
#include "staging_ring.cuh"
#include "window_chain.cuh"

namespace parscan::cuda_detail {

/// What the compute warps and the look-back warp hand each other, double-buffered by tile.
template <class Acc, int Warps>
struct blocked_chain_storage {
  Acc warp_total[2][Warps];          // each warp's total of its segment (lane 31's inclusive)
  maybe<Acc> warp_prefix[2][Warps];  // what precedes each warp's segment
};
template <class Acc, int Warps>
struct alignas(16) blocked_chain_smem {  // raw bytes: Acc may have constructors
  alignas(Acc) unsigned char raw[sizeof(blocked_chain_storage<Acc, Warps>)];
  __device__ PARSCAN_INLINE blocked_chain_storage<Acc, Warps>& get() {
    return *reinterpret_cast<blocked_chain_storage<Acc, Warps>*>(raw);
  }
};

/// Blocks per SM the kernel is compiled for: as many as the staging ring lets share an SM
/// (227 KB of shared memory) and its threads allow, so that ptxas keeps within their registers.
template <int Warps, int Chunks, int Stages, class Problem>
constexpr int blocked_chain_min_blocks() {
  const int by_smem = (227 * 1024) / (staging_ring<Warps, Chunks, Stages, Problem, true>::bytes + 1024);
  const int by_threads = 2048 / ((Warps + 1) * warp_threads);
  const int blocks = by_smem < by_threads ? by_smem : by_threads;
  return blocks > 0 ? blocks : 1;
}

template <int Warps, int Chunks, int Stages, class Problem, class Op>
__global__ void __launch_bounds__((Warps + 1) * warp_threads, blocked_chain_min_blocks<Warps, Chunks, Stages, Problem>())
    scan_chained_blocked_kernel(Problem P, Op op, window_chain_state<typename Problem::acc_type> st,
                                index_t tiles_per_sequence, index_t total_tiles) {
  static_assert(Stages >= 2 && Warps <= warp_threads, "a staged tile ahead, and one look-back lane per warp");
  using Acc = typename Problem::acc_type;
  using ring_t = staging_ring<Warps, Chunks, Stages, Problem, true>;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const ring_t ring{dynamic_smem};
  __shared__ blocked_chain_smem<Acc, Warps> handoff_smem;
  auto& handoff = handoff_smem.get();
  const int warp = static_cast<int>(threadIdx.x) / warp_threads, lane = lane_id();
  const index_t stride = gridDim.x;

  if (warp == Warps) {  // the look-back warp: tile i's prefix before barrier i
    const index_t windows_per_sequence = (tiles_per_sequence + chain_window - 1) / chain_window;
    __syncthreads();  // the first tile's warp totals
    int buf = 0;
    for (index_t tile = blockIdx.x; tile < total_tiles; tile += stride, buf ^= 1) {
      const index_t s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
      const Acc total = handoff.warp_total[buf][lane < Warps ? lane : 0];
      const Acc warps_inclusive = warp_inclusive_scan(total, op);
      const maybe<Acc> prefix =
          window_chain_prefix(st, s * tiles_per_sequence, s * windows_per_sequence, k,
                              shfl_idx(warps_inclusive, Warps - 1), [&] { return P.initial(s); }, op);
      const Acc before = shfl_up(warps_inclusive, 1);
      if (lane < Warps)
        handoff.warp_prefix[buf][lane] = lane == 0 ? prefix : combine(prefix, maybe<Acc>{before, true}, op);
      __syncthreads();  // tile's warp prefixes out; the next tile's warp totals in
    }
    return;
  }

  // The compute warps.
  auto segment = [&](index_t k) { return segment_start<Warps, Chunks, Problem>(k); };
  auto stage = [&](index_t tile, int slot) {
    if (tile < total_tiles) ring.stage(P, tile / tiles_per_sequence, segment(tile % tiles_per_sequence), slot);
    async_commit();  // one group per tile, empty or not, so the waits count tiles
  };
  // Once a tile's copies are in: its lanes' warp scan of their folds, and the warp's total
  // handed to the look-back warp.
  auto reduce = [&](index_t tile, int slot, int buf) {
    Acc lane_inclusive{};
    if (tile < total_tiles) {
      ring.complete(P, tile / tiles_per_sequence, segment(tile % tiles_per_sequence), slot);
      blocked_items<Problem, Chunks> items;
      ring.load_blocked(P, slot, items);
      lane_inclusive = blocked_lane_inclusive<Chunks, Problem>(op, items);
      if (lane == warp_threads - 1) handoff.warp_total[buf][warp] = lane_inclusive;
    }
    return lane_inclusive;
  };
  const auto next_slot = [](int slot) { return slot + 1 == Stages ? 0 : slot + 1; };
  index_t tile = blockIdx.x;
  for (int i = 0; i < Stages - 1; ++i) stage(tile + i * stride, i);
  async_wait<Stages - 2>();  // the first tile's group is complete
  Acc lane_inclusive = reduce(tile, 0, 0);
  __syncthreads();
  int buf = 0;
  for (int slot = 0; tile < total_tiles; tile += stride, slot = next_slot(slot), buf ^= 1) {
    // The slot refilled now held the previous tile, whose store each lane ended reading only
    // the runs it stages itself (store_blocked), so no barrier is needed.
    stage(tile + (Stages - 1) * stride, slot == 0 ? Stages - 1 : slot - 1);
    async_wait<Stages - 2>();  // the next tile's group is complete
    const Acc next_inclusive = reduce(tile + stride, next_slot(slot), buf ^ 1);
    __syncthreads();  // this tile's warp prefixes in; the next tile's warp totals out
    const index_t s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
    blocked_items<Problem, Chunks> items;
    ring.load_blocked(P, slot, items);
    scan_blocked_lane<Warps, Chunks>(P, op, s, k, items, lane_inclusive, handoff.warp_prefix[buf][warp]);
    ring.store_blocked(P, s, segment(k), slot, items);
    lane_inclusive = next_inclusive;
  }
  async_wait<0>();
}

}  // namespace parscan::cuda_detail
