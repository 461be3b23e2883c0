// test/core/scan_cases.inl — the backend-neutral body of the generic-algorithm tests
// (inclusive_scan, exclusive_scan, reduce). Included by scan_test.cpp (host backend, g++) and
// scan_test.cu (CUDA backend, nvcc with PARSCAN_TEST_CUDA=1); see support/env.hpp.
//
// Every run: fresh random input (holes of strided layouts included), every output buffer
// poisoned first, then checked element by element against a float64 / exact-integer
// sequential reference (support/reference.hpp), checked fully written where the layout
// addresses it, untouched elsewhere, and with intact guard bands.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "support/env.hpp"
#include "support/random.hpp"
#include "support/reference.hpp"

namespace parscan_scan_cases {

using parscan::direction;
using parscan::index_t;
using parscan::sequence_layout;
using parscan::status;
using parscan_test::guarded_buffer;
using parscan_test::rng;
namespace ref = parscan_test::ref;

// ---------------------------------------------------------------------------------------------
// A user-defined, non-commutative, exactly associative operator: 2×2 integer matrices under
// product modulo a prime, op(earlier, later) = earlier · later (so the inclusive scan is
// M0·M1·…·Mi). A backend that swaps the operands computes Mi·…·M0, which differs.

struct mat2 {
  std::int64_t m[4];  // [[m0, m1], [m2, m3]], entries in [0, p)
};

struct mat2_mod_op {
  static constexpr std::int64_t p = 1000003;  // entries < 2^20: products fit easily in int64
  PARSCAN_HD mat2 operator()(const mat2& earlier, const mat2& later) const {
    mat2 r;
    r.m[0] = (earlier.m[0] * later.m[0] + earlier.m[1] * later.m[2]) % p;
    r.m[1] = (earlier.m[0] * later.m[1] + earlier.m[1] * later.m[3]) % p;
    r.m[2] = (earlier.m[2] * later.m[0] + earlier.m[3] * later.m[2]) % p;
    r.m[3] = (earlier.m[2] * later.m[1] + earlier.m[3] * later.m[3]) % p;
    return r;
  }
};

// ---------------------------------------------------------------------------------------------
// The operators under test. Each case names its storage (in_t/out_t), the operator and its
// accumulator, the reference value type and operator, random draws, and how results compare.

struct ref_affine {
  double a, b;
};

struct sum_i64_case {
  static constexpr const char* name = "sum_op<int64>";
  using in_t = std::int64_t;
  using out_t = std::int64_t;
  using op_t = parscan::sum_op<std::int64_t>;
  using acc_t = parscan::accumulator_t<op_t, in_t>;
  using ref_t = std::int64_t;
  static constexpr bool exact = true;
  static constexpr double tolerance = 0.0;
  // Up to 2^40 in magnitude: sums of 10^6 need all 64 bits of the accumulator (< 2^60).
  static in_t draw(rng& r) { return r.small_int(-(std::int64_t(1) << 40), std::int64_t(1) << 40); }
  static acc_t draw_acc(rng& r) { return draw(r); }
  static ref_t from_in(const in_t& v) { return v; }
  static ref_t from_out(const out_t& v) { return v; }
  static ref_t from_acc(const acc_t& v) { return v; }
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return e + l; }
  static bool equal(const ref_t& x, const ref_t& y) { return x == y; }
};

struct sum_f64_case {
  static constexpr const char* name = "sum_op<double> on integers";
  using in_t = double;
  using out_t = double;
  using op_t = parscan::sum_op<double>;
  using acc_t = parscan::accumulator_t<op_t, in_t>;
  using ref_t = double;
  static constexpr bool exact = true;  // integers below 2^20: every partial sum is exact (< 2^41)
  static constexpr double tolerance = 0.0;
  static in_t draw(rng& r) { return static_cast<double>(r.small_int(-(1 << 20), 1 << 20)); }
  static acc_t draw_acc(rng& r) { return draw(r); }
  static ref_t from_in(const in_t& v) { return v; }
  static ref_t from_out(const out_t& v) { return v; }
  static ref_t from_acc(const acc_t& v) { return v; }
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return e + l; }
  static bool equal(const ref_t& x, const ref_t& y) { return x == y; }
};

// x ↦ a·x + b composed as "later after earlier": x ↦ l.a·(e.a·x + e.b) + l.b.
inline ref_affine ref_compose(const ref_affine& e, const ref_affine& l) { return {l.a * e.a, l.a * e.b + l.b}; }

// max|out - ref| / max|ref|, per coefficient. `floor` is the data's scale (inputs, gates and
// carries are all below 1 in magnitude) used for carries and reductions: a handful of values,
// one per sequence, any of which may have cancelled to near zero. b is measured against at
// least that scale everywhere: b = a·b' + b'' adds signed terms, and its rounding is an ulp or
// two of the terms (on the host, without FMA: two roundings; in log space: a log-add-exp), not
// of the sum. A short sequence whose only b cancelled to 0.3% of its terms measured 3.7e-5
// relative to itself (log_affine_op, seed 3234281973064446182), about 1e-7 of the terms.
// a, a product, cannot cancel and keeps the plain relative error.
inline double affine_error(const ref::batch<ref_affine>& actual, const ref::batch<ref_affine>& expected, double floor) {
  const double ea = ref::relative_error(actual, expected, [](const ref_affine& v) { return v.a; }, floor);
  const double eb = ref::relative_error(actual, expected, [](const ref_affine& v) { return v.b; }, std::max(floor, 1.0));
  return (ea != ea || eb != eb) ? ea + eb : (ea > eb ? ea : eb);
}

struct affine_f32_case {
  static constexpr const char* name = "affine_op<float>";
  using in_t = parscan::affine<float>;
  using out_t = parscan::affine<float>;
  using op_t = parscan::affine_op<float>;
  using acc_t = parscan::accumulator_t<op_t, in_t>;
  using ref_t = ref_affine;
  static constexpr bool exact = false;
  static constexpr double tolerance = 1e-5;
  // Gates in (0, 1), inputs in (-1, 1): the states stay bounded.
  static in_t draw(rng& r) { return in_t(static_cast<float>(r.gate()), static_cast<float>(r.signed_unit())); }
  static acc_t draw_acc(rng& r) { return acc_t(static_cast<float>(r.gate()), static_cast<float>(r.signed_unit())); }
  static ref_t from_in(const in_t& v) { return {v.a, v.b}; }
  static ref_t from_out(const out_t& v) { return {v.a, v.b}; }
  static ref_t from_acc(const acc_t& v) { return {v.a, v.b}; }
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return ref_compose(e, l); }
  static double error(const ref::batch<ref_t>& a, const ref::batch<ref_t>& e, double floor) { return affine_error(a, e, floor); }
};

struct affine_bf16_case {
  static constexpr const char* name = "affine_op<bfloat16>";
  using in_t = parscan::affine<parscan::bfloat16>;
  using out_t = parscan::affine<parscan::bfloat16>;
  using op_t = parscan::affine_op<parscan::bfloat16>;
  using acc_t = parscan::accumulator_t<op_t, in_t>;  // affine<float>
  using ref_t = ref_affine;
  static constexpr bool exact = false;
  static constexpr double tolerance = 1e-2;  // outputs are rounded to 8 significant bits
  static in_t draw(rng& r) {
    return in_t(parscan::bfloat16(static_cast<float>(r.gate())), parscan::bfloat16(static_cast<float>(r.signed_unit())));
  }
  static acc_t draw_acc(rng& r) { return acc_t(static_cast<float>(r.gate()), static_cast<float>(r.signed_unit())); }
  static ref_t from_in(const in_t& v) { return {static_cast<float>(v.a), static_cast<float>(v.b)}; }
  static ref_t from_out(const out_t& v) { return {static_cast<float>(v.a), static_cast<float>(v.b)}; }
  static ref_t from_acc(const acc_t& v) { return {v.a, v.b}; }
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return ref_compose(e, l); }
  static double error(const ref::batch<ref_t>& a, const ref::batch<ref_t>& e, double floor) { return affine_error(a, e, floor); }
};

struct mat2_mod_case {
  static constexpr const char* name = "user-defined 2x2 matrix product mod p";
  using in_t = mat2;
  using out_t = mat2;
  using op_t = mat2_mod_op;
  using acc_t = parscan::accumulator_t<op_t, in_t>;
  using ref_t = mat2;
  static constexpr bool exact = true;
  static constexpr double tolerance = 0.0;
  static constexpr std::int64_t p = mat2_mod_op::p;
  static in_t draw(rng& r) {
    mat2 x;
    for (auto& v : x.m) v = r.small_int(0, p - 1);
    return x;
  }
  static acc_t draw_acc(rng& r) { return draw(r); }
  static ref_t from_in(const in_t& v) { return v; }
  static ref_t from_out(const out_t& v) { return v; }
  static ref_t from_acc(const acc_t& v) { return v; }
  // Written independently of mat2_mod_op: (E·L)[i][j] = Σ_k E[i][k]·L[k][j] mod p.
  static ref_t ref_op(const ref_t& e, const ref_t& l) {
    mat2 r;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        std::int64_t s = 0;
        for (int k = 0; k < 2; ++k) s = (s + e.m[2 * i + k] * l.m[2 * k + j]) % p;
        r.m[2 * i + j] = s;
      }
    return r;
  }
  static bool equal(const ref_t& x, const ref_t& y) {
    return x.m[0] == y.m[0] && x.m[1] == y.m[1] && x.m[2] == y.m[2] && x.m[3] == y.m[3];
  }
};


// A large struct (80 bytes: one step per lane, many shuffle words): x ↦ W·x + b with 4×4 W.
struct ref_mat4_affine {
  double W[4][4], b[4];
};

struct mat4_affine_case {
  static constexpr const char* name = "matrix_affine_op<float, 4>";
  using in_t = parscan::matrix_affine<float, 4>;
  using out_t = parscan::matrix_affine<float, 4>;
  using op_t = parscan::matrix_affine_op<float, 4>;
  using acc_t = parscan::accumulator_t<op_t, in_t>;
  using ref_t = ref_mat4_affine;
  static constexpr bool exact = false;
  static constexpr double tolerance = 1e-5;
  // Entries in (-0.24, 0.24): every row sums below 1 in magnitude, so products stay bounded.
  static in_t draw(rng& r) {
    in_t v;
    for (int i = 0; i < 4; ++i) {
      v.b[i] = static_cast<float>(r.signed_unit());
      for (int j = 0; j < 4; ++j) v.W[i][j] = static_cast<float>(0.24 * r.signed_unit());
    }
    return v;
  }
  static acc_t draw_acc(rng& r) { return draw(r); }
  static ref_t from_in(const in_t& v) {
    ref_t x;
    for (int i = 0; i < 4; ++i) {
      x.b[i] = v.b[i];
      for (int j = 0; j < 4; ++j) x.W[i][j] = v.W[i][j];
    }
    return x;
  }
  static ref_t from_out(const out_t& v) { return from_in(v); }
  static ref_t from_acc(const acc_t& v) { return from_in(v); }
  // later ∘ earlier, written independently of matrix_affine_op: (L.W·E.W, L.W·E.b + L.b).
  static ref_t ref_op(const ref_t& e, const ref_t& l) {
    ref_t r;
    for (int i = 0; i < 4; ++i) {
      r.b[i] = l.b[i];
      for (int k = 0; k < 4; ++k) r.b[i] += l.W[i][k] * e.b[k];
      for (int j = 0; j < 4; ++j) {
        r.W[i][j] = 0;
        for (int k = 0; k < 4; ++k) r.W[i][j] += l.W[i][k] * e.W[k][j];
      }
    }
    return r;
  }
  static double error(const ref::batch<ref_t>& a, const ref::batch<ref_t>& e, double floor) {
    // W and b each normwise: one entry of a product of two random matrices can cancel to
    // near zero, and its rounding error is only small against the matrix as a whole.
    const double ew = ref::normwise_error(a, e, 16, [](const ref_t& v, int k) { return v.W[k / 4][k % 4]; }, floor);
    const double eb = ref::normwise_error(a, e, 4, [](const ref_t& v, int k) { return v.b[k]; }, floor);
    return std::max(ew, eb);
  }
};

// The log-space affine map (a struct of floats and bools), compared in linear space.
struct log_affine_case {
  static constexpr const char* name = "log_affine_op<float>";
  using in_t = parscan::log_affine<float>;
  using out_t = parscan::log_affine<float>;
  using op_t = parscan::log_affine_op<float>;
  using acc_t = parscan::accumulator_t<op_t, in_t>;
  using ref_t = ref_affine;
  static constexpr bool exact = false;
  static constexpr double tolerance = 1e-5;
  // Signed gates and values in (-1, 1).
  static in_t draw(rng& r) {
    return in_t::from_linear(static_cast<float>(r.signed_unit()), static_cast<float>(r.signed_unit()));
  }
  static acc_t draw_acc(rng& r) { return draw(r); }
  static ref_t from_in(const in_t& v) {
    return {(v.neg_a ? -1.0 : 1.0) * std::exp(static_cast<double>(v.log_a)),
            (v.neg_b ? -1.0 : 1.0) * std::exp(static_cast<double>(v.log_b))};
  }
  static ref_t from_out(const out_t& v) { return from_in(v); }
  static ref_t from_acc(const acc_t& v) { return from_in(v); }
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return ref_compose(e, l); }
  static double error(const ref::batch<ref_t>& a, const ref::batch<ref_t>& e, double floor) { return affine_error(a, e, floor); }
};

constexpr int num_cases = 7;

/// Calls f(Case{}) for case number i (0..num_cases-1).
template <class F>
void with_case(int i, F&& f) {
  switch (i) {
    case 0: f(sum_i64_case{}); break;
    case 1: f(sum_f64_case{}); break;
    case 2: f(affine_f32_case{}); break;
    case 3: f(affine_bf16_case{}); break;
    case 4: f(mat2_mod_case{}); break;
    case 5: f(mat4_affine_case{}); break;
    case 6: f(log_affine_case{}); break;
    default: FAIL("no such case");
  }
}

// ---------------------------------------------------------------------------------------------
// Layouts.

/// (groups, count, length) with gaps: step stride 3, sequence stride 3·length + 1, and 5
/// unused elements between groups.
inline sequence_layout odd_layout(index_t groups, index_t count, index_t length) {
  sequence_layout l;
  l.count = count;
  l.length = length;
  l.step_stride = 3;
  l.sequence_stride = 3 * length + 1;
  l.groups = groups;
  l.group_stride = count * l.sequence_stride + 5;
  return l;
}

/// Dense (groups, count, length), steps contiguous.
inline sequence_layout grouped_dense(index_t groups, index_t count, index_t length) {
  return {count, length, length, 1, groups, count * length};
}

struct layout_pair {
  const char* name;
  sequence_layout in, out;
};

constexpr int num_layout_pairs = 5;

inline layout_pair batch_layouts(int i, index_t L) {
  switch (i) {
    case 0: return {"time_contiguous(5, L)", sequence_layout::time_contiguous(5, L), sequence_layout::time_contiguous(5, L)};
    case 1: return {"channel_last(2, L, 3)", sequence_layout::channel_last(2, L, 3), sequence_layout::channel_last(2, L, 3)};
    case 2: return {"odd strides -> channel_last(2, L, 3)", odd_layout(2, 3, L), sequence_layout::channel_last(2, L, 3)};
    case 3: return {"channel_last(2, L, 3) -> odd strides", sequence_layout::channel_last(2, L, 3), odd_layout(2, 3, L)};
    default: return {"odd strides -> grouped dense", odd_layout(2, 3, L), grouped_dense(2, 3, L)};
  }
}

// ---------------------------------------------------------------------------------------------
// One library call.

enum class carry_mode { none, in, out, both };
inline const char* to_string(carry_mode c) {
  return c == carry_mode::none ? "none" : c == carry_mode::in ? "carry_in" : c == carry_mode::out ? "carry_out" : "carry_in+carry_out";
}
inline bool has_in(carry_mode c) { return c == carry_mode::in || c == carry_mode::both; }
inline bool has_out(carry_mode c) { return c == carry_mode::out || c == carry_mode::both; }

enum class call_form {
  layouts,     // full form: separate in and out layouts
  one_layout,  // in and out share one layout
  contiguous,  // one contiguous sequence of n elements (needs a contiguous(n) layout)
};

template <class Case>
status call(call_form form, ref::kind k, const typename Case::in_t* in, const sequence_layout& il, typename Case::out_t* out,
            const sequence_layout& ol, const typename Case::acc_t& init, const parscan::scan_options<typename Case::acc_t>& opts,
            typename Case::acc_t* result) {
  using op_t = typename Case::op_t;
  const auto be = parscan_test::backend();
  switch (k) {
    case ref::kind::inclusive:
      if (form == call_form::contiguous) return parscan::inclusive_scan(be, in, out, il.length, op_t{}, opts);
      if (form == call_form::one_layout) return parscan::inclusive_scan(be, in, out, il, op_t{}, opts);
      return parscan::inclusive_scan(be, in, il, out, ol, op_t{}, opts);
    case ref::kind::exclusive:
      if (form == call_form::contiguous) return parscan::exclusive_scan(be, in, out, il.length, op_t{}, init, opts);
      if (form == call_form::one_layout) return parscan::exclusive_scan(be, in, out, il, op_t{}, init, opts);
      return parscan::exclusive_scan(be, in, il, out, ol, op_t{}, init, opts);
    case ref::kind::reduce:
      if (form == call_form::contiguous && !opts.carry_in) return parscan::reduce(be, in, il.length, op_t{}, init, result);
      return parscan::reduce(be, in, il, op_t{}, init, result, opts);
  }
  return status::unsupported;
}

// ---------------------------------------------------------------------------------------------
// Checks.

/// Exact cases: equal everywhere. Others: max|out - ref| / max(max|ref|, floor) ≤ tolerance;
/// floor = 0 for outputs (the plain relative error), 1 (the data's scale) for carries; the
/// affine cases measure b against at least 1 everywhere (affine_error says why).
template <class Case>
void compare_values(const ref::batch<typename Case::ref_t>& actual, const ref::batch<typename Case::ref_t>& expected,
                    const char* what, double floor = 0.0) {
  if constexpr (Case::exact) {
    const std::string bad = ref::first_mismatches(actual, expected, Case::equal);
    INFO(what << " differs from the reference at: " << bad);
    CHECK(bad.empty());
  } else {
    const double err = Case::error(actual, expected, floor);
    INFO(what << ": max|out - ref| / max(max|ref|, " << floor << ") = " << err << ", tolerance " << Case::tolerance);
    CHECK(err <= Case::tolerance);
  }
}

/// Checks a buffer of accumulators (carry_out or reduce's result): element s written exactly
/// when the reference has a value, and then equal to it.
template <class Case>
void check_carries(const guarded_buffer<typename Case::acc_t>& buf, const std::vector<std::optional<typename Case::ref_t>>& expected,
                   const char* what) {
  using ref_t = typename Case::ref_t;
  INFO("checking " << what);
  CHECK(buf.guards_intact());
  const auto got = buf.download();
  REQUIRE(got.size() == expected.size());
  std::vector<std::size_t> missing, spurious;
  ref::batch<ref_t> a(1), e(1);
  for (std::size_t s = 0; s < got.size(); ++s) {
    const bool written = !buf.is_poison(got[s]);
    if (expected[s] && !written) missing.push_back(s);
    if (!expected[s] && written) spurious.push_back(s);
    if (expected[s] && written) {
      a[0].push_back(Case::from_acc(got[s]));
      e[0].push_back(*expected[s]);
    }
  }
  if (!missing.empty()) FAIL_CHECK(what << " not written at " << parscan_test::first_positions(missing));
  if (!spurious.empty()) FAIL_CHECK(what << " written where nothing is defined, at " << parscan_test::first_positions(spurious));
  compare_values<Case>(a, e, what, 1.0);
}

/// Checks an output buffer against the layout: addressed elements written (not poison),
/// the others equal to `holes` (poison, or the input for an in-place run), guards intact.
template <class T>
void check_coverage(const guarded_buffer<T>& buf, const std::vector<T>& contents, const sequence_layout& l,
                    const typename std::common_type<std::vector<T>>::type* holes) {
  CHECK(buf.guards_intact());
  const std::vector<bool> cov = ref::covered(l, contents.size());
  std::vector<std::size_t> unwritten, clobbered;
  for (std::size_t i = 0; i < contents.size(); ++i) {
    if (cov[i]) {
      if (!holes && buf.is_poison(contents[i])) unwritten.push_back(i);
    } else if (holes ? std::memcmp(&contents[i], &(*holes)[i], sizeof(T)) != 0 : !buf.is_poison(contents[i])) {
      clobbered.push_back(i);
    }
  }
  if (!unwritten.empty()) FAIL_CHECK("output elements never written: " << parscan_test::first_positions(unwritten));
  if (!clobbered.empty())
    FAIL_CHECK("elements outside the output layout that changed: " << parscan_test::first_positions(clobbered));
}

struct run_config {
  ref::kind kind = ref::kind::inclusive;
  direction dir = direction::forward;
  const char* layout_name = "contiguous";
  sequence_layout in_layout, out_layout;
  carry_mode carry = carry_mode::none;
  bool in_place = false;
  call_form form = call_form::layouts;
};

inline std::string describe(const char* case_name, const run_config& c) {
  return std::string(case_name) + " " + ref::to_string(c.kind) + (c.dir == direction::reverse ? " reverse" : " forward") +
         " layout=" + c.layout_name + " count=" + std::to_string(c.in_layout.count) + " groups=" +
         std::to_string(c.in_layout.groups) + " length=" + std::to_string(c.in_layout.length) + " " + to_string(c.carry) +
         (c.in_place ? " in-place" : "");
}

/// Runs one configuration on the test backend and checks everything about it.
template <class Case>
void check_scan(const run_config& cfg) {
  using in_t = typename Case::in_t;
  using out_t = typename Case::out_t;
  using acc_t = typename Case::acc_t;
  using ref_t = typename Case::ref_t;
  const std::string what = describe(Case::name, cfg);
  INFO(what);
  PARSCAN_TEST_RNG(r, what);

  const bool reduce = cfg.kind == ref::kind::reduce;
  const sequence_layout& il = cfg.in_layout;
  const sequence_layout& ol = cfg.in_place ? cfg.in_layout : cfg.out_layout;
  const auto n_seq = static_cast<std::size_t>(ref::num_sequences(il));

  // Inputs: every element of the input buffer random, holes included.
  const std::vector<in_t> in_host = r.vector(static_cast<std::size_t>(ref::span(il)), Case::draw);
  guarded_buffer<in_t> in_buf(in_host);
  const std::vector<acc_t> carry_in_host = r.vector(n_seq, Case::draw_acc);
  guarded_buffer<acc_t> carry_in_buf(carry_in_host);
  const acc_t init = Case::draw_acc(r);

  std::optional<guarded_buffer<out_t>> out_buf;
  if (!reduce && !cfg.in_place) out_buf.emplace(static_cast<std::size_t>(ref::span(ol)));
  guarded_buffer<acc_t> carry_out_buf(n_seq);  // carry_out, or reduce's result
  guarded_buffer<acc_t> ignored_buf(n_seq);    // reduce: opts.carry_out, which reduce must ignore

  out_t* out = nullptr;
  if (cfg.in_place) {
    if constexpr (std::is_same<in_t, out_t>::value) out = in_buf.data();
    else FAIL("in-place needs in_t == out_t");
  } else if (!reduce) {
    out = out_buf->data();
  }

  parscan::scan_options<acc_t> opts;
  opts.dir = cfg.dir;
  if (has_in(cfg.carry)) opts.carry_in = carry_in_buf.data();
  if (has_out(cfg.carry)) opts.carry_out = reduce ? ignored_buf.data() : carry_out_buf.data();

  const status st = call<Case>(cfg.form, cfg.kind, in_buf.data(), il, out, ol, init, opts, carry_out_buf.data());
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);

  // Reference.
  const ref::batch<ref_t> x = ref::gather(in_host, il, Case::from_in);
  std::vector<ref_t> carry_in_ref;
  for (const acc_t& c : carry_in_host) carry_in_ref.push_back(Case::from_acc(c));
  const ref::result<ref_t> expected =
      ref::scan(cfg.kind, x, Case::ref_op, cfg.dir == direction::reverse, std::optional<ref_t>(Case::from_acc(init)),
                has_in(cfg.carry) ? &carry_in_ref : nullptr);

  // Inputs unchanged (not in place), carry_in unchanged.
  if (!cfg.in_place) {
    const std::vector<in_t> in_after = in_buf.download();
    CHECK(in_buf.guards_intact());
    CHECK(std::memcmp(in_after.data(), in_host.data(), in_host.size() * sizeof(in_t)) == 0);
  }
  {
    const std::vector<acc_t> cin_after = carry_in_buf.download();
    CHECK(carry_in_buf.guards_intact());
    CHECK(std::memcmp(cin_after.data(), carry_in_host.data(), carry_in_host.size() * sizeof(acc_t)) == 0);
  }

  if (!reduce) {
    std::vector<out_t> got;
    if constexpr (std::is_same<in_t, out_t>::value) {
      const guarded_buffer<out_t>& ob = cfg.in_place ? in_buf : *out_buf;
      got = ob.download();
      check_coverage(ob, got, ol, cfg.in_place ? &in_host : nullptr);  // in place: holes keep the input
    } else {
      got = out_buf->download();
      check_coverage(*out_buf, got, ol, nullptr);
    }
    compare_values<Case>(ref::gather(got, ol, Case::from_out), expected.out, "output");
    if (has_out(cfg.carry)) check_carries<Case>(carry_out_buf, expected.carry, "carry_out");
    else CHECK(carry_out_buf.untouched());
  } else {
    check_carries<Case>(carry_out_buf, expected.carry, "reduce result");
    CHECK(ignored_buf.untouched());
  }
}

inline ref::kind kind_of(int i) { return i == 0 ? ref::kind::inclusive : i == 1 ? ref::kind::exclusive : ref::kind::reduce; }
inline direction dir_of(int i) { return i == 0 ? direction::forward : direction::reverse; }

// ---------------------------------------------------------------------------------------------
// Chunked scans: each sequence split into uneven chunks, carry_out of one call fed to the
// next call's carry_in, compared with one whole-sequence call.

template <class Case>
void check_chunked(ref::kind kind, direction dir, const char* layout_name, const sequence_layout& l,
                   const std::vector<index_t>& cuts, bool initial_carry, bool alias_carries) {
  using in_t = typename Case::in_t;
  using out_t = typename Case::out_t;
  using acc_t = typename Case::acc_t;
  using ref_t = typename Case::ref_t;
  std::string what = std::string(Case::name) + " chunked " + ref::to_string(kind) +
                     (dir == direction::reverse ? " reverse" : " forward") + " layout=" + layout_name + " length=" +
                     std::to_string(l.length) + " cuts=";
  for (index_t c : cuts) what += std::to_string(c) + ",";
  what += initial_carry ? " initial carry_in" : " no initial carry_in";
  what += alias_carries ? ", carry_in == carry_out" : ", separate carry buffers";
  INFO(what);
  PARSCAN_TEST_RNG(r, what);

  const bool reduce = kind == ref::kind::reduce;
  const auto n_seq = static_cast<std::size_t>(ref::num_sequences(l));
  const auto n_elem = static_cast<std::size_t>(ref::span(l));
  const std::vector<in_t> in_host = r.vector(n_elem, Case::draw);
  guarded_buffer<in_t> in_buf(in_host);
  const std::vector<acc_t> carry0_host = r.vector(n_seq, Case::draw_acc);
  guarded_buffer<acc_t> carry0(carry0_host);
  const acc_t init = Case::draw_acc(r);

  // The whole sequence in one call.
  guarded_buffer<out_t> whole_out(reduce ? 0 : n_elem);
  guarded_buffer<acc_t> whole_carry(n_seq);
  {
    parscan::scan_options<acc_t> opts;
    opts.dir = dir;
    opts.carry_in = initial_carry ? carry0.data() : nullptr;
    opts.carry_out = whole_carry.data();
    const status st = call<Case>(call_form::layouts, kind, in_buf.data(), l, reduce ? nullptr : whole_out.data(), l, init,
                                 opts, whole_carry.data());
    PARSCAN_TEST_SYNC();
    REQUIRE(st == status::success);
  }

  // The same in chunks, in processing order (last chunk first for a reverse scan).
  std::vector<index_t> bounds{0};
  for (index_t c : cuts) bounds.push_back(c);
  bounds.push_back(l.length);
  const std::size_t n_chunks = bounds.size() - 1;
  guarded_buffer<out_t> chunk_out(reduce ? 0 : n_elem);
  guarded_buffer<acc_t> carry_a(n_seq), carry_b(n_seq);
  const acc_t* prev = initial_carry ? carry0.data() : nullptr;
  acc_t* last = nullptr;
  for (std::size_t i = 0; i < n_chunks; ++i) {
    const std::size_t k = dir == direction::forward ? i : n_chunks - 1 - i;
    sequence_layout cl = l;
    cl.length = bounds[k + 1] - bounds[k];
    const index_t shift = bounds[k] * l.step_stride;
    acc_t* next = alias_carries ? carry_a.data() : (i % 2 == 0 ? carry_a.data() : carry_b.data());
    parscan::scan_options<acc_t> opts;
    opts.dir = dir;
    opts.carry_in = prev;
    opts.carry_out = next;
    // After the first chunk the carry_in decides; a fresh init must make no difference.
    const acc_t chunk_init = i == 0 ? init : Case::draw_acc(r);
    INFO("chunk " << k << " [" << bounds[k] << ", " << bounds[k + 1] << ")");
    const status st = call<Case>(call_form::layouts, kind, in_buf.data() + shift, cl,
                                 reduce ? nullptr : chunk_out.data() + shift, cl, chunk_init, opts, next);
    PARSCAN_TEST_SYNC();
    REQUIRE(st == status::success);
    prev = next;
    last = next;
  }
  const guarded_buffer<acc_t>& final_carry = last == carry_a.data() ? carry_a : carry_b;

  // Reference.
  const ref::batch<ref_t> x = ref::gather(in_host, l, Case::from_in);
  std::vector<ref_t> carry0_ref;
  for (const acc_t& c : carry0_host) carry0_ref.push_back(Case::from_acc(c));
  const ref::result<ref_t> expected = ref::scan(kind, x, Case::ref_op, dir == direction::reverse,
                                                std::optional<ref_t>(Case::from_acc(init)), initial_carry ? &carry0_ref : nullptr);

  check_carries<Case>(whole_carry, expected.carry, "whole-sequence carry_out");
  check_carries<Case>(final_carry, expected.carry, "chained carry_out of the last chunk");
  if (!reduce) {
    const std::vector<out_t> whole = whole_out.download(), chunked = chunk_out.download();
    check_coverage(whole_out, whole, l, nullptr);
    check_coverage(chunk_out, chunked, l, nullptr);
    const ref::batch<ref_t> whole_ref = ref::gather(whole, l, Case::from_out);
    const ref::batch<ref_t> chunked_ref = ref::gather(chunked, l, Case::from_out);
    compare_values<Case>(whole_ref, expected.out, "whole-sequence output");
    compare_values<Case>(chunked_ref, expected.out, "chunked output");
    if constexpr (Case::exact) {
      const std::string bad = ref::first_mismatches(chunked_ref, whole_ref, Case::equal);
      INFO("chunked output differs from the whole-sequence output at: " << bad);
      CHECK(bad.empty());
    }
  }
  if constexpr (Case::exact) {
    const auto a = final_carry.download(), b = whole_carry.download();
    for (std::size_t s = 0; s < n_seq; ++s) {
      INFO("sequence " << s);
      CHECK(Case::equal(Case::from_acc(a[s]), Case::from_acc(b[s])));
    }
  }
}

}  // namespace parscan_scan_cases

// =============================================================================================
// Test cases.

TEST_CASE(PARSCAN_TEST_NAME("generic scans: one sequence at lengths around tile sizes and primes"),
          PARSCAN_TEST_TAGS("[scan][lengths]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const auto n = static_cast<index_t>(GENERATE(0, 1, 2, 31, 32, 33, 4095, 4096, 4097, 8191, 8192, 8193, 65521, 100003));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 2, 3);
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.in_layout = cfg.out_layout = sequence_layout::contiguous(n);
  cfg.carry = static_cast<carry_mode>(carry);
  // The contiguous-n convenience forms, except where only the full form takes the options.
  cfg.form = cfg.carry == carry_mode::none && cfg.dir == direction::forward ? call_form::contiguous : call_form::one_layout;
  with_case(c, [&](auto tag) { check_scan<decltype(tag)>(cfg); });
}

TEST_CASE(PARSCAN_TEST_NAME("generic scans: 10^6 elements"), PARSCAN_TEST_TAGS("[scan][large]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const int variant = GENERATE(0, 1, 2);
  run_config cfg;
  cfg.in_layout = cfg.out_layout = sequence_layout::contiguous(1000000);
  cfg.form = call_form::one_layout;
  if (variant == 0) cfg.kind = ref::kind::inclusive, cfg.dir = direction::forward, cfg.carry = carry_mode::none;
  if (variant == 1) cfg.kind = ref::kind::exclusive, cfg.dir = direction::reverse, cfg.carry = carry_mode::both;
  if (variant == 2) cfg.kind = ref::kind::reduce, cfg.dir = direction::forward, cfg.carry = carry_mode::in;
  with_case(c, [&](auto tag) { check_scan<decltype(tag)>(cfg); });
}

// Few long contiguous sequences, the shapes the CUDA backend scans and reduces as bulk tiles
// (agent/bulk_tiles.cuh, agent/bulk_reduce_spans.cuh: a whole tile staged through shared memory
// by the copy engine, when every sequence starts on a 16-byte boundary). 40003 steps: several tiles of every element size and a
// partial last tile whose final bytes are not a 16-byte multiple. Layouts: sequences 16-element
// aligned with unused gaps between them (which must stay untouched); the same in place; one
// whose second group starts off alignment (the chained kernels instead, same results).
TEST_CASE(PARSCAN_TEST_NAME("generic scans: long aligned sequences with gaps, in place and off alignment"),
          PARSCAN_TEST_TAGS("[scan][bulk]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const int lp = GENERATE(0, 1, 2);
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 3);
  constexpr index_t L = 40003;
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  sequence_layout l = sequence_layout::time_contiguous(3, L);
  l.sequence_stride = L + 13;  // 40016, a multiple of 16 elements
  cfg.layout_name = "3 sequences of 40003 steps, 40016 apart";
  if (lp == 1 && cfg.kind != ref::kind::reduce) cfg.in_place = true;  // a reduce writes no scan
  if (lp == 2) {
    // 40005 elements apart: the second group is off 16-byte alignment for every case whose
    // element is not a multiple of 16 bytes.
    l = sequence_layout{1, L, L, 1, 2, L + 2};
    cfg.layout_name = "2 groups of 40003 steps, 40005 apart";
  }
  cfg.in_layout = cfg.out_layout = l;
  cfg.carry = static_cast<carry_mode>(carry);
  cfg.form = call_form::layouts;
  with_case(c, [&](auto tag) { check_scan<decltype(tag)>(cfg); });
}

// One contiguous sequence of one to three bulk tiles, and of 36 to 800 (the tiles hold about
// 44 KB of every element size), so a tile's look-back (agent/first_ready_chain.cuh) reads a
// window of 32 tiles that holds the sequence's first tile, or only later ones. The CUDA backend
// takes inputs of up to about 2 MB as grid tiles instead (agent/grid_tiles.cuh: the short ones
// here, and 400009 4-byte elements), so 4-byte elements also run at 1060921 steps.
TEST_CASE(PARSCAN_TEST_NAME("generic scans: one long contiguous sequence over many bulk tiles"),
          PARSCAN_TEST_TAGS("[scan][bulk]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const auto L = static_cast<index_t>(GENERATE(1500, 20011, 400009));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 3);
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.layout_name = "contiguous";
  cfg.carry = static_cast<carry_mode>(carry);
  cfg.form = call_form::one_layout;
  with_case(c, [&](auto tag) {
    using Case = decltype(tag);
    const index_t length = L == 400009 && sizeof(typename Case::in_t) <= 4 ? 1060921 : L;
    cfg.in_layout = cfg.out_layout = sequence_layout::contiguous(length);
    check_scan<Case>(cfg);
  });
}

// Reduces of one sequence and of two longer than 2^20 steps, where the CUDA backend's reduce
// of an operator over 16 bytes (agent/thread_span_reduce.cuh) folds 9 steps a thread: spans
// that hold more than one round of loads, and a last span cut short by the end. The scans of
// those operators (the 2×2 products mod p and matrix_affine<float, 4>, cases 4 and 5) take the
// thread spans too from 2^17 steps (agent/thread_span_scan.cuh): 9 steps a thread for one
// sequence, 17 for two (spans sized by the batch, about 2^17 of them in all); 461 blocks of 256
// spans for the one sequence, 244 for each of the two, the last one part full, so that the block
// totals' scan gives two totals to most of its threads and one to its last. Contiguous aligned
// sequences write through each warp's staged lines (also in place); strided ones a step a thread.
TEST_CASE(PARSCAN_TEST_NAME("generic scans: reduces and costly scans over spans of many steps"),
          PARSCAN_TEST_TAGS("[scan][large]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const int k = GENERATE(2, 0, 1);
  const int lp = GENERATE(0, 1, 2, 3);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 3);
  if (k != 2 && c != 4 && c != 5) return;  // the scans of the other cases take tiles: other tests
  if (k == 2 && lp >= 2) return;
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  const index_t L = 1060921;
  const char* names[] = {"contiguous", "time_contiguous(2, 1060921)", "odd strides (1, 2, 300007)",
                         "contiguous, in place"};
  const sequence_layout layouts[] = {sequence_layout::contiguous(L), sequence_layout::time_contiguous(2, L),
                                     odd_layout(1, 2, 300007), sequence_layout::contiguous(L)};
  cfg.layout_name = names[lp];
  cfg.in_layout = layouts[lp];
  cfg.in_place = lp == 3;
  cfg.out_layout = cfg.in_layout;
  cfg.carry = static_cast<carry_mode>(carry);
  cfg.form = call_form::layouts;
  with_case(c, [&](auto tag) { check_scan<decltype(tag)>(cfg); });
}

// The costly scans in chunks of 31, 150001 and 149975 steps of two sequences, the carry in and
// out one array: the two long chunks take the thread spans, whose carry pass reads the carry in
// where it writes the carry out.
TEST_CASE(PARSCAN_TEST_NAME("generic scans: costly scans in chunks over thread spans with carries in place"),
          PARSCAN_TEST_TAGS("[scan][chunked]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(4, 5);
  const int k = GENERATE(0, 1);
  const int d = GENERATE(0, 1);
  const sequence_layout l = sequence_layout::time_contiguous(2, 300007);
  const std::vector<index_t> cuts{31, 31 + 150001};
  with_case(c, [&](auto tag) {
    check_chunked<decltype(tag)>(kind_of(k), dir_of(d), "time_contiguous(2, 300007)", l, cuts, true, true);
  });
}

// Chunks of 31, 24577 and the rest of two sequences of 60013 steps, the carry in and out one
// array: each chunk's first tile reads the carry in while its last tile writes the carry out.
TEST_CASE(PARSCAN_TEST_NAME("generic scans: chunks over many bulk tiles with carries in place"),
          PARSCAN_TEST_TAGS("[scan][chunked]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const int k = GENERATE(0, 1);
  const int d = GENERATE(0, 1);
  const sequence_layout l = sequence_layout::time_contiguous(2, 60013);
  const std::vector<index_t> cuts{31, 31 + 24577};
  with_case(c, [&](auto tag) {
    check_chunked<decltype(tag)>(kind_of(k), dir_of(d), "time_contiguous(2, 60013)", l, cuts, true, true);
  });
}

TEST_CASE(PARSCAN_TEST_NAME("generic scans: batches in every layout in both directions with carries"),
          PARSCAN_TEST_TAGS("[scan][batch]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const int lp = GENERATE(range(0, num_layout_pairs));
  const auto L = static_cast<index_t>(GENERATE(1, 33, 4097));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 1, 2, 3);
  const layout_pair layouts = batch_layouts(lp, L);
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.layout_name = layouts.name;
  cfg.in_layout = layouts.in;
  cfg.out_layout = layouts.out;
  cfg.carry = static_cast<carry_mode>(carry);
  cfg.form = lp < 2 ? call_form::one_layout : call_form::layouts;
  with_case(c, [&](auto tag) { check_scan<decltype(tag)>(cfg); });
}

// Batches of more sequences than a GPU holds warps (8192 on the device), time-contiguous: the
// CUDA backend scans each on a warp, in whole 16-byte accesses where the element is the
// accumulator (the int64 and float64 sums, affine<float>) and the output sits like the input
// modulo 16 bytes; else through the warp loop. Rows one element longer than their steps put
// each sequence's head off the boundary by a different amount; an output whose rows are two
// elements longer than the input's sits elsewhere but alike (the vector path, each tensor at its
// own offsets), one element longer unlike it (8-byte elements: the warp loop).
TEST_CASE(PARSCAN_TEST_NAME("generic scans: many contiguous sequences of a warp each"),
          PARSCAN_TEST_TAGS("[scan][batch]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(0, 1, 2);
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const index_t S = parscan_test::on_device ? 8192 : 300, L = GENERATE(index_t(150), index_t(777));
  const int rows = GENERATE(0, 1, 2, 3);
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.carry = (k + d) % 2 == 0 ? carry_mode::both : carry_mode::none;
  cfg.form = call_form::layouts;
  cfg.in_layout = rows == 0 ? sequence_layout::time_contiguous(S, L) : sequence_layout{S, L, L + 1, 1, 1, 0};
  cfg.out_layout = rows < 2 ? cfg.in_layout : sequence_layout{S, L, rows == 2 ? L + 3 : L + 2, 1, 1, 0};
  cfg.layout_name = rows == 0   ? "dense rows"
                    : rows == 1 ? "rows of L + 1"
                    : rows == 2 ? "rows of L + 1 -> rows of L + 3"
                                : "rows of L + 1 -> rows of L + 2";
  with_case(c, [&](auto tag) { check_scan<decltype(tag)>(cfg); });
}

// Channel-last batches of 3 × 1450 and 3 × 1451 channels: many groups of 32 in flight at once
// in the CUDA backend's persistent grid of staged lane tiles, the last group partial; with an
// even D the 4-byte elements run in lane packs of two channels (generic/generic_lane_packs.cuh),
// with an odd one a channel a lane. Lengths of one step, of one tile and of several, the last
// partial. On a GPU of 132 SMs the packs' 68 groups do not fill the device, so lengths of one
// staged tile or less (1, 128) take the lane loop there (dispatch_lane_tiles).
TEST_CASE(PARSCAN_TEST_NAME("generic scans: wide channel-last batches"), PARSCAN_TEST_TAGS("[scan][batch]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const auto D = static_cast<index_t>(GENERATE(1450, 1451));
  const auto L = static_cast<index_t>(GENERATE(1, 128, 301));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 3);
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.layout_name = D == 1450 ? "channel_last(3, L, 1450)" : "channel_last(3, L, 1451)";
  cfg.in_layout = cfg.out_layout = sequence_layout::channel_last(3, L, D);
  cfg.carry = static_cast<carry_mode>(carry);
  cfg.form = call_form::one_layout;
  with_case(c, [&](auto tag) { check_scan<decltype(tag)>(cfg); });
}

#if defined(PARSCAN_TEST_CUDA) && PARSCAN_TEST_CUDA
namespace parscan_scan_cases {
// A float sum on integers of at most 2^10 in magnitude: every partial sum of these lengths is
// exact (below 2^24). The 4-byte case of the chunk loop besides affine<bfloat16>.
struct sum_f32_case {
  static constexpr const char* name = "sum_op<float> on integers";
  using in_t = float;
  using out_t = float;
  using op_t = parscan::sum_op<float>;
  using acc_t = parscan::accumulator_t<op_t, in_t>;
  using ref_t = double;
  static constexpr bool exact = true;
  static constexpr double tolerance = 0.0;
  static in_t draw(rng& r) { return static_cast<float>(r.small_int(-(1 << 10), 1 << 10)); }
  static acc_t draw_acc(rng& r) { return draw(r); }
  static ref_t from_in(const in_t& v) { return v; }
  static ref_t from_out(const out_t& v) { return v; }
  static ref_t from_acc(const acc_t& v) { return v; }
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return e + l; }
  static bool equal(const ref_t& x, const ref_t& y) { return x == y; }
};
}  // namespace parscan_scan_cases

// The CUDA backend's chunk loop (generic/generic_chunks.cuh) for elements of 4 bytes (float sum,
// affine<bfloat16>) and 8 (int64 sum, affine<float>): channel-last batches of 1448 channels
// whose jobs fill an H100 or H200 (132 SMs) in 128-byte rows ((3, L, 1448); 8-byte elements also
// (2, L, 1448)), in 64-byte rows ((2, L, 1448) of 4-byte elements, (1, L, 1448) of 8-byte
// ones), or in neither ((1, L, 1448) of 4 bytes: lane packs). The last group of a row is partial
// (8 channels of 32 or 16). (4, L, 1536) takes 256-byte rows (whole groups of 64 or 32
// channels; 96 or 192 jobs, at least two thirds of the device): for 4-byte elements, 96 jobs,
// no more than the SMs, in three stages of 128 steps; for 8-byte ones in two of 256. Lengths of
// one step, of a partial tile, and of several tiles and a partial one (tiles of 128, 256 and
// 512 steps; 1100 steps wrap the three-stage ring). Reverse scans run in place.
TEST_CASE(PARSCAN_TEST_NAME("generic scans: channel-last batches in 16-byte chunks"),
          PARSCAN_TEST_TAGS("[scan][batch]")) {
  using namespace parscan_scan_cases;
  static const char* const names[] = {"channel_last(1, L, 1448)", "channel_last(2, L, 1448)",
                                      "channel_last(3, L, 1448)", "channel_last(4, L, 1536)"};
  const int c = GENERATE(range(0, 4));
  const int B = GENERATE(1, 2, 3, 4);
  const auto L = static_cast<index_t>(GENERATE(1, 300, 1100));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 1, 2, 3);  // none, in, out, both
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.layout_name = names[B - 1];
  cfg.in_layout = cfg.out_layout = sequence_layout::channel_last(B, L, B == 4 ? 1536 : 1448);
  cfg.carry = static_cast<carry_mode>(carry);
  cfg.form = call_form::one_layout;
  cfg.in_place = k < 2 && d == 1;  // reverse scans write over their input
  switch (c) {
    case 0: check_scan<sum_f32_case>(cfg); break;
    case 1: check_scan<affine_bf16_case>(cfg); break;
    case 2: check_scan<sum_i64_case>(cfg); break;
    default: check_scan<affine_f32_case>(cfg); break;
  }
}
#endif

TEST_CASE(PARSCAN_TEST_NAME("generic scans: in place"), PARSCAN_TEST_TAGS("[scan][in-place]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const int lp = GENERATE(0, 1, 2);
  const int k = GENERATE(0, 1);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 3);
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  if (lp == 0) cfg.layout_name = "time_contiguous(4, 4097)", cfg.in_layout = sequence_layout::time_contiguous(4, 4097);
  if (lp == 1) cfg.layout_name = "channel_last(2, 1000, 3)", cfg.in_layout = sequence_layout::channel_last(2, 1000, 3);
  if (lp == 2) cfg.layout_name = "odd strides (2, 3, 2049)", cfg.in_layout = odd_layout(2, 3, 2049);
  cfg.out_layout = cfg.in_layout;
  cfg.in_place = true;
  cfg.carry = static_cast<carry_mode>(carry);
  cfg.form = call_form::one_layout;
  with_case(c, [&](auto tag) { check_scan<decltype(tag)>(cfg); });
}

TEST_CASE(PARSCAN_TEST_NAME("generic scans: chunked with carries equals one call"), PARSCAN_TEST_TAGS("[scan][chunked]")) {
  using namespace parscan_scan_cases;
  const int c = GENERATE(range(0, num_cases));
  const int lp = GENERATE(0, 1);
  const int split = GENERATE(0, 1);
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const bool initial = GENERATE(false, true);
  const bool alias = GENERATE(false, true);
  const index_t L = 10007;
  const sequence_layout l = lp == 0 ? sequence_layout::time_contiguous(3, L) : sequence_layout::channel_last(2, L, 2);
  const char* name = lp == 0 ? "time_contiguous(3, L)" : "channel_last(2, L, 2)";
  // Two or three chunks of uneven sizes, one of them tiny, the others across tile boundaries.
  const std::vector<index_t> cuts = split == 0 ? std::vector<index_t>{4097} : std::vector<index_t>{31, 31 + 8193};
  with_case(c, [&](auto tag) { check_chunked<decltype(tag)>(kind_of(k), dir_of(d), name, l, cuts, initial, alias); });
}

TEST_CASE(PARSCAN_TEST_NAME("generic scans: empty sequences and empty batches"), PARSCAN_TEST_TAGS("[scan][empty]")) {
  using namespace parscan_scan_cases;
  // Zero-length sequences: scans write no output; carry_out is c when there is one (carry_in,
  // or init for exclusive), else untouched; reduce's result is init / carry_in.
  const int c = GENERATE(range(0, num_cases));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 1, 2, 3);
  const int shape = GENERATE(0, 1, 2);
  run_config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = dir_of(d);
  cfg.carry = static_cast<carry_mode>(carry);
  cfg.form = call_form::one_layout;
  if (shape == 0) cfg.layout_name = "time_contiguous(4, 0)", cfg.in_layout = sequence_layout::time_contiguous(4, 0);
  if (shape == 1) cfg.layout_name = "channel_last(2, 0, 3)", cfg.in_layout = sequence_layout::channel_last(2, 0, 3);
  if (shape == 2) cfg.layout_name = "time_contiguous(0, 7)", cfg.in_layout = sequence_layout::time_contiguous(0, 7);
  cfg.out_layout = cfg.in_layout;
  with_case(c, [&](auto tag) { check_scan<decltype(tag)>(cfg); });
}

TEST_CASE(PARSCAN_TEST_NAME("generic scans: null pointers are fine when there is nothing to read or write"),
          PARSCAN_TEST_TAGS("[scan][empty]")) {
  using namespace parscan_scan_cases;
  using op_t = parscan::sum_op<std::int64_t>;
  const auto be = parscan_test::backend();
  const std::int64_t* no_in = nullptr;
  std::int64_t* no_out = nullptr;
  const sequence_layout empty_seq = sequence_layout::contiguous(0);
  const sequence_layout no_seqs = sequence_layout::time_contiguous(0, 16);
  for (const sequence_layout& l : {empty_seq, no_seqs}) {
    CAPTURE(l.count, l.length);
    status st = parscan::inclusive_scan(be, no_in, no_out, l, op_t{});
    PARSCAN_TEST_SYNC();
    CHECK(st == status::success);
    st = parscan::exclusive_scan(be, no_in, no_out, l, op_t{}, std::int64_t(7));
    PARSCAN_TEST_SYNC();
    CHECK(st == status::success);
  }
  // No sequences: reduce has no result to write, so a null result is fine too.
  const status st = parscan::reduce(be, no_in, no_seqs, op_t{}, std::int64_t(7), no_out);
  PARSCAN_TEST_SYNC();
  CHECK(st == status::success);
}

TEST_CASE(PARSCAN_TEST_NAME("generic scans: bad arguments are refused and nothing is written"),
          PARSCAN_TEST_TAGS("[scan][validation]")) {
  using namespace parscan_scan_cases;
  using op_t = parscan::sum_op<std::int64_t>;
  using T = std::int64_t;
  PARSCAN_TEST_RNG(r, "bad arguments");
  const auto be = parscan_test::backend();
  const std::vector<T> in_host = r.vector(256, sum_i64_case::draw);
  const std::vector<T> cin_host = r.vector(16, sum_i64_case::draw);
  guarded_buffer<T> in(in_host), cin(cin_host);
  guarded_buffer<T> out(256), cout(16), result(16);
  const T init = 5;

  // Each call must return `expected` and leave every output, carry_out and result untouched
  // (and the inputs unchanged).
  const auto expect = [&](status expected, status got) {
    PARSCAN_TEST_SYNC();
    CHECK(got == expected);
    CHECK(out.untouched());
    CHECK(cout.untouched());
    CHECK(result.untouched());
    CHECK(in.download() == in_host);
    CHECK(in.guards_intact());
    CHECK(cin.download() == cin_host);
  };
  parscan::scan_options<T> with_carries;
  with_carries.carry_in = cin.data();
  with_carries.carry_out = cout.data();
  const sequence_layout one16 = sequence_layout::contiguous(16);
  const sequence_layout tc = sequence_layout::time_contiguous(4, 16);

  SECTION("null input with elements") {
    const T* null_in = nullptr;
    expect(status::null_pointer, parscan::inclusive_scan(be, null_in, out.data(), one16, op_t{}, with_carries));
    expect(status::null_pointer, parscan::exclusive_scan(be, null_in, out.data(), one16, op_t{}, init, with_carries));
    expect(status::null_pointer, parscan::reduce(be, null_in, one16, op_t{}, init, result.data()));
  }
  SECTION("null output with elements") {
    T* null_out = nullptr;
    expect(status::null_pointer, parscan::inclusive_scan(be, in.data(), null_out, one16, op_t{}, with_carries));
    expect(status::null_pointer, parscan::exclusive_scan(be, in.data(), null_out, tc, op_t{}, init, with_carries));
  }
  SECTION("reduce with a null result") {
    T* null_result = nullptr;
    expect(status::null_pointer, parscan::reduce(be, in.data(), tc, op_t{}, init, null_result));
    // Zero-length sequences still have a result (init) to write.
    expect(status::null_pointer,
           parscan::reduce(be, in.data(), sequence_layout::time_contiguous(4, 0), op_t{}, init, null_result));
  }
  SECTION("negative sizes") {
    const sequence_layout neg_count{-1, 16, 16, 1, 1, 0};
    const sequence_layout neg_length{2, -16, 16, 1, 1, 0};
    const sequence_layout neg_groups{2, 8, 8, 1, -1, 16};
    for (const sequence_layout& l : {neg_count, neg_length, neg_groups}) {
      CAPTURE(l.count, l.length, l.groups);
      expect(status::negative_size, parscan::inclusive_scan(be, in.data(), out.data(), l, op_t{}, with_carries));
      expect(status::negative_size, parscan::exclusive_scan(be, in.data(), out.data(), l, op_t{}, init, with_carries));
      expect(status::negative_size, parscan::reduce(be, in.data(), l, op_t{}, init, result.data()));
    }
  }
  SECTION("sizes that overflow 64-bit arithmetic (nothing is allocated)") {
    const index_t big = index_t(1) << 40;
    const sequence_layout huge_count{big, big, big, 1, 1, 0};               // count·length = 2^80
    const sequence_layout huge_stride{1, 2, 2, index_t(1) << 62, 1, 0};     // byte span > 2^63
    const sequence_layout huge_groups{big, 4, 4, 1, big, big * 4};          // groups·count = 2^80
    for (const sequence_layout& l : {huge_count, huge_stride, huge_groups}) {
      CAPTURE(l.count, l.length, l.groups, l.step_stride);
      expect(status::size_overflow, parscan::inclusive_scan(be, in.data(), out.data(), l, op_t{}));
      expect(status::size_overflow, parscan::exclusive_scan(be, in.data(), out.data(), l, op_t{}, init));
      expect(status::size_overflow, parscan::reduce(be, in.data(), l, op_t{}, init, result.data()));
    }
  }
  SECTION("negative strides") {
    const sequence_layout neg_step{1, 16, 16, -1, 1, 0};
    const sequence_layout neg_seq{4, 16, -16, 1, 1, 0};
    const sequence_layout neg_group{2, 8, 8, 1, 2, -16};
    for (const sequence_layout& l : {neg_step, neg_seq, neg_group}) {
      CAPTURE(l.step_stride, l.sequence_stride, l.group_stride);
      // On the input...
      expect(status::invalid_stride, parscan::inclusive_scan(be, in.data(), out.data(), l, op_t{}, with_carries));
      expect(status::invalid_stride, parscan::exclusive_scan(be, in.data(), out.data(), l, op_t{}, init, with_carries));
      expect(status::invalid_stride, parscan::reduce(be, in.data(), l, op_t{}, init, result.data()));
      // ...and on the output only.
      sequence_layout dense = l;
      dense.step_stride = 1, dense.sequence_stride = l.length, dense.group_stride = l.count * l.length;
      expect(status::invalid_stride, parscan::inclusive_scan(be, in.data(), dense, out.data(), l, op_t{}, with_carries));
    }
  }
  SECTION("output strides that make output elements overlap") {
    const sequence_layout overlapping_seqs{4, 16, 8, 1, 1, 0};   // sequence c+1 starts inside sequence c
    const sequence_layout interleaved{3, 4, 1, 2, 1, 0};         // offset c + 2t: (c=2, t=0) == (c=0, t=1)
    const sequence_layout overlapping_groups{2, 8, 8, 1, 2, 8};  // group 1 starts on sequence 1 of group 0
    for (const sequence_layout& ol : {overlapping_seqs, interleaved, overlapping_groups}) {
      CAPTURE(ol.count, ol.length, ol.sequence_stride, ol.step_stride, ol.groups, ol.group_stride);
      const sequence_layout il = grouped_dense(ol.groups, ol.count, ol.length);
      expect(status::overlapping_output, parscan::inclusive_scan(be, in.data(), il, out.data(), ol, op_t{}, with_carries));
      expect(status::overlapping_output, parscan::exclusive_scan(be, in.data(), il, out.data(), ol, op_t{}, init, with_carries));
    }
  }
  SECTION("a zero output step stride") {
    // status.hpp documents a zero output stride as invalid_stride; validate.hpp reports it as
    // overlapping_output (the elements alias). Either refusal is accepted here.
    const sequence_layout zero_step{1, 16, 16, 0, 1, 0};
    const status got = parscan::inclusive_scan(be, in.data(), one16, out.data(), zero_step, op_t{}, with_carries);
    PARSCAN_TEST_SYNC();
    CHECK((got == status::invalid_stride || got == status::overlapping_output));
    expect(got, got);
  }
  SECTION("output partly overlapping the input") {
    // One element further on: overlaps, but not exactly.
    expect(status::overlapping_output, parscan::inclusive_scan(be, in.data(), in.data() + 1, one16, op_t{}, with_carries));
    expect(status::overlapping_output, parscan::exclusive_scan(be, in.data(), in.data() + 1, tc, op_t{}, init, with_carries));
    // Same address, different offsets: in place only works with the same layout.
    const sequence_layout rows = grouped_dense(1, 4, 16);
    const sequence_layout cols{4, 16, 1, 4, 1, 0};
    expect(status::overlapping_output, parscan::inclusive_scan(be, in.data(), rows, in.data(), cols, op_t{}, with_carries));
  }
  SECTION("carry_out or a reduce result overlapping other arguments") {
    parscan::scan_options<T> opts;
    opts.carry_out = out.data() + 3;  // inside the output
    expect(status::overlapping_output, parscan::inclusive_scan(be, in.data(), out.data(), tc, op_t{}, opts));
    opts.carry_out = in.data() + 2;  // inside the input
    expect(status::overlapping_output, parscan::exclusive_scan(be, in.data(), out.data(), tc, op_t{}, init, opts));
    opts.carry_out = cout.data();
    opts.carry_in = out.data() + 5;  // carry_in inside the output
    expect(status::overlapping_output, parscan::inclusive_scan(be, in.data(), out.data(), tc, op_t{}, opts));
    // reduce's result inside its input
    expect(status::overlapping_output, parscan::reduce(be, in.data(), tc, op_t{}, init, in.data() + 1));
  }
  SECTION("shape mismatch between input and output layouts") {
    expect(status::shape_mismatch,
           parscan::inclusive_scan(be, in.data(), one16, out.data(), sequence_layout::contiguous(15), op_t{}, with_carries));
    expect(status::shape_mismatch, parscan::exclusive_scan(be, in.data(), sequence_layout::time_contiguous(2, 8), out.data(),
                                                           sequence_layout::time_contiguous(4, 4), op_t{}, init, with_carries));
    // Same sequence count and length, split differently into groups.
    expect(status::shape_mismatch, parscan::inclusive_scan(be, in.data(), sequence_layout::channel_last(2, 4, 2), out.data(),
                                                           sequence_layout::time_contiguous(4, 4), op_t{}, with_carries));
  }
}
