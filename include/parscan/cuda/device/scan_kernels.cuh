// parscan/cuda/device/scan_kernels.cuh — the grid-level kernels. Two ways to cover a batch:
//
//  * warp loop: each warp owns whole sequences and walks their tiles in order, carrying the
//    running prefix in registers. No barriers and no inter-block traffic; chosen when there
//    are enough sequences to give every resident warp its own.
//  * chained tiles, for fewer, longer sequences, in one of two forms (tile_shape_of's
//    WindowChain): one tile per block, claimed in order, each tile's prefix from the window
//    chain (agent/window_chain.cuh); or a persistent, cooperatively launched grid that takes
//    tiles round-robin, each tile's prefix from the hierarchical look-back of tile_state.cuh.
//  * lane tiles: 32 adjacent sequences per tile (channel-last), with the look-back of
//    tile_state.cuh, one sequence per lane.
#pragma once

#include <type_traits>

#include "../block/lane_tile_scan.cuh"
#include "../thread/run_io.cuh"
#include "../block/tile_scan.cuh"
#include "../agent/tile_reduce.cuh"
#include "../agent/window_chain.cuh"
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

/// A ring of Stages tiles per block in dynamic shared memory, filled by cp.async so that loads
/// stay in flight without holding registers. Every lane copies its own 16-byte runs and later
/// reads back only those, so no barrier is needed between a copy and its read; a run that
/// cannot be staged (misaligned, strided, the sequence's end) is read directly instead.
template <int BlockWarps, int Chunks, int Stages, class Problem>
struct staging_ring {
  static constexpr int V = Problem::run;
  static constexpr index_t chunk = static_cast<index_t>(warp_threads) * V;
  static constexpr int tensor_stride = warp_threads * 16;  // one 16-byte run per lane
  static constexpr int chunk_bytes = Problem::staged_tensors * tensor_stride;
  static constexpr int slot_bytes = BlockWarps * Chunks * chunk_bytes;
  static constexpr int mask_bytes = BlockWarps * warp_threads * static_cast<int>(sizeof(unsigned));
  static constexpr int bytes = Stages * (slot_bytes + mask_bytes);
  unsigned char* base;

  __device__ PARSCAN_INLINE unsigned char* run_at(int slot, int j) const {
    const int warp = static_cast<int>(threadIdx.x) / warp_threads;
    return base + slot * slot_bytes + (warp * Chunks + j) * chunk_bytes + lane_id() * 16;
  }
  // Bit j: chunk j of this lane's runs in `slot` was staged.
  __device__ PARSCAN_INLINE unsigned& staged(int slot) const {
    return reinterpret_cast<unsigned*>(base + Stages * slot_bytes)[slot * BlockWarps * warp_threads + threadIdx.x];
  }
  /// Starts copying this warp's segment (from step `segment`) of sequence s into `slot`.
  __device__ PARSCAN_INLINE void stage(const Problem& P, index_t s, index_t segment, int slot) const {
    const auto cur = P.at(s);
    unsigned mask = 0;
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
      if (P.stage_run(cur, segment + j * chunk + lane_id() * V, run_at(slot, j), tensor_stride)) mask |= 1u << j;
    staged(slot) = mask;
  }
  /// The segment staged in `slot`, into registers (after the copies have been waited for).
  __device__ PARSCAN_INLINE void load(const Problem& P, index_t s, index_t segment, int slot,
                                      tile_items<Problem, Chunks>& items) const {
    const auto cur = P.at(s);
    const unsigned mask = staged(slot);
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
      P.load_staged(cur, segment + j * chunk + lane_id() * V, run_at(slot, j), tensor_stride, (mask >> j) & 1u,
                    items.v[j]);
  }
};

/// The warp loop with the next Stages-1 tiles of the warp's sequence in flight (staging_ring).
template <int Warps, int Chunks, int Stages, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    scan_warp_loop_staged_kernel(Problem P, Op op, index_t sequences) {
  using Acc = typename Problem::acc_type;
  using ring_t = staging_ring<Warps, Chunks, Stages, Problem>;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const ring_t ring{dynamic_smem};
  constexpr index_t tile = tile_steps<Problem, 1, Chunks>;
  const index_t tiles = (P.length + tile - 1) / tile;
  const index_t first_warp = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t s = first_warp; s < sequences; s += all_warps) {
    maybe<Acc> running = P.initial(s);
    for (index_t k = 0; k < Stages - 1; ++k) {
      if (k < tiles) ring.stage(P, s, k * tile, static_cast<int>(k));
      async_commit();  // one group per tile, empty or not, so the wait below counts tiles
    }
    for (index_t k = 0; k < tiles; ++k) {
      const index_t ahead = k + Stages - 1;
      if (ahead < tiles) ring.stage(P, s, ahead * tile, static_cast<int>(ahead % Stages));
      async_commit();
      async_wait<Stages - 1>();  // tile k's group is complete
      tile_items<Problem, Chunks> now;
      ring.load(P, s, k * tile, static_cast<int>(k % Stages), now);
      scan_tile<1, Chunks>(P, op, s, k, now, static_cast<tile_scan_smem<Acc, 1>*>(nullptr), [&](const Acc& aggregate) {
        const maybe<Acc> before = running;
        running = combine(running, maybe<Acc>{aggregate, true}, op);
        return before;
      });
    }
    async_wait<0>();
    __syncwarp();  // the next sequence's copies reuse the slots this warp just read
  }
}

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
    if (tile < total_tiles) ring.stage(P, tile / tiles_per_sequence, segment(tile % tiles_per_sequence), slot);
    async_commit();  // one group per tile, empty or not, so the wait below counts tiles
  };
  // Reduce ahead (the window chain, 3 or more stages): a block publishes the aggregate of its
  // next tile before the look-back of this one, so that no look-back waits for another block
  // to finish its own. (Publishing each aggregate in its own turn held a 2^28 int32 sum at 54%
  // of copy on an H100, reducing ahead at 61%; a look-back that needs nothing but aggregates,
  // each block recomputing group totals itself, measured 52%: docs/performance.md.)
  constexpr bool reduce_ahead = std::is_same_v<State, window_chain_state<Acc>> && Stages >= 3 && !WarpTiles;
  __shared__ tile_reduce_smem<Acc, reduce_ahead ? Warps : 1> reduce_sm;
  auto publish_aggregate = [&](index_t t, int slot) {
    if constexpr (reduce_ahead) {
      const index_t s = t / tiles_per_sequence, k = t % tiles_per_sequence;
      tile_items<Problem, Chunks> items;
      ring.load(P, s, segment(k), slot, items);
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
    ring.load(P, s, segment(k), slot, now);
    scan_tile<tile_warps, Chunks>(P, op, s, k, now, &sm, [&](const Acc& aggregate) {
      return chained_prefix(st, P, op, tiles_per_sequence, s, k, aggregate, reduce_ahead);
    });
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

/// A reduce of few long sequences, first pass: block b folds the tiles of span b % spans of
/// sequence b / spans, in order, into partials[b]. Spans are sized from the length alone, so
/// the order of every combination is fixed. The next tile loads while this one is reduced.
template <int Warps, int Chunks, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    reduce_spans_kernel(Problem P, Op op, typename Problem::acc_type* partials, index_t tiles_per_sequence,
                        index_t tiles_per_span, index_t spans_per_sequence) {
  using Acc = typename Problem::acc_type;
  const index_t s = blockIdx.x / spans_per_sequence, span = blockIdx.x % spans_per_sequence;
  const index_t first = span * tiles_per_span;
  const index_t end = first + tiles_per_span < tiles_per_sequence ? first + tiles_per_span : tiles_per_sequence;
  tile_items<Problem, Chunks> now, next;
  load_tile<Warps, Chunks>(P, s, first, now);
  if constexpr (swaps_operands<Op, Acc>) {
    // Each thread folds its own items across the span; the block combines them once.
    __shared__ maybe<Acc> warp_folds[Warps];
    maybe<Acc> mine{Acc{}, false};
    for (index_t k = first; k < end; ++k) {
      if (k + 1 < end) load_tile<Warps, Chunks>(P, s, k + 1, next);
      fold_thread_items<Warps, Chunks>(P, op, k, now, mine);
      now = next;
    }
    const maybe<Acc> total = reduce_thread_folds<Warps>(mine, op, warp_folds);
    if (threadIdx.x == 0) partials[blockIdx.x] = total.value;
    return;
  }
  __shared__ tile_reduce_smem<Acc, Warps> sm;
  Acc total = Acc{};
  for (index_t k = first; k < end; ++k) {
    if (k + 1 < end) load_tile<Warps, Chunks>(P, s, k + 1, next);
    const Acc t = reduce_tile<Warps, Chunks>(P, op, k, now, sm);
    total = k == first ? t : op(total, t);
    now = next;
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

/// Second pass: one block per sequence folds its spans' partials (thread i a fixed run of
/// them, in order, then the threads in one tree), after the sequence's carry in, and finishes.
template <int Threads, class Problem, class Op>
__global__ void __launch_bounds__(Threads)
    reduce_partials_kernel(Problem P, Op op, const typename Problem::acc_type* partials, index_t spans_per_sequence) {
  using Acc = typename Problem::acc_type;
  constexpr int warps = Threads / warp_threads;
  __shared__ tile_reduce_smem<Acc, warps> sm;
  const index_t s = blockIdx.x;
  const index_t per_thread = (spans_per_sequence + Threads - 1) / Threads;
  const index_t first = threadIdx.x * per_thread;
  const index_t end = first + per_thread < spans_per_sequence ? first + per_thread : spans_per_sequence;
  const Acc* mine = partials + s * spans_per_sequence;
  Acc fold = first < end ? mine[first] : Acc{};
  for (index_t i = first + 1; i < end; ++i) fold = op(fold, mine[i]);
  // Threads with partials are a prefix of the block, and so are the warps.
  const index_t threads_with = (spans_per_sequence + per_thread - 1) / per_thread;
  const int warp = static_cast<int>(threadIdx.x) / warp_threads;
  const index_t in_warp = threads_with - static_cast<index_t>(warp) * warp_threads;
  const Acc warp_total = warp_ordered_reduce(fold, in_warp <= 0 ? 1 : in_warp >= warp_threads ? warp_threads : static_cast<int>(in_warp), op);
  auto& st = sm.get();
  if (lane_id() == 0) st.warp_total[warp] = warp_total;
  __syncthreads();
  if (warp == 0) {
    const Acc v = st.warp_total[lane_id() < warps ? lane_id() : 0];
    const int warps_with = static_cast<int>((threads_with + warp_threads - 1) / warp_threads);
    const Acc total = warp_ordered_reduce(v, warps_with, op);
    if (lane_id() == 0) P.finish(s, combine(P.initial(s), maybe<Acc>{total, true}, op).value);
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
    const maybe<Acc> carry = k < lookback_hyper && s < sequences ? P.initial(s) : maybe<Acc>{Acc{}, false};
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
