// parscan/cuda/recurrence/varlen_recurrence.cuh — the gated recurrence over packed
// variable-length sequences (cu_seqlens). Each kernel narrows the forward or backward Problem
// of recurrence_problems.cuh to one sequence (sequence_of), so the step arithmetic (gates, log
// gates, conjugates, da from x[prev] or x0) is the code the fixed-length kernels run, and each
// sequence runs on its own, with no workspace and nothing passed between sequences:
//   * time-contiguous (D, total_T): one warp per (sequence, channel), the warp loop's scan of a
//     whole sequence with its next tiles staged (agent/warp_loop.cuh), through head pads
//     (recurrence_head_pads.cuh) for real types: a sequence starts wherever cu_seqlens puts
//     it, mostly off a 16-byte boundary, and its runs could not be staged whole;
//   * channel-last (total_T, D), D ≥ 32: one block per (sequence, 32 channels), lane tiles
//     (block/lane_tile_scan.cuh) walked in order with each lane's running value, the lane loop;
//   * any other strides: one thread per (sequence, channel), step by step.
// The shared agents take one length for every sequence of a launch (Problem::length) and size
// their tile states from it; these loops need neither.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../layout.hpp"
#include "../agent/lane_loop.cuh"
#include "../agent/warp_loop.cuh"
#include "../device/dispatch_scan.cuh"
#include "../runtime.cuh"
#include "../thread/step_scan.cuh"
#include "recurrence_head_pads.cuh"
#include "recurrence_problems.cuh"

namespace parscan::cuda_detail {

/// Threads per block of the step-by-step kernel (layouts neither loop covers).
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

/// Strides neither loop covers: one thread per (sequence, channel), step by step. Problem's
/// `length` and layouts describe the whole packed tensor (D channels × total_T); each thread
/// narrows it to its sequence. Every Problem here has a carry in (initial() always has a
/// value), so the total is always there to finish with.
template <class Problem, class Op>
__global__ void __launch_bounds__(varlen_block_threads)
    varlen_recurrence_kernel(Problem P, Op op, const std::int64_t* cu_seqlens, index_t sequences, index_t channels) {
  const index_t jobs = sequences * channels;
  const index_t stride = static_cast<index_t>(gridDim.x) * varlen_block_threads;
  for (index_t i = static_cast<index_t>(blockIdx.x) * varlen_block_threads + threadIdx.x; i < jobs; i += stride) {
    const index_t n = i / channels, d = i - n * channels;
    const index_t start = cu_seqlens[n];
    const Problem Q = sequence_of(P, n, start, cu_seqlens[n + 1] - start, channels);
    auto running = Q.initial(d);  // always present
    scan_steps_in_thread(Q, op, Q.at(d), 0, Q.length, running);
    Q.finish(d, running.value);
  }
}

/// Time-contiguous: warp w of the grid takes (sequence, channel) pairs w, w + all warps, ...,
/// each with its next Stages-1 tiles in flight (staging_ring), as the batched warp loop.
template <int Warps, int Chunks, int Stages, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    varlen_warp_loop_kernel(Problem P, Op op, const std::int64_t* cu_seqlens, index_t sequences, index_t channels) {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  const index_t jobs = sequences * channels;
  const index_t all_warps = static_cast<index_t>(gridDim.x) * Warps;
  for (index_t i = static_cast<index_t>(blockIdx.x) * Warps + threadIdx.x / warp_threads; i < jobs; i += all_warps) {
    const index_t n = i / channels, d = i - n * channels;
    const index_t start = cu_seqlens[n];
    const Problem Q = sequence_of(P, n, start, cu_seqlens[n + 1] - start, channels);
    if (Q.length == 0) {
      if (lane_id() == 0) Q.finish(d, Q.initial(d).value);
    } else if constexpr (Problem::run > 1 && std::is_floating_point_v<typename Problem::C>) {
      using padded = head_padded<Problem>;
      const padded R(Q);
      scan_sequence_in_warp_staged<Chunks, Stages>(R, op, d, staging_ring<Warps, Chunks, Stages, padded>{dynamic_smem},
                                                   R.initial(d));
    } else {
      scan_sequence_in_warp_staged<Chunks, Stages>(Q, op, d, staging_ring<Warps, Chunks, Stages, Problem>{dynamic_smem},
                                                   Q.initial(d));
    }
  }
}

/// Channel-last: block b takes (sequence, group of 32 channels) pairs b, b + grid, ... through
/// the lane loop (agent/lane_loop.cuh).
template <int Warps, int Steps, class Problem, class Op>
__global__ void __launch_bounds__(Warps* warp_threads)
    varlen_lane_loop_kernel(Problem P, Op op, const std::int64_t* cu_seqlens, index_t sequences, index_t channels) {
  __shared__ lane_tile_smem<typename Problem::acc_type, Warps> sm;
  const index_t groups = (channels + warp_threads - 1) / warp_threads;
  for (index_t job = blockIdx.x; job < sequences * groups; job += gridDim.x) {
    const index_t n = job / groups, g = job - n * groups;
    const index_t start = cu_seqlens[n];
    scan_lane_group_in_block<Warps, Steps>(sequence_of(P, n, start, cu_seqlens[n + 1] - start, channels), op, channels,
                                           g, sm);
  }
}

/// How dispatch_varlen covers a Problem: all of its tensors time-contiguous, all lane-major
/// (channel-last with D ≥ 32), or neither.
enum class varlen_cover { warp_loop, lane_loop, threads };
template <class T>
inline varlen_cover varlen_cover_of(const recurrence_forward_problem<T>& P) {
  if (P.la.step_stride == 1 && P.lb.step_stride == 1 && P.lx.step_stride == 1) return varlen_cover::warp_loop;
  if (is_lane_major(P.la) && is_lane_major(P.lb) && is_lane_major(P.lx)) return varlen_cover::lane_loop;
  return varlen_cover::threads;
}
template <class T>
inline varlen_cover varlen_cover_of(const recurrence_backward_problem<T>& P) {
  const sequence_layout* all[] = {&P.la, &P.lx, &P.ldx, &P.lda, &P.ldb};
  bool steps = true, lanes = true;
  for (const sequence_layout* l : all) steps &= l->step_stride == 1, lanes &= is_lane_major(*l);
  return steps ? varlen_cover::warp_loop : lanes ? varlen_cover::lane_loop : varlen_cover::threads;
}

/// Launches the kernel that suits the layout over N·D (sequence, channel) pairs; grid-stride
/// loops cover any count.
template <class Problem, class Op>
status dispatch_varlen(const Problem& P, Op op, const std::int64_t* cu_seqlens, index_t sequences, index_t channels,
                       const cuda_backend& be) {
  const index_t jobs = sequences * channels;
  if (jobs == 0) return status::success;
  constexpr index_t max_blocks = index_t(1) << 20;  // the loops take the rest
  auto capped = [&](index_t blocks) { return blocks < max_blocks ? blocks : max_blocks; };
  using shape = tile_shape<Problem>;
  switch (varlen_cover_of(P)) {
    case varlen_cover::warp_loop: {
      constexpr int stages = shape::loop_stages > 0 ? shape::loop_stages : 2;  // the recurrences stage
      constexpr auto kernel = varlen_warp_loop_kernel<shape::loop_warps, shape::chunks, stages, Problem, Op>;
      constexpr int smem = staging_ring<shape::loop_warps, shape::chunks, stages, Problem>::bytes;
      const device_facts dev = current_device();
      if (dev.st != status::success) return dev.st;
      if (blocks_per_multiprocessor<kernel>(shape::loop_warps * warp_threads, dev.device, smem) <= 0)
        return status::exceeds_device_limits;
      return launch(kernel, capped((jobs + shape::loop_warps - 1) / shape::loop_warps), shape::loop_warps * warp_threads,
                    smem, be, P, op, cu_seqlens, sequences, channels);
    }
    case varlen_cover::lane_loop:
      return launch(varlen_lane_loop_kernel<lane_loop_warps, lane_loop_steps, Problem, Op>,
                    capped(sequences * ((channels + warp_threads - 1) / warp_threads)), lane_loop_warps * warp_threads, 0,
                    be, P, op, cu_seqlens, sequences, channels);
    case varlen_cover::threads: break;
  }
  varlen_recurrence_kernel<<<static_cast<unsigned>(capped((jobs + varlen_block_threads - 1) / varlen_block_threads)),
                             varlen_block_threads, 0, be.stream>>>(P, op, cu_seqlens, sequences, channels);
  return check_launch();
}

}  // namespace parscan::cuda_detail
