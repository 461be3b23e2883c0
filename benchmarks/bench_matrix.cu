// benchmarks/bench_matrix.cu — matrix chains and the matrix recurrence on the CUDA backend,
// over the cases of issue 4's speed table. Each case is first checked against a float64 host
// computation on a small part (a short sub-chain through the same code path, or a slice of the
// timed result), then timed: CUDA events, median of 25 runs after 3 warm-up runs, with the
// caller's workspace. Reported: GB/s and % of the copy bandwidth measured in the same run, for
// the bytes that must move (each tensor once), and achieved GFLOP/s for the arithmetic that
// must be done (2d³ per chain product, 2N² per recurrence step forward, 4N² backward).
// The first rows are the arithmetic reference (where the toolkit has cuBLAS): a cuBLAS GEMM of
// 8192³ in true fp32, with TF32 and with bf16 tensor cores, then strided batches of the widest
// chain levels' shapes; each batch of chains follows a cuBLAS strided-batched GEMM over as many
// d×d products as its first level has.
//   usage: bench_matrix [--json out.json] [--quick]
//                       [--recurrence N | --chains | --levels | --prefixes | --small | --total B n d] [--varlen]
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if PARSCAN_BENCH_CUBLAS
#include <cublas_v2.h>
#endif

#include <parscan/parscan.hpp>

#include "bench_common.cuh"

namespace {

using parscan::index_t;

using bench::mix;
using bench::unit;

using bench::dtype_name;

// Uniform values in (-scale·√3, scale·√3): variance scale². With scale = r/√k for k×k blocks,
// a random matrix has spectral radius about r.
template <class T>
__global__ void fill(T* p, index_t n, std::uint32_t seed, float scale) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(gridDim.x) * blockDim.x)
    p[i] = T(scale * 1.7320508f * (2 * unit(i, seed) - 1));
}

template <class T>
T* alloc_fill(index_t n, std::uint32_t seed, float scale) {
  T* p = nullptr;
  BENCH_CHECK(cudaMalloc(&p, std::max<size_t>(1, size_t(n) * sizeof(T))));
  if (n > 0) fill<<<2048, 256>>>(p, n, seed, scale);
  BENCH_CHECK(cudaGetLastError());
  return p;
}

template <class T>
std::vector<double> download(const T* p, index_t n) {
  std::vector<T> h(static_cast<size_t>(n));
  BENCH_CHECK(cudaMemcpy(h.data(), p, size_t(n) * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<double> d(h.size());
  for (size_t i = 0; i < h.size(); ++i) d[i] = double(float(h[i]));
  return d;
}

double rel_err(const std::vector<double>& got, const std::vector<double>& ref) {
  double e = 0, s = 0;
  for (size_t i = 0; i < ref.size(); ++i) e = std::max(e, std::abs(got[i] - ref[i])), s = std::max(s, std::abs(ref[i]));
  return s > 0 ? e / s : e;
}

void require(parscan::status s, const std::string& what) {
  if (s != parscan::status::success) std::printf("%s: %s\n", what.c_str(), parscan::to_string(s)), std::exit(1);
}

/// Times `call` with the caller's workspace of `ws_bytes`.
double time_with_workspace(parscan::cuda_backend& be, size_t ws_bytes, const std::function<void(int)>& call) {
  void* ws = nullptr;
  BENCH_CHECK(cudaMalloc(&ws, std::max<size_t>(ws_bytes, 1)));
  be.workspace = ws, be.workspace_bytes = ws_bytes;
  const double us = bench::median_us(call, 25, 3);
  BENCH_CHECK(cudaFree(ws));
  be.workspace = nullptr, be.workspace_bytes = 0;
  return us;
}

struct result {
  bench::row r;
  double gflops, err, tol;  // the check's error and what it may be
};
std::vector<result> results;

const char* math_name(parscan::chain_math math) {
  return math == parscan::chain_math::exact ? "exact" : math == parscan::chain_math::tf32 ? "tf32" : "bf16";
}

#if PARSCAN_BENCH_CUBLAS
// ---------------------------------------------------------------------------------------
// The arithmetic references: cuBLAS GEMMs in the arithmetic each chain_math names (exact:
// pedantic fp32, no tensor-core shortcut; tf32 / bf16: fp32 data, operands rounded for the
// tensor cores), one large 8192³ product and strided batches of d×d products.

/// `count` independent d×d products (cublasGemmStridedBatchedEx), named `name`.
void cublas_gemm_case(const std::string& name, index_t count, int d, parscan::chain_math math, double copy) {
  const index_t dd = index_t(d) * d;
  float* A = alloc_fill<float>(count * dd, 7u, 1.0f);
  float* Bm = alloc_fill<float>(count * dd, 8u, 1.0f);
  float* C = nullptr;
  BENCH_CHECK(cudaMalloc(&C, size_t(count * dd) * sizeof(float)));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) std::printf("cublasCreate failed\n"), std::exit(1);
  const float one = 1.0f, zero = 0.0f;
  const cublasComputeType_t compute = math == parscan::chain_math::tf32  ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : math == parscan::chain_math::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                                          : CUBLAS_COMPUTE_32F_PEDANTIC;
  const double us = bench::median_us([&](int) {
    if (cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, d, d, d, &one, A, CUDA_R_32F, d, dd, Bm, CUDA_R_32F, d,
                                   dd, &zero, C, CUDA_R_32F, d, dd, static_cast<int>(count), compute,
                                   CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      std::printf("cublasGemmStridedBatchedEx failed\n"), std::exit(1);
  }, count == 1 ? 10 : 25, count == 1 ? 2 : 3);
  cublasDestroy(h);
  for (float* p : {A, Bm, C}) BENCH_CHECK(cudaFree(p));
  const double flops = 2.0 * double(count) * dd * d, gbs = 3.0 * double(count) * dd * sizeof(float) / us / 1e3;
  const std::string dims = std::to_string(d) + "x" + std::to_string(d);
  results.push_back({{name, "f32", count == 1 ? "(n,n)" : "(count,d,d)", "fwd",
                      count == 1 ? dims + "x" + std::to_string(d) : std::to_string(count) + "x" + dims, us, gbs,
                      100 * gbs / copy, flops / us / 1e3},
                     flops / us / 1e3, 0.0, 0.0});
}

/// The batched-GEMM rate a batch of chains is held to: `count` products of d×d.
void cublas_batched_case(index_t count, int d, parscan::chain_math math, double copy) {
  cublas_gemm_case(std::string("cublas batched gemm ") + (math == parscan::chain_math::exact ? "fp32" : math_name(math)),
                   count, d, math, copy);
}
#endif

// ---------------------------------------------------------------------------------------
// Chains.

void chain_case(index_t B, index_t n, index_t d, parscan::chain_output out, parscan::chain_math math, double copy,
                int rot) {
  const bool prefixes = out == parscan::chain_output::prefixes;
  const index_t dd = d * d, per_chain = prefixes ? n : 1;
  std::vector<float*> M(rot), P(rot);
  for (int r = 0; r < rot; ++r) {
    M[r] = alloc_fill<float>(B * n * dd, 17u + r, 1.0f / std::sqrt(float(d)));
    BENCH_CHECK(cudaMalloc(&P[r], size_t(B * per_chain) * dd * sizeof(float)));
  }
  parscan::cuda_backend be{};
  auto args = [&](int r, index_t count) {  // the first `count` factors of each chain of M[r]
    parscan::matrix_chain_args<float> g;
    g.batch = B, g.count = count, g.d = d, g.M = M[r], g.out = P[r], g.output = out, g.math = math;
    g.M_strides.batch = n * dd, g.out_strides.batch = per_chain * dd;
    return g;
  };
  // Check: sub-chains through the same code path against float64, first and last chain: 12
  // factors, or 64 for d ≤ 16 (the thread engine's levels: 4 chunks of 16, then their total).
  // Longer ones would check nothing: products of these factors shrink about 0.58× a factor.
  const index_t small = std::min<index_t>(n, d <= 16 ? 64 : 12);
  require(parscan::matrix_chain(be, args(0, small)), "chain check");
  BENCH_CHECK(cudaDeviceSynchronize());
  double err = 0;
  for (index_t c : {index_t(0), B - 1}) {
    const std::vector<double> hM = download(M[0] + c * n * dd, small * dd),
                              got = download(P[0] + c * per_chain * dd, (prefixes ? small : 1) * dd);
    std::vector<double> ref, cur(hM.begin(), hM.begin() + dd), next(dd);
    if (prefixes) ref.insert(ref.end(), cur.begin(), cur.end());
    for (index_t k = 1; k < small; ++k) {
      std::fill(next.begin(), next.end(), 0.0);
      for (index_t i = 0; i < d; ++i)
        for (index_t l = 0; l < d; ++l)
          for (index_t j = 0; j < d; ++j) next[i * d + j] += cur[i * d + l] * hM[k * dd + l * d + j];
      cur.swap(next);
      if (prefixes) ref.insert(ref.end(), cur.begin(), cur.end());
    }
    if (!prefixes) ref = cur;
    err = std::max(err, rel_err(got, ref));
  }

  const double us = time_with_workspace(be, parscan::matrix_chain_workspace_size(args(0, n)),
                                        [&](int i) { require(parscan::matrix_chain(be, args(i % rot, n)), "chain"); });
  const double bytes = double(B) * double(n + per_chain) * dd * sizeof(float);
  const double flops = 2.0 * double(B) * double(d) * dd * double(n - 1);
  const double gbs = bytes / us / 1e3;
  const char* m = math_name(math);
  // The bound docs/api.md states for the tensor-core modes, 8·u·√n, over the checked sub-chain.
  const double u = math == parscan::chain_math::tf32 ? 0x1p-11 : 0x1p-8;
  const double tol = math == parscan::chain_math::exact ? 1e-4 : 8 * u * std::sqrt(double(small));
  results.push_back({{std::string(prefixes ? "chain prefixes " : "chain total ") + m, "f32", "(B,n,d,d)", "fwd",
                      std::to_string(B) + "x" + std::to_string(n) + "x" + std::to_string(d) + "x" + std::to_string(d),
                      us, gbs,
                      100 * gbs / copy, flops / us / 1e3},
                     flops / us / 1e3, err, tol});
  for (int r = 0; r < rot; ++r) {
    BENCH_CHECK(cudaFree(M[r]));
    BENCH_CHECK(cudaFree(P[r]));
  }
}

// ---------------------------------------------------------------------------------------
// The recurrence: (B, T, N) dense, no x0; backward is given x and dx (no dx_final). With
// `packed`, the same tensors as B packed sequences of L steps each (cu_seqlens = 0, L, 2L, ...)
// through the packed API: its engine against the batch's on the same data.

template <class T>
void recurrence_case(index_t B, index_t L, index_t N, bool backward, double copy, bool packed = false) {
  const index_t NN = N * N, steps = B * L;
  T* W = alloc_fill<T>(steps * NN, 3u, 0.95f / std::sqrt(float(N)));
  T* b = alloc_fill<T>(steps * N, 5u, 1.0f);
  T* x = alloc_fill<T>(steps * N, 0u, 0.0f);
  T *dx = nullptr, *dW = nullptr, *db = nullptr;
  if (backward) {
    dx = alloc_fill<T>(steps * N, 7u, 1.0f);
    BENCH_CHECK(cudaMalloc(&dW, size_t(steps * NN) * sizeof(T)));
    BENCH_CHECK(cudaMalloc(&db, size_t(steps * N) * sizeof(T)));
  }
  parscan::cuda_backend be{};
  parscan::matrix_forward_args<T> f;
  f.batch = B, f.length = L, f.n = N, f.W = W, f.b = b, f.x = x;
  parscan::matrix_backward_args<T> g;
  g.batch = B, g.length = L, g.n = N, g.W = W, g.x = x, g.dx = dx, g.dW = dW, g.db = db;
  std::int64_t* cu = nullptr;
  parscan::matrix_varlen_forward_args<T> pf;
  parscan::matrix_varlen_backward_args<T> pg;
  if (packed) {
    std::vector<std::int64_t> offsets;
    for (index_t s = 0; s <= B; ++s) offsets.push_back(s * L);
    BENCH_CHECK(cudaMalloc(&cu, offsets.size() * sizeof(std::int64_t)));
    BENCH_CHECK(cudaMemcpy(cu, offsets.data(), offsets.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
    pf.shape = pg.shape = {B, steps, N, cu};
    pf.W = W, pf.b = b, pf.x = x;
    pg.W = W, pg.x = x, pg.dx = dx, pg.dW = dW, pg.db = db;
  }
  auto run = [&](bool bwd) {
    if (packed) {
      if (bwd) require(parscan::matrix_recurrence_backward(be, pg), "backward");
      else require(parscan::matrix_recurrence_forward(be, pf), "forward");
    } else {
      if (bwd) require(parscan::matrix_recurrence_backward(be, g), "backward");
      else require(parscan::matrix_recurrence_forward(be, f), "forward");
    }
  };
  run(false);
  if (backward) run(true);
  BENCH_CHECK(cudaDeviceSynchronize());

  // Check a slice of the timed result: 2500 steps (more than one chunk) of the first and last
  // sequences; forward from the start, backward from the end.
  double err = 0;
  const index_t span = std::min<index_t>(L, 2500);
  for (index_t s : {index_t(0), B - 1}) {
    if (!backward) {
      const auto hW = download(W + s * L * NN, span * NN), hb = download(b + s * L * N, span * N),
                 hx = download(x + s * L * N, span * N);
      std::vector<double> z(N, 0.0), zn(N), ref;
      for (index_t t = 0; t < span; ++t) {
        for (index_t i = 0; i < N; ++i) {
          double a = hb[t * N + i];
          for (index_t j = 0; j < N; ++j) a += hW[t * NN + i * N + j] * z[j];
          zn[i] = a;
        }
        z = zn;
        ref.insert(ref.end(), z.begin(), z.end());
      }
      err = std::max(err, rel_err(hx, ref));
    } else {
      const index_t t0 = L - span;  // steps t0..L-1; W[t+1] needed for t < L-1, x[t-1] for dW
      const auto hW = download(W + (s * L + t0) * NN, span * NN), hdx = download(dx + (s * L + t0) * N, span * N),
                 hdb = download(db + (s * L + t0) * N, span * N), hdW = download(dW + (s * L + t0) * NN, span * NN);
      const index_t xs = t0 > 0 ? t0 - 1 : 0;  // x from step xs: x[t-1] for every t > 0 of the slice
      const auto hx = download(x + (s * L + xs) * N, (t0 + span - xs) * N);
      std::vector<double> y(N, 0.0), yn(N), ref_db(span * N), ref_dW(span * NN);
      for (index_t k = span - 1; k >= 0; --k) {
        for (index_t i = 0; i < N; ++i) {
          double a = hdx[k * N + i];
          if (k + 1 < span)
            for (index_t j = 0; j < N; ++j) a += hW[(k + 1) * NN + j * N + i] * y[j];
          yn[i] = a;
        }
        y = yn;
        for (index_t i = 0; i < N; ++i) {
          ref_db[k * N + i] = y[i];
          for (index_t j = 0; j < N; ++j)
            ref_dW[k * NN + i * N + j] = y[i] * (t0 + k > 0 ? hx[(t0 + k - 1 - xs) * N + j] : 0.0);
        }
      }
      err = std::max({err, rel_err(hdb, ref_db), rel_err(hdW, ref_dW)});
    }
  }

  const size_t ws = packed ? (backward ? parscan::matrix_recurrence_workspace_size(pg)
                                       : parscan::matrix_recurrence_workspace_size(pf))
                            : (backward ? parscan::matrix_recurrence_workspace_size(g)
                                        : parscan::matrix_recurrence_workspace_size(f));
  const double us = time_with_workspace(be, ws, [&](int) { run(backward); });
  const double per_step_elems = backward ? double(2 * NN + 3 * N) : double(NN + 2 * N);
  const double bytes = per_step_elems * double(steps) * sizeof(T);
  const double flops = (backward ? 4.0 : 2.0) * double(NN) * double(steps);
  const double gbs = bytes / us / 1e3;
  results.push_back({{std::string(packed ? "matrix varlen equal N=" : "matrix recurrence N=") + std::to_string(N),
                      dtype_name<T>::v, packed ? "(total,N)" : "(B,T,N)", backward ? "bwd" : "fwd",
                      std::to_string(B) + "x" + std::to_string(L) + "x" + std::to_string(N), us, gbs, 100 * gbs / copy,
                      flops / us / 1e3},
                     flops / us / 1e3, err, std::is_same<T, float>::value ? 1e-4 : 2e-2});
  for (T* p : {W, b, x, dx, dW, db})
    if (p) BENCH_CHECK(cudaFree(p));
  if (cu) BENCH_CHECK(cudaFree(cu));
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::has_flag(argc, argv, "--quick");
  const double copy = bench::copy_bandwidth_gbs();
  using parscan::chain_math;
  using parscan::chain_output;

  // --recurrence N: only the matrix recurrence of state size N (for profiling with ncu).
  index_t only_n = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--recurrence") only_n = std::atoi(argv[i + 1]);
  // --chains: only the chain rows (and their cuBLAS references).
  const bool chains_only = bench::has_flag(argc, argv, "--chains");
  // --prefixes: only the prefix rows (the chunk engine), with cuBLAS's batched rate at d = 64.
  if (bench::has_flag(argc, argv, "--prefixes")) {
#if PARSCAN_BENCH_CUBLAS
    cublas_batched_case(4096, 64, chain_math::exact, copy);
#endif
    chain_case(1, 8192, 64, chain_output::prefixes, chain_math::exact, copy, 1);
    chain_case(8, 8192, 64, chain_output::prefixes, chain_math::exact, copy, 1);
    chain_case(1, 8192, 32, chain_output::prefixes, chain_math::exact, copy, 1);
    only_n = -1;
  }
  // --total B n d: only that chain total (for profiling with ncu).
  for (int i = 1; i + 3 < argc; ++i)
    if (std::string(argv[i]) == "--total") {
      chain_case(std::atoll(argv[i + 1]), std::atoll(argv[i + 2]), std::atoll(argv[i + 3]), chain_output::total,
                 chain_math::exact, copy, 1);
      only_n = -1;
    }
  // --small: chains of d ≤ 16, from one chain to many (the chunk engine below
  // chain_thread_min_factors factors, the thread engine from there): the crossover, measured by
  // running this beside a build with PARSCAN_CHAIN_THREAD_MIN_FACTORS set high.
  if (bench::has_flag(argc, argv, "--small")) {
    for (index_t d : {4, 8, 16})
      for (auto [B, n] : {std::pair<index_t, index_t>{1, 1000}, {1, 4096}, {1, 8192}, {1, 16384}, {4, 4096},
                          {16, 1024}, {64, 1000}, {256, 4096}})
        chain_case(B, n, d, chain_output::total, chain_math::exact, copy, 1);
    for (auto [B, n] : {std::pair<index_t, index_t>{256, 1000}, {1536, 1024}})
      chain_case(B, n, 8, chain_output::prefixes, chain_math::exact, copy, 1);
    only_n = -1;
  }
  // --levels: only short chains, whose times rise by one tree level per doubling of n: the cost
  // of a narrow level, for docs/performance.md. d = 128 and 256 (cuBLAS levels): n = 2…64; d = 32
  // and 64 (the chunk engine: up to 128 chunks of 4 or more factors, then a tree of fan-in 4 or
  // 2): n = 4…1024.
  if (bench::has_flag(argc, argv, "--levels")) {
    for (index_t d : {32, 64})
      for (index_t n : {4, 8, 16, 32, 64, 128, 256, 512, 1024})
        chain_case(1, n, d, chain_output::total, chain_math::exact, copy, 1);
    for (index_t d : {128, 256})
      for (chain_math m : {chain_math::exact, chain_math::tf32})
        for (index_t n : {2, 4, 8, 16, 32, 64}) chain_case(1, n, d, chain_output::total, m, copy, 1);
    only_n = -1;
  }
#if PARSCAN_BENCH_CUBLAS
  if (only_n == 0) {
    cublas_gemm_case("cublas sgemm fp32", 1, 8192, chain_math::exact, copy);
    cublas_gemm_case("cublas sgemm tf32", 1, 8192, chain_math::tf32, copy);
    cublas_gemm_case("cublas sgemm bf16", 1, 8192, chain_math::bf16, copy);
    // The widest level of a 1000-factor chain at d = 128 and 256, and of an 8192-factor prefix
    // scan at d = 64: the best rate the chain's arithmetic can run at on cuBLAS.
    for (auto [count, d] : {std::pair<index_t, int>{500, 256}, std::pair<index_t, int>{500, 128},
                            std::pair<index_t, int>{4096, 64}})
      for (chain_math m : {chain_math::exact, chain_math::tf32, chain_math::bf16})
        if (m == chain_math::exact || d >= 128) cublas_batched_case(count, d, m, copy);
  }
#endif
  for (index_t d : {32, 64, 128, 256}) {
    if (only_n != 0) break;
    const size_t bytes = size_t(1000) * d * d * sizeof(float);
    const int rot = bench::rotation_for(bytes);
    chain_case(1, 1000, d, chain_output::total, chain_math::exact, copy, rot);
    if (d == 256 || !quick) chain_case(1, 1000, d, chain_output::total, chain_math::tf32, copy, rot);
    if (d >= 128 && !quick) chain_case(1, 1000, d, chain_output::total, chain_math::bf16, copy, rot);
  }
  // Batches of chains, each against cuBLAS's batched GEMM over the products of its first level.
  for (auto [B, d] : {std::pair<index_t, int>{64, 32}, std::pair<index_t, int>{8, 128}}) {
    if (only_n != 0) break;
#if PARSCAN_BENCH_CUBLAS
    cublas_batched_case(B * 500, d, chain_math::exact, copy);
#endif
    chain_case(B, 1000, d, chain_output::total, chain_math::exact, copy, 1);
  }
  // Many chains of small matrices (the thread engine), bound by their bytes: % of copy. 1536 ×
  // 4096 × 8² is bench_python's matrix_chain row.
  if (only_n == 0) {
    chain_case(1536, 4096, 8, chain_output::total, chain_math::exact, copy, 1);
    chain_case(256, 4096, 16, chain_output::total, chain_math::exact, copy, 1);
    chain_case(1536, 1024, 8, chain_output::prefixes, chain_math::exact, copy, 1);
  }
  if (only_n == 0) chain_case(1, 8192, 64, chain_output::prefixes, chain_math::exact, copy, 1);
  if (only_n == 0) chain_case(8, 8192, 64, chain_output::prefixes, chain_math::exact, copy, 1);
  if (only_n == 0 && !quick) chain_case(1, 8192, 64, chain_output::prefixes, chain_math::tf32, copy, 1);
  if (chains_only) only_n = -1;  // no recurrence rows

  const index_t B = 64, L = quick ? 16384 : 65536;
  for (index_t N : {2, 4, 8, 16})
    for (bool bwd : {false, true}) {
      if (only_n != 0 && N != only_n) continue;
      recurrence_case<float>(B, L, N, bwd, copy);
      recurrence_case<parscan::bfloat16>(B, L, N, bwd, copy);
      recurrence_case<parscan::float16>(B, L, N, bwd, copy);  // issue 16: the 16-bit rows, both types
    }
  // --varlen: the packed API on the same (B, L) sequences, f32, next to the batch rows.
  if (bench::has_flag(argc, argv, "--varlen"))
    for (index_t N : {2, 4, 8, 16})
      for (bool bwd : {false, true}) {
        if (only_n != 0 && N != only_n) continue;
        recurrence_case<float>(B, L, N, bwd, copy, true);
      }

  std::printf("\n%-34s %-5s %-4s %-18s %10s %9s %7s %10s %10s\n", "case", "dtype", "dir", "shape", "median_us", "GB/s",
              "%copy", "GFLOP/s", "max_err");
  std::vector<bench::row> rows;
  bool ok = true;
  for (const result& r : results) {
    std::printf("%-34s %-5s %-4s %-18s %10.2f %9.1f %6.1f%% %10.1f %10.3g\n", r.r.name.c_str(), r.r.dtype.c_str(),
                r.r.direction.c_str(), r.r.shape.c_str(), r.r.us, r.r.gbs, r.r.pct_copy, r.gflops, r.err);
    rows.push_back(r.r);
    if (!(r.err <= r.tol)) ok = false, std::printf("FAILED: %s %s: error %.3g above %.3g\n", r.r.name.c_str(), r.r.shape.c_str(), r.err, r.tol);
  }
  std::printf("copy bandwidth (read+write): %.1f GB/s on %s (JSON 'extra' is GFLOP/s)\n", copy, bench::gpu_name().c_str());
  bench::write_json(bench::json_arg(argc, argv), "bench_matrix", rows, copy);
  std::printf("every checked part within its tolerance (f32 1e-4, bf16 2e-2, tf32 / bf16 modes 8·u·sqrt(12)): %s\n", ok ? "yes" : "no");
  return ok ? 0 : 1;
}
