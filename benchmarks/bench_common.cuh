// benchmarks/bench_common.cuh — timing and reporting shared by the benchmark programs.
// Every figure is quoted against a device-to-device copy measured in the same process.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include <parscan/numeric.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace bench {

#define BENCH_CHECK(call)                                                                  \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

/// Median time in microseconds per call of f(i), over `runs` samples after `warmup` calls, with
/// CUDA events. f receives a call index so callers can rotate buffers when the data fits in L2.
/// A sample times `batch` calls issued back to back on the stream, with batch chosen so that a
/// sample lasts at least ~100 µs: a call of a few microseconds is then timed as one of a stream
/// of calls, as a model issues them, not together with the host's launch latency on an idle GPU
/// (one call per sample timed the T = 128 forward at 16 µs, most of it launch latency).
/// `min_calls_per_sample` (--calls-per-sample N) raises the batch for longer calls too: with one
/// call per sample, a call of ~100 µs is timed with its host path and launch latency on an idle
/// GPU (the bf16 forward at (8, 1536, 4096): 104 µs of kernel under ncu, 112 µs a sample).
inline int min_calls_per_sample = 1;
inline double median_us(const std::function<void(int)>& f, int runs = 25, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) f(i);
  BENCH_CHECK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  BENCH_CHECK(cudaEventCreate(&a));
  BENCH_CHECK(cudaEventCreate(&b));
  auto sample = [&](int first, int batch) {
    BENCH_CHECK(cudaEventRecord(a));
    for (int j = 0; j < batch; ++j) f(first + j);
    BENCH_CHECK(cudaEventRecord(b));
    BENCH_CHECK(cudaEventSynchronize(b));
    BENCH_CHECK(cudaGetLastError());
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e3 / batch;
  };
  const double one = sample(warmup, 1);
  const int batch = std::max(min_calls_per_sample,
                             one >= 100.0 ? 1 : std::min(64, static_cast<int>(100.0 / std::max(one, 1.0)) + 1));
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) t.push_back(sample(warmup + 1 + i * batch, batch));
  BENCH_CHECK(cudaEventDestroy(a));
  BENCH_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written.
inline double copy_bandwidth_gbs(size_t bytes = size_t(1) << 30) {
  void *src, *dst;
  BENCH_CHECK(cudaMalloc(&src, bytes));
  BENCH_CHECK(cudaMalloc(&dst, bytes));
  BENCH_CHECK(cudaMemset(src, 0x5a, bytes));
  const double us = median_us([&](int) { BENCH_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }, 30);
  BENCH_CHECK(cudaFree(src));
  BENCH_CHECK(cudaFree(dst));
  return 2.0 * bytes / us / 1e3;
}

/// Median microseconds of a device-to-device copy that moves `moved` bytes (half read, half
/// written), rotating over enough buffers that each copy starts cold in L2, as the cases do: the
/// floor for a case that moves as many bytes, launch and ramp-up included.
inline double copy_us(size_t moved) {
  const size_t half = std::max<size_t>(moved / 2, 256);
  int v = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, 0));
  const size_t l2 = static_cast<size_t>(v);
  const int rot = static_cast<int>(std::min<size_t>(16, 4 * l2 / (2 * half) + 1));
  std::vector<void*> src(static_cast<size_t>(rot)), dst(static_cast<size_t>(rot));
  for (int r = 0; r < rot; ++r) {
    BENCH_CHECK(cudaMalloc(&src[static_cast<size_t>(r)], half));
    BENCH_CHECK(cudaMalloc(&dst[static_cast<size_t>(r)], half));
    BENCH_CHECK(cudaMemset(src[static_cast<size_t>(r)], 0x5a, half));
  }
  const double us = median_us([&](int i) {
    const size_t k = static_cast<size_t>(i % rot);
    BENCH_CHECK(cudaMemcpyAsync(dst[k], src[k], half, cudaMemcpyDeviceToDevice));
  });
  for (int r = 0; r < rot; ++r) {
    BENCH_CHECK(cudaFree(src[static_cast<size_t>(r)]));
    BENCH_CHECK(cudaFree(dst[static_cast<size_t>(r)]));
  }
  return us;
}

inline std::string gpu_name() {
  cudaDeviceProp p{};
  BENCH_CHECK(cudaGetDeviceProperties(&p, 0));
  return p.name;
}

inline int l2_bytes() {
  int v = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, 0));
  return v;
}

/// How many copies of a working set to rotate through so each run starts cold in L2.
inline int rotation_for(size_t working_set_bytes) {
  const size_t l2 = static_cast<size_t>(l2_bytes());
  if (working_set_bytes >= 4 * l2) return 1;
  return static_cast<int>(std::min<size_t>(16, (4 * l2) / std::max<size_t>(working_set_bytes, 1) + 1));
}

/// The short name of an element type in the tables and the JSON.
template <class T> struct dtype_name;
template <> struct dtype_name<float> { static constexpr const char* v = "f32"; };
template <> struct dtype_name<parscan::bfloat16> { static constexpr const char* v = "bf16"; };
template <> struct dtype_name<parscan::float16> { static constexpr const char* v = "f16"; };
template <> struct dtype_name<parscan::complex<float>> { static constexpr const char* v = "c64"; };

/// A counter-based hash (splitmix64's finaliser) and a uniform float in [0, 1) from it, for
/// filling inputs on the device without a random-number library.
__device__ __host__ inline std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__device__ inline float unit(std::uint64_t i, std::uint32_t seed) {
  return static_cast<float>(mix(i * 0x9e3779b97f4a7c15ull + seed) >> 40) * (1.0f / 16777216.0f);
}

/// bench_scan's 12-byte operator, also profiled by bench_tuning --phases: the largest value, its
/// first index, and how many elements were seen (associative, not commutative in the index).
struct argmax_count {
  float value;
  int index;
  int count;
};
struct argmax_count_op {
  __host__ __device__ argmax_count operator()(const argmax_count& e, const argmax_count& l) const {
    return {l.value > e.value ? l.value : e.value, l.value > e.value ? l.index : e.index, e.count + l.count};
  }
};

struct row {
  std::string name, dtype, layout, direction;
  std::string shape;
  double us, gbs, pct_copy;
  double extra = 0;  // case-specific (e.g. max error)
};

inline void print_table(const std::vector<row>& rows, double copy_gbs) {
  std::printf("\n%-34s %-6s %-15s %-8s %-22s %10s %9s %8s\n", "case", "dtype", "layout", "dir", "shape", "median_us",
              "GB/s", "%copy");
  for (const row& r : rows)
    std::printf("%-34s %-6s %-15s %-8s %-22s %10.2f %9.1f %7.1f%%\n", r.name.c_str(), r.dtype.c_str(),
                r.layout.c_str(), r.direction.c_str(), r.shape.c_str(), r.us, r.gbs, r.pct_copy);
  std::printf("copy bandwidth (read+write): %.1f GB/s on %s\n", copy_gbs, gpu_name().c_str());
}

inline void write_json(const char* path, const char* program, const std::vector<row>& rows, double copy_gbs) {
  if (!path) return;
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path);
    return;
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const char* commit = std::getenv("PARSCAN_COMMIT");
  std::fprintf(f, "{\n  \"program\": \"%s\",\n  \"gpu\": \"%s\",\n  \"commit\": \"%s\",\n  \"date\": \"%s\",\n", program,
               gpu_name().c_str(), commit ? commit : "unknown", date);
  std::fprintf(f, "  \"copy_gbs\": %.2f,\n  \"results\": [\n", copy_gbs);
  for (size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    std::fprintf(f,
                 "    {\"case\": \"%s\", \"dtype\": \"%s\", \"layout\": \"%s\", \"direction\": \"%s\", \"shape\": \"%s\", "
                 "\"median_us\": %.3f, \"gbs\": %.2f, \"pct_copy\": %.2f, \"extra\": %.6g}%s\n",
                 r.name.c_str(), r.dtype.c_str(), r.layout.c_str(), r.direction.c_str(), r.shape.c_str(), r.us, r.gbs,
                 r.pct_copy, r.extra, i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

inline const char* json_arg(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--json") return argv[i + 1];
  return nullptr;
}

/// The value after `--filter`, or "" (every row): benchmarks run only the rows whose name
/// contains it.
inline std::string filter_arg(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--filter") return argv[i + 1];
  return "";
}

/// Sets min_calls_per_sample from --calls-per-sample N (absent: 1).
inline void calls_per_sample_arg(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--calls-per-sample") min_calls_per_sample = std::max(1, std::atoi(argv[i + 1]));
}

inline bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == flag) return true;
  return false;
}

}  // namespace bench
