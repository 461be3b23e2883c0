// test/distributed/distributed_test.cpp — the sequence-parallel decomposition (parscan/
// distributed.hpp) on the host backend: ranks are threads of an in_process_group, each holding
// one slice of every sequence, and every result is checked against one core call over the whole
// sequences. The NCCL path runs the same passes (distributed/passes.hpp) with kernels and
// ncclAllGather in place of the loops and the in-process exchange.
//
// Cases break the decomposition where it can break: odd and empty slices (the first, a middle
// and the last rank empty), one rank, reverse scans (the last rank's slice is processed first),
// carries in and out, and non-commutative operators without an identity, whose results are exact
// so that a wrong fold order cannot hide inside a tolerance.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <parscan/distributed.hpp>
#include <parscan/parscan.hpp>

#include "support/catch.hpp"
#include "support/random.hpp"

namespace {

using parscan::direction;
using parscan::index_t;
using parscan::scan_options;
using parscan::sequence_layout;
using parscan::status;
namespace dist = parscan::distributed;

// 2×2 matrices modulo a prime, op(earlier, later) = earlier · later: associative, not commutative,
// and no identity the library could know (Acc{} is the zero matrix, which absorbs everything).
struct mat2 {
  std::int64_t m[4];
  bool operator==(const mat2& o) const { return m[0] == o.m[0] && m[1] == o.m[1] && m[2] == o.m[2] && m[3] == o.m[3]; }
};
struct mat2_mod_op {
  static constexpr std::int64_t p = 1000003;
  mat2 operator()(const mat2& e, const mat2& l) const {
    return {{(e.m[0] * l.m[0] + e.m[1] * l.m[2]) % p, (e.m[0] * l.m[1] + e.m[1] * l.m[3]) % p,
             (e.m[2] * l.m[0] + e.m[3] * l.m[2]) % p, (e.m[2] * l.m[1] + e.m[3] * l.m[3]) % p}};
  }
};

// Exact affine maps modulo 2^64: the generic affine scan with no rounding.
struct affine_u64 {
  std::uint64_t a, b;
  bool operator==(const affine_u64& o) const { return a == o.a && b == o.b; }
};
struct affine_u64_op {
  affine_u64 operator()(const affine_u64& e, const affine_u64& l) const { return {l.a * e.a, l.a * e.b + l.b}; }
};

struct sum_i64_op {
  std::int64_t operator()(std::int64_t e, std::int64_t l) const { return e + l; }
};

template <class V> V draw(parscan_test::rng& g);
template <> std::int64_t draw<std::int64_t>(parscan_test::rng& g) { return static_cast<std::int64_t>(g.bits() % 2001) - 1000; }
template <> mat2 draw<mat2>(parscan_test::rng& g) {
  mat2 v;
  for (auto& e : v.m) e = static_cast<std::int64_t>(g.bits() % mat2_mod_op::p);
  return v;
}
template <> affine_u64 draw<affine_u64>(parscan_test::rng& g) { return {g.bits() | 1u, g.bits()}; }

/// Runs body(rank, communicator) on one thread per rank and returns each rank's status.
std::vector<status> on_ranks(int ranks, const std::function<status(int, dist::communicator&)>& body) {
  dist::in_process_group group(ranks);
  std::vector<status> st(static_cast<std::size_t>(ranks), status::success);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] { st[static_cast<std::size_t>(r)] = body(r, group.rank(r)); });
  for (auto& t : threads) t.join();
  return st;
}

std::vector<index_t> starts_of(const std::vector<index_t>& lengths) {
  std::vector<index_t> s(lengths.size() + 1, 0);
  for (std::size_t r = 0; r < lengths.size(); ++r) s[r + 1] = s[r] + lengths[r];
  return s;
}

/// The slice splits every case runs: odd lengths, empty slices at either end and in the middle.
std::vector<std::vector<index_t>> splits() {
  return {{37}, {5, 8}, {1, 0, 13, 2}, {0, 9, 0}, {11, 3, 0}, {0, 0, 0}, {1, 1, 1, 1, 1}, {700, 301, 1023}};
}

enum class kind { inclusive, exclusive, reduce };

/// One generic case: a batch of `seqs` sequences, (seqs, T) rows with a padded row stride, split
/// along T into the given slices; each rank scans its view of the shared buffers.
template <class V, class Op>
void check_generic(kind k, direction dir, bool with_carry_in, const std::vector<index_t>& lengths, const Op& op,
                   parscan_test::rng& g) {
  const index_t seqs = 3;
  const auto starts = starts_of(lengths);
  const index_t T = starts.back();
  const index_t row = T + 2;  // padding between rows
  const sequence_layout whole{seqs, T, row, 1, 1, 0};
  std::vector<V> in(static_cast<std::size_t>(seqs * row));
  for (auto& v : in) v = draw<V>(g);
  std::vector<V> carry_in(static_cast<std::size_t>(seqs));
  for (auto& v : carry_in) v = draw<V>(g);
  const V init = draw<V>(g);

  const parscan::host_backend be{1};
  std::vector<V> want(in.size(), V{}), want_carry(static_cast<std::size_t>(seqs), V{});
  scan_options<V> o{dir, with_carry_in ? carry_in.data() : nullptr, want_carry.data()};
  status st = status::success;
  if (k == kind::inclusive) st = parscan::inclusive_scan(be, in.data(), want.data(), whole, op, o);
  else if (k == kind::exclusive) st = parscan::exclusive_scan(be, in.data(), want.data(), whole, op, init, o);
  else st = parscan::reduce(be, in.data(), whole, op, init, want_carry.data(), o);
  REQUIRE(st == status::success);
  // An inclusive scan of nothing with no carry has no total: carry_out stays as it was.
  const bool has_total = !(k == kind::inclusive && T == 0 && !with_carry_in);

  const int ranks = static_cast<int>(lengths.size());
  std::vector<V> got(in.size(), V{});
  std::vector<std::vector<V>> got_carry(static_cast<std::size_t>(ranks), std::vector<V>(static_cast<std::size_t>(seqs), V{}));
  // Every rank passes a carry_in; only the first in processing order may read it, so the
  // others pass garbage (drawn here: the rank threads must not share the generator).
  const int first = dir == direction::forward ? 0 : ranks - 1;
  std::vector<std::vector<V>> rank_carry_in(static_cast<std::size_t>(ranks), carry_in);
  for (int r = 0; r < ranks; ++r)
    if (r != first)
      for (auto& v : rank_carry_in[static_cast<std::size_t>(r)]) v = draw<V>(g);
  const auto statuses = on_ranks(ranks, [&](int r, dist::communicator& comm) {
    const sequence_layout slice{seqs, lengths[static_cast<std::size_t>(r)], row, 1, 1, 0};
    const V* my_in = in.data() + starts[static_cast<std::size_t>(r)];
    V* my_out = got.data() + starts[static_cast<std::size_t>(r)];
    std::vector<V>& my_carry_in = rank_carry_in[static_cast<std::size_t>(r)];
    scan_options<V> ro{dir, with_carry_in ? my_carry_in.data() : nullptr, got_carry[static_cast<std::size_t>(r)].data()};
    if (k == kind::inclusive) return dist::inclusive_scan(be, comm, my_in, my_out, slice, op, ro);
    if (k == kind::exclusive) return dist::exclusive_scan(be, comm, my_in, my_out, slice, op, init, ro);
    return dist::reduce(be, comm, my_in, slice, op, init, got_carry[static_cast<std::size_t>(r)].data(), ro);
  });
  for (status s : statuses) REQUIRE(s == status::success);
  if (k != kind::reduce) {
    for (index_t s = 0; s < seqs; ++s)
      for (index_t t = 0; t < T; ++t) {
        CAPTURE(s, t);
        REQUIRE(got[static_cast<std::size_t>(s * row + t)] == want[static_cast<std::size_t>(s * row + t)]);
      }
  }
  if (has_total)
    for (int r = 0; r < ranks; ++r) {
      CAPTURE(r);
      REQUIRE(got_carry[static_cast<std::size_t>(r)] == want_carry);
    }
}

template <class V, class Op>
void generic_cases(const Op& op, const std::string& salt) {
  PARSCAN_TEST_RNG(g, salt);
  for (const auto& lengths : splits())
    for (kind k : {kind::inclusive, kind::exclusive, kind::reduce})
      for (direction dir : {direction::forward, direction::reverse})
        for (bool carry : {false, true}) {
          CAPTURE(lengths, static_cast<int>(k), dir == direction::reverse, carry);
          check_generic<V>(k, dir, carry, lengths, op, g);
        }
}

}  // namespace

TEST_CASE("distributed generic scans on host ranks equal one call (int64 sum)", "[distributed]") {
  generic_cases<std::int64_t>(sum_i64_op{}, "distributed sum");
}

TEST_CASE("distributed generic scans on host ranks equal one call (matrices mod p; no identity)", "[distributed]") {
  generic_cases<mat2>(mat2_mod_op{}, "distributed mat2");
}

TEST_CASE("distributed generic scans on host ranks equal one call (affine mod 2^64)", "[distributed]") {
  generic_cases<affine_u64>(affine_u64_op{}, "distributed affine");
}

// ---------------------------------------------------------------------------------------------
// The gated recurrence: each rank holds dense (B, D, len) tensors of its slice in the case's
// layout; forward and backward are checked against one core call over the whole length.

namespace {

using parscan::recurrence_layout;
using cfloat = parscan::complex<float>;

template <class T> double tolerance();
template <> double tolerance<double>() { return 1e-11; }
template <> double tolerance<float>() { return 2e-5; }
template <> double tolerance<cfloat>() { return 2e-5; }
// The carried state crosses each rank boundary rounded to T, as chunked calls do.
template <> double tolerance<parscan::bfloat16>() { return 2e-2; }
template <> double tolerance<parscan::float16>() { return 4e-3; }

template <class T> T make(double re, double) { return static_cast<T>(static_cast<float>(re)); }
template <> double make<double>(double re, double) { return re; }
template <> cfloat make<cfloat>(double re, double im) { return cfloat(static_cast<float>(re), static_cast<float>(im)); }

template <class T> double distance(const T& x, const T& y) { return std::fabs(double(float(x)) - double(float(y))); }
template <> double distance<double>(const double& x, const double& y) { return std::fabs(x - y); }
template <> double distance<cfloat>(const cfloat& x, const cfloat& y) { return double(cuda::std::abs(x - y)); }
template <class T> double magnitude(const T& x) { return std::fabs(double(float(x))); }
template <> double magnitude<double>(const double& x) { return std::fabs(x); }
template <> double magnitude<cfloat>(const cfloat& x) { return double(cuda::std::abs(x)); }

/// Element offset of (b, d, t) in a dense tensor of the layout with T steps.
index_t at(recurrence_layout l, index_t B, index_t D, index_t T, index_t b, index_t d, index_t t) {
  (void)B;
  return l == recurrence_layout::channel_last ? (b * T + t) * D + d : (b * D + d) * T + t;
}

/// Copies steps [t0, t0 + len) of a whole tensor into a dense slice.
template <class T>
std::vector<T> slice_of(const std::vector<T>& whole, recurrence_layout l, index_t B, index_t D, index_t steps, index_t t0,
                        index_t len) {
  std::vector<T> s(static_cast<std::size_t>(B * D * len));
  for (index_t b = 0; b < B; ++b)
    for (index_t d = 0; d < D; ++d)
      for (index_t t = 0; t < len; ++t)
        s[static_cast<std::size_t>(at(l, B, D, len, b, d, t))] = whole[static_cast<std::size_t>(at(l, B, D, steps, b, d, t0 + t))];
  return s;
}

template <class T>
void require_close(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(what, i);
    REQUIRE(distance(got[i], want[i]) <= tolerance<T>() * (1.0 + magnitude(want[i])));
  }
}

template <class T>
void recurrence_case(recurrence_layout layout, bool reverse, bool log_gate, const std::vector<index_t>& lengths,
                     parscan_test::rng& g) {
  const index_t B = 2, D = 3, S = B * D;
  const auto starts = starts_of(lengths);
  const index_t steps = starts.back();
  const int ranks = static_cast<int>(lengths.size());
  const std::size_t n = static_cast<std::size_t>(S * steps);
  std::vector<T> a(n), b(n), dx(n), x0(static_cast<std::size_t>(S)), dxf(static_cast<std::size_t>(S));
  for (auto& v : a) {
    const double gate = 0.6 + 0.39 * g.unit();
    v = make<T>(log_gate ? std::log(gate) : gate, log_gate ? 0.0 : 0.2 * g.signed_unit());
  }
  for (auto& v : b) v = make<T>(g.signed_unit(), g.signed_unit());
  for (auto& v : dx) v = make<T>(g.signed_unit(), g.signed_unit());
  for (auto& v : x0) v = make<T>(g.signed_unit(), g.signed_unit());
  for (auto& v : dxf) v = make<T>(g.signed_unit(), g.signed_unit());
  const parscan::gate_form gate = log_gate ? parscan::gate_form::log : parscan::gate_form::linear;
  const parscan::host_backend be{1};

  // One call over the whole length.
  std::vector<T> x(n), x_final(static_cast<std::size_t>(S)), da(n), db(n), dx0(static_cast<std::size_t>(S));
  parscan::gated_forward_args<T> f;
  f.shape = {B, D, steps, layout};
  f.a = a.data(), f.b = b.data(), f.x = x.data(), f.x0 = x0.data(), f.x_final = x_final.data();
  f.reverse = reverse, f.gate = gate;
  REQUIRE(parscan::gated_recurrence_forward(be, f) == status::success);
  parscan::gated_backward_args<T> bw;
  bw.shape = f.shape;
  bw.a = a.data(), bw.x = x.data(), bw.x0 = x0.data(), bw.dx = dx.data(), bw.dx_final = dxf.data();
  bw.da = da.data(), bw.db = db.data(), bw.dx0 = dx0.data(), bw.reverse = reverse, bw.gate = gate;
  REQUIRE(parscan::gated_recurrence_backward(be, bw) == status::success);

  // The same over ranks: the forward keeps each slice's entry state for the backward.
  struct rank_data {
    std::vector<T> a, b, dx, x, da, db, entry, x_final, dx0;
  };
  std::vector<rank_data> rd(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    auto& d = rd[static_cast<std::size_t>(r)];
    const index_t len = lengths[static_cast<std::size_t>(r)];
    const index_t t0 = starts[static_cast<std::size_t>(r)];
    d.a = slice_of(a, layout, B, D, steps, t0, len);
    d.b = slice_of(b, layout, B, D, steps, t0, len);
    d.dx = slice_of(dx, layout, B, D, steps, t0, len);
    d.x.assign(d.a.size(), T{}), d.da.assign(d.a.size(), T{}), d.db.assign(d.a.size(), T{});
    d.entry.assign(static_cast<std::size_t>(S), T{}), d.x_final.assign(static_cast<std::size_t>(S), T{});
    d.dx0.assign(static_cast<std::size_t>(S), T{});
  }
  const int first = reverse ? ranks - 1 : 0, last = reverse ? 0 : ranks - 1;
  const auto fwd = on_ranks(ranks, [&](int r, dist::communicator& comm) {
    auto& d = rd[static_cast<std::size_t>(r)];
    parscan::gated_forward_args<T> a_r = f;
    a_r.shape.length = lengths[static_cast<std::size_t>(r)];
    a_r.a = d.a.data(), a_r.b = d.b.data(), a_r.x = d.x.data();
    a_r.x0 = r == first ? x0.data() : nullptr;
    a_r.x_final = d.x_final.data();  // every rank asks for the whole sequence's final state
    return dist::gated_recurrence_forward(be, comm, a_r, d.entry.data());
  });
  for (status s : fwd) REQUIRE(s == status::success);
  const auto bwd = on_ranks(ranks, [&](int r, dist::communicator& comm) {
    auto& d = rd[static_cast<std::size_t>(r)];
    parscan::gated_backward_args<T> b_r = bw;
    b_r.shape.length = lengths[static_cast<std::size_t>(r)];
    b_r.a = d.a.data(), b_r.dx = d.dx.data(), b_r.da = d.da.data(), b_r.db = d.db.data();
    // Half the cases recompute x from b (x = null), as one call may.
    const bool recompute = (lengths.size() % 2) == 1;
    b_r.x = recompute ? nullptr : d.x.data();
    b_r.b = d.b.data();
    b_r.x0 = r == first ? x0.data() : d.entry.data();
    b_r.dx_final = r == last ? dxf.data() : nullptr;
    b_r.dx0 = r == first ? d.dx0.data() : nullptr;
    return dist::gated_recurrence_backward(be, comm, b_r);
  });
  for (status s : bwd) REQUIRE(s == status::success);

  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    const auto& d = rd[static_cast<std::size_t>(r)];
    const index_t len = lengths[static_cast<std::size_t>(r)];
    const index_t t0 = starts[static_cast<std::size_t>(r)];
    require_close(d.x, slice_of(x, layout, B, D, steps, t0, len), "x");
    require_close(d.x_final, x_final, "x_final");
    require_close(d.da, slice_of(da, layout, B, D, steps, t0, len), "da");
    require_close(d.db, slice_of(db, layout, B, D, steps, t0, len), "db");
  }
  require_close(rd[static_cast<std::size_t>(first)].dx0, dx0, "dx0");
}

template <class T>
void recurrence_cases(const std::string& salt) {
  PARSCAN_TEST_RNG(g, salt);
  for (const auto& lengths : splits())
    for (recurrence_layout layout : {recurrence_layout::time_contiguous, recurrence_layout::channel_last})
      for (bool reverse : {false, true})
        for (bool log_gate : {false, true}) {
          CAPTURE(lengths, layout == recurrence_layout::channel_last, reverse, log_gate);
          recurrence_case<T>(layout, reverse, log_gate, lengths, g);
        }
}

}  // namespace

TEST_CASE("distributed gated recurrence on host ranks equals one call (double)", "[distributed]") {
  recurrence_cases<double>("distributed recurrence double");
}
TEST_CASE("distributed gated recurrence on host ranks equals one call (float)", "[distributed]") {
  recurrence_cases<float>("distributed recurrence float");
}
TEST_CASE("distributed gated recurrence on host ranks equals one call (complex float)", "[distributed]") {
  recurrence_cases<cfloat>("distributed recurrence complex");
}
TEST_CASE("distributed gated recurrence on host ranks equals one call (bfloat16)", "[distributed]") {
  recurrence_cases<parscan::bfloat16>("distributed recurrence bf16");
}
TEST_CASE("distributed gated recurrence on host ranks equals one call (float16)", "[distributed]") {
  recurrence_cases<parscan::float16>("distributed recurrence f16");
}

TEST_CASE("distributed calls refuse bad arguments with a status", "[distributed]") {
  // One rank: no exchange partner can be left waiting.
  const auto st = on_ranks(1, [&](int, dist::communicator& comm) {
    const parscan::host_backend be{1};
    parscan::gated_forward_args<float> f;
    f.shape = {1, 2, -1, recurrence_layout::time_contiguous};
    if (dist::gated_recurrence_forward(be, comm, f) != status::negative_size) return status::unsupported;
    std::int64_t out = 0;
    return dist::inclusive_scan(be, comm, static_cast<const std::int64_t*>(nullptr), &out, sequence_layout::contiguous(1),
                                sum_i64_op{});
  });
  REQUIRE(st[0] == status::null_pointer);
  REQUIRE(std::string(parscan::to_string(status::communication_error)) == "communication between ranks failed");
}
