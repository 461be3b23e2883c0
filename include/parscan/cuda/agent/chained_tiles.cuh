// parscan/cuda/agent/chained_tiles.cuh — chained tiles, for fewer, longer sequences: tiles of
// one sequence scanned by different blocks, each tile's prefix from a look-back. Three forms
// (tile_shape_of in device/dispatch_scan.cuh picks one): a persistent grid that keeps its next
// tiles in flight through shared memory, with the window chain (window_chain.cuh, the default)
// or the hierarchical windows (tile_state.cuh); the same grid loading into registers, for
// Problems that cannot stage; and one tile per block, claimed in order, with the window chain.
#pragma once

#include <type_traits>

#include "../block/tile_scan.cuh"
#include "staging_ring.cuh"
#include "tile_reduce.cuh"
#include "tile_state.cuh"
#include "window_chain.cuh"

namespace parscan::cuda_detail {

/// Everything before tile k of sequence s, from the look-back the state is made for: the
/// hierarchical windows of tile_state.cuh, or the window chain (agent/window_chain.cuh).
/// Run by one whole warp with the tile's aggregate.
template <class Problem, class Op>
__device__ PARSCAN_INLINE maybe<typename Problem::acc_type> chained_prefix(const tile_state<typename Problem::acc_type>& st,
                                                                           const Problem& P, const Op& op,
                                                                           index_t tiles_per_sequence, index_t s, index_t k,
                                                                           const typename Problem::acc_type& aggregate,
                                                                           bool = false) {
  using Acc = typename Problem::acc_type;
  const maybe<Acc> carry = k < lookback_hyper ? P.initial(s) : maybe<Acc>{Acc{}, false};
  return lookback(st, s * tiles_per_sequence, k, aggregate, carry, op);
}
template <class Problem, class Op>
__device__ PARSCAN_INLINE maybe<typename Problem::acc_type> chained_prefix(
    const window_chain_state<typename Problem::acc_type>& st, const Problem& P, const Op& op, index_t tiles_per_sequence,
    index_t s, index_t k, const typename Problem::acc_type& aggregate, bool aggregate_published = false) {
  const index_t windows_per_sequence = (tiles_per_sequence + chain_window - 1) / chain_window;
  return window_chain_prefix(st, s * tiles_per_sequence, s * windows_per_sequence, k, aggregate,
                             [&] { return P.initial(s); }, op, aggregate_published);
}

// The persistent chained kernels below are launched cooperatively (every block resident at
// once) and take their tiles round-robin: worker u of U scans tiles u, u + U, u + 2U, ... in
// that order. A tile waits only on smaller tiles; the smallest unfinished tile belongs to a
// worker whose earlier tiles are all done, so that worker is scanning it, and the grid always
// makes progress. A worker's tiles are a grid apart, so the ones it holds in flight never wait
// on one another. (Claims from an atomic counter cost a round trip per tile, and a block that
// claimed two neighbouring tiles made every later look-back wait a whole tile: a 3-deep ring
// ran a 2^26-step scan 29× slower on an H100.)

/// Chained tiles with the worker's next Stages-1 tiles in flight (staging_ring). A worker is a
/// whole block, whose tile spans its warps, or, with WarpTiles, each warp on its own: a warp
/// tile needs no block barrier, so one warp's look-back never idles the others.
template <int Warps, int Chunks, int Stages, bool WarpTiles, class Problem, class Op, class State>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_chained_staged_kernel(Problem P, Op op, State st, index_t tiles_per_sequence, index_t total_tiles) {
  using Acc = typename Problem::acc_type;
  using ring_t = staging_ring<Warps, Chunks, Stages, Problem>;
  constexpr int tile_warps = WarpTiles ? 1 : Warps;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const ring_t ring{dynamic_smem};
  __shared__ tile_scan_smem<Acc, tile_warps> sm;  // unused by warp tiles
  const index_t warp = threadIdx.x / warp_threads;
  const index_t stride = WarpTiles ? static_cast<index_t>(gridDim.x) * Warps : gridDim.x;
  // Where this thread's warp starts in tile k of its sequence.
  auto segment = [&](index_t k) {
    return WarpTiles ? k * tile_steps<Problem, 1, Chunks> : segment_start<Warps, Chunks, Problem>(k);
  };
  auto stage = [&](index_t tile, int slot) {
    if (tile < total_tiles) ring.stage(P, P.at(tile / tiles_per_sequence), segment(tile % tiles_per_sequence), slot);
    async_commit();  // one group per tile, empty or not, so the wait below counts tiles
  };
  // Reduce ahead (the window chain, 3 or more stages): a block publishes the aggregate of its
  // next tile before the look-back of this one, so that no look-back waits for another block
  // to finish its own (a 2^28 int32 sum on an H100: 52.5% of copy with 2 stages, 54.6% reducing
  // ahead with 3; other designs measured are in docs/performance.md).
  constexpr bool reduce_ahead = std::is_same_v<State, window_chain_state<Acc>> && Stages >= 3 && !WarpTiles;
  __shared__ tile_reduce_smem<Acc, reduce_ahead ? Warps : 1> reduce_sm;
  // The first 32 windows of a sequence (window_chain_prefix: the tiles that may read the carry
  // in) publish their aggregates in their own look-backs.
  constexpr index_t ahead_from = static_cast<index_t>(chain_window) * chain_window;
  auto publish_aggregate = [&](index_t t, int slot) {
    if constexpr (reduce_ahead) {
      const index_t s = t / tiles_per_sequence, k = t % tiles_per_sequence;
      if (k < ahead_from) return;  // the same in every thread
      tile_items<Problem, Chunks> items;
      ring.load(P, P.at(s), segment(k), slot, items);
      const Acc total = reduce_tile<Warps, Chunks>(P, op, k, items, reduce_sm);
      if (threadIdx.x == 0) State::store(st.aggregate(t), total);
    }
  };
  index_t tile = WarpTiles ? blockIdx.x * Warps + warp : blockIdx.x;
  for (int i = 0; i < Stages - 1; ++i) stage(tile + i * stride, i);
  if constexpr (reduce_ahead) {
    async_wait<Stages - 2>();  // the first tile's group is complete
    if (tile < total_tiles) publish_aggregate(tile, 0);
  }
  for (int slot = 0; tile < total_tiles; tile += stride, slot = slot + 1 == Stages ? 0 : slot + 1) {
    // The slot refilled now was read back by the previous tile, and each lane refills only
    // runs it staged and read back itself, so no barrier is needed. (Refilling a slot as soon
    // as its tile was in registers, to keep Stages tiles in flight during the look-back,
    // measured 4 points lower on an H100: 9c3945d.)
    stage(tile + (Stages - 1) * stride, slot == 0 ? Stages - 1 : slot - 1);
    if constexpr (reduce_ahead) {
      async_wait<Stages - 2>();  // this tile's group and the next one's are complete
      if (tile + stride < total_tiles) publish_aggregate(tile + stride, slot + 1 == Stages ? 0 : slot + 1);
    } else {
      async_wait<Stages - 1>();  // this tile's group is complete
    }
    const index_t s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
    tile_items<Problem, Chunks> now;
    const auto cur = P.at(s);
    const unsigned staged = ring.load(P, cur, segment(k), slot, now);
    scan_tile<tile_warps, Chunks>(
        P, op, s, k, now, &sm,
        [&](const Acc& aggregate) {
          return chained_prefix(st, P, op, tiles_per_sequence, s, k, aggregate, reduce_ahead && k >= ahead_from);
        },
        [&](int j, index_t first, const Acc (&run)[Problem::run]) { ring.store(P, cur, first, slot, j, staged, run); });
  }
  async_wait<0>();
}

/// Chained tiles of one block each for Problems that cannot stage: the next tile is
/// prefetched into registers while the current one is scanned.
template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_chained_kernel(Problem P, Op op, tile_state<typename Problem::acc_type> st, index_t tiles_per_sequence,
                        index_t total_tiles) {
  using Acc = typename Problem::acc_type;
  using items = tile_items<Problem, Chunks>;
  __shared__ tile_scan_smem<Acc, Warps> sm;
  const index_t stride = gridDim.x;
  index_t tile = blockIdx.x;
  items now, next;
  if (tile < total_tiles) load_tile<Warps, Chunks>(P, tile / tiles_per_sequence, tile % tiles_per_sequence, now);
  for (; tile < total_tiles; tile += stride) {
    const index_t upcoming = tile + stride;
    if (upcoming < total_tiles)
      load_tile<Warps, Chunks>(P, upcoming / tiles_per_sequence, upcoming % tiles_per_sequence, next);
    const index_t s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
    scan_tile<Warps, Chunks>(P, op, s, k, now, &sm, [&](const Acc& aggregate) {
      return chained_prefix(st, P, op, tiles_per_sequence, s, k, aggregate);
    });
    now = next;
  }
}

/// Chained tiles: one tile of one sequence per block, tiles claimed from a counter so that they
/// start in order (agent/window_chain.cuh needs it), each tile's prefix from the window chain.
/// The tile is loaded straight into registers: with one tile per block and several blocks per
/// SM, the blocks that are loading cover the ones in their look-back.
template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_window_chain_kernel(Problem P, Op op, window_chain_state<typename Problem::acc_type> st, unsigned* tile_counter,
                             index_t tiles_per_sequence, index_t windows_per_sequence) {
  using Acc = typename Problem::acc_type;
  __shared__ tile_scan_smem<Acc, Warps> sm;
  __shared__ unsigned claimed;
  if (threadIdx.x == 0) claimed = atomicAdd(tile_counter, 1u);
  __syncthreads();
  const index_t tile = claimed, s = tile / tiles_per_sequence, k = tile % tiles_per_sequence;
  tile_items<Problem, Chunks> now;
  load_tile<Warps, Chunks>(P, s, k, now);
  scan_tile<Warps, Chunks>(P, op, s, k, now, &sm, [&](const Acc& aggregate) {
    return window_chain_prefix(st, tile - k, s * windows_per_sequence, k, aggregate, [&] { return P.initial(s); }, op);
  });
}

}  // namespace parscan::cuda_detail
