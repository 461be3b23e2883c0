// parscan/cuda/recurrence/varlen_recurrence.cuh — the gated recurrence over packed
// variable-length sequences (cu_seqlens): one thread per (sequence, channel), walking that
// sequence's steps in order with the forward or backward Problem of recurrence_problems.cuh
// narrowed to the sequence, so the step arithmetic (gates, log gates, conjugates, da from
// x[prev] or x0) is the same code the fixed-length kernels run.
//
// Why a kernel of its own: the shared scan kernels (agent/) take one length for every sequence
// of a launch (Problem::length), and their tile shapes and workspace are sized from it. A
// per-sequence length would reach into every agent. This kernel needs no workspace and no
// barriers: consecutive threads take consecutive channels of one sequence, so a channel-last
// (total_T, D) tensor is read a whole row of channels at a time; a time-contiguous one is
// read one step per thread, each thread along its own row.
//
// UNMEASURED: written and compiled without a GPU. Its speed is bounded by one dependent
// step per thread per iteration; with N·D threads it should keep the memory system busy
// when N·D is in the tens of thousands (the benchmark's 64 × 1536), and it will be slow for
// few long sequences of few channels, where the fixed-length kernels split time across warps.
#pragma once

#include <cstdint>

#include "../../layout.hpp"
#include "../runtime.cuh"
#include "recurrence_problems.cuh"

namespace parscan::cuda_detail {

/// Threads per block of the varlen kernel.
constexpr int varlen_block_threads = 256;

/// Sequence n of a packed Problem: its steps [start, start + length), its states at n·D.
/// Channel d of the result is channel d of sequence n, at step 0 of the sequence.
template <class T>
__device__ PARSCAN_INLINE recurrence_forward_problem<T> sequence_of(recurrence_forward_problem<T> P, index_t n,
                                                                    index_t start, index_t length, index_t channels) {
  P.a += start * P.la.step_stride;
  P.b += start * P.lb.step_stride;
  P.x += start * P.lx.step_stride;
  if (P.x0) P.x0 += n * channels;
  if (P.x_final) P.x_final += n * channels;
  P.la.length = P.lb.length = P.lx.length = P.length = length;
  return P;
}

template <class T>
__device__ PARSCAN_INLINE recurrence_backward_problem<T> sequence_of(recurrence_backward_problem<T> P, index_t n,
                                                                     index_t start, index_t length, index_t channels) {
  P.a += start * P.la.step_stride;
  P.x += start * P.lx.step_stride;
  P.dx += start * P.ldx.step_stride;
  P.da += start * P.lda.step_stride;
  P.db += start * P.ldb.step_stride;
  if (P.x0) P.x0 += n * channels;
  if (P.dx_final) P.dx_final += n * channels;
  if (P.dx0) P.dx0 += n * channels;
  P.la.length = P.lx.length = P.ldx.length = P.lda.length = P.ldb.length = P.length = length;
  return P;
}

/// Problem's `length` and layouts describe the whole packed tensor (D channels × total_T); each
/// thread narrows it to its sequence. Every Problem here has a carry in (initial() always has
/// a value), so the running value is plain Acc. The forward Problem is inclusive (x[t] is the
/// prefix through t), the backward one exclusive (store_at takes the prefix before t).
template <class Problem, class Op>
__global__ void __launch_bounds__(varlen_block_threads)
    varlen_recurrence_kernel(Problem P, Op op, const std::int64_t* cu_seqlens, index_t sequences, index_t channels) {
  using Acc = typename Problem::acc_type;
  const index_t jobs = sequences * channels;
  const index_t stride = static_cast<index_t>(gridDim.x) * varlen_block_threads;
  for (index_t i = static_cast<index_t>(blockIdx.x) * varlen_block_threads + threadIdx.x; i < jobs; i += stride) {
    const index_t n = i / channels, d = i - n * channels;
    const index_t start = cu_seqlens[n];
    const Problem Q = sequence_of(P, n, start, cu_seqlens[n + 1] - start, channels);
    const auto c = Q.at(d);
    Acc running = Q.initial(d).value;
    for (index_t pos = 0; pos < Q.length; ++pos) {
      const Acc e = Q.load_at(c, pos);
      if (Q.exclusive) {
        Q.store_at(c, pos, running);
        running = op(running, e);
      } else {
        running = op(running, e);
        Q.store_at(c, pos, running);
      }
    }
    Q.finish(d, running);
  }
}

/// Launches the kernel over N·D (sequence, channel) pairs; a grid-stride loop covers any count.
template <class Problem, class Op>
status dispatch_varlen(const Problem& P, Op op, const std::int64_t* cu_seqlens, index_t sequences, index_t channels,
                       const cuda_backend& be) {
  const index_t jobs = sequences * channels;
  if (jobs == 0) return status::success;
  constexpr index_t max_blocks = index_t(1) << 20;  // the loop takes the rest
  index_t blocks = (jobs + varlen_block_threads - 1) / varlen_block_threads;
  if (blocks > max_blocks) blocks = max_blocks;
  varlen_recurrence_kernel<<<static_cast<unsigned>(blocks), varlen_block_threads, 0, be.stream>>>(
      P, op, cu_seqlens, sequences, channels);
  return check_launch();
}

}  // namespace parscan::cuda_detail
