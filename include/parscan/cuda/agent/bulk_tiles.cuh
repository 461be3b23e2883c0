// parscan/cuda/agent/bulk_tiles.cuh — chained tiles staged whole through shared memory by the
// bulk copy engine (sm_90): for the generic scans of a few long contiguous sequences.
//
// Why this shape. Every earlier design of the chained scan kept the tile in registers or in a
// cp.async ring, so a block's memory traffic stopped while its warps waited for the look-back,
// and with a persistent grid the SM's other block was waiting in the same phase (ncu at 2^28:
// DRAM 46% of peak, 57% of copy; docs/performance.md). Here a block owns one tile: one thread
// asks the copy engine for the whole tile (one instruction, no registers held), the block
// reduces it from shared memory, warp 0 runs the window chain's look-back
// (agent/window_chain.cuh, deterministic), the block scans it in shared memory, and one thread
// hands it back to the engine. Many such blocks share an SM (shared memory, not registers,
// holds the tiles in flight), each in its own phase, so loads and stores stay in flight while
// some of them wait — CUB's shape of many independent blocks, without its nondeterministic
// first-ready look-back.
//
// Layout. A tile is Warps × Chunks chunks of 32 runs of V elements (V·sizeof(E) = 16 bytes, or
// V = 1 for elements that do not divide 16 bytes), in processing order; lane l of warp w reads
// run l of each of its Chunks chunks, so the shared-memory reads of a warp are 512 consecutive
// bytes, free of bank conflicts. Memory tile m holds elements [m·tile, (m+1)·tile) of the
// sequence; processing tile k is memory tile k (forward) or tiles − 1 − k (reverse), so every
// bulk copy starts on a tile boundary, 16-byte aligned, and only a sequence's last memory tile
// is partial (its final bytes past a 16-byte multiple go element by element).
//
// Tiles are claimed from a counter so that they start in index order, which the window chain
// needs (its tiles wait only on smaller ones).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../config.hpp"
#include "../thread/bulk_copy.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"
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

/// Whether Problem offers bulk tiles: element types `bulk_element` (input) and `bulk_output`
/// (output, of the same size), void where it has none, and per call stages_bulk() (contiguous,
/// aligned sequences) with bulk_in(s) / bulk_out(s), the sequence's first element.
template <class Problem, class = void>
constexpr bool has_bulk_tiles = false;
template <class Problem>
constexpr bool has_bulk_tiles<Problem, std::void_t<typename Problem::bulk_element>> =
    !std::is_void_v<typename Problem::bulk_element>;

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

/// Reads the run of V elements at processing position p of a tile of `count` elements staged in
/// `tile`, in processing order. Full runs of a full tile are one 16-byte access; otherwise one
/// element at a time, and only those before `count`.
template <int V, bool Full, class E, class Acc>
__device__ PARSCAN_INLINE void read_bulk_run(const unsigned char* tile, index_t count, index_t p, bool reverse,
                                             Acc (&x)[V]) {
  const E* e = reinterpret_cast<const E*>(tile);
  if constexpr (Full && V > 1) {
    // count is a multiple of V here, so the reversed run is aligned too.
    const index_t lo = reverse ? count - V - p : p;
    const uint4 w = *reinterpret_cast<const uint4*>(e + lo);
    E raw[V];
    memcpy(raw, &w, sizeof(w));
    // Two loops, not one with a computed index, which would put raw in local memory.
    if (reverse) {
#pragma unroll
      for (int v = 0; v < V; ++v) x[v] = static_cast<Acc>(raw[V - 1 - v]);
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) x[v] = static_cast<Acc>(raw[v]);
    }
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v)
      x[v] = Full || p + v < count ? static_cast<Acc>(e[reverse ? count - 1 - (p + v) : p + v]) : Acc{};
  }
}

/// Writes a run, converted to the output's element O, where read_bulk_run read it: in the
/// staged tile or in the output (`o`, the tile's first element either way).
template <int V, bool Full, class O, class Acc>
__device__ PARSCAN_INLINE void write_bulk_run(O* o, index_t count, index_t p, bool reverse, const Acc (&x)[V]) {
  if constexpr (Full && V > 1) {
    const index_t lo = reverse ? count - V - p : p;
    O raw[V];
    if (reverse) {
#pragma unroll
      for (int v = 0; v < V; ++v) raw[V - 1 - v] = static_cast<O>(x[v]);
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) raw[v] = static_cast<O>(x[v]);
    }
    uint4 w;
    memcpy(&w, raw, sizeof(w));
    *reinterpret_cast<uint4*>(o + lo) = w;
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (Full || p + v < count) o[reverse ? count - 1 - (p + v) : p + v] = static_cast<O>(x[v]);
  }
}

/// The scan of one staged tile: reduce, look-back (warp 0, through `tile_prefix`), scan into
/// `result` (the staged tile itself or the output). Full: the tile has all its elements
/// (count = tile); otherwise its valid elements are the first `count` in processing order and
/// the rest take no part.
template <bool Full, int Warps, int Chunks, class Problem, class Op, class TilePrefix>
__device__ PARSCAN_INLINE void scan_bulk_tile(const Problem& P, const Op& op, index_t s, bool last_tile,
                                              const unsigned char* tile, typename Problem::bulk_output* result,
                                              index_t count,
                                              bulk_tile_storage<typename Problem::acc_type, Warps>& sm,
                                              TilePrefix&& tile_prefix) {
  using Acc = typename Problem::acc_type;
  using E = typename Problem::bulk_element;
  using O = typename Problem::bulk_output;
  constexpr int V = bulk_run<E>;
  constexpr index_t chunk = static_cast<index_t>(warp_threads) * V;
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  const index_t segment = static_cast<index_t>(warp) * Chunks * chunk;
  const bool reverse = P.reverse;

  // 1. This warp's total, chunk by chunk in order (a chunk past the end takes no part).
  maybe<Acc> total{Acc{}, false};
#pragma unroll
  for (int j = 0; j < Chunks; ++j) {
    const index_t first = segment + j * chunk;
    if (!Full && first >= count) break;  // the same in every lane
    const index_t p = first + lane * V;
    Acc x[V];
    read_bulk_run<V, Full, E>(tile, count, p, reverse, x);
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

  // 2. Warp 0: the tile's aggregate over the warps that have elements, its prefix from the
  // look-back, and each warp's prefix.
  if (warp == 0) {
    const int warps = Full ? Warps
                           : static_cast<int>((count + Chunks * chunk - 1) / (Chunks * chunk));
    const Acc mine = sm.warp_total[lane < warps ? lane : 0];
    const Acc aggregate = shfl_idx(warp_ordered_reduce(mine, warps, op), 0);
    const maybe<Acc> prefix = tile_prefix(aggregate);
    const Acc inclusive = warp_inclusive_scan(mine, op);
    const Acc before = shfl_up(inclusive, 1);
    if (lane < Warps) sm.warp_prefix[lane] = lane == 0 ? prefix : combine(prefix, maybe<Acc>{before, true}, op);
  }
  __syncthreads();

  // 3. The scan, written back over the tile in the output's element type.
  maybe<Acc> run = sm.warp_prefix[warp];
#pragma unroll
  for (int j = 0; j < Chunks; ++j) {
    const index_t first = segment + j * chunk;
    if (!Full && first >= count) break;
    const index_t p = first + lane * V;
    Acc x[V];
    read_bulk_run<V, Full, E>(tile, count, p, reverse, x);
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
      if (last_tile && p + v == count - 1) P.finish(s, r);
    }
    write_bulk_run<V, Full>(result, count, p, reverse, x);
    run = combine(run, maybe<Acc>{chunk_total, true}, op);
  }
}

/// One tile per block; the tile's elements staged in dynamic shared memory (bulk_tile_steps ·
/// sizeof(E) bytes). Shape says:
///   warps, chunks   the tile's layout (above);
///   bulk_load       the tile comes in with one bulk copy (else the block's threads copy it
///                   16 bytes each with cp.async);
///   bulk_store      the results go back through shared memory and out with one bulk copy
///                   (else each lane stores its runs as it scans them);
///   claims          tiles are claimed from a counter, so they start in index order whatever
///                   order the hardware starts blocks in (else tile = blockIdx.x, which relies
///                   on blocks starting in index order, as CUB's look-back does).
template <class Shape, class Problem, class Op>
__global__ void __launch_bounds__(Shape::warps* warp_threads)
    scan_bulk_tiles_kernel(Problem P, Op op, window_chain_state<typename Problem::acc_type> st, unsigned* tile_counter,
                           index_t tiles_per_sequence, index_t windows_per_sequence) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Acc = typename Problem::acc_type;
  using E = typename Problem::bulk_element;
  using O = typename Problem::bulk_output;
  constexpr int Warps = Shape::warps, Chunks = Shape::chunks;
  constexpr index_t tile_steps = bulk_tile_steps<E, Warps, Chunks>;
  extern __shared__ __align__(128) unsigned char tile[];
  __shared__ bulk_tile_smem<Acc, Warps> storage;
  auto& sm = storage.get();
  const bulk_barrier loaded{&sm.loaded};
  if (threadIdx.x == 0) {
    sm.claimed = Shape::claims ? atomicAdd(tile_counter, 1u) : blockIdx.x;
    if (Shape::bulk_load) loaded.init();
  }
  __syncthreads();
  const index_t t = sm.claimed, s = t / tiles_per_sequence, k = t % tiles_per_sequence;
  const index_t m = P.reverse ? tiles_per_sequence - 1 - k : k;  // the memory tile
  const index_t begin = m * tile_steps;
  const index_t count = P.length - begin < tile_steps ? P.length - begin : tile_steps;
  const unsigned bytes = static_cast<unsigned>(count * sizeof(E)), bulk_bytes = bytes & ~15u;
  const unsigned char* src = reinterpret_cast<const unsigned char*>(P.bulk_in(s) + begin);
  if constexpr (Shape::bulk_load) {
    if (threadIdx.x == 0) loaded.load(tile, src, bulk_bytes);
  } else {
    for (unsigned i = threadIdx.x * 16u; i < bulk_bytes; i += Warps * warp_threads * 16u) stage_bytes<16>(tile + i, src + i);
    async_commit();
  }
  if (threadIdx.x < bytes - bulk_bytes) tile[bulk_bytes + threadIdx.x] = src[bulk_bytes + threadIdx.x];
  if constexpr (Shape::bulk_load) loaded.wait();
  else async_wait<0>();
  __syncthreads();  // every thread's copies, and the tail bytes

  auto tile_prefix = [&](const Acc& aggregate) {
    return window_chain_prefix(st, t - k, s * windows_per_sequence, k, aggregate, [&] { return P.initial(s); }, op);
  };
  const bool last_tile = k == tiles_per_sequence - 1;
  O* const out = P.bulk_out(s) + begin;
  O* const result = Shape::bulk_store ? reinterpret_cast<O*>(tile) : out;
  if (count == tile_steps) scan_bulk_tile<true, Warps, Chunks>(P, op, s, last_tile, tile, result, count, sm, tile_prefix);
  else scan_bulk_tile<false, Warps, Chunks>(P, op, s, last_tile, tile, result, count, sm, tile_prefix);

  if constexpr (Shape::bulk_store) {
    fence_shared_for_bulk();
    __syncthreads();
    unsigned char* dst = reinterpret_cast<unsigned char*>(out);
    if (threadIdx.x < bytes - bulk_bytes) dst[bulk_bytes + threadIdx.x] = tile[bulk_bytes + threadIdx.x];
    if (threadIdx.x == 0) bulk_store_and_release(dst, tile, bulk_bytes);
  }
#else
  __trap();  // never launched: launch_bulk_tiles checks that the kernel was built for sm_90
#endif
}

}  // namespace parscan::cuda_detail
