// test/core/chained_tiles_test.cu — the chained-tile kernels (CUDA only) with tiles small enough
// that a sequence spans several hyper-windows of the persistent grid's look-back (tile_state.cuh:
// 32768 tiles) or more than 32 windows of 32 tiles of the window chain (agent/window_chain.cuh:
// several rounds of polls and of window totals), which the library's own tile shapes reach only
// beyond 2^27 and 2^22 steps. It scans a few long gated
// recurrences with x0, forward and reverse, with and without head pads; the result must match a
// float64 loop, write every element and no guard, and be bitwise identical when run again. The
// two-pass reduce gets spans of several tiles, a partial last span and a partial last tile.
// The grid bulk tiles (every tile staged at once, one grid barrier) and 12-byte elements on the
// kernels that stage whole tiles get exact, non-commutative maps with carries in place.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <ostream>
#include <string>
#include <vector>

#include <parscan/cuda/device/dispatch_scan.cuh>
#include <parscan/cuda/generic/generic_problem.cuh>
#include <parscan/ops/basic.hpp>
#include <parscan/cuda/recurrence/recurrence_head_pads.cuh>
#include <parscan/cuda/recurrence/recurrence_problems.cuh>

#include "support/env.hpp"
#include "support/random.hpp"

namespace {

using parscan::index_t;
namespace cd = parscan::cuda_detail;

// Tiles of 128 steps: one 4-step run per lane of one warp (blocks of 1 warp for block tiles,
// of 4 warps for warp tiles).
template <bool WarpTiles, int Stages>
using tiny_shape =
    cd::tile_shape_of<cd::recurrence_forward_problem<float>, 4, 4, WarpTiles ? 4 : 1, 8, 2, Stages, 32, WarpTiles>;

// Window-chain tiles of Warps · 128 steps: one 4-step run per lane.
template <int Warps, class Problem = cd::recurrence_forward_problem<float>>
using tiny_window_shape = cd::tile_shape_of<Problem, 4, 4, Warps, 8, 2, 0, 32, false, true, false>;

// The persistent staged window chain (scan_window_chain_staged_kernel): Warps · 128-step tiles,
// Stages tiles in flight per block.
template <int Warps, int Stages, class Problem = cd::recurrence_forward_problem<float>>
using tiny_staged_window_shape = cd::tile_shape_of<Problem, 4, 4, Warps, 8, 2, Stages, 32, false, true, false>;


template <class Shape>
void check_chained(const std::string& what, index_t sequences, index_t length, bool reverse, bool head_pads = false) {
  INFO(what << ": " << sequences << " sequences of " << length << " steps, reverse=" << reverse
            << ", head pads=" << head_pads);
  PARSCAN_TEST_RNG(r, "chained tiles " + what + (reverse ? " reverse" : ""));
  const index_t tiles = (length + Shape::chained_tile - 1) / Shape::chained_tile;
  REQUIRE(tiles > (Shape::window_chain ? 3 * cd::chain_window * cd::chain_window : 2 * cd::lookback_hyper));
  const std::size_t n = static_cast<std::size_t>(sequences * length);
  std::vector<float> a(n), b(n), x0(static_cast<std::size_t>(sequences));
  for (auto& v : a) v = static_cast<float>(r.uniform(0.5, 1.0));
  for (auto& v : b) v = static_cast<float>(r.uniform(-1.0, 1.0));
  for (auto& v : x0) v = static_cast<float>(r.uniform(-1.0, 1.0));
  parscan_test::guarded_buffer<float> da(a), db(b), dx0(x0), dx(n), dxf(static_cast<std::size_t>(sequences));

  const auto l = parscan::sequence_layout::time_contiguous(sequences, length);
  cd::recurrence_forward_problem<float> P{da.data(), db.data(), dx.data(), dx0.data(), dxf.data(), l, l, l,
                                         length, reverse, false, false};
  // With head pads (the length is odd: sequences 1 and 2 start off 16-byte boundaries), the
  // virtual steps must leave the look-back's aggregates as they are.
  if (head_pads) REQUIRE(cd::head_pads_help(P));
  auto run = [&] {
    const parscan::affine_op<float> op{};
    const parscan::cuda_backend be{};
    REQUIRE((head_pads ? cd::dispatch_scan<Shape>(cd::head_padded<decltype(P)>(P), op, sequences, be)
                       : cd::dispatch_scan<Shape>(P, op, sequences, be)) == parscan::status::success);
    PARSCAN_TEST_SYNC();
  };
  run();
  CHECK(dx.all_written());
  CHECK(dx.guards_intact());
  CHECK(dxf.all_written());
  const std::vector<float> got = dx.download(), got_final = dxf.download();

  double worst = 0, worst_final = 0;
  for (index_t s = 0; s < sequences; ++s) {
    double state = x0[static_cast<std::size_t>(s)], err = 0, scale = 0;
    for (index_t i = 0; i < length; ++i) {
      const std::size_t e = static_cast<std::size_t>(s * length + (reverse ? length - 1 - i : i));
      state = double(a[e]) * state + double(b[e]);
      err = std::max(err, std::fabs(double(got[e]) - state));
      scale = std::max(scale, std::fabs(state));
    }
    worst = std::max(worst, err / scale);
    worst_final = std::max(worst_final, std::fabs(double(got_final[static_cast<std::size_t>(s)]) - state) / scale);
  }
  INFO("max|x - ref| / max|ref| = " << worst << ", x_final: " << worst_final);
  CHECK(worst <= 1e-5);
  CHECK(worst_final <= 1e-5);

  dx.repoison();
  run();
  CHECK(dx.download() == got);  // bitwise: the look-back's association never depends on timing
}

}  // namespace

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: sequences spanning several look-back hyper-windows"),
          PARSCAN_TEST_TAGS("[scan][chained][large]")) {
  // 2·32768 tiles of 128 steps, plus a partial tile.
  const index_t length = 2 * cd::lookback_hyper * 128 + 3 * 128 + 77;
  for (bool reverse : {false, true}) {
    check_chained<tiny_shape<false, 2>>("block tiles, staged 2 deep", 3, length, reverse);
    check_chained<tiny_shape<false, 3>>("block tiles, staged 3 deep", 2, length, reverse);
    check_chained<tiny_shape<false, 0>>("block tiles, register prefetch", 2, length, reverse);
    check_chained<tiny_shape<true, 2>>("warp tiles, staged 2 deep", 3, length, reverse);
    check_chained<tiny_shape<true, 3>>("warp tiles, staged 3 deep", 2, length, reverse);
    check_chained<tiny_shape<false, 2>>("block tiles, staged 2 deep", 3, length, reverse, true);
    check_chained<tiny_shape<true, 2>>("warp tiles, staged 2 deep", 3, length, reverse, true);
    check_chained<tiny_shape<false, 0>>("block tiles, register prefetch", 3, length, reverse, true);
  }
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: sequences spanning more than 32 windows of the look-back"),
          PARSCAN_TEST_TAGS("[scan][chained][large]")) {
  // 3·1024 tiles of 128 steps, plus a partial tile.
  const index_t length = 3 * cd::chain_window * cd::chain_window * 128 + 3 * 128 + 77;
  for (bool reverse : {false, true}) {
    check_chained<tiny_window_shape<1>>("one-warp window-chain tiles", 3, length, reverse);
    check_chained<tiny_window_shape<2>>("two-warp window-chain tiles", 2, 2 * length, reverse);  // 256-step tiles
    check_chained<tiny_window_shape<1>>("one-warp window-chain tiles", 3, length, reverse, true);
  }
  // Two-warp tiles of 256 steps for the staged window chain.
  const index_t staged_length = 3 * cd::chain_window * cd::chain_window * 256 + 3 * 256 + 77;
  for (bool reverse : {false, true}) {
    check_chained<tiny_staged_window_shape<2, 2>>("staged window chain 2 deep", 3, staged_length, reverse);
    check_chained<tiny_staged_window_shape<2, 3>>("staged window chain 3 deep", 2, staged_length, reverse);
    check_chained<tiny_staged_window_shape<2, 4>>("staged window chain 4 deep", 1, staged_length, reverse, true);
  }
}

/// Checks the reduces of time-contiguous int64 sequences in dtotal against a host loop over x
/// with carries in `carry` (every total written, exact); then poisons dtotal again.
static void check_int64_totals(const std::vector<long long>& x, const std::vector<long long>& carry, index_t sequences,
                               index_t length, parscan_test::guarded_buffer<long long>& dtotal) {
  CHECK(dtotal.all_written());
  CHECK(dtotal.guards_intact());
  const std::vector<long long> got = dtotal.download();
  for (index_t s = 0; s < sequences; ++s) {
    long long want = carry[static_cast<std::size_t>(s)];
    for (index_t t = 0; t < length; ++t) want += x[static_cast<std::size_t>(s * length + t)];
    CHECK(got[static_cast<std::size_t>(s)] == want);
  }
  dtotal.repoison();
}

/// Checks the int32 sums scanned into dout (time-contiguous sequences) and their carries out in
/// dtotal against a host loop over x with carries in `carry`: every element and carry written,
/// exact, guards intact; then poisons both again for the next variant.
static void check_int32_sums(const std::vector<int>& x, const std::vector<int>& carry, index_t sequences, index_t length,
                             bool reverse, bool exclusive, parscan_test::guarded_buffer<int>& dout,
                             parscan_test::guarded_buffer<int>& dtotal) {
  CHECK(dout.all_written());
  CHECK(dout.guards_intact());
  CHECK(dtotal.all_written());
  const std::vector<int> got = dout.download(), total = dtotal.download();
  std::size_t wrong = 0;
  for (index_t s = 0; s < sequences; ++s) {
    long long run_sum = carry[static_cast<std::size_t>(s)];
    for (index_t i = 0; i < length; ++i) {
      const std::size_t e = static_cast<std::size_t>(s * length + (reverse ? length - 1 - i : i));
      if (exclusive) wrong += got[e] != run_sum;
      run_sum += x[e];
      if (!exclusive) wrong += got[e] != run_sum;
    }
    CHECK(total[static_cast<std::size_t>(s)] == run_sum);
  }
  CHECK(wrong == 0);
  dout.repoison();
  dtotal.repoison();
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: generic int32 scans through the staged window chain"),
          PARSCAN_TEST_TAGS("[scan][chained][large]")) {
  // Exact integer sums over three sequences of 3200 tiles of 256 steps, a partial last tile and
  // one sequence starting off a 16-byte boundary (its runs are read directly, not staged).
  PARSCAN_TEST_RNG(r, "staged window chain int32");
  const index_t sequences = 3, length = 3200 * 256 + 129;
  const std::size_t n = static_cast<std::size_t>(sequences * length);
  std::vector<int> x(n), carry{5, -7, 11};
  for (auto& v : x) v = static_cast<int>(r.uniform(-1000.0, 1000.0));
  parscan_test::guarded_buffer<int> dx(x), dout(n), dcarry(carry), dtotal(static_cast<std::size_t>(sequences));
  const auto l = parscan::sequence_layout::time_contiguous(sequences, length);
  using problem = cd::generic_problem<int, int, int>;
  for (int variant = 0; variant < 8; ++variant) {  // bits: exclusive, reverse, reducing ahead (3 stages)
    {
      const bool reduce_ahead = (variant & 4) != 0, reverse = (variant & 2) != 0;
      const auto kind = variant & 1 ? parscan::scan_kind::exclusive : parscan::scan_kind::inclusive;
      const bool exclusive = kind == parscan::scan_kind::exclusive;
      INFO("exclusive=" << exclusive << " reverse=" << reverse << " reducing ahead=" << reduce_ahead);
      parscan::scan_options<int> opts;
      opts.dir = reverse ? parscan::direction::reverse : parscan::direction::forward;
      opts.carry_in = dcarry.data();
      opts.carry_out = dtotal.data();
      const problem P = problem::from({kind, dx.data(), l, dout.data(), l, opts, 0, exclusive});
      auto run = [&] {
        const auto st = reduce_ahead ? cd::dispatch_scan<tiny_staged_window_shape<2, 3, problem>>(
                                           P, parscan::sum_op<int>{}, sequences, parscan::cuda_backend{})
                                     : cd::dispatch_scan<tiny_staged_window_shape<2, 2, problem>>(
                                           P, parscan::sum_op<int>{}, sequences, parscan::cuda_backend{});
        REQUIRE(st == parscan::status::success);
        PARSCAN_TEST_SYNC();
      };
      run();
      check_int32_sums(x, carry, sequences, length, reverse, exclusive, dout, dtotal);
    }
  }
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: generic int32 scans as bulk tiles over more than 32 windows"),
          PARSCAN_TEST_TAGS("[scan][chained][bulk][large]")) {
  // The library's own shape for two contiguous int32 sequences of 33 windows of 32 tiles and a
  // partial tile (agent/bulk_tiles.cuh, look-backs past the first 32 windows), each starting on
  // a 16-byte boundary; exact sums against a host loop.
  PARSCAN_TEST_RNG(r, "bulk tiles int32");
  using problem = cd::generic_problem<int, int, int>;
  const index_t sequences = 2, length = 33 * 32 * cd::bulk_shape<problem>::tile + 76;
  const std::size_t n = static_cast<std::size_t>(sequences * length);
  std::vector<int> x(n), carry{5, -7};
  for (auto& v : x) v = static_cast<int>(r.uniform(-1000.0, 1000.0));
  parscan_test::guarded_buffer<int> dx(x), dout(n), dcarry(carry), dtotal(static_cast<std::size_t>(sequences));
  const auto l = parscan::sequence_layout::time_contiguous(sequences, length);
  static_assert(cd::tile_shape<problem>::bulk_tiles, "int32 scans take bulk tiles");
  for (int variant = 0; variant < 4; ++variant) {  // bits: exclusive, reverse
    const bool reverse = (variant & 2) != 0, exclusive = (variant & 1) != 0;
    INFO("exclusive=" << exclusive << " reverse=" << reverse);
    parscan::scan_options<int> opts;
    opts.dir = reverse ? parscan::direction::reverse : parscan::direction::forward;
    opts.carry_in = dcarry.data();
    opts.carry_out = dtotal.data();
    const auto kind = exclusive ? parscan::scan_kind::exclusive : parscan::scan_kind::inclusive;
    const problem P = problem::from({kind, dx.data(), l, dout.data(), l, opts, 0, exclusive});
    REQUIRE(P.stages_bulk());
    REQUIRE(cd::dispatch_scan(P, parscan::sum_op<int>{}, sequences, parscan::cuda_backend{}) == parscan::status::success);
    PARSCAN_TEST_SYNC();
    check_int32_sums(x, carry, sequences, length, reverse, exclusive, dout, dtotal);
  }
}

/// Exact reduces of `sequences` time-contiguous int64 sequences of `length` steps with carries,
/// both directions, with tile shape Shape (the library's when void): through the bulk reduce,
/// launched directly, when `bulk` (which the test then requires), else the chained kernels' two
/// passes.
template <class Shape>
static void check_int64_reduces(const char* stream, index_t sequences, index_t length, bool bulk) {
  PARSCAN_TEST_RNG(r, stream);
  const std::size_t n = static_cast<std::size_t>(sequences * length);
  std::vector<long long> x(n), carry(static_cast<std::size_t>(sequences));
  for (auto& v : x) v = static_cast<long long>(r.uniform(-1e6, 1e6));
  for (auto& v : carry) v = static_cast<long long>(r.uniform(-1e6, 1e6));
  parscan_test::guarded_buffer<long long> dx(x), dcarry(carry), dtotal(static_cast<std::size_t>(sequences));
  const auto l = parscan::sequence_layout::time_contiguous(sequences, length);
  using problem = cd::generic_problem<long long, long long, long long>;
  for (bool reverse : {false, true}) {
    INFO("reverse=" << reverse);
    parscan::scan_options<long long> opts;
    opts.dir = reverse ? parscan::direction::reverse : parscan::direction::forward;
    opts.carry_in = dcarry.data();
    opts.carry_out = dtotal.data();
    const problem P = problem::from({parscan::scan_kind::reduce, dx.data(), l, nullptr, l, opts, 0, true});
    REQUIRE(P.reduce_only());
    if (bulk) {
      // (The library's dispatch takes an int64 sum to the tile-blocks reduce.)
      REQUIRE(P.stages_bulk_input());
      const cd::device_facts dev = cd::current_device();
      REQUIRE(cd::launch_bulk_reduce(P, parscan::sum_op<long long>{}, sequences, dev, parscan::cuda_backend{}) ==
              parscan::status::success);
    } else {
      REQUIRE(cd::dispatch_scan<Shape>(P, parscan::sum_op<long long>{}, sequences, parscan::cuda_backend{}) ==
              parscan::status::success);
    }
    PARSCAN_TEST_SYNC();
    check_int64_totals(x, carry, sequences, length, dtotal);
  }
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: two-pass reduce over spans of several tiles"),
          PARSCAN_TEST_TAGS("[scan][chained][reduce]")) {
  const index_t sequences = 3, length = 8192 * 128 + 77;
  check_int64_reduces<tiny_window_shape<1, cd::generic_problem<long long, long long, long long>>>("two-pass reduce",
                                                                                                 sequences, length, false);
}

// Affine maps x ↦ a·x + b modulo 2^32: exact and not commutative, so a fold in the wrong order
// (lanes, warps, tiles or spans) changes the result. 8 bytes: two to a 16-byte access.
struct affine_u32 {
  unsigned a, b;
};
struct affine_u32_op {  // op(earlier, later) = later ∘ earlier
  PARSCAN_HD affine_u32 operator()(const affine_u32& e, const affine_u32& l) const {
    return {l.a * e.a, l.a * e.b + l.b};
  }
};

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: bulk reduce folds lane runs, warps, tiles and spans in order"),
          PARSCAN_TEST_TAGS("[scan][chained][bulk][reduce]")) {
  // The bulk reduce (agent/bulk_reduce_spans.cuh) with the library's shape, launched directly so
  // that inputs of a few tiles take it, over three sequences with carries, both directions, with
  // the library's spans and spans of one and three tiles, finished in the same launch or a
  // second. The last tile ends inside a lane's run (some warps full, some lanes full, one lane
  // partial), at a tile boundary, or after 6 steps.
  using problem = cd::generic_problem<affine_u32, affine_u32, affine_u32>;
  using shape = cd::bulk_reduce_shape<problem>;
  constexpr index_t lane_run = shape::chunks * cd::bulk_run<affine_u32>, warp_run = 32 * lane_run;
  static_assert(lane_run % 2 == 0, "lengths below stay even, so every sequence starts 16-byte aligned");
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  REQUIRE(cd::built_for_bulk_copies<cd::bulk_reduce_kernel<problem, affine_u32_op>>(dev.device));
  const index_t sequences = 3;
  for (index_t length : {5 * shape::tile + 3 * warp_run + 5 * lane_run + 4, 2 * shape::tile,
                         9 * shape::tile + warp_run - 2, index_t(6)}) {
    PARSCAN_TEST_RNG(r, "bulk reduce affine u32 " + std::to_string(length));
    const std::size_t n = static_cast<std::size_t>(sequences * length);
    std::vector<affine_u32> x(n), carry(static_cast<std::size_t>(sequences));
    const auto word = [&] { return static_cast<unsigned>(r.uniform(0.0, 4294967295.0)); };
    for (auto& v : x) v = {word() | 1u, word()};  // odd a: the product never collapses to 0
    for (auto& v : carry) v = {word() | 1u, word()};
    parscan_test::guarded_buffer<affine_u32> dx(x), dcarry(carry), dtotal(static_cast<std::size_t>(sequences));
    const auto l = parscan::sequence_layout::time_contiguous(sequences, length);
    for (bool reverse : {false, true}) {
      for (int variant = 0; variant < 6; ++variant) {  // the library's spans, 1 or 3 tiles; one launch or two
        const index_t per_span = variant / 2 == 0 ? 0 : variant / 2 == 1 ? 1 : 3;
        const auto finish = variant % 2 ? cd::bulk_reduce_finish::second_launch : cd::bulk_reduce_finish::same_launch;
        INFO("length=" << length << " reverse=" << reverse << " tiles per span=" << per_span
                       << " second launch=" << (variant % 2));
        parscan::scan_options<affine_u32> opts;
        opts.dir = reverse ? parscan::direction::reverse : parscan::direction::forward;
        opts.carry_in = dcarry.data();
        opts.carry_out = dtotal.data();
        const problem P =
            problem::from({parscan::scan_kind::reduce, dx.data(), l, nullptr, l, opts, affine_u32{}, true});
        REQUIRE(P.stages_bulk_input());
        REQUIRE(cd::launch_bulk_reduce<problem, affine_u32_op, shape>(P, affine_u32_op{}, sequences, dev,
                                                                      parscan::cuda_backend{}, per_span, finish) ==
                parscan::status::success);
        PARSCAN_TEST_SYNC();
        CHECK(dtotal.all_written());
        CHECK(dtotal.guards_intact());
        const std::vector<affine_u32> got = dtotal.download();
        for (index_t s = 0; s < sequences; ++s) {
          affine_u32 want = carry[static_cast<std::size_t>(s)];
          for (index_t t = 0; t < length; ++t)
            want = affine_u32_op{}(want, x[static_cast<std::size_t>(s * length + (reverse ? length - 1 - t : t))]);
          INFO("sequence " << s);
          CHECK(got[static_cast<std::size_t>(s)].a == want.a);
          CHECK(got[static_cast<std::size_t>(s)].b == want.b);
        }
        dtotal.repoison();
      }
    }
  }
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: two-pass reduce on bulk tiles over spans of several tiles"),
          PARSCAN_TEST_TAGS("[scan][chained][bulk][large]")) {
  // The library's own shape (agent/bulk_reduce_spans.cuh) for two contiguous int64 sequences of
  // 4097 bulk tiles and a partial one, each 16-byte aligned: spans of two tiles (at most 4096
  // spans a sequence), the last span of one partial tile, blocks walking several spans each.
  using problem = cd::generic_problem<long long, long long, long long>;
  static_assert(cd::tile_shape<problem>::bulk_reduce, "int64 reduces take bulk tiles");
  check_int64_reduces<void>("bulk reduce int64", 2, 4097 * cd::bulk_shape<problem>::tile + 76, true);
}

/// After a reduce launched into `totals`: every total written, no guard touched, each equal to
/// `want`'s (exactly); then `totals` poisoned again for the next launch.
template <class T>
static void check_reduce_totals(parscan_test::guarded_buffer<T>& totals, const std::vector<T>& want) {
  PARSCAN_TEST_SYNC();
  CHECK(totals.all_written());
  CHECK(totals.guards_intact());
  const std::vector<T> got = totals.download();
  for (std::size_t s = 0; s < want.size(); ++s) {
    INFO("sequence " << s);
    CHECK(got[s] == want[s]);
  }
  totals.repoison();
}

/// Exact sums of three sequences of `length` steps of T, `stride` apart (the gaps between them
/// hold a value that no sum may take in), with carries, both directions, through the tile-blocks
/// reduce (agent/tile_blocks_reduce.cuh) launched directly: the library's spans and spans of one
/// and of four tiles, the partials' fold launched early or not; then through the library's
/// dispatch (grid tiles, at these sizes), which must give the same sums.
template <class T>
static void check_tile_block_sums(index_t length, index_t stride) {
  using problem = cd::generic_problem<T, T, T>;
  using op_t = parscan::sum_op<T>;
  static_assert(cd::takes_tile_blocks<problem, op_t>, "sums take the tile-blocks reduce");
  const index_t sequences = 3;
  PARSCAN_TEST_RNG(r, "tile-blocks reduce " + std::to_string(sizeof(T)) + " " + std::to_string(length));
  const auto at = [](index_t i) { return static_cast<std::size_t>(i); };
  std::vector<T> x(at(sequences * stride), T(1000000)), carry(at(sequences));
  for (index_t s = 0; s < sequences; ++s)
    for (index_t t = 0; t < length; ++t) x[at(s * stride + t)] = static_cast<T>(r.uniform(-1000, 1000));
  for (auto& v : carry) v = static_cast<T>(r.uniform(-1e6, 1e6));
  std::vector<T> want(carry);
  for (index_t s = 0; s < sequences; ++s)
    for (index_t t = 0; t < length; ++t) want[at(s)] += x[at(s * stride + t)];
  parscan_test::guarded_buffer<T> dx(x), dcarry(carry), dtotal(at(sequences));
  parscan::sequence_layout l = parscan::sequence_layout::time_contiguous(sequences, length);
  l.sequence_stride = stride;
  for (bool reverse : {false, true}) {
    for (int variant = 0; variant < 7; ++variant) {  // spans of the library's, 1 or 4 tiles, early or not; dispatch
      const index_t per_span = variant / 2 == 0 ? 0 : variant / 2 == 1 ? 1 : 4;
      const bool early = variant % 2 == 1;
      INFO("length=" << length << " reverse=" << reverse << " tiles per span=" << per_span << " early=" << early
                     << " through dispatch=" << (variant == 6));
      parscan::scan_options<T> opts;
      opts.dir = reverse ? parscan::direction::reverse : parscan::direction::forward;
      opts.carry_in = dcarry.data();
      opts.carry_out = dtotal.data();
      const problem P = problem::from({parscan::scan_kind::reduce, dx.data(), l, nullptr, l, opts, T(0), true});
      REQUIRE(P.stages_bulk_input());
      const parscan::status st =
          variant == 6 ? cd::dispatch_scan(P, op_t{}, sequences, parscan::cuda_backend{})
                       : cd::launch_tile_blocks_reduce(P, op_t{}, sequences, cd::current_device(),
                                                       parscan::cuda_backend{}, early, per_span);
      REQUIRE(st == parscan::status::success);
      check_reduce_totals(dtotal, want);
    }
  }
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: tile-blocks reduce over spans of whole and partial tiles"),
          PARSCAN_TEST_TAGS("[scan][chained][reduce]")) {
  // Tiles of 256 threads × 16 16-byte accesses: 16384 int32 or 8192 int64 steps. Lengths: six
  // whole tiles and a partial one (spans of four: a whole span and a partial one), two whole
  // tiles, and six steps (one partial tile); strides a whole number of 16-byte accesses.
  constexpr index_t t4 = cd::tile_blocks_plan<cd::generic_problem<int, int, int>>::tile;
  constexpr index_t t8 = cd::tile_blocks_plan<cd::generic_problem<long long, long long, long long>>::tile;
  check_tile_block_sums<int>(6 * t4 + 777, 6 * t4 + 780);
  check_tile_block_sums<int>(2 * t4, 2 * t4 + 4);
  check_tile_block_sums<int>(6, 8);
  check_tile_block_sums<long long>(6 * t8 + 4095, 6 * t8 + 4096);
  check_tile_block_sums<long long>(2 * t8, 2 * t8);
}

// 2×2 matrices [[a, b], [c, d]] modulo 2^32: exact, not commutative, 16 bytes (16 to a lane's
// run in the tile-blocks reduce's in-order kernel, where 8-byte affine maps make 32).
struct mat2_u32 {
  unsigned a, b, c, d;
};
struct mat2_u32_op {  // op(earlier, later) = later · earlier
  PARSCAN_HD mat2_u32 operator()(const mat2_u32& e, const mat2_u32& l) const {
    return {l.a * e.a + l.b * e.c, l.a * e.b + l.b * e.d, l.c * e.a + l.d * e.c, l.c * e.b + l.d * e.d};
  }
};
bool operator==(const mat2_u32& x, const mat2_u32& y) { return x.a == y.a && x.b == y.b && x.c == y.c && x.d == y.d; }
bool operator==(const affine_u32& x, const affine_u32& y) { return x.a == y.a && x.b == y.b; }
std::ostream& operator<<(std::ostream& o, const mat2_u32& x) {
  return o << x.a << ' ' << x.b << ' ' << x.c << ' ' << x.d;
}
std::ostream& operator<<(std::ostream& o, const affine_u32& x) { return o << x.a << ' ' << x.b; }

/// Reduces of three sequences of `length` steps of T under Op (exact, not commutative), `stride`
/// apart (the gaps hold a value that would change any total that read it), with carries, both
/// directions, through the tile-blocks reduce's in-order kernel launched directly: the library's
/// spans and spans of one and of three tiles, the partials' fold launched early or not, lanes
/// folding their runs in one, two or four chains; then through the library's dispatch. Each total
/// must equal the sequential fold in processing order.
template <class T, class Op, class Draw>
static void check_tile_blocks_in_order(index_t length, index_t stride, Draw&& draw) {
  using problem = cd::generic_problem<T, T, T>;
  static_assert(cd::takes_tile_blocks<problem, Op> && !cd::swaps_operands<Op, T>, "the in-order kernel");
  const index_t sequences = 3;
  const auto at = [](index_t i) { return static_cast<std::size_t>(i); };
  std::vector<T> x(at(sequences * stride), draw()), carry(at(sequences));
  for (index_t s = 0; s < sequences; ++s)
    for (index_t t = 0; t < length; ++t) x[at(s * stride + t)] = draw();
  for (auto& v : carry) v = draw();
  parscan_test::guarded_buffer<T> dx(x), dcarry(carry), dtotal(at(sequences));
  parscan::sequence_layout l = parscan::sequence_layout::time_contiguous(sequences, length);
  l.sequence_stride = stride;
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  for (bool reverse : {false, true}) {
    std::vector<T> want(carry);
    for (index_t s = 0; s < sequences; ++s)
      for (index_t t = 0; t < length; ++t)
        want[at(s)] = Op{}(want[at(s)], x[at(s * stride + (reverse ? length - 1 - t : t))]);
    for (int variant = 0; variant < 9; ++variant) {
      // spans of the library's, 1 or 3 tiles, fold early or not; chains of 1 and 4; dispatch
      const index_t per_span = variant / 2 == 0 ? 0 : variant / 2 == 1 ? 1 : 3;
      const bool early = variant % 2 == 1;
      INFO("length=" << length << " reverse=" << reverse << " variant=" << variant << " tiles per span=" << per_span
                     << " early=" << early);
      parscan::scan_options<T> opts;
      opts.dir = reverse ? parscan::direction::reverse : parscan::direction::forward;
      opts.carry_in = dcarry.data();
      opts.carry_out = dtotal.data();
      const problem P = problem::from({parscan::scan_kind::reduce, dx.data(), l, nullptr, l, opts, T{}, true});
      REQUIRE(P.stages_bulk_input());
      constexpr int threads = cd::tile_blocks_threads, words = cd::tile_blocks_loads;
      const parscan::cuda_backend be{};
      parscan::status st;
      if (variant < 6)
        st = cd::launch_tile_blocks_reduce<problem, Op>(P, Op{}, sequences, dev, be, early, per_span);
      else if (variant == 6)
        st = cd::launch_tile_blocks_reduce<problem, Op, threads, words, 1>(P, Op{}, sequences, dev, be, true);
      else if (variant == 7)
        st = cd::launch_tile_blocks_reduce<problem, Op, threads, words, 4>(P, Op{}, sequences, dev, be, true);
      else
        st = cd::dispatch_scan(P, Op{}, sequences, be);
      REQUIRE(st == parscan::status::success);
      check_reduce_totals(dtotal, want);
    }
  }
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: tile-blocks reduce folds runs, lanes, warps, tiles and spans in order"),
          PARSCAN_TEST_TAGS("[scan][chained][reduce]")) {
  // The library's shape: 8-byte affine maps in runs of 32 steps, warp chunks of 1024, tiles of
  // 8192; 16-byte matrices in runs of 16, chunks of 512, tiles of 4096. Lengths: five whole
  // tiles, then three whole chunks and a partial one (a partial lane run in it), so that spans of
  // three tiles end in a partial span; two whole tiles; six steps; nine tiles and a chunk less two
  // steps.
  PARSCAN_TEST_RNG(r, "tile-blocks reduce in order");
  const auto word = [&] { return static_cast<unsigned>(r.uniform(0.0, 4294967295.0)); };
  const auto affine = [&] { return affine_u32{word() | 1u, word()}; };  // odd a: products never collapse to 0
  const auto mat2 = [&] { return mat2_u32{word(), word(), word(), word()}; };
  constexpr int threads = cd::tile_blocks_threads;
  constexpr index_t t8 = cd::tile_blocks_plan<cd::generic_problem<affine_u32, affine_u32, affine_u32>>::tile;
  constexpr index_t t16 = cd::tile_blocks_plan<cd::generic_problem<mat2_u32, mat2_u32, mat2_u32>>::tile;
  constexpr index_t c8 = t8 / (threads / 32), r8 = c8 / 32, c16 = t16 / (threads / 32), r16 = c16 / 32;
  static_assert(t8 == 8192 && r8 == 32 && t16 == 4096 && r16 == 16, "the tiles described above");
  check_tile_blocks_in_order<affine_u32, affine_u32_op>(5 * t8 + 3 * c8 + 7 * r8 + 5, 5 * t8 + 3 * c8 + 7 * r8 + 8,
                                                        affine);
  check_tile_blocks_in_order<affine_u32, affine_u32_op>(2 * t8, 2 * t8, affine);
  check_tile_blocks_in_order<affine_u32, affine_u32_op>(6, 8, affine);
  check_tile_blocks_in_order<affine_u32, affine_u32_op>(9 * t8 + c8 - 2, 9 * t8 + c8, affine);
  check_tile_blocks_in_order<mat2_u32, mat2_u32_op>(5 * t16 + 3 * c16 + 7 * r16 + 5, 5 * t16 + 3 * c16 + 7 * r16 + 9,
                                                    mat2);
  check_tile_blocks_in_order<mat2_u32, mat2_u32_op>(2 * t16, 2 * t16, mat2);
  check_tile_blocks_in_order<mat2_u32, mat2_u32_op>(6, 7, mat2);
}

// Upper triangular 2×2 matrices [[a, b], [0, c]] modulo 2^32: 12 bytes, exact and not
// commutative; their bulk runs are one element each (bulk_run), read and written as three words.
struct tri_u32 {
  unsigned a, b, c;
};
struct tri_u32_op {  // op(earlier, later) = later · earlier
  PARSCAN_HD tri_u32 operator()(const tri_u32& e, const tri_u32& l) const {
    return {l.a * e.a, l.a * e.b + l.b * e.c, l.c * e.c};
  }
};
static_assert(sizeof(tri_u32) == 12 && cd::bulk_run<tri_u32> == 1, "12-byte runs of one element");

/// A random element with odd diagonal words (products never collapse to 0).
template <class E, class Rng>
static E random_map(Rng& r) {
  const auto word = [&] { return static_cast<unsigned>(r.uniform(0.0, 4294967295.0)); };
  if constexpr (std::is_same_v<E, affine_u32>) return {word() | 1u, word()};
  else return {word() | 1u, word(), word() | 1u};
}

/// Scans (inclusive, exclusive) and reduces of E under Op (exact, not commutative) over
/// `sequences` time-contiguous sequences of `length` steps, launched by `launch(P)`, both
/// directions, with the carries in and out in one array (the in-place chaining of chunks):
/// every element and carry against a host loop, bitwise, written, guards intact. `kinds`: the
/// scan kinds to run.
template <class E, class Op, class Launch>
static void check_bulk_maps(const std::string& what, index_t sequences, index_t length,
                            const std::vector<parscan::scan_kind>& kinds, Launch&& launch) {
  using problem = cd::generic_problem<E, E, E>;
  PARSCAN_TEST_RNG(r, what + " " + std::to_string(length));
  const auto at = [](index_t i) { return static_cast<std::size_t>(i); };
  const std::size_t n = at(sequences * length);
  std::vector<E> x(n), carry(at(sequences));
  for (auto& v : x) v = random_map<E>(r);
  for (auto& v : carry) v = random_map<E>(r);
  parscan_test::guarded_buffer<E> dx(x), dout(n), dcarry(carry);
  const auto l = parscan::sequence_layout::time_contiguous(sequences, length);
  const auto same = [](const E& u, const E& v) { return std::memcmp(&u, &v, sizeof(E)) == 0; };
  for (bool reverse : {false, true}) {
    for (auto kind : kinds) {
      const bool reduce = kind == parscan::scan_kind::reduce, exclusive = kind == parscan::scan_kind::exclusive;
      INFO(what << ": length=" << length << " sequences=" << sequences << " reverse=" << reverse
                << " kind=" << int(kind));
      dcarry.upload(carry);
      parscan::scan_options<E> opts;
      opts.dir = reverse ? parscan::direction::reverse : parscan::direction::forward;
      opts.carry_in = dcarry.data();
      opts.carry_out = dcarry.data();
      const problem P = problem::from(
          {kind, dx.data(), l, reduce ? nullptr : dout.data(), l, opts, E{}, kind != parscan::scan_kind::inclusive});
      REQUIRE(P.stages_bulk_input());
      REQUIRE(launch(P) == parscan::status::success);
      PARSCAN_TEST_SYNC();
      CHECK(dcarry.guards_intact());
      if (!reduce) {
        CHECK(dout.all_written());
        CHECK(dout.guards_intact());
      }
      const std::vector<E> got = reduce ? std::vector<E>{} : dout.download(), total = dcarry.download();
      std::size_t wrong = 0;
      for (index_t s = 0; s < sequences; ++s) {
        E run = carry[at(s)];
        for (index_t i = 0; i < length; ++i) {
          const std::size_t e = at(s * length + (reverse ? length - 1 - i : i));
          if (exclusive) wrong += !same(got[e], run);
          run = Op{}(run, x[e]);
          if (kind == parscan::scan_kind::inclusive) wrong += !same(got[e], run);
        }
        INFO("sequence " << s);
        CHECK(same(total[at(s)], run));
      }
      CHECK(wrong == 0);
      dout.repoison();
    }
  }
}

static const std::vector<parscan::scan_kind> every_kind{parscan::scan_kind::inclusive, parscan::scan_kind::exclusive,
                                                        parscan::scan_kind::reduce};

/// check_bulk_maps through the grid bulk tiles of Shape (agent/grid_bulk_tiles.cuh), launched
/// directly: scans and reduces.
template <class Shape, class E, class Op>
static void check_grid_bulk_maps(index_t sequences, index_t length) {
  using problem = cd::generic_problem<E, E, E>;
  using tiles = cd::grid_bulk_tiles_of<Shape, problem, Op>;
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  check_bulk_maps<E, Op>("grid bulk tiles of " + std::to_string(Shape::tile), sequences, length, every_kind,
                         [&](const problem& P) {
                           // (The dispatch keeps reduces of elements that do not divide 16 bytes
                           // off this path; launched directly, it must still be right.)
                           if (!P.reduce_only() || 16 % sizeof(E) == 0) REQUIRE(tiles::takes(P, dev));
                           REQUIRE(tiles::fits(P, sequences, dev));
                           return tiles::launch(P, Op{}, sequences, parscan::cuda_backend{});
                         });
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: grid bulk tiles scan and reduce in order with carries in place"),
          PARSCAN_TEST_TAGS("[scan][chained][bulk][grid]")) {
  // Both shapes; three sequences ending inside a lane's run of a partial tile (lengths even, so
  // every sequence starts 16-byte aligned), one whole tile, and one sequence of an odd length
  // (its last 8 bytes copied by hand) over a grid of most of the device.
  using problem = cd::generic_problem<affine_u32, affine_u32, affine_u32>;
  using small = cd::small_grid_bulk_shape<problem>;
  using large = cd::large_grid_bulk_shape<problem>;
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  REQUIRE(cd::built_for_bulk_copies<cd::grid_bulk_tiles_of<small, problem, affine_u32_op>::scan_kernel>(dev.device));
  check_grid_bulk_maps<small, affine_u32, affine_u32_op>(3, 4 * small::tile + 3 * 32 * 2 * small::chunks + 6);
  check_grid_bulk_maps<large, affine_u32, affine_u32_op>(3, 4 * large::tile + 5 * 32 * 2 * large::chunks + 4);
  check_grid_bulk_maps<small, affine_u32, affine_u32_op>(1, small::tile);
  check_grid_bulk_maps<small, affine_u32, affine_u32_op>(1, 2 * small::tile * dev.multiprocessors + 77);
  check_grid_bulk_maps<large, affine_u32, affine_u32_op>(1, 3 * large::tile * dev.multiprocessors + 1);
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: 12-byte elements through every kernel that stages tiles"),
          PARSCAN_TEST_TAGS("[scan][chained][bulk]")) {
  // Upper triangular matrices mod 2^32 (no GPU test had a 12-byte element on these paths)
  // through each kernel that stages whole tiles: the bulk tiles (look-backs over 40 tiles), the
  // grid bulk tiles (both shapes) and the bulk reduce, launched directly. Lengths: three
  // sequences (a multiple of 4 steps keeps every sequence 16-byte aligned) ending inside a
  // partial tile past five warps' chunks, and one sequence whose last 4 bytes are copied by hand.
  using problem = cd::generic_problem<tri_u32, tri_u32, tri_u32>;
  using op_t = tri_u32_op;
  using bulk = cd::bulk_shape<problem>;
  using small = cd::small_grid_bulk_shape<problem>;
  using large = cd::large_grid_bulk_shape<problem>;
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  REQUIRE(cd::built_for_bulk_copies<cd::bulk_tiles_kernel<problem, op_t>>(dev.device));
  const std::vector<parscan::scan_kind> scans{parscan::scan_kind::inclusive, parscan::scan_kind::exclusive};
  for (index_t sequences : {3, 1}) {
    const index_t tail = sequences == 3 ? 648 : 7;  // the partial tile: 648 steps, or 7 (84 bytes, 4 past a word)
    check_bulk_maps<tri_u32, op_t>("bulk tiles, 12-byte", sequences, 40 * bulk::tile + tail, scans,
                                   [&](const problem& P) {
                                     REQUIRE(P.stages_bulk());
                                     return cd::launch_bulk_tiles(P, op_t{}, sequences, dev, parscan::cuda_backend{});
                                   });
    check_bulk_maps<tri_u32, op_t>("bulk reduce, 12-byte", sequences, 9 * cd::bulk_reduce_shape<problem>::tile + tail,
                                   {parscan::scan_kind::reduce}, [&](const problem& P) {
                                     return cd::launch_bulk_reduce(P, op_t{}, sequences, dev, parscan::cuda_backend{});
                                   });
    check_grid_bulk_maps<small, tri_u32, op_t>(sequences, 6 * small::tile + tail);
    check_grid_bulk_maps<large, tri_u32, op_t>(sequences, 4 * large::tile + tail);
  }
}

/// check_bulk_maps through bulk tiles of the library's shape for affine_u32 started as Start says,
/// with the look-back's state in a caller's workspace whose every word holds an inclusive
/// prefix's tag over a wrong value (and whose tile counter holds a large number) until the
/// launch zeroes it: a record never zeroed gives a wrong prefix, a counter never zeroed leaves
/// tiles unwritten. (Whether a block waits for the zeroing grid is not observable here, since
/// that grid ends long before a first claim: the next case slows it down.)
template <cd::bulk_start Start>
static void check_bulk_start(index_t sequences, index_t length) {
  using problem = cd::generic_problem<affine_u32, affine_u32, affine_u32>;
  using library = cd::bulk_shape<problem>;
  using shape = cd::bulk_shape_of<problem, library::warps, library::smem, library::min_blocks, false, Start>;
  static_assert(shape::tile == library::tile, "the library's tile");
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  const std::vector<unsigned long long> stale(std::size_t(1) << 17, (2ull << 32) | 0x9e3779b9u);
  parscan_test::guarded_buffer<unsigned long long> workspace(stale.size());
  parscan::cuda_backend be{};
  be.workspace = workspace.data();
  be.workspace_bytes = stale.size() * sizeof(unsigned long long);
  const index_t tiles = sequences * ((length + shape::tile - 1) / shape::tile);
  REQUIRE(static_cast<std::size_t>(tiles) * 8 + 512 <= be.workspace_bytes);
  check_bulk_maps<affine_u32, affine_u32_op>(
      "bulk tiles started as " + std::to_string(int(Start)), sequences, length,
      {parscan::scan_kind::inclusive, parscan::scan_kind::exclusive}, [&](const problem& P) {
        workspace.upload(stale);
        REQUIRE(P.stages_bulk());
        return cd::launch_bulk_tiles<problem, affine_u32_op, shape>(P, affine_u32_op{}, sequences, dev, be);
      });
  CHECK(workspace.guards_intact());
}

/// Batches for the library's bulk tiles of affine_u32 on this device (after checking that it and
/// the build take bulk tiles): one sequence of more tiles than the grid has blocks (so blocks
/// claim tiles after their first), and two whose tiles together are, each ending in a partial
/// tile; as (sequences, length) pairs.
static std::vector<std::pair<index_t, index_t>> affine_bulk_batches() {
  using problem = cd::generic_problem<affine_u32, affine_u32, affine_u32>;
  constexpr index_t tile = cd::bulk_shape<problem>::tile;
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  REQUIRE(cd::built_for_bulk_copies<cd::bulk_tiles_kernel<problem, affine_u32_op>>(dev.device));
  const index_t grid = 5 * static_cast<index_t>(dev.multiprocessors);  // at most, for this shape
  return {{1, (grid + 37) * tile + 1030}, {2, (grid / 2 + 40) * tile + 6}};
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: bulk tiles after a memset or launched early, on a stale state"),
          PARSCAN_TEST_TAGS("[scan][chained][bulk]")) {
  // Each way a bulk tiles' launch can start (cd::bulk_start), on affine_bulk_batches.
  for (const auto& [sequences, length] : affine_bulk_batches()) {
    check_bulk_start<cd::bulk_start::after_memset>(sequences, length);
    check_bulk_start<cd::bulk_start::early>(sequences, length);
  }
}

/// check_bulk_maps through bulk tiles of the library's shape for E whose last tiles are cut to
/// about a quarter (TailTileBytes 11 KB), the tail `tail_tiles` of the shape's tiles long over
/// all sequences (cd::bulk_tiling).
template <class E, class Op>
static void check_bulk_tail(index_t sequences, index_t length, index_t tail_tiles) {
  using problem = cd::generic_problem<E, E, E>;
  using library = cd::bulk_shape<problem>;
  using shape = cd::bulk_shape_of<problem, library::warps, library::smem, library::min_blocks, false,
                                  cd::bulk_start::early, 11 * 1024>;
  static_assert(shape::tile == library::tile && shape::tail_tile > 0 && shape::tail_tile < shape::tile / 2,
                "the library's tile, and tail tiles of about a quarter of it");
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  check_bulk_maps<E, Op>("bulk tiles with a tail of " + std::to_string(tail_tiles) + " tiles", sequences, length,
                         {parscan::scan_kind::inclusive, parscan::scan_kind::exclusive}, [&](const problem& P) {
                           REQUIRE(P.stages_bulk());
                           return cd::launch_bulk_tiles<problem, Op, shape>(P, Op{}, sequences, dev,
                                                                            parscan::cuda_backend{}, tail_tiles);
                         });
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: bulk tiles whose last tiles are shorter"),
          PARSCAN_TEST_TAGS("[scan][chained][bulk]")) {
  // How cut_bulk_tiles cuts a sequence, through the kernel: tails of the library's 82 tiles, of
  // a wave, of eight waves (most tiles short) and longer than every sequence (all short), on
  // affine_bulk_batches; and 12-byte elements (one a run, so the hand-copied bytes past a 16-byte
  // word fall in a tail tile or, reverse, in a body tile). Forward the partial tile is a tail
  // tile, reverse a body tile.
  using shape = cd::bulk_shape<cd::generic_problem<affine_u32, affine_u32, affine_u32>>;
  const auto batches = affine_bulk_batches();
  const index_t grid = 5 * static_cast<index_t>(cd::current_device().multiprocessors);
  for (index_t tail_tiles : {index_t(82), grid, 8 * grid, index_t(1) << 30})
    for (const auto& [sequences, length] : batches)
      check_bulk_tail<affine_u32, affine_u32_op>(sequences, length, tail_tiles);
  using tri = cd::bulk_shape_of<cd::generic_problem<tri_u32, tri_u32, tri_u32>, shape::warps, shape::smem,
                                shape::min_blocks, false, cd::bulk_start::early, 11 * 1024>;
  check_bulk_tail<tri_u32, tri_u32_op>(1, 40 * tri::tile + 3 * tri::tail_tile + 5, 8);
  check_bulk_tail<tri_u32, tri_u32_op>(3, 20 * tri::tile + 8, index_t(1) << 30);
}

/// Zeroes `count` 16-byte words like clear_state_kernel, lets the next grid start at once as it
/// does, but zeroes only after `cycles` SM clock cycles: a grid that ends long after the bulk
/// tiles launched behind it have started.
__global__ void slow_clear_kernel(uint4* words, index_t count, long long cycles) {
  cd::allow_dependent_grids();
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    words[i] = uint4{0u, 0u, 0u, 0u};
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: bulk tiles launched early wait for the grid that zeroes their state"),
          PARSCAN_TEST_TAGS("[scan][chained][bulk]")) {
  // The library's launch, with its zeroing grid slowed down to about a millisecond: the bulk
  // tiles are launched early behind it (launch_early) on a state of stale inclusive-prefix
  // records and a large tile counter. A block that claimed a tile or read a record before that
  // grid ended would skip tiles or take a wrong prefix.
  using problem = cd::generic_problem<affine_u32, affine_u32, affine_u32>;
  using shape = cd::bulk_shape<problem>;
  using state = shape::chain_state;
  constexpr auto kernel = cd::bulk_tiles_kernel<problem, affine_u32_op>;
  constexpr int threads = shape::warps * cd::warp_threads;
  const cd::device_facts dev = cd::current_device();
  REQUIRE(dev.st == parscan::status::success);
  REQUIRE(cd::built_for_bulk_copies<kernel>(dev.device));
  cd::prefer_shared_memory<kernel>();
  const int per_sm = cd::blocks_per_multiprocessor<kernel>(threads, dev.device, shape::smem);
  REQUIRE(per_sm > 0);
  const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
  const index_t tiles = resident + 37, length = tiles * shape::tile + 1030;
  const std::vector<unsigned long long> stale(std::size_t(1) << 17, (2ull << 32) | 0x9e3779b9u);
  parscan_test::guarded_buffer<unsigned long long> workspace(stale.size());
  const index_t total_tiles = tiles + 1, windows = (total_tiles + cd::chain_window - 1) / cd::chain_window;
  const std::size_t bytes = state::bytes(total_tiles, windows) + 256;
  REQUIRE(bytes <= stale.size() * sizeof(unsigned long long));
  int khz = 0;
  REQUIRE(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev.device) == cudaSuccess);
  check_bulk_maps<affine_u32, affine_u32_op>(
      "bulk tiles behind a slow zeroing grid", 1, length,
      {parscan::scan_kind::inclusive, parscan::scan_kind::exclusive}, [&](const problem& P) {
        workspace.upload(stale);
        REQUIRE(P.stages_bulk());
        auto* const base = reinterpret_cast<char*>(workspace.data());
        unsigned* const counter = reinterpret_cast<unsigned*>(base);
        const state st = state::carve(base + 256, total_tiles, windows);
        slow_clear_kernel<<<1, 256>>>(reinterpret_cast<uint4*>(base), static_cast<index_t>(bytes / 16),
                                      static_cast<long long>(khz));  // about a millisecond
        REQUIRE(cudaGetLastError() == cudaSuccess);
        const index_t blocks = resident < total_tiles ? resident : total_tiles;
        return cd::launch_early(kernel, blocks, threads, shape::smem, parscan::cuda_backend{}, P, affine_u32_op{}, st,
                                counter, cd::bulk_tiling{total_tiles, total_tiles}, windows, total_tiles);
      });
  CHECK(workspace.guards_intact());
}

TEST_CASE(PARSCAN_TEST_NAME("chained tiles: int32 scans and reduces of a few megabytes through the library"),
          PARSCAN_TEST_TAGS("[scan][chained][bulk][grid]")) {
  // The library's dispatch for one and for two contiguous int32 sequences of 2^20 + 76 steps (4
  // MB each: the grid bulk tiles on an sm_90 device) and for one of 2^22 + 2 (16 MB: the large
  // shape), carries in and out, both directions; exact against a host loop.
  using problem = cd::generic_problem<int, int, int>;
  for (index_t sequences : {1, 2}) {
    for (index_t length : {(index_t(1) << 20) + 76, (index_t(1) << 22) + 2}) {
      if (sequences == 2 && length > (index_t(1) << 21)) continue;
      PARSCAN_TEST_RNG(r, "grid bulk int32 " + std::to_string(sequences) + " " + std::to_string(length));
      const std::size_t n = static_cast<std::size_t>(sequences * length);
      std::vector<int> x(n), carry{5, -7};
      carry.resize(static_cast<std::size_t>(sequences));
      for (auto& v : x) v = static_cast<int>(r.uniform(-1000.0, 1000.0));
      parscan_test::guarded_buffer<int> dx(x), dout(n), dcarry(carry), dtotal(static_cast<std::size_t>(sequences));
      const auto l = parscan::sequence_layout::time_contiguous(sequences, length);
      for (int variant = 0; variant < 6; ++variant) {  // inclusive, exclusive, reduce; both directions
        const bool reverse = variant >= 3;
        const auto kind = variant % 3 == 0 ? parscan::scan_kind::inclusive
                          : variant % 3 == 1 ? parscan::scan_kind::exclusive
                                             : parscan::scan_kind::reduce;
        INFO("sequences=" << sequences << " length=" << length << " reverse=" << reverse << " kind=" << int(kind));
        parscan::scan_options<int> opts;
        opts.dir = reverse ? parscan::direction::reverse : parscan::direction::forward;
        opts.carry_in = dcarry.data();
        opts.carry_out = dtotal.data();
        const bool reduce = kind == parscan::scan_kind::reduce;
        const problem P = problem::from(
            {kind, dx.data(), l, reduce ? nullptr : dout.data(), l, opts, 0, kind != parscan::scan_kind::inclusive});
        REQUIRE(P.stages_bulk_input());
        REQUIRE(cd::dispatch_scan(P, parscan::sum_op<int>{}, sequences, parscan::cuda_backend{}) ==
                parscan::status::success);
        PARSCAN_TEST_SYNC();
        if (reduce) {
          std::vector<int> want(carry);
          for (index_t s = 0; s < sequences; ++s)
            for (index_t t = 0; t < length; ++t)
              want[static_cast<std::size_t>(s)] += x[static_cast<std::size_t>(s * length + t)];
          check_reduce_totals(dtotal, want);
        } else {
          check_int32_sums(x, carry, sequences, length, reverse, kind == parscan::scan_kind::exclusive, dout, dtotal);
        }
      }
    }
  }
}
