// parscan/cuda/recurrence/whole_sequence_backward.cuh — the gated recurrence's backward when x is
// not given, for time-contiguous sequences short enough that one block stages a whole sequence in
// shared memory: a, b and dx are read once, x is recomputed in compute precision and never
// written, and da and db are written once. Five tensors move, where recomputing x into the
// workspace and then running the backward on it moves eight (3 + 5), which at those two
// kernels' rates held that plan near 56% of copy (docs/performance.md, "The backward with x
// recomputed", and "... in one pass" for this kernel's figures).
//
// A block a sequence; thread i owns the R steps from i·R in memory. The block copies the
// sequence's a, b and dx into shared memory (cp.async, 16-byte words, swizzled so that each
// thread's reads of its own words are free of bank conflicts), and each thread keeps its gates
// and its states x in registers. The forward: each thread composes its steps' affine maps in
// processing order, a block scan of the compositions gives the state before each thread's run
// (x0 applied), and the thread re-runs its steps. The backward does the same in the opposite
// order on db[t] = conj(a[next])·db[next] + dx[t], carried in from dx_final. Both scans combine
// in a fixed order, so results are bitwise deterministic run to run. For all types but float
// the grid is persistent and each block copies its next sequence into a second buffer while it
// computes this one (whole_sequence_buffers).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../detail/recurrence_math.hpp"
#include "../../layout.hpp"
#include "../../ops/affine.hpp"
#include "../device/dispatch_scan.cuh"
#include "../runtime.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

/// What the whole-sequence backward reads and writes; the layouts are those of the call's plan.
template <class T>
struct whole_sequence_backward_args {
  const T* a;
  const T* b;
  const T* x0;        // null: x0 = 0
  const T* dx;
  const T* dx_final;  // null: zero
  T* da;
  T* db;
  T* dx0;  // null: not written
  sequence_layout la, lb, ldx, lda, ldb;
  index_t length;
  bool reverse, log_gate;
};

/// Steps a thread owns: four 16-byte words of each tensor for 4- and 8-byte types, two for
/// 16-bit ones; so a block of up to 512 threads holds 8192 steps (4096 of an 8-byte type) in a
/// buffer of at most 96 KB.
template <class T>
constexpr int whole_sequence_steps = sizeof(T) >= 8 ? 8 : 16;
constexpr int whole_sequence_max_threads = 512;
constexpr int whole_sequence_tensors = 3;  // a, b, dx staged
template <class T>
constexpr int whole_sequence_words = whole_sequence_steps<T> / run_length<T>;  // 16-byte words a thread, a tensor
template <class T>
constexpr int whole_sequence_max_buffer_bytes =
    whole_sequence_tensors * whole_sequence_max_threads * whole_sequence_words<T> * 16;

/// Whether a layout's sequences all start on 16-byte boundaries of a pointer that does.
template <class T>
bool sequences_aligned16(const T* p, const sequence_layout& l) {
  const auto bytes = [](index_t elements) { return static_cast<std::size_t>(elements) * sizeof(T) % 16 == 0; };
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && (l.count == 1 || bytes(l.sequence_stride)) &&
         (l.groups == 1 || bytes(l.group_stride));
}

/// Whether the call takes the whole-sequence backward: every tensor steps by one element, the
/// staged ones (a, b, dx) start each sequence on a 16-byte boundary, and the length fills at
/// least one warp's runs and fits one block. Other calls (shorter sequences too, which were not
/// measured on this kernel) recompute x into the workspace.
template <class T>
bool whole_sequence_backward_fits(const whole_sequence_backward_args<T>& w) {
  constexpr index_t R = whole_sequence_steps<T>;
  const bool unit = w.la.step_stride == 1 && w.lb.step_stride == 1 && w.ldx.step_stride == 1 &&
                    w.lda.step_stride == 1 && w.ldb.step_stride == 1;
  return unit && w.length >= warp_threads * R && w.length <= whole_sequence_max_threads * R &&
         sequences_aligned16(w.a, w.la) && sequences_aligned16(w.b, w.lb) && sequences_aligned16(w.dx, w.ldx);
}

/// The exclusive prefix of each thread's `total` over the block under op, in thread order, or
/// from the last thread down with `descending`. `warp_totals` holds a value a warp; every thread
/// of the block calls this (it holds a barrier), and the caller syncs before reusing warp_totals.
template <class Acc, class Op>
__device__ PARSCAN_INLINE Acc block_exclusive_prefix(const Acc& total, const Op& op, Acc* warp_totals,
                                                     bool descending) {
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_threads;
  const int warps = static_cast<int>(blockDim.x) / warp_threads;
  const int first_lane = descending ? warp_threads - 1 : 0;
  Acc v = total;
#pragma unroll
  for (int d = 1; d < warp_threads; d *= 2) {  // inclusive, earlier lanes first
    const Acc earlier = descending ? shfl_down(v, d) : shfl_up(v, d);
    if (descending ? lane + d < warp_threads : lane >= d) v = op(earlier, v);
  }
  Acc before = descending ? shfl_down(v, 1) : shfl_up(v, 1);
  if (lane == first_lane) before = Op::identity();
  if (lane == warp_threads - 1 - first_lane) warp_totals[warp] = v;
  __syncthreads();
  Acc prefix = Op::identity();
  if (descending) {
    for (int w = warps - 1; w > warp; --w) prefix = op(prefix, warp_totals[w]);
  } else {
    for (int w = 0; w < warp; ++w) prefix = op(prefix, warp_totals[w]);
  }
  return op(prefix, before);
}

/// The shared-memory word of a thread's c-th 16-byte word: W words a thread, the word index
/// XOR-ed with bits of the thread so that the eight lanes of each quarter warp, reading their
/// c-th words together, touch eight different 16-byte bank groups.
template <int W>
PARSCAN_HD constexpr int swizzled_word(int thread, int c) {
  static_assert(W == 1 || W == 2 || W == 4 || W == 8, "a power of two words a thread");
  return thread * W + (c ^ ((thread / (8 / W)) % W));
}

/// Checked at compile time: each thread's W words are its own W slots, and the eight lanes of
/// every quarter warp, reading their c-th words, cover all eight 16-byte bank groups (128 bytes).
template <int W>
constexpr bool swizzle_conflict_free() {
  for (int thread = 0; thread < whole_sequence_max_threads; ++thread) {
    unsigned own = 0;
    for (int c = 0; c < W; ++c) {
      const int slot = swizzled_word<W>(thread, c);
      if (slot / W != thread) return false;
      own |= 1u << (slot % W);
    }
    if (own != (1u << W) - 1) return false;
  }
  for (int quarter = 0; quarter < whole_sequence_max_threads / 8; ++quarter)
    for (int c = 0; c < W; ++c) {
      unsigned groups = 0;
      for (int lane = 0; lane < 8; ++lane) groups |= 1u << (swizzled_word<W>(quarter * 8 + lane, c) % 8);
      if (groups != 0xffu) return false;
    }
  return true;
}
static_assert(swizzle_conflict_free<2>() && swizzle_conflict_free<4>(), "staged words meet bank conflicts");

/// Copies one tensor of a sequence (n elements from `seq`, 16-byte aligned) into `words`,
/// swizzled: whole words by cp.async, a last part word element by element.
template <class T, int W>
__device__ PARSCAN_INLINE void stage_sequence(uint4* words, const T* seq, index_t n) {
  constexpr int V = run_length<T>;
  const int used = static_cast<int>((n + V - 1) / V);
  for (int k = static_cast<int>(threadIdx.x); k < used; k += static_cast<int>(blockDim.x)) {
    uint4* slot = words + swizzled_word<W>(k / W, k % W);
    const index_t e0 = static_cast<index_t>(k) * V;
    if (e0 + V <= n) {
      stage_word(slot, seq + e0);
    } else {
      T part[V] = {};
#pragma unroll
      for (int v = 0; v < V; ++v)
        if (v < n - e0) part[v] = seq[e0 + v];
      memcpy(slot, part, sizeof(part));
    }
  }
}

/// A thread's c-th staged word of one tensor: its V elements from position c·V, memory order.
template <int W, class T, int V>
__device__ PARSCAN_INLINE void read_thread_word(const uint4* words, int c, T (&out)[V]) {
  static_assert(sizeof(T) * V == 16, "a word is 16 bytes");
  const uint4 w = words[swizzled_word<W>(static_cast<int>(threadIdx.x), c)];
  memcpy(out, &w, sizeof(w));
}

/// Stores a whole 16-byte word at p (aligned) as one streaming vector store: written through
/// write_steps' word copy, the compiler split it into four 4-byte stores here.
template <class T, int V>
__device__ PARSCAN_INLINE void store_word(T* p, const T (&in)[V]) {
  static_assert(sizeof(T) * V == 16, "a word is 16 bytes");
  unsigned u[4];
  memcpy(u, in, sizeof(u));
  __stcs(reinterpret_cast<uint4*>(p), make_uint4(u[0], u[1], u[2], u[3]));
}

/// One sequence, staged: Rev is the forward's direction (true: last step first). Positions m of
/// a thread's arrays are memory order; "processing order" visits them ascending, or descending
/// with Rev, and the threads likewise. Staged words are read where used (b and dx twice), so a
/// thread holds only its gates and states: 16 of each did not fit 128 registers otherwise.
template <bool Rev, class T>
__device__ PARSCAN_INLINE void whole_sequence_backward(const whole_sequence_backward_args<T> P, index_t s,
                                                       const uint4* staged, affine<compute_t<T>>* forward_totals,
                                                       affine<compute_t<T>>* backward_totals,
                                                       compute_t<T>* entry_gate) {
  using C = compute_t<T>;
  using Acc = affine<C>;
  constexpr int R = whole_sequence_steps<T>, W = whole_sequence_words<T>, V = run_length<T>;
  const affine_op<T> op{};
  const int i = static_cast<int>(threadIdx.x), slots = static_cast<int>(blockDim.x) * W;
  const uint4 *staged_a = staged, *staged_b = staged + slots, *staged_dx = staged + 2 * slots;
  const index_t n = P.length, lo = static_cast<index_t>(i) * R;
  const int count = lo >= n ? 0 : (n - lo < R ? static_cast<int>(n - lo) : R);

  C gate[R], x[R];
#pragma unroll
  for (int c = 0; c < W; ++c) {
    T word[V];
    C g[V];
    read_thread_word<W>(staged_a, c, word);
    detail::load_gates(word, P.log_gate, g);
#pragma unroll
    for (int v = 0; v < V; ++v) gate[c * V + v] = g[v];
  }
  // The forward, in processing order. The run's first gate in that order goes to the run before
  // it, whose backward needs it.
  // (Rev, a part run: read again from shared memory; a select over gate[] by count became a
  // dynamic index and put the array in local memory.)
  C entry = gate[Rev ? R - 1 : 0];
  if (Rev && count > 0 && count < R) {
    const T* word = reinterpret_cast<const T*>(staged_a + swizzled_word<W>(i, (count - 1) / V));
    entry = detail::load_gate<C>(word[(count - 1) % V], P.log_gate);
  }
  if (count > 0) entry_gate[i] = entry;
  T word[V];
  Acc run_map = affine_op<T>::identity();
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int m = Rev ? R - 1 - k : k;
    if (m % V == (Rev ? V - 1 : 0)) read_thread_word<W>(staged_b, m / V, word);
    if (m < count) run_map = op(run_map, Acc(gate[m], static_cast<C>(word[m % V])));
  }
  const Acc before_run = block_exclusive_prefix(run_map, op, forward_totals, Rev);
  // x before the run's first position: the block's prefix applied to x0.
  const C x_before_run = product(before_run.a, P.x0 ? static_cast<C>(P.x0[s]) : C(0)) + before_run.b;
  C state = x_before_run;
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int m = Rev ? R - 1 - k : k;
    if (m % V == (Rev ? V - 1 : 0)) read_thread_word<W>(staged_b, m / V, word);
    if (m < count) x[m] = state = product(gate[m], state) + static_cast<C>(word[m % V]);
  }

  // The backward, in the opposite order: db[m] = conj(a[next])·db[next] + dx[m], where next is
  // the position after m in processing order (a = 1 and db = dx_final past the last one).
  const bool last_run = Rev ? i == 0 || count == 0 : lo + count >= n;
  const C gate_after_run = last_run ? C(1) : entry_gate[Rev ? i - 1 : i + 1];
  Acc back_map = affine_op<T>::identity();
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int m = Rev ? k : R - 1 - k;
    if (m % V == (Rev ? 0 : V - 1)) read_thread_word<W>(staged_dx, m / V, word);
    // The gate at the position after m in processing order (m is a constant here).
    const C next = Rev ? (m > 0 ? gate[m > 0 ? m - 1 : 0] : gate_after_run)
                       : (m + 1 < count ? gate[m + 1 < R ? m + 1 : 0] : gate_after_run);
    if (m < count) back_map = op(back_map, Acc(detail::conj_if_complex(next), static_cast<C>(word[m % V])));
  }
  const Acc after_run = block_exclusive_prefix(back_map, op, backward_totals, !Rev);
  const C dx_final = P.dx_final ? static_cast<C>(P.dx_final[s]) : C(0);
  C carried = product(after_run.a, dx_final) + after_run.b;  // db at the position after this run
  // Every read of this sequence came before (staged, or x0 and dx_final): db and da may be dx
  // or a in place. Each word is written as soon as its V positions are done.
  const sequence_layout::place q = P.la.place_of(s);
  T* db = P.db + P.ldb.offset_of(q) + lo;
  T* da = P.da + P.lda.offset_of(q) + lo;
  const bool outputs_aligned = (reinterpret_cast<std::uintptr_t>(db) | reinterpret_cast<std::uintptr_t>(da)) % 16 == 0;
  T out_db[V], out_da[V];
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int m = Rev ? k : R - 1 - k;
    if (m % V == (Rev ? 0 : V - 1)) read_thread_word<W>(staged_dx, m / V, word);
    if (m < count) {
      const C next = Rev ? (m > 0 ? gate[m > 0 ? m - 1 : 0] : gate_after_run)
                         : (m + 1 < count ? gate[m + 1 < R ? m + 1 : 0] : gate_after_run);
      const C grad = static_cast<C>(word[m % V]) + product(detail::conj_if_complex(next), carried);
      carried = grad;
      const bool first = Rev ? m == count - 1 : m == 0;  // the run's first position: x before it is the carry's
      const C x_before = first ? x_before_run : x[Rev ? (m + 1 < R ? m + 1 : 0) : (m > 0 ? m - 1 : 0)];
      C grad_gate = product(grad, detail::conj_if_complex(x_before));
      if (P.log_gate) grad_gate = product(grad_gate, detail::conj_if_complex(gate[m]));
      out_db[m % V] = static_cast<T>(grad);
      out_da[m % V] = static_cast<T>(grad_gate);
    }
    if (m % V == (Rev ? V - 1 : 0)) {  // the word's last position in this order
      const int c = m / V;
      if (outputs_aligned && count >= (c + 1) * V) {
        store_word(db + c * V, out_db);
        store_word(da + c * V, out_da);
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v)
          if (c * V + v < count) db[c * V + v] = out_db[v], da[c * V + v] = out_da[v];
      }
    }
  }
  // dL/dx0 = conj(a at the first position)·db there, by the thread that holds it.
  const bool holds_first = count > 0 && (Rev ? lo + count == n : i == 0);
  if (holds_first && P.dx0) P.dx0[s] = static_cast<T>(product(detail::conj_if_complex(entry), carried));
}

/// Stages sequence s's a, b and dx into one of the two buffers (one cp.async group).
template <class T>
__device__ PARSCAN_INLINE void stage_whole_sequence(const whole_sequence_backward_args<T>& P, index_t s,
                                                    uint4* buffer) {
  constexpr int W = whole_sequence_words<T>;
  const int slots = static_cast<int>(blockDim.x) * W;
  const sequence_layout::place q = P.la.place_of(s);  // one shape for all tensors
  stage_sequence<T, W>(buffer, P.a + P.la.offset_of(q), P.length);
  stage_sequence<T, W>(buffer + slots, P.b + P.lb.offset_of(q), P.length);
  stage_sequence<T, W>(buffer + 2 * slots, P.dx + P.ldx.offset_of(q), P.length);
  async_commit();
}

/// Buffers a block stages sequences into. Two (a persistent grid, each block's next sequence in
/// flight while it computes this one) for every type but float, where one (a block a sequence,
/// the copy only before the arithmetic) measured faster: H200, bench_recurrence's recomputed-x
/// rows at T = 1024 / 4096 / 8192, float 69.6 / 69.1 / 61.5% of copy with one against 63.4 /
/// 61.6 / 60.7% with two, bfloat16 53.6 / 54.3 / 45.1% against 56.5 / 58.9 / 54.7%, float16 and
/// complex<float> at T = 4096 54.7 and 54.9% against 60.9 and 63.1% (docs/performance.md).
template <class T>
constexpr int whole_sequence_buffers = std::is_same_v<T, float> ? 1 : 2;

template <class T>
__global__ void __launch_bounds__(whole_sequence_max_threads)
    whole_sequence_backward_kernel(const whole_sequence_backward_args<T> P, index_t sequences) {
  using C = compute_t<T>;
  constexpr int W = whole_sequence_words<T>;
  extern __shared__ uint4 staged[];  // one or two buffers of a, b and dx: blockDim.x · W words each
  __shared__ affine<C> forward_totals[whole_sequence_max_threads / warp_threads];
  __shared__ affine<C> backward_totals[whole_sequence_max_threads / warp_threads];
  __shared__ C entry_gate[whole_sequence_max_threads];  // each run's first gate in processing order
  const int buffer_words = whole_sequence_tensors * static_cast<int>(blockDim.x) * W;
  const index_t stride = gridDim.x;
  index_t s = blockIdx.x;
  if (s < sequences) stage_whole_sequence(P, s, staged);
  for (int k = 0; s < sequences; s += stride) {
    uint4* current = staged + k * buffer_words;
    if (whole_sequence_buffers<T> == 2 && s + stride < sequences) {
      k ^= 1;
      stage_whole_sequence(P, s + stride, staged + k * buffer_words);
      async_wait<1>();
    } else {
      async_wait<0>();
    }
    __syncthreads();
    if (P.reverse)
      whole_sequence_backward<true>(P, s, current, forward_totals, backward_totals, entry_gate);
    else
      whole_sequence_backward<false>(P, s, current, forward_totals, backward_totals, entry_gate);
    __syncthreads();  // this buffer, the totals and the entry gates are rewritten next
    if (whole_sequence_buffers<T> == 1 && s + stride < sequences) stage_whole_sequence(P, s + stride, staged);
  }
}

/// Launches the whole-sequence backward (whole_sequence_backward_fits holds): a block of just
/// enough warps a sequence, with the shared memory of its buffers; with two buffers as many
/// blocks as the device holds at once, with one a block a sequence (or one a sequence, if fewer).
template <class T>
status launch_whole_sequence_backward(const whole_sequence_backward_args<T>& w, index_t sequences,
                                      const cuda_backend& be) {
  constexpr index_t R = whole_sequence_steps<T>;
  constexpr int buffers = whole_sequence_buffers<T>;
  const index_t warps = (w.length + warp_threads * R - 1) / (warp_threads * R);
  const int threads = static_cast<int>(warps * warp_threads);
  const int smem = buffers * whole_sequence_tensors * threads * whole_sequence_words<T> * 16;
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  const auto kernel = whole_sequence_backward_kernel<T>;
  // Opted in once a device for the most any call can use (at most 192 KB), beyond the default
  // 48 KB.
  constexpr int max_devices = 64;
  static bool opted_in[max_devices] = {};
  if (dev.device < max_devices && !opted_in[dev.device]) {
    if (status st = report(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                buffers * whole_sequence_max_buffer_bytes<T>));
        st != status::success)
      return st;
    opted_in[dev.device] = true;
  }
  index_t blocks = sequences;
  if (buffers == 2) {
    int per_sm = 0;
    if (status st = report(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
        st != status::success)
      return st;
    if (per_sm == 0) return status::exceeds_device_limits;
    const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
    if (resident < blocks) blocks = resident;
  }
  return launch(kernel, blocks, threads, smem, be, w, sequences);
}

}  // namespace parscan::cuda_detail
