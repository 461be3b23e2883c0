// parscan/cuda/agent/thread_span_scan.cuh — a scan whose combine costs more than moving its
// operands (accumulators over 16 bytes: small matrices), over the thread spans of
// agent/thread_span_reduce.cuh, in three launches:
//   1. every thread folds its span in one dependent chain, as the reduce does; the block scans
//      the folds in thread order and keeps each thread's inclusive prefix and the block's total;
//   2. a block a sequence scans the blocks' totals from the sequence's carry in (or init) into
//      each block's carry, and writes the carry out;
//   3. every thread walks its span again from its carry (its block's carry and the prefix of the
//      threads before it), writing each step's result.
// So a step costs two combines, both in a chain of one thread. The tile scans (block/tile_scan.cuh,
// the bulk tiles) spend about eight a step on such elements: a lane's run is one step (V = 1 for
// 32 bytes), and each chunk's warp scan executes log2(32) = 5 combines in every lane, then the
// lane's prefix, its step and the running carry.
//
// Spans are sized from the batch's shape alone (thread_span_scan_steps), so the order of every
// combination is fixed and results are bitwise the same on every run and every device.
#pragma once

#include <type_traits>

#include "../block/block_prefix.cuh"
#include "../runtime.cuh"
#include "thread_span_reduce.cuh"

namespace parscan::cuda_detail {

/// Steps per span of the scan of `sequences` sequences of `length` steps: the reduce's spans, made
/// longer where the batch would otherwise hold more than thread_span_threads of them, so that the
/// workspace (an accumulator a span) stays about 2^17 accumulators. A multiple of `run`.
inline index_t thread_span_scan_steps(index_t sequences, index_t length, int run) {
  const index_t own = thread_span_steps(length, run);
  const index_t spread = (sequences * length + thread_span_threads - 1) / thread_span_threads;
  const index_t steps = own > spread ? own : spread;
  return (steps + run - 1) / run * run;
}

/// The grid and the workspace of a thread-span scan: per block of thread_span_block spans, each
/// span's inclusive prefix within its block, the block's total and its carry.
template <class Acc>
struct thread_span_scan_plan {
  index_t span_steps = 0, blocks_per_sequence = 0, blocks = 0;

  static constexpr std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
  /// False where the grid exceeds the device's limits.
  bool of(index_t sequences, index_t length, int run) {
    span_steps = thread_span_scan_steps(sequences, length, run);
    const index_t spans = (length + span_steps - 1) / span_steps;
    blocks_per_sequence = (spans + thread_span_block - 1) / thread_span_block;
    return !__builtin_mul_overflow(sequences, blocks_per_sequence, &blocks) && blocks <= max_grid &&
           sequences <= max_grid;
  }
  std::size_t prefixes_bytes() const {
    return aligned(static_cast<std::size_t>(blocks) * thread_span_block * sizeof(Acc));
  }
  std::size_t totals_bytes() const { return aligned(static_cast<std::size_t>(blocks) * sizeof(Acc)); }
  std::size_t carries_bytes() const { return aligned(static_cast<std::size_t>(blocks) * sizeof(maybe<Acc>)); }
  std::size_t bytes() const { return prefixes_bytes() + totals_bytes() + carries_bytes(); }
};
// Pass 2 gives each of its threads two block totals.
static_assert(thread_span_threads <= 2 * thread_span_block * static_cast<index_t>(thread_span_block),
              "a sequence's block totals fit one block of the carry pass");

/// Pass 1. Block b (sequence b / blocks_per_sequence) folds its threads' spans as the reduce's
/// first pass does; thread t's fold joined to those of the threads before it goes to
/// prefixes[b · Threads + t], the last such (the block's total) to totals[b].
template <int Threads, int MinBlocks, class Problem, class Op>
__global__ void __launch_bounds__(Threads, MinBlocks)
    scan_thread_span_totals_kernel(Problem P, Op op, typename Problem::acc_type* prefixes,
                                   typename Problem::acc_type* totals, index_t span_steps,
                                   index_t blocks_per_sequence) {
  using Acc = typename Problem::acc_type;
  const index_t s = blockIdx.x / blocks_per_sequence, b = blockIdx.x % blocks_per_sequence;
  const index_t length = P.length;
  const auto [first, end] = thread_span_of<Threads>(b, span_steps, length);
  const maybe<Acc> mine = fold_thread_span<thread_span_ahead>(P, op, P.at(s), first, end);
  Acc inclusive;
  block_exclusive_prefix<Threads>(mine.value, op, inclusive);
  const index_t with_steps = threads_with_steps<Threads>(length, span_steps, b);
  if (threadIdx.x < with_steps) prefixes[blockIdx.x * static_cast<index_t>(Threads) + threadIdx.x] = inclusive;
  if (threadIdx.x == with_steps - 1) totals[blockIdx.x] = inclusive;
}

/// Pass 2. Block s scans the block totals of sequence s (at most 2 · Threads of them, two a
/// thread) from its carry in or init: carries[i] is everything before block i (absent for the
/// first block of a sequence without either), and the sequence's total goes to its carry out.
/// Every thread reads the carry in before the barriers, so a carry out in the same place is safe.
template <int Threads, class Problem, class Op>
__global__ void __launch_bounds__(Threads)
    scan_thread_span_carries_kernel(Problem P, Op op, const typename Problem::acc_type* totals,
                                    maybe<typename Problem::acc_type>* carries, index_t blocks_per_sequence) {
  using Acc = typename Problem::acc_type;
  const index_t s = blockIdx.x, i = 2 * static_cast<index_t>(threadIdx.x);
  const maybe<Acc> initial = P.initial(s);
  const Acc* t = totals + s * blocks_per_sequence;
  const bool has_first = i < blocks_per_sequence, has_second = i + 1 < blocks_per_sequence;
  const Acc first = has_first ? t[i] : Acc{};
  const Acc pair = has_second ? op(first, t[i + 1]) : first;
  Acc inclusive;
  const maybe<Acc> before = block_exclusive_prefix<Threads>(pair, op, inclusive);
  const maybe<Acc> carry = combine(initial, before, op);
  maybe<Acc>* c = carries + s * blocks_per_sequence;
  if (has_first) c[i] = carry;
  if (has_second) c[i + 1] = combine(carry, maybe<Acc>{first, true}, op);
  if (has_first && (blocks_per_sequence - 1) / 2 == static_cast<index_t>(threadIdx.x))
    P.finish(s, combine(initial, maybe<Acc>{inclusive, true}, op).value);
}

/// Pass 3's results a lane stages before its warp writes them (the Coalesced kernel): 128 bytes
/// of outputs, at least one.
template <class Out>
constexpr int span_store_steps = sizeof(Out) >= 128 ? 1 : static_cast<int>(128 / sizeof(Out));

/// Pass 3. Every thread of block b walks its span again from its carry, writing each step's
/// inclusive or exclusive result: with Coalesced (contiguous 16-byte aligned sequences of raw
/// pointers, one step a run: has_bulk_tiles and stages_bulk()), span_store_steps results a lane
/// at a time through shared memory, which its warp then writes as whole 128-byte lines, one
/// lane's results after another; else each thread stores its own (store_run). A thread's stores
/// of 8 bytes at a time, 32 spans apart in a warp, put a partial sector write in L2 for each 8
/// bytes: the scan of 2×2 int64 matrices spent 1.38 ms of 1.7 there at 2^24 steps (ncu, H200,
/// L2 at 68% of its peak, 0.15 warps issued a scheduler and cycle; performance.md, "Costly scans
/// over thread spans").
template <int Threads, int MinBlocks, bool Coalesced, class Problem, class Op>
__global__ void __launch_bounds__(Threads, MinBlocks)
    scan_thread_spans_kernel(Problem P, Op op, const typename Problem::acc_type* prefixes,
                             const maybe<typename Problem::acc_type>* carries, index_t span_steps,
                             index_t blocks_per_sequence) {
  using Acc = typename Problem::acc_type;
  constexpr int V = Problem::run;
  const index_t s = blockIdx.x / blocks_per_sequence, b = blockIdx.x % blocks_per_sequence;
  const index_t length = P.length;
  const auto [first, end] = thread_span_of<Threads>(b, span_steps, length);
  maybe<Acc> running{Acc{}, false};
  if (first < end) {
    running = carries[blockIdx.x];
    const index_t place = blockIdx.x * static_cast<index_t>(Threads) + threadIdx.x;
    if (threadIdx.x > 0) running = combine(running, maybe<Acc>{prefixes[place - 1], true}, op);
  }
  const auto cur = P.at(s);
  // One step into `result` (which may be where the step was read from): its prefix before the
  // step (exclusive) or after it.
  const auto advance = [&](const Acc step, Acc& result) {
    if (P.exclusive) result = running.value;
    running = {running.has ? op(running.value, step) : step, true};
    if (!P.exclusive) result = running.value;
  };
  if constexpr (Coalesced) {
    static_assert(V == 1, "coalesced span stores take one step a run");
    using Out = typename Problem::bulk_output;
    using Word = std::conditional_t<sizeof(Out) % 8 == 0, unsigned long long, unsigned>;
    static_assert(sizeof(Out) % sizeof(Word) == 0, "outputs of whole 4-byte words");
    constexpr int K = span_store_steps<Out>;
    constexpr int element_words = static_cast<int>(sizeof(Out) / sizeof(Word)), segment_words = K * element_words;
    __shared__ alignas(16) unsigned char staged[Threads * K * sizeof(Out)];
    const int lane = lane_id();
    Out* mine = reinterpret_cast<Out*>(staged) + threadIdx.x * K;
    const Word* warp_words = reinterpret_cast<const Word*>(mine - lane * K);
    Out* const sequence_out = P.bulk_out(s);
    for (index_t r = 0; r * K < span_steps; ++r) {
      // Steps of this round: K, fewer at the span's or the sequence's end, none past it.
      const index_t from = first + r * K, left = end - from;
      const int count = left <= 0 ? 0 : left >= K ? K : static_cast<int>(left);
#pragma unroll 1  // unrolled, the loop spilled under the register cap of four blocks an SM
      for (int k = 0; k < count; ++k) {
        Acc x[1], result;
        P.load_run(cur, from + k, x);
        advance(x[0], result);
        mine[P.reverse ? count - 1 - k : k] = P.bulk_result(result);  // in memory order
      }
      __syncwarp();
      // Where each lane's results go (their lowest address) and how many words they are; lane l's
      // then reach the whole warp by shuffles.
      Word* const lane_out = reinterpret_cast<Word*>(sequence_out + P.step(P.reverse ? from + count - 1 : from));
      const int lane_words = count * element_words;
      if constexpr (segment_words <= warp_threads / 2) {
        // Two lanes' results a store: lanes 0-15 write lane l's, lanes 16-31 lane l + 1's.
        const int w = lane % (warp_threads / 2);
        for (int l = lane / (warp_threads / 2); l < warp_threads; l += 2) {
          Word* const out = shfl_idx(lane_out, l);
          if (w < __shfl_sync(full_mask, lane_words, l)) out[w] = warp_words[l * segment_words + w];
        }
      } else {
        for (int l = 0; l < warp_threads; ++l) {
          Word* const out = shfl_idx(lane_out, l);
          const int words = __shfl_sync(full_mask, lane_words, l);
          for (int w = lane; w < words; w += warp_threads) out[w] = warp_words[l * segment_words + w];
        }
      }
      __syncwarp();
    }
  } else {
    if (first >= end) return;
    for (index_t p = first; p < end; p += V) {
      Acc x[V];
      P.load_run(cur, p, x);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        if (p + v >= end) break;
        advance(x[v], x[v]);
      }
      P.store_run(cur, p, x);
    }
  }
}

}  // namespace parscan::cuda_detail
