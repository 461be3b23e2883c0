// benchmarks/bench_scan.cu — parscan's generic algorithms against CUB, same process, same
// inputs. For each operator (int32, float and int64 sums, affine<float>, a 12-byte argmax
// struct, a 32-byte 2×2 int64 matrix product mod a prime), each algorithm (inclusive scan,
// exclusive scan, reduce) and each size n = 2^16 … 2^30, one row "<case> (parscan)" and one
// "<case> (cub)" with the same dtype and shape. Scans count the input read and the output
// written once, as a percentage of a device-to-device copy; reduces count the input once, and
// the read-only row (a kernel that only reads) is their ceiling. Then the batches: 8192 × 4096
// time-contiguous (against cub::DeviceScan::InclusiveScanByKey) and (8, 4096, 1024) channel-last
// float sums. Every result is checked against a sequential host loop (float64 for floats;
// exact for the integer and struct operators), for parscan and CUB alike.
//   usage: bench_scan [--json out.json] [--quick] [--min-log2n K] [--max-log2n K] [--every-size]
//                     [--only <case name part>|batch] [--algorithm inclusive|exclusive|reduce]
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <type_traits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <parscan/parscan.cuh>

#include "bench_common.cuh"

namespace {

using u64 = std::uint64_t;
using std::int64_t;

// ---------------------------------------------------------------------------------------------
// The cases: element, operator, how element i is made (same on host and device), init for the
// exclusive scan and reduce, and how far a result may be from the reference.

using bench::argmax_count;
using bench::argmax_count_op;

constexpr int64_t prime = 1000000007;  // < 2^30, so a·b + c·d fits in int64
struct mat2 {                          // 32 bytes
  int64_t m[2][2];
};
struct mat2_mod_op {  // later · earlier mod p: not commutative
  __host__ __device__ mat2 operator()(const mat2& e, const mat2& l) const {
    mat2 r;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) r.m[i][j] = (l.m[i][0] * e.m[0][j] % prime + l.m[i][1] * e.m[1][j] % prime) % prime;
    return r;
  }
};

__host__ __device__ inline u64 hash64(u64 i, u64 seed) { return bench::mix(i * 0x9e3779b97f4a7c15ull + seed); }
__host__ __device__ inline float unit_f(u64 i, u64 seed) { return static_cast<float>(hash64(i, seed) >> 40) * (1.0f / 16777216.0f); }

struct int32_sum {
  using T = int;
  using op = parscan::sum_op<int>;
  static constexpr const char* name = "int32 sum";
  static constexpr const char* dtype = "i32";
  __host__ __device__ static T make(u64 i, u64 s) { return static_cast<int>(hash64(i, s) % 3) - 1; }  // |sum| ≤ n
  static T init() { return 0; }
  using ref_t = int64_t;
  static ref_t ref_start() { return 0; }
  static ref_t ref_step(ref_t r, T x) { return r + x; }
  static double error(const T& got, ref_t want, double) { return got == want ? 0 : 1; }
};
struct float_sum {
  using T = float;
  using op = parscan::sum_op<float>;
  static constexpr const char* name = "float sum";
  static constexpr const char* dtype = "f32";
  __host__ __device__ static T make(u64 i, u64 s) { return 2.0f * unit_f(i, s) - 1.0f; }
  static T init() { return 0; }
  using ref_t = double;
  static ref_t ref_start() { return 0; }
  static ref_t ref_step(ref_t r, T x) { return r + x; }
  // Relative to the sum of |x| so far (which `scale` carries): float sums lose ~log2(n) ulps of it.
  static double error(const T& got, ref_t want, double scale) { return std::fabs(double(got) - want) / (scale + 1); }
};
struct int64_sum {
  using T = long long;
  using op = parscan::sum_op<long long>;
  static constexpr const char* name = "int64 sum";
  static constexpr const char* dtype = "i64";
  __host__ __device__ static T make(u64 i, u64 s) { return static_cast<long long>(hash64(i, s) >> 33) - (1ll << 30); }
  static T init() { return 0; }
  using ref_t = long long;
  static ref_t ref_start() { return 0; }
  static ref_t ref_step(ref_t r, T x) { return r + x; }
  static double error(const T& got, ref_t want, double) { return got == want ? 0 : 1; }
};
struct affine_f32 {
  using T = parscan::affine<float>;
  using op = parscan::affine_op<float>;
  static constexpr const char* name = "affine scan";
  static constexpr const char* dtype = "affine<f32>";
  __host__ __device__ static T make(u64 i, u64 s) { return T(0.5f + 0.5f * unit_f(2 * i, s), 2.0f * unit_f(2 * i + 1, s) - 1.0f); }
  static T init() { return T(1.0f, 0.0f); }
  using ref_t = double;  // the state x, from x = 0
  static ref_t ref_start() { return 0; }
  static ref_t ref_step(ref_t r, T x) { return double(x.a) * r + double(x.b); }
  static double error(const T& got, ref_t want, double) { return std::fabs(double(got.b) - want); }  // |x| ≤ 2
};
struct argmax12 {
  using T = argmax_count;
  using op = argmax_count_op;
  static constexpr const char* name = "argmax struct";
  static constexpr const char* dtype = "12B";
  __host__ __device__ static T make(u64 i, u64 s) { return {static_cast<float>(hash64(i, s) >> 40), static_cast<int>(i & 0x7fffffff), 1}; }
  static T init() { return {-1.0f, -1, 0}; }
  using ref_t = argmax_count;
  static ref_t ref_start() { return init(); }
  static ref_t ref_step(ref_t r, T x) { return op{}(r, x); }
  static double error(const T& got, ref_t want, double) {
    return got.value == want.value && got.index == want.index && got.count == want.count ? 0 : 1;
  }
};
struct mat2_mod {
  using T = mat2;
  using op = mat2_mod_op;
  static constexpr const char* name = "2x2 matrix mod p";
  static constexpr const char* dtype = "32B";
  __host__ __device__ static T make(u64 i, u64 s) {
    T r;
    for (int k = 0; k < 4; ++k) r.m[k / 2][k % 2] = static_cast<int64_t>(hash64(4 * i + k, s) % prime);
    return r;
  }
  static T init() { return {{{1, 0}, {0, 1}}}; }
  using ref_t = mat2;
  static ref_t ref_start() { return init(); }
  static ref_t ref_step(ref_t r, T x) { return op{}(r, x); }
  static double error(const T& got, ref_t want, double) {
    for (int k = 0; k < 4; ++k)
      if (got.m[k / 2][k % 2] != want.m[k / 2][k % 2]) return 1;
    return 0;
  }
};

template <class C>
__global__ void fill(typename C::T* e, int64_t n, u64 seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    e[i] = C::make(static_cast<u64>(i), seed);
}

enum class algo { inclusive, exclusive, reduce };
const char* algo_name(algo a) { return a == algo::inclusive ? "inclusive" : a == algo::exclusive ? "exclusive" : "reduce"; }

// The host loop's results at every `stride`-th index (all of them when stride is 1): what the
// inclusive scan (no init) and the exclusive scan (from init) give there, the reduce's total
// (from init), and the sum of |x| so far (the float sum's error scale).
template <class C>
struct reference {
  int64_t stride;
  std::vector<typename C::ref_t> inclusive, exclusive;
  std::vector<double> scale;
  typename C::ref_t total;
};

template <class C>
reference<C> host_reference(int64_t n, u64 seed, int64_t stride) {
  using T = typename C::T;
  reference<C> ref{stride, {}, {}, {}, C::ref_start()};
  typename C::ref_t inc = C::ref_start(), exc = C::ref_step(C::ref_start(), C::init());
  double scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T x = C::make(static_cast<u64>(i), seed);
    const bool sampled = i % stride == 0;
    if (sampled) ref.exclusive.push_back(exc);
    inc = i == 0 ? C::ref_step(C::ref_start(), x) : C::ref_step(inc, x);
    exc = C::ref_step(exc, x);
    if constexpr (std::is_same_v<T, float>) scale += std::fabs(double(x));  // the float sum's error scale
    if (sampled) ref.inclusive.push_back(inc), ref.scale.push_back(scale);
  }
  ref.total = exc;
  return ref;
}

// Every stride-th output, gathered on the device so that a check of 2^30 elements copies little.
template <class T>
__global__ void gather(const T* out, int64_t stride, int64_t count, T* sampled) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < count; j += int64_t(gridDim.x) * blockDim.x)
    sampled[j] = out[j * stride];
}


template <class C>
double check(algo a, const reference<C>& ref, const typename C::T* d_out, typename C::T* d_sampled) {
  using T = typename C::T;
  const int64_t count = a == algo::reduce ? 1 : static_cast<int64_t>(ref.inclusive.size());
  std::vector<T> got(static_cast<size_t>(count));
  if (a == algo::reduce) {
    BENCH_CHECK(cudaMemcpy(got.data(), d_out, sizeof(T), cudaMemcpyDeviceToHost));
    return C::error(got[0], ref.total, ref.scale.back());
  }
  gather<<<256, 256>>>(d_out, ref.stride, count, d_sampled);
  BENCH_CHECK(cudaMemcpy(got.data(), d_sampled, got.size() * sizeof(T), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (size_t j = 0; j < got.size(); ++j)
    worst = std::max(worst, a == algo::inclusive ? C::error(got[j], ref.inclusive[j], ref.scale[j])
                                                 : C::error(got[j], ref.exclusive[j], j == 0 ? 0 : ref.scale[j - 1]));
  return worst;
}

constexpr double tolerance = 1e-5;

struct context {
  double copy_gbs, read_gbs;
  std::vector<bench::row> rows;
  int failures = 0;
  bool quick = false;
  std::string algorithm;  // --algorithm: only this one (for ncu), else all three
  bool selected = false;  // --only: cases chosen by name (the 32-byte case then runs at 2^30 too)
};

template <class C>
void run_case(context& ctx, int log2n) {
  using T = typename C::T;
  using Op = typename C::op;
  const int64_t n = int64_t(1) << log2n;
  const size_t bytes = size_t(n) * sizeof(T);
  size_t free_b = 0, total_b = 0;
  BENCH_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const int rot = bench::rotation_for(2 * bytes);
  if (sizeof(T) > 16 && log2n > 28 && !ctx.selected) {  // 64 GB, and a host check of 2^30 modular products
    std::printf("%s n=2^%d: skipped in the whole run (64 GB of buffers); run it with --only\n", C::name, log2n);
    return;
  }
  if (2 * bytes * rot + (size_t(1) << 30) > free_b) {
    std::printf("%s n=2^%d: skipped (needs %.1f GB)\n", C::name, log2n, 2.0 * bytes * rot / 1e9);
    return;
  }
  std::vector<T*> in(rot), out(rot);
  for (int r = 0; r < rot; ++r) {
    BENCH_CHECK(cudaMalloc(&in[r], bytes));
    BENCH_CHECK(cudaMalloc(&out[r], bytes));
    fill<C><<<1024, 256>>>(in[r], n, 1234u + r);
  }
  T* result = nullptr;
  BENCH_CHECK(cudaMalloc(&result, sizeof(T) * rot));
  BENCH_CHECK(cudaDeviceSynchronize());
  const std::string shape = "n=2^" + std::to_string(log2n);
  const std::size_t ws_bytes = parscan::scan_workspace_size<T>(parscan::sequence_layout::contiguous(n), Op{});
  void* ws = nullptr;
  BENCH_CHECK(cudaMalloc(&ws, ws_bytes + 256));
  const parscan::cuda_backend be{nullptr, ws, ws_bytes + 256, nullptr};
  size_t cub_bytes = 0, b1 = 0, b2 = 0, b3 = 0;
  BENCH_CHECK(cub::DeviceScan::InclusiveScan(nullptr, b1, in[0], out[0], Op{}, n));
  BENCH_CHECK(cub::DeviceScan::ExclusiveScan(nullptr, b2, in[0], out[0], Op{}, C::init(), n));
  BENCH_CHECK(cub::DeviceReduce::Reduce(nullptr, b3, in[0], result, n, Op{}, C::init()));
  cub_bytes = std::max({b1, b2, b3});
  // Every element up to 2^24; beyond, every 2^(log2n - 20)-th (the loop still visits them all).
  const reference<C> ref = host_reference<C>(n, 1234u, log2n > 24 ? int64_t(1) << (log2n - 20) : 1);
  T* sampled = nullptr;
  BENCH_CHECK(cudaMalloc(&sampled, ref.inclusive.size() * sizeof(T)));
  void* cub_ws = nullptr;
  BENCH_CHECK(cudaMalloc(&cub_ws, cub_bytes));

  for (algo a : {algo::inclusive, algo::exclusive, algo::reduce}) {
    if (!ctx.algorithm.empty() && ctx.algorithm != algo_name(a)) continue;
    auto run_parscan = [&](int i) {
      const int r = i % rot;
      parscan::status s;
      if (a == algo::inclusive) s = parscan::inclusive_scan(be, in[r], out[r], n, Op{});
      else if (a == algo::exclusive) s = parscan::exclusive_scan(be, in[r], out[r], n, Op{}, C::init());
      else s = parscan::reduce(be, in[r], n, Op{}, C::init(), result + r);
      if (s != parscan::status::success) std::printf("parscan failed: %s\n", parscan::to_string(s)), std::exit(1);
    };
    auto run_cub = [&](int i) {
      const int r = i % rot;
      size_t wb = cub_bytes;
      if (a == algo::inclusive) BENCH_CHECK(cub::DeviceScan::InclusiveScan(cub_ws, wb, in[r], out[r], Op{}, n));
      else if (a == algo::exclusive) BENCH_CHECK(cub::DeviceScan::ExclusiveScan(cub_ws, wb, in[r], out[r], Op{}, C::init(), n));
      else BENCH_CHECK(cub::DeviceReduce::Reduce(cub_ws, wb, in[r], result + r, n, Op{}, C::init()));
    };
    const size_t moved = a == algo::reduce ? bytes : 2 * bytes;
    const double ceiling = a == algo::reduce ? ctx.read_gbs : ctx.copy_gbs;
    for (int lib = 0; lib < 2; ++lib) {
      const std::function<void(int)> f = lib == 0 ? std::function<void(int)>(run_parscan) : std::function<void(int)>(run_cub);
      f(0);
      BENCH_CHECK(cudaDeviceSynchronize());
      const double err = check<C>(a, ref, a == algo::reduce ? result : out[0], sampled);
      const double us = bench::median_us(f, ctx.quick ? 10 : 25);
      const double gbs = double(moved) / us / 1e3;
      ctx.rows.push_back({std::string(C::name) + " " + algo_name(a) + (lib == 0 ? " (parscan)" : " (cub)"), C::dtype,
                          "contiguous", "fwd", shape, us, gbs, 100 * gbs / ceiling, err});
      // CUB's float results are checked with the same tolerance, but only parscan's count as failures.
      if (lib == 0 && !(err <= tolerance)) {
        ++ctx.failures;
        std::printf("FAILED: %s %s n=2^%d error %.3g\n", C::name, algo_name(a), log2n, err);
      }
    }
  }
  BENCH_CHECK(cudaFree(cub_ws));
  BENCH_CHECK(cudaFree(ws));
  BENCH_CHECK(cudaFree(result));
  BENCH_CHECK(cudaFree(sampled));
  for (int r = 0; r < rot; ++r) {
    BENCH_CHECK(cudaFree(in[r]));
    BENCH_CHECK(cudaFree(out[r]));
  }
}

// A kernel that only reads (16-byte loads, one word written per block): the reduce's ceiling.
__global__ void read_only(const uint4* p, int64_t n16, unsigned* sink) {
  unsigned x = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n16; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) sink[blockIdx.x] = x;  // keeps the loads; practically never stores
}

double read_only_gbs() {
  const size_t bytes = size_t(1) << 30;
  void* p;
  unsigned* sink;
  BENCH_CHECK(cudaMalloc(&p, bytes));
  BENCH_CHECK(cudaMalloc(&sink, 4096 * sizeof(unsigned)));
  BENCH_CHECK(cudaMemset(p, 0x5a, bytes));
  int sms = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double us = bench::median_us([&](int) {
    read_only<<<sms * 8, 256>>>(static_cast<const uint4*>(p), int64_t(bytes / 16), sink);
  });
  BENCH_CHECK(cudaFree(p));
  BENCH_CHECK(cudaFree(sink));
  return double(bytes) / us / 1e3;
}

// Batches of float sums: 8192 × 4096 time-contiguous (CUB: InclusiveScanByKey, key = sequence)
// and (8, 4096, 1024) channel-last (no CUB counterpart).
struct sequence_of {
  int64_t length;
  __host__ __device__ int operator()(int64_t i) const { return static_cast<int>(i / length); }
};

void run_batches(context& ctx) {
  for (int layout = 0; layout < 2; ++layout) {
    const int64_t B = 8, T = 4096, D = 1024, rows = 8192;
    const int64_t n = layout == 0 ? rows * T : B * T * D;
    const parscan::sequence_layout l =
        layout == 0 ? parscan::sequence_layout::time_contiguous(rows, T) : parscan::sequence_layout::channel_last(B, T, D);
    const size_t bytes = size_t(n) * sizeof(float);
    const int rot = bench::rotation_for(2 * bytes);
    std::vector<float*> in(rot), out(rot);
    for (int r = 0; r < rot; ++r) {
      BENCH_CHECK(cudaMalloc(&in[r], bytes));
      BENCH_CHECK(cudaMalloc(&out[r], bytes));
      fill<float_sum><<<1024, 256>>>(in[r], n, 99u + r);
    }
    BENCH_CHECK(cudaDeviceSynchronize());
    const std::size_t ws_bytes = parscan::scan_workspace_size<float>(l, parscan::sum_op<float>{});
    void* ws = nullptr;
    BENCH_CHECK(cudaMalloc(&ws, ws_bytes + 256));
    const parscan::cuda_backend be{nullptr, ws, ws_bytes + 256, nullptr};
    auto run_parscan = [&](int i) {
      const auto s = parscan::inclusive_scan(be, in[i % rot], out[i % rot], l, parscan::sum_op<float>{});
      if (s != parscan::status::success) std::printf("parscan failed: %s\n", parscan::to_string(s)), std::exit(1);
    };
    // Check: every sequence against a float64 loop, relative to its sum of |x|.
    auto check_out = [&]() {
      std::vector<float> h_in(static_cast<size_t>(n)), h_out(static_cast<size_t>(n));
      BENCH_CHECK(cudaMemcpy(h_in.data(), in[0], bytes, cudaMemcpyDeviceToHost));
      BENCH_CHECK(cudaMemcpy(h_out.data(), out[0], bytes, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (int64_t s = 0; s < l.num_sequences(); ++s) {
        double r = 0, scale = 0;
        for (int64_t t = 0; t < l.length; ++t) {
          const size_t at = static_cast<size_t>(l.offset(s, t));
          r += h_in[at];
          scale += std::fabs(double(h_in[at]));
          worst = std::max(worst, std::fabs(double(h_out[at]) - r) / (scale + 1));
        }
      }
      return worst;
    };
    const std::string layout_name = layout == 0 ? "time-contiguous" : "channel-last";
    const std::string shape = layout == 0 ? "8192x4096" : "(8,4096,1024)";
    run_parscan(0);
    BENCH_CHECK(cudaDeviceSynchronize());
    const double err = check_out();
    if (!(err <= tolerance)) ++ctx.failures, std::printf("FAILED: batch %s error %.3g\n", layout_name.c_str(), err);
    const double us = bench::median_us(run_parscan, ctx.quick ? 10 : 25);
    const double gbs = 2.0 * bytes / us / 1e3;
    ctx.rows.push_back({"float sum batch (parscan)", "f32", layout_name, "fwd", shape, us, gbs, 100 * gbs / ctx.copy_gbs, err});
    if (layout == 0) {
      auto keys = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0), sequence_of{T});
      size_t cb = 0;
      BENCH_CHECK(cub::DeviceScan::InclusiveScanByKey(nullptr, cb, keys, in[0], out[0], parscan::sum_op<float>{}, n));
      void* cws = nullptr;
      BENCH_CHECK(cudaMalloc(&cws, cb));
      auto run_cub = [&](int i) {
        size_t wb = cb;
        BENCH_CHECK(cub::DeviceScan::InclusiveScanByKey(cws, wb, keys, in[i % rot], out[i % rot], parscan::sum_op<float>{}, n));
      };
      run_cub(0);
      BENCH_CHECK(cudaDeviceSynchronize());
      const double cerr = check_out();
      const double cus = bench::median_us(run_cub, ctx.quick ? 10 : 25);
      const double cgbs = 2.0 * bytes / cus / 1e3;
      ctx.rows.push_back({"float sum batch (cub)", "f32", layout_name, "fwd", shape, cus, cgbs, 100 * cgbs / ctx.copy_gbs, cerr});
      BENCH_CHECK(cudaFree(cws));
    }
    BENCH_CHECK(cudaFree(ws));
    for (int r = 0; r < rot; ++r) {
      BENCH_CHECK(cudaFree(in[r]));
      BENCH_CHECK(cudaFree(out[r]));
    }
  }
}

// The value after `flag`, or "" where it is absent.
std::string arg_string(int argc, char** argv, const char* flag) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == flag) return argv[i + 1];
  return "";
}
int arg_int(int argc, char** argv, const char* flag, int fallback) {
  const std::string value = arg_string(argc, argv, flag);
  return value.empty() ? fallback : std::atoi(value.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  context ctx;
  ctx.quick = bench::has_flag(argc, argv, "--quick");
  const int max_log2n = arg_int(argc, argv, "--max-log2n", ctx.quick ? 24 : 30);
  const int min_log2n = arg_int(argc, argv, "--min-log2n", 16);
  const bool every_size = bench::has_flag(argc, argv, "--every-size");  // else 2^16, 2^20, 2^24, 2^28, 2^30
  const std::string only = arg_string(argc, argv, "--only");
  ctx.selected = !only.empty();
  ctx.algorithm = arg_string(argc, argv, "--algorithm");
  ctx.copy_gbs = bench::copy_bandwidth_gbs();
  ctx.read_gbs = read_only_gbs();
  auto sizes = [&](auto tag) {
    using C = decltype(tag);
    if (!only.empty() && std::string(C::name).find(only) == std::string::npos) return;
    for (int log2n = min_log2n; log2n <= max_log2n; ++log2n)
      if (every_size || log2n % 4 == 0 || log2n == 30) run_case<C>(ctx, log2n);
  };
  sizes(int32_sum{});
  sizes(float_sum{});
  sizes(int64_sum{});
  sizes(affine_f32{});
  sizes(argmax12{});
  sizes(mat2_mod{});
  if (only.empty() || only == "batch") run_batches(ctx);
  bench::print_table(ctx.rows, ctx.copy_gbs);
  std::printf("read-only streaming kernel: %.1f GB/s (the reduce rows' %% column is against it)\n", ctx.read_gbs);
  bench::write_json(bench::json_arg(argc, argv), "bench_scan", ctx.rows, ctx.copy_gbs);
  if (ctx.failures) std::printf("FAILED: %d result(s) above tolerance %g\n", ctx.failures, tolerance);
  return ctx.failures ? 1 : 0;
}
