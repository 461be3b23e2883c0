// parscan/cuda/device/matrix_kernels.cuh — the kernels behind the CUDA matrix recurrence and
// matrix chains (src/cuda/matrix_cuda.cuh drives them; docs/design.md explains the plan).
//
// The recurrence engine runs z[m] = W'[m]·z[m-1] + b'[m] over "engine steps" m = 0..T-1 of
// every sequence, in three phases over chunks of `chunk` consecutive steps:
//   a. chunk_kernel<aggregate>: each (sequence, chunk) composes its affine map (A, v) from a
//      zero state (A = W'[last]···W'[first], v = the chunk's response to zero);
//   b. carry_kernel: per sequence, carry[c+1] = A_c·carry[c] + v_c from z[-1];
//   c. chunk_kernel<rerun>: each (sequence, chunk) re-runs its steps from its true carry as
//      matrix-vector products, writing z (and the final state from the last chunk).
// With one chunk per sequence phase c alone runs, from z[-1]. The same engine serves the
// forward (W' = W) and the backward's db (W' = the next forward step's Wᵀ, read backwards).
//
// All arithmetic is in C = compute_t<T> (float for the 16-bit types). Indices are 64-bit;
// every grid loops over its work (grid-stride), so no problem size exceeds a launch limit.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../detail/validate.hpp"
#include "../../numeric.hpp"

namespace parscan::cuda_detail {

using index_t = parscan::index_t;

/// A (B, T, block) tensor: element offset of step t of sequence s.
struct strided_blocks {
  index_t batch = 0, step = 0;
  __host__ __device__ index_t at(index_t s, index_t t) const { return s * batch + t * step; }
};

// ---------------------------------------------------------------------------------------
// The recurrence engine.

/// The precision of chunk aggregates and carries: double for float compute. A chunk's transfer
/// matrix A = W'[last]···W'[first] carries every later chunk's state, so its rounding error
/// adds up coherently over the chunks: with one W shared by every step, a float run of 32
/// chunks of N = 1 came out at 1.3e-5 where one sequential pass gets 1e-6. Composed in double,
/// A and the carries add no error that float rounding of the carry does not already have.
template <class C>
using aggregate_t = std::conditional_t<std::is_same_v<C, float>, double, C>;

/// One run of the engine. T: input storage type; XO: the per-step output's type (T, or C for
/// a recomputed x in workspace); FO: the final state's type; C: compute type.
template <class T, class XO, class FO, class C>
struct engine_problem {
  const T* W = nullptr;
  strided_blocks lW;
  const T* b = nullptr;
  strided_blocks lb;
  XO* x = nullptr;  // per-step output (null in phase a)
  strided_blocks lx;
  const T* z0 = nullptr;  // dense (B, N) state before engine step 0, or null for zero
  FO* z_final = nullptr;  // dense (B, N) state after the last engine step, or null
  index_t batch = 0, length = 0, n = 0;
  index_t chunk = 0, chunks = 0;  // steps per chunk, chunks per sequence
  bool descending = false;        // engine step m is time T-1-m (else m)
  int w_shift = 0;                // W'[m] is W at time(m) + w_shift, transposed when nonzero;
                                  // engine step 0 then uses the identity (no W is read)
  // Workspace for the chunked path (tasks = batch·chunks, dense per task).
  aggregate_t<C>* agg_A = nullptr;  // (tasks, N, N)
  aggregate_t<C>* agg_v = nullptr;  // (tasks, N)
  aggregate_t<C>* carry = nullptr;  // (tasks, N): the state entering each chunk
  // Staging: steps of W' and b' per shared-memory stage, and register slots per thread.
  int stage_steps = 1;
};

inline constexpr int engine_max_slots = 24;  // register prefetch slots per thread

/// Threads per block of the chunk kernel for state size N.
__host__ __device__ inline int engine_threads(index_t N) {
  const index_t nn = N * N;
  const index_t t = (nn + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 256 ? 256 : t));
}

/// Steps staged at once: enough that each thread prefetches a few elements per stage, within
/// engine_max_slots.
__host__ __device__ inline int engine_stage_steps(index_t N) {
  const index_t per_step = N * N + N, threads = engine_threads(N);
  index_t s = threads * 8 / per_step;
  if (s < 1) s = 1;
  if (s > 32) s = 32;
  return static_cast<int>(s);
}

/// Bytes of the chunk kernel's stages of W' (padded rows) and b', in C; z (and A) follow,
/// 8-byte aligned.
template <class C>
__host__ __device__ inline std::size_t engine_stage_bytes(index_t N) {
  const index_t S = engine_stage_steps(N);
  return (static_cast<std::size_t>(S * N * (N + 1) + S * N) * sizeof(C) + 7) / 8 * 8;
}

/// Dynamic shared memory (bytes) of the chunk kernel: the stages, then z and, when
/// aggregating, A (both in aggregate_t<C> then).
template <class C>
__host__ __device__ inline std::size_t engine_smem(index_t N, bool aggregate) {
  const std::size_t state = aggregate ? static_cast<std::size_t>(N + N * N) * sizeof(aggregate_t<C>)
                                      : static_cast<std::size_t>(N) * sizeof(C);
  return engine_stage_bytes<C>(N) + state;
}

template <class C, class T>
__device__ __forceinline__ C to_c(T v) { return static_cast<C>(static_cast<compute_t<T>>(v)); }

template <class Out, class C>
__device__ __forceinline__ Out from_c(C v) { return static_cast<Out>(static_cast<compute_t<Out>>(v)); }

/// Phase a (Aggregate) or phase c (!Aggregate) for every (sequence, chunk) task.
template <bool Aggregate, class T, class XO, class FO, class C>
__global__ void chunk_kernel(engine_problem<T, XO, FO, C> p) {
  // The running state: the chunk's zero-state response when aggregating (in the aggregate
  // precision, like A), the true state when re-running.
  using D = aggregate_t<C>;
  using Z = std::conditional_t<Aggregate, D, C>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  C* smem = reinterpret_cast<C*>(smem_raw);
  const index_t N = p.n, NP = N + 1, S = p.stage_steps;
  C* Ws = smem;                // S × N × (N+1): W'[step] row i at i·(N+1)
  C* bs = Ws + S * N * NP;     // S × N
  Z* zs = reinterpret_cast<Z*>(smem_raw + engine_stage_bytes<C>(N));  // N
  D* As = reinterpret_cast<D*>(zs + N);                                // N × N (Aggregate only)
  const int tid = static_cast<int>(threadIdx.x), nthreads = static_cast<int>(blockDim.x);
  // Stage offsets fit in int: a stage holds at most engine_threads · engine_max_slots elements.
  const int per_step = static_cast<int>(N * N + N), stage_elems = static_cast<int>(S) * per_step;
  const int ni = static_cast<int>(N), nni = ni * ni;
  const index_t nn = N * N;
  const index_t tasks = p.batch * p.chunks;

  for (index_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const index_t s = task / p.chunks, c = task % p.chunks;
    const index_t m0 = c * p.chunk;
    const index_t m1 = (m0 + p.chunk < p.length) ? m0 + p.chunk : p.length;
    const index_t steps = m1 - m0;
    const index_t stages = (steps + S - 1) / S;

    // Prefetch of stage q: element e of the stage (step e / per_step, then W' row-major, then b').
    C pre[engine_max_slots];
    auto fetch = [&](index_t q) {
#pragma unroll
      for (int k = 0; k < engine_max_slots; ++k) {
        const int e = tid + k * nthreads;
        C v = C(0);
        if (e < stage_elems) {
          const int j = e / per_step, r = e % per_step;
          const index_t m = m0 + q * S + j;
          if (m < m1) {
            const index_t t = p.descending ? p.length - 1 - m : m;
            if (r < nni) {
              if (p.w_shift == 0) {
                v = to_c<C>(p.W[p.lW.at(s, t) + r]);
              } else if (m > 0) {
                v = to_c<C>(p.W[p.lW.at(s, t + p.w_shift) + r]);
              } else {
                v = (r / ni == r % ni) ? C(1) : C(0);  // engine step 0 of the transposed run: identity
              }
            } else {
              v = to_c<C>(p.b[p.lb.at(s, t) + (r - nni)]);
            }
          }
        }
        pre[k] = v;
      }
    };
    auto store = [&]() {
#pragma unroll
      for (int k = 0; k < engine_max_slots; ++k) {
        const int e = tid + k * nthreads;
        if (e < stage_elems) {
          const int j = e / per_step, r = e % per_step;
          if (r < nni) {
            int i = r / ni, col = r % ni;
            if (p.w_shift != 0) { const int tmp = i; i = col; col = tmp; }  // transposed
            Ws[j * N * NP + i * NP + col] = pre[k];
          } else {
            bs[j * N + (r - nni)] = pre[k];
          }
        }
      }
    };

    // The state entering the chunk.
    if (tid < N) {
      Z z = Z(0);
      if (!Aggregate) {
        if (p.chunks > 1) z = static_cast<Z>(p.carry[task * N + tid]);
        else if (p.z0) z = to_c<C>(p.z0[s * N + tid]);
      }
      zs[tid] = z;
    }
    D acc[16];  // Aggregate: this thread's elements of A (tid + k·nthreads), N·N ≤ 16·256
    if (Aggregate) {
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        const index_t e = tid + static_cast<index_t>(k) * nthreads;
        if (e < nn) As[e] = (e / N == e % N) ? D(1) : D(0);
      }
    }
    fetch(0);
    for (index_t q = 0; q < stages; ++q) {
      __syncthreads();  // everyone is done with the previous stage's W', b'
      store();
      __syncthreads();  // the stage (and z, A) are visible
      if (q + 1 < stages) fetch(q + 1);  // in flight while this stage computes
      const index_t here = (m1 - (m0 + q * S) < S) ? m1 - (m0 + q * S) : S;
      for (index_t j = 0; j < here; ++j) {
        const C* Wj = Ws + j * N * NP;
        Z znew = Z(0);
        if (tid < N) {
          const C* row = Wj + tid * NP;
          for (index_t k = 0; k < N; ++k) znew += static_cast<Z>(row[k]) * zs[k];
          znew += static_cast<Z>(bs[j * N + tid]);
        }
        if (Aggregate) {
#pragma unroll
          for (int k = 0; k < 16; ++k) {
            const index_t e = tid + static_cast<index_t>(k) * nthreads;
            if (e < nn) {
              const index_t i = e / N, col = e % N;
              const C* row = Wj + i * NP;
              D a = D(0);
              for (index_t l = 0; l < N; ++l) a += static_cast<D>(row[l]) * As[l * N + col];
              acc[k] = a;
            }
          }
        }
        __syncthreads();  // all reads of z (and A) for this step are done
        if (tid < N) {
          zs[tid] = znew;
          if (!Aggregate) {
            const index_t m = m0 + q * S + j, t = p.descending ? p.length - 1 - m : m;
            p.x[p.lx.at(s, t) + tid] = from_c<XO>(static_cast<C>(znew));
            if (m == p.length - 1 && p.z_final) p.z_final[s * N + tid] = from_c<FO>(static_cast<C>(znew));
          }
        }
        if (Aggregate) {
#pragma unroll
          for (int k = 0; k < 16; ++k) {
            const index_t e = tid + static_cast<index_t>(k) * nthreads;
            if (e < nn) As[e] = acc[k];
          }
        }
        __syncthreads();  // the new z (and A) are visible
      }
    }
    if (Aggregate) {
      if (tid < N) p.agg_v[task * N + tid] = zs[tid];
      for (index_t e = tid; e < nn; e += nthreads) p.agg_A[task * nn + e] = As[e];
    }
    __syncthreads();  // before the next task reuses shared memory
  }
}

/// Phase b: per sequence, the state entering each chunk. One block per sequence (grid-stride),
/// thread i owns row i; the next chunk's row of A is prefetched into registers.
template <class T, class XO, class FO, class C>
__global__ void carry_kernel(engine_problem<T, XO, FO, C> p) {
  using D = aggregate_t<C>;
  __shared__ D z[64];
  const index_t N = p.n, nn = N * N;
  const int i = static_cast<int>(threadIdx.x);
  for (index_t s = blockIdx.x; s < p.batch; s += gridDim.x) {
    if (i < N) z[i] = p.z0 ? static_cast<D>(to_c<C>(p.z0[s * N + i])) : D(0);
    D row[64], v = D(0);
    auto load = [&](index_t c) {
      const index_t task = s * p.chunks + c;
#pragma unroll
      for (int k = 0; k < 64; ++k) row[k] = (i < N && k < N) ? p.agg_A[task * nn + i * N + k] : D(0);
      v = i < N ? p.agg_v[task * N + i] : D(0);
    };
    load(0);
    __syncthreads();
    for (index_t c = 0; c < p.chunks; ++c) {
      const index_t task = s * p.chunks + c;
      if (i < N) p.carry[task * N + i] = z[i];
      if (c + 1 == p.chunks) break;
      D a = v;
#pragma unroll
      for (int k = 0; k < 64; ++k)
        if (k < N) a += row[k] * z[k];
      load(c + 1);
      __syncthreads();
      if (i < N) z[i] = a;
      __syncthreads();
    }
    __syncthreads();
  }
}

/// With no steps: z_final = z0 (or 0). Elementwise; z_final may be exactly z0.
template <class In, class Out>
__global__ void state_copy_kernel(const In* z0, Out* z_final, index_t count) {
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<index_t>(gridDim.x) * blockDim.x)
    z_final[e] = from_c<Out>(z0 ? to_c<compute_t<Out>>(z0[e]) : compute_t<Out>(0));
}

/// dW[t] = db[t]·x[prev]ᵀ over (s, t, i, j); x[prev] = x0 (or 0) at the first forward step.
/// X: the type of x (T given, or C recomputed, densely laid out then). A block takes `group`
/// consecutive steps of one sequence at a time (group·N² elements, a few per thread), so the
/// 64-bit index arithmetic is paid per group, not per element.
template <class T, class X, class C>
__global__ void outer_kernel(T* dW, strided_blocks ldW, const T* db, strided_blocks ldb, const X* x,
                             strided_blocks lx, const T* x0, index_t B, index_t L, index_t N, bool reverse,
                             int group) {
  const int ni = static_cast<int>(N), nn = ni * ni, elems = group * nn;
  const index_t per_seq = (L + group - 1) / group, groups = B * per_seq;
  for (index_t gid = blockIdx.x; gid < groups; gid += gridDim.x) {
    const index_t s = gid / per_seq, t0 = gid % per_seq * group;
    for (int e = static_cast<int>(threadIdx.x); e < elems; e += static_cast<int>(blockDim.x)) {
      const int js = e / nn, r = e % nn, i = r / ni, j = r % ni;
      const index_t t = t0 + js;
      if (t >= L) break;  // e only grows: the rest of this thread's elements are past the end too
      const index_t k = reverse ? L - 1 - t : t;  // forward processing index
      C xp = C(0);
      if (k > 0) xp = to_c<C>(x[lx.at(s, reverse ? t + 1 : t - 1) + j]);
      else if (x0) xp = to_c<C>(x0[s * N + j]);
      dW[ldW.at(s, t) + r] = from_c<T>(to_c<C>(db[ldb.at(s, t) + i]) * xp);
    }
  }
}

/// dx0 = W[first]ᵀ·db[first] per sequence (db[first] in compute precision from the engine);
/// with no steps, dx0 = dx_final (or 0) — handled by state_copy_kernel.
template <class T, class C>
__global__ void dx0_kernel(T* dx0, const T* W, strided_blocks lW, const C* dbf, index_t B, index_t L, index_t N,
                           bool reverse) {
  const index_t total = B * N;
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const index_t s = e / N, j = e % N, t = reverse ? L - 1 : 0;
    const T* Wt = W + lW.at(s, t);
    C a = C(0);
    for (index_t i = 0; i < N; ++i) a += to_c<C>(Wt[i * N + j]) * dbf[s * N + i];
    dx0[e] = from_c<T>(a);
  }
}

// The matrix-chain kernels are in chain_kernels.cuh.

}  // namespace parscan::cuda_detail
