// parscan/detail/recurrence_math.hpp — the per-step arithmetic of the gated recurrence,
// shared by the host loop and the CUDA kernels so both backends compute the same thing.
#pragma once

#include <cuda/std/cmath>
#include <cuda/std/complex>

#include "../config.hpp"
#include "../numeric.hpp"
#include "../recurrence.hpp"

namespace parscan::detail {

template <class C>
PARSCAN_HD PARSCAN_INLINE C conj_if_complex(const C& v) { return v; }
template <class R>
PARSCAN_HD PARSCAN_INLINE cuda::std::complex<R> conj_if_complex(const cuda::std::complex<R>& v) { return cuda::std::conj(v); }

template <class C>
PARSCAN_HD PARSCAN_INLINE C exp_gate(const C& v) {
  using cuda::std::exp;
  return exp(v);
}

/// The gate a[t] in compute precision, from its stored value and form.
template <class C, class T>
PARSCAN_HD PARSCAN_INLINE C load_gate(const T& stored, bool log_form) {
  const C v = static_cast<C>(stored);
  return log_form ? exp_gate(v) : v;
}

}  // namespace parscan::detail
