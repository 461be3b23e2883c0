// src/common/recurrence_args.hpp — turns gated-recurrence arguments into per-tensor
// sequence layouts and validates them. Both backends call this before any work, so they
// refuse exactly the same inputs.
#pragma once

#include <parscan/detail/validate.hpp>
#include <parscan/log_recurrence.hpp>
#include <parscan/recurrence.hpp>

namespace parscan::detail {

/// The (B·D sequences × T steps) layout of one (B, D, T) tensor with the given strides.
inline sequence_layout as_sequences(const recurrence_shape& s, const recurrence_strides& st) {
  return {s.channels, s.length, st.channel, st.time, s.batch, st.batch};
}

inline recurrence_strides strides_for(const recurrence_shape& s, const recurrence_strides& given) {
  return s.layout == recurrence_layout::strided ? given : dense_strides(s);
}

/// Sizes are non-negative and B·D·T elements (and, for dense layouts, their bytes, which the
/// dense strides reach) fit in 64 bits. Sets `sequences` = B·D.
inline status check_shape(const recurrence_shape& s, std::size_t elem_bytes, index_t& sequences) {
  if (s.batch < 0 || s.channels < 0 || s.length < 0) return status::negative_size;
  index_t total;
  if (mul_overflows(s.batch, s.channels, sequences) || mul_overflows(sequences, s.length, total))
    return status::size_overflow;
  if (s.layout != recurrence_layout::strided && mul_overflows(total, static_cast<index_t>(elem_bytes), total))
    return status::size_overflow;
  return status::success;
}

struct forward_plan {
  sequence_layout a, b, x;
  index_t sequences = 0;
};

/// The shape checks and the a, b and x layouts, shared by the linear and the log-space forward.
template <class T, class Args>
status plan_forward_layouts(const Args& g, forward_plan& p) {
  const recurrence_shape& s = g.shape;
  if (status st = check_shape(s, sizeof(T), p.sequences); st != status::success) return st;
  p.a = as_sequences(s, strides_for(s, g.a_strides));
  p.b = as_sequences(s, strides_for(s, g.b_strides));
  p.x = as_sequences(s, strides_for(s, g.x_strides));
  return status::success;
}

template <class T>
status plan_forward(const gated_forward_args<T>& g, forward_plan& p) {
  if (status st = plan_forward_layouts<T>(g, p); st != status::success) return st;
  const index_t seqs = p.sequences;
  tensor_ref a{g.a, p.a, sizeof(T)}, b{g.b, p.b, sizeof(T)}, x{g.x, p.x, sizeof(T)};
  tensor_ref x0 = dense(g.x0, g.x0 ? seqs : 0, sizeof(T));
  tensor_ref xf = dense(g.x_final, g.x_final ? seqs : 0, sizeof(T));
  if (status st = check_tensors({&a, &b, &x0}, {&x, &xf}); st != status::success) return st;
  for (const tensor_ref* in : {&a, &b})
    if (status st = check_aliasing(x, *in); st != status::success) return st;
  if (status st = check_disjoint(x, xf); st != status::success) return st;
  if (status st = check_disjoint(x, x0); st != status::success) return st;
  for (const tensor_ref* in : {&a, &b})
    if (status st = check_disjoint(xf, *in); st != status::success) return st;
  if (xf.span_bytes > 0 && x0.span_bytes > 0 && xf.ptr != x0.ptr)  // only exact in-place state update
    if (status st = check_disjoint(xf, x0); st != status::success) return st;
  return status::success;
}

/// The six tensors of a backward pass as sequences: the gated and the log-space arguments
/// name their strides alike. x is laid out like b when it is recomputed.
struct backward_layouts {
  sequence_layout a, x, b, dx, da, db;
};

/// x_given: false when x is recomputed, into storage laid out like b.
template <class Args>
void resolve_backward_layouts(const recurrence_shape& s, const Args& g, bool x_given, backward_layouts& p) {
  p.a = as_sequences(s, strides_for(s, g.a_strides));
  p.x = as_sequences(s, strides_for(s, x_given ? g.x_strides : g.b_strides));
  p.b = as_sequences(s, strides_for(s, g.b_strides));
  p.dx = as_sequences(s, strides_for(s, g.dx_strides));
  p.da = as_sequences(s, strides_for(s, g.da_strides));
  p.db = as_sequences(s, strides_for(s, g.db_strides));
}

struct backward_plan : backward_layouts {
  index_t sequences = 0;
};

template <class T>
status plan_backward(const gated_backward_args<T>& g, backward_plan& p) {
  const recurrence_shape& s = g.shape;
  if (status st = check_shape(s, sizeof(T), p.sequences); st != status::success) return st;
  const index_t seqs = p.sequences;
  resolve_backward_layouts(s, g, g.x != nullptr, p);
  tensor_ref a{g.a, p.a, sizeof(T)}, dx{g.dx, p.dx, sizeof(T)}, da{g.da, p.da, sizeof(T)}, db{g.db, p.db, sizeof(T)};
  // x, or b to recompute it: whichever is used must be present.
  tensor_ref x{g.x ? g.x : g.b, p.x, sizeof(T)};
  tensor_ref x0 = dense(g.x0, g.x0 ? seqs : 0, sizeof(T));
  tensor_ref dxf = dense(g.dx_final, g.dx_final ? seqs : 0, sizeof(T));
  const T* dx0_used = g.x0 ? g.dx0 : nullptr;  // without x0, dx0 is neither written nor checked
  tensor_ref dx0 = dense(dx0_used, dx0_used ? seqs : 0, sizeof(T));
  if (status st = check_tensors({&a, &x, &dx, &x0, &dxf}, {&da, &db, &dx0}); st != status::success) return st;
  if (g.x0 && !g.dx0 && seqs > 0) return status::null_pointer;
  // Outputs may alias dx exactly (one of them); nothing else may overlap.
  if (status st = check_disjoint(da, db); st != status::success) return st;
  for (const tensor_ref* out : {&da, &db}) {
    if (status st = check_aliasing(*out, dx); st != status::success) return st;
    for (const tensor_ref* in : {&a, &x, &x0, &dxf, &dx0})
      if (status st = check_disjoint(*out, *in); st != status::success) return st;
  }
  for (const tensor_ref* in : {&a, &x, &dx, &x0})
    if (status st = check_disjoint(dx0, *in); st != status::success) return st;
  if (dx0.span_bytes > 0 && dxf.span_bytes > 0 && dx0.ptr != dxf.ptr)
    if (status st = check_disjoint(dx0, dxf); st != status::success) return st;
  return status::success;
}

/// The log-space forward's checks: magnitudes and their sign bytes share layouts; outputs may
/// replace their inputs exactly (log_x = log_a or log_b, x_negative = a_ or b_negative) and the
/// state may be updated in place (x_final = x0); nothing else overlaps.
template <class T>
status plan_log_forward(const log_forward_args<T>& g, forward_plan& p) {
  if (status st = plan_forward_layouts<T>(g, p); st != status::success) return st;
  const index_t seqs = p.sequences;
  tensor_ref la{g.log_a, p.a, sizeof(T)}, lb{g.log_b, p.b, sizeof(T)}, lx{g.log_x, p.x, sizeof(T)};
  auto signs = [](const void* ptr, const sequence_layout& l) {
    return tensor_ref{ptr, ptr ? l : sequence_layout::contiguous(0), 1};
  };
  tensor_ref sa = signs(g.a_negative, p.a), sb = signs(g.b_negative, p.b), sx = signs(g.x_negative, p.x);
  tensor_ref lx0 = dense(g.log_x0, g.log_x0 ? seqs : 0, sizeof(T)), sx0 = dense(g.x0_negative, g.x0_negative ? seqs : 0, 1);
  tensor_ref lxf = dense(g.log_x_final, g.log_x_final ? seqs : 0, sizeof(T));
  tensor_ref sxf = dense(g.x_final_negative, g.x_final_negative ? seqs : 0, 1);
  if (status st = check_tensors({&la, &lb, &sa, &sb, &lx0, &sx0}, {&lx, &sx, &lxf, &sxf}); st != status::success) return st;
  const bool maybe_negative = g.a_negative || g.b_negative || g.x0_negative;
  if (maybe_negative && !g.x_negative && lx.span_bytes > 0) return status::null_pointer;
  if (maybe_negative && g.log_x_final && !g.x_final_negative && seqs > 0) return status::null_pointer;
  if (g.x0_negative && !g.log_x0) return status::null_pointer;
  // Outputs: exact replacement of an input, or no overlap at all.
  const tensor_ref* inputs[] = {&la, &lb, &sa, &sb, &lx0, &sx0};
  auto clear_of_inputs = [&](const tensor_ref& out, const tensor_ref* allowed_a, const tensor_ref* allowed_b) {
    for (const tensor_ref* in : inputs) {
      const status st = (in == allowed_a || in == allowed_b) ? check_aliasing(out, *in) : check_disjoint(out, *in);
      if (st != status::success) return st;
    }
    return status::success;
  };
  if (status st = clear_of_inputs(lx, &la, &lb); st != status::success) return st;
  if (status st = clear_of_inputs(sx, &sa, &sb); st != status::success) return st;
  if (status st = clear_of_inputs(lxf, &lx0, nullptr); st != status::success) return st;
  if (status st = clear_of_inputs(sxf, &sx0, nullptr); st != status::success) return st;
  const tensor_ref* outputs[] = {&lx, &sx, &lxf, &sxf};
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j)
      if (status st = check_disjoint(*outputs[i], *outputs[j]); st != status::success) return st;
  return status::success;
}

struct log_backward_plan : backward_layouts {
  index_t sequences = 0;
  bool signed_values = false;  // some sign array is given: x may be negative
};

/// The log-space backward's checks. Inputs: log_a/a_negative, log_b/b_negative, log_x/x_negative
/// (or nothing, to recompute x), log_x0/x0_negative, dlog_x, dlog_x_final. Outputs: dlog_a,
/// dlog_b, and dlog_x0 when x0 is given. dlog_a or dlog_b may replace dlog_x exactly (one of
/// them), dlog_x0 may replace dlog_x_final exactly; nothing else overlaps.
template <class T>
status plan_log_backward(const log_backward_args<T>& g, log_backward_plan& p) {
  const recurrence_shape& s = g.shape;
  if (status st = check_shape(s, sizeof(T), p.sequences); st != status::success) return st;
  const index_t seqs = p.sequences;
  resolve_backward_layouts(s, g, g.log_x != nullptr, p);
  auto signs = [](const void* ptr, const sequence_layout& l) {
    return tensor_ref{ptr, ptr ? l : sequence_layout::contiguous(0), 1};
  };
  auto opt_dense = [&](const void* ptr, std::size_t bytes) { return dense(ptr, ptr ? seqs : 0, bytes); };
  const std::uint8_t* x_neg = g.log_x ? g.x_negative : nullptr;  // ignored when x is recomputed
  tensor_ref la{g.log_a, p.a, sizeof(T)}, lb{g.log_b, p.b, sizeof(T)};
  tensor_ref lx{g.log_x, g.log_x ? p.x : sequence_layout::contiguous(0), sizeof(T)};
  tensor_ref sa = signs(g.a_negative, p.a), sb = signs(g.b_negative, p.b), sx = signs(x_neg, p.x);
  tensor_ref lx0 = opt_dense(g.log_x0, sizeof(T)), sx0 = opt_dense(g.x0_negative, 1);
  tensor_ref dx{g.dlog_x, p.dx, sizeof(T)}, dxf = opt_dense(g.dlog_x_final, sizeof(T));
  tensor_ref da{g.dlog_a, p.da, sizeof(T)}, db{g.dlog_b, p.db, sizeof(T)};
  const T* dx0_used = g.log_x0 ? g.dlog_x0 : nullptr;  // without x0, dlog_x0 is neither written nor checked
  tensor_ref dx0 = opt_dense(dx0_used, sizeof(T));
  if (status st = check_tensors({&la, &lb, &lx, &sa, &sb, &sx, &lx0, &sx0, &dx, &dxf}, {&da, &db, &dx0});
      st != status::success)
    return st;
  p.signed_values = g.a_negative || g.b_negative || g.x0_negative;
  if (g.log_x && p.signed_values && !g.x_negative && lx.span_bytes > 0) return status::null_pointer;
  if (g.x0_negative && !g.log_x0) return status::null_pointer;
  if (g.log_x0 && !g.dlog_x0 && seqs > 0) return status::null_pointer;
  // Outputs: dlog_a or dlog_b may be dlog_x exactly, dlog_x0 may be dlog_x_final exactly.
  if (status st = check_disjoint(da, db); st != status::success) return st;
  for (const tensor_ref* out : {&da, &db}) {
    if (status st = check_aliasing(*out, dx); st != status::success) return st;
    for (const tensor_ref* in : {&la, &lb, &lx, &sa, &sb, &sx, &lx0, &sx0, &dxf, &dx0})
      if (status st = check_disjoint(*out, *in); st != status::success) return st;
  }
  for (const tensor_ref* in : {&la, &lb, &lx, &sa, &sb, &sx, &lx0, &sx0, &dx})
    if (status st = check_disjoint(dx0, *in); st != status::success) return st;
  if (dx0.span_bytes > 0 && dxf.span_bytes > 0 && dx0.ptr != dxf.ptr)
    if (status st = check_disjoint(dx0, dxf); st != status::success) return st;
  return status::success;
}

}  // namespace parscan::detail
