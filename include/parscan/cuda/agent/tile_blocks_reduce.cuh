// parscan/cuda/agent/tile_blocks_reduce.cuh — the reduce of few long sequences in blocks of one
// span of tiles each, for operators whose operands may be swapped (swaps_operands): CUB's
// DeviceReduce structure. Each thread loads its part of a tile in 16-byte accesses, all issued
// before any is folded, and folds them in registers; the block combines its threads in one fixed
// tree into its partial; a second launch folds each sequence's partials in order
// (reduce_partials_kernel, agent/reduce_spans.cuh). No persistent grid and no shared-memory
// staging: blocks start and retire as the hardware schedules them.
//
// Measured on an H200 (docs/performance.md, "Blocks of one tile for the sums"): 256 threads ×
// 16 accesses (64 KB tiles), the partials' fold launched early, ran the int32, float and int64
// sums at 2^24 steps at 0.94–0.98 of CUB's time in bench_scan, where the bulk reduce
// (agent/bulk_reduce_spans.cuh) took 1.08–1.17; from 2^26 up both are within 2% of CUB. Other
// shapes (256 × 4 or 8, 512 × 8 or 16, 1024 × 4), and a ticket per sequence whose last block
// folds the partials in the same launch, were slower: with the ticket each block waits for its
// partial's fence and the ticket's round trip before its slot frees.
//
// Tiles and spans are fixed by the length alone, so the result does not depend on the device or
// the grid. The direction does not enter: a reduce of swappable operands is the same sum either
// way, up to the rounding of its fixed order.
#pragma once

#include <cstring>
#include <type_traits>

#include "reduce_spans.cuh"
#include "tile_reduce.cuh"

namespace parscan::cuda_detail {

/// Steps of a tile of Threads threads × Loads 16-byte accesses of elements E.
template <class E, int Threads, int Loads>
constexpr index_t tile_block_steps = static_cast<index_t>(Threads) * Loads * static_cast<index_t>(16 / sizeof(E));

/// At most this many partials a sequence (so the second launch folds at most 32 a thread); longer
/// sequences give each block a span of several tiles.
constexpr index_t max_tile_block_spans = 16384;

/// Block b folds span b % spans_per_sequence of sequence b / spans_per_sequence (tiles
/// [i · tiles_per_span, (i + 1) · tiles_per_span) of the sequence's tiles, cut at its end) into
/// partials[b]. Thread t of a whole tile holds its accesses t, t + Threads, …: a warp's accesses
/// are 512 consecutive bytes.
template <int Threads, int Loads, class Problem, class Op>
__global__ void __launch_bounds__(Threads)
    reduce_tile_blocks_kernel(Problem P, Op op, typename Problem::acc_type* partials, index_t tiles_per_span,
                              index_t spans_per_sequence) {
  using Acc = typename Problem::acc_type;
  using E = typename Problem::bulk_element;
  constexpr int V = static_cast<int>(16 / sizeof(E));
  constexpr index_t tile = tile_block_steps<E, Threads, Loads>;
  static_assert(16 % sizeof(E) == 0, "elements that divide a 16-byte access");
  allow_dependent_grids();  // the partials' fold may launch now and wait on the device
  const index_t s = blockIdx.x / spans_per_sequence, span = blockIdx.x % spans_per_sequence;
  const E* in = P.bulk_in(s, 0);
  const index_t end = (span + 1) * tiles_per_span * tile < P.length ? (span + 1) * tiles_per_span * tile : P.length;
  maybe<Acc> mine{Acc{}, false};
  for (index_t first = span * tiles_per_span * tile; first < end; first += tile) {
    if (end - first >= tile) {
      // Every access issued before any is folded (they are independent), then folded in a fixed
      // order: the operands may be swapped, so the thread's order need not be the steps'.
      uint4 raw[Loads];
      const uint4* words = reinterpret_cast<const uint4*>(in + first);
#pragma unroll
      for (int j = 0; j < Loads; ++j) raw[j] = words[j * Threads + static_cast<int>(threadIdx.x)];
      // Floats fold in one chain per place in the access (V chains of Loads combines, then
      // V − 1), since the compiler must keep a float chain's order; integers (exact in any order)
      // in one chain, which the compiler reassociates as it likes. H200, bench_scan at 2^24, time
      // against CUB's: the float sum 1.02 in one chain, 0.96–0.98 in four; the int32 sum 0.96 in
      // one, 1.00 in four.
      constexpr int C = std::is_integral_v<Acc> ? 1 : V;
      Acc chains[C];
#pragma unroll
      for (int j = 0; j < Loads; ++j) {
        E e[1][V];
        memcpy(e[0], &raw[j], 16);
        Acc x[V];
        P.bulk_items(e, x);
#pragma unroll
        for (int v = 0; v < V; ++v) chains[v % C] = j == 0 && v < C ? x[v] : op(chains[v % C], x[v]);
      }
      Acc fold = chains[0];
#pragma unroll
      for (int c = 1; c < C; ++c) fold = op(fold, chains[c]);
      mine = {mine.has ? op(mine.value, fold) : fold, true};
    } else {
      const index_t count = end - first;
      for (index_t p = threadIdx.x; p < count; p += Threads) {
        const E e[1][1] = {{in[first + p]}};
        Acc x[1];
        P.bulk_items(e, x);
        mine = {mine.has ? op(mine.value, x[0]) : x[0], true};
      }
    }
  }
  __shared__ maybe<Acc> warp_folds[Threads / warp_threads];
  const maybe<Acc> total = reduce_thread_folds<Threads / warp_threads>(mine, op, warp_folds);  // valid in thread 0
  if (threadIdx.x == 0) partials[blockIdx.x] = total.value;
}

}  // namespace parscan::cuda_detail
