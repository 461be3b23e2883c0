// parscan/cuda/agent/thread_span_reduce.cuh — the first pass of a reduce whose combine costs
// more than moving its operands (accumulators over 16 bytes: small matrices): every thread
// folds one contiguous span of a sequence, in order, and the block combines its threads' folds
// once, in one fixed order (block_ordered_reduce).
//
// A tile reduce (agent/tile_reduce.cuh, the bulk tiles) gives each lane a run of V steps and
// combines the 32 runs of a chunk in a warp tree. That is cheap next to the bytes of a 4-byte
// sum, but a tree over 32 lanes executes log2(32) = 5 combines in every lane where a fold would
// execute one, and with a 32-byte element V is 1: a 2×2 int64 matrix product mod a prime ran
// its reduce at 5 combines a step, 8.5% of a read-only kernel on an H100. Here a thread's fold
// is one dependent chain of combines over span_steps steps, loads issued ahead of it, and the
// trees run once per block.
//
// Spans are sized from the length alone (thread_span_steps), so the order of every combination
// is fixed and results are bitwise the same on every run and every device.
#pragma once

#include "../block/tile_scan.cuh"
#include "reduce_spans.cuh"

namespace parscan::cuda_detail {

/// Threads that a sequence's spans are spread over, at most (about one thread per resident
/// thread slot of a large GPU), and the fewest steps a span holds (so the trees stay a small
/// part of the work).
constexpr index_t thread_span_threads = index_t(1) << 17;
constexpr index_t thread_span_min_steps = 8;
/// Threads of a block (and of the second pass's block).
constexpr int thread_span_block = 256;
/// Runs of loads a thread keeps in flight ahead of its fold, and the blocks an SM should hold
/// (so registers are capped: 64 a thread for four blocks). The fold is bound by the latency of
/// its chain of combines, so more warps beat more loads ahead. Measured on an H100 for 2×2 int64
/// matrices mod a prime, first pass alone at n = 2^24 / 2^28 (out-of-tree variants, same
/// process, CUB's whole reduce 354.0 / 4244 µs): four runs ahead (122 registers, two blocks an
/// SM) 428.6 / 6165 µs, one run ahead 348.5 / 5202 (78 registers), one ahead and four blocks
/// 339.0 / 5022 (62 registers, no spills). Accumulators over 32 bytes keep the compiler's
/// register count.
constexpr int thread_span_ahead = 1;
template <class Acc>
constexpr int thread_span_min_blocks = sizeof(Acc) <= 32 ? 4 : 1;

/// Steps per span for a sequence of `length` steps whose runs are `run` steps: a multiple of
/// `run`, so that no run straddles two spans.
inline index_t thread_span_steps(index_t length, int run) {
  index_t steps = (length + thread_span_threads - 1) / thread_span_threads;
  if (steps < thread_span_min_steps) steps = thread_span_min_steps;
  return (steps + run - 1) / run * run;
}

/// The steps [first, end) of a sequence (cursor `cur`) folded in order in one dependent chain,
/// Ahead runs of loads in flight ahead of the fold; absent when first >= end. `first` starts a run.
template <int Ahead, class Problem, class Op>
__device__ PARSCAN_INLINE maybe<typename Problem::acc_type> fold_thread_span(const Problem& P, const Op& op,
                                                                            const typename Problem::cursor& cur,
                                                                            index_t first, index_t end) {
  using Acc = typename Problem::acc_type;
  constexpr int V = Problem::run;
  maybe<Acc> mine{Acc{}, false};
  for (index_t p = first; p < end; p += static_cast<index_t>(V) * Ahead) {
    Acc x[Ahead][V];
#pragma unroll
    for (int a = 0; a < Ahead; ++a)
      if (p + a * V < end) P.load_run(cur, p + a * V, x[a]);
#pragma unroll
    for (int a = 0; a < Ahead; ++a)
#pragma unroll
      for (int v = 0; v < V; ++v)
        if (p + a * V + v < end) mine = {mine.has ? op(mine.value, x[a][v]) : x[a][v], true};
  }
  return mine;
}

/// The steps [first, end) of thread threadIdx.x's span in block b of its sequence (a sequence of
/// `length` steps in spans of span_steps; empty past the end).
struct thread_span {
  index_t first, end;
};
template <int Threads>
__device__ PARSCAN_INLINE thread_span thread_span_of(index_t b, index_t span_steps, index_t length) {
  const index_t first = (b * Threads + threadIdx.x) * span_steps, span_end = first + span_steps;
  return {first, span_end < length ? span_end : length};
}

/// The threads of block b (of blocks_per_sequence a sequence) whose spans hold steps: a prefix
/// of the block, at least one.
template <int Threads>
__device__ PARSCAN_INLINE index_t threads_with_steps(index_t length, index_t span_steps, index_t b) {
  const index_t block_first = b * Threads * span_steps;
  const index_t with_steps = (length - block_first + span_steps - 1) / span_steps;
  return with_steps < Threads ? with_steps : Threads;
}

/// Block b folds the spans (b % blocks_per_sequence) · Threads + t, t < Threads, of sequence
/// b / blocks_per_sequence (a span is span_steps steps; those past the end take no part) into
/// partials[b]. Each thread keeps Ahead runs of loads in flight ahead of its fold; MinBlocks
/// blocks fit an SM.
template <int Threads, int Ahead, int MinBlocks, class Problem, class Op>
__global__ void __launch_bounds__(Threads, MinBlocks)
    reduce_thread_spans_kernel(Problem P, Op op, typename Problem::acc_type* partials, index_t span_steps,
                               index_t blocks_per_sequence) {
  using Acc = typename Problem::acc_type;
  const index_t s = blockIdx.x / blocks_per_sequence, b = blockIdx.x % blocks_per_sequence;
  // The span written out, not thread_span_of: through the helper this kernel's SASS grew by 24
  // instructions (the scan's passes compile the same either way), and its times were measured so.
  const index_t first = (b * Threads + threadIdx.x) * span_steps;
  const index_t span_end = first + span_steps, length = P.length;
  const maybe<Acc> mine = fold_thread_span<Ahead>(P, op, P.at(s), first, span_end < length ? span_end : length);
  const Acc total = block_ordered_reduce<Threads>(mine.value, threads_with_steps<Threads>(length, span_steps, b), op);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

}  // namespace parscan::cuda_detail
