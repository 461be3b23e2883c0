// parscan/cuda/matrix/matrix_kernels.cuh — the kernels behind the CUDA matrix recurrence and
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
// Three implementations share the workspace format: the thread engine (matrix_thread_engine.cuh)
// for N ≤ 4, one task per thread; the tensor engine (matrix_tensor_engine.cuh) for N ≤ 16,
// phases a and b a warp a task or sequence on the FP64 tensor cores, phase c a state element a
// lane; and the block engine (chunk_kernel, carry_kernel) above that, one block per task.
//
// All arithmetic is in C = compute_t<T> (float for the 16-bit types). Indices are 64-bit;
// every grid loops over its work (grid-stride), so no problem size exceeds a launch limit.
#pragma once

#include <cstdint>
#include <cstring>
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

/// A task of the engine: engine steps [m0, m1) (none: m0 = m1) of sequence `seq`, which has
/// `length` steps from time `origin` (0 for a batch; its first packed step otherwise).
struct engine_task {
  index_t seq = 0, m0 = 0, m1 = 0, length = 0, origin = 0;
};
/// A sequence's tasks [first, first + count), its steps and first time.
struct engine_sequence {
  index_t first = 0, count = 0, length = 0, origin = 0;
};

/// The first slot of packed sequence s: ⌊offsets[s] / chunk⌋ + s (engine_problem).
__device__ PARSCAN_INLINE index_t packed_first_slot(const std::int64_t* offsets, index_t s, index_t chunk) {
  return offsets[s] / chunk + s;
}

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
  // Packed sequences (cu_seqlens; null: the batch above). Sequence s is times [offsets[s],
  // offsets[s+1]) of one packed tensor (the layouts' batch strides are 0, so step t of s is
  // lX.at(s, offsets[s] + t)); batch is the sequence count, length the packed total. Its chunks
  // of `chunk` steps are the tasks from packed_first_slot(s) = ⌊offsets[s] / chunk⌋ + s, at most
  // one slot of each sequence left unused, `tasks` slots in all; slots[task] holds the slot's
  // (sequence, chunk), written by packed_slots_kernel. Every packed run is chunked.
  const std::int64_t* offsets = nullptr;
  const int2* slots = nullptr;
  index_t tasks = 0;

  __device__ PARSCAN_INLINE bool chunked() const { return offsets != nullptr || chunks > 1; }
  __device__ PARSCAN_INLINE index_t task_count() const { return offsets ? tasks : batch * chunks; }
  /// Where task `task` works (an unused or out-of-range one: no steps).
  __device__ PARSCAN_INLINE engine_task task_at(index_t task) const {
    engine_task r;
    if (!offsets) {
      r.seq = task / chunks, r.m0 = task % chunks * chunk, r.length = length;
    } else if (task < tasks) {  // one load from the slot table instead of a search of the offsets
      const int2 e = slots[task];
      r.seq = e.x, r.origin = offsets[e.x], r.length = offsets[e.x + 1] - r.origin;
      r.m0 = static_cast<index_t>(e.y) * chunk;
    }
    r.m1 = r.m0 + chunk < r.length ? r.m0 + chunk : r.length;
    if (task >= task_count() || r.m0 >= r.m1) r.m0 = r.m1 = 0;
    return r;
  }
  /// Sequence s's tasks: the first and how many (its steps, and where they are).
  __device__ PARSCAN_INLINE engine_sequence sequence_at(index_t s) const {
    if (!offsets) return {s * chunks, chunks, length, 0};
    const index_t origin = offsets[s], steps = offsets[s + 1] - origin;
    return {packed_first_slot(offsets, s, chunk), steps > 0 ? (steps + chunk - 1) / chunk : 0, steps, origin};
  }
  /// Memory time of engine step m of a task's (or sequence's) `length` steps from `origin`.
  __device__ PARSCAN_INLINE index_t time_of(index_t m, index_t steps, index_t origin) const {
    return origin + (descending ? steps - 1 - m : m);
  }
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
/// aggregating, A (both in aggregate_t<C> then), then 16 bytes of slack: for odd N the
/// compiled z loop reads z[N-1] as half of an 8-byte load (compute-sanitizer memcheck flagged
/// the read past the end at N = 17; the extra value is never used).
template <class C>
__host__ __device__ inline std::size_t engine_smem(index_t N, bool aggregate) {
  const std::size_t state = aggregate ? static_cast<std::size_t>(N + N * N) * sizeof(aggregate_t<C>)
                                      : static_cast<std::size_t>(N) * sizeof(C);
  return engine_stage_bytes<C>(N) + state + 16;
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
  const index_t tasks = p.task_count();

  for (index_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const engine_task job = p.task_at(task);
    if (job.m1 == job.m0) continue;  // an unused slot of a packed sequence (the whole block alike)
    const index_t s = job.seq, m0 = job.m0, m1 = job.m1;
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
            const index_t t = p.time_of(m, job.length, job.origin);
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
        if (p.chunked()) z = static_cast<Z>(p.carry[task * N + tid]);
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
            const index_t m = m0 + q * S + j, t = p.time_of(m, job.length, job.origin);
            p.x[p.lx.at(s, t) + tid] = from_c<XO>(static_cast<C>(znew));
            if (m == job.length - 1 && p.z_final) p.z_final[s * N + tid] = from_c<FO>(static_cast<C>(znew));
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
    const engine_sequence q = p.sequence_at(s);
    if (q.count == 0) continue;  // a packed sequence of no steps (the whole block alike)
    if (i < N) z[i] = p.z0 ? static_cast<D>(to_c<C>(p.z0[s * N + i])) : D(0);
    D row[64], v = D(0);
    auto load = [&](index_t c) {
      const index_t task = q.first + c;
#pragma unroll
      for (int k = 0; k < 64; ++k) row[k] = (i < N && k < N) ? p.agg_A[task * nn + i * N + k] : D(0);
      v = i < N ? p.agg_v[task * N + i] : D(0);
    };
    load(0);
    __syncthreads();
    for (index_t c = 0; c < q.count; ++c) {
      const index_t task = q.first + c;
      if (i < N) p.carry[task * N + i] = z[i];
      if (c + 1 == q.count) break;
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

/// outer_kernel for N known at compile time (N ≤ 2): a thread a step, db[t] and x[prev] read
/// once each and the step's N² products written from registers, where outer_kernel takes an
/// element a thread, with three divisions and two scalar loads an element. The products are
/// the same, bit for bit.
template <int N, class T, class X, class C>
__global__ void outer_steps_kernel(T* dW, strided_blocks ldW, const T* db, strided_blocks ldb, const X* x,
                                   strided_blocks lx, const T* x0, index_t B, index_t L, bool reverse) {
  const index_t total = B * L;
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const index_t s = e / L, t = e - s * L;
    const index_t k = reverse ? L - 1 - t : t;  // forward processing index
    C xp[N], d[N];
    const X* const xs = k > 0 ? x + lx.at(s, reverse ? t + 1 : t - 1) : nullptr;
    const T* const ds = db + ldb.at(s, t);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      xp[j] = xs ? to_c<C>(xs[j]) : x0 ? to_c<C>(x0[s * N + j]) : C(0);
      d[j] = to_c<C>(ds[j]);
    }
    T* const out = dW + ldW.at(s, t);
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
      for (int j = 0; j < N; ++j) out[i * N + j] = from_c<T>(d[i] * xp[j]);
  }
}

/// The shape of a 16-byte word of a step's dW (N×N, row-major) in element type T: `cols`
/// consecutive elements of one row where a row is one word or more, else `rows` whole rows
/// (N = 4 in the 16-bit types: two rows of 8 bytes). `steps` a block of the word kernels takes:
/// 256 / N, or more where that leaves threads without a word.
template <int N, class T>
struct outer_word_shape {
  static constexpr int vec = 16 / static_cast<int>(sizeof(T));
  static constexpr int rows = vec > N ? vec / N : 1, cols = vec / rows;
  static constexpr int steps = 256 * vec / (N * N) > 256 / N ? 256 * vec / (N * N) : 256 / N;
  static constexpr int words = steps * N * N / vec;
  static_assert(rows == 1 ? N % vec == 0 : vec % N == 0, "a word holds part of one row, or whole rows");
  /// The step, first row and first column of word w of a block.
  struct place {
    int step, row, col;
  };
  __device__ PARSCAN_INLINE static place of(int w) {
    const int e = w * vec;
    return {e / (N * N), e % (N * N) / N, e % N};
  }
};

/// One 16-byte word of dW[t] = db[t]·x[prev]ᵀ (outer_word_shape<N, T>): ds = db[t] from the
/// word's first row, xs = x[prev] from its first column, or null where t is its sequence's
/// first forward step (then x0s, x0 from that column, or 0).
template <int N, class T, class X, class C>
__device__ PARSCAN_INLINE void outer_word(T* out, const T* ds, const X* xs, const T* x0s) {
  using W = outer_word_shape<N, T>;
  T w[W::vec];
  // x[prev] read where each product needs it (the compiler keeps one load per column): with the
  // columns converted into an array first, the 16-bit N = 8 and 16 backward ran 3–5% slower.
#pragma unroll
  for (int i = 0; i < W::rows; ++i) {
    const C d = to_c<C>(ds[i]);
#pragma unroll
    for (int j = 0; j < W::cols; ++j) {
      const C xp = xs ? to_c<C>(xs[j]) : x0s ? to_c<C>(x0s[j]) : C(0);
      w[i * W::cols + j] = from_c<T>(d * xp);
    }
  }
  uint4 word;
  memcpy(&word, w, 16);
  *reinterpret_cast<uint4*>(out) = word;
}

/// outer_kernel for N known at compile time whose steps are whole 16-byte words (N = 4, 8, 16;
/// outer_word_shape): a thread a 16-byte word of dW, where outer_kernel takes an element a
/// thread with three divisions and two loads an element. A block takes outer_word_shape::steps
/// consecutive steps of one sequence and its threads take their words in order, so each store
/// instruction of a warp writes 512 contiguous bytes of a dense dW. The products are the same,
/// bit for bit.
template <int N, class T, class X, class C>
__global__ void outer_words_kernel(T* dW, strided_blocks ldW, const T* db, strided_blocks ldb, const X* x,
                                   strided_blocks lx, const T* x0, index_t B, index_t L, bool reverse) {
  using W = outer_word_shape<N, T>;
  const index_t per_seq = (L + W::steps - 1) / W::steps, groups = B * per_seq;
  for (index_t gid = blockIdx.x; gid < groups; gid += gridDim.x) {
    const index_t s = gid / per_seq, t0 = gid % per_seq * W::steps;
#pragma unroll
    for (int w = static_cast<int>(threadIdx.x); w < W::words; w += 256) {
      const auto at = W::of(w);
      const index_t t = t0 + at.step;
      if (t >= L) break;  // w only grows
      const index_t k = reverse ? L - 1 - t : t;  // forward processing index
      const X* const xs = k > 0 ? x + lx.at(s, reverse ? t + 1 : t - 1) + at.col : nullptr;
      outer_word<N, T, X, C>(dW + ldW.at(s, t) + at.row * N + at.col, db + ldb.at(s, t) + at.row, xs,
                             x0 ? x0 + s * N + at.col : x0);
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

// ---------------------------------------------------------------------------------------
// Packed sequences (cu_seqlens): the steps that lie outside the engine.

/// The slot table of packed sequences: slot t belongs to the last sequence s whose slots start
/// at or before it (offsets that break the contract still give one in [0, S)), as its chunk
/// t − packed_first_slot(s). (A template, as every kernel of this header, so that the
/// translation units of each dtype share one definition.)
template <class Slot = int2>
__global__ void packed_slots_kernel(const std::int64_t* offsets, index_t sequences, index_t chunk, index_t slots,
                                    Slot* table) {
  for (index_t t = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; t < slots;
       t += static_cast<index_t>(gridDim.x) * blockDim.x) {
    index_t lo = 0, hi = sequences - 1;
    while (lo < hi) {
      const index_t mid = lo + (hi - lo + 1) / 2;
      if (packed_first_slot(offsets, mid, chunk) <= t) lo = mid;
      else hi = mid - 1;
    }
    table[t] = Slot{static_cast<int>(lo), static_cast<int>(t - packed_first_slot(offsets, lo, chunk))};
  }
}

/// The sequence that packed step t belongs to: the last s with offsets[s] ≤ t (t < offsets[S]).
__device__ PARSCAN_INLINE index_t packed_sequence_of(const std::int64_t* offsets, index_t sequences, index_t t) {
  index_t lo = 0, hi = sequences - 1;
  while (lo < hi) {
    const index_t mid = lo + (hi - lo + 1) / 2;
    if (offsets[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/// packed_sequence_of(t0) for every thread of a block, from one thread's search (a search in every
/// thread, each a chain of dependent loads, held the backward at 87% of the batch's). Every
/// thread of the block calls it.
__device__ PARSCAN_INLINE index_t block_sequence_of(const std::int64_t* offsets, index_t sequences, index_t t0) {
  __shared__ index_t found;
  if (threadIdx.x == 0) found = packed_sequence_of(offsets, sequences, t0);
  __syncthreads();
  const index_t s = found;
  __syncthreads();  // read by all before thread 0 writes the next block step's
  return s;
}

/// The packed dW[t] = db[t]·x[prev]ᵀ over the steps [0, offsets[S]); x[prev] = x0[s] (or 0) at
/// sequence s's first forward step. A block takes `group` consecutive packed steps at a time,
/// finds the sequence of the group's first step (block_sequence_of), and each thread walks on
/// from there (its steps only grow).
template <class T, class X, class C>
__global__ void packed_outer_kernel(T* dW, index_t sW, const T* db, index_t sdb, const X* x, index_t sx, const T* x0,
                                    const std::int64_t* offsets, index_t sequences, index_t total, index_t N,
                                    bool reverse, int group) {
  const int ni = static_cast<int>(N), nn = ni * ni, elems = group * nn;
  const index_t used = offsets[sequences] < total ? offsets[sequences] : total;
  const index_t groups = (used + group - 1) / group;
  for (index_t gid = blockIdx.x; gid < groups; gid += gridDim.x) {
    const index_t t0 = gid * group;
    index_t s = block_sequence_of(offsets, sequences, t0), origin = offsets[s], end = offsets[s + 1];
    for (int e = static_cast<int>(threadIdx.x); e < elems; e += static_cast<int>(blockDim.x)) {
      const int js = e / nn, r = e % nn, i = r / ni, j = r % ni;
      const index_t t = t0 + js;
      if (t >= used) break;  // e only grows: the rest of this thread's elements are past the end too
      while (t >= end) origin = end, end = offsets[++s + 1];  // past empty sequences too
      const bool first = reverse ? t == end - 1 : t == origin;  // the sequence's first forward step
      C xp = C(0);
      if (!first) xp = to_c<C>(x[(reverse ? t + 1 : t - 1) * sx + j]);
      else if (x0) xp = to_c<C>(x0[s * N + j]);
      dW[t * sW + r] = from_c<T>(to_c<C>(db[t * sdb + i]) * xp);
    }
  }
}

/// packed_outer_kernel for N known at compile time whose steps are whole 16-byte words, as
/// outer_words_kernel: a block's outer_word_shape::steps consecutive packed steps, a thread a
/// 16-byte word of dW, the words in order; one thread finds the sequence of the block's first
/// step and each thread walks on from there as its steps cross into the next. The products are
/// the same, bit for bit.
template <int N, class T, class X, class C>
__global__ void packed_outer_words_kernel(T* dW, index_t sW, const T* db, index_t sdb, const X* x, index_t sx,
                                          const T* x0, const std::int64_t* offsets, index_t sequences, index_t total,
                                          bool reverse) {
  using W = outer_word_shape<N, T>;
  const index_t used = offsets[sequences] < total ? offsets[sequences] : total;
  const index_t groups = (used + W::steps - 1) / W::steps;
  for (index_t gid = blockIdx.x; gid < groups; gid += gridDim.x) {
    const index_t t0 = gid * W::steps;
    index_t s = block_sequence_of(offsets, sequences, t0), origin = offsets[s], end = offsets[s + 1];
#pragma unroll
    for (int w = static_cast<int>(threadIdx.x); w < W::words; w += 256) {
      const auto at = W::of(w);
      const index_t t = t0 + at.step;
      if (t >= used) break;  // w only grows
      while (t >= end) origin = end, end = offsets[++s + 1];  // past empty sequences too
      const bool first = reverse ? t == end - 1 : t == origin;  // the sequence's first forward step
      const X* const xs = first ? nullptr : x + (reverse ? t + 1 : t - 1) * sx + at.col;
      outer_word<N, T, X, C>(dW + t * sW + at.row * N + at.col, db + t * sdb + at.row, xs,
                             x0 ? x0 + s * N + at.col : x0);
    }
  }
}

/// Per packed sequence s and state element: a sequence of no steps gets out[s] = in[s] (or 0):
/// x_final = x0 forward, dx0 = dx_final backward; with W (the backward's dx0), a sequence with
/// steps gets W[first]ᵀ·dbf[s] (first: its first forward step; dbf: db there, from the engine).
/// Elementwise per (s, j): out may be exactly in.
template <class T, class C>
__global__ void packed_states_kernel(T* out, const T* in, const T* W, index_t sW, const C* dbf,
                                     const std::int64_t* offsets, index_t sequences, index_t N, bool reverse) {
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < sequences * N;
       e += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const index_t s = e / N, j = e % N, origin = offsets[s], end = offsets[s + 1];
    if (end == origin) {
      out[e] = from_c<T>(in ? to_c<C>(in[e]) : C(0));
    } else if (W) {
      const T* Wt = W + (reverse ? end - 1 : origin) * sW;
      C a = C(0);
      for (index_t i = 0; i < N; ++i) a += to_c<C>(Wt[i * N + j]) * dbf[s * N + i];
      out[e] = from_c<T>(a);
    }
  }
}

// The matrix-chain kernels are in chain_kernels.cuh.

}  // namespace parscan::cuda_detail
