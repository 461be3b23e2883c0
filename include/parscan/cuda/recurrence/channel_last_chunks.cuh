// parscan/cuda/recurrence/channel_last_chunks.cuh — the gated recurrence on channel-last
// layouts of a 16-bit type (forward and backward) or of float (backward), where a lane owns a
// chunk: one 16-byte word of adjacent channels (8, or 4 floats) over a run of consecutive steps
// (the "chunk loop").
//
// Why a kernel of its own. The staged lane tiles (agent/staged_lane_tiles.cuh) give a lane two
// 16-bit channels and one 4-byte cp.async a tensor and step; ncu counted ~61 thread
// instructions a channel-step in the bf16 forward (docs/performance.md). Here every access moves
// 16 bytes: ~30 a channel-step (ncu). A block owns a group of 8 or 4 chunks (64 or 32 16-bit
// channels) of one batch row (or packed sequence) for the whole length, as the lane loop does
// (agent/lane_loop.cuh: no look-back, no workspace), and walks it in tiles of 32·Steps steps:
//   - all threads copy the next tile's inputs into shared memory with 16-byte cp.async (thread t
//     chunk t mod Chunks of lane t / Chunks' run; a quarter warp one or two whole rows) while
//     the current tile is scanned;
//   - warp w takes the tile's chunk w, lane l its steps l·Steps … l·Steps+Steps-1: the lane
//     folds its run (one independent chain a channel), a shuffle scan over the 32 lanes gives
//     each lane its state before its run from the warp's carry, and the lane walks its run
//     again from there, writing its outputs over inputs it has read;
//   - all threads copy the outputs out in whole rows.
// Steps past the length are staged as the identity (gate 1, input 0), so the last lane's state
// is the carry into the next tile, and after the last tile the call's final state.
// Groups of 8 chunks (128-byte rows) wherever their jobs fill the device: a probe of the access
// pattern alone moved 65% of copy in 64-byte rows and 86% in 128-byte ones. What bounds it,
// measured: docs/performance.md ("The chunk loop", "Whole rows").
//
// Shared memory: per tile and tensor, slots of one row (the group's chunks), step j of lane l's
// run at slot j·32 + l. Whole rows keep cp.async coalesced: it merges two threads' halves of a
// 32-byte sector only where they land side by side in shared memory (a probe measured 68% of
// copy for the staging alone with each chunk's words apart, 84% with whole rows). 64-byte rows
// take a 16-byte pad after every two slots, 128-byte rows a permutation of their sectors
// (chunk_loop_shape::word_of), so that a warp's read of one chunk of 32 slots and a quarter
// warp's copy of its rows spread over the bank groups.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../detail/recurrence_math.hpp"
#include "../../layout.hpp"
#include "../../numeric.hpp"
#include "../runtime.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"
#include "recurrence_problems.cuh"
#include "varlen_recurrence.cuh"

namespace parscan::cuda_detail {

/// Channels of a chunk: one 16-byte word.
template <class T>
constexpr int chunk_channels = static_cast<int>(16 / sizeof(T));

/// The types whose 16-byte chunks the loop computes, in float: the 16-bit ones (8 channels a
/// chunk) and float (4).
template <class T>
constexpr bool chunk_type = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16> || std::is_same_v<T, float>;

/// The calls the chunk loop takes: the 16-bit types both ways; float only backward, since the
/// float forward's lane loop (agent/lane_loop.cuh) moves 81–91% of copy in 128-byte rows already.
template <class T, class Problem>
constexpr bool chunk_loop_takes = chunk_type<T> && (!std::is_same_v<T, float> ||
                                                    std::is_same_v<Problem, recurrence_backward_problem<T>>);

/// A block of the chunk loop over `Tensors` staged tensors of T: a group of `Chunks` chunks side
/// by side (one row of 16·Chunks bytes a step), a warp a chunk, runs of `Steps` steps a lane
/// (tiles of 32·Steps steps), two tiles in shared memory (one scanned, one loading).
template <class T, int Tensors, int Steps, int Chunks>
struct chunk_loop_shape {
  static constexpr int chunks = Chunks, warps = Chunks, steps = Steps, tensors = Tensors;
  static constexpr int threads = warps * warp_threads;
  static constexpr int channels = chunk_channels<T>;
  static constexpr int group_channels = Chunks * channels;
  static constexpr int rows = warp_threads * Steps;  // steps (slots) a tile
  static constexpr int row_bytes = Chunks * 16;
  static_assert(Chunks == 4 || Chunks == 8, "64- or 128-byte rows");
  // 64-byte rows: a 16-byte pad after every two; 128-byte rows: none (their 32-byte halves of
  // sectors permuted instead, below).
  static constexpr int pair_bytes = Chunks == 4 ? 2 * row_bytes + 16 : 2 * row_bytes;
  static constexpr int tensor_bytes = rows / 2 * pair_bytes;  // one tensor of one tile
  static constexpr int stage_bytes = Tensors * tensor_bytes;
  static constexpr int smem_bytes = 2 * stage_bytes;

  /// The byte offset of step j of lane l's run, chunk c, within one tensor of a stage. In a
  /// 128-byte row, the row's four 32-byte sectors are XOR-permuted by the slot (a sector's two
  /// chunks stay side by side, so cp.async still merges them): a warp's read of one chunk of
  /// 32 slots then meets each of four bank groups twice a quarter warp, not one eight times.
  __device__ PARSCAN_INLINE static int word_of(int l, int j, int c) {
    const int slot = j * warp_threads + l;
    if constexpr (Chunks == 4) return slot / 2 * pair_bytes + slot % 2 * row_bytes + c * 16;
    return slot * row_bytes + ((c / 2) ^ (slot % 4)) * 32 + c % 2 * 16;
  }
};

/// Whether a tensor of layout l at p keeps whole, aligned chunks: channel-last, channels a
/// multiple of a chunk, strides of whole 16-byte words, the base on a 16-byte boundary.
template <class T>
bool chunk_layout_fits(const T* p, const sequence_layout& l) {
  const auto words = [](index_t elements) { return static_cast<std::size_t>(elements) * sizeof(T) % 16 == 0; };
  return l.sequence_stride == 1 && l.count % chunk_channels<T> == 0 && words(l.step_stride) &&
         (l.groups <= 1 || words(l.group_stride)) && reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

namespace chunk_detail {

/// A staged word as the compute type, and back (16-bit values rounded to nearest even, a pair
/// an instruction; floats as they are).
template <class T>
__device__ PARSCAN_INLINE void unpack(const unsigned char* word, float (&out)[chunk_channels<T>]) {
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
__device__ PARSCAN_INLINE void pack(const float (&in)[chunk_channels<T>], unsigned char* word) {
  if constexpr (std::is_same_v<T, float>)
    *reinterpret_cast<uint4*>(word) =
        make_uint4(__float_as_uint(in[0]), __float_as_uint(in[1]), __float_as_uint(in[2]), __float_as_uint(in[3]));
  else
    *reinterpret_cast<uint4*>(word) = make_uint4(narrow_pair<T>(in[0], in[1]), narrow_pair<T>(in[2], in[3]),
                                                 narrow_pair<T>(in[4], in[5]), narrow_pair<T>(in[6], in[7]));
}
/// The gates of a staged word (exp of the stored value for log gates).
template <class T, bool LogGates>
__device__ PARSCAN_INLINE void gates_of(const unsigned char* word, float (&g)[chunk_channels<T>]) {
  unpack<T>(word, g);
  if constexpr (LogGates) {
#pragma unroll
    for (int i = 0; i < chunk_channels<T>; ++i) g[i] = detail::exp_gate(g[i]);
  }
}
/// The identity step's stored gate (1, or log 0) as a word.
template <class T, bool LogGates>
__device__ PARSCAN_INLINE uint4 identity_gate_word() {
  const unsigned one = LogGates                      ? 0u
                       : std::is_same_v<T, float>    ? 0x3f800000u
                       : std::is_same_v<T, bfloat16> ? 0x3f803f80u
                                                     : 0x3c003c00u;
  return make_uint4(one, one, one, one);
}
__device__ PARSCAN_INLINE void store_word(unsigned char* word, const uint4& w) { *reinterpret_cast<uint4*>(word) = w; }

/// K channels from sequence s on of a per-sequence state vector (x0, x_final, dx_final, dx0:
/// any alignment; null: zeros read, nothing written).
template <class T, int K>
__device__ PARSCAN_INLINE void read_state(const T* p, index_t s, float (&out)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) out[i] = p ? static_cast<float>(p[s + i]) : 0.f;
}
template <class T, int K>
__device__ PARSCAN_INLINE void write_state(T* p, index_t s, const float (&in)[K]) {
  if (!p) return;
#pragma unroll
  for (int i = 0; i < K; ++i) p[s + i] = static_cast<T>(in[i]);
}

/// Given each lane's run folded as y_end = A·y_start + B, channel by channel, and the warp's
/// carry (the state before lane 0's run, the same in every lane): the state before this lane's
/// run, and the carry moved past the warp's last lane.
template <int K>
__device__ PARSCAN_INLINE void chain_lane_runs(float (&A)[K], float (&B)[K], float (&carry)[K], float (&before)[K]) {
  const int lane = static_cast<int>(threadIdx.x % warp_threads);
#pragma unroll
  for (int d = 1; d < warp_threads; d *= 2) {
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const float a_up = __shfl_up_sync(full_mask, A[i], d), b_up = __shfl_up_sync(full_mask, B[i], d);
      if (lane >= d) {
        B[i] = fmaf(A[i], b_up, B[i]);
        A[i] = A[i] * a_up;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const float end = fmaf(A[i], carry[i], B[i]);
    const float up = __shfl_up_sync(full_mask, end, 1);
    before[i] = lane == 0 ? carry[i] : up;
    carry[i] = __shfl_sync(full_mask, end, warp_threads - 1);
  }
}

}  // namespace chunk_detail

/// What the forward's and the backward's Chunks share: the Problem, whose first layout gives
/// every tensor's shape, and its cursor at a group's first sequence (its tensors' first
/// elements there: a group, the Problem's at()).
template <class Problem>
struct chunks_of {
  Problem P;
  using group = typename Problem::cursor;
  __device__ PARSCAN_INLINE const sequence_layout& layout() const { return P.la; }
  __device__ PARSCAN_INLINE index_t length() const { return P.length; }
  __device__ PARSCAN_INLINE group group_at(index_t s) const { return P.at(s); }
};

/// The forward, x[t] = a[t]·x[t-1] + b[t]: stages a and b, writes x over a; the carry starts at
/// x0 (or 0) and ends in x_final.
template <class T, bool LogGates>
struct forward_chunks : chunks_of<recurrence_forward_problem<T>> {
  using chunks_of<recurrence_forward_problem<T>>::P;
  static constexpr int K = chunk_channels<T>;

  using typename chunks_of<recurrence_forward_problem<T>>::group;
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
    const T* a = g.a + c * K + t * P.la.step_stride;
    const T* b = g.b + c * K + t * P.lb.step_stride;
#pragma unroll
    for (int i = 0; i < N; ++i, a += d * P.la.step_stride, b += d * P.lb.step_stride) {
      stage_word(word(i), a);
      stage_word(word(i) + tensor_bytes, b);
    }
  }
  __device__ PARSCAN_INLINE void fold(const unsigned char* word, int tensor_bytes, bool first, float (&A)[K],
                                      float (&B)[K]) const {
    float g[K], in[K];
    chunk_detail::gates_of<T, LogGates>(word, g);
    chunk_detail::unpack<T>(word + tensor_bytes, in);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      B[i] = first ? in[i] : fmaf(g[i], B[i], in[i]);
      A[i] = first ? g[i] : g[i] * A[i];
    }
  }
  __device__ PARSCAN_INLINE void step(unsigned char* word, int tensor_bytes, float (&x)[K]) const {
    float g[K], in[K];
    chunk_detail::gates_of<T, LogGates>(word, g);
    chunk_detail::unpack<T>(word + tensor_bytes, in);
#pragma unroll
    for (int i = 0; i < K; ++i) x[i] = fmaf(g[i], x[i], in[i]);
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

/// The backward (recurrence_problems.cuh: y[t] = a[t]·(dx[t] + y[next]), db[t] = dx[t] +
/// y[next], da[t] = db[t]·x[prev], times a[t] for log gates): stages a, dx and x[prev] (x0 or 0
/// at the forward's first step), writes db over dx and da over x[prev]; the carry starts at
/// dx_final (or 0) and ends in dx0.
template <class T, bool LogGates>
struct backward_chunks : chunks_of<recurrence_backward_problem<T>> {
  using chunks_of<recurrence_backward_problem<T>>::P;
  static constexpr int K = chunk_channels<T>;

  using typename chunks_of<recurrence_backward_problem<T>>::group;
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
        float x0[K];
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
  // The element of a step is (g, g·dx): y_end = g·(dx + y_start).
  __device__ PARSCAN_INLINE void fold(const unsigned char* word, int tensor_bytes, bool first, float (&A)[K],
                                      float (&B)[K]) const {
    float g[K], dx[K];
    chunk_detail::gates_of<T, LogGates>(word, g);
    chunk_detail::unpack<T>(word + tensor_bytes, dx);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      B[i] = g[i] * (first ? dx[i] : B[i] + dx[i]);
      A[i] = first ? g[i] : g[i] * A[i];
    }
  }
  __device__ PARSCAN_INLINE void step(unsigned char* word, int tensor_bytes, float (&y)[K]) const {
    float g[K], dx[K], x_prev[K], da[K];
    chunk_detail::gates_of<T, LogGates>(word, g);
    chunk_detail::unpack<T>(word + tensor_bytes, dx);
    chunk_detail::unpack<T>(word + 2 * tensor_bytes, x_prev);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const float grad = dx[i] + y[i];
      da[i] = LogGates ? grad * x_prev[i] * g[i] : grad * x_prev[i];
      dx[i] = grad;  // db
      y[i] = g[i] * grad;
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

/// The jobs of a batch: (batch row, group of 4 chunks) pairs, row by row.
struct batch_chunk_jobs {
  __device__ PARSCAN_INLINE index_t count(const sequence_layout& l, index_t per_row) const {
    return l.groups * per_row;
  }
  /// f(the job's Chunks, its batch row, its group in the row).
  template <class Chunks, class F>
  __device__ PARSCAN_INLINE void visit(const Chunks& C, index_t job, index_t per_row, F&& f) const {
    f(C, job / per_row, job % per_row);
  }
};

/// The jobs of packed sequences (cu_seqlens): (sequence, group of 4 chunks) pairs, the
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

/// The chunk loop: block b takes jobs b, b + grid, … (a job: a group of 4 chunks of one batch
/// row or packed sequence), each for its whole length. Thread t copies chunk t mod Chunks of
/// lane t / Chunks' run in and out; warp w scans chunk w.
template <class shape, class Chunks, class Jobs>
__global__ void __launch_bounds__(shape::threads) recurrence_chunk_loop_kernel(Chunks whole, Jobs jobs) {
  extern __shared__ uint4 chunk_smem[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(chunk_smem);
  constexpr int K = shape::channels, S = shape::steps, TB = shape::tensor_bytes;
  const sequence_layout& l = whole.layout();
  const index_t per_row = (l.count + shape::group_channels - 1) / shape::group_channels;
  const int copy_chunk = static_cast<int>(threadIdx.x % shape::chunks),
            copy_run = static_cast<int>(threadIdx.x / shape::chunks);
  const int scan_chunk = static_cast<int>(threadIdx.x / warp_threads),
            lane = static_cast<int>(threadIdx.x % warp_threads);

  for (index_t job = blockIdx.x; job < jobs.count(l, per_row); job += gridDim.x) {
    jobs.visit(whole, job, per_row, [&](const Chunks& C, index_t batch, index_t group) {
      const index_t length = C.length(), tiles = (length + shape::rows - 1) / shape::rows;
      const index_t first = group * shape::group_channels;
      const typename Chunks::group grp = C.group_at(batch * l.count + first);
      const bool copies = first + copy_chunk * K < l.count, scans = first + scan_chunk * K < l.count;
      const index_t copy_s = batch * l.count + first + copy_chunk * K;  // sequences of the chunks' first channels
      const index_t scan_s = batch * l.count + first + scan_chunk * K;
      // The words of the run this thread copies of tile k, in the tile's stage.
      const auto copy_words = [&](index_t k) {
        unsigned char* stage = smem + (k % 2) * shape::stage_bytes;
        return [stage, copy_run, copy_chunk](int i) { return stage + shape::word_of(copy_run, i, copy_chunk); };
      };
      const auto stage_tile = [&](index_t k) {
        const index_t p = k * shape::rows + copy_run * S;
        const auto word = copy_words(k);
        if (copies && p + S + Chunks::lookahead <= length) {
          C.template stage_whole<S>(grp, copy_chunk, p, word, TB);
        } else if (copies) {  // the last tile: steps past the length are the identity
#pragma unroll
          for (int i = 0; i < S; ++i) C.stage(grp, copy_chunk, p + i, copy_s, word(i), TB);
        }
        async_commit();
      };

      float carry[K];
      if (scans) chunk_detail::read_state(C.carry_in(), scan_s, carry);
      if (tiles > 0) stage_tile(0);
      for (index_t k = 0; k < tiles; ++k) {
        if (k + 1 < tiles) {
          stage_tile(k + 1);
          async_wait<1>();
        } else {
          async_wait<0>();
        }
        __syncthreads();  // tile k staged by every thread
        if (scans) {
          unsigned char* stage = smem + (k % 2) * shape::stage_bytes;
          const auto word = [&](int j) { return stage + shape::word_of(lane, j, scan_chunk); };
          float A[K], B[K], y[K];
#pragma unroll
          for (int j = 0; j < S; ++j) C.fold(word(j), TB, j == 0, A, B);
          chunk_detail::chain_lane_runs(A, B, carry, y);
#pragma unroll
          for (int j = 0; j < S; ++j) C.step(word(j), TB, y);
        }
        __syncthreads();  // tile k's outputs written by every warp
        const index_t p = k * shape::rows + copy_run * S;
        const auto word = copy_words(k);
        if (copies && p + S <= length) {
          C.template store_whole<S>(grp, copy_chunk, p, word, TB);
        } else if (copies) {
#pragma unroll
          for (int i = 0; i < S; ++i)
            if (p + i < length) C.store(grp, copy_chunk, p + i, word(i), TB);
        }
        __syncthreads();  // the stage read out before tile k + 2 is copied into it
      }
      // A sequence of no steps: its carry out is its carry in.
      if (scans && lane == 0) chunk_detail::write_state(C.carry_out(), scan_s, carry);
    });
  }
}

/// The chunk loop's tiles. 64-byte rows: forward 256 steps of two tensors (72 KB of shared
/// memory, three blocks an SM), backward 160 steps of three (67.5 KB, three blocks; 192 steps
/// would leave room for two). 128-byte rows: forward 128 steps (64 KB), backward 96 (72 KB).
template <class T, int Chunks>
using forward_chunk_shape = chunk_loop_shape<T, 2, Chunks == 4 ? 8 : 4, Chunks>;
template <class T, int Chunks>
using backward_chunk_shape = chunk_loop_shape<T, 3, Chunks == 4 ? 5 : 3, Chunks>;

/// Whether a forward or backward Problem's tensors all keep whole, aligned chunks.
template <class T>
bool chunk_loop_fits(const recurrence_forward_problem<T>& P) {
  return chunk_loop_takes<T, recurrence_forward_problem<T>> && P.length > 0 && chunk_layout_fits(P.a, P.la) &&
         chunk_layout_fits(P.b, P.lb) && chunk_layout_fits(P.x, P.lx);
}
template <class T>
bool chunk_loop_fits(const recurrence_backward_problem<T>& P) {
  return chunk_loop_takes<T, recurrence_backward_problem<T>> && P.length > 0 && chunk_layout_fits(P.a, P.la) &&
         chunk_layout_fits(P.x, P.lx) && chunk_layout_fits(P.dx, P.ldx) && chunk_layout_fits(P.da, P.lda) &&
         chunk_layout_fits(P.db, P.ldb);
}

/// The chunk loop's Chunks and tile shape for a forward or backward Problem of T, groups of
/// `Width` chunks.
template <class T, class Problem, int Width>
struct chunk_loop_of;
template <class T, int Width>
struct chunk_loop_of<T, recurrence_forward_problem<T>, Width> {
  template <bool LogGates>
  using chunks = forward_chunks<T, LogGates>;
  using shape = forward_chunk_shape<T, Width>;
};
template <class T, int Width>
struct chunk_loop_of<T, recurrence_backward_problem<T>, Width> {
  template <bool LogGates>
  using chunks = backward_chunks<T, LogGates>;
  using shape = backward_chunk_shape<T, Width>;
};

/// Calls f(kernel, shape, chunks) with the chunk loop's kernel for P's gate form, groups of
/// Width chunks and Jobs (kernel as a std::integral_constant, shape a value of its type).
template <class T, int Width, class Problem, class Jobs, class F>
status with_chunk_kernel(const Problem& P, F&& f) {
  using loop = chunk_loop_of<T, Problem, Width>;
  using shape = typename loop::shape;
  if (P.log_gate) {
    using C = typename loop::template chunks<true>;
    return f(std::integral_constant<decltype(&recurrence_chunk_loop_kernel<shape, C, Jobs>),
                                    &recurrence_chunk_loop_kernel<shape, C, Jobs>>{},
             shape{}, C{{P}});
  }
  using C = typename loop::template chunks<false>;
  return f(std::integral_constant<decltype(&recurrence_chunk_loop_kernel<shape, C, Jobs>),
                                  &recurrence_chunk_loop_kernel<shape, C, Jobs>>{},
           shape{}, C{{P}});
}

/// The chunk loop's group for `rows` batch rows (or packed sequences) of P.la.count channels:
/// its width in chunks and its jobs (rows × groups a row). 128-byte rows where their jobs fill
/// the device, else 64-byte rows where theirs do (a job's whole length goes to one block; with
/// fewer jobs than multiprocessors the staged lane tiles spread the steps further); width 0:
/// neither. Why wide first: a probe of the rows alone (H100, (8, 15360, 1536) bf16, read two
/// write one, no scan) moved 65% of copy in 64-byte rows, 86% in 128-byte and 90–94% in
/// 256-byte rows (docs/performance.md).
struct chunk_group {
  int width;
  index_t jobs;
};
template <class T>
chunk_group chunk_group_for(index_t channels, index_t rows, int multiprocessors) {
  for (int width : {8, 4}) {
    const index_t group = static_cast<index_t>(width * chunk_channels<T>);
    const index_t jobs = rows * ((channels + group - 1) / group);
    if (jobs >= static_cast<index_t>(multiprocessors)) return {width, jobs};
  }
  return {0, 0};
}

/// The chunk loop over a batch of channel-last sequences (P: chunk_loop_fits; g: its group,
/// width 4 or 8).
template <class T, class Problem>
status launch_chunk_loop(const Problem& P, chunk_group g, const device_facts& dev, const cuda_backend& be) {
  const auto go = [&](auto kernel, auto shape, const auto& C) {
    using S = decltype(shape);
    const int per_sm = blocks_per_multiprocessor<decltype(kernel)::value>(S::threads, dev.device, S::smem_bytes);
    if (per_sm == 0) return status::exceeds_device_limits;
    const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
    return launch(decltype(kernel)::value, g.jobs < resident ? g.jobs : resident, S::threads, S::smem_bytes, be, C,
                  batch_chunk_jobs{});
  };
  return g.width == 8 ? with_chunk_kernel<T, 8, Problem, batch_chunk_jobs>(P, go)
                      : with_chunk_kernel<T, 4, Problem, batch_chunk_jobs>(P, go);
}

/// The chunk loop over packed sequences (cu_seqlens; P: the whole packed Problem, chunk_loop_fits;
/// g: its group): a block a job, longest sequences first where the jobs take more than one wave
/// (lane_loop_order, as the packed lane loop).
template <class T, class Problem>
status launch_packed_chunk_loop(const Problem& P, const std::int64_t* cu_seqlens, index_t sequences, chunk_group g,
                                const cuda_backend& be) {
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
  return g.width == 8 ? with_chunk_kernel<T, 8, Problem, packed_chunk_jobs>(P, go)
                      : with_chunk_kernel<T, 4, Problem, packed_chunk_jobs>(P, go);
}

}  // namespace parscan::cuda_detail
