// parscan/cuda/matrix/matrix_tensor_engine.cuh — the tensor engine: phases a and c of the
// matrix recurrence engine (matrix_kernels.cuh) for thread_engine_max_n < N ≤ tensor_engine_max_n,
// the state padded to NP = 8 or 16.
//
// Why. The warp engine it replaced (N + 1 lanes a task, W' staged element by element through
// a table of prefetch slots, a column of A a lane in scalar double FMAs) ran the (64, 65536)
// batch at 9.2% of copy for N = 8 and 7.2% for N = 16 on an H200 (bench_matrix at 0c986dd),
// its bfloat16 rows at 2.2% and 1.6%: ncu found its phases issue-bound on the staging (about 25
// instructions a prefetched element) at 22% occupancy.
//
// Phase a (tensor_aggregate_kernel): a warp a (sequence, chunk) task. The chunk's map is composed
// in double on the FP64 tensor cores (mma.m16n8k8 on sm_90, as four m8n8k4 before it) as
// Aᵀ ← Aᵀ·W'ᵀ and vᵀ ← vᵀ·W'ᵀ + b'ᵀ, padded with zeros to NP × NP (exact: the padding multiplies
// only zeros into the N × N block). The k index of each 8-deep product is permuted so that a
// lane's two k columns are 2·(lane % 4) and 2·(lane % 4) + 1; then
//   - the accumulator's fragment (lane: rows lane / 4 and lane / 4 + 8, columns 2·(lane % 4) +
//     {0, 1}) is the next step's A fragment as it stands: the chain of steps needs no shuffle, and
//   - a lane's B fragment is W'[row lane / 4][2·(lane % 4) + {0, 1}], two adjacent elements of a
//     row of W' (of a column of W for the backward's transposed run): a warp's loads of a step
//     are whole 32-byte sectors, read straight from global memory into registers, a few steps
//     ahead of the products.
// For NP = 8, vᵀ rides in row 8 of Aᵀ's product (its accumulator starting at b'): one product a
// step. For NP = 16, Aᵀ takes 4 products a step and vᵀ, row 0 of another product whose other rows
// stay zero, 4 more.
//
// Phase c (row_rerun_kernel): NP lanes a task, lane i holds z[i] and computes row i of
// W'·z + b' in C, in the warp engine's order (b' first, then k = 0, 1, …), taking z[k] from lane k
// by shuffle; it reads its row of W' straight from global memory (16-byte loads where the rows
// of the forward's W are whole 16-byte units) a few steps ahead, and writes x[t][i] itself (a
// task's N states a step are adjacent).
//
// Phase b stays warp_carry_kernel (matrix_kernels.cuh): the workspace format is the engine's.
// mma.m8n8k4.f64 needs sm_80 or later, as the chain kernels' TF32 and bf16 products do.
// docs/performance.md ("The tensor engine for 4 < N ≤ 16") has the measurements.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda/atomic>

#include "matrix_kernels.cuh"

namespace parscan::cuda_detail {

inline constexpr int tensor_engine_max_n = 16;
inline constexpr int tensor_engine_warps = 4;  // warps a block of either kernel

/// Padded state size of the tensor engine for n (thread_engine_max_n < n ≤ tensor_engine_max_n).
__host__ __device__ constexpr int tensor_engine_np(index_t n) { return n <= 8 ? 8 : 16; }

/// d += a·b on the FP64 tensor cores (mma.m8n8k4), fragments of lane l: a = A[l/4][l%4],
/// b = B[l%4][l/4], (d0, d1) = D[l/4][2·(l%4)], D[l/4][2·(l%4) + 1].
__device__ __forceinline__ void dmma_m8n8k4(double& d0, double& d1, double a, double b) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
      : "+d"(d0), "+d"(d1)
      : "d"(a), "d"(b));
}

/// Where a task's steps lie: the offsets of its first engine step's W' (of the step W is read
/// at) and b', and how far one engine step moves each (the time runs down when descending).
struct tensor_task_walk {
  index_t W = 0, b = 0, x = 0;     // element offsets at engine step m0
  index_t dW = 0, db = 0, dx = 0;  // per engine step
};
template <class T, class XO, class FO, class C>
__device__ PARSCAN_INLINE tensor_task_walk walk_of(const engine_problem<T, XO, FO, C>& p, const engine_task& job) {
  tensor_task_walk w;
  const index_t t0 = p.time_of(job.m0, job.length, job.origin), dt = p.descending ? -1 : 1;
  w.W = p.lW.at(job.seq, t0 + p.w_shift), w.b = p.lb.at(job.seq, t0), w.x = p.lx.at(job.seq, t0);
  w.dW = dt * p.lW.step, w.db = dt * p.lb.step, w.dx = dt * p.lx.step;
  return w;
}

/// Runs use() over at least `count` steps (rounded up to 2·P) whose inputs load() fills in order,
/// from two batches of P steps in registers: one is loaded while the other is used, so each
/// step's loads are in flight P to 2·P steps ahead. Steps past the count get what load() gives
/// past the end.
template <int P, class Inputs, class Load, class Use>
__device__ PARSCAN_INLINE void in_register_batches(index_t count, Load&& load, Use&& use) {
  Inputs ahead[P], behind[P];
#pragma unroll
  for (int j = 0; j < P; ++j) load(ahead[j]);
  for (index_t m = 0; m < count; m += 2 * P) {
#pragma unroll
    for (int j = 0; j < P; ++j) load(behind[j]);
#pragma unroll
    for (int j = 0; j < P; ++j) use(ahead[j]);
#pragma unroll
    for (int j = 0; j < P; ++j) load(ahead[j]);
#pragma unroll
    for (int j = 0; j < P; ++j) use(behind[j]);
  }
}

/// d += a·b on the FP64 tensor cores, m16n8k8 (sm_90; before it, as four m8n8k4). Fragments
/// of lane l, g = l / 4, t = l % 4: a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4];
/// b = B[t][g], B[t+4][g]; d = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1].
__device__ __forceinline__ void dmma_m16n8k8(double& d0, double& d1, double& d2, double& d3, double a0, double a1,
                                             double a2, double a3, double b0, double b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+d"(d0), "+d"(d1), "+d"(d2), "+d"(d3)
      : "d"(a0), "d"(a1), "d"(a2), "d"(a3), "d"(b0), "d"(b1));
#else
  dmma_m8n8k4(d0, d1, a0, b0), dmma_m8n8k4(d0, d1, a2, b1);
  dmma_m8n8k4(d2, d3, a1, b0), dmma_m8n8k4(d2, d3, a3, b1);
#endif
}

/// The inputs of one step of phase a in a lane's registers.
template <int NP, class T>
struct tensor_step_inputs {
  static constexpr int TT = NP / 8;  // 8 × 8 tiles a side
  T w[TT][TT][2];                    // W'[8nt + r][8kt + 2c + h]
  T b[TT][2];                        // b'[8nt + 2c + h] on row 0's lanes, 0 elsewhere
};

/// Steps a prefetch batch of phase a (two batches in registers; at most 128 or 168 registers,
/// no spills).
template <int NP, bool Exact>
inline constexpr int tensor_prefetch_steps = NP == 8 ? 4 : (Exact ? 2 : 1);

/// A lane's part in phase a for n ≤ NP (Exact: n = NP, so its offsets are constants;
/// Transposed: W' is Wᵀ of the next step): lane (r, c) = (lane / 4, lane % 4) loads W'[i][k] for
/// i = 8nt + r, k = 8kt + 2c + h, from W at w_at from its first element; where i or k is padding
/// (i, k ≥ n) nothing is read. Past a task's end a step is the identity, composed as any other
/// so that the step loop has no branch (A·I = A, v·I + 0 = v exactly).
template <int NP, bool Exact, bool Transposed, class T>
struct tensor_lane {
  static constexpr int TT = NP / 8;
  int r, c, n;
  int w_at[TT][TT][2];
  bool w_in[TT][TT][2], b_in[TT][2];
  T eye[TT][TT][2];
  __device__ PARSCAN_INLINE tensor_lane(int lane, index_t n_) : r(lane / 4), c(lane % 4), n(Exact ? NP : static_cast<int>(n_)) {
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int kt = 0; kt < TT; ++kt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = 8 * nt + r, k = 8 * kt + 2 * c + h;
          w_at[nt][kt][h] = Transposed ? (8 * kt + h) * n + 8 * nt : 8 * nt * n + 8 * kt + h;  // from the lane's first
          w_in[nt][kt][h] = Exact || (i < n && k < n);
          eye[nt][kt][h] = T(i == k && i < n ? 1.0f : 0.0f);
        }
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) b_in[nt][h] = r == 0 && (Exact || 8 * nt + 2 * c + h < n);
  }
};

/// Composes task `job`'s map into this lane's fragments: a = Aᵀ (row 8mt + r, columns 8nt + 2c +
/// h), v = vᵀ in row 0. keep(inputs) sees each step's inputs as they are composed, in order, and
/// then as many identity steps as round the count up to two prefetch batches.
template <int NP, bool Exact, bool Transposed, class T, class XO, class FO, class C, class Keep>
__device__ PARSCAN_INLINE void tensor_compose_task(const engine_problem<T, XO, FO, C>& p,
                                                   const tensor_lane<NP, Exact, Transposed, T>& L,
                                                   const engine_task& job, double (&a)[NP / 8][NP / 8][2],
                                                   double (&v)[NP / 8][2], Keep&& keep) {
  constexpr int TT = NP / 8, P = tensor_prefetch_steps<NP, Exact>;
  using step_inputs = tensor_step_inputs<NP, T>;
  const int r = L.r, c = L.c, n = Exact ? NP : L.n;
  const tensor_task_walk at = walk_of(p, job);
#pragma unroll
  for (int mt = 0; mt < TT; ++mt)
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) a[mt][nt][h] = mt == nt ? static_cast<double>(to_c<C>(L.eye[mt][mt][h])) : 0.0;
#pragma unroll
  for (int nt = 0; nt < TT; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h) v[nt][h] = 0.0;

  // Engine step 0 of the transposed run is the identity, W' unread: then v = b'[0].
  index_t first = job.m0;
  if (Transposed && first == 0) {
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (L.b_in[nt][h]) v[nt][h] = static_cast<double>(to_c<C>(p.b[at.b + 8 * nt + 2 * c + h]));
    first = 1;
  }

  // The inputs of the next engine step to load, as stored (the identity past the task's end):
  // pointers that move a step at a time, so a load's address is a constant from them.
  const T* W_next = p.W + (at.W + (first - job.m0) * at.dW + (Transposed ? 2 * c * n + r : r * n + 2 * c));
  const T* b_next = p.b + (at.b + (first - job.m0) * at.db + 2 * c);
  index_t left = job.m1 - first;  // steps of the task not loaded yet
  auto load = [&](step_inputs& s) {
    const bool live = left > 0;
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int kt = 0; kt < TT; ++kt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          s.w[nt][kt][h] = live && L.w_in[nt][kt][h] ? W_next[L.w_at[nt][kt][h]] : L.eye[nt][kt][h];
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) s.b[nt][h] = live && L.b_in[nt][h] ? b_next[8 * nt + h] : T(0.0f);
    W_next += at.dW, b_next += at.db, --left;
  };
  auto compose = [&](const step_inputs& s) {
    keep(s);
    double w[TT][TT][2], na[TT][TT][2], nv[TT][2];
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int kt = 0; kt < TT; ++kt)
#pragma unroll
        for (int h = 0; h < 2; ++h) w[nt][kt][h] = static_cast<double>(to_c<C>(s.w[nt][kt][h]));
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) nv[nt][h] = static_cast<double>(to_c<C>(s.b[nt][h]));
    if constexpr (TT == 1) {
      // One m16n8k8 product: rows 0–7 Aᵀ, row 8 vᵀ (its accumulator starting at b'), 9–15 zero.
      na[0][0][0] = na[0][0][1] = 0.0;
      dmma_m16n8k8(na[0][0][0], na[0][0][1], nv[0][0], nv[0][1], a[0][0][0], v[0][0], a[0][0][1], v[0][1],
                   w[0][0][0], w[0][0][1]);
    } else {
      // Aᵀ: its rows 0–15 a product per tile column of W'ᵀ and 8-deep slice; vᵀ: row 0 of
      // another four (rows 1–15 zero).
#pragma unroll
      for (int nt = 0; nt < TT; ++nt) {
        na[0][nt][0] = na[0][nt][1] = na[1][nt][0] = na[1][nt][1] = 0.0;
        double zero0 = 0.0, zero1 = 0.0;  // rows 8–15 of vᵀ's product
#pragma unroll
        for (int kt = 0; kt < TT; ++kt) {
          dmma_m16n8k8(na[0][nt][0], na[0][nt][1], na[1][nt][0], na[1][nt][1], a[0][kt][0], a[1][kt][0],
                       a[0][kt][1], a[1][kt][1], w[nt][kt][0], w[nt][kt][1]);
          dmma_m16n8k8(nv[nt][0], nv[nt][1], zero0, zero1, v[kt][0], 0.0, v[kt][1], 0.0, w[nt][kt][0],
                       w[nt][kt][1]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < TT; ++mt)
#pragma unroll
      for (int nt = 0; nt < TT; ++nt) a[mt][nt][0] = na[mt][nt][0], a[mt][nt][1] = na[mt][nt][1];
#pragma unroll
    for (int nt = 0; nt < TT; ++nt) v[nt][0] = nv[nt][0], v[nt][1] = nv[nt][1];
  };

  in_register_batches<P, step_inputs>(job.m1 - first, load, compose);
}

/// Writes a map (A, v) from this lane's fragments: A[i][j] at A[i·stride + j] and v[i] at v[i], for
/// i, j < n.
template <int NP, bool Exact, bool Transposed, class T, class D>
__device__ PARSCAN_INLINE void write_map(const tensor_lane<NP, Exact, Transposed, T>& L, D* A, D* v, int stride,
                                         const double (&a)[NP / 8][NP / 8][2], const double (&vf)[NP / 8][2]) {
  constexpr int TT = NP / 8;
  const int n = Exact ? NP : L.n;
  // A[i][j] = Aᵀ[j][i]: this lane holds A[8nt + 2c + h][8mt + r].
#pragma unroll
  for (int mt = 0; mt < TT; ++mt)
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 8 * nt + 2 * L.c + h, j = 8 * mt + L.r;
        if (i < n && j < n) A[i * stride + j] = a[mt][nt][h];
      }
#pragma unroll
  for (int nt = 0; nt < TT; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (L.b_in[nt][h]) v[8 * nt + 2 * L.c + h] = vf[nt][h];
}

/// Writes a task's map (A, v) from this lane's fragments to p.agg_A, p.agg_v.
template <int NP, bool Exact, bool Transposed, class T, class XO, class FO, class C>
__device__ PARSCAN_INLINE void tensor_store_map(const engine_problem<T, XO, FO, C>& p,
                                                const tensor_lane<NP, Exact, Transposed, T>& L, index_t task,
                                                const double (&a)[NP / 8][NP / 8][2], const double (&v)[NP / 8][2]) {
  write_map(L, p.agg_A + task * p.n * p.n, p.agg_v + task * p.n, static_cast<int>(p.n), a, v);
}

/// Phase a of the tensor engine for n ≤ NP (Exact: n = NP, so a lane's offsets are constants;
/// Transposed: p.w_shift ≠ 0): each warp composes the map (A, v) of one task at a time and writes
/// it to p.agg_A, p.agg_v.
template <int NP, bool Exact, bool Transposed, class T, class XO, class FO, class C>
__global__ void __launch_bounds__(32 * tensor_engine_warps, NP == 8 && Exact ? 4 : 3)
    tensor_aggregate_kernel(engine_problem<T, XO, FO, C> p) {
  constexpr int TT = NP / 8;
  const tensor_lane<NP, Exact, Transposed, T> L(static_cast<int>(threadIdx.x % 32), p.n);
  const index_t tasks = p.task_count(), warps = static_cast<index_t>(gridDim.x) * tensor_engine_warps;
  for (index_t task = static_cast<index_t>(blockIdx.x) * tensor_engine_warps + threadIdx.x / 32; task < tasks;
       task += warps) {
    const engine_task job = p.task_at(task);
    if (job.m0 == job.m1) continue;  // the whole warp alike: an unused slot of a packed sequence
    double a[TT][TT][2], v[TT][2];
    tensor_compose_task(p, L, job, a, v, [](const tensor_step_inputs<NP, T>&) {});
    tensor_store_map(p, L, task, a, v);
  }
}

/// How phase c reads a lane's row of W': the forward's row of W 16 bytes at a time (n·sizeof(T) a
/// multiple of 16, W and its strides aligned) or element by element, or the backward's column
/// of W (transposed; the lanes of a task read a row of W together).
enum class row_reads { rows16, elements, transposed };

/// Row i of W'·z + b' in C for the lane holding z[i] among NP lanes from `base` (w: row i of W'),
/// in the warp engine's order: b' first, then k = 0, 1, …, z[k] from lane base + k. Every lane of
/// the warp calls it.
template <int NP, bool Exact, class T, class C>
__device__ PARSCAN_INLINE C row_product(const T (&w)[NP], T b, C z, int base, int n) {
  C y = to_c<C>(b);
#pragma unroll
  for (int k = 0; k < NP; ++k)
    if (Exact || k < n) y += to_c<C>(w[k]) * __shfl_sync(0xffffffffu, z, base + k);
  return y;
}

/// Phase c of the tensor engine for n ≤ NP (Exact: n = NP): 32 / NP tasks a warp, lane i of a
/// task's NP lanes holds z[i].
template <int NP, bool Exact, row_reads Reads, class T, class XO, class FO, class C>
__global__ void __launch_bounds__(32 * tensor_engine_warps, 4) row_rerun_kernel(engine_problem<T, XO, FO, C> p) {
  constexpr int per_warp = 32 / NP;
  constexpr int P = NP == 8 ? 4 : 2;  // steps a prefetch batch (two batches in registers)
  constexpr int vec = 16 / static_cast<int>(sizeof(T));
  constexpr unsigned all_lanes = 0xffffffffu;
  constexpr bool Rows16 = Reads == row_reads::rows16, transposed = Reads == row_reads::transposed;
  static_assert(!Rows16 || NP % vec == 0, "a padded row is whole 16-byte units");
  struct step_inputs {
    T w[NP];  // row i of W'
    T b;      // b'[i]
  };
  const int lane = static_cast<int>(threadIdx.x % 32), i = lane % NP, base = lane - i;
  const int n = Exact ? NP : static_cast<int>(p.n);
  const bool row = i < n;
  const index_t rounds = (p.task_count() + per_warp - 1) / per_warp;
  const index_t warps = static_cast<index_t>(gridDim.x) * tensor_engine_warps;
  for (index_t round = static_cast<index_t>(blockIdx.x) * tensor_engine_warps + threadIdx.x / 32; round < rounds;
       round += warps) {
    const index_t task = round * per_warp + lane / NP;
    const engine_task job = p.task_at(task);  // past the last task: no steps
    const index_t steps = job.m1 - job.m0;
    // The warp's longest task (a chunk's steps fit 32 bits: a step is at least 35 elements of 2 bytes).
    const index_t most = __reduce_max_sync(all_lanes, static_cast<unsigned>(steps));
    C z = C(0);
    tensor_task_walk at;
    if (steps > 0) {
      at = walk_of(p, job);
      if (row && p.chunked()) z = static_cast<C>(p.carry[task * p.n + i]);
      else if (row && p.z0) z = to_c<C>(p.z0[job.seq * p.n + i]);
    }
    // This lane's row of W' (a column of W, transposed), b'[i] and x[i], a step at a time.
    const T* W_next = p.W + (at.W + (transposed ? i : i * n));
    const T* b_next = p.b + (at.b + i);
    XO* x_next = p.x + (at.x + i);
    index_t loaded = 0;
    const bool identity_first = transposed && job.m0 == 0;  // engine step 0 of the transposed run

    auto load = [&](step_inputs& s) {
      const bool live = loaded < steps && row;
      if constexpr (Rows16) {
#pragma unroll
        for (int u = 0; u < NP / vec; ++u) {
          uint4 word = make_uint4(0, 0, 0, 0);
          if (live && (Exact || u * vec < n)) word = *reinterpret_cast<const uint4*>(W_next + u * vec);
          memcpy(&s.w[u * vec], &word, 16);
        }
      } else {
        const bool eye = transposed && identity_first && loaded == 0;
#pragma unroll
        for (int k = 0; k < NP; ++k) {
          T w = T(0.0f);
          if (live && (Exact || k < n)) w = eye ? T(i == k ? 1.0f : 0.0f) : W_next[transposed ? k * n : k];
          s.w[k] = w;
        }
      }
      s.b = live ? *b_next : T(0.0f);
      W_next += at.dW, b_next += at.db, ++loaded;
    };
    index_t done = 0;
    auto step = [&](const step_inputs& s) {
      const C y = row_product<NP, Exact>(s.w, s.b, z, base, n);
      if (done < steps) {
        z = y;
        if (row) *x_next = from_c<XO>(y);
      }
      x_next += at.dx, ++done;
    };

    in_register_batches<P, step_inputs>(most, load, step);
    if (row && steps > 0 && job.m1 == job.length && p.z_final) p.z_final[job.seq * p.n + i] = from_c<FO>(z);
  }
}

// ---------------------------------------------------------------------------------------
// The single pass (the forward's W' = W over a batch): phases a, b and c of each task in one
// warp, W' and b' read from memory once.
//
// A warp takes tasks in ticket order, chunk by chunk across the batch (ticket q is chunk q / B of
// sequence q % B), so a task's predecessors in its sequence started before it. For each task it
//   1. composes the map (A, v) as phase a does, keeping each step's W' and b' in its own slice of
//      shared memory as they pass through its registers, and publishes the map;
//   2. finds the state entering its chunk: from the nearest earlier chunk of its sequence whose
//      state after it is out (z0 before chunk 0), through the published maps of the chunks in
//      between, z ← A·z + v one chunk at a time; then publishes the state after its own chunk;
//   3. re-runs its steps from that state out of shared memory, as phase c does, writing x.
// Every state after a chunk has one formula, z_c = A_c·z_(c-1) + v_c in double in one order,
// whichever warp computes it, so the results are the same bits from run to run. A warp waits
// only for maps, which need no look-back, and for one state within 32 chunks before its own:
// its predecessors are running or done (tickets in order), so the waits end.

/// The chunk of the single pass for state size N ≤ NP, and its parts: the re-run splits it among
/// the warp's 32 / NP groups of NP lanes, each from the state a snapshot of the map at its part's
/// start gives. A warp's shared-memory slice holds the chunk's steps (NP² + NP elements a step,
/// float at most) and those snapshots (NP² + NP doubles each): 13.0 KB for NP = 8 (16 warps an
/// SM) and 15.0 KB for NP = 16 (12 warps an SM).
__host__ __device__ constexpr index_t tensor_pass_chunk(index_t np) { return np == 8 ? 40 : 12; }

/// Bytes of a warp's slice of shared memory in the single pass for NP and T: the steps, then the
/// snapshots (8-byte aligned: the steps' bytes are a multiple of 8).
template <int NP, class T>
inline constexpr int tensor_pass_steps_bytes =
    static_cast<int>(tensor_pass_chunk(NP)) * (NP * NP + NP) * static_cast<int>(sizeof(T));
template <int NP, class T>
inline constexpr int tensor_pass_slice_bytes = tensor_pass_steps_bytes<NP, T> + (32 / NP - 1) * (NP * NP + NP) * 8;

/// The single pass's records beyond engine_problem's: a ticket counter, and a status word a
/// task (0; map_out: its (A, v) in agg_A, agg_v; state_out: also the state after its chunk, in
/// carry). Zeroed before each launch.
struct tensor_pass_state {
  static constexpr unsigned map_out = 1, state_out = 2;
  unsigned long long* next_ticket = nullptr;
  unsigned* status = nullptr;
};

/// The single pass of the tensor engine for n ≤ NP (Exact: n = NP) over a batch, W' = W.
template <int NP, bool Exact, class T, class XO, class FO, class C>
__global__ void __launch_bounds__(32 * tensor_engine_warps, NP == 8 && Exact ? 4 : 3)
    tensor_single_pass_kernel(engine_problem<T, XO, FO, C> p, tensor_pass_state st) {
  using D = aggregate_t<C>;
  using step_inputs = tensor_step_inputs<NP, T>;
  constexpr int TT = NP / 8, step_elems = NP * NP + NP, vec = 16 / static_cast<int>(sizeof(T));
  static_assert(NP % vec == 0, "a row of the slice is whole 16-byte units");
  constexpr unsigned all_lanes = 0xffffffffu;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  T* const slice = reinterpret_cast<T*>(smem_raw + warp * tensor_pass_slice_bytes<NP, T>);
  const tensor_lane<NP, Exact, false, T> L(lane, p.n);
  const int n = Exact ? NP : L.n;
  // Lane i of group g: row i of W' (phase c) and of a published map (the look-back).
  constexpr int groups = 32 / NP;
  const int i = lane % NP, group = lane / NP, base = lane - i;
  constexpr int map_elems = NP * NP + NP, part = static_cast<int>(tensor_pass_chunk(NP)) / groups;
  static_assert(part * groups == tensor_pass_chunk(NP), "a chunk splits into whole parts");
  static_assert(tensor_pass_chunk(NP) % (2 * tensor_prefetch_steps<NP, Exact>) == 0,
                "phase a's step loop (whole prefetch batches) keeps no step past the slice");
  D* const snapshots = reinterpret_cast<D*>(smem_raw + warp * tensor_pass_slice_bytes<NP, T> +
                                            tensor_pass_steps_bytes<NP, T>);  // (A, v) of parts 1, 2, …
  const index_t tasks = p.batch * p.chunks;
  // Where this lane keeps its two elements of W' (and of b') of a step in the slice.
  using pair = std::conditional_t<sizeof(T) == 2, unsigned, std::conditional_t<sizeof(T) == 4, uint2, uint4>>;
  for (;;) {
    unsigned long long ticket = 0;
    if (lane == 0) ticket = atomicAdd(st.next_ticket, 1ull);
    ticket = __shfl_sync(all_lanes, ticket, 0);
    if (ticket >= static_cast<unsigned long long>(tasks)) break;
    const index_t s = static_cast<index_t>(ticket) % p.batch, chunk = static_cast<index_t>(ticket) / p.batch;
    const index_t task = s * p.chunks + chunk;
    const engine_task job = p.task_at(task);

    // 1. The map, each step's inputs kept in the slice (W' rows of NP, then b').
    double a[TT][TT][2], v[TT][2];
    T* kept = slice;
    int m = 0;
    __syncwarp();  // the previous task's re-run has read the slice
    tensor_compose_task(p, L, job, a, v, [&](const step_inputs& in) {
      if (m % part == 0 && m > 0 && m < part * groups) {  // the map of steps [0, m): a part starts at m
        D* const snap = snapshots + (m / part - 1) * map_elems;
        write_map(L, snap, snap + NP * NP, NP, a, v);
      }
      ++m;
#pragma unroll
      for (int nt = 0; nt < TT; ++nt) {
#pragma unroll
        for (int kt = 0; kt < TT; ++kt) {
          pair word;
          memcpy(&word, in.w[nt][kt], sizeof(pair));
          *reinterpret_cast<pair*>(kept + (8 * nt + L.r) * NP + 8 * kt + 2 * L.c) = word;
        }
        if (L.r == 0) {
          pair word;
          memcpy(&word, in.b[nt], sizeof(pair));
          *reinterpret_cast<pair*>(kept + NP * NP + 8 * nt + 2 * L.c) = word;
        }
      }
      kept += step_elems;
    });
    tensor_store_map(p, L, task, a, v);
    __syncwarp();  // orders every lane's part of the map before lane 0's release
    if (lane == 0)
      cuda::atomic_ref<unsigned, cuda::thread_scope_device>(st.status[task]).store(tensor_pass_state::map_out,
                                                                                   cuda::memory_order_release);

    // 2. The state entering the chunk. Lane l polls chunk − 1 − l (one before the sequence's
    // first: z0, always out) until the nearest chunk whose state is out has only published
    // maps between it and this one; one acquire fence then orders the reads of what they hold.
    index_t from = -1;
    if (chunk > 0) {
      for (;;) {
        unsigned got = tensor_pass_state::state_out;
        if (chunk - 1 - lane >= 0)
          got = cuda::atomic_ref<unsigned, cuda::thread_scope_device>(st.status[task - 1 - lane])
                    .load(cuda::memory_order_relaxed);
        const unsigned out = __ballot_sync(all_lanes, got == tensor_pass_state::state_out);
        const unsigned none = __ballot_sync(all_lanes, got == 0);
        if (out != 0) {
          const int nearest = __ffs(out) - 1;
          if ((none & ((1u << nearest) - 1u)) == 0) {
            from = chunk - 1 - nearest;
            break;
          }
        }
        __nanosleep(64);
      }
      cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
    }
    // Then z ← A_j·z + v_j for the chunks j after `from` up to this one: the warp's groups of NP
    // lanes load the rows of a map each at once (one round trip for 32 / NP maps), and apply
    // them in order, lane i of every group holding z[i].
    const index_t first_task = task - chunk;
    D z = D(0);
    if (i < n) {
      if (from >= 0) z = __ldcg(p.carry + (first_task + from) * p.n + i);
      else if (p.z0) z = static_cast<D>(to_c<C>(p.z0[s * p.n + i]));
    }
    D z_in = z;  // the state entering this chunk
    for (index_t j0 = from + 1; j0 <= chunk; j0 += groups) {
      const index_t mine = first_task + j0 + group;  // the task whose map this lane's group loads
      D w[NP], y0 = D(0);
      const bool loads = j0 + group <= chunk && i < n;
#pragma unroll
      for (int k = 0; k < NP; ++k)
        w[k] = loads && (Exact || k < n) ? __ldcg(p.agg_A + mine * p.n * p.n + i * p.n + k) : D(0);
      if (loads) y0 = __ldcg(p.agg_v + mine * p.n + i);
      const int count = chunk - j0 + 1 < groups ? static_cast<int>(chunk - j0 + 1) : groups;
      for (int g = 0; g < count; ++g) {
        if (j0 + g == chunk) z_in = z;
        D y = y0;
#pragma unroll
        for (int k = 0; k < NP; ++k)
          if (Exact || k < n) y += w[k] * __shfl_sync(all_lanes, z, base + k);
        z = __shfl_sync(all_lanes, y, g * NP + i);  // group g's: map j0 + g applied
      }
    }
    if (lane < n) __stcg(p.carry + task * p.n + lane, z);  // the state after this chunk
    __syncwarp();
    if (lane == 0)
      cuda::atomic_ref<unsigned, cuda::thread_scope_device>(st.status[task]).store(tensor_pass_state::state_out,
                                                                                   cuda::memory_order_release);
    // 3. The re-run from the slice: group g re-runs part g of the chunk from the state entering
    // it (z_in for part 0, the snapshot of part g's start applied to z_in for the others), lane i
    // computing row i.
    D z_part = z_in;
    {
      const D* snap = snapshots + (group > 0 ? group - 1 : 0) * map_elems;
      D y = snap[NP * NP + i];
#pragma unroll
      for (int k = 0; k < NP; ++k)
        if (Exact || k < n) y += snap[i * NP + k] * __shfl_sync(all_lanes, z_in, base + k);
      if (group > 0) z_part = i < n ? y : D(0);
    }
    C zr = static_cast<C>(z_part);
    const tensor_task_walk at = walk_of(p, job);
    const index_t steps = job.m1 - job.m0;
    const int first_step = group * part;
    XO* x_next = p.x + (at.x + i + first_step * at.dx);
    const T* w_at = slice + first_step * step_elems + i * NP;  // row i of W' at a step; b'[i] is NP·NP − i·NP + i on
#pragma unroll 2
    for (int u = 0; u < part; ++u) {
      T w[NP];
#pragma unroll
      for (int q = 0; q < NP / vec; ++q) {
        const uint4 word = *reinterpret_cast<const uint4*>(w_at + q * vec);
        memcpy(&w[q * vec], &word, 16);
      }
      const C y = row_product<NP, Exact>(w, w_at[NP * NP - i * NP + i], zr, base, n);
      if (first_step + u < steps) {
        zr = y;
        if (i < n) *x_next = from_c<XO>(y);
      }
      x_next += at.dx, w_at += step_elems;
    }
    if (i < n && job.m1 == job.length && p.z_final && (steps - 1) / part == group)
      p.z_final[s * p.n + i] = from_c<FO>(zr);
  }
}

}  // namespace parscan::cuda_detail
