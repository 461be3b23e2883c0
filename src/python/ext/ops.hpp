// src/python/ext/ops.hpp — the operations the Python bindings expose, in terms of array_arg:
// every front end (the nanobind module for NumPy and PyTorch, the XLA FFI handlers for JAX)
// calls these. Outputs are allocated by the caller (each framework allocates its own), and
// every call checks all of its arguments before anything runs: on any error it raises
// argument_error and has written nothing.
#pragma once

#include <cstdint>

#include <parscan/recurrence.hpp>

#include "array_args.hpp"

namespace parscan::python {

/// x[t] = a[t]·x[t-1] + b[t] along dimension `dim` of a, b and x (one shape, any strides);
/// x0 and x_final (optional) have that shape without `dim`, dense. With cu_seqlens (N + 1
/// int64 or int32 offsets on the arrays' device), `dim` holds N packed sequences
/// (parscan::gated_varlen_forward_args): the other dimensions collapse into one strided
/// channel dimension, and x0, x_final are (N,) + that shape without `dim`.
struct gated_forward_call {
  const array_arg* a = nullptr;
  const array_arg* b = nullptr;
  const array_arg* x = nullptr;
  const array_arg* x0 = nullptr;          // optional
  const array_arg* x_final = nullptr;     // optional
  const array_arg* cu_seqlens = nullptr;  // optional: packed sequences
  std::int64_t dim = -1;
  bool reverse = false;
  gate_form gate = gate_form::linear;
  std::uintptr_t stream = 0;
};
void gated_forward(const gated_forward_call& c);

/// The backward of gated_forward (parscan::gated_recurrence_backward): da, db and, with x0,
/// dx0. x is the forward's output; without it, it is recomputed from b (and x0). cu_seqlens
/// as for the forward (the states (N,) + ...).
struct gated_backward_call {
  const array_arg* a = nullptr;
  const array_arg* x = nullptr;         // forward output, or null: then b is required
  const array_arg* b = nullptr;         // only read when x is null
  const array_arg* x0 = nullptr;        // optional, as given to forward
  const array_arg* dx = nullptr;
  const array_arg* dx_final = nullptr;  // optional
  const array_arg* da = nullptr;
  const array_arg* db = nullptr;
  const array_arg* dx0 = nullptr;       // required with x0, ignored without
  const array_arg* cu_seqlens = nullptr;  // optional: packed sequences
  std::int64_t dim = -1;
  bool reverse = false;
  gate_form gate = gate_form::linear;
  std::uintptr_t stream = 0;
};
void gated_backward(const gated_backward_call& c);

/// One input of log_recurrence: its magnitude array (log|v|, or v itself in value form) and,
/// in log form only, its optional sign array (null: every element positive).
struct log_input {
  const array_arg* magnitude = nullptr;
  const array_arg* negative = nullptr;
  bool value = false;  // true: `magnitude` holds v itself (no sign array then)
};

/// x[t] = a[t]·x[t-1] + b[t] carried in log space (parscan::log_recurrence_forward) along
/// `dim`. Outputs: log_x with x_negative, or x (value form), or both; log_x_final with
/// x_final_negative (always log form) optionally. a, b, log_x, x share a shape (any strides;
/// log_x and x the same strides); every sign array has its magnitude's strides; x0 and the
/// final state are dense, of the shape without `dim`. float32 and bfloat16. With cu_seqlens,
/// per packed sequence (parscan::log_varlen_forward_args; the states (N,) + ...).
struct log_forward_call {
  log_input a, b, x0;  // x0 optional (magnitude null)
  const array_arg* log_x = nullptr;
  const array_arg* x_negative = nullptr;  // required with log_x
  const array_arg* x = nullptr;
  const array_arg* log_x_final = nullptr;       // optional
  const array_arg* x_final_negative = nullptr;  // required with log_x_final
  const array_arg* cu_seqlens = nullptr;        // optional: packed sequences, as for gated_forward_call
  std::int64_t dim = -1;
  bool reverse = false;
  std::uintptr_t stream = 0;
};
void log_forward(const log_forward_call& c);

/// The backward of log_forward (parscan::log_recurrence_backward): the gradient with respect
/// to each input in the form it was given (log magnitude, or value), into da, db and, with x0,
/// dx0. The upstream gradient is dL/dlog|x| or, with dx_value, dL/dx; dlog_x_final is dL/dlog
/// of the final state. log_x / x_negative is the forward's output, or null to recompute it.
struct log_backward_call {
  log_input a, b, x0;
  const array_arg* log_x = nullptr;  // optional
  const array_arg* x_negative = nullptr;
  const array_arg* dx = nullptr;
  bool dx_value = false;
  const array_arg* dlog_x_final = nullptr;  // optional
  const array_arg* da = nullptr;
  const array_arg* db = nullptr;
  const array_arg* dx0 = nullptr;  // required with x0, ignored without
  const array_arg* cu_seqlens = nullptr;  // optional: packed sequences
  std::int64_t dim = -1;
  bool reverse = false;
  std::uintptr_t stream = 0;
};
void log_backward(const log_backward_call& c);

/// x[t] = W[t]·x[t-1] + b[t] (parscan::matrix_recurrence_forward) along dimension `dim` of b,
/// which is not b's last dimension (the state, of size N = 1..64). W has b's shape with one
/// more N at the end: W[..., t, i, j]. The N (and N×N) blocks are dense; the dimensions other
/// than `dim` and the blocks must collapse into one strided dimension. x has b's shape; x0 and
/// x_final (optional) b's shape without `dim`, dense. With cu_seqlens (N + 1 offsets), `dim`
/// holds packed sequences (parscan::matrix_varlen_forward_args): b's other dimensions must
/// have size 1, and the states are (N,) + b's shape without `dim`.
struct matrix_forward_call {
  const array_arg* W = nullptr;
  const array_arg* b = nullptr;
  const array_arg* x = nullptr;
  const array_arg* x0 = nullptr;          // optional
  const array_arg* x_final = nullptr;     // optional
  const array_arg* cu_seqlens = nullptr;  // optional: packed sequences
  std::int64_t dim = -2;
  bool reverse = false;
  std::uintptr_t stream = 0;
};
void matrix_forward(const matrix_forward_call& c);

/// The backward of matrix_forward: dW, db and, with x0, dx0. x is the forward's output, or
/// null to recompute it from b.
struct matrix_backward_call {
  const array_arg* W = nullptr;
  const array_arg* x = nullptr;
  const array_arg* b = nullptr;
  const array_arg* x0 = nullptr;
  const array_arg* dx = nullptr;
  const array_arg* dx_final = nullptr;  // optional
  const array_arg* dW = nullptr;
  const array_arg* db = nullptr;
  const array_arg* dx0 = nullptr;  // required with x0, ignored without
  const array_arg* cu_seqlens = nullptr;  // optional: packed sequences
  std::int64_t dim = -2;
  bool reverse = false;
  std::uintptr_t stream = 0;
};
void matrix_backward(const matrix_backward_call& c);

/// Products of the d×d matrices of M along dimension `dim` (not one of M's last two):
/// out = the whole product (M's shape without `dim`, dense) or, with prefixes, every prefix
/// (M's shape, any describable strides). order: 0 = M0·M1·…, 1 = …·M1·M0. math: 0 exact,
/// 1 tf32, 2 bf16 (a permission; see parscan::chain_math).
struct matrix_chain_call {
  const array_arg* M = nullptr;
  const array_arg* out = nullptr;
  std::int64_t dim = -3;
  bool prefixes = false;
  int order = 0;
  int math = 0;
  std::uintptr_t stream = 0;
};
void matrix_chain(const matrix_chain_call& c);

enum class scan_operator : int { sum, max, min };

/// Inclusive (or exclusive) scan of x along `dim` with a built-in operator into out (x's
/// shape). 16-bit floats accumulate in float32; integers in their own type. With cu_seqlens
/// (N + 1 int64 or int32 offsets on x's device), `dim` holds N packed segments, each scanned on
/// its own (parscan::segmented_inclusive_scan / segmented_exclusive_scan): x's other dimensions
/// must have size 1 and x and out be contiguous along `dim`.
struct cumulative_call {
  const array_arg* x = nullptr;
  const array_arg* out = nullptr;
  const array_arg* cu_seqlens = nullptr;  // optional: packed segments
  scan_operator op = scan_operator::sum;
  std::int64_t dim = -1;
  bool reverse = false;
  bool exclusive = false;
  std::uintptr_t stream = 0;
};
void cumulative(const cumulative_call& c);

/// Reduction of x along `dim` into out: x's shape without `dim`, dense, in the accumulator
/// type (accumulator_type_of). With cu_seqlens, one result per packed segment
/// (parscan::segmented_reduce; an empty segment gives the operator's identity): out is (N,) +
/// x's shape without `dim`, and x as for cumulative_call.
struct reduce_call {
  const array_arg* x = nullptr;
  const array_arg* out = nullptr;
  const array_arg* cu_seqlens = nullptr;  // optional: packed segments
  scan_operator op = scan_operator::sum;
  std::int64_t dim = -1;
  std::uintptr_t stream = 0;
};
void reduce(const reduce_call& c);

/// The type a scan of `t` accumulates in (and reduce writes): float32 for the 16-bit floats.
element_type accumulator_type_of(element_type t);

}  // namespace parscan::python
