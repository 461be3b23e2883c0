// parscan/numeric.hpp — 16-bit storage types and the complex type.
//
// bfloat16 and float16 are storage formats: they hold 16 bits that are bit-identical
// to __nv_bfloat16 / __half, so device buffers of either can be passed directly.
// Arithmetic is never done in 16 bits: values convert to float on load and round to
// nearest-even on store. They are plain C++ so the host backend and CI need no CUDA.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda/std/cmath>
#include <cuda/std/complex>

#include "config.hpp"

namespace parscan {

template <class T>
using complex = cuda::std::complex<T>;

namespace detail {

PARSCAN_HD PARSCAN_INLINE std::uint32_t float_bits(float f) {
#if PARSCAN_DEVICE_PASS
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

PARSCAN_HD PARSCAN_INLINE float bits_float(std::uint32_t u) {
#if PARSCAN_DEVICE_PASS
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

PARSCAN_HD PARSCAN_INLINE std::uint16_t float_to_bf16_bits(float f) {
#if PARSCAN_DEVICE_PASS
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  std::uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(x >> 16);
#endif
}

PARSCAN_HD PARSCAN_INLINE std::uint16_t float_to_fp16_bits(float f) {
#if PARSCAN_DEVICE_PASS
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)  // Inf stays Inf, NaN stays a quiet NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u | ((x >> 13) & 0x3ffu) : 0u));
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (x < 0x38800000u) {                                                   // half subnormal or zero
    const std::uint32_t e = x >> 23;
    if (e < 102) return static_cast<std::uint16_t>(sign);
    const std::uint32_t m = (x & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  const std::uint32_t r = x - 0x38000000u;  // rebias the exponent from 127 to 15
  std::uint32_t h = r >> 13;
  const std::uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
#endif
}

PARSCAN_HD PARSCAN_INLINE float fp16_bits_to_float(std::uint16_t h) {
#if PARSCAN_DEVICE_PASS
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return bits_float(float_bits(v) | sign);
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

}  // namespace detail

/// bfloat16 storage (8-bit exponent, 7-bit mantissa); converts to and from float.
struct bfloat16 {
  std::uint16_t bits;
  bfloat16() = default;
  PARSCAN_HD PARSCAN_INLINE bfloat16(float f) : bits(detail::float_to_bf16_bits(f)) {}
  PARSCAN_HD PARSCAN_INLINE operator float() const { return detail::bits_float(std::uint32_t(bits) << 16); }
};

/// IEEE binary16 storage; converts to and from float.
struct float16 {
  std::uint16_t bits;
  float16() = default;
  PARSCAN_HD PARSCAN_INLINE float16(float f) : bits(detail::float_to_fp16_bits(f)) {}
  PARSCAN_HD PARSCAN_INLINE operator float() const { return detail::fp16_bits_to_float(bits); }
};

/// The type arithmetic is done in for a storage type: float for the 16-bit formats.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<bfloat16> { using type = float; };
template <> struct compute_type<float16> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

namespace detail {

/// N stored elements in the compute type C. bfloat16 pairs that share a 32-bit word widen with
/// one instruction each (the low half shifted up, the high half masked): converted one at a
/// time, each half was first extracted to 16 bits, two instructions (SASS of the bulk tiles).
template <class C, class T, int N>
PARSCAN_HD PARSCAN_INLINE void widen(const T (&in)[N], C (&out)[N]) {
  if constexpr (std::is_same_v<T, bfloat16> && std::is_same_v<C, float> && N % 2 == 0) {
    std::uint32_t word[N / 2];
    std::memcpy(word, in, sizeof(word));
    PARSCAN_UNROLL
    for (int i = 0; i < N / 2; ++i) {
      out[2 * i] = bits_float(word[i] << 16);
      out[2 * i + 1] = bits_float(word[i] & 0xffff0000u);
    }
  } else {
    PARSCAN_UNROLL
    for (int i = 0; i < N; ++i) out[i] = static_cast<C>(in[i]);
  }
}

}  // namespace detail

/// x·y as the operators and recurrences multiply. Complex operands take the textbook formula,
/// (ac − bd) + (ad + bc)i, each half one fused multiply-add. cuda::std::complex's operator*
/// adds C99 Annex G's recovery of infinite products: two tests and two branches around every
/// product (four multiplies and two adds, never fused), which made each complex product its
/// own basic block in the scan kernels. The results differ only where a product overflows or
/// an operand is infinite or NaN: there the recovery could return an infinity where this
/// returns NaN (docs/numerics.md).
///
/// The FMAs are written out rather than left to contraction: a compiler free to fuse either
/// product of a half may fuse differently at each inlined copy, and then two look-backs that
/// fold the same aggregates in the same order (the chained scans' run-to-run determinism)
/// disagree in the last bit. Explicit, every copy and both backends round the same way.
template <class T>
PARSCAN_HD PARSCAN_INLINE T product(const T& x, const T& y) {
  return x * y;
}
template <class R>
PARSCAN_HD PARSCAN_INLINE complex<R> product(const complex<R>& x, const complex<R>& y) {
  return complex<R>(cuda::std::fma(x.real(), y.real(), -(x.imag() * y.imag())),
                    cuda::std::fma(x.real(), y.imag(), x.imag() * y.real()));
}

}  // namespace parscan
