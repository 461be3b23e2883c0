// src/common/matrix_args.hpp — turns matrix-recurrence and matrix-chain arguments into
// per-tensor layouts with resolved strides, and validates them. Both backends call this before
// any work, so they refuse exactly the same inputs (see parscan/matrix_recurrence.hpp).
#pragma once

#include <parscan/detail/validate.hpp>
#include <parscan/matrix_recurrence.hpp>

namespace parscan::detail {

inline constexpr index_t max_matrix_state = 64;   // N of the matrix recurrence
inline constexpr index_t max_chain_size = 1024;   // d of a matrix chain

/// A (B, T, block) tensor with its batch and step strides resolved (no -1 left). `layout` is
/// the same tensor as sequence_layout: `block` contiguous elements × T steps × B groups, which
/// is what the generic checks (span, byte overflow, one-to-one) work on.
struct block_tensor {
  index_t batch_stride = 0, step_stride = 0;
  sequence_layout layout;
  /// Element offset of step t of sequence b (the first element of its block).
  PARSCAN_HD index_t at(index_t b, index_t t) const { return b * batch_stride + t * step_stride; }
};

/// Resolves `given` for a (B, T, block) tensor: -1 becomes the dense stride, any other
/// negative value is invalid_stride, and a dense stride that does not fit is size_overflow.
inline status resolve_strides(const batch_strides& given, index_t B, index_t T, index_t block, block_tensor& r) {
  if ((given.batch < 0 && given.batch != -1) || (given.step < 0 && given.step != -1)) return status::invalid_stride;
  index_t dense_batch;
  if (mul_overflows(T, block, dense_batch)) return status::size_overflow;
  r.step_stride = given.step == -1 ? block : given.step;
  r.batch_stride = given.batch == -1 ? dense_batch : given.batch;
  r.layout = sequence_layout{block, T, 1, r.step_stride, B, r.batch_stride};
  return status::success;
}

/// Sizes are non-negative, the matrix size is in 1..max_size, and B·T·size² elements (and
/// their bytes) fit in 64 bits.
inline status check_block_shape(index_t B, index_t T, index_t size, index_t max_size, std::size_t elem_bytes) {
  if (B < 0 || T < 0 || size < 0) return status::negative_size;
  if (size < 1 || size > max_size) return status::unsupported;
  index_t total;
  if (mul_overflows(B, T, total) || mul_overflows(total, size * size, total) ||
      mul_overflows(total, static_cast<index_t>(elem_bytes), total))
    return status::size_overflow;
  return status::success;
}

/// Checks `out` against every input: exact aliasing where `may_alias` names the input,
/// no overlap at all otherwise.
inline status clear_of(const tensor_ref& out, std::initializer_list<const tensor_ref*> inputs,
                       const tensor_ref* may_alias = nullptr) {
  for (const tensor_ref* in : inputs) {
    const status st = in == may_alias ? check_aliasing(out, *in) : check_disjoint(out, *in);
    if (st != status::success) return st;
  }
  return status::success;
}

/// x_final = x0 or dx0 = dx_final: the same pointer (an in-place state update) or no overlap.
inline status state_in_place_or_disjoint(const tensor_ref& out, const tensor_ref& in) {
  if (out.span_bytes > 0 && in.span_bytes > 0 && out.ptr == in.ptr) return status::success;
  return check_disjoint(out, in);
}

// ---------------------------------------------------------------------------------------
// The matrix recurrence.

struct matrix_forward_plan {
  index_t batch = 0, length = 0, n = 0;
  block_tensor W, b, x;
};

/// The shape both plans start from: (batch, length, n) copied and checked.
template <class Args, class Plan>
status plan_matrix_shape(const Args& g, Plan& p, std::size_t elem_bytes) {
  p.batch = g.batch, p.length = g.length, p.n = g.n;
  return check_block_shape(g.batch, g.length, g.n, max_matrix_state, elem_bytes);
}

/// `states`: the entries of x0 and x_final, B·N unless given (packed sequences: sequences·N).
template <class T>
status plan_matrix_forward(const matrix_forward_args<T>& g, matrix_forward_plan& p, index_t states = -1) {
  if (status st = plan_matrix_shape(g, p, sizeof(T)); st != status::success) return st;
  const index_t N = g.n, B = g.batch, L = g.length, S = states < 0 ? B * N : states;
  if (status st = resolve_strides(g.W_strides, B, L, N * N, p.W); st != status::success) return st;
  if (status st = resolve_strides(g.b_strides, B, L, N, p.b); st != status::success) return st;
  if (status st = resolve_strides(g.x_strides, B, L, N, p.x); st != status::success) return st;
  tensor_ref W{g.W, p.W.layout, sizeof(T)}, b{g.b, p.b.layout, sizeof(T)}, x{g.x, p.x.layout, sizeof(T)};
  tensor_ref x0 = dense(g.x0, g.x0 ? S : 0, sizeof(T));
  tensor_ref xf = dense(g.x_final, g.x_final ? S : 0, sizeof(T));
  if (status st = check_tensors({&W, &b, &x0}, {&x, &xf}); st != status::success) return st;
  // x may replace b exactly; x_final may replace x0 exactly; nothing else overlaps.
  if (status st = clear_of(x, {&W, &b, &x0}, &b); st != status::success) return st;
  if (status st = clear_of(xf, {&W, &b, &x}); st != status::success) return st;
  return state_in_place_or_disjoint(xf, x0);
}

struct matrix_backward_plan {
  index_t batch = 0, length = 0, n = 0;
  block_tensor W, x, b, dx, dW, db;  // x: the given x, or (x null) laid out like b
};

/// `states`: the entries of x0, dx_final and dx0, B·N unless given (packed: sequences·N).
template <class T>
status plan_matrix_backward(const matrix_backward_args<T>& g, matrix_backward_plan& p, index_t states = -1) {
  if (status st = plan_matrix_shape(g, p, sizeof(T)); st != status::success) return st;
  const index_t N = g.n, B = g.batch, L = g.length, S = states < 0 ? B * N : states;
  const struct {
    const batch_strides& given;
    index_t block;
    block_tensor& r;
  } tensors[] = {{g.W_strides, N * N, p.W}, {g.x_strides, N, p.x},   {g.b_strides, N, p.b},
                 {g.dx_strides, N, p.dx},   {g.dW_strides, N * N, p.dW}, {g.db_strides, N, p.db}};
  for (const auto& t : tensors)
    if (status st = resolve_strides(t.given, B, L, t.block, t.r); st != status::success) return st;
  if (!g.x) p.x = p.b;  // x is recomputed from b: it is b's layout that is read

  tensor_ref W{g.W, p.W.layout, sizeof(T)}, dx{g.dx, p.dx.layout, sizeof(T)};
  tensor_ref dW{g.dW, p.dW.layout, sizeof(T)}, db{g.db, p.db.layout, sizeof(T)};
  // x, or b to recompute it: whichever is used must be present.
  tensor_ref x{g.x ? g.x : g.b, p.x.layout, sizeof(T)};
  tensor_ref x0 = dense(g.x0, g.x0 ? S : 0, sizeof(T));
  tensor_ref dxf = dense(g.dx_final, g.dx_final ? S : 0, sizeof(T));
  T* const dx0_used = g.x0 ? g.dx0 : nullptr;  // without x0, dx0 is neither written nor checked
  tensor_ref dx0 = dense(dx0_used, dx0_used ? S : 0, sizeof(T));
  if (status st = check_tensors({&W, &x, &dx, &x0, &dxf}, {&dW, &db, &dx0}); st != status::success) return st;
  if (g.x0 && !g.dx0 && S > 0) return status::null_pointer;
  // db may replace dx exactly; dx0 may replace dx_final exactly; nothing else overlaps.
  if (status st = clear_of(dW, {&W, &x, &dx, &x0, &dxf, &db, &dx0}); st != status::success) return st;
  if (status st = clear_of(db, {&W, &x, &dx, &x0, &dxf, &dx0}, &dx); st != status::success) return st;
  if (status st = clear_of(dx0, {&W, &x, &dx, &x0}); st != status::success) return st;
  return state_in_place_or_disjoint(dx0, dxf);
}

// ---------------------------------------------------------------------------------------
// The matrix recurrence over packed sequences: the packed tensors checked as one sequence of
// total_length steps (batch strides unused), the states as (sequences, N), the offsets where
// the caller can read them.

/// sequences ≥ 0, a non-null cu_seqlens and sequences·N states that fit; sets `states`.
inline status check_matrix_varlen_shape(const matrix_varlen_shape& s, index_t& states) {
  if (s.sequences < 0 || s.total_length < 0 || s.n < 0) return status::negative_size;
  if (!s.cu_seqlens) return status::null_pointer;
  index_t offsets;
  if (mul_overflows(s.sequences, s.n, states) || add_overflows(s.sequences, 1, offsets)) return status::size_overflow;
  return status::success;
}

inline batch_strides packed_steps(const batch_strides& given) { return {-1, given.step}; }

template <class T>
matrix_forward_args<T> packed_matrix_forward(const matrix_varlen_forward_args<T>& g) {
  matrix_forward_args<T> w{};
  w.batch = 1, w.length = g.shape.total_length, w.n = g.shape.n;
  w.W = g.W, w.b = g.b, w.x = g.x, w.x0 = g.x0, w.x_final = g.x_final, w.reverse = g.reverse;
  w.W_strides = packed_steps(g.W_strides), w.b_strides = packed_steps(g.b_strides);
  w.x_strides = packed_steps(g.x_strides);
  return w;
}

template <class T>
matrix_backward_args<T> packed_matrix_backward(const matrix_varlen_backward_args<T>& g) {
  matrix_backward_args<T> w{};
  w.batch = 1, w.length = g.shape.total_length, w.n = g.shape.n;
  w.W = g.W, w.x = g.x, w.b = g.b, w.x0 = g.x0, w.dx = g.dx, w.dx_final = g.dx_final;
  w.dW = g.dW, w.db = g.db, w.dx0 = g.dx0, w.reverse = g.reverse;
  w.W_strides = packed_steps(g.W_strides), w.x_strides = packed_steps(g.x_strides);
  w.b_strides = packed_steps(g.b_strides), w.dx_strides = packed_steps(g.dx_strides);
  w.dW_strides = packed_steps(g.dW_strides), w.db_strides = packed_steps(g.db_strides);
  return w;
}

/// The packed forward's checks; `p` is the plan of the packed tensors as one sequence.
template <class T>
status plan_matrix_varlen_forward(const matrix_varlen_forward_args<T>& g, bool check_host_offsets,
                                  matrix_forward_plan& p) {
  index_t states;
  if (status st = check_matrix_varlen_shape(g.shape, states); st != status::success) return st;
  if (status st = plan_matrix_forward(packed_matrix_forward(g), p, states); st != status::success) return st;
  return check_host_offsets ? check_offsets(g.shape.cu_seqlens, g.shape.sequences, g.shape.total_length)
                            : status::success;
}

template <class T>
status plan_matrix_varlen_backward(const matrix_varlen_backward_args<T>& g, bool check_host_offsets,
                                   matrix_backward_plan& p) {
  index_t states;
  if (status st = check_matrix_varlen_shape(g.shape, states); st != status::success) return st;
  if (status st = plan_matrix_backward(packed_matrix_backward(g), p, states); st != status::success) return st;
  return check_host_offsets ? check_offsets(g.shape.cu_seqlens, g.shape.sequences, g.shape.total_length)
                            : status::success;
}

// ---------------------------------------------------------------------------------------
// Matrix chains.

struct matrix_chain_plan {
  index_t batch = 0, count = 0, d = 0;
  block_tensor M, out;  // out: T = 1 step for chain_output::total
};

template <class T>
status plan_matrix_chain(const matrix_chain_args<T>& g, matrix_chain_plan& p) {
  p.batch = g.batch, p.count = g.count, p.d = g.d;
  if (status st = check_block_shape(g.batch, g.count, g.d, max_chain_size, sizeof(T));
      st != status::success)
    return st;
  const bool known_output = g.output == chain_output::total || g.output == chain_output::prefixes;
  const bool known_order = g.order == chain_order::left_to_right || g.order == chain_order::right_to_left;
  const bool known_math = g.math == chain_math::exact || g.math == chain_math::tf32 || g.math == chain_math::bf16;
  if (!known_output || !known_order || !known_math) return status::unsupported;
  const index_t B = g.batch, dd = g.d * g.d;
  const bool total = g.output == chain_output::total;
  if (status st = resolve_strides(g.M_strides, B, g.count, dd, p.M); st != status::success) return st;
  // A total is one (d, d) block per chain: its step stride is unused, so it is never checked.
  const batch_strides out_given = total ? batch_strides{g.out_strides.batch, -1} : g.out_strides;
  if (status st = resolve_strides(out_given, B, total ? 1 : g.count, dd, p.out); st != status::success) return st;
  tensor_ref M{g.M, p.M.layout, sizeof(T)}, out{g.out, p.out.layout, sizeof(T)};
  if (status st = check_tensors({&M}, {&out}); st != status::success) return st;
  return check_disjoint(out, M);
}

}  // namespace parscan::detail
