// parscan/cuda/agent/reduce_spans.cuh — a reduce of few long sequences in two passes: blocks
// fold fixed spans of tiles into partials, then one block per sequence folds the partials.
#pragma once

#include "../block/tile_scan.cuh"
#include "../thread/grid_dependency.cuh"
#include "tile_reduce.cuh"

namespace parscan::cuda_detail {

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

/// v over threads 0..n-1 of a block of Threads threads (1 ≤ n ≤ Threads: the threads that hold
/// a value are a prefix of the block), in one fixed tree: warp_ordered_reduce within each warp,
/// then over the warps. Valid in thread 0. Every thread of the block calls it.
template <int Threads, class Acc, class Op>
__device__ PARSCAN_INLINE Acc block_ordered_reduce(const Acc& v, index_t n, const Op& op) {
  constexpr int warps = Threads / warp_threads;
  __shared__ tile_reduce_smem<Acc, warps> sm;
  const int warp = static_cast<int>(threadIdx.x) / warp_threads;
  const index_t in_warp = n - static_cast<index_t>(warp) * warp_threads;
  const Acc warp_total =
      warp_ordered_reduce(v, in_warp <= 0 ? 1 : in_warp >= warp_threads ? warp_threads : static_cast<int>(in_warp), op);
  auto& st = sm.get();
  if (lane_id() == 0) st.warp_total[warp] = warp_total;
  __syncthreads();
  Acc total{};
  if (warp == 0) {
    const Acc w = st.warp_total[lane_id() < warps ? lane_id() : 0];
    total = warp_ordered_reduce(w, static_cast<int>((n + warp_threads - 1) / warp_threads), op);
  }
  return total;
}

/// values[first] ⊕ … ⊕ values[end-1] in order (nothing when first ≥ end), loaded eight at a
/// time: loading each only after folding the one before took a round trip to L2 per value (16
/// of them per thread for the 4096 spans of a long reduce).
template <class Acc, class Op>
__device__ PARSCAN_INLINE maybe<Acc> fold_in_batches(const Acc* values, index_t first, index_t end, const Op& op) {
  constexpr int batch = 8;
  maybe<Acc> fold{Acc{}, false};
  for (index_t i = first; i < end; i += batch) {
    Acc x[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j)
      if (i + j < end) x[j] = values[i + j];
#pragma unroll
    for (int j = 0; j < batch; ++j)
      if (i + j < end) fold = {fold.has ? op(fold.value, x[j]) : x[j], true};
  }
  return fold;
}

/// Sequence s's `count` partials folded by a whole block of Threads threads (thread i a fixed run
/// of them, in order, then block_ordered_reduce), after the sequence's carry in; finishes s.
template <int Threads, class Problem, class Op>
__device__ PARSCAN_INLINE void fold_partials(const Problem& P, const Op& op, index_t s,
                                             const typename Problem::acc_type* partials, index_t count) {
  using Acc = typename Problem::acc_type;
  const index_t per_thread = (count + Threads - 1) / Threads;
  const index_t first = threadIdx.x * per_thread;
  const index_t end = first + per_thread < count ? first + per_thread : count;
  const maybe<Acc> fold = fold_in_batches(partials, first, end, op);
  const index_t threads_with = (count + per_thread - 1) / per_thread;
  const Acc total = block_ordered_reduce<Threads>(fold.value, threads_with, op);
  if (threadIdx.x == 0) P.finish(s, combine(P.initial(s), maybe<Acc>{total, true}, op).value);
}

/// Second pass: one block per sequence folds its spans' partials (fold_partials) and finishes.
/// AfterFirst: launched to start early (programmatic stream serialization), it first waits on
/// the device for the first pass to finish and its partials to be visible.
template <int Threads, class Problem, class Op, bool AfterFirst = false>
__global__ void __launch_bounds__(Threads)
    reduce_partials_kernel(Problem P, Op op, const typename Problem::acc_type* partials, index_t spans_per_sequence) {
  if constexpr (AfterFirst) wait_for_prerequisite_grids();
  const index_t s = blockIdx.x;
  fold_partials<Threads>(P, op, s, partials + s * spans_per_sequence, spans_per_sequence);
}

}  // namespace parscan::cuda_detail
