// test/core/iterator_cases.inl — the generic algorithms with iterator inputs and outputs
// (Thrust's fancy iterators), backend-neutral. Included by iterator_test.cpp (host backend,
// g++: Thrust's iterators are plain headers) and iterator_test.cu (CUDA backend, which adds the
// device-only cases: 2^32 + 7 elements, device_vector and device_ptr).
//
// Every run: fresh random data behind the iterators, every output buffer poisoned first and
// then checked element by element against a sequential reference (support/reference.hpp),
// written exactly where the layout addresses it, with intact guard bands; carries and results
// likewise. Scenarios: a counting or constant input into a raw pointer, a transform-output
// iterator or a discard iterator; a raw pointer into a transform-output iterator (the staged
// loads with element-wise stores); gates computed on the fly, exp(-Δ·A), by a transform
// iterator over a zip of Δ and x, into a transform-output iterator that keeps the state; a zip
// of two arrays into a zip of two arrays under a user's non-commutative tuple operator.
#pragma once

#if !defined(THRUST_DEVICE_SYSTEM) && !(defined(PARSCAN_TEST_CUDA) && PARSCAN_TEST_CUDA)
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CPP  // the host tests need no CUDA
#endif

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/tuple.h>

#include <parscan/ops/affine.hpp>
#include <parscan/ops/basic.hpp>

#include "support/env.hpp"
#include "support/random.hpp"
#include "support/reference.hpp"

namespace parscan_iterator_cases {

using parscan::direction;
using parscan::index_t;
using parscan::sequence_layout;
using parscan::status;
using parscan_test::guarded_buffer;
using parscan_test::rng;
namespace ref = parscan_test::ref;
using i64 = std::int64_t;

// ---------------------------------------------------------------------------------------------
// Functors (host and device).

struct negate_i64 {
  PARSCAN_HD i64 operator()(i64 v) const { return -v; }
};

/// A selective-scan step computed on the fly from (Δ, x): the gate exp(-Δ·A) and the input Δ·x.
struct gate_from_delta {
  double A;
  template <class Tuple>
  PARSCAN_HD parscan::affine<double> operator()(const Tuple& dx) const {
    const double delta = thrust::get<0>(dx), x = thrust::get<1>(dx);
    return parscan::affine<double>(exp(-delta * A), delta * x);
  }
};

/// Keeps the state x[t] = B of a composed map (the output of a recurrence scan).
struct state_of {
  PARSCAN_HD double operator()(const parscan::affine<double>& m) const { return m.b; }
};

/// A user's operator on tuples: the affine map x ↦ a·x + b modulo a prime, composed "later after
/// earlier" (associative, not commutative, exact).
using pair64 = thrust::tuple<i64, i64>;
struct affine_mod_op {
  static constexpr i64 p = 1000003;
  PARSCAN_HD pair64 operator()(const pair64& earlier, const pair64& later) const {
    const i64 ea = thrust::get<0>(earlier), eb = thrust::get<1>(earlier);
    const i64 la = thrust::get<0>(later), lb = thrust::get<1>(later);
    return pair64((la * ea) % p, (la * eb + lb) % p);
  }
};

// ---------------------------------------------------------------------------------------------
// Configurations.

enum class carry_mode { none, in, out, both };
inline bool has_in(carry_mode c) { return c == carry_mode::in || c == carry_mode::both; }
inline bool has_out(carry_mode c) { return c == carry_mode::out || c == carry_mode::both; }
inline const char* to_string(carry_mode c) {
  return c == carry_mode::none ? "none" : c == carry_mode::in ? "carry_in" : c == carry_mode::out ? "carry_out" : "both";
}

/// (groups, count, length) with gaps: step stride 2, 3 unused elements between sequences.
inline sequence_layout gappy(index_t groups, index_t count, index_t length) {
  sequence_layout l;
  l.count = count;
  l.length = length;
  l.step_stride = 2;
  l.sequence_stride = 2 * length + 3;
  l.groups = groups;
  l.group_stride = count * l.sequence_stride + 1;
  return l;
}

struct layout_choice {
  const char* name;
  sequence_layout in, out;
  int form;  // 0: full form (two layouts), 1: one layout, 2: contiguous n
};

/// The layouts, and the entry-point form each is called with.
inline layout_choice layout_of(int i, index_t L) {
  switch (i) {
    case 0: return {"contiguous(L)", sequence_layout::contiguous(L), sequence_layout::contiguous(L), 2};
    case 1: return {"time_contiguous(3, L)", sequence_layout::time_contiguous(3, L), sequence_layout::time_contiguous(3, L), 1};
    // 33 adjacent sequences: lane tiles on the GPU (load_at / store_at).
    case 2: return {"channel_last(2, L, 33)", sequence_layout::channel_last(2, L, 33), sequence_layout::channel_last(2, L, 33), 1};
    default: return {"gappy(2, 3, L) -> channel_last(2, L, 3)", gappy(2, 3, L), sequence_layout::channel_last(2, L, 3), 0};
  }
}
constexpr int num_layouts = 4;

inline ref::kind kind_of(int i) { return i == 0 ? ref::kind::inclusive : i == 1 ? ref::kind::exclusive : ref::kind::reduce; }

struct config {
  ref::kind kind = ref::kind::inclusive;
  direction dir = direction::forward;
  carry_mode carry = carry_mode::none;
  layout_choice layouts;
};

inline std::string describe(const char* scenario, const config& c) {
  return std::string(scenario) + " " + ref::to_string(c.kind) + (c.dir == direction::reverse ? " reverse" : " forward") +
         " layout=" + c.layouts.name + " length=" + std::to_string(c.layouts.in.length) + " " + to_string(c.carry);
}

/// One library call in the form the layout choice names.
template <class Acc, class InIt, class OutIt, class Op>
status call(const config& c, InIt in, OutIt out, Op op, const Acc& init, const parscan::scan_options<Acc>& opts, Acc* result) {
  const auto be = parscan_test::backend();
  const sequence_layout& il = c.layouts.in;
  const sequence_layout& ol = c.layouts.out;
  const bool plain = c.carry == carry_mode::none && c.dir == direction::forward;
  switch (c.kind) {
    case ref::kind::inclusive:
      if (c.layouts.form == 2 && plain) return parscan::inclusive_scan(be, in, out, il.length, op);
      if (c.layouts.form == 2) return parscan::inclusive_scan(be, in, out, il.length, op, opts);
      if (c.layouts.form == 1) return parscan::inclusive_scan(be, in, out, il, op, opts);
      return parscan::inclusive_scan(be, in, il, out, ol, op, opts);
    case ref::kind::exclusive:
      if (c.layouts.form == 2) return parscan::exclusive_scan(be, in, out, il.length, op, init, opts);
      if (c.layouts.form == 1) return parscan::exclusive_scan(be, in, out, il, op, init, opts);
      return parscan::exclusive_scan(be, in, il, out, ol, op, init, opts);
    case ref::kind::reduce:
      if (c.layouts.form == 2 && plain) return parscan::reduce(be, in, il.length, op, init, result);  // takes no options
      return parscan::reduce(be, in, il, op, init, result, opts);
  }
  return status::unsupported;
}

// ---------------------------------------------------------------------------------------------
// Checks.

/// Every element the layout addresses was written (is not poison), every other element and the
/// guards still hold poison.
template <class T>
void check_written(const guarded_buffer<T>& buf, const sequence_layout& l, const char* what) {
  INFO("output buffer " << what);
  CHECK(buf.guards_intact());
  const std::vector<T> got = buf.download();
  const std::vector<bool> cov = ref::covered(l, got.size());
  std::vector<std::size_t> unwritten, stray;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool poison = buf.is_poison(got[i]);
    if (cov[i] && poison) unwritten.push_back(i);
    if (!cov[i] && !poison) stray.push_back(i);
  }
  if (!unwritten.empty()) FAIL_CHECK("elements never written: " << parscan_test::first_positions(unwritten));
  if (!stray.empty()) FAIL_CHECK("elements outside the layout written: " << parscan_test::first_positions(stray));
}

/// Compares a batch with the reference under `equal`.
template <class V, class Eq>
void compare(const ref::batch<V>& got, const ref::batch<V>& want, Eq equal, const char* what) {
  const std::string bad = ref::first_mismatches(got, want, equal);
  INFO(what << " differs from the reference at: " << bad);
  CHECK(bad.empty());
}

/// carry_out or reduce's result: written exactly where the reference has a value, and equal.
template <class Scenario>
void check_carries(const guarded_buffer<typename Scenario::acc_t>& buf,
                   const std::vector<std::optional<typename Scenario::ref_t>>& want, const char* what) {
  INFO("checking " << what);
  CHECK(buf.guards_intact());
  const auto got = buf.download();
  REQUIRE(got.size() == want.size());
  for (std::size_t s = 0; s < got.size(); ++s) {
    INFO("sequence " << s);
    const bool written = !buf.is_poison(got[s]);
    CHECK(written == want[s].has_value());
    if (written && want[s]) CHECK(Scenario::equal(Scenario::from_acc(got[s]), *want[s]));
  }
}

/// Runs one configuration of a scenario and checks everything about it. A scenario supplies
/// acc_t, ref_t, op(), ref_op, from_acc, equal, draw_acc, and data(rng, in span, out span) with
/// in(), out(), the reference inputs ref_in (one per input offset), and check_out(layout,
/// expected batch) for its output (nothing to check for a discard iterator).
template <class Scenario>
void run(const config& cfg) {
  using acc_t = typename Scenario::acc_t;
  using ref_t = typename Scenario::ref_t;
  const std::string what = describe(Scenario::name, cfg);
  INFO(what);
  PARSCAN_TEST_RNG(r, what);
  const sequence_layout& il = cfg.layouts.in;
  const sequence_layout& ol = cfg.layouts.out;
  const bool reduce = cfg.kind == ref::kind::reduce;
  const auto n_seq = static_cast<std::size_t>(ref::num_sequences(il));

  typename Scenario::data d(r, ref::span(il), ref::span(ol));
  const std::vector<acc_t> carry_in_host = r.vector(n_seq, Scenario::draw_acc);
  guarded_buffer<acc_t> carry_in(carry_in_host), carry_out(n_seq), ignored(n_seq);
  const acc_t init = Scenario::draw_acc(r);
  parscan::scan_options<acc_t> opts;
  opts.dir = cfg.dir;
  if (has_in(cfg.carry)) opts.carry_in = carry_in.data();
  if (has_out(cfg.carry)) opts.carry_out = reduce ? ignored.data() : carry_out.data();

  const status st = call<acc_t>(cfg, d.in(), d.out(), Scenario::op(), init, opts, carry_out.data());
  PARSCAN_TEST_SYNC();
  REQUIRE(st == status::success);

  std::vector<ref_t> carry_ref;
  for (const acc_t& c : carry_in_host) carry_ref.push_back(Scenario::from_acc(c));
  const ref::result<ref_t> want = ref::scan(cfg.kind, ref::gather(d.ref_in, il), Scenario::ref_op, cfg.dir == direction::reverse,
                                            std::optional<ref_t>(Scenario::from_acc(init)), has_in(cfg.carry) ? &carry_ref : nullptr);
  if (!reduce) {
    d.check_out(ol, want.out);
    if (has_out(cfg.carry)) check_carries<Scenario>(carry_out, want.carry, "carry_out");
    else CHECK(carry_out.untouched());
  } else {
    check_carries<Scenario>(carry_out, want.carry, "reduce result");
    CHECK(ignored.untouched());
  }
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

/// int64 sums: the shared parts.
struct i64_sum_base {
  using acc_t = i64;
  using ref_t = i64;
  static parscan::sum_op<i64> op() { return {}; }
  static i64 ref_op(i64 e, i64 l) { return e + l; }
  static i64 from_acc(i64 v) { return v; }
  static bool equal(i64 x, i64 y) { return x == y; }
  static i64 draw_acc(rng& r) { return r.small_int(-(i64(1) << 40), i64(1) << 40); }
};

/// counting_iterator<int64>(start) into a raw pointer.
struct counting_to_pointer : i64_sum_base {
  static constexpr const char* name = "counting_iterator -> pointer";
  struct data {
    i64 start;
    std::vector<i64> ref_in;
    guarded_buffer<i64> out_buf;
    data(rng& r, index_t in_span, index_t out_span) : start(r.small_int(-(i64(1) << 40), i64(1) << 40)), out_buf(static_cast<std::size_t>(out_span)) {
      for (index_t i = 0; i < in_span; ++i) ref_in.push_back(start + i);
    }
    thrust::counting_iterator<i64> in() const { return thrust::counting_iterator<i64>(start); }
    i64* out() const { return out_buf.data(); }
    void check_out(const sequence_layout& l, const ref::batch<i64>& want) const {
      check_written(out_buf, l, "out");
      compare(ref::gather(out_buf.download(), l), want, equal, "output");
    }
  };
};

/// counting_iterator<int64> into a transform_output_iterator that stores -x in a raw pointer.
struct counting_to_transform_output : i64_sum_base {
  static constexpr const char* name = "counting_iterator -> transform_output_iterator(-x)";
  struct data {
    i64 start;
    std::vector<i64> ref_in;
    guarded_buffer<i64> out_buf;
    data(rng& r, index_t in_span, index_t out_span) : start(r.small_int(-1000000, 1000000)), out_buf(static_cast<std::size_t>(out_span)) {
      for (index_t i = 0; i < in_span; ++i) ref_in.push_back(start + i);
    }
    thrust::counting_iterator<i64> in() const { return thrust::counting_iterator<i64>(start); }
    auto out() const { return thrust::make_transform_output_iterator(out_buf.data(), negate_i64{}); }
    void check_out(const sequence_layout& l, const ref::batch<i64>& want) const {
      check_written(out_buf, l, "out");
      compare(ref::gather(out_buf.download(), l, [](i64 v) { return -v; }), want, equal, "output (negated back)");
    }
  };
};

/// A raw pointer into a transform_output_iterator: the input's vector loads and staging with
/// element-wise stores.
struct pointer_to_transform_output : i64_sum_base {
  static constexpr const char* name = "pointer -> transform_output_iterator(-x)";
  struct data {
    std::vector<i64> ref_in;
    guarded_buffer<i64> in_buf, out_buf;
    data(rng& r, index_t in_span, index_t out_span)
        : ref_in(r.vector(static_cast<std::size_t>(in_span), draw_acc)), in_buf(ref_in), out_buf(static_cast<std::size_t>(out_span)) {}
    const i64* in() const { return in_buf.data(); }
    auto out() const { return thrust::make_transform_output_iterator(out_buf.data(), negate_i64{}); }
    void check_out(const sequence_layout& l, const ref::batch<i64>& want) const {
      CHECK(in_buf.download() == ref_in);
      check_written(out_buf, l, "out");
      compare(ref::gather(out_buf.download(), l, [](i64 v) { return -v; }), want, equal, "output (negated back)");
    }
  };
};

/// constant_iterator into a discard_iterator: only carry_out and reduce's result show.
struct constant_to_discard : i64_sum_base {
  static constexpr const char* name = "constant_iterator -> discard_iterator";
  struct data {
    i64 value;
    std::vector<i64> ref_in;
    data(rng& r, index_t in_span, index_t) : value(r.small_int(-(i64(1) << 30), i64(1) << 30)), ref_in(static_cast<std::size_t>(in_span), value) {}
    thrust::constant_iterator<i64> in() const { return thrust::make_constant_iterator(value); }
    thrust::discard_iterator<> out() const { return thrust::make_discard_iterator(); }
    void check_out(const sequence_layout&, const ref::batch<i64>&) const {}
  };
};

/// Gates computed on the fly: transform_iterator(zip(Δ, x), exp(-Δ·A), Δ·x) → affine_op<double>,
/// the state B written through transform_output_iterator. Compared in double with a tolerance
/// (the GPU combines in another order).
struct gates_on_the_fly {
  static constexpr const char* name = "transform_iterator(zip(delta, x)) gates -> transform_output_iterator(state)";
  using acc_t = parscan::affine<double>;
  struct ref_t {
    double a, b;
  };
  static parscan::affine_op<double> op() { return {}; }
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return {l.a * e.a, l.a * e.b + l.b}; }
  static ref_t from_acc(const acc_t& v) { return {v.a, v.b}; }
  static bool close(double x, double y) { return std::fabs(x - y) <= 1e-12 * (1.0 + std::fabs(y)); }
  static bool equal(const ref_t& x, const ref_t& y) { return close(x.a, y.a) && close(x.b, y.b); }
  static acc_t draw_acc(rng& r) { return acc_t(r.gate(), r.signed_unit()); }
  struct data {
    double A;
    std::vector<double> delta, x;
    std::vector<ref_t> ref_in;
    guarded_buffer<double> delta_buf, x_buf, out_buf;
    data(rng& r, index_t in_span, index_t out_span)
        : A(r.uniform(0.5, 2.0)),
          delta(r.vector(static_cast<std::size_t>(in_span), [](rng& g) { return g.uniform(0.0, 0.5); })),
          x(r.vector(static_cast<std::size_t>(in_span), [](rng& g) { return g.signed_unit(); })),
          delta_buf(delta),
          x_buf(x),
          out_buf(static_cast<std::size_t>(out_span)) {
      for (std::size_t i = 0; i < delta.size(); ++i) ref_in.push_back({std::exp(-delta[i] * A), delta[i] * x[i]});
    }
    auto in() const {
      return thrust::make_transform_iterator(
          thrust::make_zip_iterator(thrust::make_tuple(static_cast<const double*>(delta_buf.data()), static_cast<const double*>(x_buf.data()))),
          gate_from_delta{A});
    }
    auto out() const { return thrust::make_transform_output_iterator(out_buf.data(), state_of{}); }
    void check_out(const sequence_layout& l, const ref::batch<ref_t>& want) const {
      check_written(out_buf, l, "out");
      ref::batch<double> want_b(want.size());
      for (std::size_t s = 0; s < want.size(); ++s)
        for (const ref_t& v : want[s]) want_b[s].push_back(v.b);
      compare(ref::gather(out_buf.download(), l), want_b, close, "state");
    }
  };
};

/// zip(a, b) into zip(out_a, out_b) under a user's tuple operator (affine maps mod p).
struct zip_to_zip {
  static constexpr const char* name = "zip_iterator(a, b) -> zip_iterator(out_a, out_b), user tuple operator";
  using acc_t = pair64;
  struct ref_t {
    i64 a, b;
  };
  static constexpr i64 p = affine_mod_op::p;
  static affine_mod_op op() { return {}; }
  // Written out independently of affine_mod_op: x ↦ l.a·(e.a·x + e.b) + l.b.
  static ref_t ref_op(const ref_t& e, const ref_t& l) { return {l.a * e.a % p, (l.a * e.b % p + l.b) % p}; }
  static ref_t from_acc(const acc_t& v) { return {thrust::get<0>(v), thrust::get<1>(v)}; }
  static bool equal(const ref_t& x, const ref_t& y) { return x.a == y.a && x.b == y.b; }
  static acc_t draw_acc(rng& r) { return acc_t(r.small_int(0, p - 1), r.small_int(0, p - 1)); }
  struct data {
    std::vector<i64> a, b;
    std::vector<ref_t> ref_in;
    guarded_buffer<i64> a_buf, b_buf, oa_buf, ob_buf;
    data(rng& r, index_t in_span, index_t out_span)
        : a(r.vector(static_cast<std::size_t>(in_span), [](rng& g) { return g.small_int(0, p - 1); })),
          b(r.vector(static_cast<std::size_t>(in_span), [](rng& g) { return g.small_int(0, p - 1); })),
          a_buf(a),
          b_buf(b),
          oa_buf(static_cast<std::size_t>(out_span)),
          ob_buf(static_cast<std::size_t>(out_span)) {
      for (std::size_t i = 0; i < a.size(); ++i) ref_in.push_back({a[i], b[i]});
    }
    auto in() const {
      return thrust::make_zip_iterator(thrust::make_tuple(static_cast<const i64*>(a_buf.data()), static_cast<const i64*>(b_buf.data())));
    }
    auto out() const { return thrust::make_zip_iterator(thrust::make_tuple(oa_buf.data(), ob_buf.data())); }
    void check_out(const sequence_layout& l, const ref::batch<ref_t>& want) const {
      check_written(oa_buf, l, "out_a");
      check_written(ob_buf, l, "out_b");
      const std::vector<i64> ga = oa_buf.download(), gb = ob_buf.download();
      ref::batch<ref_t> got(want.size());
      for (index_t s = 0; s < ref::num_sequences(l); ++s)
        for (index_t t = 0; t < l.length; ++t) {
          const auto o = static_cast<std::size_t>(ref::offset(l, s, t));
          got[static_cast<std::size_t>(s)].push_back({ga[o], gb[o]});
        }
      compare(got, want, equal, "output");
    }
  };
};

constexpr int num_scenarios = 6;

template <class F>
void with_scenario(int i, F&& f) {
  switch (i) {
    case 0: f(counting_to_pointer{}); break;
    case 1: f(counting_to_transform_output{}); break;
    case 2: f(pointer_to_transform_output{}); break;
    case 3: f(constant_to_discard{}); break;
    case 4: f(gates_on_the_fly{}); break;
    case 5: f(zip_to_zip{}); break;
    default: FAIL("no such scenario");
  }
}

}  // namespace parscan_iterator_cases

// =============================================================================================
// Test cases.

TEST_CASE(PARSCAN_TEST_NAME("iterator scans: fancy iterators in every layout in both directions with carries"),
          PARSCAN_TEST_TAGS("[scan][iterators]")) {
  using namespace parscan_iterator_cases;
  const int sc = GENERATE(range(0, num_scenarios));
  const int lp = GENERATE(range(0, num_layouts));
  const auto L = static_cast<index_t>(GENERATE(1, 37, 4099));
  const int k = GENERATE(0, 1, 2);
  const int d = GENERATE(0, 1);
  const int carry = GENERATE(0, 1, 2, 3);
  config cfg;
  cfg.kind = kind_of(k);
  cfg.dir = d == 0 ? direction::forward : direction::reverse;
  cfg.carry = static_cast<carry_mode>(carry);
  cfg.layouts = layout_of(lp, L);
  with_scenario(sc, [&](auto tag) { run<decltype(tag)>(cfg); });
}

TEST_CASE(PARSCAN_TEST_NAME("iterator scans: long sequences"), PARSCAN_TEST_TAGS("[scan][iterators][large]")) {
  using namespace parscan_iterator_cases;
  // Long enough for the GPU's chained tiles and its two-pass reduce.
  const int sc = GENERATE(range(0, num_scenarios));
  const int variant = GENERATE(0, 1, 2);
  config cfg;
  cfg.layouts = layout_of(0, 1000003);
  if (variant == 0) cfg.kind = ref::kind::inclusive, cfg.dir = direction::forward, cfg.carry = carry_mode::none;
  if (variant == 1) cfg.kind = ref::kind::exclusive, cfg.dir = direction::reverse, cfg.carry = carry_mode::both;
  if (variant == 2) cfg.kind = ref::kind::reduce, cfg.dir = direction::reverse, cfg.carry = carry_mode::in;
  with_scenario(sc, [&](auto tag) { run<decltype(tag)>(cfg); });
}

TEST_CASE(PARSCAN_TEST_NAME("iterator scans: checks that need no address still refuse bad arguments"),
          PARSCAN_TEST_TAGS("[scan][iterators][validation]")) {
  using namespace parscan_iterator_cases;
  using op_t = parscan::sum_op<i64>;
  const auto be = parscan_test::backend();
  const thrust::counting_iterator<i64> count(0);
  guarded_buffer<i64> out(64), cin(8), cout(8);
  const auto out_it = thrust::make_transform_output_iterator(out.data(), negate_i64{});
  const auto expect = [&](status want, status got) {
    PARSCAN_TEST_SYNC();
    CHECK(got == want);
    CHECK(out.untouched());
    CHECK(cout.untouched());
  };
  sequence_layout l = sequence_layout::contiguous(16);

  // Shapes and strides of iterator arguments are checked as for pointers.
  sequence_layout negative = l;
  negative.length = -1;
  expect(status::negative_size, parscan::inclusive_scan(be, count, out_it, negative, op_t{}));
  sequence_layout backwards = l;
  backwards.step_stride = -1;
  expect(status::invalid_stride, parscan::inclusive_scan(be, count, backwards, out_it, l, op_t{}));
  expect(status::invalid_stride, parscan::inclusive_scan(be, count, l, out_it, backwards, op_t{}));
  expect(status::shape_mismatch, parscan::inclusive_scan(be, count, l, out_it, sequence_layout::contiguous(15), op_t{}));
  // An output iterator must still get every element once: a zero step stride writes one
  // element 16 times.
  sequence_layout collapsed = l;
  collapsed.step_stride = 0;
  expect(status::overlapping_output, parscan::exclusive_scan(be, count, l, out_it, collapsed, op_t{}, i64(0)));
  sequence_layout huge = l;
  huge.count = i64(1) << 40;
  huge.sequence_stride = i64(1) << 40;
  expect(status::size_overflow, parscan::inclusive_scan(be, count, out_it, huge, op_t{}));
  // Offsets beyond the iterator's difference_type (int for counting_iterator<short>).
  const thrust::counting_iterator<short> narrow(0);
  static_assert(sizeof(std::iterator_traits<thrust::counting_iterator<short>>::difference_type) == 4, "int difference");
  const sequence_layout wide = sequence_layout::contiguous((i64(1) << 31) + 1);
  expect(status::size_overflow, parscan::inclusive_scan(be, narrow, thrust::make_discard_iterator(), wide, parscan::sum_op<int>{}));

  // Carries are pointers, checked as ever.
  parscan::scan_options<i64> opts;
  expect(status::null_pointer, parscan::reduce(be, count, sequence_layout::time_contiguous(8, 16), op_t{}, i64(0), static_cast<i64*>(nullptr)));
  opts.carry_in = cin.data();
  opts.carry_out = cin.data() + 1;  // partly overlaps carry_in
  expect(status::overlapping_output, parscan::inclusive_scan(be, count, out_it, sequence_layout::time_contiguous(4, 16), op_t{}, opts));
  // A pointer output is still checked against the pointer carries.
  opts.carry_in = out.data() + 3;
  opts.carry_out = nullptr;
  const status st = parscan::inclusive_scan(be, count, out.data(), sequence_layout::time_contiguous(2, 8), op_t{}, opts);
  PARSCAN_TEST_SYNC();
  CHECK(st == status::overlapping_output);
  CHECK(out.untouched());
}
