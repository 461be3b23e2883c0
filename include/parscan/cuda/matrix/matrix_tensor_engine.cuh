// parscan/cuda/matrix/matrix_tensor_engine.cuh — the tensor engine: phases a, b and c of the
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
// Phase b (tensor_carry_kernel): a warp a sequence, z carried from chunk to chunk as row 0 of an
// m16n8k8 product on the FP64 tensor cores, the same permuted k; the workspace format is the
// engine's.
// mma.m8n8k4.f64 needs sm_80 or later, as the chain kernels' TF32 and bf16 products do.
// docs/performance.md ("The tensor engine for 4 < N ≤ 16") has the measurements.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

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

/// Phase a of the tensor engine for n ≤ NP (Exact: n = NP, so a lane's offsets are constants;
/// Transposed: p.w_shift ≠ 0): each warp composes the map (A, v) of one task at a time and writes
/// it to p.agg_A, p.agg_v.
template <int NP, bool Exact, bool Transposed, class T, class XO, class FO, class C>
__global__ void __launch_bounds__(32 * tensor_engine_warps, NP == 8 && Exact ? 4 : 3)
    tensor_aggregate_kernel(engine_problem<T, XO, FO, C> p) {
  constexpr int TT = NP / 8;                        // 8 × 8 tiles a side
  constexpr int P = NP == 8 ? 4 : (Exact ? 2 : 1);  // steps a prefetch batch (two batches in registers;
                                                    // at most 128 or 168 registers, no spills)
  struct step_inputs {
    T w[TT][TT][2];  // W'[8nt + r][8kt + 2c + h]
    T b[TT][2];      // b'[8nt + 2c + h] on row 0's lanes, 0 elsewhere
  };
  const int lane = static_cast<int>(threadIdx.x % 32), r = lane / 4, c = lane % 4;
  const int n = Exact ? NP : static_cast<int>(p.n);
  constexpr bool transposed = Transposed;
  // This lane's elements of a step: W'[i][k] is W[i][k], or W[k][i] transposed, at w_at from the
  // lane's first (W'[r][2c]); where i or k is padding (i, k ≥ n) nothing is read. Past a task's
  // end a step is the identity, composed as any other so that the step loop has no branch
  // (A·I = A, v·I + 0 = v exactly).
  int w_at[TT][TT][2];
  bool w_in[TT][TT][2], b_in[TT][2];
  T eye[TT][TT][2];
#pragma unroll
  for (int nt = 0; nt < TT; ++nt)
#pragma unroll
    for (int kt = 0; kt < TT; ++kt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 8 * nt + r, k = 8 * kt + 2 * c + h;
        w_at[nt][kt][h] = transposed ? (8 * kt + h) * n + 8 * nt : 8 * nt * n + 8 * kt + h;  // from the lane's first
        w_in[nt][kt][h] = Exact || (i < n && k < n);
        eye[nt][kt][h] = T(i == k && i < n ? 1.0f : 0.0f);
      }
#pragma unroll
  for (int nt = 0; nt < TT; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h) b_in[nt][h] = r == 0 && (Exact || 8 * nt + 2 * c + h < n);

  const index_t tasks = p.task_count(), warps = static_cast<index_t>(gridDim.x) * tensor_engine_warps;
  for (index_t task = static_cast<index_t>(blockIdx.x) * tensor_engine_warps + threadIdx.x / 32; task < tasks;
       task += warps) {
    const engine_task job = p.task_at(task);
    if (job.m0 == job.m1) continue;  // the whole warp alike: an unused slot of a packed sequence
    const tensor_task_walk at = walk_of(p, job);

    double a[TT][TT][2], v[TT][2];  // Aᵀ (this lane's row 8mt + r, columns 8nt + 2c + h); vᵀ in row 0
#pragma unroll
    for (int mt = 0; mt < TT; ++mt)
#pragma unroll
      for (int nt = 0; nt < TT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) a[mt][nt][h] = mt == nt ? static_cast<double>(to_c<C>(eye[mt][mt][h])) : 0.0;
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) v[nt][h] = 0.0;

    // Engine step 0 of the transposed run is the identity, W' unread: then v = b'[0].
    index_t first = job.m0;
    if (transposed && first == 0) {
#pragma unroll
      for (int nt = 0; nt < TT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (b_in[nt][h]) v[nt][h] = static_cast<double>(to_c<C>(p.b[at.b + 8 * nt + 2 * c + h]));
      first = 1;
    }

    // The inputs of the next engine step to load, as stored (the identity past the task's end):
    // pointers that move a step at a time, so a load's address is a constant from them.
    const T* W_next = p.W + (at.W + (first - job.m0) * at.dW + (transposed ? 2 * c * n + r : r * n + 2 * c));
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
            s.w[nt][kt][h] = live && w_in[nt][kt][h] ? W_next[w_at[nt][kt][h]] : eye[nt][kt][h];
#pragma unroll
      for (int nt = 0; nt < TT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) s.b[nt][h] = live && b_in[nt][h] ? b_next[8 * nt + h] : T(0.0f);
      W_next += at.dW, b_next += at.db, --left;
    };
    auto compose = [&](const step_inputs& s) {
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

    // A[i][j] = Aᵀ[j][i]: this lane holds A[8nt + 2c + h][8mt + r].
    const index_t nn = p.n * p.n;
#pragma unroll
    for (int mt = 0; mt < TT; ++mt)
#pragma unroll
      for (int nt = 0; nt < TT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = 8 * nt + 2 * c + h, j = 8 * mt + r;
          if (i < n && j < n) p.agg_A[task * nn + i * n + j] = a[mt][nt][h];
        }
#pragma unroll
    for (int nt = 0; nt < TT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (b_in[nt][h]) p.agg_v[task * p.n + 8 * nt + 2 * c + h] = v[nt][h];
  }
}

/// How phase c reads a lane's row of W': the forward's row of W 16 bytes at a time (n·sizeof(T) a
/// multiple of 16, W and its strides aligned) or element by element, or the backward's column
/// of W (transposed; the lanes of a task read a row of W together).
enum class row_reads { rows16, elements, transposed };

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
      C y = to_c<C>(s.b);
#pragma unroll
      for (int k = 0; k < NP; ++k)
        if (Exact || k < n) y += to_c<C>(s.w[k]) * __shfl_sync(all_lanes, z, base + k);
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

inline constexpr int tensor_carry_warps = 4;  // warps a block of phase b

/// Phase b of the tensor engine for n ≤ NP (Exact: n = NP): a warp a sequence walks its chunk
/// maps, zᵀ ← zᵀ·A_cᵀ + v_cᵀ as row 0 of an m16n8k8 product in double (rows 1–15 zero), the k
/// index permuted as in phase a so that the accumulator's row 0 is the next chunk's A fragment:
/// one product a chunk for NP = 8 (four, two dependent, for NP = 16), where the scalar walk it
/// replaced took n shuffles and n dependent FMAs. Lane (r, c)'s B fragment is A_c[8nt + r][8kt +
/// 2c + {0, 1}], two adjacent elements of a row of A_c, so a warp's loads of a chunk are its whole
/// map in order, read straight from global memory P chunks ahead. carry[c] gets z before chunk c.
template <int NP, bool Exact, class T, class XO, class FO, class C>
__global__ void __launch_bounds__(32 * tensor_carry_warps) tensor_carry_kernel(engine_problem<T, XO, FO, C> p) {
  using D = aggregate_t<C>;
  static_assert(std::is_same_v<D, double>, "the products are in double");
  constexpr int TT = NP / 8;
  constexpr int P = NP == 8 ? 8 : 3;  // chunks a prefetch batch (two batches in registers)
  struct chunk_inputs {
    D a[TT][TT][2];  // A_c[8nt + r][8kt + 2c + h]
    D v[TT][2];      // v_c[8nt + 2c + h] on row 0's lanes, 0 elsewhere
  };
  const int lane = static_cast<int>(threadIdx.x % 32), r = lane / 4, c = lane % 4;
  const int n = Exact ? NP : static_cast<int>(p.n), nn = n * n;
  for (index_t s = static_cast<index_t>(blockIdx.x) * tensor_carry_warps + threadIdx.x / 32; s < p.batch;
       s += static_cast<index_t>(gridDim.x) * tensor_carry_warps) {
    const engine_sequence sq = p.sequence_at(s);
    if (sq.count == 0) continue;  // a packed sequence of no steps (the whole warp alike)
    D z[TT][2];                   // zᵀ[8kt + 2c + h] on row 0's lanes, 0 elsewhere
#pragma unroll
    for (int kt = 0; kt < TT; ++kt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int col = 8 * kt + 2 * c + h;
        z[kt][h] = r == 0 && (Exact || col < n) && p.z0 ? static_cast<D>(to_c<C>(p.z0[s * n + col])) : D(0);
      }
    const D* A_next = p.agg_A + sq.first * nn;
    const D* v_next = p.agg_v + sq.first * n;
    index_t left = sq.count;  // chunks not loaded yet
    auto load = [&](chunk_inputs& in) {
      const bool live = left > 0;
#pragma unroll
      for (int nt = 0; nt < TT; ++nt)
#pragma unroll
        for (int kt = 0; kt < TT; ++kt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = 8 * nt + r, col = 8 * kt + 2 * c + h;
            in.a[nt][kt][h] = live && (Exact || (row < n && col < n)) ? A_next[row * n + col] : D(0);
          }
#pragma unroll
      for (int nt = 0; nt < TT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int col = 8 * nt + 2 * c + h;
          in.v[nt][h] = live && r == 0 && (Exact || col < n) ? v_next[col] : D(0);
        }
      A_next += nn, v_next += n, --left;
    };
    D* carry_next = p.carry + sq.first * n;
    index_t walked = 0;
    auto walk = [&](const chunk_inputs& in) {
      if (walked < sq.count) {  // the whole warp alike
        if (r == 0)
#pragma unroll
          for (int kt = 0; kt < TT; ++kt)
#pragma unroll
            for (int h = 0; h < 2; ++h)
              if (Exact || 8 * kt + 2 * c + h < n) carry_next[8 * kt + 2 * c + h] = z[kt][h];
        D next[TT][2];
#pragma unroll
        for (int nt = 0; nt < TT; ++nt) {
          D d0 = in.v[nt][0], d1 = in.v[nt][1], d2 = D(0), d3 = D(0);
#pragma unroll
          for (int kt = 0; kt < TT; ++kt)
            dmma_m16n8k8(d0, d1, d2, d3, z[kt][0], D(0), z[kt][1], D(0), in.a[nt][kt][0], in.a[nt][kt][1]);
          next[nt][0] = d0, next[nt][1] = d1;
        }
#pragma unroll
        for (int kt = 0; kt < TT; ++kt) z[kt][0] = next[kt][0], z[kt][1] = next[kt][1];
      }
      carry_next += n, ++walked;
    };
    in_register_batches<P, chunk_inputs>(sq.count, load, walk);
  }
}

}  // namespace parscan::cuda_detail
