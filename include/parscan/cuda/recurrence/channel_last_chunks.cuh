// parscan/cuda/recurrence/channel_last_chunks.cuh — the gated recurrence on channel-last
// layouts of a 16-bit type or complex<float> (forward and backward) or of float (backward) as
// the chunk loop (agent/chunk_loop.cuh): a lane owns one 16-byte word of adjacent channels (8,
// 4 floats or 2 complex values) over a run of consecutive steps.
//
// Why. The staged lane tiles (agent/staged_lane_tiles.cuh) give a lane two 16-bit channels and
// one 4-byte cp.async a tensor and step; ncu counted ~61 thread instructions a channel-step in
// the bf16 forward (docs/performance.md). Here every access moves 16 bytes: ~30 a channel-step
// (ncu). The scan of a warp's chunk over a tile: the lane folds its run (one independent chain
// a channel), a shuffle scan over the 32 lanes gives each lane its state before its run from
// the warp's carry, and the lane walks its run again from there, writing its outputs over
// inputs it has read. Steps past the length are staged as the identity (gate 1, input 0), so
// the last lane's state is the carry into the next tile, and after the last tile the call's
// final state. What bounds it, measured: docs/performance.md ("The chunk loop", "Whole rows").
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../detail/recurrence_math.hpp"
#include "../../layout.hpp"
#include "../../numeric.hpp"
#include "../agent/chunk_loop.cuh"
#include "../device/dispatch_chunk_loop.cuh"
#include "../runtime.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"
#include "recurrence_problems.cuh"
#include "varlen_recurrence.cuh"

namespace parscan::cuda_detail {

/// The types whose 16-byte chunks the loop computes, in their compute type (compute_t): the
/// 16-bit ones (8 channels a chunk, in float), float (4) and complex<float> (2).
template <class T>
constexpr bool chunk_type = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16> || std::is_same_v<T, float> ||
                            std::is_same_v<T, complex<float>>;

/// Each SM's share of the DRAM bandwidth (GB/s, memory_gbs_per_multiprocessor) from which the
/// chunk loop's choices follow those measured on an H200 (37 GB/s an SM) rather than an H100
/// (25): there a tile must hold more bytes in flight to draw an SM's share.
constexpr int chunk_loop_rich_gbs_per_sm = 30;
inline bool chunk_loop_memory_rich(const device_facts& dev) {
  return memory_gbs_per_multiprocessor(dev) >= chunk_loop_rich_gbs_per_sm;
}

/// Whether the chunk loop takes a call of Problem where it fits (chunk_loop_fits): every call of
/// the 16-bit types, float and complex<float>, but the float forward only where memory-rich.
/// Elsewhere the float forward's lane loop (agent/lane_loop.cuh), which holds only registers in
/// flight, led: 81–91% of copy on an H100 against the chunk loop's 84.5%; on an H200 (8, T, 1536)
/// it took 66 / 74 / 76% at T = 1024 / 4096 / 16384 against the chunk loop's 81 / 79 / 85%
/// (128-byte rows; bench_tuning --lengths, docs/performance.md).
template <class T, class Problem>
bool chunk_loop_takes(const device_facts& dev) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<Problem, recurrence_forward_problem<T>>)
    return chunk_loop_memory_rich(dev);
  return true;
}

namespace chunk_detail {

/// The compute values of a chunk of T.
template <class T>
using chunk_values = compute_t<T>[chunk_channels<T>];

/// A staged word as the compute type, and back (16-bit values rounded to nearest even, a pair
/// an instruction; floats and complex values as they are).
template <class T>
__device__ PARSCAN_INLINE void unpack(const unsigned char* word, chunk_values<T>& out) {
  const uint4 w = *reinterpret_cast<const uint4*>(word);
  T v[chunk_channels<T>];
  memcpy(v, &w, sizeof(w));
  detail::widen(v, out);
}
template <class T>
__device__ PARSCAN_INLINE unsigned narrow_pair(float lo, float hi) {
  unsigned r;
  if constexpr (std::is_same_v<T, bfloat16>)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <class T>
__device__ PARSCAN_INLINE void pack(const chunk_values<T>& in, unsigned char* word) {
  if constexpr (std::is_same_v<T, float>)
    *reinterpret_cast<uint4*>(word) =
        make_uint4(__float_as_uint(in[0]), __float_as_uint(in[1]), __float_as_uint(in[2]), __float_as_uint(in[3]));
  else if constexpr (std::is_same_v<T, complex<float>>)
    *reinterpret_cast<uint4*>(word) = make_uint4(__float_as_uint(in[0].real()), __float_as_uint(in[0].imag()),
                                                 __float_as_uint(in[1].real()), __float_as_uint(in[1].imag()));
  else
    *reinterpret_cast<uint4*>(word) = make_uint4(narrow_pair<T>(in[0], in[1]), narrow_pair<T>(in[2], in[3]),
                                                 narrow_pair<T>(in[4], in[5]), narrow_pair<T>(in[6], in[7]));
}
/// The gates of a staged word (exp of the stored value for log gates).
template <class T, bool LogGates>
__device__ PARSCAN_INLINE void gates_of(const unsigned char* word, chunk_values<T>& g) {
  unpack<T>(word, g);
  if constexpr (LogGates) {
#pragma unroll
    for (int i = 0; i < chunk_channels<T>; ++i) g[i] = detail::exp_gate(g[i]);
  }
}
/// The identity step's stored gate (1, or log 0) as a word.
template <class T, bool LogGates>
__device__ PARSCAN_INLINE uint4 identity_gate_word() {
  if constexpr (std::is_same_v<T, complex<float>>) {  // 1 + 0i; log 0 + 0i
    const unsigned one = LogGates ? 0u : 0x3f800000u;
    return make_uint4(one, 0u, one, 0u);
  }
  const unsigned one = LogGates                      ? 0u
                       : std::is_same_v<T, float>    ? 0x3f800000u
                       : std::is_same_v<T, bfloat16> ? 0x3f803f80u
                                                     : 0x3c003c00u;
  return make_uint4(one, one, one, one);
}
__device__ PARSCAN_INLINE void store_word(unsigned char* word, const uint4& w) { *reinterpret_cast<uint4*>(word) = w; }

/// Starts copying N steps of two tensors' chunks into word(i) and word(i) + tensor_bytes, from
/// a and b (their words at the first step) on, da and db elements apart from step to step in
/// processing order: no tests, and the addresses walk a step a copy.
template <int N, class T, class Word>
__device__ PARSCAN_INLINE void stage_two_tensors(Word&& word, int tensor_bytes, const T* a, index_t da, const T* b,
                                                 index_t db) {
#pragma unroll
  for (int i = 0; i < N; ++i, a += da, b += db) {
    stage_word(word(i), a);
    stage_word(word(i) + tensor_bytes, b);
  }
}

/// a·x + b: one fused multiply-add for floats; for complex values numeric.hpp's product (its
/// FMAs written out), then the sum.
template <class C>
__device__ PARSCAN_INLINE C multiply_add(const C& a, const C& x, const C& b) {
  if constexpr (std::is_same_v<C, float>) return fmaf(a, x, b);
  else return product(a, x) + b;
}

/// K channels from sequence s on of a per-sequence state vector (x0, x_final, dx_final, dx0:
/// any alignment; null: zeros read, nothing written).
template <class T, class C, int K>
__device__ PARSCAN_INLINE void read_state(const T* p, index_t s, C (&out)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) out[i] = p ? static_cast<C>(p[s + i]) : C(0);
}
template <class T, class C, int K>
__device__ PARSCAN_INLINE void write_state(T* p, index_t s, const C (&in)[K]) {
  if (!p) return;
#pragma unroll
  for (int i = 0; i < K; ++i) p[s + i] = static_cast<T>(in[i]);
}

/// Given each lane's run folded as y_end = A·y_start + B, channel by channel, and the warp's
/// carry (the state before lane 0's run, the same in every lane): the state before this lane's
/// run, and the carry moved past the warp's last lane.
template <class C, int K>
__device__ PARSCAN_INLINE void chain_lane_runs(C (&A)[K], C (&B)[K], C (&carry)[K], C (&before)[K]) {
  const int lane = static_cast<int>(threadIdx.x % warp_threads);
#pragma unroll
  for (int d = 1; d < warp_threads; d *= 2) {
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const C a_up = shfl_up(A[i], d), b_up = shfl_up(B[i], d);
      if (lane >= d) {
        B[i] = multiply_add(A[i], b_up, B[i]);
        A[i] = product(A[i], a_up);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const C end = multiply_add(A[i], carry[i], B[i]);
    const C up = shfl_up(end, 1);
    before[i] = lane == 0 ? carry[i] : up;
    carry[i] = shfl_idx(end, warp_threads - 1);
  }
}

}  // namespace chunk_detail

/// What the forward's and the backward's Chunks over T share: the Problem, whose first layout gives
/// every tensor's shape, and its cursor at a group's first sequence (its tensors' first
/// elements there: a group, the Problem's at()); the carry (K states); and the scan of a tile,
/// from Self's fold (a step into a lane's run y_end = A·y_start + B) and step (a step's outputs
/// from the state before it, the state after it).
template <class T, class Problem, class Self>
struct chunks_of {
  Problem P;
  using group = typename Problem::cursor;
  static constexpr int K = chunk_channels<T>;
  using C = compute_t<T>;
  using carry_type = C[K];
  __device__ PARSCAN_INLINE const sequence_layout& layout() const { return P.la; }
  __device__ PARSCAN_INLINE index_t length() const { return P.length; }
  __device__ PARSCAN_INLINE group group_at(index_t s) const { return P.at(s); }
  __device__ PARSCAN_INLINE void read_carry(index_t s, C (&carry)[K]) const {
    chunk_detail::read_state(self().carry_in(), s, carry);
  }
  __device__ PARSCAN_INLINE void write_carry(index_t s, const C (&carry)[K]) const {
    chunk_detail::write_state(self().carry_out(), s, carry);
  }
  static constexpr bool writes = true;
  /// Steps past the length are staged as the identity: every tile is scanned whole.
  template <int S, class Word>
  __device__ PARSCAN_INLINE void scan(Word&& word, int tensor_bytes, index_t, C (&carry)[K]) const {
    C A[K], B[K], y[K];
#pragma unroll
    for (int j = 0; j < S; ++j) self().fold(word(j), tensor_bytes, j == 0, A, B);
    chunk_detail::chain_lane_runs(A, B, carry, y);
#pragma unroll
    for (int j = 0; j < S; ++j) self().step(word(j), tensor_bytes, y);
  }

 private:
  __device__ PARSCAN_INLINE const Self& self() const { return static_cast<const Self&>(*this); }
};

/// The forward, x[t] = a[t]·x[t-1] + b[t]: stages a and b, writes x over a; the carry starts at
/// x0 (or 0) and ends in x_final.
template <class T, bool LogGates>
struct forward_chunks : chunks_of<T, recurrence_forward_problem<T>, forward_chunks<T, LogGates>> {
  using base = chunks_of<T, recurrence_forward_problem<T>, forward_chunks<T, LogGates>>;
  using base::K;
  using typename base::C;
  using base::P;
  using typename base::group;
  // The carry's state vectors in and out.
  __device__ PARSCAN_INLINE const T* carry_in() const { return P.x0; }
  __device__ PARSCAN_INLINE T* carry_out() const { return P.x_final; }
  /// Step p's words of chunk c (channels c·K …) at word, word + tensor_bytes.
  __device__ PARSCAN_INLINE void stage(const group& g, int c, index_t p, index_t, unsigned char* word,
                                       int tensor_bytes) const {
    if (p < P.length) {
      const index_t t = P.step(p);
      stage_word(word, g.a + c * K + t * P.la.step_stride);
      stage_word(word + tensor_bytes, g.b + c * K + t * P.lb.step_stride);
    } else {
      chunk_detail::store_word(word, chunk_detail::identity_gate_word<T, LogGates>());
      chunk_detail::store_word(word + tensor_bytes, make_uint4(0u, 0u, 0u, 0u));
    }
  }
  /// Steps p … p+N-1 of chunk c, all before the length, at word(0) … word(N-1): no tests, and
  /// the addresses walk a step a copy.
  static constexpr int lookahead = 0;  // steps past a run that staging it reads
  template <int N, class Word>
  __device__ PARSCAN_INLINE void stage_whole(const group& g, int c, index_t p, Word&& word, int tensor_bytes) const {
    const index_t t = P.step(p), d = P.reverse ? -1 : 1;
    chunk_detail::stage_two_tensors<N>(word, tensor_bytes, g.a + c * K + t * P.la.step_stride, d * P.la.step_stride,
                                       g.b + c * K + t * P.lb.step_stride, d * P.lb.step_stride);
  }
  __device__ PARSCAN_INLINE void fold(const unsigned char* word, int tensor_bytes, bool first, C (&A)[K],
                                      C (&B)[K]) const {
    C g[K], in[K];
    chunk_detail::gates_of<T, LogGates>(word, g);
    chunk_detail::unpack<T>(word + tensor_bytes, in);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      B[i] = first ? in[i] : chunk_detail::multiply_add(g[i], B[i], in[i]);
      A[i] = first ? g[i] : product(g[i], A[i]);
    }
  }
  __device__ PARSCAN_INLINE void step(unsigned char* word, int tensor_bytes, C (&x)[K]) const {
    C g[K], in[K];
    chunk_detail::gates_of<T, LogGates>(word, g);
    chunk_detail::unpack<T>(word + tensor_bytes, in);
#pragma unroll
    for (int i = 0; i < K; ++i) x[i] = chunk_detail::multiply_add(g[i], x[i], in[i]);
    chunk_detail::pack<T>(x, word);
  }
  __device__ PARSCAN_INLINE void store(const group& g, int c, index_t p, const unsigned char* word, int) const {
    chunk_detail::store_word(reinterpret_cast<unsigned char*>(g.x + c * K + P.step(p) * P.lx.step_stride),
                             *reinterpret_cast<const uint4*>(word));
  }
  template <int N, class Word>
  __device__ PARSCAN_INLINE void store_whole(const group& g, int c, index_t p, Word&& word, int) const {
    const index_t d = P.reverse ? -P.lx.step_stride : P.lx.step_stride;
    T* x = g.x + c * K + P.step(p) * P.lx.step_stride;
#pragma unroll
    for (int i = 0; i < N; ++i, x += d)
      chunk_detail::store_word(reinterpret_cast<unsigned char*>(x), *reinterpret_cast<const uint4*>(word(i)));
  }
};

/// The backward (recurrence_problems.cuh: y[t] = a[t]*·(dx[t] + y[next]), db[t] = dx[t] +
/// y[next], da[t] = db[t]·x[prev]*, times a[t]* for log gates; * the complex conjugate):
/// stages a, dx and x[prev] (x0 or 0 at the forward's first step), writes db over dx and da
/// over x[prev]; the carry starts at dx_final (or 0) and ends in dx0.
template <class T, bool LogGates>
struct backward_chunks : chunks_of<T, recurrence_backward_problem<T>, backward_chunks<T, LogGates>> {
  using base = chunks_of<T, recurrence_backward_problem<T>, backward_chunks<T, LogGates>>;
  using base::K;
  using typename base::C;
  using base::P;
  using typename base::group;
  __device__ PARSCAN_INLINE const T* carry_in() const { return P.dx_final; }
  __device__ PARSCAN_INLINE T* carry_out() const { return P.dx0; }
  /// s: the sequence of chunk c's first channel (x0's index).
  __device__ PARSCAN_INLINE void stage(const group& g, int c, index_t p, index_t s, unsigned char* word,
                                       int tensor_bytes) const {
    unsigned char* x_word = word + 2 * tensor_bytes;
    if (p < P.length) {
      const index_t t = P.step(p);
      stage_word(word, g.a + c * K + t * P.la.step_stride);
      stage_word(word + tensor_bytes, g.dx + c * K + t * P.ldx.step_stride);
      if (p + 1 < P.length) {
        stage_word(x_word, g.x + c * K + (t + P.dir()) * P.lx.step_stride);
      } else {  // the forward's first step: x before it is x0, or 0
        C x0[K];
        chunk_detail::read_state(P.x0, s, x0);
        chunk_detail::pack<T>(x0, x_word);
      }
    } else {
      chunk_detail::store_word(word, chunk_detail::identity_gate_word<T, LogGates>());
      chunk_detail::store_word(word + tensor_bytes, make_uint4(0u, 0u, 0u, 0u));
      chunk_detail::store_word(x_word, make_uint4(0u, 0u, 0u, 0u));
    }
  }
  static constexpr int lookahead = 1;  // x[prev] of a run's last step is the next step's x
  template <int N, class Word>
  __device__ PARSCAN_INLINE void stage_whole(const group& g, int c, index_t p, Word&& word, int tensor_bytes) const {
    const index_t t = P.step(p), d = P.dir();
    const T* a = g.a + c * K + t * P.la.step_stride;
    const T* dx = g.dx + c * K + t * P.ldx.step_stride;
    const T* x = g.x + c * K + (t + d) * P.lx.step_stride;
#pragma unroll
    for (int i = 0; i < N; ++i, a += d * P.la.step_stride, dx += d * P.ldx.step_stride, x += d * P.lx.step_stride) {
      stage_word(word(i), a);
      stage_word(word(i) + tensor_bytes, dx);
      stage_word(word(i) + 2 * tensor_bytes, x);
    }
  }
  // The element of a step is (g*, g*·dx) (* the complex conjugate): y_end = g*·(dx + y_start).
  __device__ PARSCAN_INLINE void fold(const unsigned char* word, int tensor_bytes, bool first, C (&A)[K],
                                      C (&B)[K]) const {
    C g[K], dx[K];
    chunk_detail::gates_of<T, LogGates>(word, g);
    chunk_detail::unpack<T>(word + tensor_bytes, dx);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const C gc = detail::conj_if_complex(g[i]);
      B[i] = product(gc, first ? dx[i] : B[i] + dx[i]);
      A[i] = first ? gc : product(gc, A[i]);
    }
  }
  __device__ PARSCAN_INLINE void step(unsigned char* word, int tensor_bytes, C (&y)[K]) const {
    C g[K], dx[K], x_prev[K], da[K];
    chunk_detail::gates_of<T, LogGates>(word, g);
    chunk_detail::unpack<T>(word + tensor_bytes, dx);
    chunk_detail::unpack<T>(word + 2 * tensor_bytes, x_prev);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const C gc = detail::conj_if_complex(g[i]);
      const C grad = dx[i] + y[i];
      const C grad_gate = product(grad, detail::conj_if_complex(x_prev[i]));
      da[i] = LogGates ? product(grad_gate, gc) : grad_gate;
      dx[i] = grad;  // db
      y[i] = product(gc, grad);
    }
    chunk_detail::pack<T>(dx, word + tensor_bytes);
    chunk_detail::pack<T>(da, word + 2 * tensor_bytes);
  }
  __device__ PARSCAN_INLINE void store(const group& g, int c, index_t p, const unsigned char* word,
                                       int tensor_bytes) const {
    const index_t t = P.step(p);
    chunk_detail::store_word(reinterpret_cast<unsigned char*>(g.db + c * K + t * P.ldb.step_stride),
                             *reinterpret_cast<const uint4*>(word + tensor_bytes));
    chunk_detail::store_word(reinterpret_cast<unsigned char*>(g.da + c * K + t * P.lda.step_stride),
                             *reinterpret_cast<const uint4*>(word + 2 * tensor_bytes));
  }
  template <int N, class Word>
  __device__ PARSCAN_INLINE void store_whole(const group& g, int c, index_t p, Word&& word, int tensor_bytes) const {
    const index_t t = P.step(p), d = P.dir();
    T* db = g.db + c * K + t * P.ldb.step_stride;
    T* da = g.da + c * K + t * P.lda.step_stride;
#pragma unroll
    for (int i = 0; i < N; ++i, db += d * P.ldb.step_stride, da += d * P.lda.step_stride) {
      chunk_detail::store_word(reinterpret_cast<unsigned char*>(db),
                               *reinterpret_cast<const uint4*>(word(i) + tensor_bytes));
      chunk_detail::store_word(reinterpret_cast<unsigned char*>(da),
                               *reinterpret_cast<const uint4*>(word(i) + 2 * tensor_bytes));
    }
  }
};

/// The jobs of packed sequences (cu_seqlens): (sequence, group of chunks) pairs, the
/// sequences in `order` (longest first, or null: index order). A job's Chunks are its
/// sequence's (varlen_recurrence.cuh's sequence_of), one batch row.
struct packed_chunk_jobs {
  const std::int64_t* cu_seqlens;
  const index_t* order;
  index_t sequences;
  __device__ PARSCAN_INLINE index_t count(const sequence_layout&, index_t per_row) const { return sequences * per_row; }
  template <class Chunks, class F>
  __device__ PARSCAN_INLINE void visit(const Chunks& C, index_t job, index_t per_row, F&& f) const {
    const index_t q = job / per_row, n = sequence_at(order, q), start = cu_seqlens[n];
    f(Chunks{{sequence_of(C.P, n, start, cu_seqlens[n + 1] - start, C.P.la.count)}}, index_t(0), job - q * per_row);
  }
};

/// The chunk loop's tiles. 64-byte rows: forward 256 steps of two tensors (72 KB of shared
/// memory, three blocks an SM), backward 160 steps of three (67.5 KB, three blocks; 192 steps
/// would leave room for two). 128-byte rows: forward 128 steps (64 KB), backward 96 (72 KB).
/// 256-byte rows (the 16-bit types): forward 128 steps (128 KB, a block an SM), backward 64
/// (96 KB): bf16 (8, 4096, 1536) 86 / 90% of copy, against 71–72% / 74–89% for the other tiles
/// of 32 to 128 steps and 2 to 4 stages (bench_tuning --wide-rows, H100). Deep: the backward's
/// 256-byte rows in 96 steps (144 KB) where memory-rich (chunk_loop_memory_rich): on an H200
/// 65 / 76 / 81% of copy at T = 1024 / 4096 / 16384 against 60 / 68 / 71% in 64 steps
/// (bench_tuning --lengths); on an H100 79% against 90% at T = 4096.
template <class T, int Chunks>
using forward_chunk_shape = chunk_loop_shape<T, 2, Chunks == 4 ? 8 : 4, Chunks>;
template <class T, int Chunks, bool Deep = false>
using backward_chunk_shape = chunk_loop_shape<T, 3, Chunks == 4 ? 5 : Chunks == 8 ? 3 : Deep ? 3 : 2, Chunks>;

/// Whether the chunk loop takes 256-byte rows for T where they fill the device: for the 16-bit
/// types (bf16 (8, 4096, 1536): forward 86% of copy against 73% in 128-byte rows, backward 90%
/// against 72%), not for float, whose backward's best 256-byte tiles measured 83.8% and 86.9% in
/// two calls against 85.1% in 128-byte rows (bench_tuning --wide-rows, H100), nor complex<float>
/// (not measured).
template <class T>
constexpr bool chunk_loop_wide_rows = sizeof(T) == 2;

/// Whether a forward or backward Problem's tensors all keep whole, aligned chunks.
template <class T>
bool chunk_loop_fits(const recurrence_forward_problem<T>& P) {
  return chunk_type<T> && P.length > 0 && chunk_layout_fits(P.a, P.la) && chunk_layout_fits(P.b, P.lb) &&
         chunk_layout_fits(P.x, P.lx);
}
template <class T>
bool chunk_loop_fits(const recurrence_backward_problem<T>& P) {
  return chunk_type<T> && P.length > 0 && chunk_layout_fits(P.a, P.la) && chunk_layout_fits(P.x, P.lx) &&
         chunk_layout_fits(P.dx, P.ldx) && chunk_layout_fits(P.da, P.lda) && chunk_layout_fits(P.db, P.ldb);
}

/// The chunk loop's group for a Problem whose tensors keep whole chunks (chunk_loop_fits), over
/// `rows` batch rows or packed sequences: {0, 0} where the chunk loop does not take the call on
/// this device or its jobs would not fill it.
template <class T, class Problem>
chunk_group chunk_loop_group(const Problem& P, index_t rows, const device_facts& dev) {
  if (!chunk_loop_takes<T, Problem>(dev)) return {0, 0};
  return chunk_group_for<T>(P.la.count, rows, dev.multiprocessors, chunk_loop_wide_rows<T>,
                            chunk_loop_memory_rich(dev));
}

/// The chunk loop's Chunks and tile shape for a forward or backward Problem of T, groups of
/// `Width` chunks (Deep: backward_chunk_shape's).
template <class T, class Problem, int Width, bool Deep>
struct chunk_loop_of;
template <class T, int Width, bool Deep>
struct chunk_loop_of<T, recurrence_forward_problem<T>, Width, Deep> {
  template <bool LogGates>
  using chunks = forward_chunks<T, LogGates>;
  using shape = forward_chunk_shape<T, Width>;
};
template <class T, int Width, bool Deep>
struct chunk_loop_of<T, recurrence_backward_problem<T>, Width, Deep> {
  template <bool LogGates>
  using chunks = backward_chunks<T, LogGates>;
  using shape = backward_chunk_shape<T, Width, Deep>;
};

/// Calls f(kernel, shape, chunks) with the chunk loop's kernel for P's gate form, groups of
/// Width chunks and Jobs (kernel as a std::integral_constant, shape a value of its type).
template <class T, int Width, bool Deep, class Problem, class Jobs, class F>
status with_chunk_kernel(const Problem& P, F&& f) {
  using loop = chunk_loop_of<T, Problem, Width, Deep>;
  using shape = typename loop::shape;
  if (P.log_gate) {
    using C = typename loop::template chunks<true>;
    return f(std::integral_constant<decltype(&chunk_loop_kernel<shape, C, Jobs>),
                                    &chunk_loop_kernel<shape, C, Jobs>>{},
             shape{}, C{{P}});
  }
  using C = typename loop::template chunks<false>;
  return f(std::integral_constant<decltype(&chunk_loop_kernel<shape, C, Jobs>),
                                  &chunk_loop_kernel<shape, C, Jobs>>{},
           shape{}, C{{P}});
}

/// Calls with_chunk_kernel for g's width: 16 (chunk_loop_wide_rows<T> only; the backward's deep
/// tiles where dev is memory-rich), 8 or 4.
template <class T, class Problem, class Jobs, class F>
status with_chunk_width(const Problem& P, chunk_group g, const device_facts& dev, F&& f) {
  if constexpr (chunk_loop_wide_rows<T>) {
    if (g.width == 16) {
      if constexpr (std::is_same_v<Problem, recurrence_backward_problem<T>>)
        if (chunk_loop_memory_rich(dev)) return with_chunk_kernel<T, 16, true, Problem, Jobs>(P, f);
      return with_chunk_kernel<T, 16, false, Problem, Jobs>(P, f);
    }
  }
  return g.width == 8 ? with_chunk_kernel<T, 8, false, Problem, Jobs>(P, f)
                      : with_chunk_kernel<T, 4, false, Problem, Jobs>(P, f);
}

/// The chunk loop over a batch of channel-last sequences (P: chunk_loop_fits; g: its group).
template <class T, class Problem>
status launch_chunk_loop(const Problem& P, chunk_group g, const device_facts& dev, const cuda_backend& be) {
  const auto go = [&](auto, auto shape, const auto& C) {
    return launch_batch_chunk_loop<decltype(shape)>(C, g.jobs, dev, be);
  };
  return with_chunk_width<T, Problem, batch_chunk_jobs>(P, g, dev, go);
}

/// The chunk loop over packed sequences (cu_seqlens; P: the whole packed Problem, chunk_loop_fits;
/// g: its group): a block a job, longest sequences first where the jobs take more than one wave
/// (lane_loop_order, as the packed lane loop).
template <class T, class Problem>
status launch_packed_chunk_loop(const Problem& P, const std::int64_t* cu_seqlens, index_t sequences, chunk_group g,
                                const device_facts& dev, const cuda_backend& be) {
  const auto go = [&](auto kernel, auto shape, const auto& C) {
    using S = decltype(shape);
    lane_loop_order order(be);
    if (status st = order.plan<decltype(kernel)::value>(varlen_grid(g.jobs), S::threads, S::smem_bytes, cu_seqlens,
                                                        sequences, P.length);
        st != status::success)
      return st;
    return launch(decltype(kernel)::value, varlen_grid(g.jobs), S::threads, S::smem_bytes, be, C,
                  packed_chunk_jobs{cu_seqlens, order.get(), sequences});
  };
  return with_chunk_width<T, Problem, packed_chunk_jobs>(P, g, dev, go);
}

}  // namespace parscan::cuda_detail
