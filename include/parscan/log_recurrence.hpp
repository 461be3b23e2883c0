// parscan/log_recurrence.hpp — the first-order recurrence x[t] = a[t]·x[t-1] + b[t] carried in
// log space (after Heinsen 2023) in one fused pass: every value is held as log|v| plus a sign,
// and steps combine with a stable signed log-add-exp (log_affine_op). It survives gates above
// 1 and products that overflow or underflow float, where the linear gated recurrence
// (recurrence.hpp) returns Inf or 0; where both work, the linear one is faster and, for states
// far from 1 in magnitude, more precise (docs/numerics.md).
//
// Forward and backward. Each input, x0 and the output x may be given in log form (log|v| and a
// sign array) or in value form (v itself, converted on load / written as sign·exp(log|x|), in
// the same pass); x_final is always in log form. T = float, or bfloat16 storage of the log
// magnitudes, values and gradients (arithmetic in float). Signs are bytes (0 = positive, nonzero =
// negative) laid out like their magnitudes; a null sign array means "all positive". Zero is
// log|v| = -inf: a zero gate resets the state exactly. The backward pass differentiates with
// respect to each input in the form it was given (the log magnitude, or the value; signs are
// not differentiable) and carries the linear gradient itself in log form, so it survives
// wherever the forward does. Plain C++: no CUDA headers needed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend.hpp"
#include "numeric.hpp"
#include "recurrence.hpp"
#include "status.hpp"

namespace parscan {

/// x[t] = a[t]·x[t-1] + b[t] with x[-1] = x0 (or 0), for t = 0..T-1 (t = T-1..0 with reverse).
/// Shapes and layouts as in recurrence.hpp; log_x0 / x0_negative and log_x_final /
/// x_final_negative are dense (B, D).
///
/// Forms. a is given as log_a (with a_negative, or null: a > 0) or as a itself, exactly one of
/// them; so is b (log_b / b_negative, or b); x0 as log_x0 / x0_negative, or x0, or neither. A
/// value v converts on load to log|v| with the sign bit of v: 0 is log -inf (a zero gate still
/// resets exactly; -0 is a negative zero, as a log -inf with its sign set), NaN stays NaN. The
/// output is log_x (with x_negative), or x = sign·exp(log|x|), or both; x overflows to ±inf
/// where |x| exceeds T's range and underflows to 0 below it (docs/numerics.md), log_x does not.
/// x_final is log form only (it chains chunks through log_x0). Both forms of one tensor, a sign
/// array next to a value-form tensor (a_negative with a, x_negative with x but no log_x, ...)
/// give status::unsupported; a missing required tensor gives status::null_pointer.
///
/// x_negative (with log_x) and x_final_negative (with log_x_final) may be null only when x
/// cannot be negative: a_negative, b_negative and x0_negative all null and no input in value
/// form. log_x and x may each be exactly one of the a or b inputs (either form), and x_negative
/// exactly b_negative or a_negative (in place); log_x_final may be exactly the x0 input.
template <class T>
struct log_forward_tensors {
  const T* log_a = nullptr;                  // log|a|
  const std::uint8_t* a_negative = nullptr;  // sign of a, or null: a > 0
  const T* log_b = nullptr;                  // log|b|
  const std::uint8_t* b_negative = nullptr;  // sign of b, or null: b ≥ 0
  T* log_x = nullptr;                        // log|x|
  std::uint8_t* x_negative = nullptr;        // sign of x
  const T* log_x0 = nullptr;                 // optional state before the first step
  const std::uint8_t* x0_negative = nullptr;
  T* log_x_final = nullptr;                  // optional state after the last step
  std::uint8_t* x_final_negative = nullptr;
  bool reverse = false;
  recurrence_strides a_strides{}, b_strides{}, x_strides{};  // recurrence_layout::strided only
  // Value form (instead of the log form above; the strides apply to either form).
  const T* a = nullptr;   // a itself, instead of log_a / a_negative
  const T* b = nullptr;   // b itself, instead of log_b / b_negative
  const T* x0 = nullptr;  // x0 itself, instead of log_x0 / x0_negative
  T* x = nullptr;         // x itself, instead of or besides log_x / x_negative
};

/// The tensors and options of a forward (log_forward_tensors) with the batch's shape.
template <class T>
struct log_forward_args : log_forward_tensors<T> {
  recurrence_shape shape;
};

/// Backward of the forward above, with respect to the log magnitudes. Inputs are the upstream
/// gradients G[t] = dL/dlog|x[t]| (plain values, laid out like x) and optionally
/// G_final = dL/dlog|x_final| (dense (B, D)); outputs are plain values
///   dlog_a[t] = dL/dlog|a[t]| = db[t]·a[t]·x[t-1]     (x[-1] = x0, or 0 without x0)
///   dlog_b[t] = dL/dlog|b[t]| = db[t]·b[t]
///   dlog_x0   = dL/dlog|x0|   = db[0]·a[0]·x0         (written only when x0 is given; required then)
/// where db is the gradient with respect to b itself, the reverse recurrence
///   db[t] = G[t]/x[t] + a[t+1]·db[t+1]   (G[t] + G_final on the last step computed),
/// which is carried in log form (log_affine_op<float>), so it neither overflows nor underflows
/// where the forward needed log space. "Next"/"previous" follow the forward's direction. Each
/// output is formed as exp(sum of logs) with the product of the signs, so it is finite wherever
/// the true gradient is. Zeros are exact: a factor of log -inf makes its term exactly 0
/// (b = 0 gives dlog_b = 0, a = 0 gives dlog_a = 0 and stops the gradient flowing back, G = 0
/// contributes nothing even where x = 0); where x[t] = 0 and G[t] ≠ 0 the true gradient is
/// infinite and so is db. NaN propagates.
///
/// b (log_b and b_negative, or b) is always needed: dlog_b = db·b, and its form sets the form of
/// its gradient. log_x / x_negative is the
/// forward output; if log_x is null, x is recomputed from a, b and x0 into temporary storage
/// (x_negative is then ignored). x_negative may be null only when x cannot be negative (no sign
/// array and no value-form input). dlog_b may be exactly dlog_x, or dlog_a may be exactly dlog_x (in
/// place); dlog_x0 may be exactly dlog_x_final; no other output may overlap an input or another
/// output. With T = 0, dlog_x0 (when x0 is given) receives dlog_x_final (or zero).
///
/// Value forms. Each input given in value form (a, b, x0) has its gradient with respect to the
/// value, written to the value-form output (da, db, dx0) instead of dlog_a, dlog_b, dlog_x0:
///   da[t] = dL/da[t] = db[t]·x[t-1]      db_out[t] = dL/db[t] = db[t]      dx0 = db[0]·a[0]
/// (with T = 0, dx0 = dlog_x_final/x0). The gradient's form follows its input's form: the output
/// of the other form must be null (status::unsupported otherwise). The upstream gradient may be
/// given as dx = dL/dx instead of dlog_x (exactly one); the step's term is then dx[t] itself,
/// with no division by x (dlog_x_final, log form, is still divided by x on the last step). The
/// backward takes x in log form only (log_x / x_negative, or nothing to recompute it).
/// x_negative may be null only when x cannot be negative, as for the forward. Strides:
/// a_strides for log_a or a, dx_strides for dlog_x or dx, da_strides for dlog_a or da, and so on.
/// In place: the a or b gradient (either form) may be exactly the upstream gradient (either
/// form), one of them; the x0 gradient may be exactly dlog_x_final.
///
/// Chunked use: backward over consecutive chunks, last chunk first, chains through
/// dlog_x_final = the later chunk's dlog_x0 (the earlier chunk's log|x_final| is the later one's
/// log|x0|, so dL/dlog|x_final| of the earlier chunk is dL/dlog|x0| of the later one): every
/// chunk but the first takes x0 in log form; a, b, x, dx and the first chunk's x0 may be in
/// either form. This is
/// exact whenever the state at the cut is nonzero. A state of exactly zero at the cut carries
/// dL/dlog|x| = dL/dx·x = 0 and loses dL/dx; when that zero comes from zero inputs (x0 = 0, or a
/// zero gate followed by zero b) every gradient that dL/dx there would reach is multiplied by a
/// zero anyway, so only a state that cancels to exactly zero (a·x = −b to the last bit) at a cut
/// differs from one call.
template <class T>
struct log_backward_tensors {
  const T* log_a = nullptr;                  // as given to forward
  const std::uint8_t* a_negative = nullptr;
  const T* log_b = nullptr;                  // as given to forward (b in one form always needed)
  const std::uint8_t* b_negative = nullptr;
  const T* log_x = nullptr;                  // forward output, or null to recompute it
  const std::uint8_t* x_negative = nullptr;
  const T* log_x0 = nullptr;                 // optional, as given to forward
  const std::uint8_t* x0_negative = nullptr;
  const T* dlog_x = nullptr;                 // dL/dlog|x|
  const T* dlog_x_final = nullptr;           // optional dL/dlog|x_final|, dense (B, D)
  T* dlog_a = nullptr;                       // dL/dlog|a|
  T* dlog_b = nullptr;                       // dL/dlog|b|
  T* dlog_x0 = nullptr;                      // dL/dlog|x0|, dense (B, D); required, and written, only with x0
  bool reverse = false;                      // as given to forward
  recurrence_strides a_strides{}, b_strides{}, x_strides{}, dx_strides{}, da_strides{}, db_strides{};  // strided only
  // Value form (instead of the log form above); each gradient's form follows its input's.
  const T* a = nullptr;   // a itself, instead of log_a / a_negative; its gradient goes to da
  const T* b = nullptr;   // b itself, instead of log_b / b_negative; its gradient goes to db
  const T* x0 = nullptr;  // x0 itself, instead of log_x0 / x0_negative; its gradient goes to dx0
  const T* dx = nullptr;  // dL/dx, instead of dlog_x
  T* da = nullptr;        // dL/da = db·x[t-1]            (a given in value form)
  T* db = nullptr;        // dL/db                          (b given in value form)
  T* dx0 = nullptr;       // dL/dx0 = db[0]·a[0], dense (B, D) (x0 given in value form)
};

template <class T>
struct log_backward_args : log_backward_tensors<T> {
  recurrence_shape shape;
};

/// Packed variable-length sequences (cu_seqlens, as for the gated recurrence: recurrence.hpp's
/// varlen_shape, its offsets contract and its validation on each backend). The same tensors,
/// forms, signs, aliasing rules and options as above, over a packed (total_length, D),
/// (D, total_length) or strided tensor; every state (log_x0 / x0_negative / x0,
/// log_x_final / x_final_negative, dlog_x_final, dlog_x0 / dx0) is dense (N, D), element n·D + d.
/// Sequence n runs on its own from its own x0[n] to its own x_final[n], backwards with
/// `reverse`; a zero-length sequence has x_final[n] = x0[n] (or log 0) and passes its gradient
/// straight through. Steps past cu_seqlens[N] are neither read nor written. A backward without
/// log_x recomputes x per sequence, as the fixed-length backward does.
template <class T>
struct log_varlen_forward_args : log_forward_tensors<T> {
  varlen_shape shape;
};
template <class T>
struct log_varlen_backward_args : log_backward_tensors<T> {
  varlen_shape shape;
};

template <class T>
status log_recurrence_forward(const host_backend&, const log_forward_args<T>& args);
template <class T>
status log_recurrence_forward(const cuda_backend&, const log_forward_args<T>& args);
template <class T>
status log_recurrence_backward(const host_backend&, const log_backward_args<T>& args);
template <class T>
status log_recurrence_backward(const cuda_backend&, const log_backward_args<T>& args);
template <class T>
status log_recurrence_forward(const host_backend&, const log_varlen_forward_args<T>& args);
template <class T>
status log_recurrence_forward(const cuda_backend&, const log_varlen_forward_args<T>& args);
template <class T>
status log_recurrence_backward(const host_backend&, const log_varlen_backward_args<T>& args);
template <class T>
status log_recurrence_backward(const cuda_backend&, const log_varlen_backward_args<T>& args);

/// Bytes of temporary device storage the CUDA backend needs for these arguments (the host
/// backend needs none). Depends only on shapes and options, not on data.
template <class T>
std::size_t log_recurrence_workspace_size(const log_forward_args<T>& args);
template <class T>
std::size_t log_recurrence_workspace_size(const log_backward_args<T>& args);
template <class T>
std::size_t log_recurrence_workspace_size(const log_varlen_forward_args<T>& args);
template <class T>
std::size_t log_recurrence_workspace_size(const log_varlen_backward_args<T>& args);

}  // namespace parscan
