// parscan/cuda/agent/tile_blocks_reduce.cuh — the reduce of few long sequences in blocks of one
// span of tiles each: CUB's DeviceReduce structure. Threads load their part of a tile in 16-byte
// accesses, all issued before any is folded, and fold them in registers; the block combines its
// threads in one fixed tree into its partial; a second launch folds each sequence's partials in
// order (reduce_partials_kernel, agent/reduce_spans.cuh). No persistent grid: blocks start and
// retire as the hardware schedules them. Two kernels:
//
// - reduce_tile_blocks_kernel, for operators whose operands may be swapped (swaps_operands):
//   thread t folds accesses t, t + Threads, … of a tile, in whatever order suits the registers.
// - reduce_tile_blocks_in_order_kernel, for any other operator: each warp passes its accesses
//   through shared memory so that each lane folds a run of consecutive steps, and lanes, warps
//   and tiles combine in the steps' order.
//
// Measured on an H200 (docs/performance.md, "Blocks of one tile for the sums"): 256 threads ×
// 16 accesses (64 KB tiles), the partials' fold launched early, ran the int32, float and int64
// sums at 2^24 steps at 0.94–0.98 of CUB's time in bench_scan, where the bulk reduce
// (agent/bulk_reduce_spans.cuh) took 1.08–1.17; from 2^26 up both are within 2% of CUB. Other
// shapes (256 × 4 or 8, 512 × 8 or 16, 1024 × 4), and a ticket per sequence whose last block
// folds the partials in the same launch, were slower: with the ticket each block waits for its
// partial's fence and the ticket's round trip before its slot frees. The in-order kernel in the
// same tiles ran the affine<float> reduce at 2^24 at 0.98–0.99 of CUB's time, where the bulk
// reduce took 1.09–1.10 ("Blocks of one tile in order").
//
// Tiles and spans are fixed by the length alone, so the result does not depend on the device or
// the grid.
#pragma once

#include <cstring>
#include <type_traits>

#include "reduce_spans.cuh"
#include "tile_reduce.cuh"

namespace parscan::cuda_detail {

/// Steps of a tile of Threads threads × Loads 16-byte accesses of elements E (whole elements).
template <class E, int Threads, int Loads>
constexpr index_t tile_block_steps = static_cast<index_t>(Threads) * Loads * 16 / static_cast<index_t>(sizeof(E));

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

/// Op with its operands in memory order: in a reverse reduce, later steps in memory come earlier
/// in processing order, so they become the left operand.
template <class Op, bool Reverse>
struct memory_order_op {
  Op op;
  template <class Acc>
  __device__ PARSCAN_INLINE Acc operator()(const Acc& lower, const Acc& higher) const {
    if constexpr (Reverse) return op(higher, lower);
    else return op(lower, higher);
  }
};

/// Shared memory of the in-order kernel: each warp's 32 runs, RunWords + 1 words apart.
template <int Warps, int RunWords>
constexpr int in_order_smem_bytes = Warps * warp_threads * (RunWords + 1) * 16;

/// The reduce of spans of tiles for any associative operator. A tile is one chunk of 32 runs of
/// RunWords 16-byte words a warp; in a span of k tiles warp w takes the k consecutive chunks from
/// the span's (w · k)-th, so that each warp, each block and each span covers consecutive steps.
/// A warp loads a whole chunk in accesses 512 bytes wide (lane l: words l, l + 32, …), stores
/// it to shared memory and reads back run l into lane l; the lane folds its run in Chains
/// consecutive parts (independent dependency chains), then the warp's lanes combine in
/// order (warp_ordered_reduce), then the block's warps. Operands are combined in memory order
/// (memory_order_op), and a reverse reduce writes span i's partial at spans − 1 − i, so the
/// partials are in processing order for reduce_partials_kernel.
///
/// Runs RunWords + 1 words apart in shared memory (an odd stride): the 8 lanes that one
/// shared-memory wavefront serves read the same word of 8 consecutive runs, which then fall in
/// 8 different groups of four banks; their stores, 8 consecutive words of a chunk, do too
/// where a run holds 16 words.
///
/// Registers for MinBlocks blocks an SM.
template <int Warps, int RunWords, int Chains, int MinBlocks, bool Reverse, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads, MinBlocks)
    reduce_tile_blocks_in_order_kernel(Problem P, Op op, typename Problem::acc_type* partials, index_t tiles_per_span,
                                       index_t spans_per_sequence) {
  using Acc = typename Problem::acc_type;
  using E = typename Problem::bulk_element;
  constexpr int R = static_cast<int>(RunWords * 16 / sizeof(E));  // steps of a run
  constexpr int stride = RunWords + 1;
  constexpr index_t chunk = static_cast<index_t>(warp_threads) * R;
  static_assert(RunWords * 16 % sizeof(E) == 0 && sizeof(E) % 4 == 0, "runs of whole elements of whole words");
  static_assert(R % Chains == 0, "chains of equal parts of a run");
  extern __shared__ uint4 in_order_runs[];
  allow_dependent_grids();  // the partials' fold may launch now and wait on the device
  const memory_order_op<Op, Reverse> f{op};
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  uint4* runs = in_order_runs + warp * warp_threads * stride;
  const index_t s = blockIdx.x / spans_per_sequence, span = blockIdx.x % spans_per_sequence;
  const E* in = P.bulk_in(s, 0);
  const index_t warp_steps = tiles_per_span * chunk;
  const index_t span_first = span * Warps * warp_steps;
  const index_t span_end = span_first + Warps * warp_steps < P.length ? span_first + Warps * warp_steps : P.length;
  const index_t first = span_first + warp * warp_steps;
  const index_t end = first + warp_steps < span_end ? first + warp_steps : span_end;
  maybe<Acc> mine{Acc{}, false};  // the warp's fold so far, in lane 0
  for (index_t c = first; c < end; c += chunk) {
    Acc fold;
    int lanes = warp_threads;
    if (end - c >= chunk) {
      uint4 raw[RunWords];
      const uint4* words = reinterpret_cast<const uint4*>(in + c);
#pragma unroll
      for (int j = 0; j < RunWords; ++j) raw[j] = words[j * warp_threads + lane];
      __syncwarp();  // every lane has read the previous chunk's runs
#pragma unroll
      for (int j = 0; j < RunWords; ++j) {
        const int word = j * warp_threads + lane;
        runs[word / RunWords * stride + word % RunWords] = raw[j];
      }
      __syncwarp();
      unsigned run[RunWords * 4];
#pragma unroll
      for (int k = 0; k < RunWords; ++k) {
        const uint4 w = runs[lane * stride + k];
        run[4 * k] = w.x, run[4 * k + 1] = w.y, run[4 * k + 2] = w.z, run[4 * k + 3] = w.w;
      }
      constexpr int part = R / Chains, words_per = static_cast<int>(sizeof(E) / 4);
      Acc chains[Chains];
#pragma unroll
      for (int i = 0; i < part; ++i) {
#pragma unroll
        for (int h = 0; h < Chains; ++h) {
          E e[1][1];
          memcpy(&e[0][0], &run[(h * part + i) * words_per], sizeof(E));
          Acc x[1];
          P.bulk_items(e, x);
          chains[h] = i == 0 ? x[0] : f(chains[h], x[0]);
        }
      }
      fold = chains[0];
#pragma unroll
      for (int h = 1; h < Chains; ++h) fold = f(fold, chains[h]);
    } else {  // the sequence's last, partial chunk: lane l a run of `per` steps, read directly
      const index_t count = end - c, per = (count + warp_threads - 1) / warp_threads;
      const index_t lo = lane * per, hi = lo + per < count ? lo + per : count;
      fold = Acc{};
      for (index_t p = lo; p < hi; ++p) {
        const E e[1][1] = {{in[c + p]}};
        Acc x[1];
        P.bulk_items(e, x);
        fold = p == lo ? x[0] : f(fold, x[0]);
      }
      lanes = static_cast<int>((count + per - 1) / per);
    }
    const Acc total = warp_ordered_reduce(fold, lanes, f);  // valid in lane 0
    mine = combine(mine, maybe<Acc>{total, true}, f);
  }
  __shared__ tile_reduce_smem<Acc, Warps> sm;
  auto& st = sm.get();
  if (lane == 0 && first < span_end) st.warp_total[warp] = mine.value;
  __syncthreads();
  if (warp == 0) {
    // The warps with steps: a prefix of the block.
    const int warps = static_cast<int>((span_end - span_first + warp_steps - 1) / warp_steps);
    const Acc total = warp_ordered_reduce(st.warp_total[lane < warps ? lane : 0], warps, f);
    const index_t at = Reverse ? spans_per_sequence - 1 - span : span;
    if (lane == 0) partials[s * spans_per_sequence + at] = total;
  }
}

}  // namespace parscan::cuda_detail
