// benchmarks/bench_scan.cu — the generic device-wide scan with the affine operator, float32,
// one sequence of 2^20, 2^24 and 2^28 elements, against cub::DeviceScan::InclusiveScan with
// the same operator. Effective bandwidth counts the input read once and the output written
// once. Each result is also checked against a float64 host loop.
//   usage: bench_scan [--json out.json] [--quick]
#include <cub/device/device_scan.cuh>

#include <cmath>
#include <cstdint>
#include <vector>

#include <parscan/parscan.cuh>

#include "bench_common.cuh"

namespace {

using elem = parscan::affine<float>;

__device__ float hash_unit(std::uint64_t i, std::uint32_t seed) {  // uniform in [0, 1)
  std::uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

__global__ void fill_affine(elem* e, std::int64_t n, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    e[i] = elem(0.5f + 0.5f * hash_unit(2 * i, seed), 2.0f * hash_unit(2 * i + 1, seed) - 1.0f);
}

// Largest |x - ref| / max|ref| over the states x = out.b, reference in float64.
double check(const std::vector<elem>& in, const std::vector<elem>& out) {
  double x = 0, worst = 0, scale = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    x = double(in[i].a) * x + double(in[i].b);
    worst = std::max(worst, std::fabs(double(out[i].b) - x));
    scale = std::max(scale, std::fabs(x));
  }
  return worst / scale;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::has_flag(argc, argv, "--quick");
  const double copy = bench::copy_bandwidth_gbs();
  std::vector<bench::row> rows;
  int failures = 0;
  for (int log2n : {20, 24, 28}) {
    if (quick && log2n > 24) continue;
    const std::int64_t n = std::int64_t(1) << log2n;
    const size_t bytes = size_t(n) * sizeof(elem);
    const int rot = bench::rotation_for(2 * bytes);
    std::vector<elem*> in(rot), out(rot);
    for (int r = 0; r < rot; ++r) {
      BENCH_CHECK(cudaMalloc(&in[r], bytes));
      BENCH_CHECK(cudaMalloc(&out[r], bytes));
      fill_affine<<<1024, 256>>>(in[r], n, 1234u + r);
    }
    BENCH_CHECK(cudaDeviceSynchronize());
    const std::size_t ws_bytes = parscan::scan_workspace_size<elem>(parscan::sequence_layout::contiguous(n), parscan::affine_op<float>{});
    void* ws = nullptr;
    BENCH_CHECK(cudaMalloc(&ws, ws_bytes + 256));
    parscan::cuda_backend be{nullptr, ws, ws_bytes + 256, nullptr};

    auto run_parscan = [&](int i) {
      const auto s = parscan::inclusive_scan(be, in[i % rot], out[i % rot], n, parscan::affine_op<float>{});
      if (s != parscan::status::success) std::printf("parscan failed: %s\n", parscan::to_string(s)), std::exit(1);
    };
    run_parscan(0);
    BENCH_CHECK(cudaDeviceSynchronize());
    std::vector<elem> h_in(n), h_out(n);
    BENCH_CHECK(cudaMemcpy(h_in.data(), in[0], bytes, cudaMemcpyDeviceToHost));
    BENCH_CHECK(cudaMemcpy(h_out.data(), out[0], bytes, cudaMemcpyDeviceToHost));
    const double err = check(h_in, h_out);
    if (!(err <= 1e-5)) ++failures;
    const double us = bench::median_us(run_parscan);
    const double gbs = 2.0 * bytes / us / 1e3;
    rows.push_back({"generic affine scan (parscan)", "f32", "contiguous", "fwd", "n=2^" + std::to_string(log2n), us, gbs,
                    100 * gbs / copy, err});

    size_t cub_bytes = 0;
    BENCH_CHECK(cub::DeviceScan::InclusiveScan(nullptr, cub_bytes, in[0], out[0], parscan::affine_op<float>{}, n));
    void* cub_ws = nullptr;
    BENCH_CHECK(cudaMalloc(&cub_ws, cub_bytes));
    auto run_cub = [&](int i) {
      BENCH_CHECK(cub::DeviceScan::InclusiveScan(cub_ws, cub_bytes, in[i % rot], out[i % rot], parscan::affine_op<float>{}, n));
    };
    run_cub(0);
    BENCH_CHECK(cudaDeviceSynchronize());
    BENCH_CHECK(cudaMemcpy(h_out.data(), out[0], bytes, cudaMemcpyDeviceToHost));
    const double cub_err = check(h_in, h_out);
    const double cus = bench::median_us(run_cub);
    const double cgbs = 2.0 * bytes / cus / 1e3;
    rows.push_back({"generic affine scan (cub)", "f32", "contiguous", "fwd", "n=2^" + std::to_string(log2n), cus, cgbs,
                    100 * cgbs / copy, cub_err});
    std::printf("n=2^%d  max rel error: parscan %.3g, cub %.3g\n", log2n, err, cub_err);
    BENCH_CHECK(cudaFree(cub_ws));
    BENCH_CHECK(cudaFree(ws));
    for (int r = 0; r < rot; ++r) {
      BENCH_CHECK(cudaFree(in[r]));
      BENCH_CHECK(cudaFree(out[r]));
    }
  }
  bench::print_table(rows, copy);
  bench::write_json(bench::json_arg(argc, argv), "bench_scan", rows, copy);
  if (failures) std::printf("FAILED: %d result(s) above tolerance 1e-5\n", failures);
  return failures ? 1 : 0;
}
