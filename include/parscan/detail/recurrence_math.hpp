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

// exp(log a) for a log-form gate. A gate near 1 (log a near 0) is remembered for about
// 1/(1-a) steps, so any bias in its rounding accumulates over that many steps: device expf
// is accurate to 2 ulp, and gates in (0.999, 1) then drift past 1e-5 in float. 1 + expm1(v)
// rounds within half an ulp of the true gate there; away from 1 the plain exp is used.
template <class R>
PARSCAN_HD PARSCAN_INLINE R exp_real_gate(const R& v) {
  return cuda::std::fabs(v) < R(0.5) ? R(1) + cuda::std::expm1(v) : cuda::std::exp(v);
}

template <class C>
PARSCAN_HD PARSCAN_INLINE C exp_gate(const C& v) { return exp_real_gate(v); }

// Complex gates: the magnitude as above; the phase in double precision, since a rotation's
// rounding also accumulates over the gate's memory.
template <class R>
PARSCAN_HD PARSCAN_INLINE cuda::std::complex<R> exp_gate(const cuda::std::complex<R>& v) {
  const R magnitude = exp_real_gate(v.real());
  const double phase = static_cast<double>(v.imag());
  return {static_cast<R>(magnitude * cuda::std::cos(phase)), static_cast<R>(magnitude * cuda::std::sin(phase))};
}

/// The gate a[t] in compute precision, from its stored value and form.
template <class C, class T>
PARSCAN_HD PARSCAN_INLINE C load_gate(const T& stored, bool log_form) {
  const C v = static_cast<C>(stored);
  return log_form ? exp_gate(v) : v;
}

/// The gates of N steps, as load_gate, with one test of the form for all of them: the kernels'
/// unrolled runs then read linear gates as straight-line code (a test a step split a run into
/// a basic block a step, around each step's inlined exp).
template <class C, class T, int N>
PARSCAN_HD PARSCAN_INLINE void load_gates(const T (&stored)[N], bool log_form, C (&gates)[N]) {
  widen(stored, gates);
  if (log_form) {
    PARSCAN_UNROLL
    for (int v = 0; v < N; ++v) gates[v] = exp_gate(gates[v]);
  }
}

}  // namespace parscan::detail
