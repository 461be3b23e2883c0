// benchmarks/bench_host.cpp — the host backend's inclusive_scan on one thread and on all of
// them: a float sum and affine<float> maps (x ↦ a·x + b) over one sequence of 2^26 steps.
// Each time is the median of several runs after a warm-up, on fresh non-zero random inputs;
// the two thread counts must give bitwise the same result (the program fails otherwise). Prints
// a table and, with --json FILE, writes the rows in the shape of the GPU benchmarks'
// (bench_common.cuh), with gpu = "host", so benchmarks/report.py takes them as they are.
// Plain C++: needs no CUDA.
//
//   bench_host [--n N] [--runs R] [--quick] [--json FILE]
#include <parscan/parscan.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

struct row {
  std::string name, dtype, shape;
  int threads;         // as asked of host_backend: 1, or 0 for all hardware threads
  double us, gbs;      // median time of one call; bytes read + written per second
  double speedup = 1;  // against threads = 1 on the same data
};

struct options {
  parscan::index_t n = parscan::index_t(1) << 26;
  int runs = 7;
  const char* json = nullptr;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--json" && has_value) o.json = argv[++i];
    else if (a == "--n" && has_value) o.n = std::strtoll(argv[++i], nullptr, 0);
    else if (a == "--runs" && has_value) o.runs = std::atoi(argv[++i]);
    else if (a == "--quick") o.n = parscan::index_t(1) << 24, o.runs = 5;
    else {
      std::fprintf(stderr, "usage: bench_host [--n N] [--runs R] [--quick] [--json FILE]\n");
      std::exit(2);
    }
  }
  o.runs = std::max(o.runs, 5);
  return o;
}

/// Median seconds of f() over `runs` calls, after one warm-up call.
template <class F>
double median_seconds(int runs, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Read + write bandwidth of a plain copy of `bytes` on every hardware thread, in GB/s: the
/// scale the scans' rows are quoted against.
double copy_bandwidth_gbs(std::size_t bytes, int runs) {
  std::vector<unsigned char> src(bytes, 0x5a), dst(bytes, 0);
  const int threads = parscan::host::detail::hardware_threads();
  const parscan::index_t pieces = 16 * static_cast<parscan::index_t>(threads);
  const std::size_t piece = (bytes + static_cast<std::size_t>(pieces) - 1) / static_cast<std::size_t>(pieces);
  const double s = median_seconds(runs, [&] {
    parscan::host::detail::parallel_for(pieces, threads, [&](parscan::index_t i) {
      const std::size_t first = std::min(bytes, static_cast<std::size_t>(i) * piece);
      const std::size_t count = std::min(bytes - first, piece);
      std::memcpy(dst.data() + first, src.data() + first, count);
    });
  });
  return 2.0 * static_cast<double>(bytes) / s / 1e9;
}

/// Times inclusive_scan with `Op` on one thread and on all, checks both give the same bits.
template <class T, class Op>
bool time_scan(const char* name, const char* dtype, const std::vector<T>& in, int runs, std::vector<row>& rows) {
  const auto n = static_cast<parscan::index_t>(in.size());
  std::vector<T> one(in.size()), all(in.size());
  const auto scan = [&](int threads, std::vector<T>& out) {
    const parscan::status s = parscan::inclusive_scan(parscan::host_backend{threads}, in.data(), out.data(), n, Op{});
    if (s != parscan::status::success) {
      std::fprintf(stderr, "%s: inclusive_scan failed: %s\n", name, parscan::to_string(s));
      std::exit(1);
    }
  };
  const double bytes = 2.0 * static_cast<double>(n) * sizeof(T);
  const std::string shape = "1x" + std::to_string(n);
  const double t1 = median_seconds(runs, [&] { scan(1, one); });
  const double t0 = median_seconds(runs, [&] { scan(0, all); });
  rows.push_back({name, dtype, shape, 1, t1 * 1e6, bytes / t1 / 1e9, 1.0});
  rows.push_back({name, dtype, shape, 0, t0 * 1e6, bytes / t0 / 1e9, t1 / t0});
  const bool same = std::memcmp(one.data(), all.data(), in.size() * sizeof(T)) == 0;
  if (!same) std::fprintf(stderr, "%s: threads = 1 and threads = 0 gave different bits\n", name);
  return same;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

std::string json_escaped(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) r += c;
  }
  return r;
}

std::string case_name(const row& r, int hw) {
  return r.name + (r.threads == 1 ? std::string(", 1 thread") : ", all " + std::to_string(hw) + " threads");
}

void write_json(const char* path, const std::vector<row>& rows, double copy_gbs, int hw) {
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path);
    std::exit(1);
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const char* commit = std::getenv("PARSCAN_COMMIT");
  std::fprintf(f,
               "{\n  \"program\": \"bench_host\",\n  \"gpu\": \"host\",\n  \"cpu\": \"%s\",\n  \"commit\": \"%s\",\n"
               "  \"date\": \"%s\",\n  \"hardware_concurrency\": %d,\n  \"copy_gbs\": %.2f,\n  \"results\": [\n",
               json_escaped(cpu_model()).c_str(), commit ? json_escaped(commit).c_str() : "unknown", date, hw, copy_gbs);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    // "extra": the speedup over one thread.
    std::fprintf(f,
                 "    {\"case\": \"%s\", \"dtype\": \"%s\", \"layout\": \"contiguous\", \"direction\": \"forward\", "
                 "\"shape\": \"%s\", \"threads\": %d, \"median_us\": %.3f, \"gbs\": %.2f, \"pct_copy\": %.2f, "
                 "\"extra\": %.6g}%s\n",
                 case_name(r, hw).c_str(), r.dtype.c_str(), r.shape.c_str(), r.threads, r.us, r.gbs,
                 100.0 * r.gbs / copy_gbs, r.speedup, i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  const int hw = parscan::host::detail::hardware_threads();
  const auto n = static_cast<std::size_t>(o.n);

  // Fresh inputs every run, none of them zero; the seed is printed to replay a run.
  const std::uint64_t seed = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::mt19937_64 engine(seed);
  const auto unit = [&] { return (static_cast<double>(engine() >> 11) + 0.5) * 0x1p-53; };  // in (0, 1)
  std::printf("bench_host: n = %lld, median of %d runs after a warm-up, %d hardware threads, seed %llu\n",
              static_cast<long long>(o.n), o.runs, hw, static_cast<unsigned long long>(seed));

  std::vector<row> rows;
  bool same = true;
  {
    std::vector<float> in(n);
    for (float& x : in) x = static_cast<float>(0.5 + unit());  // in (0.5, 1.5)
    same &= time_scan<float, parscan::sum_op<float>>("inclusive_scan sum_op<float>", "f32", in, o.runs, rows);
  }
  {
    // Gates in (0.5, 1), offsets in ±(0.01, 1): bounded states, no zero anywhere.
    std::vector<parscan::affine<float>> in(n);
    for (auto& x : in) {
      const double b = 0.01 + 0.99 * unit();
      x = parscan::affine<float>(static_cast<float>(0.5 + 0.5 * unit()), static_cast<float>(unit() < 0.5 ? -b : b));
    }
    same &= time_scan<parscan::affine<float>, parscan::affine_op<float>>("inclusive_scan affine_op<float>", "f32",
                                                                          in, o.runs, rows);
  }
  // Against a copy as large as the larger case's input.
  const double copy_gbs = copy_bandwidth_gbs(n * sizeof(parscan::affine<float>), o.runs);

  std::printf("\n%-44s %-6s %-14s %12s %9s %8s %8s\n", "case", "dtype", "shape", "median_us", "GB/s", "%copy", "speedup");
  for (const row& r : rows)
    std::printf("%-44s %-6s %-14s %12.1f %9.2f %7.1f%% %8.2f\n", case_name(r, hw).c_str(), r.dtype.c_str(),
                r.shape.c_str(), r.us, r.gbs, 100.0 * r.gbs / copy_gbs, r.speedup);
  std::printf("copy bandwidth (read+write, %d threads): %.1f GB/s on %s\n", hw, copy_gbs, cpu_model().c_str());
  std::printf("results of 1 thread and all threads bitwise equal: %s\n", same ? "yes" : "NO");

  if (o.json) write_json(o.json, rows, copy_gbs, hw);
  return same ? 0 : 1;
}
