// parscan/cuda/recurrence/log_channel_last_chunks.cuh — the log-space forward on channel-last
// layouts as the chunk loop (agent/chunk_loop.cuh): a lane owns one 16-byte word of adjacent
// channels (4 floats, 8 bfloat16) of log|a| (or a) and of log|b| (or b) over a run of
// consecutive steps.
//
// Why. The lane packs (log_recurrence_lane_packs.cuh) give a float lane one channel and a 4-byte
// cp.async a tensor and step; ncu counted 210 thread instructions a step for the f32 forward at
// (8, 4096, 1536), 26.5% of copy on an H200, against 143 and 57% for the same call laid out
// (B, D, T) at the time (docs/performance.md). Here every access moves 16 bytes, and a lane applies the
// operator about three times a channel-step (its run's fold, the walk from its prefix, the warp
// scan's five and two more shared by its run), as the (B, D, T) kernels do.
//
// The scan of a warp's chunk over a tile, as the gated recurrence's (channel_last_chunks.cuh):
// steps past the length are staged as the identity (a = 1, b = 0), the lane folds its run, a
// shuffle scan over the lanes and the warp's carry give each lane its state before its run, and
// the lane walks its run again, writing log|x| over log|a| and the signs of x (or x itself, in
// value form) over b. Input sign arrays are not staged (a step's signs of a chunk are 4 or 8
// bytes), so calls with them keep the lane packs or the shared kernels, as do calls that write
// x both as a value and in log form (two outputs beside log|a|'s slot).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../detail/log_affine_bits.hpp"
#include "../../detail/log_recurrence_math.hpp"
#include "../agent/chunk_loop.cuh"
#include "../device/dispatch_chunk_loop.cuh"
#include "../warp/warp_shuffle.cuh"
#include "channel_last_chunks.cuh"
#include "log_recurrence_problem.cuh"
#include "log_varlen_recurrence.cuh"

namespace parscan::cuda_detail {

/// The forward of log_recurrence_problem.cuh over 16-byte chunks of K channels.
template <class T, bool Values>
struct log_forward_chunks {
  using Problem = log_recurrence_forward_problem<T, Values>;
  using acc = detail::log_affine_bits;
  using group = typename Problem::cursor;
  static constexpr int K = chunk_channels<T>;
  struct carry_type {
    acc v[K];
  };
  static constexpr int lookahead = 0;
  static constexpr bool writes = true;

  Problem P;

  __device__ PARSCAN_INLINE const sequence_layout& layout() const { return P.la; }
  __device__ PARSCAN_INLINE index_t length() const { return P.length; }
  __device__ PARSCAN_INLINE group group_at(index_t s) const { return P.at(s); }
  __device__ PARSCAN_INLINE void read_carry(index_t s, carry_type& carry) const {
#pragma unroll
    for (int i = 0; i < K; ++i) carry.v[i] = P.initial(s + i).value;
  }
  __device__ PARSCAN_INLINE void write_carry(index_t s, const carry_type& carry) const {
#pragma unroll
    for (int i = 0; i < K; ++i) P.finish(s + i, carry.v[i]);
  }

  /// Step p's words of chunk c: log|a| (or a) at word, log|b| (or b) at word + tensor_bytes; past
  /// the length, the identity in the forms given.
  __device__ PARSCAN_INLINE void stage(const group& g, int c, index_t p, index_t, unsigned char* word,
                                       int tensor_bytes) const {
    if (p < P.length) {
      const index_t t = P.step(p);
      stage_word(word, g.log_a + c * K + t * P.la.step_stride);
      stage_word(word + tensor_bytes, g.log_b + c * K + t * P.lb.step_stride);
    } else {
      chunk_detail::store_word(word, filled_word(P.a_val() ? 1.0f : 0.0f));  // a = 1
      chunk_detail::store_word(word + tensor_bytes,
                               filled_word(P.b_val() ? 0.0f : -cuda::std::numeric_limits<float>::infinity()));
    }
  }
  template <int N, class Word>
  __device__ PARSCAN_INLINE void stage_whole(const group& g, int c, index_t p, Word&& word, int tensor_bytes) const {
    const index_t t = P.step(p), d = P.reverse ? -1 : 1;
    chunk_detail::stage_two_tensors<N>(word, tensor_bytes, g.log_a + c * K + t * P.la.step_stride,
                                       d * P.la.step_stride, g.log_b + c * K + t * P.lb.step_stride,
                                       d * P.lb.step_stride);
  }

  template <int S, class Word>
  __device__ PARSCAN_INLINE void scan(Word&& word, int tensor_bytes, index_t, carry_type& carry) const {
    const detail::log_affine_bits_op op;
    const int lane = lane_id();
    acc run[K], e[K];
    static_assert(!converts_once || K * S <= 32, "a run's signs fit a 32-bit mask");
    converted_signs signs;
    fold_elements(word(0), tensor_bytes, 0, run, signs);
    // The steps of a run are one dependent chain a channel, so unrolling them buys no overlap
    // the K channels do not already give, and multiplied the kernel's code: unrolled, ncu counted
    // 22% of its warps' stall samples waiting for instructions (no_inst).
#pragma unroll 1
    for (int j = 1; j < S; ++j) {
      fold_elements(word(j), tensor_bytes, j, e, signs);
#pragma unroll
      for (int i = 0; i < K; ++i) run[i] = op(run[i], e[i]);
    }
    // The runs of the lanes up to this one, then the state before this lane's run and the carry
    // past the warp's last lane.
#pragma unroll
    for (int d = 1; d < warp_threads; d *= 2) {
#pragma unroll
      for (int i = 0; i < K; ++i) {
        const acc up = shfl_up(run[i], d);
        if (lane >= d) run[i] = op(up, run[i]);
      }
    }
    acc x[K];
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const acc up = shfl_up(run[i], 1), end = shfl_idx(run[i], warp_threads - 1);
      x[i] = lane == 0 ? carry.v[i] : op(carry.v[i], up);
      carry.v[i] = op(carry.v[i], end);
    }
#pragma unroll 1
    for (int j = 0; j < S; ++j) {
      walk_elements(word(j), tensor_bytes, j, e, signs);
#pragma unroll
      for (int i = 0; i < K; ++i) x[i] = op(x[i], e[i]);
      put(word(j), tensor_bytes, x);
    }
  }

  __device__ PARSCAN_INLINE void store(const group& g, int c, index_t p, const unsigned char* word,
                                       int tensor_bytes) const {
    write_outputs(g, c * K + P.step(p) * P.lx.step_stride, word, tensor_bytes);
  }
  template <int N, class Word>
  __device__ PARSCAN_INLINE void store_whole(const group& g, int c, index_t p, Word&& word, int tensor_bytes) const {
    const index_t d = P.reverse ? -P.lx.step_stride : P.lx.step_stride;
    index_t o = c * K + P.step(p) * P.lx.step_stride;
#pragma unroll
    for (int i = 0; i < N; ++i, o += d) write_outputs(g, o, word(i), tensor_bytes);
  }

 private:
  /// A word of K copies of v as T.
  __device__ PARSCAN_INLINE static uint4 filled_word(float v) {
    T w[K];
#pragma unroll
    for (int i = 0; i < K; ++i) w[i] = static_cast<T>(v);
    uint4 r;
    memcpy(&r, w, sizeof(r));
    return r;
  }
  /// Float value forms convert a step once: the fold writes the log magnitudes over the values it
  /// has read (a float log fits a float's slot) and keeps their signs in masks, bit j·K + i for
  /// step j of the run, channel i; the walk reads them back. ncu put about 45 of the value-form
  /// kernel's 143 instructions a step in its two logf a step (docs/performance.md). The 16-bit
  /// types have no room for a float log in their slots and convert twice, cheaply (input_log).
  static constexpr bool converts_once = Values && sizeof(T) == 4;
  struct converted_signs {
    std::uint32_t a = 0, b = 0;
  };
  /// A value-form input's log form: logf for float, the special-function unit's log for the
  /// 16-bit types (its error is far below their rounding; log_recurrence_math.hpp).
  __device__ PARSCAN_INLINE static signed_log<float> input_log(float v) {
    if constexpr (sizeof(T) == 4) return detail::log_form_of(v);
    else return detail::log_form_of_approx(v);
  }
  /// A channel's stored a and b in log form, value forms converted.
  __device__ PARSCAN_INLINE void log_forms(float a, float b, signed_log<float>& la, signed_log<float>& lb) const {
    la = P.a_val() ? input_log(a) : signed_log<float>{a, false};
    lb = P.b_val() ? input_log(b) : signed_log<float>{b, false};
  }
  /// The elements of a staged step, channel by channel (no input signs: they are not staged).
  __device__ PARSCAN_INLINE void elements(const unsigned char* word, int tensor_bytes, acc (&e)[K]) const {
    chunk_detail::chunk_values<T> a, b;
    chunk_detail::unpack<T>(word, a);
    chunk_detail::unpack<T>(word + tensor_bytes, b);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      if constexpr (Values) {
        signed_log<float> la, lb;
        log_forms(a[i], b[i], la, lb);
        e[i] = acc(la.log_mag, la.neg, lb.log_mag, lb.neg);
      } else {
        e[i] = acc(a[i], false, b[i], false);
      }
    }
  }
  /// The elements of step j of a lane's run as the fold reads them; float value forms are left
  /// converted in the staged words, their signs in `signs`.
  __device__ PARSCAN_INLINE void fold_elements(unsigned char* word, int tensor_bytes, int j, acc (&e)[K],
                                               converted_signs& signs) const {
    elements(word, tensor_bytes, e);
    if constexpr (converts_once) {
      chunk_detail::chunk_values<T> la, lb;
#pragma unroll
      for (int i = 0; i < K; ++i) {
        la[i] = e[i].log_a, lb[i] = e[i].log_b;
        signs.a |= e[i].sign_a >> 31 << (j * K + i);
        signs.b |= e[i].sign_b >> 31 << (j * K + i);
      }
      if (P.a_val()) chunk_detail::pack<T>(la, word);
      if (P.b_val()) chunk_detail::pack<T>(lb, word + tensor_bytes);
    }
  }
  /// The elements of step j as the walk reads them: what fold_elements gave.
  __device__ PARSCAN_INLINE void walk_elements(const unsigned char* word, int tensor_bytes, int j, acc (&e)[K],
                                               const converted_signs& signs) const {
    if constexpr (!converts_once) {
      elements(word, tensor_bytes, e);
    } else {
      chunk_detail::chunk_values<T> la, lb;
      chunk_detail::unpack<T>(word, la);
      chunk_detail::unpack<T>(word + tensor_bytes, lb);
#pragma unroll
      for (int i = 0; i < K; ++i)
        e[i] = acc::from_masks(la[i], (signs.a >> (j * K + i) & 1u) << 31, lb[i], (signs.b >> (j * K + i) & 1u) << 31);
    }
  }
  /// A step's outputs into its staged words: log|x| over log|a|; over b, x itself where it is
  /// wanted as a value, otherwise the K sign bytes of x.
  __device__ PARSCAN_INLINE void put(unsigned char* word, int tensor_bytes, const acc (&x)[K]) const {
    chunk_detail::chunk_values<T> out;
    if (!Values || P.log_x) {
#pragma unroll
      for (int i = 0; i < K; ++i) out[i] = x[i].log_b;
      chunk_detail::pack<T>(out, word);
    }
    if (Values && P.x) {
#pragma unroll
      for (int i = 0; i < K; ++i) out[i] = detail::value_of(x[i].log_b, x[i].neg_b());
      chunk_detail::pack<T>(out, word + tensor_bytes);
    } else if (P.x_negative) {
      std::uint8_t signs[K];
#pragma unroll
      for (int i = 0; i < K; ++i) signs[i] = x[i].neg_b() ? 1 : 0;
      memcpy(word + tensor_bytes, signs, K);
    }
  }
  /// The outputs of a chunk-step at element offset o (of the shared output layout).
  __device__ PARSCAN_INLINE void write_outputs(const group& g, index_t o, const unsigned char* word,
                                               int tensor_bytes) const {
    if (!Values || g.log_x)
      chunk_detail::store_word(reinterpret_cast<unsigned char*>(g.log_x + o), *reinterpret_cast<const uint4*>(word));
    if (Values && g.x) {
      chunk_detail::store_word(reinterpret_cast<unsigned char*>(g.x + o),
                               *reinterpret_cast<const uint4*>(word + tensor_bytes));
    } else if (g.x_negative) {
      using W = typename vector_word<K>::type;  // K sign bytes: 4 or 8, aligned (chunk_loop_fits)
      *reinterpret_cast<W*>(g.x_negative + o) = *reinterpret_cast<const W*>(word + tensor_bytes);
    }
  }
};

/// Tiles of the log forward's chunk loop. float: groups of 8 chunks (128-byte rows, 8 warps a
/// block), 4 steps a lane (64 KB of shared memory); bfloat16: groups of 4 chunks (64-byte rows),
/// 8 steps a lane (72 KB), whose lanes hold twice the channels in registers (158-162 of them in
/// the value-form kernel). Measured on an H200 (bench_recurrence, (8, 4096, 1536), b as values):
/// float 39.6-40.0% of copy against 35.3-35.5% for the bfloat16 shape and 30.7% for 4 chunks of
/// 4 steps; bfloat16 20.6-20.7% against 14.7% and 17.2% (docs/performance.md).
template <class T>
using log_forward_chunk_shape =
    std::conditional_t<sizeof(T) == 4, chunk_loop_shape<T, 2, 4, 8>, chunk_loop_shape<T, 2, 8, 4>>;

/// Whether the chunk loop can take a forward call: channel-last, no input sign arrays, log|x|
/// and its signs or x as a value (not both), every tensor in whole aligned chunks (the signs of
/// x: K-byte words), not exclusive.
template <class T, bool Values>
bool log_chunk_loop_fits(const log_recurrence_forward_problem<T, Values>& P) {
  constexpr int K = chunk_channels<T>;
  if (!chunk_type<T> || P.length == 0 || !P.lane_major || P.exclusive || P.a_negative || P.b_negative) return false;
  const bool log_out = !Values || P.log_x != nullptr, value_out = Values && P.x != nullptr;
  if (value_out && (log_out || P.x_negative)) return false;
  if (!chunk_layout_fits(P.log_a, P.la) || !chunk_layout_fits(P.log_b, P.lb)) return false;
  if (log_out && !chunk_layout_fits(P.log_x, P.lx)) return false;
  if (value_out && !chunk_layout_fits(P.x, P.lx)) return false;
  return P.x_negative == nullptr || reinterpret_cast<std::uintptr_t>(P.x_negative) % K == 0;
}

/// Runs a forward call in the chunk loop where it fits and its jobs (`rows` batch rows or packed
/// sequences, each of groups of chunks) fill the device; *taken says whether it did. Packed
/// sequences (cu_seqlens; P the whole packed Problem) go a block a job, longest first where the
/// jobs take more than one wave, as the gated recurrence's (launch_packed_chunk_loop).
template <class T, bool Values>
status run_log_forward_chunks(const log_recurrence_forward_problem<T, Values>& P, const cuda_backend& be,
                              bool* taken, const std::int64_t* cu_seqlens = nullptr, index_t sequences = 0) {
  *taken = false;
  if (!log_chunk_loop_fits(P)) return status::success;
  const device_facts dev = current_device();
  if (dev.st != status::success) return dev.st;
  using shape = log_forward_chunk_shape<T>;
  using chunks = log_forward_chunks<T, Values>;
  const index_t rows = cu_seqlens ? sequences : P.la.groups;
  const index_t jobs = rows * ((P.la.count + shape::group_channels - 1) / shape::group_channels);
  if (jobs < dev.multiprocessors) return status::success;
  *taken = true;
  if (!cu_seqlens) return launch_batch_chunk_loop<shape>(chunks{P}, jobs, dev, be);
  constexpr auto kernel = &chunk_loop_kernel<shape, chunks, packed_chunk_jobs>;
  lane_loop_order order(be);
  if (status st = order.plan<kernel>(varlen_grid(jobs), shape::threads, shape::smem_bytes, cu_seqlens, sequences,
                                     P.length);
      st != status::success)
    return st;
  return launch(kernel, varlen_grid(jobs), shape::threads, shape::smem_bytes, be, chunks{P},
                packed_chunk_jobs{cu_seqlens, order.get(), sequences});
}

}  // namespace parscan::cuda_detail
