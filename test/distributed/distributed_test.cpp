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
