// test/core/chained_tiles_test.cu — the chained-tile kernels (CUDA only) with tiles small enough
// that a sequence spans several hyper-windows of the look-back (tile_state.cuh: 32768 tiles),
// which the library's own tile shapes reach only beyond 2^27 steps. Each kernel kind (block
// tiles, staged or not, and warp tiles) scans a few long gated recurrences with x0, forward and
// reverse; the result must match a float64 loop, write every element and no guard, and be
// bitwise identical when run again.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <parscan/cuda/device/dispatch_scan.cuh>
#include <parscan/cuda/device/recurrence_head_pads.cuh>
#include <parscan/cuda/device/recurrence_problems.cuh>

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

template <class Shape>
void check_chained(const std::string& what, index_t sequences, index_t length, bool reverse, bool head_pads = false) {
  INFO(what << ": " << sequences << " sequences of " << length << " steps, reverse=" << reverse
            << ", head pads=" << head_pads);
  PARSCAN_TEST_RNG(r, "chained tiles " + what + (reverse ? " reverse" : ""));
  REQUIRE(Shape::chained_tile == 128);
  REQUIRE((length + Shape::chained_tile - 1) / Shape::chained_tile > 2 * cd::lookback_hyper);
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
