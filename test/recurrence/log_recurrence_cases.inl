// test/recurrence/log_recurrence_cases.inl — the log-space recurrence (parscan/log_recurrence.hpp),
// shared by the host build (log_recurrence_test.cpp) and the GPU build (log_recurrence_test.cu).
// References are long-double sequential loops over the same stored inputs.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <parscan/parscan.hpp>

#include "support/catch.hpp"
#include "support/env.hpp"
#include "support/random.hpp"

namespace log_rec_test {

using parscan::index_t;
using ld = long double;
using sign_t = std::uint8_t;
using parscan_test::guarded_buffer;

enum class fam { positive, signed_, growing };

struct inputs {
  std::vector<float> log_a, log_b;  // exactly as stored (after rounding to T)
  std::vector<sign_t> a_neg, b_neg;
  std::vector<float> log_x0;
  std::vector<sign_t> x0_neg;
};

template <class T>
float stored(float v) { return static_cast<float>(static_cast<T>(v)); }

template <class T>
inputs draw(parscan_test::rng& r, std::size_t n, std::size_t seqs, fam f) {
  inputs in;
  for (std::size_t i = 0; i < n; ++i) {
    double a = f == fam::positive ? r.uniform(0.05, 1.0) : f == fam::signed_ ? r.signed_unit() : r.uniform(1.0, 1.02);
    if (a == 0) a = 0.5;
    const double b = f == fam::signed_ ? r.normal() : r.uniform(0.1, 1.0);
    in.log_a.push_back(stored<T>(static_cast<float>(std::log(std::fabs(a)))));
    in.a_neg.push_back(a < 0);
    in.log_b.push_back(stored<T>(static_cast<float>(std::log(std::fabs(b)))));
    in.b_neg.push_back(b < 0);
  }
  for (std::size_t s = 0; s < seqs; ++s) {
    const double x0 = f == fam::signed_ ? r.normal() : r.uniform(0.1, 2.0);
    in.log_x0.push_back(stored<T>(static_cast<float>(std::log(std::fabs(x0)))));
    in.x0_neg.push_back(x0 < 0);
  }
  return in;
}

inline ld value(float log_mag, bool neg) { return (neg ? -1.0L : 1.0L) * std::exp(static_cast<ld>(log_mag)); }

struct run_opts {
  index_t B = 1, D = 1, T = 1;
  parscan::recurrence_layout layout = parscan::recurrence_layout::time_contiguous;
  fam f = fam::positive;
  bool x0 = false, xf = true, reverse = false, signs = true;
};

/// Runs the library on o, checks writes, and returns the worst max|x − ref| / scale (per
/// sequence, in long double; scale = the largest |x|, |a·x_prev| or |b| of the sequence) over
/// all sequences; x_final is checked at the scale of x.
template <class T>
double run_and_check(const run_opts& o, parscan_test::rng& r) {
  const std::size_t seqs = static_cast<std::size_t>(o.B * o.D), n = seqs * static_cast<std::size_t>(o.T);
  const inputs in = draw<T>(r, n, seqs, o.f);
  auto to_T = [](const std::vector<float>& v) {
    std::vector<T> t(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) t[i] = static_cast<T>(v[i]);
    return t;
  };
  guarded_buffer<T> la(to_T(in.log_a)), lb(to_T(in.log_b)), lx0(to_T(in.log_x0));
  guarded_buffer<sign_t> sa(in.a_neg), sb(in.b_neg), sx0(in.x0_neg);
  guarded_buffer<T> lx(n), lxf(seqs);
  guarded_buffer<sign_t> sx(n, 64, 0xA5), sxf(seqs, 64, 0xA5);
  parscan::log_forward_args<T> g{};
  g.shape = {o.B, o.D, o.T, o.layout};
  g.log_a = la.data(), g.log_b = lb.data(), g.log_x = lx.data();
  if (o.signs) g.a_negative = sa.data(), g.b_negative = sb.data(), g.x_negative = sx.data();
  if (o.x0) {
    g.log_x0 = lx0.data();
    if (o.signs) g.x0_negative = sx0.data();
  }
  if (o.xf) {
    g.log_x_final = lxf.data();
    if (o.signs) g.x_final_negative = sxf.data();
  }
  g.reverse = o.reverse;
  const parscan::status st = parscan::log_recurrence_forward(parscan_test::backend(), g);
  PARSCAN_TEST_SYNC();
  REQUIRE(st == parscan::status::success);
  CHECK(lx.all_written());
  CHECK(lx.guards_intact());
  if (o.signs) {
    CHECK(sx.all_written());
    CHECK(sx.guards_intact());
  } else {
    CHECK(sx.untouched());
  }
  if (o.xf) {
    CHECK(lxf.all_written());
    CHECK(lxf.guards_intact());
  }
  const std::vector<T> hx = lx.download(), hxf = lxf.download();
  const std::vector<sign_t> hsx = sx.download(), hsxf = sxf.download();
  const auto dense = parscan::dense_strides(g.shape);
  double worst = 0;
  for (std::size_t s = 0; s < seqs; ++s) {
    const index_t b = static_cast<index_t>(s) / o.D, d = static_cast<index_t>(s) % o.D;
    ld state = o.x0 ? value(in.log_x0[s], o.signs && in.x0_neg[s]) : 0.0L, err = 0, scale = 0;
    for (index_t i = 0; i < o.T; ++i) {
      const index_t t = o.reverse ? o.T - 1 - i : i;
      const std::size_t k = static_cast<std::size_t>(b * dense.batch + d * dense.channel + t * dense.time);
      const ld carried = value(in.log_a[k], o.signs && in.a_neg[k]) * state, fresh = value(in.log_b[k], o.signs && in.b_neg[k]);
      state = carried + fresh;
      const ld got = value(static_cast<float>(hx[k]), o.signs && hsx[k] != 0);
      err = std::max(err, std::fabs(got - state));
      // Measured against the terms' size too: a short signed sequence can cancel to near zero,
      // and float arithmetic is only accurate relative to what it adds.
      scale = std::max({scale, std::fabs(state), std::fabs(carried), std::fabs(fresh)});
    }
    if (o.xf) err = std::max(err, std::fabs(value(static_cast<float>(hxf[s]), o.signs && hsxf[s] != 0) - state));
    worst = std::max(worst, static_cast<double>(err / scale));
  }
  return worst;
}

// Float holds log|x| to about |log x|·6e-8, so x's relative error grows with |log x| (≈ 40 at
// the end of the growing family's 4097 steps) and with the steps that accumulate it. bfloat16
// storage holds log|x| to |log x|·2^-9, so it is tested only where |log x| stays small.
template <class T>
double tolerance(fam f) {
  if (sizeof(T) == 2) return 5e-2;
  return f == fam::growing ? 5e-4 : 1e-5;
}

}  // namespace log_rec_test

#define LOG_REC_CASES(TYPE, tname)                                                                                   \
  TEST_CASE(PARSCAN_TEST_NAME("log recurrence forward <" tname ">: shapes x layouts x families"),                 \
            PARSCAN_TEST_TAGS("[log]")) {                                                                        \
    using namespace log_rec_test;                                                                                 \
    PARSCAN_TEST_RNG(r, "log recurrence " tname);                                                                 \
    int i = 0;                                                                                                    \
    for (index_t Tn : {index_t(1), index_t(2), index_t(33), index_t(1000), index_t(4097)})                        \
      for (auto layout : {parscan::recurrence_layout::time_contiguous, parscan::recurrence_layout::channel_last}) \
        for (fam f : {fam::positive, fam::signed_, fam::growing}) {                                               \
          ++i;                                                                                                    \
          if (sizeof(TYPE) == 2 && f == fam::growing) continue;                                                   \
          run_opts o;                                                                                             \
          o.B = 2, o.D = Tn > 1000 ? 33 : 40, o.T = Tn, o.layout = layout, o.f = f;                               \
          o.x0 = i % 2 == 0, o.xf = i % 3 != 0, o.reverse = i % 4 == 1, o.signs = f == fam::signed_ || i % 5 != 0; \
          INFO("T=" << Tn << " layout=" << int(layout) << " family=" << int(f) << " x0=" << o.x0                 \
                    << " reverse=" << o.reverse << " signs=" << o.signs);                                         \
          CHECK(run_and_check<TYPE>(o, r) <= tolerance<TYPE>(f));                                                       \
        }                                                                                                         \
  }

LOG_REC_CASES(float, "float")
LOG_REC_CASES(parscan::bfloat16, "bfloat16")

TEST_CASE(PARSCAN_TEST_NAME("log recurrence: zero gates reset exactly, zero values, NaN propagates"),
          PARSCAN_TEST_TAGS("[log]")) {
  using namespace log_rec_test;
  const index_t T = 300;
  PARSCAN_TEST_RNG(r, "log recurrence special values");
  std::vector<float> log_a(T), log_b(T);
  for (index_t t = 0; t < T; ++t)
    log_a[t] = static_cast<float>(std::log(r.uniform(0.5, 1.0))), log_b[t] = static_cast<float>(std::log(r.uniform(0.1, 1.0)));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  log_a[100] = neg_inf;                              // a = 0: x[100] = b[100] exactly
  log_b[150] = neg_inf;                              // b = 0: x[150] = a[150]·x[149]
  log_b[200] = std::numeric_limits<float>::quiet_NaN();  // NaN from 200 on
  guarded_buffer<float> la(log_a), lb(log_b), lx(T);
  parscan::log_forward_args<float> g{};
  g.shape = {1, 1, T, parscan::recurrence_layout::time_contiguous};
  g.log_a = la.data(), g.log_b = lb.data(), g.log_x = lx.data();
  REQUIRE(parscan::log_recurrence_forward(parscan_test::backend(), g) == parscan::status::success);
  PARSCAN_TEST_SYNC();
  const std::vector<float> x = lx.download();
  CHECK(x[100] == log_b[100]);
  CHECK(std::fabs(x[150] - (log_a[150] + x[149])) <= 1e-5f * std::max(1.0f, std::fabs(x[150])));
  for (index_t t = 0; t < 200; ++t) CHECK(std::isfinite(x[t]));
  for (index_t t = 200; t < T; ++t) CHECK(std::isnan(x[t]));
}

TEST_CASE(PARSCAN_TEST_NAME("log recurrence: chunks chained through x_final equal one call"), PARSCAN_TEST_TAGS("[log]")) {
  using namespace log_rec_test;
  const index_t C = 40, T = 3001, cut = 1234;
  PARSCAN_TEST_RNG(r, "log recurrence chunked");
  const inputs in = draw<float>(r, static_cast<std::size_t>(C * T), static_cast<std::size_t>(C), fam::signed_);
  guarded_buffer<float> la(in.log_a), lb(in.log_b), whole(C * T), parts(C * T), state(C);
  guarded_buffer<sign_t> sa(in.a_neg), sb(in.b_neg), whole_s(C * T), parts_s(C * T), state_s(C);
  auto args = [&](index_t t0, index_t len, float* x, sign_t* xs) {
    parscan::log_forward_args<float> g{};
    g.shape = {1, C, len, parscan::recurrence_layout::strided};
    g.a_strides = g.b_strides = g.x_strides = {C * T, T, 1};
    g.log_a = la.data() + t0, g.a_negative = sa.data() + t0, g.log_b = lb.data() + t0, g.b_negative = sb.data() + t0;
    g.log_x = x + t0, g.x_negative = xs + t0;
    return g;
  };
  REQUIRE(parscan::log_recurrence_forward(parscan_test::backend(), args(0, T, whole.data(), whole_s.data())) ==
          parscan::status::success);
  auto first = args(0, cut, parts.data(), parts_s.data());
  first.log_x_final = state.data(), first.x_final_negative = state_s.data();
  REQUIRE(parscan::log_recurrence_forward(parscan_test::backend(), first) == parscan::status::success);
  auto second = args(cut, T - cut, parts.data(), parts_s.data());
  second.log_x0 = state.data(), second.x0_negative = state_s.data();
  REQUIRE(parscan::log_recurrence_forward(parscan_test::backend(), second) == parscan::status::success);
  PARSCAN_TEST_SYNC();
  const auto w = whole.download(), p = parts.download();
  const auto ws = whole_s.download(), ps = parts_s.download();
  ld err = 0, scale = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    err = std::max(err, std::fabs(value(w[i], ws[i] != 0) - value(p[i], ps[i] != 0)));
    scale = std::max(scale, std::fabs(value(w[i], ws[i] != 0)));
  }
  CHECK(static_cast<double>(err / scale) <= 2e-5);
}

TEST_CASE(PARSCAN_TEST_NAME("log recurrence: bad arguments write nothing; zero length is valid"), PARSCAN_TEST_TAGS("[log]")) {
  using namespace log_rec_test;
  using parscan::status;
  const index_t C = 4, T = 64;
  guarded_buffer<float> la(C * T), lb(C * T), lx(C * T), x0(C), xf(C);
  guarded_buffer<sign_t> sa(C * T), sx(C * T);
  auto base = [&] {
    parscan::log_forward_args<float> g{};
    g.shape = {1, C, T, parscan::recurrence_layout::time_contiguous};
    g.log_a = la.data(), g.log_b = lb.data(), g.log_x = lx.data();
    return g;
  };
  auto refused = [&](parscan::log_forward_args<float> g, status expected) {
    lx.repoison(), sx.repoison(), xf.repoison();
    CHECK(parscan::log_recurrence_forward(parscan_test::backend(), g) == expected);
    PARSCAN_TEST_SYNC();
    CHECK(lx.untouched());
    CHECK(sx.untouched());
    CHECK(xf.untouched());
  };
  auto g = base();
  g.log_a = nullptr;
  refused(g, status::null_pointer);
  g = base(), g.shape.length = -1;
  refused(g, status::negative_size);
  g = base(), g.shape.length = index_t(1) << 62;
  refused(g, status::size_overflow);
  g = base(), g.a_negative = sa.data();  // a may be negative, but there is nowhere to put x's sign
  refused(g, status::null_pointer);
  g = base(), g.log_x = la.data() + 1;  // partly over log_a
  refused(g, status::overlapping_output);
  g = base(), g.log_x_final = xf.data(), g.log_x0 = nullptr, g.x0_negative = sa.data();
  refused(g, status::null_pointer);
  g = base(), g.shape.layout = parscan::recurrence_layout::strided, g.a_strides = {C * T, T, -1},
  g.b_strides = g.x_strides = {C * T, T, 1};
  refused(g, status::invalid_stride);
  // Zero length: nothing is written to x; x_final receives x0.
  std::vector<float> x0_values(C);
  for (index_t s = 0; s < C; ++s) x0_values[s] = 0.25f * static_cast<float>(s + 1);
  x0.upload(x0_values);
  g = base(), g.shape.length = 0, g.log_x0 = x0.data(), g.log_x_final = xf.data();
  lx.repoison(), xf.repoison();
  CHECK(parscan::log_recurrence_forward(parscan_test::backend(), g) == status::success);
  PARSCAN_TEST_SYNC();
  CHECK(lx.untouched());
  CHECK(xf.download() == x0_values);
}
