// parscan/detail/log_affine_bits.hpp — the log-space recurrences' accumulator: log_affine<float>
// with its two signs held as float sign-bit masks instead of bools.
//
// Why: the log-space kernels are bound by their instructions, and with bool signs about a third
// of a combine's SASS was the bools' bookkeeping — each one unpacked from a byte (PRMT), tested
// (ISETP) and selected back (SEL) for every xor and select (ncu's source counters on an H200,
// docs/performance.md, "Signs as bits"). As masks, a sign product is one LOP3 and the sign of the
// smaller term flips e in place (1 + (±e) with no select). Results equal log_affine_op's bit for
// bit, except that inside the scan a zero or NaN may carry either sign; neg_b() gives b's sign as
// log_affine_op would (zero and NaN positive), and every output reads it that way.
#pragma once

#include <cstdint>

#include <cuda/std/limits>

#include "../config.hpp"
#include "../ops/log_affine.hpp"

namespace parscan::detail {

struct log_affine_bits {
  float log_a;
  float log_b;
  std::uint32_t sign_a;  // float_sign_bit where a < 0, else 0
  std::uint32_t sign_b;
  log_affine_bits() = default;
  PARSCAN_HD PARSCAN_INLINE log_affine_bits(float la, bool na, float lb, bool nb)
      : log_a(la), log_b(lb), sign_a(na ? float_sign_bit : 0u), sign_b(nb ? float_sign_bit : 0u) {}
  /// From the magnitudes and the masks themselves.
  static PARSCAN_HD PARSCAN_INLINE log_affine_bits from_masks(float la, std::uint32_t sa, float lb, std::uint32_t sb) {
    log_affine_bits r;
    r.log_a = la, r.log_b = lb, r.sign_a = sa, r.sign_b = sb;
    return r;
  }
  /// b < 0, as log_affine_op's sign: a zero (log -inf) and NaN are positive.
  PARSCAN_HD PARSCAN_INLINE bool neg_b() const {
    return sign_b != 0 && log_b == log_b && log_b != -cuda::std::numeric_limits<float>::infinity();
  }
};

/// log_affine_op<float> on log_affine_bits: op(earlier, later) = later ∘ earlier.
struct log_affine_bits_op {
  using value_type = log_affine_bits;
  PARSCAN_HD PARSCAN_INLINE value_type operator()(const value_type& earlier, const value_type& later) const {
    value_type r;
    r.log_a = later.log_a + earlier.log_a;
    r.sign_a = later.sign_a ^ earlier.sign_a;
    // B = later.a·earlier.b + later.b: the larger magnitude's sign, its log plus log(1 ± e).
    const float u = later.log_a + earlier.log_b, v = later.log_b;
    const std::uint32_t su = later.sign_a ^ earlier.sign_b, sv = later.sign_b;
    const bool u_hi = u >= v;
    const float hi = u_hi ? u : v, lo = u_hi ? v : u;
#if defined(__CUDA_ARCH__)
    r.log_b = log_add_exp_approx(hi, lo, su ^ sv);
#else
    r.log_b = signed_log_add(signed_log<float>{u, su != 0}, signed_log<float>{v, sv != 0}).log_mag;
#endif
    r.sign_b = u_hi ? su : sv;
    return r;
  }
  static PARSCAN_HD PARSCAN_INLINE value_type identity() {
    return value_type(0.0f, false, -cuda::std::numeric_limits<float>::infinity(), false);
  }
};

}  // namespace parscan::detail
