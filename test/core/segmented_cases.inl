// test/core/segmented_cases.inl — the backend-neutral body of the segmented-scan tests
// (segmented_inclusive_scan, segmented_exclusive_scan, segmented_reduce). Included by
// segmented_scan_test.cpp (host backend) and segmented_scan_test.cu (CUDA backend).
//
// Every run: fresh random segment lengths (0, 1, primes, tile sizes ± 1 and random ones),
// packed with elements before the first segment's end and after the last offset that must stay
// untouched; every output poisoned first; results against a sequential reference per segment
// (exact for integers, float64 with a stated tolerance for floats and affine pairs); a second
// run must give the same bits. Bad arguments get their status and write nothing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/env.hpp"
#include "support/random.hpp"

namespace parscan_segmented_cases {

using parscan::index_t;
using parscan::status;
using parscan_test::guarded_buffer;

/// Segment lengths: the awkward ones, then random ones up to `longest`.
inline std::vector<index_t> segment_lengths(parscan_test::rng& r, index_t random_ones, index_t longest) {
  std::vector<index_t> l{0, 1, 0, 2, 3, 7, 31, 127, 128, 129, 511, 512, 513, 0, 2047, 2048, 2049, 8191, 1};
  for (index_t i = 0; i < random_ones; ++i) l.push_back(static_cast<index_t>(r.uniform(0.0, double(longest))));
  for (std::size_t i = l.size(); i > 1; --i) std::swap(l[i - 1], l[static_cast<std::size_t>(r.uniform(0.0, double(i)))]);
  return l;
}

inline std::vector<std::int64_t> offsets_of(const std::vector<index_t>& lengths) {
  std::vector<std::int64_t> o{0};
  for (index_t l : lengths) o.push_back(o.back() + l);
  return o;
}

/// Whether two arrays hold the same bytes (affine pairs have no operator==).
template <class T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0);
}

/// One kind (0 inclusive, 1 exclusive, 2 reduce) in one direction over int64 sums (exact) or
/// float affine pairs (float64 reference, relative tolerance), with and without carries.
/// The output starts `out_shift` elements into its buffer (those stay untouched): with a shift
/// that breaks the output's alignment to the input modulo 16 bytes, the CUDA backend takes its
/// general segment kernel instead of the vector path.
template <class T, class Op, class Ref>
void check_segmented(const std::string& what, int kind, bool reverse, bool carries, index_t random_ones,
                     index_t longest, const Op& op, const T& init, Ref&& draw_and_compare, index_t out_shift = 0) {
  INFO(what << ": kind=" << kind << " reverse=" << reverse << " carries=" << carries << " out_shift=" << out_shift);
  PARSCAN_TEST_RNG(r, "segmented " + what);
  const std::vector<index_t> lengths = segment_lengths(r, random_ones, longest);
  const std::vector<std::int64_t> offsets = offsets_of(lengths);
  const index_t n = static_cast<index_t>(lengths.size()), used = offsets.back(), total = used + 5;  // 5 spare
  std::vector<T> x(static_cast<std::size_t>(total)), carry_in(static_cast<std::size_t>(n));
  draw_and_compare.draw(r, x, carry_in);
  guarded_buffer<T> dx(x), dout(static_cast<std::size_t>(total + out_shift)), dcin(carry_in),
      dcout(static_cast<std::size_t>(n));
  guarded_buffer<std::int64_t> doff(offsets);
  parscan::scan_options<T> opts;
  opts.dir = reverse ? parscan::direction::reverse : parscan::direction::forward;
  if (carries) opts.carry_in = dcin.data();
  if (carries || kind != 1) opts.carry_out = dcout.data();
  const parscan::segments seg{n, doff.data(), total};
  auto run = [&] {
    const auto be = parscan_test::backend();
    T* const out = dout.data() + out_shift;
    status st = kind == 0 ? parscan::segmented_inclusive_scan(be, dx.data(), out, seg, op, opts)
                : kind == 1 ? parscan::segmented_exclusive_scan(be, dx.data(), out, seg, op, init, opts)
                            : parscan::segmented_reduce(be, dx.data(), seg, op, init, dcout.data(), opts);
    REQUIRE(st == status::success);
    PARSCAN_TEST_SYNC();
  };
  run();
  const std::vector<T> shifted = dout.download(), cout = dcout.download();
  const std::vector<T> out(shifted.begin() + out_shift, shifted.end());
  for (index_t e = 0; e < out_shift; ++e) CHECK(dout.is_poison(shifted[static_cast<std::size_t>(e)]));
  CHECK(dout.guards_intact());
  CHECK(dcout.guards_intact());
  // Reference, segment by segment in processing order.
  std::size_t wrong = 0, unwritten = 0;
  for (index_t s = 0; s < n; ++s) {
    const index_t b = offsets[static_cast<std::size_t>(s)], len = lengths[static_cast<std::size_t>(s)];
    auto acc = draw_and_compare.start(carries ? &carry_in[static_cast<std::size_t>(s)] : nullptr, kind != 0, init);
    for (index_t i = 0; i < len; ++i) {
      const std::size_t e = static_cast<std::size_t>(b + (reverse ? len - 1 - i : i));
      if (kind == 1) wrong += !draw_and_compare.matches(out[e], acc, i);
      acc = draw_and_compare.step(acc, x[e]);
      if (kind == 0) wrong += !draw_and_compare.matches(out[e], acc, i + 1);
    }
    const bool has_total = acc.has;
    if (carries || kind != 1) {
      if (has_total) wrong += !draw_and_compare.matches(cout[static_cast<std::size_t>(s)], acc, len + 1);
      else unwritten += !dcout.is_poison(cout[static_cast<std::size_t>(s)]);  // no total: left unwritten
    }
  }
  CHECK(wrong == 0);
  CHECK(unwritten == 0);
  // Written exactly where a segment lies (nothing for reduce), untouched past the last offset.
  std::size_t written_outside = 0, missing = 0;
  for (index_t e = 0; e < total; ++e) {
    const bool poisoned = dout.is_poison(out[static_cast<std::size_t>(e)]);
    if (e >= used || kind == 2) written_outside += !poisoned;
    else missing += poisoned;
  }
  CHECK(written_outside == 0);
  CHECK(missing == 0);
  dout.repoison();
  dcout.repoison();
  run();
  CHECK(same_bits(dout.download(), shifted));  // the same call gives the same bits
  CHECK(same_bits(dcout.download(), cout));
}

template <class T>
struct maybe_ref {
  T value;
  bool has;
};

/// Exact integer sums (int64; int32 with values small enough that no sum overflows).
template <class I>
struct int_sums {
  using acc = maybe_ref<long long>;
  static constexpr double range = sizeof(I) == 8 ? 1e6 : 1e3;
  void draw(parscan_test::rng& r, std::vector<I>& x, std::vector<I>& c) const {
    for (auto& v : x) v = static_cast<I>(r.uniform(-range, range));
    for (auto& v : c) v = static_cast<I>(r.uniform(-range, range));
  }
  acc start(const I* carry, bool has_init, I init) const {
    if (carry) return {*carry, true};
    return {has_init ? init : 0, has_init};
  }
  acc step(acc a, I x) const { return {a.has ? a.value + x : x, true}; }
  bool matches(I got, const acc& want, index_t) const { return want.has && got == want.value; }
};

/// Affine pairs of float: x ↦ a·x + b composed in order, against float64.
struct affine_pairs {
  using acc = maybe_ref<std::pair<double, double>>;
  void draw(parscan_test::rng& r, std::vector<parscan::affine<float>>& x, std::vector<parscan::affine<float>>& c) const {
    for (auto& v : x) v = {static_cast<float>(r.uniform(0.5, 1.0)), static_cast<float>(r.uniform(-1.0, 1.0))};
    for (auto& v : c) v = {static_cast<float>(r.uniform(0.5, 1.0)), static_cast<float>(r.uniform(-1.0, 1.0))};
  }
  acc start(const parscan::affine<float>* carry, bool has_init, const parscan::affine<float>& init) const {
    if (carry) return {{carry->a, carry->b}, true};
    return {{init.a, init.b}, has_init};
  }
  acc step(acc a, const parscan::affine<float>& x) const {
    if (!a.has) return {{x.a, x.b}, true};
    return {{a.value.first * x.a, a.value.second * x.a + x.b}, true};
  }
  // float32 pairs folded over up to ~10^4 steps: errors grow with the steps combined.
  bool matches(const parscan::affine<float>& got, const acc& want, index_t steps) const {
    const double tol = 2e-6 * std::sqrt(double(std::max<index_t>(steps, 16)));
    const double scale_b = std::max(1.0, std::fabs(want.value.second));
    return want.has && std::fabs(got.a - want.value.first) <= tol * std::max(1e-30, std::fabs(want.value.first)) + 1e-30 &&
           std::fabs(got.b - want.value.second) <= tol * scale_b * 8;
  }
};

/// 2×2 matrices of uint32 under the product mod 2^32, later · earlier: 16 bytes, exact, not
/// commutative (one element a 16-byte access).
struct mat2_u32 {
  std::uint32_t m[4];
};
struct mat2_u32_op {
  PARSCAN_HD mat2_u32 operator()(const mat2_u32& e, const mat2_u32& l) const {
    return {{l.m[0] * e.m[0] + l.m[1] * e.m[2], l.m[0] * e.m[1] + l.m[1] * e.m[3], l.m[2] * e.m[0] + l.m[3] * e.m[2],
             l.m[2] * e.m[1] + l.m[3] * e.m[3]}};
  }
};
struct mat2_products {
  using acc = maybe_ref<mat2_u32>;
  void draw(parscan_test::rng& r, std::vector<mat2_u32>& x, std::vector<mat2_u32>& c) const {
    for (auto* v : {&x, &c})
      for (auto& e : *v)
        for (auto& w : e.m) w = static_cast<std::uint32_t>(r.uniform(0.0, 4294967295.0));
  }
  acc start(const mat2_u32* carry, bool has_init, const mat2_u32& init) const {
    if (carry) return {*carry, true};
    return {init, has_init};
  }
  acc step(acc a, const mat2_u32& x) const { return {a.has ? mat2_u32_op{}(a.value, x) : x, true}; }
  bool matches(const mat2_u32& got, const acc& want, index_t) const {
    return want.has && std::memcmp(&got, &want.value, sizeof got) == 0;
  }
};

}  // namespace parscan_segmented_cases

TEST_CASE(PARSCAN_TEST_NAME("segmented scans: int64 sums, every kind, both directions, with and without carries"),
          PARSCAN_TEST_TAGS("[scan][segmented]")) {
  using namespace parscan_segmented_cases;
  for (int kind = 0; kind < 3; ++kind)
    for (bool reverse : {false, true})
      for (bool carries : {false, true})
        check_segmented<std::int64_t>("int64 sum", kind, reverse, carries, 200, 5000, parscan::sum_op<std::int64_t>{},
                                      std::int64_t{17}, int_sums<std::int64_t>{});
}

// Four steps to a 16-byte run: a segment's misaligned head has 0 to 3 of them.
TEST_CASE(PARSCAN_TEST_NAME("segmented scans: int32 sums, every kind, both directions, with and without carries"),
          PARSCAN_TEST_TAGS("[scan][segmented]")) {
  using namespace parscan_segmented_cases;
  for (int kind = 0; kind < 3; ++kind)
    for (bool reverse : {false, true})
      for (bool carries : {false, true})
        check_segmented<std::int32_t>("int32 sum", kind, reverse, carries, 200, 5000, parscan::sum_op<std::int32_t>{},
                                      std::int32_t{-23}, int_sums<std::int32_t>{});
}

TEST_CASE(PARSCAN_TEST_NAME("segmented scans: affine pairs (not commutative), every kind, both directions"),
          PARSCAN_TEST_TAGS("[scan][segmented]")) {
  using namespace parscan_segmented_cases;
  const parscan::affine<float> init{0.75f, 0.25f};
  for (int kind = 0; kind < 3; ++kind)
    for (bool reverse : {false, true})
      check_segmented<parscan::affine<float>>("affine", kind, reverse, true, 100, 9000, parscan::affine_op<float>{}, init,
                                              affine_pairs{});
}

// The CUDA backend's vector path takes one element type of 4, 8 or 16 bytes with the output
// aligned like the input; the general kernel takes the rest. Outputs 1, 2 and 4 elements into
// their buffer: unlike the input (the general kernel: int32 by 1 or 2, int64 by 1) or alike at
// another address (the vector path: int32 by 4, int64 by 2 or 4). All against the reference.
TEST_CASE(PARSCAN_TEST_NAME("segmented scans: 16-byte matrices, and outputs aligned unlike the input"),
          PARSCAN_TEST_TAGS("[scan][segmented]")) {
  using namespace parscan_segmented_cases;
  const mat2_u32 init{{3u, 1u, 4u, 1u}};
  for (int kind = 0; kind < 3; ++kind)
    for (bool reverse : {false, true})
      for (bool carries : {false, true})
        check_segmented<mat2_u32>("2x2 products", kind, reverse, carries, 100, 3000, mat2_u32_op{}, init,
                                  mat2_products{});
  for (int kind = 0; kind < 2; ++kind)
    for (bool reverse : {false, true})
      for (index_t shift : {1, 2, 4}) {
        check_segmented<std::int32_t>("int32 sum", kind, reverse, kind == 1, 100, 3000,
                                      parscan::sum_op<std::int32_t>{}, std::int32_t{5}, int_sums<std::int32_t>{},
                                      shift);
        check_segmented<std::int64_t>("int64 sum", kind, reverse, false, 50, 3000, parscan::sum_op<std::int64_t>{},
                                      std::int64_t{5}, int_sums<std::int64_t>{}, shift);
      }
}

TEST_CASE(PARSCAN_TEST_NAME("segmented scans: bad arguments get their status and write nothing"),
          PARSCAN_TEST_TAGS("[scan][segmented]")) {
  using namespace parscan_segmented_cases;
  const std::vector<std::int64_t> offsets{0, 3, 3, 8};
  guarded_buffer<std::int64_t> dx(std::vector<std::int64_t>(10, 4)), dout(10), doff(offsets), dres(3);
  const auto be = parscan_test::backend();
  const parscan::sum_op<std::int64_t> op{};
  auto inclusive = [&](parscan::segments seg, const std::int64_t* in, std::int64_t* out) {
    return parscan::segmented_inclusive_scan(be, in, out, seg, op);
  };
  CHECK(inclusive({-1, doff.data(), 10}, dx.data(), dout.data()) == status::negative_size);
  CHECK(inclusive({3, doff.data(), -1}, dx.data(), dout.data()) == status::negative_size);
  CHECK(inclusive({3, nullptr, 10}, dx.data(), dout.data()) == status::null_pointer);
  CHECK(inclusive({3, doff.data(), 10}, nullptr, dout.data()) == status::null_pointer);
  CHECK(inclusive({3, doff.data(), 10}, dx.data(), nullptr) == status::null_pointer);
  CHECK(inclusive({3, doff.data(), 10}, dx.data(), dx.data() + 1) ==
        status::overlapping_output);
  CHECK(parscan::segmented_reduce(be, dx.data(), parscan::segments{3, doff.data(), 10}, op, std::int64_t{0}, nullptr) ==
        status::null_pointer);
  // Zero segments and zero elements are valid and write nothing.
  CHECK(inclusive({0, nullptr, 0}, nullptr, nullptr) == status::success);
  CHECK(inclusive({0, doff.data(), 10}, dx.data(), dout.data()) == status::success);
#if !PARSCAN_TEST_ON_DEVICE
  // The host backend reads the offsets: a first offset not 0, a decrease, an end past total.
  for (const auto& bad : {std::vector<std::int64_t>{1, 3, 3, 8}, std::vector<std::int64_t>{0, 3, 2, 8},
                          std::vector<std::int64_t>{0, 3, 3, 11}}) {
    guarded_buffer<std::int64_t> dbad(bad);
    CHECK(inclusive({3, dbad.data(), 10}, dx.data(), dout.data()) == status::invalid_offsets);
  }
#endif
  PARSCAN_TEST_SYNC();
  const std::vector<std::int64_t> out = dout.download();
  for (const auto& v : out) CHECK(dout.is_poison(v));
  // In place (the output is the input) is allowed.
  CHECK(inclusive({3, doff.data(), 10}, dx.data(), dx.data()) == status::success);
  PARSCAN_TEST_SYNC();
  const std::vector<std::int64_t> in_place = dx.download();
  const std::vector<std::int64_t> want{4, 8, 12, 4, 8, 12, 16, 20, 4, 4};
  CHECK(in_place == want);
}
