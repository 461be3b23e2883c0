// test/recurrence/recurrence_reference.hpp — the float64 sequential reference for the gated
// recurrence x[t] = a[t]·x[t-1] + b[t] and its backward, written from the formulas in
// include/parscan/recurrence.hpp and independent of src/. Also the scalar conversions,
// tolerances and the gate families the recurrence tests draw from.
//
// Plain C++ (no CUDA headers beyond <cuda/std/complex>, which parscan/numeric.hpp needs).
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <vector>

#include "parscan/numeric.hpp"
#include "parscan/recurrence.hpp"
#include "support/random.hpp"

namespace rec_test {

using parscan::index_t;
using cfloat = parscan::complex<float>;

// ---------------------------------------------------------------------------------------
// Scalar traits: the float64 reference type, tolerance and name of each library dtype.

template <class T> struct scalar;
template <> struct scalar<float> {
  using ref = double;
  static constexpr bool is_complex = false;
  static constexpr double tol = 1e-5;
  static const char* name() { return "float"; }
};
template <> struct scalar<double> {
  using ref = double;
  static constexpr bool is_complex = false;
  static constexpr double tol = 1e-12;
  static const char* name() { return "double"; }
};
template <> struct scalar<parscan::bfloat16> {
  using ref = double;
  static constexpr bool is_complex = false;
  static constexpr double tol = 1e-2;
  static const char* name() { return "bfloat16"; }
};
template <> struct scalar<parscan::float16> {
  using ref = double;
  static constexpr bool is_complex = false;
  static constexpr double tol = 1e-2;
  static const char* name() { return "float16"; }
};
template <> struct scalar<cfloat> {
  using ref = std::complex<double>;
  static constexpr bool is_complex = true;
  static constexpr double tol = 1e-5;
  static const char* name() { return "complex<float>"; }
};
template <class T> using ref_t = typename scalar<T>::ref;

inline double to_ref(float v) { return v; }
inline double to_ref(double v) { return v; }
inline double to_ref(parscan::bfloat16 v) { return static_cast<float>(v); }
inline double to_ref(parscan::float16 v) { return static_cast<float>(v); }
inline std::complex<double> to_ref(cfloat v) { return {v.real(), v.imag()}; }

template <class T> inline T from_ref(double r) { return T(static_cast<float>(r)); }
template <> inline double from_ref<double>(double r) { return r; }
template <class T> inline T from_ref(std::complex<double> r);
template <> inline cfloat from_ref<cfloat>(std::complex<double> r) {
  return cfloat(static_cast<float>(r.real()), static_cast<float>(r.imag()));
}

inline double conj_(double v) { return v; }
inline std::complex<double> conj_(std::complex<double> v) { return std::conj(v); }
inline double exp_(double v) { return std::exp(v); }
inline std::complex<double> exp_(std::complex<double> v) { return std::exp(v); }
inline bool isnan_(double v) { return std::isnan(v); }
inline bool isnan_(std::complex<double> v) { return std::isnan(v.real()) || std::isnan(v.imag()); }
inline bool isfinite_(double v) { return std::isfinite(v); }
inline bool isfinite_(std::complex<double> v) { return std::isfinite(v.real()) && std::isfinite(v.imag()); }

// ---------------------------------------------------------------------------------------
// The reference. Canonical order: channel c = b·D + d (0 ≤ c < C = B·D), element c·T + t.

/// Forward: x[t] = a[t]·x[t-1] + b[t] in processing order (t ascending, or descending with
/// reverse); `a` holds the linear gates. x0 may be null (state 0). xf gets the last state
/// computed (x0, or 0, when T == 0).
template <class R>
void ref_forward(index_t C, index_t T, const std::vector<R>& a, const std::vector<R>& b, const R* x0,
                 bool reverse, std::vector<R>& x, std::vector<R>& xf) {
  x.assign(static_cast<std::size_t>(C * T), R(0));
  xf.assign(static_cast<std::size_t>(C), R(0));
  for (index_t c = 0; c < C; ++c) {
    R s = x0 ? x0[c] : R(0);
    for (index_t k = 0; k < T; ++k) {
      const index_t i = c * T + (reverse ? T - 1 - k : k);
      s = a[i] * s + b[i];
      x[i] = s;
    }
    xf[c] = s;
  }
}

/// Backward, straight from the formulas in recurrence.hpp, in processing order k:
///   g[k]  = dx[k] (+ dx_final when k is the last step computed)
///   db[k] = g[k] + a[k+1]*·db[k+1]      (db[T] = 0)
///   da[k] = db[k]·x[k-1]*               (x[-1] = x0, or 0)
///   dx0   = a[0]*·db[0]
/// `a` holds the linear gates; with log_gates, da is multiplied by a* (gradient w.r.t. log a).
template <class R>
void ref_backward(index_t C, index_t T, const std::vector<R>& a, const std::vector<R>& x, const R* x0,
                  const std::vector<R>& dx, const R* dx_final, bool reverse, bool log_gates, std::vector<R>& da,
                  std::vector<R>& db, std::vector<R>& dx0) {
  da.assign(static_cast<std::size_t>(C * T), R(0));
  db.assign(static_cast<std::size_t>(C * T), R(0));
  dx0.assign(static_cast<std::size_t>(C), R(0));
  auto at = [&](index_t c, index_t k) { return c * T + (reverse ? T - 1 - k : k); };
  for (index_t c = 0; c < C; ++c) {
    R carry(0);
    for (index_t k = T - 1; k >= 0; --k) {
      const index_t i = at(c, k);
      R g = dx[i];
      if (k == T - 1 && dx_final) g += dx_final[c];
      carry = (k == T - 1) ? g : g + conj_(a[at(c, k + 1)]) * carry;
      db[i] = carry;
      const R prev = k > 0 ? x[at(c, k - 1)] : (x0 ? x0[c] : R(0));
      R g_a = carry * conj_(prev);
      if (log_gates) g_a *= conj_(a[i]);
      da[i] = g_a;
    }
    if (T > 0) dx0[c] = conj_(a[at(c, 0)]) * db[at(c, 0)];
    else if (dx_final) dx0[c] = dx_final[c];
  }
}

// ---------------------------------------------------------------------------------------
// Random data, from support/random.hpp's seeded streams.

using rng = parscan_test::rng;

enum class family {
  unit,      // real: a in (0,1); complex: |a| in (0,1), random phase
  near_one,  // real: a in [0.999, 1); complex: |a| in [0.999, 1), random phase
  signed_,   // real: a in (-1, 1); complex: same as unit
};
inline const char* name(family f) {
  return f == family::unit ? "unit" : f == family::near_one ? "near_one" : "signed";
}

/// One gate as stored in `a`: the gate, or its log with gate_form::log. Never zero.
inline double draw_gate_real(rng& r, family f, bool log_form) {
  double g = f == family::near_one ? r.uniform(0.999, 1.0) : r.uniform(1e-3, 1.0);
  if (f == family::signed_ && r.coin()) g = -g;
  return log_form ? std::log(g) : g;  // log of a negative gate is not asked for (see cases)
}
inline std::complex<double> draw_gate_complex(rng& r, family f, bool log_form) {
  const double m = f == family::near_one ? r.uniform(0.999, 1.0) : r.uniform(1e-3, 1.0);
  const double th = r.uniform(-3.141592653589793, 3.141592653589793);
  return log_form ? std::complex<double>(std::log(m), th) : std::polar(m, th);
}
template <class T> inline T draw_gate(rng& r, family f, bool log_form) {
  if constexpr (scalar<T>::is_complex) return from_ref<T>(draw_gate_complex(r, f, log_form));
  else return from_ref<T>(draw_gate_real(r, f, log_form));
}
template <class T> inline T draw_normal(rng& r) {
  if constexpr (scalar<T>::is_complex) return from_ref<T>(std::complex<double>(r.normal(), r.normal()));
  else return from_ref<T>(r.normal());
}
/// v.size() standard normal draws (complex: both parts), Box–Muller using both outputs of
/// each pair: half the transcendental work of draw_normal, for the large tensors.
template <class T> inline void fill_normal(rng& r, std::vector<T>& v) {
  constexpr std::size_t per = scalar<T>::is_complex ? 2 : 1;
  std::vector<double> z(v.size() * per + 1);
  for (std::size_t i = 0; i + 1 < z.size(); i += 2) {
    const double m = std::sqrt(-2.0 * std::log(r.unit())), th = 6.283185307179586 * r.unit();
    z[i] = m * std::cos(th), z[i + 1] = m * std::sin(th);
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (scalar<T>::is_complex) v[i] = from_ref<T>(std::complex<double>(z[2 * i], z[2 * i + 1]));
    else v[i] = from_ref<T>(z[i]);
  }
}

/// The linear gate the reference uses for a stored (possibly log) gate value.
template <class T> inline ref_t<T> linear_gate(T stored, bool log_form) {
  return log_form ? exp_(to_ref(stored)) : to_ref(stored);
}

// ---------------------------------------------------------------------------------------
// Error metric: max|x − ref| / max|ref|; NaN where the reference is finite counts as ∞.

template <class T>
double rel_error(const std::vector<T>& got, const std::vector<ref_t<T>>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const ref_t<T> g = to_ref(got[i]);
    if (!isfinite_(g)) return std::numeric_limits<double>::infinity();
    num = std::max(num, std::abs(g - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

template <class R>
double rel_error_ref(const std::vector<R>& got, const std::vector<R>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!isfinite_(got[i])) return std::numeric_limits<double>::infinity();
    num = std::max(num, std::abs(got[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

}  // namespace rec_test
