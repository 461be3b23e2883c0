// test/recurrence/varlen_order_test.cu — the packed lane loop's order of sequences, longest first
// (cuda/device/longest_first.cuh; CUDA only). Fresh random lengths with many ties, empty
// sequences and a few long ones; the order must equal a stable host sort by length (longest
// first, equal lengths in index order) after clamping to [0, total_length], stay inside its
// workspace (guard bands of the poison byte), and be a permutation even for offsets that
// break the caller's contract.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <parscan/cuda/device/longest_first.cuh>

#include "support/env.hpp"
#include "support/random.hpp"

namespace {

using parscan::index_t;
namespace cd = parscan::cuda_detail;
using parscan_test::guarded_buffer;

/// What longest_first must give: a stable sort of the clamped lengths, longest first.
std::vector<index_t> expected_order(const std::vector<std::int64_t>& offsets, index_t total) {
  const std::size_t n = offsets.size() - 1;
  std::vector<std::int64_t> length(n);
  for (std::size_t i = 0; i < n; ++i) length[i] = std::clamp<std::int64_t>(offsets[i + 1] - offsets[i], 0, total);
  std::vector<index_t> order(n);
  std::iota(order.begin(), order.end(), index_t(0));
  std::stable_sort(order.begin(), order.end(), [&](index_t p, index_t q) {
    return length[static_cast<std::size_t>(p)] > length[static_cast<std::size_t>(q)];
  });
  return order;
}

/// Runs longest_first on `offsets` and checks it against expected_order.
void check_order(const std::vector<std::int64_t>& offsets, index_t total) {
  const index_t n = static_cast<index_t>(offsets.size()) - 1;
  INFO("N = " << n << ", total_length = " << total);
  const guarded_buffer<std::int64_t> d_offsets(offsets);
  const std::size_t bytes = cd::longest_first_bytes(n, total);
  REQUIRE(bytes > 0);
  guarded_buffer<unsigned char> workspace(bytes, 256);
  const index_t* order = nullptr;
  REQUIRE(cd::longest_first(d_offsets.data(), n, total, workspace.data(), nullptr, order) == parscan::status::success);
  REQUIRE(order != nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto* base = reinterpret_cast<const unsigned char*>(workspace.data());
  const auto* at = reinterpret_cast<const unsigned char*>(order);
  REQUIRE(at >= base);
  REQUIRE(at + sizeof(index_t) * static_cast<std::size_t>(n) <= base + bytes);
  std::vector<index_t> got(static_cast<std::size_t>(n));
  REQUIRE(cudaMemcpy(got.data(), order, got.size() * sizeof(index_t), cudaMemcpyDeviceToHost) == cudaSuccess);
  const std::vector<index_t> want = expected_order(offsets, total);
  std::size_t first_wrong = got.size();
  for (std::size_t i = 0; i < got.size() && first_wrong == got.size(); ++i)
    if (got[i] != want[i]) first_wrong = i;
  INFO("first difference at position " << first_wrong);
  CHECK(first_wrong == got.size());
  CHECK(workspace.guards_intact());
}

std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int64_t> o{0};
  for (std::int64_t l : lengths) o.push_back(o.back() + l);
  return o;
}

}  // namespace

TEST_CASE(PARSCAN_TEST_NAME("varlen order: sequences longest first, ties in index order"),
          PARSCAN_TEST_TAGS("[recurrence][varlen]")) {
  PARSCAN_TEST_RNG(rng, "varlen order");
  for (index_t n : {index_t(2), index_t(3), index_t(33), index_t(1000), index_t(70001)}) {
    // Lengths in [0, n/4]: many ties and empty sequences; a few long ones among them.
    std::vector<std::int64_t> lengths(static_cast<std::size_t>(n));
    for (std::int64_t& l : lengths) l = rng.small_int(0, std::max<std::int64_t>(1, n / 4));
    for (int k = 0; k < 3; ++k) lengths[static_cast<std::size_t>(rng.small_int(0, n - 1))] = rng.small_int(1, 1 << 20);
    const std::vector<std::int64_t> offsets = offsets_of(lengths);
    check_order(offsets, offsets.back() + rng.small_int(0, 5));  // steps past the last sequence too
  }
}

TEST_CASE(PARSCAN_TEST_NAME("varlen order: offsets that break the contract still give a permutation"),
          PARSCAN_TEST_TAGS("[recurrence][varlen]")) {
  PARSCAN_TEST_RNG(rng, "varlen order, broken offsets");
  std::vector<std::int64_t> lengths(500);
  for (std::int64_t& l : lengths) l = rng.small_int(0, 40);
  std::vector<std::int64_t> offsets = offsets_of(lengths);
  const index_t total = offsets.back();
  offsets[100] = offsets[99] - 7;   // sequence 99 negative
  offsets[300] = 10 * total;        // sequence 299 past the end, 300 negative
  check_order(offsets, total);
}

TEST_CASE(PARSCAN_TEST_NAME("varlen order: fewer than two sequences sort nothing"),
          PARSCAN_TEST_TAGS("[recurrence][varlen]")) {
  for (index_t n : {index_t(0), index_t(1)}) {
    CHECK(cd::longest_first_bytes(n, 100) == 0);
    const index_t* order = reinterpret_cast<const index_t*>(&n);  // must be cleared
    CHECK(cd::longest_first(nullptr, n, 100, nullptr, nullptr, order) == parscan::status::success);
    CHECK(order == nullptr);
  }
}
