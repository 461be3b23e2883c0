// benchmarks/bench_distributed.cu — sequence-parallel scans over NCCL (parscan/distributed.hpp)
// on 2 GPUs of one host against one GPU doing one rank's share:
//   1. a generic affine scan (affine_op<float>) of 2^31 elements split evenly over 2 GPUs, against
//      one GPU scanning 2^30: scaling = 2 · t(one GPU, 2^30) / t(2 GPUs, 2^31);
//   2. the gated recurrence forward + backward, bf16, B·D = 12288, T = 2^16 per rank, against one
//      GPU with T = 2^16: scaling likewise;
// and the time of the exchange alone (one ncclAllGather of each call's blocks) per call.
//
// Usage (one process drives both GPUs, one thread each; NVLink multicast must stay off):
//   NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
//     ./bench_distributed [--quick]
// --quick divides every size by 16. Needs ≥ 2 GPUs with ≥ 40 GB each (2^30 affine<float> in and
// out is 16 GiB per GPU).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include <parscan/distributed.cuh>
#include <parscan/parscan.cuh>

#include "bench_common.cuh"

namespace {

using parscan::index_t;
namespace dist = parscan::distributed;

#define NCCL_CHECK(call)                                                                          \
  do {                                                                                            \
    ncclResult_t r_ = (call);                                                                     \
    if (r_ != ncclSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

struct ranks2 {
  ncclComm_t comm[2];
  cudaStream_t stream[2];
};

/// Median over `runs` of the slower rank's time for one call of f(rank), both ranks started
/// together (each thread times its own stream with events; a collective joins them anyway).
template <class F>
double two_rank_us(ranks2& g, F f, int runs = 7) {
  std::vector<double> samples;
  for (int i = 0; i < runs + 2; ++i) {
    double t[2] = {0, 0};
    std::thread th[2];
    for (int r = 0; r < 2; ++r)
      th[r] = std::thread([&, r] {
        BENCH_CHECK(cudaSetDevice(r));
        cudaEvent_t a, b;
        BENCH_CHECK(cudaEventCreate(&a));
        BENCH_CHECK(cudaEventCreate(&b));
        BENCH_CHECK(cudaEventRecord(a, g.stream[r]));
        f(r);
        BENCH_CHECK(cudaEventRecord(b, g.stream[r]));
        BENCH_CHECK(cudaEventSynchronize(b));
        float ms = 0;
        BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
        t[r] = ms * 1e3;
        cudaEventDestroy(a);
        cudaEventDestroy(b);
      });
    for (auto& x : th) x.join();
    if (i >= 2) samples.push_back(t[0] > t[1] ? t[0] : t[1]);  // two warm-up calls
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double one_gpu_us(cudaStream_t s, const std::function<void()>& f, int runs = 7) {
  BENCH_CHECK(cudaSetDevice(0));
  std::vector<double> samples;
  cudaEvent_t a, b;
  BENCH_CHECK(cudaEventCreate(&a));
  BENCH_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < runs + 2; ++i) {
    BENCH_CHECK(cudaEventRecord(a, s));
    f();
    BENCH_CHECK(cudaEventRecord(b, s));
    BENCH_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 2) samples.push_back(ms * 1e3);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void require(parscan::status s, const char* what) {
  if (s != parscan::status::success) {
    std::fprintf(stderr, "%s: %s\n", what, parscan::to_string(s));
    std::exit(1);
  }
}

/// The exchange alone: one in-place ncclAllGather of `block` bytes per rank.
double nccl_us(ranks2& g, std::size_t block) {
  void* buf[2];
  for (int r = 0; r < 2; ++r) {
    BENCH_CHECK(cudaSetDevice(r));
    BENCH_CHECK(cudaMalloc(&buf[r], 2 * block));
  }
  const double us = two_rank_us(g, [&](int r) {
    NCCL_CHECK(ncclAllGather(static_cast<char*>(buf[r]) + r * block, buf[r], block, ncclUint8, g.comm[r], g.stream[r]));
  }, 25);
  for (int r = 0; r < 2; ++r) {
    BENCH_CHECK(cudaSetDevice(r));
    BENCH_CHECK(cudaFree(buf[r]));
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int devices = 0;
  BENCH_CHECK(cudaGetDeviceCount(&devices));
  if (devices < 2) {
    std::printf("bench_distributed: needs 2 GPUs, found %d\n", devices);
    return 0;
  }
  if (const char* nvls = std::getenv("NCCL_NVLS_ENABLE"); !nvls || std::strcmp(nvls, "0") != 0)
    std::fprintf(stderr, "bench_distributed: warning: NCCL_NVLS_ENABLE=0 is not set (see the usage comment)\n");
  cudaDeviceProp prop[2];
  for (int r = 0; r < 2; ++r) BENCH_CHECK(cudaGetDeviceProperties(&prop[r], r));
  std::printf("GPUs: %s, %s\n", prop[0].name, prop[1].name);

  ranks2 g;
  const int devs[2] = {0, 1};
  NCCL_CHECK(ncclCommInitAll(g.comm, 2, devs));
  for (int r = 0; r < 2; ++r) {
    BENCH_CHECK(cudaSetDevice(r));
    BENCH_CHECK(cudaStreamCreate(&g.stream[r]));
  }

  // 1. Affine scan: 2^30 elements per GPU.
  {
    using A = parscan::affine<float>;
    const index_t n = (index_t(1) << 30) / (quick ? 16 : 1);
    A *in[2], *out[2];
    for (int r = 0; r < 2; ++r) {
      BENCH_CHECK(cudaSetDevice(r));
      BENCH_CHECK(cudaMalloc(&in[r], sizeof(A) * n));
      BENCH_CHECK(cudaMalloc(&out[r], sizeof(A) * n));
      BENCH_CHECK(cudaMemset(in[r], 0, sizeof(A) * n));  // the identity-free zero map: timing only
    }
    const parscan::affine_op<float> op;
    const double one = one_gpu_us(g.stream[0], [&] {
      require(parscan::inclusive_scan(parscan::cuda_backend{g.stream[0]}, in[0], out[0], n, op), "one GPU scan");
    });
    const double two = two_rank_us(g, [&](int r) {
      require(dist::inclusive_scan(parscan::cuda_backend{g.stream[r]}, g.comm[r], in[r], out[r],
                                   parscan::sequence_layout::contiguous(n), op),
              "distributed scan");
    });
    const double ex = nccl_us(g, parscan::distributed::rank_blocks<A>::bytes_per_block(1));
    std::printf("affine scan float: one GPU %lld elements %.1f us; 2 GPUs %lld elements %.1f us; scaling %.2fx; "
                "exchange %.1f us per call\n",
                static_cast<long long>(n), one, static_cast<long long>(2 * n), two, 2 * one / two, ex);
    for (int r = 0; r < 2; ++r) {
      BENCH_CHECK(cudaSetDevice(r));
      BENCH_CHECK(cudaFree(in[r]));
      BENCH_CHECK(cudaFree(out[r]));
    }
  }

  // 2. Gated recurrence forward + backward, bf16, B·D = 12288, T = 2^16 per rank.
  {
    using T = parscan::bfloat16;
    const index_t B = 4, D = 3072, len = (index_t(1) << 16) / (quick ? 16 : 1);
    const std::size_t n = static_cast<std::size_t>(B * D * len), s = static_cast<std::size_t>(B * D);
    T *a[2], *b[2], *x[2], *dx[2], *da[2], *db[2], *entry[2];
    for (int r = 0; r < 2; ++r) {
      BENCH_CHECK(cudaSetDevice(r));
      for (T** p : {&a[r], &b[r], &x[r], &dx[r], &da[r], &db[r]}) {
        BENCH_CHECK(cudaMalloc(p, sizeof(T) * n));
        BENCH_CHECK(cudaMemset(*p, 0x3f, sizeof(T) * n));  // 0x3f3f: about 0.75 as bf16, a contracting gate
      }
      BENCH_CHECK(cudaMalloc(&entry[r], sizeof(T) * s));
    }
    const parscan::recurrence_shape shape{B, D, len, parscan::recurrence_layout::time_contiguous};
    auto args = [&](int r) {
      parscan::gated_forward_args<T> f;
      f.shape = shape, f.a = a[r], f.b = b[r], f.x = x[r];
      parscan::gated_backward_args<T> bw;
      bw.shape = shape, bw.a = a[r], bw.x = x[r], bw.dx = dx[r], bw.da = da[r], bw.db = db[r];
      return std::make_pair(f, bw);
    };
    const double one = one_gpu_us(g.stream[0], [&] {
      const parscan::cuda_backend be{g.stream[0]};
      auto [f, bw] = args(0);
      require(parscan::gated_recurrence_forward(be, f), "one GPU forward");
      require(parscan::gated_recurrence_backward(be, bw), "one GPU backward");
    });
    const double two = two_rank_us(g, [&](int r) {
      const parscan::cuda_backend be{g.stream[r]};
      auto [f, bw] = args(r);
      require(dist::gated_recurrence_forward(be, g.comm[r], f, entry[r]), "distributed forward");
      bw.x0 = r == 0 ? nullptr : entry[r];
      require(dist::gated_recurrence_backward(be, g.comm[r], bw), "distributed backward");
    });
    const double ex = nccl_us(g, parscan::distributed::rank_blocks<parscan::affine<float>>::bytes_per_block(B * D));
    std::printf("gated recurrence bf16 fwd+bwd B*D=%lld T=%lld per rank: one GPU %.1f us; 2 GPUs %.1f us; scaling %.2fx; "
                "exchange %.1f us per all-gather (2 per fwd+bwd)\n",
                static_cast<long long>(B * D), static_cast<long long>(len), one, two, 2 * one / two, ex);
    for (int r = 0; r < 2; ++r) {
      BENCH_CHECK(cudaSetDevice(r));
      for (T* p : {a[r], b[r], x[r], dx[r], da[r], db[r], entry[r]}) BENCH_CHECK(cudaFree(p));
    }
  }
  for (int r = 0; r < 2; ++r) ncclCommDestroy(g.comm[r]);
  return 0;
}
