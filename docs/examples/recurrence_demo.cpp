// docs/examples/recurrence_demo.cpp — the gated first-order recurrence
//     x[t] = a[t]·x[t-1] + b[t],   x[-1] = x0
// over a batch of B·D channels of T steps (time-contiguous, (B, D, T)), with gates a in
// (0.9, 1), inputs b ~ N(0, 1) and a random initial state x0. It runs
// parscan::gated_recurrence_forward on the GPU when one is available (cuda_backend, device
// buffers from cudaMalloc) and on the CPU otherwise (host_backend), times it, and checks it
// against a sequential loop in double precision.
//
//   recurrence_demo [--host | --cuda] [B D T]      (default 4 256 4096)
//
// Exit code 0 when the call succeeds and the largest relative error
// max|x - ref| / max|ref| is at most 1e-4.
#include <parscan/parscan.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#ifndef PARSCAN_HAS_CUDA
#define PARSCAN_HAS_CUDA 0
#endif

#if PARSCAN_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace {

using clock_type = std::chrono::steady_clock;

struct problem {
  parscan::index_t batch = 4, channels = 256, length = 4096;
  std::vector<float> a, b, x0;
  parscan::index_t channels_total() const { return batch * channels; }
  parscan::index_t elements() const { return batch * channels * length; }
};

problem make_problem(parscan::index_t B, parscan::index_t D, parscan::index_t T) {
  problem p;
  p.batch = B, p.channels = D, p.length = T;
  std::mt19937_64 rng(2023);
  std::uniform_real_distribution<float> gate(0.9f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.a.resize(static_cast<std::size_t>(p.elements()));
  p.b.resize(p.a.size());
  p.x0.resize(static_cast<std::size_t>(p.channels_total()));
  for (auto& v : p.a) v = gate(rng);
  for (auto& v : p.b) v = normal(rng);
  for (auto& v : p.x0) v = normal(rng);
  return p;
}

// The sequential recurrence in double precision: the reference.
std::vector<double> reference(const problem& p) {
  std::vector<double> x(p.a.size());
  for (parscan::index_t c = 0; c < p.channels_total(); ++c) {
    double state = p.x0[static_cast<std::size_t>(c)];
    const std::size_t base = static_cast<std::size_t>(c * p.length);
    for (parscan::index_t t = 0; t < p.length; ++t) {
      const std::size_t i = base + static_cast<std::size_t>(t);
      state = double(p.a[i]) * state + double(p.b[i]);
      x[i] = state;
    }
  }
  return x;
}

parscan::gated_forward_args<float> make_args(const problem& p, const float* a, const float* b, float* x,
                                             const float* x0) {
  parscan::gated_forward_args<float> args;
  args.shape = {p.batch, p.channels, p.length, parscan::recurrence_layout::time_contiguous};
  args.a = a;
  args.b = b;
  args.x = x;
  args.x0 = x0;
  return args;
}

struct run_result {
  parscan::status status = parscan::status::success;
  double seconds = 0;  // mean time of one call
  std::vector<float> x;
  std::string error;  // a CUDA error, if any
};

constexpr int timed_calls = 5;

run_result run_host(const problem& p) {
  run_result r;
  r.x.assign(p.a.size(), 0.0f);
  const auto args = make_args(p, p.a.data(), p.b.data(), r.x.data(), p.x0.data());
  r.status = parscan::gated_recurrence_forward(parscan::host_backend{}, args);  // warm-up
  if (r.status != parscan::status::success) return r;
  const auto start = clock_type::now();
  for (int i = 0; i < timed_calls && r.status == parscan::status::success; ++i)
    r.status = parscan::gated_recurrence_forward(parscan::host_backend{}, args);
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count() / timed_calls;
  return r;
}

#if PARSCAN_HAS_CUDA
bool cuda_ok(cudaError_t e, run_result& r, const char* what) {
  if (e == cudaSuccess) return true;
  r.error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

run_result run_cuda(const problem& p) {
  run_result r;
  const std::size_t n = p.a.size(), n0 = p.x0.size();
  float *a = nullptr, *b = nullptr, *x = nullptr, *x0 = nullptr;
  auto release = [&] {
    cudaFree(a);
    cudaFree(b);
    cudaFree(x);
    cudaFree(x0);
  };
  if (!cuda_ok(cudaMalloc(&a, n * sizeof(float)), r, "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&b, n * sizeof(float)), r, "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&x, n * sizeof(float)), r, "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&x0, n0 * sizeof(float)), r, "cudaMalloc") ||
      !cuda_ok(cudaMemcpy(a, p.a.data(), n * sizeof(float), cudaMemcpyHostToDevice), r, "cudaMemcpy") ||
      !cuda_ok(cudaMemcpy(b, p.b.data(), n * sizeof(float), cudaMemcpyHostToDevice), r, "cudaMemcpy") ||
      !cuda_ok(cudaMemcpy(x0, p.x0.data(), n0 * sizeof(float), cudaMemcpyHostToDevice), r, "cudaMemcpy")) {
    release();
    return r;
  }
  const parscan::cuda_backend backend{};  // default stream; workspace from parscan's pool
  const auto args = make_args(p, a, b, x, x0);

  r.status = parscan::gated_recurrence_forward(backend, args);  // warm-up
  if (r.status == parscan::status::success && cuda_ok(cudaDeviceSynchronize(), r, "warm-up")) {
    const auto start = clock_type::now();
    for (int i = 0; i < timed_calls && r.status == parscan::status::success; ++i)
      r.status = parscan::gated_recurrence_forward(backend, args);
    if (cuda_ok(cudaDeviceSynchronize(), r, "timed calls")) {
      r.seconds = std::chrono::duration<double>(clock_type::now() - start).count() / timed_calls;
      r.x.resize(n);
      cuda_ok(cudaMemcpy(r.x.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost), r, "cudaMemcpy");
    }
  }
  release();
  return r;
}

std::string gpu_name() {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "unknown GPU";
  return prop.name;
}
#endif

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--host | --cuda] [B D T]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  enum class choice { automatic, host, cuda } want = choice::automatic;
  std::vector<long long> dims;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--host") == 0) want = choice::host;
    else if (std::strcmp(argv[i], "--cuda") == 0) want = choice::cuda;
    else {
      char* end = nullptr;
      const long long v = std::strtoll(argv[i], &end, 10);
      if (end == argv[i] || *end != '\0' || v <= 0) return usage(argv[0]);
      dims.push_back(v);
    }
  }
  if (!dims.empty() && dims.size() != 3) return usage(argv[0]);
  if (dims.empty()) dims = {4, 256, 4096};

  const bool have_cuda = parscan::cuda_available();
  if (want == choice::cuda && !have_cuda) {
    std::printf("recurrence_demo: --cuda asked for, but %s\n",
                PARSCAN_HAS_CUDA ? "no CUDA device is visible" : "parscan was built without CUDA");
    return 1;
  }
  const bool use_cuda = want == choice::cuda || (want == choice::automatic && have_cuda);

  const problem p = make_problem(dims[0], dims[1], dims[2]);
  std::printf("gated recurrence x[t] = a[t]*x[t-1] + b[t], float\n");
  std::printf("shape    B=%lld D=%lld T=%lld (time-contiguous, %lld elements)\n", (long long)p.batch,
              (long long)p.channels, (long long)p.length, (long long)p.elements());

  run_result r;
  if (use_cuda) {
#if PARSCAN_HAS_CUDA
    std::printf("backend  cuda_backend on %s\n", gpu_name().c_str());
    r = run_cuda(p);
#else
    r.error = "parscan was built without CUDA";  // unreachable: cuda_available() is false then
#endif
  } else {
    std::printf("backend  host_backend%s\n", have_cuda ? "" : " (no CUDA device available)");
    r = run_host(p);
  }

  if (!r.error.empty()) {
    std::printf("error    %s\n", r.error.c_str());
    return 1;
  }
  if (r.status != parscan::status::success) {
    std::printf("status   %s\n", parscan::to_string(r.status));
    return 1;
  }

  const std::vector<double> ref = reference(p);
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(r.x[i]) - ref[i]));
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  const double rel = max_ref > 0 ? max_diff / max_ref : max_diff;
  const double bytes = 3.0 * double(p.elements()) * sizeof(float);  // read a and b, write x

  std::printf("time     %.3f ms per call (mean of %d, after a warm-up call; %.1f GB/s of a, b and x)\n",
              r.seconds * 1e3, timed_calls, bytes / r.seconds * 1e-9);
  std::printf("error    max|x - ref| / max|ref| = %.3g (ref: sequential loop in double)\n", rel);
  const bool ok = rel <= 1e-4;
  std::printf("result   %s\n", ok ? "ok" : "FAILED: error above 1e-4");
  return ok ? 0 : 1;
}
