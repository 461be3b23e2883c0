// parscan/ops/log_affine.hpp — the affine map x ↦ a·x + b carried in log space
// (after Heinsen 2023, "Efficient Parallelization of a Ubiquitous Sequential Computation").
//
// Each coefficient is held as log|·| plus a sign bit, so values of either sign work without
// complex logarithms, and products that would overflow or underflow float (1e±300 over a
// long sequence) stay representable. A zero coefficient is log = -inf and stays exact: a
// zero gate resets the state.
#pragma once

#include <cstdint>

#include <cuda/std/cmath>
#include <cuda/std/limits>
#include <cuda/std/type_traits>

#include "../config.hpp"

namespace parscan {

template <class T>
struct log_affine {
  T log_a;  // log|a|
  T log_b;  // log|b|
  bool neg_a;  // a < 0
  bool neg_b;  // b < 0
  log_affine() = default;
  PARSCAN_HD PARSCAN_INLINE log_affine(T la, bool na, T lb, bool nb) : log_a(la), log_b(lb), neg_a(na), neg_b(nb) {}
  template <class U>
  PARSCAN_HD PARSCAN_INLINE log_affine(const log_affine<U>& o)
      : log_a(static_cast<T>(o.log_a)), log_b(static_cast<T>(o.log_b)), neg_a(o.neg_a), neg_b(o.neg_b) {}

  /// From linear-space coefficients.
  static PARSCAN_HD PARSCAN_INLINE log_affine from_linear(T a, T b) {
    return log_affine(cuda::std::log(cuda::std::fabs(a)), cuda::std::signbit(a), cuda::std::log(cuda::std::fabs(b)),
                      cuda::std::signbit(b));
  }
  PARSCAN_HD PARSCAN_INLINE T a() const { return (neg_a ? T(-1) : T(1)) * cuda::std::exp(log_a); }
  PARSCAN_HD PARSCAN_INLINE T b() const { return (neg_b ? T(-1) : T(1)) * cuda::std::exp(log_b); }
};

/// A signed value in log form: (-1)^neg · exp(log_mag).
template <class T>
struct signed_log {
  T log_mag;
  bool neg;
};

namespace detail {
/// float's sign bit: the mask of a negative value.
constexpr std::uint32_t float_sign_bit = 0x80000000u;

#if defined(__CUDACC__)
/// The magnitude of a float log-add-exp on the device: hi + log(1 ± e), e = exp(lo − hi), the
/// minus where `flip` (a sign-bit mask: the two terms' signs differ) is set. The exp and the log
/// are the special-function unit's one-instruction approximations, log1p(±e) = ln 2 · log2(1 ± e):
/// that takes log_affine_op from ~80 PTX instructions to ~30, and the log-space kernels are bound
/// by their instructions (docs/performance.md, "Log space in the special-function unit"). The
/// error it adds (docs/numerics.md): ex2.approx has a relative error below 2^-22 (e, as exp2f's);
/// lg2.approx, measured over every float on an H200, an absolute one of at most 2.2e-7 on
/// [0.5, 2] (1 + e, and 1 − e for lo − hi ≤ −ln 2) and 2.1e-6 on [2^-24, 0.5) (1 − e where the
/// terms cancel to under half the larger, the sum's own conditioning there being far worse), so
/// the result moves by ~2^-22 in log|x| — a relative ~2.4e-7 in x — against log1pf's ~2^-24,
/// more only where the terms cancel. ftz is exact here: e ≤ 1 and 1 ± e is 0 or at least 2^-24,
/// never subnormal. Equal magnitudes take e = 2^0 = 1 exactly, so opposite signs cancel to
/// log 0 = -inf (an exact zero) and same signs give hi + ln 2, ±inf included (inf + -inf is NaN,
/// as inf - inf should be); NaN in, NaN out. The sign of e is flipped in its bits, so the ± is
/// one LOP3, not a select.
__device__ PARSCAN_INLINE float log_add_exp_approx(float hi, float lo, std::uint32_t flip) {
  const float d = lo == hi ? 0.0f : lo - hi;  // inf - inf would be NaN
  float e, l;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(d * 1.44269504088896340736f));
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(l) : "f"(1.0f + __uint_as_float(__float_as_uint(e) ^ flip)));
  return fmaf(l, 0.69314718055994530942f, hi);
}

/// signed_log_add's last steps for float on the device, given its hi, lo, u_hi and same.
__device__ PARSCAN_INLINE signed_log<float> signed_log_add_approx(signed_log<float> u, signed_log<float> v, float hi,
                                                                  float lo, bool u_hi, bool same) {
  const float r = log_add_exp_approx(hi, lo, same ? 0u : float_sign_bit);
  return {r, (u_hi ? u.neg : v.neg) && r == r && r != -cuda::std::numeric_limits<float>::infinity()};
}
#endif
}  // namespace detail

/// Stable signed log-add-exp: the log form of u + v. Equal magnitudes of opposite sign give
/// an exact zero (log = -inf, positive); NaN propagates.
///
/// Branch-free, so a warp whose lanes mix signs runs one exp and one log1p per lane instead of
/// both paths, and exp(lo - hi) as exp2: lo - hi ≤ 0, so the rounding of (lo - hi)·log2(e)
/// moves e by at most |lo - hi|·2^-24 relatively (plus exp2's own rounding), which changes
/// log1p(+e) by at most e·|lo-hi|·2^-24 < 2^-25 and log1p(-e) by e·|lo-hi|·2^-24 / (1 - e):
/// about 2^-24 as lo → hi, the cancelling case being the worst (one exp2 is one MUFU.EX2 on a
/// GPU; expf is ~12 instructions). On the device, float takes detail::signed_log_add_approx.
template <class T>
PARSCAN_HD PARSCAN_INLINE signed_log<T> signed_log_add(signed_log<T> u, signed_log<T> v) {
  const T inf = cuda::std::numeric_limits<T>::infinity();
  const bool u_hi = u.log_mag >= v.log_mag;
  const T hi = u_hi ? u.log_mag : v.log_mag;
  const T lo = u_hi ? v.log_mag : u.log_mag;
  const bool same = u.neg == v.neg;
#if defined(__CUDA_ARCH__)
  if constexpr (cuda::std::is_same_v<T, float>) return detail::signed_log_add_approx(u, v, hi, lo, u_hi, same);
#endif
  const T e = cuda::std::exp2((lo - hi) * T(1.44269504088896340736));  // NaN only where lo == hi = ±inf
  T r = hi + cuda::std::log1p(same ? e : -e);
  // Equal magnitudes: same sign doubles (also right for ±inf); opposite signs cancel to an
  // exact zero, or NaN for inf - inf (-inf - -inf is the zero 0 + 0).
  if (lo == hi) r = same ? hi + T(0.69314718055994530942) : (hi == inf ? hi - hi : -inf);
  if (u.log_mag != u.log_mag || v.log_mag != v.log_mag) r = u.log_mag + v.log_mag;  // NaN in, NaN out
  return {r, (u_hi ? u.neg : v.neg) && r == r && r != -inf};  // zero and NaN are positive
}

/// op(earlier, later) = later ∘ earlier, in log form:
///   log|A| = log|later.a| + log|earlier.a|
///   B      = later.a·earlier.b + later.b   (signed log-add-exp)
/// Identity: a = 1, b = 0 (log_a = 0, log_b = -inf). Associative up to rounding.
template <class T>
struct log_affine_op {
  using value_type = log_affine<T>;
  PARSCAN_HD PARSCAN_INLINE value_type operator()(const value_type& earlier, const value_type& later) const {
    const signed_log<T> carried{later.log_a + earlier.log_b, later.neg_a != earlier.neg_b};
    const signed_log<T> fresh{later.log_b, later.neg_b};
    const signed_log<T> sum = signed_log_add(carried, fresh);
    return value_type(later.log_a + earlier.log_a, later.neg_a != earlier.neg_a, sum.log_mag, sum.neg);
  }
  static PARSCAN_HD PARSCAN_INLINE value_type identity() {
    return value_type(T(0), false, -cuda::std::numeric_limits<T>::infinity(), false);
  }
};

}  // namespace parscan
