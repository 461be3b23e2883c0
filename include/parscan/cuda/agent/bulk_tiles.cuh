// parscan/cuda/agent/bulk_tiles.cuh — chained tiles staged whole through shared memory by the
// bulk copy engine (sm_90): the generic scans of a few long contiguous sequences, and the gated
// recurrence's forward (two inputs, a and b, staged side by side).
//
// A persistent grid of resident blocks; each block claims one tile at a time from a counter
// (so tiles start in index order, which the look-back needs: a tile waits only on smaller ones),
// and for each: one thread asks the copy engine for the whole tile (one instruction per input,
// no registers held), the block reduces it from shared memory, warp 0 runs the look-back (the
// first-ready chain, agent/first_ready_chain.cuh; the window chain, agent/window_chain.cuh, for
// values over 16 bytes: both deterministic), and the block scans it from shared memory, each
// lane storing its runs as it goes. A block that has finished a tile claims the
// next at once, whatever phase the SM's other blocks are in.
//
// Measured on an H200 (docs/performance.md, "Bulk tiles" and "First-ready tiles"; int32 sum at
// 2^28, % of copy, CUB 60-61%): with the window chain's look-back (agent/window_chain.cuh),
// persistent 8-warp blocks of 40 KB tiles, two per SM, 48%, and every block added per SM made
// each tile's look-back wait longer (38-43% with three to five); with the first-ready look-back,
// more blocks per SM gained instead: 8 warps, 44 KB tiles, five per SM (as many as shared memory
// holds) 71%, four warps with 24-36 KB tiles 67-72%, 16 KB tiles 55-66%. One tile per block
// (blocks start and retire between tiles) and a block that loads its next tile while it scans
// this one lost with either look-back (34-39% and 27-33% with the window chain, 44-62% with the
// first-ready one); cp.async instead of the copy engine, a bulk store instead of lane stores,
// tiles in blockIdx order instead of claimed, and a sleep between look-back polls changed
// nothing (window chain).
//
// Layout. A tile is Warps × Chunks chunks of 32 runs of V elements (V·sizeof(E) = 16 bytes, or
// V = 1 for elements that do not divide 16 bytes), in processing order; lane l of warp w reads
// run l of each of its Chunks chunks, so the shared-memory reads of a warp are consecutive
// bytes, free of bank conflicts. A sequence is cut into tiles of Warps × Chunks chunks and then,
// for the last tiles claimed, a tail of shorter tiles of TailChunks chunks (bulk_tiling); memory
// tiles start on those boundaries from the sequence's first element, and processing takes them
// first to last (forward) or last to first (reverse), so every bulk copy starts 16-byte aligned
// and only a sequence's last memory tile is partial (its final bytes past a 16-byte multiple are
// copied by hand).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../config.hpp"
#include "../thread/bulk_copy.cuh"
#include "../thread/grid_dependency.cuh"
#include "../warp/warp_shuffle.cuh"
#include "first_ready_chain.cuh"
#include "window_chain.cuh"

namespace parscan::cuda_detail {

/// Elements of type E per run: one 16-byte shared-memory access, or 1 for sizes that do not
/// divide 16 bytes (a 12- or 32-byte struct).
template <class E>
constexpr int bulk_run = 16 % sizeof(E) == 0 ? static_cast<int>(16 / sizeof(E)) : 1;

/// Chunks per warp for tiles of about TileBytes bytes over Warps warps.
template <class E, int Warps, int TileBytes>
constexpr int bulk_chunks_for = TileBytes / (Warps * warp_threads * bulk_run<E> * static_cast<int>(sizeof(E))) > 0
                                    ? TileBytes / (Warps * warp_threads * bulk_run<E> * static_cast<int>(sizeof(E)))
                                    : 1;

template <class E, int Warps, int Chunks>
constexpr index_t bulk_tile_steps = static_cast<index_t>(Warps) * Chunks * warp_threads * bulk_run<E>;

/// Whether Problem offers bulk tiles. Its inputs are `bulk_tensors` tensors of element type
/// `bulk_element`, laid out alike (the generic scans: one; the gated recurrence: a and b), its
/// output one tensor of `bulk_output`, of the same size (void where it has none); per call,
/// stages_bulk() says whether the sequences are contiguous and 16-byte aligned, and on the
/// device bulk_in(s, i) / bulk_out(s) give sequence s's first element of input i / the output,
/// bulk_items(e, items) makes the accumulators of a run of steps from their elements in each
/// input (e[i][v], in memory order: a run at once, so that a Problem can convert it in one
/// piece), and bulk_result(acc) the output element from an inclusive (or exclusive) prefix.
template <class Problem, class = void>
constexpr bool has_bulk_tiles = false;
template <class Problem>
constexpr bool has_bulk_tiles<Problem, std::void_t<typename Problem::bulk_output>> =
    !std::is_void_v<typename Problem::bulk_output>;

/// Whether Problem can reduce bulk tiles: an input element type `bulk_element` (not void) and,
/// per call, stages_bulk_input() and bulk_in(s, i).
template <class Problem, class = void>
constexpr bool has_bulk_input = false;
template <class Problem>
constexpr bool has_bulk_input<Problem, std::void_t<typename Problem::bulk_element>> =
    !std::is_void_v<typename Problem::bulk_element>;

/// Bytes of one input tensor's part of a staged tile of `Steps` steps: the inputs lie one after
/// another in shared memory.
template <class Problem, index_t Steps>
constexpr index_t bulk_tensor_bytes = Steps * static_cast<index_t>(sizeof(typename Problem::bulk_element));

template <class Acc, int Warps>
struct bulk_tile_storage {
  Acc warp_total[Warps];
  maybe<Acc> warp_prefix[Warps];
  std::uint64_t loaded;  // the bulk load's barrier
  unsigned claimed;
};

template <class Acc, int Warps>
struct alignas(16) bulk_tile_smem {
  alignas(alignof(bulk_tile_storage<Acc, Warps>)) unsigned char raw[sizeof(bulk_tile_storage<Acc, Warps>)];
  __device__ PARSCAN_INLINE bulk_tile_storage<Acc, Warps>& get() {
    return *reinterpret_cast<bulk_tile_storage<Acc, Warps>*>(raw);
  }
};

/// Reads the run of V steps at processing position p of a tile of `count` steps staged in
/// `tile` (input n at tile + n·tensor_bytes), in processing order. Full runs of a full tile are
/// one 16-byte access per input; otherwise one element at a time, and only those before
/// `count`. `reverse` comes as a value, not read from P here: reading P.reverse in these
/// helpers changed the int32 sum's SASS and cost it 1.5–2 points of copy at 2^28 (H100, three
/// builds in one run: 85.6–85.9% before, 83.2–84.4% so, 84.8–85.5% with the value).
template <int V, bool Full, class Problem>
__device__ PARSCAN_INLINE void read_bulk_run(const Problem& P, const unsigned char* tile, index_t tensor_bytes,
                                             index_t count, index_t p, bool reverse,
                                             typename Problem::acc_type (&x)[V]) {
  using E = typename Problem::bulk_element;
  constexpr int N = Problem::bulk_tensors;
  if constexpr (Full && V > 1) {
    // count is a multiple of V here, so the reversed run is aligned too.
    const index_t lo = reverse ? count - V - p : p;
    E raw[N][V];
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const uint4 w = *reinterpret_cast<const uint4*>(reinterpret_cast<const E*>(tile + n * tensor_bytes) + lo);
      memcpy(raw[n], &w, sizeof(w));
    }
    // Each arm converts into x itself (renaming, no moves); one arm with a computed index
    // would put raw in local memory.
    if (reverse) {
      typename Problem::acc_type items[V];
      P.bulk_items(raw, items);
#pragma unroll
      for (int v = 0; v < V; ++v) x[v] = items[V - 1 - v];
    } else {
      P.bulk_items(raw, x);
    }
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) {
      if (Full || p + v < count) {
        const index_t i = reverse ? count - 1 - (p + v) : p + v;
        E e[N][1];
#pragma unroll
        for (int n = 0; n < N; ++n) e[n][0] = reinterpret_cast<const E*>(tile + n * tensor_bytes)[i];
        typename Problem::acc_type item[1];
        P.bulk_items(e, item);
        x[v] = item[0];
      } else {
        x[v] = typename Problem::acc_type{};
      }
    }
  }
}

/// Writes a run, as the Problem's output elements, to the output (`o`, the tile's first
/// element), where read_bulk_run read it in the staged tile.
template <int V, bool Full, class Problem>
__device__ PARSCAN_INLINE void write_bulk_run(const Problem& P, typename Problem::bulk_output* o, index_t count,
                                              index_t p, bool reverse, const typename Problem::acc_type (&x)[V]) {
  using O = typename Problem::bulk_output;
  if constexpr (Full && V > 1) {
    const index_t lo = reverse ? count - V - p : p;
    O raw[V];
    if (reverse) {
#pragma unroll
      for (int v = 0; v < V; ++v) raw[V - 1 - v] = P.bulk_result(x[v]);
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) raw[v] = P.bulk_result(x[v]);
    }
    uint4 w;
    memcpy(&w, raw, sizeof(w));
    *reinterpret_cast<uint4*>(o + lo) = w;
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (Full || p + v < count) o[reverse ? count - 1 - (p + v) : p + v] = P.bulk_result(x[v]);
  }
}

/// Step 1 of a staged tile of Chunks chunks a warp (in a buffer laid out for StagedChunks: the
/// inputs lie that many chunks' bytes apart): each warp's total, chunk by chunk in order (a chunk past the end
/// takes no part), into sm.warp_total; then (after a block barrier) the tile's aggregate over
/// the warps that have elements, returned in every lane of warp 0.
template <bool Full, int Warps, int Chunks, int StagedChunks = Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE typename Problem::acc_type reduce_bulk_tile(
    const Problem& P, const Op& op, const unsigned char* tile, index_t count,
    bulk_tile_storage<typename Problem::acc_type, Warps>& sm) {
  using Acc = typename Problem::acc_type;
  using E = typename Problem::bulk_element;
  constexpr int V = bulk_run<E>;
  constexpr index_t chunk = static_cast<index_t>(warp_threads) * V;
  constexpr index_t tensor_bytes = bulk_tensor_bytes<Problem, bulk_tile_steps<E, Warps, StagedChunks>>;
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  const index_t segment = static_cast<index_t>(warp) * Chunks * chunk;
  maybe<Acc> total{Acc{}, false};
#pragma unroll
  for (int j = 0; j < Chunks; ++j) {
    const index_t first = segment + j * chunk;
    if (!Full && first >= count) break;  // the same in every lane
    const index_t p = first + lane * V;
    Acc x[V];
    read_bulk_run<V, Full>(P, tile, tensor_bytes, count, p, P.reverse, x);
    Acc fold = x[0];
    int lanes = warp_threads;
    if constexpr (Full) {
#pragma unroll
      for (int v = 1; v < V; ++v) fold = op(fold, x[v]);
    } else {
#pragma unroll
      for (int v = 1; v < V; ++v)
        if (p + v < count) fold = op(fold, x[v]);
      const index_t left = count - first;
      lanes = left >= chunk ? warp_threads : static_cast<int>((left + V - 1) / V);
    }
    // Valid in lane 0, the only lane that publishes it.
    total = combine(total, maybe<Acc>{warp_ordered_reduce(fold, lanes, op), true}, op);
  }
  if (lane == 0) sm.warp_total[warp] = total.value;
  __syncthreads();
  Acc aggregate{};
  if (warp == 0) {
    const int warps = Full ? Warps : static_cast<int>((count + Chunks * chunk - 1) / (Chunks * chunk));
    aggregate = shfl_idx(warp_ordered_reduce(sm.warp_total[lane < warps ? lane : 0], warps, op), 0);
  }
  return aggregate;
}

/// Step 2, warp 0 only: the tile's prefix (`prefix`, from the look-back) and the warp totals of
/// step 1 give each warp's prefix, into sm.warp_prefix (read after a block barrier).
template <int Warps, class Acc, class Op>
__device__ PARSCAN_INLINE void spread_bulk_prefix(const maybe<Acc>& prefix, const Op& op,
                                                  bulk_tile_storage<Acc, Warps>& sm) {
  const int lane = lane_id();
  const Acc inclusive = warp_inclusive_scan(sm.warp_total[lane < Warps ? lane : 0], op);
  const Acc before = shfl_up(inclusive, 1);
  if (lane < Warps) sm.warp_prefix[lane] = lane == 0 ? prefix : combine(prefix, maybe<Acc>{before, true}, op);
}

/// Step 3: the scan from each warp's prefix, into `result` (the output at the tile's first
/// element). Its chunk loop is step 1's written out again: a shared loop handing each run to a
/// lambda by reference grew the kernel's PTX by a third (more unrolled shuffles).
template <bool Full, int Warps, int Chunks, int StagedChunks = Chunks, class Problem, class Op>
__device__ PARSCAN_INLINE void scan_bulk_runs(const Problem& P, const Op& op, index_t s, bool last_tile,
                                              const unsigned char* tile, typename Problem::bulk_output* result,
                                              index_t count, bulk_tile_storage<typename Problem::acc_type, Warps>& sm) {
  using Acc = typename Problem::acc_type;
  using E = typename Problem::bulk_element;
  constexpr int V = bulk_run<E>;
  constexpr index_t chunk = static_cast<index_t>(warp_threads) * V;
  constexpr index_t tensor_bytes = bulk_tensor_bytes<Problem, bulk_tile_steps<E, Warps, StagedChunks>>;
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  const index_t segment = static_cast<index_t>(warp) * Chunks * chunk;
  maybe<Acc> run = sm.warp_prefix[warp];
#pragma unroll
  for (int j = 0; j < Chunks; ++j) {
    const index_t first = segment + j * chunk;
    if (!Full && first >= count) break;
    const index_t p = first + lane * V;
    Acc x[V];
    read_bulk_run<V, Full>(P, tile, tensor_bytes, count, p, P.reverse, x);
    Acc fold = x[0];
#pragma unroll
    for (int v = 1; v < V; ++v) fold = op(fold, x[v]);  // runs past the end fold garbage after
    const Acc lane_inclusive = warp_inclusive_scan(fold, op);  // every valid element: unused
    const Acc lane_before = shfl_up(lane_inclusive, 1);
    const Acc chunk_total = shfl_idx(lane_inclusive, warp_threads - 1);
    const maybe<Acc> lane_prefix = lane == 0 ? run : combine(run, maybe<Acc>{lane_before, true}, op);
    Acc r = lane_prefix.value;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const Acc e = x[v];
      if (P.exclusive) x[v] = r;
      r = (v == 0 && !lane_prefix.has) ? e : op(r, e);
      if (!P.exclusive) x[v] = r;
      if (!Full && last_tile && p + v == count - 1) P.finish(s, r);
    }
    if (Full && last_tile && p + V == count) P.finish(s, r);  // a full tile's last step ends a run
    write_bulk_run<V, Full>(P, result, count, p, P.reverse, x);
    run = combine(run, maybe<Acc>{chunk_total, true}, op);
  }
}

/// How the tiles of a sequence are cut: `tiles_per_sequence` tiles, the first `body_tiles` in
/// processing order of the shape's tile and the rest (the tail) of its tail tile, so the last
/// tiles a grid claims are short and the grid's blocks finish together (a 44 KB tile's life is
/// about 17 µs on an H200, and blocks left without a tile idle for most of it).
struct bulk_tiling {
  index_t tiles_per_sequence = 0, body_tiles = 0;
};

/// Where tile t lies (bulk tiles of `tile_steps` steps, tail tiles of TailSteps). Memory tiles
/// start on those boundaries counted from a sequence's first element, so every bulk copy starts
/// 16-byte aligned: forward the tail lies at the end of memory, reverse at its start, and only
/// the last memory tile is partial.
struct bulk_tile_place {
  index_t s, k, begin, count;
  unsigned bytes, bulk_bytes;
};
template <index_t TailSteps, class Problem>
__device__ PARSCAN_INLINE bulk_tile_place place_bulk_tile(const Problem& P, index_t t, const bulk_tiling& g,
                                                          index_t tile_steps) {
  bulk_tile_place w;
  w.s = t / g.tiles_per_sequence;
  w.k = t % g.tiles_per_sequence;
  index_t steps = tile_steps;
  if constexpr (TailSteps == 0) {
    const index_t m = P.reverse ? g.tiles_per_sequence - 1 - w.k : w.k;  // the memory tile
    w.begin = m * tile_steps;
  } else {
    const index_t tail_tiles = g.tiles_per_sequence - g.body_tiles;
    if (w.k >= g.body_tiles) {
      steps = TailSteps;
      w.begin = P.reverse ? (g.tiles_per_sequence - 1 - w.k) * TailSteps
                          : g.body_tiles * tile_steps + (w.k - g.body_tiles) * TailSteps;
    } else {
      w.begin = P.reverse ? tail_tiles * TailSteps + (g.body_tiles - 1 - w.k) * tile_steps : w.k * tile_steps;
    }
  }
  w.count = P.length - w.begin < steps ? P.length - w.begin : steps;
  w.bytes = static_cast<unsigned>(w.count * sizeof(typename Problem::bulk_element));
  w.bulk_bytes = w.bytes & ~15u;
  return w;
}
/// Where tile t lies in sequences cut into tiles of `tile_steps` alone.
template <class Problem>
__device__ PARSCAN_INLINE bulk_tile_place place_bulk_tile(const Problem& P, index_t t, index_t tiles_per_sequence,
                                                          index_t tile_steps) {
  return place_bulk_tile<0>(P, t, bulk_tiling{tiles_per_sequence, tiles_per_sequence}, tile_steps);
}

/// Where a staged tile comes from: each input's first element of the tile.
template <int Tensors>
struct bulk_sources {
  const unsigned char* at[Tensors];
};
template <class Problem>
__device__ PARSCAN_INLINE bulk_sources<Problem::bulk_tensors> bulk_sources_of(const Problem& P,
                                                                              const bulk_tile_place& w) {
  bulk_sources<Problem::bulk_tensors> src;
#pragma unroll
  for (int n = 0; n < Problem::bulk_tensors; ++n)
    src.at[n] = reinterpret_cast<const unsigned char*>(P.bulk_in(w.s, n) + w.begin);
  return src;
}

/// One thread: asks the copy engine for tile w of every input (input n to tile + n·tensor_bytes;
/// the whole 16-byte words of each), counted on `loaded`.
template <int Tensors>
__device__ PARSCAN_INLINE void stage_bulk_tile(const bulk_sources<Tensors>& src, const bulk_tile_place& w,
                                               unsigned char* tile, index_t tensor_bytes, const bulk_barrier& loaded) {
  loaded.expect(Tensors * w.bulk_bytes);
#pragma unroll
  for (int n = 0; n < Tensors; ++n) loaded.copy(tile + n * tensor_bytes, src.at[n], w.bulk_bytes);
}

/// Every thread: completes the staging of tile w in `tile` — copies by hand each input's bytes
/// past the bulk copy's 16-byte multiple, waits for the copies of phase `parity` — then a block
/// barrier, so the whole tile is visible to every thread. (Given the Problem instead of the
/// sources, it computed the sequence's offset again after the copy's asm: one more 64-bit
/// division per tile.)
template <int Tensors>
__device__ PARSCAN_INLINE void land_bulk_tile(const bulk_sources<Tensors>& src, const bulk_tile_place& w,
                                              unsigned char* tile, index_t tensor_bytes, const bulk_barrier& loaded,
                                              unsigned parity) {
  if (threadIdx.x < w.bytes - w.bulk_bytes) {
#pragma unroll
    for (int n = 0; n < Tensors; ++n)
      tile[n * tensor_bytes + w.bulk_bytes + threadIdx.x] = src.at[n][w.bulk_bytes + threadIdx.x];
  }
  loaded.wait(parity);
  __syncthreads();
}

/// The prefix of tile t (place w) from the chain whose state is `st`, run by warp 0.
template <class Acc, class Op, class CarryIn>
__device__ PARSCAN_INLINE maybe<Acc> bulk_tile_prefix(const first_ready_state<Acc>& st, const bulk_tile_place& w,
                                                      index_t t, index_t, const Acc& aggregate, CarryIn&& carry_in,
                                                      const Op& op) {
  return first_ready_prefix(st, t - w.k, w.k, aggregate, carry_in, op);
}
template <class Acc, class Op, class CarryIn>
__device__ PARSCAN_INLINE maybe<Acc> bulk_tile_prefix(const window_chain_state<Acc>& st, const bulk_tile_place& w,
                                                      index_t t, index_t windows_per_sequence, const Acc& aggregate,
                                                      CarryIn&& carry_in, const Op& op) {
  return window_chain_prefix(st, t - w.k, w.s * windows_per_sequence, w.k, aggregate, carry_in, op);
}

/// The persistent kernel: every block claims tiles until none is left; a tile's elements are
/// staged in dynamic shared memory (bulk_tile_steps · sizeof(E) bytes per input). Tiles of
/// Chunks chunks a warp, then (with TailChunks > 0) a tail of tiles of TailChunks (bulk_tiling).
/// MinBlocks: the blocks per SM that its registers must allow. Chain: the look-back's state,
/// first_ready_state or window_chain_state (windows_per_sequence is the latter's).
template <int Warps, int Chunks, int TailChunks, int MinBlocks, class Problem, class Op, class Chain>
__global__ void __launch_bounds__(Warps* warp_threads, MinBlocks)
    scan_bulk_tiles_kernel(Problem P, Op op, Chain st, unsigned* tile_counter, bulk_tiling tiling,
                           index_t windows_per_sequence, index_t total_tiles) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Acc = typename Problem::acc_type;
  using E = typename Problem::bulk_element;
  constexpr index_t tile_steps = bulk_tile_steps<E, Warps, Chunks>;
  constexpr index_t tail_steps = TailChunks > 0 ? bulk_tile_steps<E, Warps, TailChunks> : 0;
  static_assert(TailChunks < Chunks, "tail tiles are shorter");
  constexpr index_t tensor_bytes = bulk_tensor_bytes<Problem, tile_steps>;
  extern __shared__ __align__(128) unsigned char tile[];
  __shared__ bulk_tile_smem<Acc, Warps> storage;
  auto& sm = storage.get();
  const bulk_barrier loaded{&sm.loaded};
  if (threadIdx.x == 0) {
    loaded.init();
    // Launched to start early, after the grid that zeroes the state and the counter
    // (launch_bulk_tiles), the block has started while that grid runs: it waits for it before
    // its first claim. (In a plain launch the wait returns at once.)
    wait_for_prerequisite_grids();
  }
  for (unsigned parity = 0;; parity ^= 1u) {
    // Also keeps the next load out of shared memory until every thread is done with this tile.
    if (threadIdx.x == 0) sm.claimed = atomicAdd(tile_counter, 1u);
    __syncthreads();
    const index_t t = sm.claimed;
    if (t >= total_tiles) return;  // the same in every thread
    const bulk_tile_place w = place_bulk_tile<tail_steps>(P, t, tiling, tile_steps);
    const auto src = bulk_sources_of(P, w);
    if (threadIdx.x == 0) stage_bulk_tile(src, w, tile, tensor_bytes, loaded);
    land_bulk_tile(src, w, tile, tensor_bytes, loaded, parity);

    // A full tile, a full tail tile, or a partial one of either (the body's loop stops at count).
    const bool full = w.count == tile_steps, full_tail = TailChunks > 0 && w.count == tail_steps;
    const Acc aggregate = full        ? reduce_bulk_tile<true, Warps, Chunks, Chunks>(P, op, tile, w.count, sm)
                          : full_tail ? reduce_bulk_tile<true, Warps, TailChunks, Chunks>(P, op, tile, w.count, sm)
                                      : reduce_bulk_tile<false, Warps, Chunks, Chunks>(P, op, tile, w.count, sm);
    if (threadIdx.x < warp_threads) {
      const maybe<Acc> prefix =
          bulk_tile_prefix(st, w, t, windows_per_sequence, aggregate, [&] { return P.initial(w.s); }, op);
      spread_bulk_prefix(prefix, op, sm);
    }
    __syncthreads();  // the warps' prefixes
    auto* const out = P.bulk_out(w.s) + w.begin;
    const bool last_tile = w.k == tiling.tiles_per_sequence - 1;
    if (full) scan_bulk_runs<true, Warps, Chunks, Chunks>(P, op, w.s, last_tile, tile, out, w.count, sm);
    else if (full_tail) scan_bulk_runs<true, Warps, TailChunks, Chunks>(P, op, w.s, last_tile, tile, out, w.count, sm);
    else scan_bulk_runs<false, Warps, Chunks, Chunks>(P, op, w.s, last_tile, tile, out, w.count, sm);
  }
#else
  __trap();  // never launched: launch_bulk_tiles checks that the kernel was built for sm_90
#endif
}

}  // namespace parscan::cuda_detail
