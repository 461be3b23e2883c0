// parscan/cuda/matrix/chain_thread_engine.cuh — the thread engine of the matrix chain: totals
// and prefixes of many chains of small matrices (d ≤ chain_thread_max_d), a few threads per
// (chain, chunk) task, with no block barrier and no product in shared memory.
//
// The chunk engine (chain_kernels.cuh) gives each (chain, chunk) a block of 256 threads that
// meets at a barrier at every product; at d = 8 a product is 512 multiply-adds, so its walk
// is one barrier round trip per factor. With B ≥ 256 chains it gave each chain one block
// walking all of it: 1536 chains of 4096 8×8 factors took 24 ms on an H100, where reading the
// 1.6 GB of factors takes about 0.55 ms. Here a task's running product lives in the registers
// of G = D / R threads, each holding R of its rows, so tens of thousands of tasks walk side by
// side and the walk is bound by the factors' bytes, not by one task's latency.
//
// Orientation: a left-to-right chain is walked as acc ← acc · M. A right-to-left one
// (P = M_{n-1} ⋯ M_0) is walked as its transpose, Pᵀ = M_0ᵀ ⋯ M_{n-1}ᵀ, so the same row update
// serves both: the caller's factors are then read transposed and the result written
// transposed. Chunk totals and carries in the workspace stay in walk orientation.
#pragma once

#include <type_traits>

#include "../block/block_matrix_product.cuh"
#include "../thread/run_io.cuh"
#include "matrix_kernels.cuh"

namespace parscan::cuda_detail {

/// The largest d the thread engine takes (matrices padded with zeros to D = 4, 8 or 16).
inline constexpr int chain_thread_max_d = 16;
inline constexpr int chain_thread_block = 128;

/// Rows of the running product per thread: about 64 floats or 32 doubles of it (and as many
/// of the product being formed, and a factor row), about 136 values live; the compiler, which
/// hoists the factor's loads, then takes up to 255 registers at D = 8 and 16, without spills.
template <int D, class C>
inline constexpr int chain_thread_rows = (sizeof(C) == 4 ? 64 : 32) / D < D ? (sizeof(C) == 4 ? 64 : 32) / D : D;

/// Threads per task.
template <int D, class C>
inline constexpr int chain_thread_group = D / chain_thread_rows<D, C>;

/// One launch of the engine: every chain's positions split into `chunks` chunks of `len` (the
/// last may be shorter); each task walks its chunk from the carry of the chunks before it
/// (if `carry` is set and the chunk is not the first) and writes either the chunk's total
/// (`out` + b·out_batch + c·out_step) or every prefix (`out` + b·out_batch + p·out_step).
template <class X, class Y, class C>
struct chain_thread_walk {
  const X* in = nullptr;
  index_t in_batch = 0, in_step = 0;
  const C* carry = nullptr;  // (B, chunks - 1, d, d) dense, walk orientation
  Y* out = nullptr;
  index_t out_batch = 0, out_step = 0;
  index_t B = 0, n = 0, len = 1, chunks = 1;
  int d = 1;
  bool in_transposed = false, out_transposed = false;
  bool vec_in = false;  // rows of 4 elements as one access (!in_transposed, d % 4 == 0, aligned)
  bool prefixes = false;
};

/// Row k of a factor (walk orientation) into `row`, zero beyond d.
template <int D, class C, class X>
__device__ __forceinline__ void chain_thread_row(const X* m, int k, int d, bool transposed, bool vec, C (&row)[D]) {
  if (vec) {
#pragma unroll
    for (int j = 0; j < D; j += 4) {
      if (j < d) {
        const packed_vec<X, 4> v = *reinterpret_cast<const packed_vec<X, 4>*>(m + k * d + j);
#pragma unroll
        for (int e = 0; e < 4; ++e) row[j + e] = to_c<C>(v.v[e]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) row[j + e] = C(0);
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < D; ++j) row[j] = j < d ? to_c<C>(transposed ? m[j * d + k] : m[k * d + j]) : C(0);
}

/// acc ← acc · F for a thread's R rows of the running product, F's row k from row_of(k, row).
template <int D, int R, class C, class RowOf>
__device__ __forceinline__ void chain_thread_multiply(C (&acc)[R][D], int d, RowOf row_of) {
  C next[R][D];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int e = 0; e < D; ++e) next[r][e] = C(0);
#pragma unroll
  for (int k = 0; k < D; ++k) {
    if (k < d) {
      C row[D];
      row_of(k, row);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int e = 0; e < D; ++e) next[r][e] = fma(acc[r][k], row[e], next[r][e]);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int e = 0; e < D; ++e) acc[r][e] = next[r][e];
}

/// The carry into a task's chunk (the product of the chain's earlier chunks) into acc.
template <int D, int R, class X, class Y, class C>
__device__ __forceinline__ void chain_thread_carry(const chain_thread_walk<X, Y, C>& p, index_t b, index_t c, int r0,
                                                   C (&acc)[R][D]) {
  const int d = p.d;
  const C* from = p.carry + (b * (p.chunks - 1) + c - 1) * d * d;
#pragma unroll
  for (int r = 0; r < R; ++r) chain_thread_row<D>(from, r0 + r < d ? r0 + r : 0, d, false, d % 4 == 0, acc[r]);
}

/// A thread's rows of a product into a d × d matrix o (transposed: its columns).
template <int D, int R, class Y, class C>
__device__ __forceinline__ void chain_thread_write(Y* o, const C (&acc)[R][D], int d, int r0, bool transposed) {
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (r0 + r < d)
#pragma unroll
      for (int e = 0; e < D; ++e)
        if (e < d) o[transposed ? e * d + r0 + r : (r0 + r) * d + e] = from_c<Y>(acc[r][e]);
}

/// The engine's kernel for any d, stride and alignment: G = chain_thread_group<D, C>
/// consecutive threads per task, each reading its task's factors itself. Where every factor
/// is D × D and 16-byte aligned, chain_thread_staged_kernel runs instead.
template <int D, class X, class Y, class C>
__global__ void __launch_bounds__(chain_thread_block) chain_thread_kernel(const chain_thread_walk<X, Y, C> p) {
  constexpr int R = chain_thread_rows<D, C>, G = chain_thread_group<D, C>;
  const int d = p.d;
  const index_t tasks = p.B * p.chunks;
  const int r0 = static_cast<int>(threadIdx.x) % G * R;
  for (index_t task = (static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G; task < tasks;
       task += static_cast<index_t>(gridDim.x) * blockDim.x / G) {
    const index_t b = task / p.chunks, c = task % p.chunks, first = c * p.len;
    const index_t count = min(p.len, p.n - first);
    const X* m = p.in + b * p.in_batch + first * p.in_step;
    Y* const o = p.out + b * p.out_batch;
    C acc[R][D];
    index_t j = 0;
    if (p.carry && c > 0) {
      chain_thread_carry<D>(p, b, c, r0, acc);
    } else {  // the chunk's first factor
#pragma unroll
      for (int r = 0; r < R; ++r) chain_thread_row<D>(m, r0 + r < d ? r0 + r : 0, d, p.in_transposed, p.vec_in, acc[r]);
      j = 1;
      if (p.prefixes) chain_thread_write<D>(o + first * p.out_step, acc, d, r0, p.out_transposed);
    }
    for (; j < count; ++j) {
      const X* f = m + j * p.in_step;
      chain_thread_multiply<D>(acc, d, [&](int k, C(&row)[D]) {
        chain_thread_row<D>(f, k, d, p.in_transposed, p.vec_in, row);
      });
      if (p.prefixes) chain_thread_write<D>(o + (first + j) * p.out_step, acc, d, r0, p.out_transposed);
    }
    if (!p.prefixes) chain_thread_write<D>(o + c * p.out_step, acc, d, r0, p.out_transposed);
  }
}

/// The staged kernel's layout for D × D factors of X (and prefixes of Y): a warp's T = 32 / G
/// tasks, each factor an odd number of 16-byte units apart in shared memory (so the 16-byte
/// reads of 8 tasks fall in distinct banks), two steps deep; the prefixes one step deep. (Three
/// steps deep, two in flight, was 6% slower for 1536 × 4096 × 8² totals on an H100: 706–709
/// against 660–667 µs, at the same 8 warps per SM; docs/performance.md.)
template <int D, class X, class Y, class C>
struct chain_staged_layout {
  static constexpr int tasks = 32 / chain_thread_group<D, C>;
  static constexpr int in_units = D * D * static_cast<int>(sizeof(X)) / 16;
  static constexpr int out_units = D * D * static_cast<int>(sizeof(Y)) / 16;
  static constexpr int in_stride = (in_units | 1) * 16 / static_cast<int>(sizeof(X));
  static constexpr int out_stride = (out_units | 1) * 16 / static_cast<int>(sizeof(Y));
  static constexpr std::size_t in_bytes = 2 * tasks * in_stride * sizeof(X);
  __host__ __device__ static constexpr std::size_t warp_bytes(bool prefixes) {
    return in_bytes + (prefixes ? tasks * out_stride * sizeof(Y) : 0);
  }
};
inline constexpr int chain_staged_block = 64;

/// The engine's kernel where every factor is D × D (d = D) and the factors (and for prefixes
/// the outputs) are 16-byte aligned: each lane copying its task's factor alone touched 32
/// cache lines per 16-byte load (1536 chains of 4096 8×8 factors: 45% of copy, prefixes 9.6%
/// with their stores), so the warp copies its tasks' next factors together, whole factors
/// per instruction, with cp.async one step ahead, and each lane reads its rows back from
/// shared memory; prefixes go out the same way.
template <int D, class X, class Y, class C>
__global__ void __launch_bounds__(chain_staged_block) chain_thread_staged_kernel(const chain_thread_walk<X, Y, C> p) {
  constexpr int R = chain_thread_rows<D, C>, G = chain_thread_group<D, C>;
  using L = chain_staged_layout<D, X, Y, C>;
  constexpr int T = L::tasks;
  extern __shared__ __align__(16) unsigned char staged_smem[];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  unsigned char* const mine = staged_smem + warp * L::warp_bytes(p.prefixes);
  X* const in_buf = reinterpret_cast<X*>(mine);  // [2][T][in_stride]
  Y* const out_buf = reinterpret_cast<Y*>(mine + L::in_bytes);  // [T][out_stride]
  const int t_own = lane / G, r0 = lane % G * R;
  const index_t tasks = p.B * p.chunks, warps = static_cast<index_t>(gridDim.x) * (blockDim.x / 32);
  for (index_t w = static_cast<index_t>(blockIdx.x) * (blockDim.x / 32) + warp; w * T < tasks; w += warps) {
    const index_t task = w * T + t_own;
    const bool active = task < tasks;
    const index_t b = active ? task / p.chunks : 0, c = active ? task % p.chunks : 0, first = c * p.len;
    const index_t count = active ? min(p.len, p.n - first) : 0;
    const X* const m = p.in + b * p.in_batch + first * p.in_step;
    Y* const o = p.out + b * p.out_batch;
    index_t steps = count;  // the most steps of the warp's tasks
#pragma unroll
    for (int s = 16; s > 0; s /= 2) steps = max(steps, static_cast<index_t>(__shfl_xor_sync(~0u, steps, s)));
    // Copies step j of every task of the warp into buffer j % 2: 16-byte unit u of task t's
    // factor by lane (t·in_units + u) % 32 (the task's pointer and count from its first lane).
    auto stage = [&](index_t j) {
      X* const buf = in_buf + (j % 2) * T * L::in_stride;
#pragma unroll
      for (int q0 = 0; q0 < T * L::in_units; q0 += 32) {
        const int q = q0 + lane, t = q / L::in_units, u = q % L::in_units;
        const X* const mt =
            reinterpret_cast<const X*>(__shfl_sync(~0u, reinterpret_cast<unsigned long long>(m), t * G));
        const index_t ct = __shfl_sync(~0u, count, t * G);
        if (q < T * L::in_units && j < ct)
          stage_bytes<16>(buf + t * L::in_stride + u * (16 / sizeof(X)), mt + j * p.in_step + u * (16 / sizeof(X)));
      }
      async_commit();
    };
    C acc[R][D];
    const bool carried = p.carry && c > 0 && active;
    if (carried) chain_thread_carry<D>(p, b, c, r0, acc);
    if (steps > 0) stage(0);
    for (index_t j = 0; j < steps; ++j) {
      if (j + 1 < steps) stage(j + 1);
      else async_commit();  // an empty group, so the wait below always leaves one pending
      async_wait<1>();
      __syncwarp();
      const X* const f = in_buf + (j % 2) * T * L::in_stride + t_own * L::in_stride;
      if (j < count) {
        auto row_of = [&](int k, C(&row)[D]) { chain_thread_row<D>(f, k, D, p.in_transposed, !p.in_transposed, row); };
        if (j == 0 && !carried) {
#pragma unroll
          for (int r = 0; r < R; ++r) row_of(r0 + r, acc[r]);
        } else {
          chain_thread_multiply<D>(acc, D, row_of);
        }
        if (p.prefixes) chain_thread_write<D>(out_buf + t_own * L::out_stride, acc, D, r0, p.out_transposed);
      }
      if (p.prefixes) {  // the warp's prefixes of step j out together, whole ones per instruction
        __syncwarp();
#pragma unroll
        for (int q0 = 0; q0 < T * L::out_units; q0 += 32) {
          const int q = q0 + lane, t = q / L::out_units, u = q % L::out_units;
          Y* const ot = reinterpret_cast<Y*>(
              __shfl_sync(~0u, reinterpret_cast<unsigned long long>(o + first * p.out_step), t * G));
          const index_t ct = __shfl_sync(~0u, count, t * G);
          if (q < T * L::out_units && j < ct)
            *reinterpret_cast<uint4*>(ot + j * p.out_step + u * (16 / sizeof(Y))) =
                *reinterpret_cast<const uint4*>(out_buf + t * L::out_stride + u * (16 / sizeof(Y)));
        }
      }
      __syncwarp();  // buffer j % 2 (and the prefixes' buffer) are free again
    }
    if (active && !p.prefixes) chain_thread_write<D>(o + c * p.out_step, acc, D, r0, p.out_transposed);
  }
}

}  // namespace parscan::cuda_detail
