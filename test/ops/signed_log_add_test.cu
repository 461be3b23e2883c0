// test/ops/signed_log_add_test.cu — log_affine_op's log-add-exp as the device computes it
// (the special-function unit's exp2 and log2: ops/log_affine.hpp, detail::log_add_exp_approx)
// against the host's float64 one: every pairing of zeros, infinities, NaN, equal and unequal
// magnitudes and both signs keeps the host's meaning (an exact zero, ±inf, NaN, the sign), and
// random pairs, near cancellation included, stay within the documented error (numerics.md).
// Then the log-space recurrences' accumulator, detail::log_affine_bits_op, against
// log_affine_op<float> on the device: the same bits, chains of combines included.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <cuda_runtime.h>

#include <parscan/detail/log_affine_bits.hpp>
#include <parscan/ops/log_affine.hpp>

#include "support/env.hpp"
#include "support/random.hpp"

namespace {

using sl = parscan::signed_log<float>;

__global__ void signed_log_add_kernel(const sl* u, const sl* v, sl* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = parscan::signed_log_add(u[i], v[i]);
}

std::vector<sl> device_adds(const std::vector<sl>& u, const std::vector<sl>& v) {
  const int n = static_cast<int>(u.size());
  const std::size_t bytes = u.size() * sizeof(sl);
  sl *du = nullptr, *dv = nullptr, *dout = nullptr;
  REQUIRE(cudaMalloc(&du, bytes) == cudaSuccess);
  REQUIRE(cudaMalloc(&dv, bytes) == cudaSuccess);
  REQUIRE(cudaMalloc(&dout, bytes) == cudaSuccess);
  REQUIRE(cudaMemcpy(du, u.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(dv, v.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemset(dout, 0x7f, bytes) == cudaSuccess);  // poison: log_mag 3.4e38, neg true
  signed_log_add_kernel<<<(n + 255) / 256, 256>>>(du, dv, dout, n);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  std::vector<sl> out(u.size());
  REQUIRE(cudaMemcpy(out.data(), dout, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  cudaFree(du), cudaFree(dv), cudaFree(dout);
  return out;
}

// The host's log-add-exp in float64 of the same float operands.
parscan::signed_log<double> reference(sl u, sl v) {
  return parscan::signed_log_add(parscan::signed_log<double>{u.log_mag, u.neg},
                                 parscan::signed_log<double>{v.log_mag, v.neg});
}

// Where the device may differ from the float64 result: ~2^-22 of log|x| from the two
// approximations, float's rounding of hi, and the cancellation's conditioning (|u| + |v|) / |u + v|.
double allowed_error(sl u, sl v, double ref) {
  const double hi = std::fmax(u.log_mag, v.log_mag), lo = std::fmin(u.log_mag, v.log_mag);
  const double e = std::exp(lo - hi);
  const double conditioning = u.neg == v.neg ? 1.0 : (1.0 + e) / (1.0 - e);
  return 4e-7 * conditioning + 1.2e-7 * std::fabs(ref);
}

using la = parscan::log_affine<float>;
using bits = parscan::detail::log_affine_bits;

// Each thread folds its `chain` maps from maps[i·chain] with both operators.
__global__ void fold_both_kernel(const la* maps, int chain, int n, la* plain, bits* packed) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  la p = maps[i * chain];
  bits q(p.log_a, p.neg_a, p.log_b, p.neg_b);
  for (int k = 1; k < chain; ++k) {
    const la m = maps[i * chain + k];
    p = parscan::log_affine_op<float>{}(p, m);
    q = parscan::detail::log_affine_bits_op{}(q, bits(m.log_a, m.neg_a, m.log_b, m.neg_b));
  }
  plain[i] = p, packed[i] = q;
}

// The same float: the same bits, or both NaN (whose payloads the operators need not keep).
bool same_value(float x, float y) { return (x != x && y != y) || std::memcmp(&x, &y, sizeof x) == 0; }

}  // namespace

TEST_CASE(PARSCAN_TEST_NAME("signed_log_add on the device: zeros, infinities, NaN and signs as on the host"),
          PARSCAN_TEST_TAGS("[ops][log_affine]")) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float mags[] = {-inf, -3.5f, 0.0f, 1.0f, 80.0f, inf, nan};
  std::vector<sl> u, v;
  for (float a : mags)
    for (float b : mags)
      for (int signs = 0; signs < 4; ++signs) u.push_back({a, (signs & 1) != 0}), v.push_back({b, (signs & 2) != 0});
  const std::vector<sl> got = device_adds(u, v);
  for (std::size_t i = 0; i < u.size(); ++i) {
    const parscan::signed_log<double> want = reference(u[i], v[i]);
    INFO("u = " << (u[i].neg ? "-" : "+") << "exp(" << u[i].log_mag << "), v = " << (v[i].neg ? "-" : "+") << "exp("
                << v[i].log_mag << "): got log " << got[i].log_mag << " neg " << got[i].neg << ", want log "
                << want.log_mag << " neg " << want.neg);
    CHECK(std::isnan(got[i].log_mag) == std::isnan(want.log_mag));
    CHECK(got[i].neg == want.neg);
    if (std::isinf(want.log_mag)) CHECK(got[i].log_mag == static_cast<float>(want.log_mag));  // exact zero, ±inf
    else if (!std::isnan(want.log_mag))
      CHECK(std::fabs(got[i].log_mag - want.log_mag) <= allowed_error(u[i], v[i], want.log_mag));
  }
}

TEST_CASE(PARSCAN_TEST_NAME("signed_log_add on the device: random pairs within the documented error"),
          PARSCAN_TEST_TAGS("[ops][log_affine]")) {
  PARSCAN_TEST_RNG(r, "signed_log_add device");
  std::vector<sl> u, v;
  for (int i = 0; i < (1 << 16); ++i) {
    const float a = static_cast<float>(r.uniform(-30.0, 30.0));
    // A quarter of the pairs within 1e-3 of each other: the cancelling case, when signs differ.
    const float b = i % 4 == 0 ? a + static_cast<float>(r.uniform(-1e-3, 1e-3)) : static_cast<float>(r.uniform(-30.0, 30.0));
    u.push_back({a, r.unit() < 0.5}), v.push_back({b, r.unit() < 0.5});
  }
  const std::vector<sl> got = device_adds(u, v);
  double worst = 0;  // the error over its allowance
  for (std::size_t i = 0; i < u.size(); ++i) {
    const parscan::signed_log<double> want = reference(u[i], v[i]);
    if (std::isinf(want.log_mag)) {  // equal magnitudes of opposite sign: an exact zero
      CHECK(got[i].log_mag == -std::numeric_limits<float>::infinity());
      continue;
    }
    const double hi = std::fmax(u[i].log_mag, v[i].log_mag), gap = hi - std::fmin(u[i].log_mag, v[i].log_mag);
    if (u[i].neg != v[i].neg && gap < 0x1p-21) {
      // e = exp(-gap) within float's (and ex2's) rounding of 1: the sum may cancel to an exact
      // zero, as it does with log1pf; its true magnitude is about e^hi·gap, so whatever comes
      // out must be a zero or below e^hi·2^-20.
      CHECK(got[i].log_mag <= hi + std::log(0x1p-20));
      continue;
    }
    CHECK(got[i].neg == want.neg);
    worst = std::fmax(worst, std::fabs(got[i].log_mag - want.log_mag) / allowed_error(u[i], v[i], want.log_mag));
  }
  INFO("worst error, as a fraction of its allowance: " << worst);
  CHECK(worst <= 1.0);
}

TEST_CASE(PARSCAN_TEST_NAME("log_affine_bits_op on the device: log_affine_op<float>'s bits, chains included"),
          PARSCAN_TEST_TAGS("[ops][log_affine]")) {
  PARSCAN_TEST_RNG(r, "log_affine_bits device");
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float special[] = {-inf, inf, nan, 0.0f, 1.0f};
  // Pairs (chain 2) and chains of 40, of random signed maps with a special magnitude now and then
  // (zeros make the internal signs of zero differ; the outputs must not).
  for (int chain : {2, 40}) {
    const int n = 4096;
    std::vector<la> maps(static_cast<std::size_t>(n) * chain);
    for (la& m : maps) {
      const auto magnitude = [&] {
        return r.unit() < 0.1 ? special[r.small_int(0, 4)] : static_cast<float>(r.uniform(-3.0, 1.0));
      };
      m = la(magnitude(), r.unit() < 0.5, magnitude(), r.unit() < 0.5);
    }
    la *dmaps = nullptr, *dplain = nullptr;
    bits* dpacked = nullptr;
    REQUIRE(cudaMalloc(&dmaps, maps.size() * sizeof(la)) == cudaSuccess);
    REQUIRE(cudaMalloc(&dplain, n * sizeof(la)) == cudaSuccess);
    REQUIRE(cudaMalloc(&dpacked, n * sizeof(bits)) == cudaSuccess);
    REQUIRE(cudaMemcpy(dmaps, maps.data(), maps.size() * sizeof(la), cudaMemcpyHostToDevice) == cudaSuccess);
    fold_both_kernel<<<n / 256, 256>>>(dmaps, chain, n, dplain, dpacked);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    std::vector<la> plain(n);
    std::vector<bits> packed(n);
    REQUIRE(cudaMemcpy(plain.data(), dplain, n * sizeof(la), cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(packed.data(), dpacked, n * sizeof(bits), cudaMemcpyDeviceToHost) == cudaSuccess);
    cudaFree(dmaps), cudaFree(dplain), cudaFree(dpacked);
    int differ = 0;
    for (int i = 0; i < n; ++i)
      differ += !same_value(plain[i].log_a, packed[i].log_a) || !same_value(plain[i].log_b, packed[i].log_b) ||
                plain[i].neg_a != (packed[i].sign_a != 0) || plain[i].neg_b != packed[i].neg_b();
    INFO("chains of " << chain << ": " << differ << " of " << n << " differ");
    CHECK(differ == 0);
  }
}
