// parscan/cuda/recurrence/log_varlen_recurrence.cuh — the log-space recurrence over packed
// variable-length sequences (cu_seqlens): its forward and backward Problems
// (log_recurrence_problem.cuh) narrowed to one sequence, for varlen_recurrence.cuh's loops
// (dispatch_varlen: the warp loop where every tensor is time-contiguous, the lane loop where
// every one is channel-last, a thread per (sequence, channel) otherwise). The step arithmetic is
// the fixed-length kernels' own; nothing passes between sequences.
#pragma once

#include "log_recurrence_problem.cuh"
#include "varlen_recurrence.cuh"

namespace parscan::cuda_detail {

template <class P>
__device__ PARSCAN_INLINE P* advanced(P* p, index_t offset) {
  return p ? p + offset : nullptr;
}

/// Sequence n of a packed forward: its steps [start, start + length) of every tensor (the sign
/// arrays share their magnitudes' layouts), its states at n·D.
template <class T, bool Values>
__device__ PARSCAN_INLINE log_recurrence_forward_problem<T, Values> sequence_of(
    log_recurrence_forward_problem<T, Values> P, index_t n, index_t start, index_t length, index_t channels) {
  const index_t oa = start * P.la.step_stride, ob = start * P.lb.step_stride, ox = start * P.lx.step_stride;
  const index_t os = n * channels;
  P.log_a += oa, P.a_negative = advanced(P.a_negative, oa);
  P.log_b += ob, P.b_negative = advanced(P.b_negative, ob);
  P.log_x = advanced(P.log_x, ox), P.x_negative = advanced(P.x_negative, ox), P.x = advanced(P.x, ox);
  P.log_x0 = advanced(P.log_x0, os), P.x0_negative = advanced(P.x0_negative, os);
  P.log_x_final = advanced(P.log_x_final, os), P.x_final_negative = advanced(P.x_final_negative, os);
  P.la.length = P.lb.length = P.lx.length = P.length = length;
  return P;
}

template <class T, bool Values>
__device__ PARSCAN_INLINE log_recurrence_backward_problem<T, Values> sequence_of(
    log_recurrence_backward_problem<T, Values> P, index_t n, index_t start, index_t length, index_t channels) {
  const index_t oa = start * P.la.step_stride, ob = start * P.lb.step_stride, ox = start * P.lx.step_stride;
  const index_t os = n * channels;
  P.log_a += oa, P.a_negative = advanced(P.a_negative, oa);
  P.log_b += ob, P.b_negative = advanced(P.b_negative, ob);
  P.log_x += ox, P.x_negative = advanced(P.x_negative, ox);
  P.dlog_x += start * P.ldx.step_stride;
  P.dlog_a += start * P.lda.step_stride;
  P.dlog_b += start * P.ldb.step_stride;
  P.log_x0 = advanced(P.log_x0, os), P.x0_negative = advanced(P.x0_negative, os);
  P.dlog_x_final = advanced(P.dlog_x_final, os), P.dlog_x0 = advanced(P.dlog_x0, os);
  P.la.length = P.lb.length = P.lx.length = P.ldx.length = P.lda.length = P.ldb.length = P.length = length;
  return P;
}

/// Which of dispatch_varlen's loops covers a log-space Problem (as for the gated ones).
template <class T, bool Values>
inline varlen_cover varlen_cover_of(const log_recurrence_forward_problem<T, Values>& P) {
  const sequence_layout* all[] = {&P.la, &P.lb, &P.lx};
  return varlen_cover_for(all);
}
template <class T, bool Values>
inline varlen_cover varlen_cover_of(const log_recurrence_backward_problem<T, Values>& P) {
  const sequence_layout* all[] = {&P.la, &P.lb, &P.lx, &P.ldx, &P.lda, &P.ldb};
  return varlen_cover_for(all);
}

}  // namespace parscan::cuda_detail
