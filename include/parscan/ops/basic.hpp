// parscan/ops/basic.hpp — sum, max and min: familiar operators for checking the generic core.
//
// Operator contract (every operator in ops/, and every user functor):
//   * op(earlier, later) combines two adjacent partial results; `earlier` covers the elements
//     that come first in processing order (lower indices for a forward scan).
//   * op must be associative. It need not be commutative.
//   * value_type names the accumulator type; identity(), where present, returns e with
//     op(e, x) == op(x, e) == x. The generic algorithms never require an identity.
#pragma once

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

}  // namespace parscan
