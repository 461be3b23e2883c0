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

/// What the compute warps and the look-back warp hand each other: warp totals for three tiles
/// (reduced two ahead of the scan), warp prefixes for two.
template <class Acc, int Warps>
struct blocked_chain_storage {
  Acc warp_total[3][Warps];          // each warp's total of its segment (lane 31's inclusive)
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
  static_assert(Stages >= 4, "the scanned tile, two reduced ahead and one in flight");
  static_assert(Warps <= warp_threads, "one look-back lane per warp");
  using Acc = typename Problem::acc_type;
  using ring_t = staging_ring<Warps, Chunks, Stages, Problem, true>;
  using state = window_chain_state<Acc>;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const ring_t ring{dynamic_smem};
  __shared__ blocked_chain_smem<Acc, Warps> handoff_smem;
  auto& handoff = handoff_smem.get();
  const int warp = static_cast<int>(threadIdx.x) / warp_threads, lane = lane_id();
  const index_t stride = gridDim.x;
  // The first 32 windows of a sequence (window_chain_prefix: the tiles that may read the carry
  // in) publish their aggregates in their own look-backs.
  constexpr index_t ahead_from = static_cast<index_t>(chain_window) * chain_window;

  if (warp == Warps) {  // the look-back warp
    const index_t windows_per_sequence = (tiles_per_sequence + chain_window - 1) / chain_window;
    // The warp totals of the block's tile i (in buffer i mod 3): their inclusive scan across
    // the warps (the last lane: the tile's aggregate).
    auto warps_inclusive = [&](int i) {
      return warp_inclusive_scan(handoff.warp_total[i % 3][lane < Warps ? lane : 0], op);
    };
    // Publishes tile i's aggregate ahead of its look-back where that is allowed.
    auto publish_ahead = [&](int i) {
      const index_t tile = blockIdx.x + i * stride;
      if (tile >= total_tiles || tile % tiles_per_sequence < ahead_from) return;  // the same in every lane
      const Acc aggregate = shfl_idx(warps_inclusive(i), Warps - 1);
      if (lane == 0) state::store(st.aggregate(tile), aggregate);
    };
    __syncthreads();  // the warp totals of the first two tiles
    publish_ahead(0);
    publish_ahead(1);
    int i = 0;
    for (index_t tile = blockIdx.x; tile < total_tiles; tile += stride, ++i) {
      const index_t s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
      const Acc inclusive = warps_inclusive(i);
      const maybe<Acc> prefix =
          window_chain_prefix(st, s * tiles_per_sequence, s * windows_per_sequence, k, shfl_idx(inclusive, Warps - 1),
                              [&] { return P.initial(s); }, op, k >= ahead_from);
      const Acc before = shfl_up(inclusive, 1);
      if (lane < Warps)
        handoff.warp_prefix[i % 2][lane] = lane == 0 ? prefix : combine(prefix, maybe<Acc>{before, true}, op);
      __syncthreads();  // tile i's warp prefixes out; tile i+2's warp totals in
      publish_ahead(i + 2);
    }
    return;
  }

  // The compute warps.
  auto segment = [&](index_t k) { return segment_start<Warps, Chunks, Problem>(k); };
  auto stage = [&](index_t tile, int slot) {
    if (tile < total_tiles) ring.stage(P, tile / tiles_per_sequence, segment(tile % tiles_per_sequence), slot);
    async_commit();  // one group per tile, empty or not, so the waits count tiles
  };
  // Once the block's tile i is in its slot: the lanes' warp scan of their folds, and the
  // warp's total handed to the look-back warp.
  auto reduce = [&](int i) {
    const index_t tile = blockIdx.x + i * stride;
    Acc lane_inclusive{};
    if (tile < total_tiles) {
      const int slot = i % Stages;
      ring.complete(P, tile / tiles_per_sequence, segment(tile % tiles_per_sequence), slot);
      blocked_items<Problem, Chunks> items;
      ring.load_blocked(P, slot, items);
      lane_inclusive = blocked_lane_inclusive<Chunks, Problem>(op, items);
      if (lane == warp_threads - 1) handoff.warp_total[i % 3][warp] = lane_inclusive;
    }
    return lane_inclusive;
  };
  for (int i = 0; i < Stages - 1; ++i) stage(blockIdx.x + i * stride, i);
  async_wait<Stages - 2>();
  Acc now_inclusive = reduce(0);
  async_wait<Stages - 3>();
  Acc next_inclusive = reduce(1);
  __syncthreads();
  int i = 0;
  for (index_t tile = blockIdx.x; tile < total_tiles; tile += stride, ++i) {
    // The slot refilled now held the previous tile, whose store each lane ended reading only
    // the runs it stages itself (store_blocked), so no barrier is needed.
    stage(tile + (Stages - 1) * stride, (i + Stages - 1) % Stages);
    async_wait<Stages - 3>();  // tile i+2's group is complete
    const Acc after_inclusive = reduce(i + 2);
    __syncthreads();  // tile i's warp prefixes in; tile i+2's warp totals out
    const index_t s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
    blocked_items<Problem, Chunks> items;
    ring.load_blocked(P, i % Stages, items);
    scan_blocked_lane<Warps, Chunks>(P, op, s, k, items, now_inclusive, handoff.warp_prefix[i % 2][warp]);
    ring.store_blocked(P, s, segment(k), i % Stages, items);
    now_inclusive = next_inclusive;
    next_inclusive = after_inclusive;
  }
  async_wait<0>();
}

}  // namespace parscan::cuda_detail
