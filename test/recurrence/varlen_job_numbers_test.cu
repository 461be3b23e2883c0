// test/recurrence/varlen_job_numbers_test.cu — the packed warp loop's two kinds of job number
// (cuda/recurrence/varlen_recurrence.cuh; CUDA only). dispatch_varlen runs time-contiguous
// packed sequences with 32-bit job numbers and lengths where they fit (varlen_narrow_jobs) and
// 64-bit ones otherwise; no test shape reaches the 64-bit case through the public API (it needs
// 2^31 jobs or 2^32 steps), so both kernels run here directly on the same fresh inputs: their
// results must agree bit for bit, match a float64 host loop, and fill every output.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <parscan/cuda/recurrence/varlen_recurrence.cuh>
#include <parscan/ops/affine.hpp>

#include "support/env.hpp"
#include "support/random.hpp"

namespace {

using parscan::index_t;
namespace cd = parscan::cuda_detail;
using parscan_test::guarded_buffer;

template <class T>
std::vector<T> to_storage(const std::vector<double>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(static_cast<float>(v[i]));
  return out;
}
template <class T>
std::vector<double> to_double(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<double>(static_cast<float>(v[i]));
  return out;
}

/// The outputs of one launch: x (D, total) and x_final (N, D).
template <class T>
struct outputs {
  std::vector<T> x, x_final;
};

/// Runs the warp loop with Job numbers over fresh outputs (poisoned, with guard bands) and
/// checks that it wrote every step of every sequence, nothing past them, and each x_final.
template <class Job, class T>
outputs<T> run_warp_loop(const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>* x0,
                         const guarded_buffer<std::int64_t>& offsets, index_t N, index_t D, index_t total,
                         index_t covered, bool reverse) {
  const guarded_buffer<T> d_a(a), d_b(b);
  guarded_buffer<T> d_x(static_cast<std::size_t>(D * total)), d_final(static_cast<std::size_t>(N * D));
  const guarded_buffer<T> d_x0(x0 ? *x0 : std::vector<T>{});
  const parscan::sequence_layout l = parscan::sequence_layout::time_contiguous(D, total);
  const cd::recurrence_forward_problem<T> P{d_a.data(), d_b.data(), d_x.data(), x0 ? d_x0.data() : nullptr,
                                            d_final.data(), l, l, l, total, reverse, false, false};
  REQUIRE(cd::launch_varlen_warp_loop<Job>(P, parscan::affine_op<T>{}, offsets.data(), N, D, parscan::cuda_backend{}) ==
          parscan::status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(d_x.guards_intact());
  CHECK(d_final.guards_intact());
  outputs<T> out{d_x.download(), d_final.download()};
  index_t wrong = 0, unwritten_finals = 0;  // steps of a sequence left unwritten, or steps past them written
  for (index_t d = 0; d < D; ++d)
    for (index_t t = 0; t < total; ++t)
      wrong += d_x.is_poison(out.x[static_cast<std::size_t>(d * total + t)]) != (t >= covered);
  for (const T& v : out.x_final) unwritten_finals += d_final.is_poison(v);
  CHECK(wrong == 0);
  CHECK(unwritten_finals == 0);
  return out;
}

template <class T>
void check_job_numbers(parscan_test::rng& rng, double tolerance) {
  // Lengths 0, 1, primes, one run ± 1 and a few tiles, in a random order; steps past the last.
  std::vector<std::int64_t> lengths{0, 1, 7, 8, 9, 31, 97, 263, 1021, 2048, 4099, 0, 3};
  for (std::size_t i = lengths.size(); i > 1; --i)
    std::swap(lengths[i - 1], lengths[static_cast<std::size_t>(rng.small_int(0, static_cast<std::int64_t>(i) - 1))]);
  std::vector<std::int64_t> offsets{0};
  for (std::int64_t l : lengths) offsets.push_back(offsets.back() + l);
  const index_t N = static_cast<index_t>(lengths.size()), D = 37, covered = offsets.back(), total = covered + 5;
  const guarded_buffer<std::int64_t> d_offsets(offsets);
  const std::size_t elements = static_cast<std::size_t>(D * total);
  const std::vector<double> a =
      to_double(to_storage<T>(rng.vector(elements, [](parscan_test::rng& r) { return r.gate(); })));
  const std::vector<double> b =
      to_double(to_storage<T>(rng.vector(elements, [](parscan_test::rng& r) { return r.signed_unit(); })));
  const std::vector<double> x0 = to_double(
      to_storage<T>(rng.vector(static_cast<std::size_t>(N * D), [](parscan_test::rng& r) { return r.signed_unit(); })));
  const std::vector<T> sa = to_storage<T>(a), sb = to_storage<T>(b), sx0 = to_storage<T>(x0);
  for (bool reverse : {false, true})
    for (bool with_x0 : {false, true}) {
      INFO((reverse ? "reverse" : "forward") << (with_x0 ? ", x0" : ", no x0"));
      const outputs<T> narrow =
          run_warp_loop<std::int32_t>(sa, sb, with_x0 ? &sx0 : nullptr, d_offsets, N, D, total, covered, reverse);
      const outputs<T> wide =
          run_warp_loop<index_t>(sa, sb, with_x0 ? &sx0 : nullptr, d_offsets, N, D, total, covered, reverse);
      CHECK(std::memcmp(narrow.x.data(), wide.x.data(), narrow.x.size() * sizeof(T)) == 0);
      CHECK(std::memcmp(narrow.x_final.data(), wide.x_final.data(), narrow.x_final.size() * sizeof(T)) == 0);
      // The float64 loop, sequence by sequence.
      double worst = 0;
      for (index_t n = 0; n < N; ++n)
        for (index_t d = 0; d < D; ++d) {
          double x = with_x0 ? x0[static_cast<std::size_t>(n * D + d)] : 0.0;
          const std::int64_t lo = offsets[static_cast<std::size_t>(n)], hi = offsets[static_cast<std::size_t>(n) + 1];
          for (std::int64_t k = 0; k < hi - lo; ++k) {
            const std::size_t at = static_cast<std::size_t>(d * total + (reverse ? hi - 1 - k : lo + k));
            x = a[at] * x + b[at];
            const double got = static_cast<float>(wide.x[at]);
            worst = std::fmax(worst, std::fabs(got - x) / (1 + std::fabs(x)));
          }
          const double got = static_cast<float>(wide.x_final[static_cast<std::size_t>(n * D + d)]);
          worst = std::fmax(worst, std::fabs(got - x) / (1 + std::fabs(x)));
        }
      INFO("worst error, relative to 1 + |x|: " << worst);
      CHECK(worst <= tolerance);
    }
}

}  // namespace

TEST_CASE(PARSCAN_TEST_NAME("varlen warp loop: 32-bit job numbers only where every job and length fits"),
          PARSCAN_TEST_TAGS("[recurrence][varlen]")) {
  constexpr index_t most_jobs = (index_t(1) << 31) - (index_t(1) << 25), most_steps = (index_t(1) << 32) - 1;
  CHECK(cd::varlen_narrow_jobs(most_jobs, most_steps));
  CHECK(cd::varlen_narrow_jobs(1, 0));
  CHECK_FALSE(cd::varlen_narrow_jobs(most_jobs + 1, 1));
  CHECK_FALSE(cd::varlen_narrow_jobs(1, most_steps + 1));
}

TEST_CASE(PARSCAN_TEST_NAME("varlen warp loop: 32-bit and 64-bit job numbers give the same bits"),
          PARSCAN_TEST_TAGS("[recurrence][varlen]")) {
  PARSCAN_TEST_RNG(rng, "varlen job numbers");
  SECTION("float") { check_job_numbers<float>(rng, 1e-5); }
  SECTION("bfloat16") { check_job_numbers<parscan::bfloat16>(rng, 1e-2); }
}
