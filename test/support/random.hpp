// test/support/random.hpp — reproducible random inputs for the tests.
//
// Every run draws from one base seed: PARSCAN_TEST_SEED from the environment (decimal, or hex
// with a 0x prefix) when it is set, else a fresh std::random_device value. The seed is printed
// once to stderr at first use, and PARSCAN_TEST_RNG() adds it to the failure message of every
// assertion in scope, so any failure can be replayed with
//     PARSCAN_TEST_SEED=<seed> ./parscan_tests "<test name>"
//
// Each test draws from its own stream, seeded from (base seed, salt string), so a test's data
// does not depend on which other tests ran before it. The generators are written out here
// (mt19937_64 plus our own uniform/normal transforms) rather than taken from
// std::*_distribution, whose output differs between standard libraries: the same seed gives
// the same data with libstdc++ on the CI host and under nvcc on the GPU machine.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace parscan_test {

namespace detail {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace detail

/// The run's base seed (see the top of this file). Computed and printed once per process.
inline std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("PARSCAN_TEST_SEED");
    if (env && *env) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(env, &end, 0);
      if (end && *end == '\0') {
        std::fprintf(stderr, "parscan tests: PARSCAN_TEST_SEED=%llu (from the environment)\n", v);
        return static_cast<std::uint64_t>(v);
      }
      std::fprintf(stderr, "parscan tests: ignoring unparsable PARSCAN_TEST_SEED='%s'\n", env);
    }
    std::random_device rd;
    const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(rd());
    std::fprintf(stderr, "parscan tests: PARSCAN_TEST_SEED=%llu (fresh; export it to replay this run)\n",
                 static_cast<unsigned long long>(v));
    return v;
  }();
  return seed;
}

/// One test's random stream. Construct it at the top of a TEST_CASE (Catch re-runs the body
/// from the top for every SECTION / GENERATE value, so the draws repeat identically).
class rng {
 public:
  explicit rng(std::string salt)
      : seed_(base_seed()), salt_(std::move(salt)), engine_(detail::splitmix64(seed_ ^ detail::fnv1a(salt_))) {}

  /// The base seed to export as PARSCAN_TEST_SEED to replay.
  std::uint64_t seed() const { return seed_; }
  const std::string& salt() const { return salt_; }
  std::mt19937_64& engine() { return engine_; }

  std::uint64_t bits() { return engine_(); }
  bool coin() { return (bits() >> 63) != 0; }

  /// Uniform in the open interval (0, 1); never exactly 0 or 1 in double.
  double unit() { return (static_cast<double>(bits() >> 11) + 0.5) * 0x1p-53; }
  /// Uniform in (lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
  /// Normal(mean, sd), by Box–Muller (our own, so every standard library draws the same).
  double normal(double mean = 0.0, double sd = 1.0) {
    const double u = unit(), v = unit();
    return mean + sd * std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586476925 * v);
  }
  /// A gate in (0, 1): bounded recurrences.
  double gate() { return unit(); }
  /// A gate in [0.999, 1): long memory, slow decay.
  double near_one() { return 0.999 + 0.001 * unit(); }
  /// Uniform in (-1, 1).
  double signed_unit() { return 2.0 * unit() - 1.0; }
  /// Uniform integer in [lo, hi] (inclusive). The modulo bias is below 2^-40 for the spans used.
  std::int64_t small_int(std::int64_t lo, std::int64_t hi) {
    const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1u;
    return lo + static_cast<std::int64_t>(span == 0 ? bits() : bits() % span);
  }
  /// Uniform non-zero integer in [-m, m].
  std::int64_t nonzero_int(std::int64_t m) {
    const std::int64_t v = small_int(1, m);
    return coin() ? -v : v;
  }

  /// n draws of f(*this).
  template <class F>
  auto vector(std::size_t n, F&& f) -> std::vector<decltype(f(*this))> {
    std::vector<decltype(f(*this))> v;
    v.reserve(n);
    for (std::size_t i = 0; i < n; ++i) v.push_back(f(*this));
    return v;
  }

 private:
  std::uint64_t seed_;
  std::string salt_;
  std::mt19937_64 engine_;
};

}  // namespace parscan_test

/// Declares `parscan_test::rng var{salt}` and attaches the replay seed to every assertion in
/// the enclosing scope (needs support/catch.hpp included first).
#define PARSCAN_TEST_RNG(var, salt_string)                                                      \
  ::parscan_test::rng var{salt_string};                                                         \
  INFO("replay with PARSCAN_TEST_SEED=" << var.seed() << " (stream \"" << var.salt() << "\")")
