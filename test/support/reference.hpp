// test/support/reference.hpp — plain sequential references for the generic scans, written
// independently of include/parscan/host/scan.hpp (nothing here calls the library's
// algorithms or its layout arithmetic). Values are whatever the caller computes in: double
// (or a struct of doubles) for floating-point operators, exact integers for exact ones.
//
// Definitions (parscan/scan.hpp), for one sequence x[0..n-1] taken in processing order and
// ⊕ = op(earlier, later):
//   inclusive  out[i] = c ⊕ x[0] ⊕ … ⊕ x[i]
//   exclusive  out[i] = c ⊕ x[0] ⊕ … ⊕ x[i-1]        (out[0] = c)
//   reduce     result = c ⊕ x[0] ⊕ … ⊕ x[n-1]
// c is carry_in[s] when given, else init (exclusive, reduce), else absent (inclusive).
// carry_out[s] = c ⊕ x[0..n-1]; absent (never written) when there is neither c nor any x.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <parscan/config.hpp>
#include <parscan/layout.hpp>

namespace parscan_test::ref {

using parscan::index_t;

// ---------------------------------------------------------------------------------------------
// Layouts, spelled out from the comment in parscan/layout.hpp.

/// Element offset of step t of sequence s: g·group_stride + c·sequence_stride + t·step_stride
/// with g = s / count, c = s % count.
inline index_t offset(const parscan::sequence_layout& l, index_t s, index_t t) {
  const index_t g = s / l.count;
  const index_t c = s - g * l.count;
  return g * l.group_stride + c * l.sequence_stride + t * l.step_stride;
}

inline index_t num_sequences(const parscan::sequence_layout& l) { return l.groups * l.count; }

/// Elements a buffer needs to hold the layout: one past the largest offset (0 if empty).
inline index_t span(const parscan::sequence_layout& l) {
  if (l.groups <= 0 || l.count <= 0 || l.length <= 0) return 0;
  return (l.groups - 1) * l.group_stride + (l.count - 1) * l.sequence_stride + (l.length - 1) * l.step_stride + 1;
}

/// Per element of a buffer of n elements: is it addressed by the layout?
inline std::vector<bool> covered(const parscan::sequence_layout& l, std::size_t n) {
  std::vector<bool> m(n, false);
  for (index_t s = 0; s < num_sequences(l); ++s)
    for (index_t t = 0; t < l.length; ++t) m.at(static_cast<std::size_t>(offset(l, s, t))) = true;
  return m;
}

/// A batch in logical form: [sequence][step], steps in storage order (t = 0..length-1).
template <class V>
using batch = std::vector<std::vector<V>>;

/// Reads the batch a layout describes out of a flat buffer, converting each element.
template <class T, class F>
auto gather(const std::vector<T>& buf, const parscan::sequence_layout& l, F convert)
    -> batch<decltype(convert(buf[0]))> {
  batch<decltype(convert(buf[0]))> b(static_cast<std::size_t>(num_sequences(l)));
  for (index_t s = 0; s < num_sequences(l); ++s) {
    b[s].reserve(static_cast<std::size_t>(l.length));
    for (index_t t = 0; t < l.length; ++t) b[s].push_back(convert(buf.at(static_cast<std::size_t>(offset(l, s, t)))));
  }
  return b;
}

template <class T>
batch<T> gather(const std::vector<T>& buf, const parscan::sequence_layout& l) {
  return gather(buf, l, [](const T& v) { return v; });
}

// ---------------------------------------------------------------------------------------------
// The scans.

enum class kind { inclusive, exclusive, reduce };

inline const char* to_string(kind k) {
  return k == kind::inclusive ? "inclusive" : k == kind::exclusive ? "exclusive" : "reduce";
}

template <class V>
struct result {
  batch<V> out;                     // [sequence][step]; empty rows for reduce
  std::vector<std::optional<V>> carry;  // carry_out (= reduce's result) per sequence; nullopt: not written
};

/// Sequential reference of one generic scan over a logical batch. `op(earlier, later)`; init
/// is used by exclusive and reduce when carry_in is null; `reverse` processes t = n-1 … 0.
template <class V, class Op>
result<V> scan(kind k, const batch<V>& in, Op op, bool reverse, const std::optional<V>& init,
               const std::vector<V>* carry_in = nullptr) {
  result<V> r;
  r.out.resize(in.size());
  r.carry.resize(in.size());
  for (std::size_t s = 0; s < in.size(); ++s) {
    const std::vector<V>& x = in[s];
    const std::size_t n = x.size();
    std::optional<V> acc;  // everything before the current step, c included
    if (carry_in) acc = carry_in->at(s);
    else if (k != kind::inclusive) acc = init.value();
    if (k != kind::reduce) r.out[s].assign(n, V{});
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t t = reverse ? n - 1 - i : i;
      if (k == kind::exclusive) r.out[s][t] = *acc;
      acc = acc ? op(*acc, x[t]) : x[t];
      if (k == kind::inclusive) r.out[s][t] = *acc;
    }
    r.carry[s] = acc;
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Comparisons.

/// max|actual - expected| / max(max|expected|, floor) over all elements and over fields
/// 0..fields-1 of two equally shaped batches, where project(v, k) is field k of v. The scale is
/// the largest expected field over the whole batch (every element, every field), so one entry
/// of a matrix that cancelled to near zero is judged on the scale of the data. With floor = 0 this is the plain relative error (the
/// absolute error when every expected value is 0); a floor gives the scale of the data for sets
/// of a few values that may each have cancelled to near zero (carries, reductions).
template <class V, class P>
double normwise_error(const batch<V>& actual, const batch<V>& expected, int fields, P project, double floor = 0.0) {
  double num = 0.0, den = floor;
  for (std::size_t s = 0; s < expected.size(); ++s)
    for (std::size_t t = 0; t < expected[s].size(); ++t)
      for (int k = 0; k < fields; ++k) {
        const double e = project(expected[s][t], k), a = project(actual.at(s).at(t), k);
        const double d = std::fabs(a - e);
        num = (d != d || num != num) ? NAN : std::max(num, d);
        den = std::max(den, std::fabs(e));
      }
  return den > 0.0 ? num / den : num;
}

/// normwise_error of one scalar projection.
template <class V, class P>
double relative_error(const batch<V>& actual, const batch<V>& expected, P project, double floor = 0.0) {
  return normwise_error(actual, expected, 1, [&](const V& v, int) { return project(v); }, floor);
}

/// Positions (as "s=…, t=…") where two batches differ under `equal`; the first few, for messages.
template <class V, class Eq>
std::string first_mismatches(const batch<V>& actual, const batch<V>& expected, Eq equal, std::size_t max = 5) {
  std::ostringstream m;
  std::size_t found = 0;
  if (actual.size() != expected.size()) return "different numbers of sequences";
  for (std::size_t s = 0; s < expected.size(); ++s) {
    if (actual[s].size() != expected[s].size()) return "different lengths in sequence " + std::to_string(s);
    for (std::size_t t = 0; t < expected[s].size(); ++t)
      if (!equal(actual[s][t], expected[s][t])) {
        if (found < max) m << (found ? "; " : "") << "s=" << s << " t=" << t;
        ++found;
      }
  }
  if (found > max) m << "; ... (" << found << " in all)";
  return m.str();
}

}  // namespace parscan_test::ref
