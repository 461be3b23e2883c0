// benchmarks/bench_tuning.cu — times alternative tile shapes of the shared scan kernels in one
// run, so a single lease on the GPU machine can choose the library's defaults
// (tile_shape_of in include/parscan/cuda/device/dispatch_scan.cuh). Every variant's output
// is checked against a float64 loop on two sequences before it is timed.
//   usage: bench_tuning [--json out.json]
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <parscan/parscan.cuh>
#include <parscan/cuda/device/recurrence_problems.cuh>

#include "bench_common.cuh"

namespace {

using parscan::index_t;
namespace cd = parscan::cuda_detail;

__device__ inline float unit(std::uint64_t i, std::uint32_t seed) {
  std::uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<float>((z ^ (z >> 31)) >> 40) * (1.0f / 16777216.0f);
}
template <class T>
__global__ void fill(T* p, index_t n, std::uint32_t seed, float lo, float hi) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x)
    p[i] = T(lo + (hi - lo) * unit(i, seed));
}

// One gated-recurrence forward problem: a, b, x with layout `l` (sequences × T).
template <class T>
struct forward_case {
  std::string name;
  parscan::sequence_layout l;
  T *a = nullptr, *b = nullptr, *x = nullptr;
  size_t bytes() const { return size_t(l.num_sequences()) * l.length * sizeof(T); }
  void alloc() {
    const index_t n = l.num_sequences() * l.length;
    BENCH_CHECK(cudaMalloc(&a, bytes()));
    BENCH_CHECK(cudaMalloc(&b, bytes()));
    BENCH_CHECK(cudaMalloc(&x, bytes()));
    fill<<<2048, 256>>>(a, n, 1u, 0.9f, 1.0f);
    fill<<<2048, 256>>>(b, n, 2u, -1.0f, 1.0f);
    BENCH_CHECK(cudaDeviceSynchronize());
  }
  void release() {
    for (T* p : {a, b, x}) BENCH_CHECK(cudaFree(p));
  }
  cd::recurrence_forward_problem<T> problem() const {
    return {a, b, x, nullptr, nullptr, l, l, l, l.length, false, false, cd::is_lane_major(l)};
  }
  std::vector<T> sequence(const T* p, index_t s) const {
    std::vector<T> h(l.length);
    if (l.step_stride == 1)
      BENCH_CHECK(cudaMemcpy(h.data(), p + l.sequence_offset(s), l.length * sizeof(T), cudaMemcpyDeviceToHost));
    else
      BENCH_CHECK(cudaMemcpy2D(h.data(), sizeof(T), p + l.sequence_offset(s), l.step_stride * sizeof(T), sizeof(T),
                               l.length, cudaMemcpyDeviceToHost));
    return h;
  }
  double check() const {  // max over two sequences of max|x - ref| / max|ref|
    double worst = 0;
    std::vector<index_t> checked{0};
    if (l.num_sequences() > 1) checked.push_back(l.num_sequences() - 1);
    for (index_t s : checked) {
      const auto ha = sequence(a, s), hb = sequence(b, s), hx = sequence(x, s);
      double st = 0, err = 0, scale = 0;
      for (index_t t = 0; t < l.length; ++t) {
        st = double(float(ha[t])) * st + double(float(hb[t]));
        err = std::max(err, std::fabs(double(float(hx[t])) - st));
        scale = std::max(scale, std::fabs(st));
      }
      worst = std::max(worst, err / scale);
    }
    return worst;
  }
};

struct result_sink {
  double copy;
  std::vector<bench::row> rows;
  int failures = 0;
};

template <class Shape, class T>
void time_forward(const forward_case<T>& c, const std::string& variant, double tol, result_sink& out) {
  const auto P = c.problem();
  auto run = [&](int) {
    const auto s = cd::dispatch_scan<Shape>(P, parscan::affine_op<T>{}, c.l.num_sequences(), parscan::cuda_backend{});
    if (s != parscan::status::success) std::printf("%s: %s\n", variant.c_str(), parscan::to_string(s)), std::exit(1);
  };
  BENCH_CHECK(cudaMemset(c.x, 0xff, c.bytes()));
  run(0);
  BENCH_CHECK(cudaDeviceSynchronize());
  const double err = c.check();
  if (!(err <= tol)) ++out.failures, std::printf("FAILED %s %s: error %.3g\n", c.name.c_str(), variant.c_str(), err);
  const double us = bench::median_us(run, 15, 2);
  const double gbs = 3.0 * c.bytes() / us / 1e3;
  out.rows.push_back({c.name + " " + variant, sizeof(T) == 2 ? "bf16" : "f32", c.l.step_stride == 1 ? "(B,D,T)" : "(B,T,D)",
                      "fwd", std::to_string(c.l.num_sequences()) + "x" + std::to_string(c.l.length), us, gbs,
                      100 * gbs / out.copy, err});
}

// PerLane steps per lane (and per thread of a lane tile); LoopWarps, ChainedWarps, LaneWarps warps per block of each kernel;
// LoopStages, ChainedStages: tiles in flight through shared memory (0: loads into registers).
// WarpTiles: chained tiles of one warp each (scan_chained_staged_kernel<..., WarpTiles>) instead of one block.
// WindowChain: chained tiles of one block each with the window chain (scan_window_chain_kernel).
template <class T, int PerLane, int LoopWarps, int ChainedWarps, int LaneWarps, int LoopStages = 2, int ChainedStages = 2,
          bool WarpTiles = false, bool WindowChain = false>
void variant(const forward_case<T>& c, double tol, result_sink& out) {
  using S = cd::tile_shape_of<cd::recurrence_forward_problem<T>, PerLane, LoopWarps, ChainedWarps, LaneWarps, LoopStages,
                              ChainedStages, PerLane, WarpTiles, WindowChain>;
  const std::string name = "lane" + std::to_string(PerLane) + "/loop" + std::to_string(LoopWarps) + "w" +
                           (LoopStages ? "s" + std::to_string(LoopStages) : "") + "/chain" +
                           std::to_string(ChainedWarps) + "w" + (ChainedStages ? "s" + std::to_string(ChainedStages) : "") +
                           (WarpTiles ? "(warp tiles)" : "") + (WindowChain ? "(window chain)" : "") +
                           "/lanes" + std::to_string(LaneWarps) + "w";
  time_forward<S>(c, name, tol, out);
}

}  // namespace

int main(int argc, char** argv) {
  result_sink out{bench::copy_bandwidth_gbs()};
  using L = parscan::sequence_layout;
  {  // many time-contiguous sequences: the warp loop
    forward_case<float> c{"fwd (8,1536,4096)", L::time_contiguous(8 * 1536, 4096)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);  // the library's default
    variant<float, 16, 4, 8, 8, 0>(c, 1e-5, out);
    variant<float, 16, 2, 8, 8, 3>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 3>(c, 1e-5, out);
    variant<float, 8, 4, 8, 8, 3>(c, 1e-5, out);
    variant<float, 32, 2, 8, 8, 2>(c, 1e-5, out);
    c.release();
  }
  {
    forward_case<float> c{"fwd (8,1536,1024)", L::time_contiguous(8 * 1536, 1024)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);
    variant<float, 8, 4, 8, 8>(c, 1e-5, out);
    variant<float, 8, 4, 8, 8, 3>(c, 1e-5, out);
    variant<float, 4, 4, 8, 8, 4>(c, 1e-5, out);
    c.release();
  }
  {
    forward_case<parscan::bfloat16> c{"fwd bf16 (8,1536,4096)", L::time_contiguous(8 * 1536, 4096)};
    c.alloc();
    variant<parscan::bfloat16, 16, 4, 8, 8>(c, 1e-2, out);
    variant<parscan::bfloat16, 16, 4, 8, 8, 3>(c, 1e-2, out);
    variant<parscan::bfloat16, 32, 4, 8, 8, 2>(c, 1e-2, out);
    variant<parscan::bfloat16, 32, 2, 8, 8, 3>(c, 1e-2, out);
    c.release();
  }
  {  // few long sequences: chained tiles
    forward_case<float> c{"fwd (1,16,2^22)", L::time_contiguous(16, index_t(1) << 22)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 3>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 2>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 3>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 2, true>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 3, true>(c, 1e-5, out);
    variant<float, 32, 4, 4, 8, 2, 2, true>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 3, true>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 0, false, true>(c, 1e-5, out);
    c.release();
  }
  {  // one long sequence: chained tiles, 2^28 steps (the generic scan's case)
    forward_case<float> c{"fwd (1,1,2^28)", L::time_contiguous(1, index_t(1) << 28)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 3>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 3>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 2, true>(c, 1e-5, out);
    variant<float, 16, 4, 4, 8, 2, 3, true>(c, 1e-5, out);
    variant<float, 32, 4, 4, 8, 2, 2, true>(c, 1e-5, out);
    variant<float, 16, 4, 8, 8, 2, 0, false, true>(c, 1e-5, out);
    c.release();
  }
  {  // channel-last: lane tiles
    forward_case<float> c{"fwd (8,4096,1536)", L::channel_last(8, 4096, 1536)};
    c.alloc();
    variant<float, 16, 4, 8, 8>(c, 1e-5, out);
    variant<float, 32, 4, 8, 4>(c, 1e-5, out);
    variant<float, 32, 4, 8, 8>(c, 1e-5, out);
    variant<float, 64, 4, 8, 4>(c, 1e-5, out);
    c.release();
  }
  bench::print_table(out.rows, out.copy);
  bench::write_json(bench::json_arg(argc, argv), "bench_tuning", out.rows, out.copy);
  if (out.failures) std::printf("FAILED: %d variant(s) above tolerance\n", out.failures);
  return out.failures ? 1 : 0;
}
