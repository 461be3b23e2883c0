// parscan/log_recurrence.hpp — the first-order recurrence x[t] = a[t]·x[t-1] + b[t] carried in
// log space (after Heinsen 2023) in one fused pass: every value is held as log|v| plus a sign,
// and steps combine with a stable signed log-add-exp (log_affine_op). It survives gates above
// 1 and products that overflow or underflow float, where the linear gated recurrence
// (recurrence.hpp) returns Inf or 0; where both work, the linear one is faster and, for states
// far from 1 in magnitude, more precise (docs/numerics.md).
//
// Forward only for now, in log form in and out. T = float, or bfloat16 storage of the log
// magnitudes (arithmetic in float). Signs are bytes (0 = positive, nonzero = negative) laid out
// like their magnitudes; a null sign array means "all positive". Zero is log|v| = -inf: a zero
// gate resets the state exactly. Plain C++: no CUDA headers needed.
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
/// x_final_negative are dense (B, D). x_negative may be null only when a_negative, b_negative
/// and x0_negative are all null (x is then positive). log_x may be exactly log_b or log_a, and
/// x_negative exactly b_negative or a_negative (in place).
template <class T>
struct log_forward_args {
  recurrence_shape shape;
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
};

template <class T>
status log_recurrence_forward(const host_backend&, const log_forward_args<T>& args);
template <class T>
status log_recurrence_forward(const cuda_backend&, const log_forward_args<T>& args);

/// Bytes of temporary device storage the CUDA backend needs for these arguments.
template <class T>
std::size_t log_recurrence_workspace_size(const log_forward_args<T>& args);

}  // namespace parscan
