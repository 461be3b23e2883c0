// test/consumer/main.cpp — scans x[t] = a[t]·x[t-1] + b[t] with parscan's affine operator on
// the host backend and checks it against a plain loop. Exit code 0 on success.
#include <parscan/parscan.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  constexpr int n = 1 << 18;  // long enough to be chunked and shared out over threads
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> gate(0.5f, 1.0f), input(-1.0f, 1.0f);

  std::vector<parscan::affine<float>> in(n), out(n);
  for (auto& e : in) e = parscan::affine<float>(gate(rng), input(rng));

  const parscan::status s =
      parscan::inclusive_scan(parscan::host_backend{}, in.data(), out.data(), n, parscan::affine_op<float>{});
  if (s != parscan::status::success) {
    std::printf("consumer: inclusive_scan failed: %s\n", parscan::to_string(s));
    return 1;
  }

  // With x[-1] = 0 the scanned map's offset is the state: x[t] = out[t].b.
  float x = 0.0f;
  double worst = 0.0;
  for (int t = 0; t < n; ++t) {
    x = in[t].a * x + in[t].b;
    worst = std::fmax(worst, std::fabs(double(out[t].b) - double(x)) / (1.0 + std::fabs(double(x))));
  }
  const bool ok = worst <= 1e-5;
  std::printf("consumer: n=%d PARSCAN_HAS_CUDA=%d largest error %.3g: %s\n", n, int(PARSCAN_HAS_CUDA), worst,
              ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
