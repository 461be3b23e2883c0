// src/common/varlen_args.hpp — validation and per-sequence views of the packed (cu_seqlens)
// gated recurrence. The packed tensor is checked as one batch of D channels × total_length
// steps with the per-sequence planners of recurrence_args.hpp, so its layouts, null pointers
// and aliasing are refused exactly as the fixed-length API refuses them; the states (x0,
// x_final, dx_final, dx0) are then checked as dense (N, D) arrays. Both backends call this
// before any work.
#pragma once

#include <cstdint>

#include "recurrence_args.hpp"

namespace parscan::detail {

/// The packed tensor as the fixed-length API sees it: one batch of D sequences of
/// total_length steps, always with explicit strides (the dense ones resolved here).
inline recurrence_shape packed_as_batch(const varlen_shape& s) {
  return {1, s.channels, s.total_length, recurrence_layout::strided};
}
inline recurrence_strides packed_strides(const varlen_shape& s, const recurrence_strides& given) {
  recurrence_strides r = s.layout == recurrence_layout::strided ? given : dense_strides(s);
  r.batch = 0;  // one batch: its stride is never used
  return r;
}

/// N ≥ 0, a non-null cu_seqlens (N + 1 offsets, so even N = 0 has one) and N·D states that
/// fit. Sets `states` = N·D.
inline status check_varlen_shape(const varlen_shape& s, index_t& states) {
  if (s.sequences < 0 || s.channels < 0 || s.total_length < 0) return status::negative_size;
  if (!s.cu_seqlens) return status::null_pointer;
  index_t offsets;
  if (mul_overflows(s.sequences, s.channels, states) || add_overflows(s.sequences, 1, offsets))
    return status::size_overflow;
  return status::success;
}

/// The offsets themselves, where the caller can read them (host memory): cu_seqlens[0] = 0,
/// never decreasing, cu_seqlens[N] ≤ total_length. A full pass, O(N).
inline status check_offsets(const varlen_shape& s) {
  return parscan::detail::check_offsets(s.cu_seqlens, s.sequences, s.total_length);
}

struct varlen_forward_plan {
  forward_plan whole;  // the packed tensors as D sequences of total_length steps
  index_t states = 0;  // N·D
};

/// The packed forward, as one fixed-length call without states; the caller adds x0/x_final.
template <class T>
gated_forward_args<T> packed_forward(const gated_varlen_forward_args<T>& g) {
  gated_forward_args<T> w{};
  w.shape = packed_as_batch(g.shape);
  w.a = g.a, w.b = g.b, w.x = g.x;
  w.reverse = g.reverse, w.gate = g.gate;
  w.a_strides = packed_strides(g.shape, g.a_strides);
  w.b_strides = packed_strides(g.shape, g.b_strides);
  w.x_strides = packed_strides(g.shape, g.x_strides);
  return w;
}

/// check_host_offsets: read cu_seqlens (host backend) or not (CUDA backend: device memory).
template <class T>
status plan_varlen_forward(const gated_varlen_forward_args<T>& g, bool check_host_offsets, varlen_forward_plan& p) {
  if (status st = check_varlen_shape(g.shape, p.states); st != status::success) return st;
  if (status st = plan_forward(packed_forward(g), p.whole); st != status::success) return st;
  // The states, with the same rules as plan_forward's but N·D of them.
  tensor_ref a{g.a, p.whole.a, sizeof(T)}, b{g.b, p.whole.b, sizeof(T)}, x{g.x, p.whole.x, sizeof(T)};
  tensor_ref x0 = dense(g.x0, g.x0 ? p.states : 0, sizeof(T));
  tensor_ref xf = dense(g.x_final, g.x_final ? p.states : 0, sizeof(T));
  if (status st = check_tensors({&a, &b, &x0}, {&x, &xf}); st != status::success) return st;
  for (const tensor_ref* other : {&x, &a, &b})
    if (status st = check_disjoint(xf, *other); st != status::success) return st;
  if (status st = check_disjoint(x, x0); st != status::success) return st;
  if (xf.span_bytes > 0 && x0.span_bytes > 0 && xf.ptr != x0.ptr)  // only exact in-place state update
    if (status st = check_disjoint(xf, x0); st != status::success) return st;
  return check_host_offsets ? check_offsets(g.shape) : status::success;
}

struct varlen_backward_plan {
  backward_plan whole;
  index_t states = 0;
};

template <class T>
gated_backward_args<T> packed_backward(const gated_varlen_backward_args<T>& g) {
  gated_backward_args<T> w{};
  w.shape = packed_as_batch(g.shape);
  w.a = g.a, w.x = g.x, w.b = g.b, w.dx = g.dx, w.da = g.da, w.db = g.db;
  w.reverse = g.reverse, w.gate = g.gate;
  w.a_strides = packed_strides(g.shape, g.a_strides);
  w.x_strides = packed_strides(g.shape, g.x_strides);
  w.b_strides = packed_strides(g.shape, g.b_strides);
  w.dx_strides = packed_strides(g.shape, g.dx_strides);
  w.da_strides = packed_strides(g.shape, g.da_strides);
  w.db_strides = packed_strides(g.shape, g.db_strides);
  return w;
}

template <class T>
status plan_varlen_backward(const gated_varlen_backward_args<T>& g, bool check_host_offsets, varlen_backward_plan& p) {
  if (status st = check_varlen_shape(g.shape, p.states); st != status::success) return st;
  if (status st = plan_backward(packed_backward(g), p.whole); st != status::success) return st;
  const backward_plan& w = p.whole;
  tensor_ref a{g.a, w.a, sizeof(T)}, x{g.x ? g.x : g.b, w.x, sizeof(T)}, dx{g.dx, w.dx, sizeof(T)};
  tensor_ref da{g.da, w.da, sizeof(T)}, db{g.db, w.db, sizeof(T)};
  const index_t n = p.states;
  tensor_ref x0 = dense(g.x0, g.x0 ? n : 0, sizeof(T));
  tensor_ref dxf = dense(g.dx_final, g.dx_final ? n : 0, sizeof(T));
  const T* dx0_used = g.x0 ? g.dx0 : nullptr;  // without x0, dx0 is neither written nor checked
  tensor_ref dx0 = dense(dx0_used, dx0_used ? n : 0, sizeof(T));
  if (status st = check_tensors({&a, &x, &dx, &x0, &dxf}, {&da, &db, &dx0}); st != status::success) return st;
  if (g.x0 && !g.dx0 && n > 0) return status::null_pointer;
  for (const tensor_ref* out : {&da, &db})
    for (const tensor_ref* state : {&x0, &dxf, &dx0})
      if (status st = check_disjoint(*out, *state); st != status::success) return st;
  for (const tensor_ref* in : {&a, &x, &dx, &x0})
    if (status st = check_disjoint(dx0, *in); st != status::success) return st;
  if (dx0.span_bytes > 0 && dxf.span_bytes > 0 && dx0.ptr != dxf.ptr)
    if (status st = check_disjoint(dx0, dxf); st != status::success) return st;
  return check_host_offsets ? check_offsets(g.shape) : status::success;
}

// The log-space recurrence over packed sequences: its tensors as one fixed-length call of D
// channels × total_length steps (the states stay where they are: N·D of them, which the
// planner checks and each sequence's view steps through by n·D).

template <class T>
log_forward_args<T> packed_log_forward(const log_varlen_forward_args<T>& g) {
  log_forward_args<T> w{};
  static_cast<log_forward_tensors<T>&>(w) = g;
  w.shape = packed_as_batch(g.shape);
  w.a_strides = packed_strides(g.shape, g.a_strides);
  w.b_strides = packed_strides(g.shape, g.b_strides);
  w.x_strides = packed_strides(g.shape, g.x_strides);
  return w;
}

template <class T>
log_backward_args<T> packed_log_backward(const log_varlen_backward_args<T>& g) {
  log_backward_args<T> w{};
  static_cast<log_backward_tensors<T>&>(w) = g;
  w.shape = packed_as_batch(g.shape);
  for (recurrence_strides* s : {&w.a_strides, &w.b_strides, &w.x_strides, &w.dx_strides, &w.da_strides, &w.db_strides})
    *s = packed_strides(g.shape, *s);
  return w;
}

template <class T>
status plan_log_varlen_forward(const log_varlen_forward_args<T>& g, bool check_host_offsets, forward_plan& p) {
  index_t states;
  if (status st = check_varlen_shape(g.shape, states); st != status::success) return st;
  if (status st = plan_log_forward(packed_log_forward(g), p, states); st != status::success) return st;
  return check_host_offsets ? check_offsets(g.shape) : status::success;
}

template <class T>
status plan_log_varlen_backward(const log_varlen_backward_args<T>& g, bool check_host_offsets, log_backward_plan& p) {
  index_t states;
  if (status st = check_varlen_shape(g.shape, states); st != status::success) return st;
  if (status st = plan_log_backward(packed_log_backward(g), p, states); st != status::success) return st;
  return check_host_offsets ? check_offsets(g.shape) : status::success;
}

}  // namespace parscan::detail
