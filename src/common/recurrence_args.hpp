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

/// One tensor of the log-space recurrence given in log form or in value form: at most one of
/// the two pointers (both: status::unsupported), and a sign array only with the log form
/// (status::unsupported). Neither is allowed here; the caller's tensor checks then refuse the
/// null pointer where data is required. `chosen` is the pointer given, `value` its form.
template <class P>
status pick_form(P log_form, P value_form, const void* signs, P& chosen, bool& value) {
  if (log_form && value_form) return status::unsupported;
  if (value_form && signs) return status::unsupported;
  chosen = value_form ? value_form : log_form;
  value = value_form != nullptr;
  return status::success;
}

/// The forms of a log-space forward's inputs (both backends read the pointers through these).
template <class T>
struct log_forward_forms {
  const T *a = nullptr, *b = nullptr, *x0 = nullptr;
  bool a_value = false, b_value = false, x0_value = false;
  bool maybe_negative() const { return a_value || b_value || x0_value; }
};

template <class T>
status pick_forward_forms(const log_forward_tensors<T>& g, log_forward_forms<T>& f) {
  if (status st = pick_form(g.log_a, g.a, g.a_negative, f.a, f.a_value); st != status::success) return st;
  if (status st = pick_form(g.log_b, g.b, g.b_negative, f.b, f.b_value); st != status::success) return st;
  return pick_form(g.log_x0, g.x0, g.x0_negative, f.x0, f.x0_value);
}

inline tensor_ref sign_ref(const void* ptr, const sequence_layout& l) {
  return tensor_ref{ptr, ptr ? l : sequence_layout::contiguous(0), 1};
}

/// The log-space forward's checks: each input in one form (log_a / a, log_b / b, log_x0 / x0 or
/// none), magnitudes and their sign bytes share layouts, the output is log_x (+ x_negative)
/// and/or x; outputs may replace their inputs exactly (log_x or x = the a or b input,
/// x_negative = a_ or b_negative) and the state may be updated in place (log_x_final = the x0
/// input); nothing else overlaps. The states (x0, x_final) hold `states` entries, B·D unless
/// given (packed sequences: N·D).
template <class T>
status plan_log_forward(const log_forward_args<T>& g, forward_plan& p, index_t states = -1) {
  log_forward_forms<T> f;
  if (status st = pick_forward_forms(g, f); st != status::success) return st;
  if (g.x && !g.log_x && g.x_negative) return status::unsupported;  // a sign array next to value-form x only
  if (status st = plan_forward_layouts<T>(g, p); st != status::success) return st;
  const index_t seqs = states < 0 ? p.sequences : states;
  const auto none = sequence_layout::contiguous(0);
  tensor_ref la{f.a, p.a, sizeof(T)}, lb{f.b, p.b, sizeof(T)};
  // x: log_x, or x, or both; with neither, log_x is the one reported missing.
  tensor_ref lx{g.log_x, g.log_x || !g.x ? p.x : none, sizeof(T)}, vx{g.x, g.x ? p.x : none, sizeof(T)};
  tensor_ref sa = sign_ref(g.a_negative, p.a), sb = sign_ref(g.b_negative, p.b), sx = sign_ref(g.x_negative, p.x);
  tensor_ref lx0 = dense(f.x0, f.x0 ? seqs : 0, sizeof(T)), sx0 = dense(g.x0_negative, g.x0_negative ? seqs : 0, 1);
  tensor_ref lxf = dense(g.log_x_final, g.log_x_final ? seqs : 0, sizeof(T));
  tensor_ref sxf = dense(g.x_final_negative, g.x_final_negative ? seqs : 0, 1);
  if (status st = check_tensors({&la, &lb, &sa, &sb, &lx0, &sx0}, {&lx, &vx, &sx, &lxf, &sxf}); st != status::success)
    return st;
  const bool maybe_negative = g.a_negative || g.b_negative || g.x0_negative || f.maybe_negative();
  if (maybe_negative && g.log_x && !g.x_negative && lx.span_bytes > 0) return status::null_pointer;
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
  if (status st = clear_of_inputs(vx, &la, &lb); st != status::success) return st;
  if (status st = clear_of_inputs(sx, &sa, &sb); st != status::success) return st;
  if (status st = clear_of_inputs(lxf, &lx0, nullptr); st != status::success) return st;
  if (status st = clear_of_inputs(sxf, &sx0, nullptr); st != status::success) return st;
  const tensor_ref* outputs[] = {&lx, &vx, &sx, &lxf, &sxf};
  for (int i = 0; i < 5; ++i)
    for (int j = i + 1; j < 5; ++j)
      if (status st = check_disjoint(*outputs[i], *outputs[j]); st != status::success) return st;
  return status::success;
}

/// The forms of a log-space backward's tensors: the inputs' (as the forward's) and the
/// upstream gradient's (dlog_x or dx); each input's gradient output is the one of its form.
template <class T>
struct log_backward_forms : log_forward_forms<T> {
  const T* dx = nullptr;  // dlog_x or dx
  bool dx_value = false;
  T *da = nullptr, *db = nullptr, *dx0 = nullptr;  // dlog_a or da, and so on
};

/// The output of the input's form; the other form's pointer must be null.
template <class T>
status pick_gradient(T* log_form, T* value_form, bool value, T*& chosen) {
  if (value ? log_form != nullptr : value_form != nullptr) return status::unsupported;
  chosen = value ? value_form : log_form;
  return status::success;
}

template <class T>
status pick_backward_forms(const log_backward_tensors<T>& g, log_backward_forms<T>& f) {
  if (status st = pick_form(g.log_a, g.a, g.a_negative, f.a, f.a_value); st != status::success) return st;
  if (status st = pick_form(g.log_b, g.b, g.b_negative, f.b, f.b_value); st != status::success) return st;
  if (status st = pick_form(g.log_x0, g.x0, g.x0_negative, f.x0, f.x0_value); st != status::success) return st;
  if (status st = pick_form(g.dlog_x, g.dx, nullptr, f.dx, f.dx_value); st != status::success) return st;
  // A missing input is the tensor checks' null_pointer, not a gradient in the wrong form.
  if (f.a)
    if (status st = pick_gradient(g.dlog_a, g.da, f.a_value, f.da); st != status::success) return st;
  if (f.b)
    if (status st = pick_gradient(g.dlog_b, g.db, f.b_value, f.db); st != status::success) return st;
  // Without x0 its gradient is neither written nor checked, in either form.
  if (f.x0)
    if (status st = pick_gradient(g.dlog_x0, g.dx0, f.x0_value, f.dx0); st != status::success) return st;
  return status::success;
}

struct log_backward_plan : backward_layouts {
  index_t sequences = 0;
  bool signed_values = false;  // some sign array or value-form input is given: x may be negative
};

/// The log-space backward's checks. Inputs: the a, b and x0 inputs in either form (x0
/// optional), log_x/x_negative (or nothing, to recompute x), dlog_x or dx, dlog_x_final.
/// Outputs: the a and b gradients, and the x0 gradient when x0 is given, each in its input's
/// form. The a or b gradient may replace the upstream gradient exactly (one of them), the x0
/// gradient may replace dlog_x_final exactly; nothing else overlaps. The states hold `states`
/// entries, B·D unless given (packed sequences: N·D).
template <class T>
status plan_log_backward(const log_backward_args<T>& g, log_backward_plan& p, index_t states = -1) {
  log_backward_forms<T> f;
  if (status st = pick_backward_forms(g, f); st != status::success) return st;
  const recurrence_shape& s = g.shape;
  if (status st = check_shape(s, sizeof(T), p.sequences); st != status::success) return st;
  const index_t seqs = states < 0 ? p.sequences : states;
  resolve_backward_layouts(s, g, g.log_x != nullptr, p);
  auto opt_dense = [&](const void* ptr, std::size_t bytes) { return dense(ptr, ptr ? seqs : 0, bytes); };
  const std::uint8_t* x_neg = g.log_x ? g.x_negative : nullptr;  // ignored when x is recomputed
  tensor_ref la{f.a, p.a, sizeof(T)}, lb{f.b, p.b, sizeof(T)};
  tensor_ref lx{g.log_x, g.log_x ? p.x : sequence_layout::contiguous(0), sizeof(T)};
  tensor_ref sa = sign_ref(g.a_negative, p.a), sb = sign_ref(g.b_negative, p.b), sx = sign_ref(x_neg, p.x);
  tensor_ref lx0 = opt_dense(f.x0, sizeof(T)), sx0 = opt_dense(g.x0_negative, 1);
  tensor_ref dx{f.dx, p.dx, sizeof(T)}, dxf = opt_dense(g.dlog_x_final, sizeof(T));
  tensor_ref da{f.da, p.da, sizeof(T)}, db{f.db, p.db, sizeof(T)};
  tensor_ref dx0 = opt_dense(f.dx0, sizeof(T));  // null without x0: neither written nor checked
  if (status st = check_tensors({&la, &lb, &lx, &sa, &sb, &sx, &lx0, &sx0, &dx, &dxf}, {&da, &db, &dx0});
      st != status::success)
    return st;
  p.signed_values = g.a_negative || g.b_negative || g.x0_negative || f.maybe_negative();
  if (g.log_x && p.signed_values && !g.x_negative && lx.span_bytes > 0) return status::null_pointer;
  if (g.x0_negative && !g.log_x0) return status::null_pointer;
  if (f.x0 && !f.dx0 && seqs > 0) return status::null_pointer;
  // Outputs: the a or b gradient may be the upstream gradient exactly, the x0 gradient
  // dlog_x_final exactly.
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
