// parscan/detail/log_recurrence_math.hpp — the per-step arithmetic of the log-space recurrence's
// backward pass, shared by the host loop and the CUDA Problem so both backends compute the same
// thing. Values are in log form (log|v|, sign); zeros (log -inf) are exact, NaN propagates.
#pragma once

#include <cstdint>

#include <cuda/std/cmath>
#include <cuda/std/limits>

#include "../config.hpp"
#include "../ops/log_affine.hpp"

namespace parscan::detail {

/// The log form of a plain value (an upstream gradient).
PARSCAN_HD PARSCAN_INLINE signed_log<float> log_form_of(float v) {
  return {cuda::std::log(cuda::std::fabs(v)), cuda::std::signbit(v)};
}

#if defined(__CUDACC__)
/// log_form_of with the log from the special-function unit, ln 2 · lg2.approx(|v|): two
/// instructions where logf takes about twenty. Its error (measured over every float: at most
/// 2.2e-7 absolute on [0.5, 2], 7.8e-6 over the whole range; docs/numerics.md) is a relative
/// 1e-5 of v at most, far below a 16-bit input's own rounding (2^-9 for bfloat16, 2^-12 for
/// float16), so the 16-bit kernels take it for their inputs; float inputs keep logf. Not ftz:
/// a subnormal keeps its log; 0 gives -inf, inf and NaN pass, and the sign is v's sign bit.
__device__ PARSCAN_INLINE signed_log<float> log_form_of_approx(float v) {
  float l;
  asm("lg2.approx.f32 %0, %1;" : "=f"(l) : "f"(cuda::std::fabs(v)));
  return {l * 0.69314718055994530942f, cuda::std::signbit(v)};
}
#endif

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

/// The plain value exp(l1 + l2 + l3) with its sign bit xor `sign` (0 or float_sign_bit: the
/// masks of log_affine_bits). NaN in any factor gives NaN; otherwise a factor of log -inf (a
/// zero) makes the product exactly +0, even against +inf. Only a sum that is -inf or NaN needs
/// the factors looked at again, so the common path makes one test where it made six (the
/// log-space backward is bound by its instructions: docs/performance.md, "The log-space
/// backward's store from the ring").
///
/// With sfu_exp (the backward's gradients), the device takes exp(sum) as 2^(sum·log2 e) from
/// the special-function unit, two instructions where expf takes eight: ex2.approx's relative
/// error is below 2^-22, and rounding sum·log2 e adds |sum|·2^-24, the order of the rounding
/// already in sum (docs/numerics.md). Not ftz: subnormal results stay. Values written as
/// outputs (value_of) keep expf, so that x is exp(log|x|) to float's precision.
PARSCAN_HD PARSCAN_INLINE float log_product_bits(float l1, float l2, float l3, std::uint32_t sign,
                                                 bool sfu_exp = false) {
  const float sum = l1 + l2 + l3;
  if (!(sum > -cuda::std::numeric_limits<float>::infinity())) return l1 != l1 || l2 != l2 || l3 != l3 ? sum : 0.0f;
#if defined(__CUDA_ARCH__)
  float m;
  if (sfu_exp)
    asm("ex2.approx.f32 %0, %1;" : "=f"(m) : "f"(sum * 1.44269504088896340736f));
  else
    m = cuda::std::exp(sum);
  return __uint_as_float(__float_as_uint(m) ^ sign);
#else
  (void)sfu_exp;
  const float m = cuda::std::exp(sum);
  return sign != 0 ? -m : m;
#endif
}

/// The plain value (-1)^neg · exp(l1 + l2 + l3), as log_product_bits.
PARSCAN_HD PARSCAN_INLINE float log_product(float l1, float l2, float l3, bool neg) {
  return log_product_bits(l1, l2, l3, neg ? float_sign_bit : 0u);
}

/// The same for a gradient of the backward (sfu_exp).
PARSCAN_HD PARSCAN_INLINE float gradient_product(float l1, float l2, float l3, bool neg) {
  return log_product_bits(l1, l2, l3, neg ? float_sign_bit : 0u, true);
}

/// The value (-1)^neg · exp(log_mag) of a log-form result (a value-form output): overflows to
/// ±inf beyond float, log -inf gives exactly +0, NaN stays NaN.
PARSCAN_HD PARSCAN_INLINE float value_of(float log_mag, bool neg) { return log_product(log_mag, 0.0f, 0.0f, neg); }

}  // namespace parscan::detail
