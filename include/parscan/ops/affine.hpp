// parscan/ops/affine.hpp — the scalar affine map x ↦ a·x + b, the element of a first-order
// linear recurrence x[t] = a[t]·x[t-1] + b[t].
//
// Composing the maps of steps 0..t gives (A, B) with x[t] = A·x[-1] + B, so an inclusive
// scan with affine_op yields every state at once: x[t] = B[t] when x[-1] = 0.
#pragma once

#include "../config.hpp"
#include "../numeric.hpp"

namespace parscan {

/// x ↦ a·x + b. T is float, double, complex<float>, complex<double>, or a 16-bit storage
/// type (bfloat16, float16) that converts to float for arithmetic.
template <class T>
struct affine {
  T a;
  T b;
  affine() = default;
  PARSCAN_HD PARSCAN_INLINE affine(T a_, T b_) : a(a_), b(b_) {}
  /// Converts between storage and compute types (bfloat16 ↔ float, float → double, ...).
  template <class U>
  PARSCAN_HD PARSCAN_INLINE affine(const affine<U>& o) : a(static_cast<T>(o.a)), b(static_cast<T>(o.b)) {}
  PARSCAN_HD PARSCAN_INLINE T operator()(const T& x) const { return product(a, x) + b; }
};

/// Composition of affine maps. op(earlier, later) = later ∘ earlier:
///   x ↦ later.a·(earlier.a·x + earlier.b) + later.b.
/// Associative, not commutative. Identity: (1, 0). 16-bit storage computes in float; complex
/// products are parscan::product's.
template <class T>
struct affine_op {
  using scalar_type = compute_t<T>;
  using value_type = affine<scalar_type>;
  PARSCAN_HD PARSCAN_INLINE value_type operator()(const value_type& earlier, const value_type& later) const {
    return value_type(product(later.a, earlier.a), product(later.a, earlier.b) + later.b);
  }
  static PARSCAN_HD PARSCAN_INLINE value_type identity() { return value_type(scalar_type(1), scalar_type(0)); }
};

}  // namespace parscan
