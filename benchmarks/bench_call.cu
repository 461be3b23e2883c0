// benchmarks/bench_call.cu — what one call of the library costs the host: tiny problems issued
// back to back, timed by the host clock over many calls (ended by one synchronisation), against
// an empty kernel launched the same way. This is the C++ floor under the Python package's
// per-call overhead (issue 14: a Python call adds at most 10 µs to the C++ call of the same
// shape; bench_python --tiny --cpp bench_call.json prints the difference): whatever the library
// itself spends on the host before its kernels are queued, Python cannot take back.
//
// Rows (µs per call; `extra`: over the empty launch of the same run):
//   the Python benchmark's tiny shapes, (B, T, D) = (1, 8, 32) along T (channel-last): the gated
//   forward f32 and bf16, with the library's workspace pool and with a workspace the caller
//   owns; the gated backward f32; the packed gated forward (two sequences of 3 and 5 steps,
//   D = 32); an inclusive sum and a reduce of the 32 channels' sequences (the generic core).
//   usage: bench_call [--json out.json] [--filter <part of a row name>]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <parscan/parscan.cuh>

#include "bench_common.cuh"

namespace {

using parscan::index_t;

__global__ void empty_kernel() {}

__global__ void fill_values(float* p, index_t n, float lo, float hi) {
  for (index_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x)
    p[i] = lo + (hi - lo) * bench::unit(i, 7u);
}

/// Host µs per call of f: the median over rounds of `calls` back-to-back calls, each round ended
/// by a synchronisation (so the queue never grows past one round).
double host_us_per_call(const std::function<bool()>& f, int calls = 20000, int rounds = 9) {
  for (int i = 0; i < 200; ++i)
    if (!f()) std::printf("a call failed\n"), std::exit(1);
  BENCH_CHECK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    BENCH_CHECK(cudaDeviceSynchronize());
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class T>
struct buffers {
  T *a, *b, *x, *dx, *da, *db;
  explicit buffers(index_t n) {
    for (T** p : {&a, &b, &x, &dx, &da, &db}) BENCH_CHECK(cudaMalloc(p, n * sizeof(T)));
  }
  ~buffers() {
    for (T* p : {a, b, x, dx, da, db}) cudaFree(p);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string filter = bench::filter_arg(argc, argv);
  const index_t B = 1, T = 8, D = 32, n = B * T * D;
  float* values;
  BENCH_CHECK(cudaMalloc(&values, 2 * n * sizeof(float)));
  fill_values<<<1, 256>>>(values, 2 * n, 0.6f, 1.0f);
  BENCH_CHECK(cudaDeviceSynchronize());

  buffers<float> f32(n);
  buffers<parscan::bfloat16> b16(n);
  for (auto* p : {f32.a, f32.b, f32.dx})
    BENCH_CHECK(cudaMemcpy(p, values, n * sizeof(float), cudaMemcpyDeviceToDevice));
  BENCH_CHECK(cudaMemset(b16.a, 0x3f, n * sizeof(parscan::bfloat16)));  // 0x3f3f: 0.75 in bfloat16
  BENCH_CHECK(cudaMemset(b16.b, 0x3f, n * sizeof(parscan::bfloat16)));

  const parscan::recurrence_shape shape{B, D, T, parscan::recurrence_layout::channel_last};
  parscan::cuda_backend pooled{};
  parscan::gated_forward_args<float> fwd{};
  fwd.shape = shape, fwd.a = f32.a, fwd.b = f32.b, fwd.x = f32.x;
  parscan::gated_forward_args<parscan::bfloat16> fwd16{};
  fwd16.shape = shape, fwd16.a = b16.a, fwd16.b = b16.b, fwd16.x = b16.x;
  parscan::gated_backward_args<float> bwd{};
  bwd.shape = shape, bwd.a = f32.a, bwd.x = f32.x, bwd.dx = f32.dx, bwd.da = f32.da, bwd.db = f32.db;

  // A workspace the caller owns, as large as any of these calls asks for.
  const std::size_t ws_bytes = std::max({parscan::gated_recurrence_workspace_size(fwd),
                                         parscan::gated_recurrence_workspace_size(fwd16),
                                         parscan::gated_recurrence_workspace_size(bwd), std::size_t(256)});
  parscan::cuda_backend owned{};
  BENCH_CHECK(cudaMalloc(&owned.workspace, ws_bytes));
  owned.workspace_bytes = ws_bytes;

  std::int64_t* cu;
  const std::int64_t offsets[3] = {0, 3, 8};
  BENCH_CHECK(cudaMalloc(&cu, sizeof offsets));
  BENCH_CHECK(cudaMemcpy(cu, offsets, sizeof offsets, cudaMemcpyHostToDevice));
  parscan::gated_varlen_forward_args<float> packed{};
  packed.shape = {2, D, T, cu, parscan::recurrence_layout::channel_last};
  packed.a = f32.a, packed.b = f32.b, packed.x = f32.x;

  // The generic core on the same tensor: 32 channels of 8 steps (channel stride 1, time stride D).
  const parscan::sequence_layout channels{D, T, 1, D, 1, 0};
  float* sums;
  BENCH_CHECK(cudaMalloc(&sums, D * sizeof(float)));
  const auto ok = [](parscan::status s) { return s == parscan::status::success; };

  struct call_case {
    std::string name, dtype;
    std::function<bool()> call;
  };
  const std::vector<call_case> cases = {
      {"empty kernel launch", "-", [] {
         empty_kernel<<<1, 32>>>();
         return cudaGetLastError() == cudaSuccess;
       }},
      {"gated forward, library pool", "f32", [&] { return ok(parscan::gated_recurrence_forward(pooled, fwd)); }},
      {"gated forward, own workspace", "f32", [&] { return ok(parscan::gated_recurrence_forward(owned, fwd)); }},
      {"gated forward, library pool", "bf16", [&] { return ok(parscan::gated_recurrence_forward(pooled, fwd16)); }},
      {"gated forward, own workspace", "bf16", [&] { return ok(parscan::gated_recurrence_forward(owned, fwd16)); }},
      {"gated backward, library pool", "f32", [&] { return ok(parscan::gated_recurrence_backward(pooled, bwd)); }},
      {"packed gated forward, library pool", "f32",
       [&] { return ok(parscan::gated_recurrence_forward(pooled, packed)); }},
      {"inclusive sum, library pool", "f32", [&] {
         return ok(parscan::inclusive_scan(pooled, f32.b, channels, f32.x, channels, parscan::sum_op<float>{}));
       }},
      {"reduce sum, library pool", "f32", [&] {
         return ok(parscan::reduce(pooled, f32.b, channels, parscan::sum_op<float>{}, 0.0f, sums));
       }},
  };

  std::vector<bench::row> rows;
  double launch_us = 0;
  for (const call_case& c : cases) {
    if (c.name != "empty kernel launch" && c.name.find(filter) == std::string::npos) continue;
    const double us = host_us_per_call(c.call);
    if (c.name == "empty kernel launch") launch_us = us;
    // Shapes named as bench_python names its tiny rows (B x D x T; packed: sequences, D, total).
    const std::string shape = c.name.find("packed") != std::string::npos
                                  ? "2 seqs x" + std::to_string(D) + " total " + std::to_string(T)
                                  : std::to_string(B) + "x" + std::to_string(D) + "x" + std::to_string(T);
    rows.push_back({c.name, c.dtype, "channel_last", c.name.find("backward") != std::string::npos ? "bwd" : "fwd",
                    shape, us, 0, 0, us - launch_us});
    std::printf("%-36s %-5s %8.2f us a call, %6.2f us over an empty launch\n", c.name.c_str(), c.dtype.c_str(), us,
                us - launch_us);
  }
  std::printf("on %s\n", bench::gpu_name().c_str());
  bench::write_json(bench::json_arg(argc, argv), "bench_call", rows, 0);
  for (void* p : {(void*)values, (void*)cu, (void*)sums, owned.workspace}) cudaFree(p);
  return 0;
}
