// parscan/detail/log_recurrence_math.hpp — the per-step arithmetic of the log-space recurrence's
// backward pass, shared by the host loop and the CUDA Problem so both backends compute the same
// thing. Values are in log form (log|v|, sign); zeros (log -inf) are exact, NaN propagates.
#pragma once

#include <cuda/std/cmath>
#include <cuda/std/limits>

#include "../config.hpp"
#include "../ops/log_affine.hpp"

namespace parscan::detail {

/// The log form of a plain value (an upstream gradient).
PARSCAN_HD PARSCAN_INLINE signed_log<float> log_form_of(float v) {
  return {cuda::std::log(cuda::std::fabs(v)), cuda::std::signbit(v)};
}

/// An input element in log form: a stored log magnitude with its sign byte, or, in value form,
/// the value itself (log_form_of: 0 is log -inf, -0 a negative zero, NaN stays NaN). One
/// flag per tensor and launch, so the branch is uniform.
PARSCAN_HD PARSCAN_INLINE signed_log<float> input_log_form(float stored, bool negative, bool value_form) {
  if (value_form) return log_form_of(stored);
  return {stored, negative};
}

/// The log form of u / x. A zero numerator gives exactly zero, even where x = 0 or x = inf (a
/// zero upstream gradient contributes nothing); otherwise x = 0 gives an infinite quotient, the
/// derivative of log|x| there. NaN in either gives NaN.
PARSCAN_HD PARSCAN_INLINE signed_log<float> log_quotient(signed_log<float> u, float log_x, bool x_negative) {
  if (u.log_mag != u.log_mag || log_x != log_x) return {u.log_mag + log_x, false};
  if (u.log_mag == -cuda::std::numeric_limits<float>::infinity()) return u;
  return {u.log_mag - log_x, u.neg != x_negative};
}

/// The plain value (-1)^neg · exp(l1 + l2 + l3). NaN in any factor gives NaN; otherwise a factor
/// of log -inf (a zero) makes the product exactly 0, even against +inf.
PARSCAN_HD PARSCAN_INLINE float log_product(float l1, float l2, float l3, bool neg) {
  const float sum = l1 + l2 + l3;
  if (l1 != l1 || l2 != l2 || l3 != l3) return sum;
  const float neg_inf = -cuda::std::numeric_limits<float>::infinity();
  if (l1 == neg_inf || l2 == neg_inf || l3 == neg_inf) return 0.0f;
  const float m = cuda::std::exp(sum);
  return neg ? -m : m;
}

/// The value (-1)^neg · exp(log_mag) of a log-form result (a value-form output): overflows to
/// ±inf beyond float, log -inf gives exactly +0, NaN stays NaN.
PARSCAN_HD PARSCAN_INLINE float value_of(float log_mag, bool neg) { return log_product(log_mag, 0.0f, 0.0f, neg); }

}  // namespace parscan::detail
