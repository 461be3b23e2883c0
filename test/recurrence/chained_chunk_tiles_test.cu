// test/recurrence/chained_chunk_tiles_test.cu — the chained chunk tiles
// (agent/chained_chunk_tiles.cuh; CUDA only) called directly in every row width, so that each
// width runs whatever the dispatch would choose on this GPU: the gated recurrence forward and
// backward on channel-last layouts, with lengths of one tile, of a few tiles and a partial one,
// and of more than one window of the look-back (32 tiles), groups whose last chunks lie past the
// row's channels, forward and reverse, with and without the states in and out. The results
// must match a float64 loop, write every element and no guard, and be bitwise the same when
// run again.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <parscan/cuda/recurrence/channel_last_chunks.cuh>

#include "support/env.hpp"
#include "support/random.hpp"

namespace {

using parscan::index_t;
namespace cd = parscan::cuda_detail;

struct case_of {
  index_t B, T, D;
  int width;  // chunks a group (16: 16-bit types only)
  bool reverse, states, log_gates;
};

std::string describe(const case_of& c) {
  return "(B, T, D) = (" + std::to_string(c.B) + ", " + std::to_string(c.T) + ", " + std::to_string(c.D) +
         "), groups of " + std::to_string(c.width) + " chunks, reverse=" + std::to_string(c.reverse) +
         ", states in and out=" + std::to_string(c.states) + ", log gates=" + std::to_string(c.log_gates);
}

template <class T>
cd::chunk_group group_of(const case_of& c) {
  const index_t channels = static_cast<index_t>(c.width) * cd::chunk_channels<T>;
  return {c.width, c.B * ((c.D + channels - 1) / channels)};
}

template <class T>
double tolerance() {
  return sizeof(T) == 2 ? 1e-2 : 1e-5;
}

/// Values as T and back, so that the reference sees what the kernel reads.
template <class T>
std::vector<T> as_type(const std::vector<double>& v) {
  std::vector<T> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = T(static_cast<float>(v[i]));
  return r;
}
template <class T>
double value(T v) {
  return static_cast<float>(v);
}

/// The worst over the (row, channel) sequences of a (B, T, D) channel-last tensor of
/// max_t |got - ref| / max_t |ref|.
template <class T>
double worst_error(const std::vector<T>& got, const std::vector<double>& ref, const case_of& c) {
  double worst = 0;
  for (index_t s = 0; s < c.B * c.D; ++s) {
    const index_t row = s / c.D, d = s % c.D;
    double err = 0, scale = 1e-30;
    for (index_t t = 0; t < c.T; ++t) {
      const std::size_t e = static_cast<std::size_t>((row * c.T + t) * c.D + d);
      err = std::max(err, std::fabs(value(got[e]) - ref[e]));
      scale = std::max(scale, std::fabs(ref[e]));
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

/// The worst |got - ref| / max(1, |ref|) of a per-sequence state vector.
template <class T>
double worst_state_error(const std::vector<T>& got, const std::vector<double>& ref) {
  double worst = 0;
  for (std::size_t s = 0; s < got.size(); ++s)
    worst = std::max(worst, std::fabs(value(got[s]) - ref[s]) / std::max(1.0, std::fabs(ref[s])));
  return worst;
}

template <class T>
void check_forward(const case_of& c) {
  INFO("forward " << describe(c));
  PARSCAN_TEST_RNG(r, "chained chunk tiles forward " + describe(c));
  const index_t S = c.B * c.D, n = S * c.T;
  std::vector<double> a(static_cast<std::size_t>(n)), b(a.size()), x0(static_cast<std::size_t>(S));
  for (auto& v : a) v = c.log_gates ? r.uniform(-0.7, -0.001) : r.uniform(0.5, 1.0);
  for (auto& v : b) v = r.uniform(-1.0, 1.0);
  for (auto& v : x0) v = r.uniform(-1.0, 1.0);
  const std::vector<T> ta = as_type<T>(a), tb = as_type<T>(b), tx0 = as_type<T>(x0);
  parscan_test::guarded_buffer<T> da(ta), db(tb), dx0(tx0), dx(static_cast<std::size_t>(n)),
      dxf(static_cast<std::size_t>(S));
  const auto l = parscan::sequence_layout::channel_last(c.B, c.T, c.D);
  const cd::recurrence_forward_problem<T> P{da.data(), db.data(), dx.data(), c.states ? dx0.data() : nullptr,
                                            c.states ? dxf.data() : nullptr, l, l, l, c.T, c.reverse,
                                            c.log_gates, true};
  REQUIRE(cd::chunk_loop_fits(P));
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  const auto run = [&] {
    REQUIRE(cd::launch_chained_chunk_tiles<T>(P, group_of<T>(c), dev, parscan::cuda_backend{}) ==
            parscan::status::success);
    PARSCAN_TEST_SYNC();
  };
  run();
  CHECK(dx.all_written());
  CHECK(dx.guards_intact());
  if (c.states) CHECK(dxf.all_written());
  CHECK(dxf.guards_intact());

  std::vector<double> ref(a.size()), ref_final(x0.size());
  for (index_t s = 0; s < S; ++s) {
    const index_t row = s / c.D, d = s % c.D;
    double state = c.states ? value(tx0[static_cast<std::size_t>(s)]) : 0.0;
    for (index_t i = 0; i < c.T; ++i) {
      const index_t t = c.reverse ? c.T - 1 - i : i;
      const std::size_t e = static_cast<std::size_t>((row * c.T + t) * c.D + d);
      const double g = c.log_gates ? std::exp(value(ta[e])) : value(ta[e]);
      state = g * state + value(tb[e]);
      ref[e] = state;
    }
    ref_final[static_cast<std::size_t>(s)] = state;
  }
  const std::vector<T> got = dx.download();
  const double worst = worst_error(got, ref, c);
  INFO("max|x - ref| / max|ref| over each channel: " << worst);
  CHECK(worst <= tolerance<T>());
  if (c.states) {
    const double worst_final = worst_state_error(dxf.download(), ref_final);
    INFO("x_final: " << worst_final);
    CHECK(worst_final <= tolerance<T>());
  }
  dx.repoison();
  run();
  CHECK(dx.download() == got);  // bitwise: the look-back's formula never depends on timing
}

template <class T>
void check_backward(const case_of& c) {
  INFO("backward " << describe(c));
  PARSCAN_TEST_RNG(r, "chained chunk tiles backward " + describe(c));
  const index_t S = c.B * c.D, n = S * c.T;
  std::vector<double> a(static_cast<std::size_t>(n)), x(a.size()), gx(a.size()), x0(static_cast<std::size_t>(S)),
      gfinal(x0.size());
  for (auto& v : a) v = c.log_gates ? r.uniform(-0.7, -0.001) : r.uniform(0.5, 1.0);
  for (auto& v : x) v = r.uniform(-2.0, 2.0);  // any x: the backward reads it as given
  for (auto& v : gx) v = r.uniform(-1.0, 1.0);
  for (auto& v : x0) v = r.uniform(-1.0, 1.0);
  for (auto& v : gfinal) v = r.uniform(-1.0, 1.0);
  const std::vector<T> ta = as_type<T>(a), tx = as_type<T>(x), tgx = as_type<T>(gx), tx0 = as_type<T>(x0),
                       tgf = as_type<T>(gfinal);
  parscan_test::guarded_buffer<T> da_in(ta), dx_in(tx), ddx(tgx), dx0(tx0), ddxf(tgf),
      dda(static_cast<std::size_t>(n)), ddb(static_cast<std::size_t>(n)), ddx0(static_cast<std::size_t>(S));
  const auto l = parscan::sequence_layout::channel_last(c.B, c.T, c.D);
  const cd::recurrence_backward_problem<T> P{da_in.data(), dx_in.data(), ddx.data(),
                                             c.states ? dx0.data() : nullptr, c.states ? ddxf.data() : nullptr,
                                             dda.data(), ddb.data(), c.states ? ddx0.data() : nullptr,
                                             l, l, l, l, l, c.T, c.reverse, c.log_gates, true};
  REQUIRE(cd::chunk_loop_fits(P));
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  const auto run = [&] {
    REQUIRE(cd::launch_chained_chunk_tiles<T>(P, group_of<T>(c), dev, parscan::cuda_backend{}) ==
            parscan::status::success);
    PARSCAN_TEST_SYNC();
  };
  run();
  CHECK(dda.all_written());
  CHECK(ddb.all_written());
  CHECK(dda.guards_intact());
  CHECK(ddb.guards_intact());
  if (c.states) CHECK(ddx0.all_written());
  CHECK(ddx0.guards_intact());

  // Walking the forward's steps backwards: db[t] = dx[t] + a[next]·db[next] (the carry starts at
  // dx_final), da[t] = db[t]·x[prev] (x0 or 0 before the first step; times a[t] for log gates),
  // and dx0 = a[first]·db[first].
  std::vector<double> ref_da(a.size()), ref_db(a.size()), ref_dx0(x0.size());
  for (index_t s = 0; s < S; ++s) {
    const index_t row = s / c.D, d = s % c.D;
    const auto at = [&](index_t t) { return static_cast<std::size_t>((row * c.T + t) * c.D + d); };
    double y = c.states ? value(tgf[static_cast<std::size_t>(s)]) : 0.0;
    for (index_t i = c.T - 1; i >= 0; --i) {
      const index_t t = c.reverse ? c.T - 1 - i : i, prev = c.reverse ? t + 1 : t - 1;
      const std::size_t e = at(t);
      const double g = c.log_gates ? std::exp(value(ta[e])) : value(ta[e]);
      const double grad = value(tgx[e]) + y;
      const double x_prev = i == 0 ? (c.states ? value(tx0[static_cast<std::size_t>(s)]) : 0.0) : value(tx[at(prev)]);
      ref_db[e] = grad;
      ref_da[e] = c.log_gates ? grad * x_prev * g : grad * x_prev;
      y = g * grad;
    }
    ref_dx0[static_cast<std::size_t>(s)] = y;
  }
  const std::vector<T> got_da = dda.download(), got_db = ddb.download();
  const double worst_da = worst_error(got_da, ref_da, c), worst_db = worst_error(got_db, ref_db, c);
  INFO("max|da - ref| / max|ref| over each channel: " << worst_da << ", db: " << worst_db);
  CHECK(worst_da <= tolerance<T>());
  CHECK(worst_db <= tolerance<T>());
  if (c.states) {
    const double worst_dx0 = worst_state_error(ddx0.download(), ref_dx0);
    INFO("dx0: " << worst_dx0);
    CHECK(worst_dx0 <= tolerance<T>());
  }
  dda.repoison();
  ddb.repoison();
  run();
  CHECK(dda.download() == got_da);
  CHECK(ddb.download() == got_db);
}

/// Lengths of one tile or less, of a few tiles and a partial one, and of more than a window of
/// 32 tiles (a forward tile is at most 256 steps, a backward one 160), in each width; D with a
/// partial last group in each.
template <class T>
std::vector<case_of> cases() {
  std::vector<case_of> v;
  std::vector<int> widths = {8, 4};
  if (sizeof(T) == 2) widths.insert(widths.begin(), 16);
  int i = 0;
  for (int w : widths) {
    const index_t group = static_cast<index_t>(w) * cd::chunk_channels<T>;
    for (index_t T_len : {index_t(5), index_t(700), index_t(33 * 256 + 77)})
      for (bool reverse : {false, true}) {
        ++i;
        // Two rows of a group and a half (the last group's last chunks past the channels).
        v.push_back({2, T_len, group + group / 2, w, reverse, i % 2 == 1, i % 3 == 0});
      }
  }
  return v;
}

}  // namespace

TEST_CASE(PARSCAN_TEST_NAME("chained chunk tiles: the gated forward in every row width against a float64 loop"),
          PARSCAN_TEST_TAGS("[recurrence][chained_chunks]")) {
  for (const case_of& c : cases<parscan::bfloat16>()) check_forward<parscan::bfloat16>(c);
  for (const case_of& c : cases<float>()) check_forward<float>(c);
}

TEST_CASE(PARSCAN_TEST_NAME("chained chunk tiles: the gated backward in every row width against a float64 loop"),
          PARSCAN_TEST_TAGS("[recurrence][chained_chunks]")) {
  for (const case_of& c : cases<parscan::bfloat16>()) check_backward<parscan::bfloat16>(c);
  for (const case_of& c : cases<float>()) check_backward<float>(c);
}
