// parscan/ops/basic.hpp — sum, max and min: familiar operators for checking the generic core.
//
// Operator contract (every operator in ops/, and every user functor):
//   * op(earlier, later) combines two adjacent partial results; `earlier` covers the elements
//     that come first in processing order (lower indices for a forward scan).
//   * op must be associative. It need not be commutative.
//   * value_type names the accumulator type; identity(), where present, returns e with
//     op(e, x) == op(x, e) == x. The generic algorithms never require an identity.
#pragma once

#include <type_traits>

#include <cuda/std/limits>

#include "../config.hpp"

namespace parscan {

template <class T>
struct sum_op {
  using value_type = T;
  PARSCAN_HD PARSCAN_INLINE T operator()(const T& earlier, const T& later) const { return earlier + later; }
  static PARSCAN_HD PARSCAN_INLINE T identity() { return T(0); }
};

template <class T>
struct max_op {
  using value_type = T;
  PARSCAN_HD PARSCAN_INLINE T operator()(const T& earlier, const T& later) const { return later > earlier ? later : earlier; }
  static PARSCAN_HD PARSCAN_INLINE T identity() {
    return cuda::std::numeric_limits<T>::has_infinity ? -cuda::std::numeric_limits<T>::infinity()
                                                      : cuda::std::numeric_limits<T>::lowest();
  }
};

template <class T>
struct min_op {
  using value_type = T;
  PARSCAN_HD PARSCAN_INLINE T operator()(const T& earlier, const T& later) const { return later < earlier ? later : earlier; }
  static PARSCAN_HD PARSCAN_INLINE T identity() {
    return cuda::std::numeric_limits<T>::has_infinity ? cuda::std::numeric_limits<T>::infinity()
                                                      : cuda::std::numeric_limits<T>::max();
  }
};

/// Whether op(earlier, later) over accumulators Acc gives bitwise the same result however a
/// sequence of combinations is associated: integer sums (wrapping), min and max of integers.
/// (Floating-point sums round differently; floating-point min and max treat NaN by position.)
/// The CUDA backend's fastest scan (the first-ready look-back) takes such operators even when
/// determinism::run_to_run is asked, since their results cannot differ. Specialize it for a
/// user operator with the same property.
template <class Op, class Acc>
struct exact_association : std::false_type {};
template <class T>
struct exact_association<sum_op<T>, T> : std::bool_constant<std::is_integral_v<T>> {};
template <class T>
struct exact_association<max_op<T>, T> : std::bool_constant<std::is_integral_v<T>> {};
template <class T>
struct exact_association<min_op<T>, T> : std::bool_constant<std::is_integral_v<T>> {};

}  // namespace parscan
