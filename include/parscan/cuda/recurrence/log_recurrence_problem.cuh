// parscan/cuda/recurrence/log_recurrence_problem.cuh — the log-space recurrence, forward and
// backward, as Problems for the shared scan kernels. Forward: element (log|a|, sign a, log|b|,
// sign b) under log_affine_op<float>, held as detail::log_affine_bits (the signs as bit masks);
// the carry (a = 0, b = x0) brings in the state exactly.
// Backward: the linear gradient db, carried in log form under the same operator (below).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda/std/limits>

#include "../../detail/log_affine_bits.hpp"
#include "../../detail/log_recurrence_math.hpp"
#include "../../layout.hpp"
#include "../../ops/log_affine.hpp"
#include "../block/lane_tile_scan.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

/// Whether a run of V one-byte signs from `lo` can be staged: absent (nothing to copy) or
/// aligned for one V-byte cp.async.
template <int V>
__device__ PARSCAN_INLINE bool sign_run_stageable(const std::uint8_t* signs, index_t lo) {
  return signs == nullptr || reinterpret_cast<std::uintptr_t>(signs + lo) % V == 0;
}

/// Signs of a staged run: V bytes at slot (first sign tensor) and slot + 8 (second), so both
/// fit one 16-byte tensor slot of staging_ring (V is 4 for float, 8 for bfloat16).
template <int V>
__device__ PARSCAN_INLINE void stage_signs(unsigned char* slot, const std::uint8_t* signs, index_t lo) {
  if (signs) stage_bytes<V>(slot, signs + lo);
}
template <int V>
__device__ PARSCAN_INLINE void read_staged_signs(const unsigned char* slot, const std::uint8_t* signs, int dir,
                                                 std::uint8_t (&out)[V]) {
  if (signs) {
    read_staged_bytes<V>(slot, dir, out);
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = 0;
  }
}

/// The signs of a staged run of V sign bytes as log_affine_bits' masks (float_sign_bit where a
/// byte is nonzero), in processing order; all 0 where the tensor is absent (null). Four bytes a
/// word at once, where bytes tested one by one cost a byte extract, a compare and a select each.
template <int V>
__device__ PARSCAN_INLINE void read_staged_sign_masks(const unsigned char* slot, const std::uint8_t* signs, int dir,
                                                      std::uint32_t (&out)[V]) {
  std::uint32_t m[V];
#pragma unroll
  for (int w = 0; w < V / 4; ++w) {
    const std::uint32_t bytes = signs ? reinterpret_cast<const std::uint32_t*>(slot)[w] : 0u;
    // Each byte's high bit, set where the byte is nonzero (its low seven bits carry into it).
    const std::uint32_t nonzero = (((bytes & 0x7f7f7f7fu) + 0x7f7f7f7fu) | bytes) & 0x80808080u;
#pragma unroll
    for (int k = 0; k < 4; ++k) m[4 * w + k] = (nonzero << (24 - 8 * k)) & detail::float_sign_bit;
  }
  if (dir > 0) {
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = m[v];
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = m[V - 1 - v];
  }
}

/// The forward. Each input pointer holds its log magnitudes, or, with its *_value flag, the
/// values themselves (converted on load; their sign arrays are then null). The output is log_x
/// (+ x_negative) and/or x, the value (-1)^neg·exp(log|x|), each null when not wanted.
/// Values = false is the log form only (the flags and x are ignored, log_x is written): value
/// forms get their own instantiation, so the log-form kernels carry none of their code.
template <class T, bool Values = false>
struct log_recurrence_forward_problem {
  using acc_type = detail::log_affine_bits;
  using sign = std::uint8_t;
  const T* log_a;           // log|a|, or a with a_value
  const sign* a_negative;  // null: all positive (or a in value form)
  const T* log_b;           // log|b|, or b with b_value
  const sign* b_negative;
  T* log_x;                // null: not written
  sign* x_negative;        // null: not written (x is positive)
  const T* log_x0;          // log|x0|, or x0 with x0_value; null: no x0
  const sign* x0_negative;
  T* log_x_final;
  sign* x_final_negative;
  sequence_layout la, lb, lx;
  index_t length;
  bool reverse;
  bool lane_major;
  bool exclusive = false;
  bool a_value = false, b_value = false, x0_value = false;  // inputs in value form (Values only)
  T* x = nullptr;  // x itself (laid out as log_x); null: not written (Values only)
  __device__ PARSCAN_INLINE bool a_val() const { return Values && a_value; }
  __device__ PARSCAN_INLINE bool b_val() const { return Values && b_value; }
  __device__ PARSCAN_INLINE bool x0_val() const { return Values && x0_value; }

  struct value_output {
    T* x;
  };
  struct no_value_output {
    static constexpr T* x = nullptr;
  };
  // The log-form cursor is the one it always was; value forms add x.
  struct cursor : std::conditional_t<Values, value_output, no_value_output> {
    const T* log_a;
    const sign* a_negative;
    const T* log_b;
    const sign* b_negative;
    T* log_x;
    sign* x_negative;
    bool runs_stage;  // whether this sequence's whole runs stage (stage_run)
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    const sequence_layout::place q = la.place_of(s);  // one shape for all tensors
    const index_t oa = la.offset_of(q), ob = lb.offset_of(q), ox = lx.offset_of(q);
    cursor c;
    c.log_a = log_a + oa, c.a_negative = a_negative ? a_negative + oa : nullptr;
    c.log_b = log_b + ob, c.b_negative = b_negative ? b_negative + ob : nullptr;
    c.log_x = !Values || log_x ? log_x + ox : nullptr, c.x_negative = x_negative ? x_negative + ox : nullptr;
    if constexpr (Values) c.x = x ? x + ox : nullptr;
    // Whole runs start a multiple of 16 bytes (of magnitudes) and of V bytes (of signs) apart,
    // so the run at position 0 decides for all of them, once a sequence instead of once a run.
    const index_t lo = reverse ? length - run : 0;  // its lowest step (any sign: only addresses)
    const auto at_lo = [&](const void* p, index_t bytes) { return reinterpret_cast<std::uintptr_t>(p) + lo * bytes; };
    c.runs_stage = la.step_stride == 1 && lb.step_stride == 1 && at_lo(c.log_a, sizeof(T)) % 16 == 0 &&
                   at_lo(c.log_b, sizeof(T)) % 16 == 0 && (!c.a_negative || at_lo(c.a_negative, 1) % run == 0) &&
                   (!c.b_negative || at_lo(c.b_negative, 1) % run == 0);
    return c;
  }
  // The float forward's staged warp loop, latency-bound at 103 registers (four 4-warp blocks an
  // SM), held to 96 (five, no spills): 51.6 -> 56.4% of copy at (8, 1536, 4096) on an H200 with
  // runs of 4 (87 registers with runs of 8; six blocks, 80, spilled in the value form). The
  // bfloat16 one, held the same way, lost a point (42.9 -> 41.9%), so it keeps ptxas' choice.
  static constexpr int loop_min_blocks = sizeof(T) == 4 ? 5 : 0;
  // Eight steps a run for every T: a lane's fold, and the warp scan's five adds, are shared by
  // 8 steps rather than by float's 4 (run_length), 22 adds a lane for 8 steps instead of 29.
  static constexpr int run = 8;
  static constexpr int words = words_of_run<run, T>;  // 16-byte words of magnitudes a run
  __device__ PARSCAN_INLINE index_t step(index_t pos) const { return reverse ? length - 1 - pos : pos; }
  // The element of one step from its stored a and b, for value forms (the log-form paths below
  // keep their own expressions, so the log-form kernels compile as they did before value forms).
  __device__ PARSCAN_INLINE acc_type element(const T& a, sign na, const T& b, sign nb) const {
    const signed_log<float> la = detail::input_log_form(static_cast<float>(a), na != 0, a_val());
    const signed_log<float> lb = detail::input_log_form(static_cast<float>(b), nb != 0, b_val());
    return acc_type(la.log_mag, la.neg, lb.log_mag, lb.neg);
  }
  __device__ PARSCAN_INLINE int count(index_t pos) const { return steps_in_run<run>(length, pos); }

  __device__ PARSCAN_INLINE void load_run(const cursor& c, index_t pos, acc_type (&items)[run]) const {
    T ra[run], rb[run];
    sign na[run] = {}, nb[run] = {};
    const int n = count(pos), dir = reverse ? -1 : 1;
    const index_t t = step(pos);
    read_steps_by_word(c.log_a, la.step_stride, t, dir, n, ra);
    read_steps_by_word(c.log_b, lb.step_stride, t, dir, n, rb);
    if (c.a_negative) read_steps(c.a_negative, la.step_stride, t, dir, n, na);
    if (c.b_negative) read_steps(c.b_negative, lb.step_stride, t, dir, n, nb);
    if constexpr (Values) {
#pragma unroll
      for (int v = 0; v < run; ++v) items[v] = v < n ? element(ra[v], na[v], rb[v], nb[v]) : acc_type{};
    } else {
#pragma unroll
      for (int v = 0; v < run; ++v)
        items[v] = v < n ? acc_type(static_cast<float>(ra[v]), na[v] != 0, static_cast<float>(rb[v]), nb[v] != 0)
                         : acc_type{};
    }
  }
  __device__ PARSCAN_INLINE void store_run(const cursor& c, index_t pos, const acc_type (&items)[run]) const {
    T rx[run];
    sign nx[run];
#pragma unroll
    for (int v = 0; v < run; ++v) rx[v] = static_cast<T>(items[v].log_b), nx[v] = items[v].neg_b() ? 1 : 0;
    const int n = count(pos), dir = reverse ? -1 : 1;
    if (!Values || c.log_x) {
      write_steps_by_word(c.log_x, lx.step_stride, step(pos), dir, n, rx);
      if (c.x_negative) write_steps(c.x_negative, lx.step_stride, step(pos), dir, n, nx);
    }
    if (Values && c.x) {
      T vx[run];
#pragma unroll
      for (int v = 0; v < run; ++v) vx[v] = static_cast<T>(detail::value_of(items[v].log_b, items[v].neg_b()));
      write_steps_by_word(c.x, lx.step_stride, step(pos), dir, n, vx);
    }
  }
  __device__ PARSCAN_INLINE acc_type load_at(const cursor& c, index_t pos) const {
    const index_t ia = step(pos) * la.step_stride, ib = step(pos) * lb.step_stride;
    if constexpr (Values)
      return element(c.log_a[ia], c.a_negative && c.a_negative[ia] != 0, c.log_b[ib],
                     c.b_negative && c.b_negative[ib] != 0);
    return acc_type(static_cast<float>(c.log_a[ia]), c.a_negative && c.a_negative[ia] != 0,
                    static_cast<float>(c.log_b[ib]), c.b_negative && c.b_negative[ib] != 0);
  }
  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t pos, const acc_type& v) const {
    const index_t ix = step(pos) * lx.step_stride;
    if (!Values || c.log_x) c.log_x[ix] = static_cast<T>(v.log_b);
    if (c.x_negative) c.x_negative[ix] = v.neg_b() ? 1 : 0;
    if (Values && c.x) c.x[ix] = static_cast<T>(detail::value_of(v.log_b, v.neg_b()));
  }
  // Staging through shared memory (the staged kernels): log|a| and log|b| of a run, `words`
  // 16-byte words each (a word a ring tensor, in processing order), and both runs of signs (8
  // bytes each) in a last 16-byte slot. All or nothing: a run with any tensor misaligned or
  // strided is read directly.
  static_assert(run == 8, "sign runs are one 8-byte cp.async");
  static constexpr int staged_tensors = 2 * words + 1;
  static constexpr int word_steps = run / words;
  __device__ PARSCAN_INLINE bool stage_run(const cursor& c, index_t pos, unsigned char* slot, int tensor_stride) const {
    const int n = count(pos), dir = reverse ? -1 : 1;
    const index_t t = step(pos);
    // c.runs_stage holds for runs at multiples of `run`, where the staged kernels start them.
    if (n != run || !c.runs_stage || pos % run != 0) return false;
    const index_t lo = reverse ? t - (run - 1) : t;
#pragma unroll
    for (int w = 0; w < words; ++w) {
      const index_t tw = t + w * word_steps * dir;
      stage_steps<word_steps>(slot + w * tensor_stride, c.log_a, 1, tw, dir, word_steps);
      stage_steps<word_steps>(slot + (words + w) * tensor_stride, c.log_b, 1, tw, dir, word_steps);
    }
    stage_signs<run>(slot + 2 * words * tensor_stride, c.a_negative, lo);
    stage_signs<run>(slot + 2 * words * tensor_stride + 8, c.b_negative, lo);
    return true;
  }
  /// A staged tensor's run (its words from `slot` on), in processing order.
  __device__ PARSCAN_INLINE void read_staged_run(const unsigned char* slot, int tensor_stride, int dir,
                                                 T (&out)[run]) const {
#pragma unroll
    for (int w = 0; w < words; ++w) {
      T word[word_steps];
      read_staged(slot + w * tensor_stride, dir, word);
#pragma unroll
      for (int v = 0; v < word_steps; ++v) out[w * word_steps + v] = word[v];
    }
  }
  __device__ PARSCAN_INLINE void load_staged(const cursor& c, index_t pos, const unsigned char* slot, int tensor_stride,
                                             bool staged, acc_type (&items)[run]) const {
    if (!staged) return load_run(c, pos, items);
    T ra[run], rb[run];
    const int dir = reverse ? -1 : 1;
    read_staged_run(slot, tensor_stride, dir, ra);
    read_staged_run(slot + words * tensor_stride, tensor_stride, dir, rb);
    const unsigned char* signs = slot + 2 * words * tensor_stride;
    if constexpr (Values) {
      sign na[run], nb[run];
      read_staged_signs(signs, c.a_negative, dir, na);
      read_staged_signs(signs + 8, c.b_negative, dir, nb);
#pragma unroll
      for (int v = 0; v < run; ++v) items[v] = element(ra[v], na[v], rb[v], nb[v]);
    } else {
      std::uint32_t ma[run], mb[run];
      read_staged_sign_masks(signs, c.a_negative, dir, ma);
      read_staged_sign_masks(signs + 8, c.b_negative, dir, mb);
#pragma unroll
      for (int v = 0; v < run; ++v)
        items[v] = acc_type::from_masks(static_cast<float>(ra[v]), ma[v], static_cast<float>(rb[v]), mb[v]);
    }
  }

  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t s) const {
    const float neg_inf = -cuda::std::numeric_limits<float>::infinity();
    if (x0_val()) {
      const signed_log<float> x0 =
          log_x0 ? detail::log_form_of(static_cast<float>(log_x0[s])) : signed_log<float>{neg_inf, false};
      return {acc_type(neg_inf, false, x0.log_mag, x0.neg), true};
    }
    return {acc_type(neg_inf, false, log_x0 ? static_cast<float>(log_x0[s]) : neg_inf,
                     x0_negative != nullptr && x0_negative[s] != 0),
            true};
  }
  __device__ PARSCAN_INLINE void finish(index_t s, const acc_type& total) const {
    if (log_x_final) log_x_final[s] = static_cast<T>(total.log_b);
    if (x_final_negative) x_final_negative[s] = total.neg_b() ? 1 : 0;
  }
};

/// The backward pass, a scan in the opposite direction of the forward one (as
/// recurrence_backward_problem): db[t] = g[t] + a[next]·db[next] with g[t] = G[t]/x[t], element
/// (log|a[next]|, sign, log|g[t]|, sign) and a[next] = 1 on the forward's last step, where G_final
/// is added to G before the division. The carry is zero (a = 0, b = 0). Storing db[t] forms
/// dlog_b[t] = db·b, dlog_a[t] = db·a·x[prev] and, on the forward's first step, dlog_x0 = db·a·x0,
/// each as exp(sum of logs) with the product of the signs (detail/log_recurrence_math.hpp).
/// Value forms: a, b and x0 may hold the values (flags as the forward's); their gradients are
/// then with respect to the values (da = db·x[prev], db, dx0 = db·a), written through the same
/// output pointers. The upstream gradient may be dL/dx (dx_value): g[t] is then dx[t] itself.
/// Values = false is the log form only, as for the forward.
template <class T, bool Values = false>
struct log_recurrence_backward_problem {
  using acc_type = detail::log_affine_bits;
  using sign = std::uint8_t;
  const T* log_a;
  const sign* a_negative;  // null: all positive
  const T* log_b;
  const sign* b_negative;
  const T* log_x;
  const sign* x_negative;
  const T* log_x0;
  const sign* x0_negative;
  const T* dlog_x;
  const T* dlog_x_final;
  T* dlog_a;
  T* dlog_b;
  T* dlog_x0;  // null: not written (no x0)
  sequence_layout la, lb, lx, ldx, lda, ldb;
  index_t length;
  bool forward_reverse;
  bool lane_major;
  bool exclusive = false;
  bool a_value = false, b_value = false, x0_value = false;  // inputs (and so their gradients) in value form
  bool dx_value = false;                                    // dlog_x holds dL/dx
  __device__ PARSCAN_INLINE bool a_val() const { return Values && a_value; }
  __device__ PARSCAN_INLINE bool b_val() const { return Values && b_value; }
  __device__ PARSCAN_INLINE bool x0_val() const { return Values && x0_value; }
  __device__ PARSCAN_INLINE bool dx_val() const { return Values && dx_value; }

  struct cursor {
    const T* log_a;
    const sign* a_negative;
    const T* log_b;
    const sign* b_negative;
    const T* log_x;
    const sign* x_negative;
    const T* dlog_x;
    T* dlog_a;
    T* dlog_b;
    index_t s;
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    const sequence_layout::place q = la.place_of(s);  // one shape for all tensors
    const index_t oa = la.offset_of(q), ob = lb.offset_of(q), ox = lx.offset_of(q);
    return {log_a + oa,
            a_negative ? a_negative + oa : nullptr,
            log_b + ob,
            b_negative ? b_negative + ob : nullptr,
            log_x + ox,
            x_negative ? x_negative + ox : nullptr,
            dlog_x + ldx.offset_of(q),
            dlog_a + lda.offset_of(q),
            dlog_b + ldb.offset_of(q),
            s};
  }
  // The staged warp loop held to 128 registers (four 4-warp blocks an SM instead of three, with
  // 32-40 bytes of spills): float 26.1 -> 28.5% of copy, bfloat16 19.0 -> 21.3% (H200, T = 4096).
  static constexpr int loop_min_blocks = 4;
  static constexpr int run = run_length<T>;
  // Backward position p visits the forward's steps last to first; the forward's next step is
  // t - dir() and its previous step t + dir().
  __device__ PARSCAN_INLINE index_t step(index_t p) const { return forward_reverse ? p : length - 1 - p; }
  __device__ PARSCAN_INLINE int dir() const { return forward_reverse ? 1 : -1; }
  __device__ PARSCAN_INLINE int count(index_t pos) const { return steps_in_run<run>(length, pos); }

  // The element of backward position p from its raw inputs: upstream G, stored x, next gate.
  // la_next / sa_next as stored (converted here for a value-form a). A value-form upstream dL/dx
  // is g[t] itself (G_final/x added on the forward's last step in log form).
  __device__ PARSCAN_INLINE acc_type element(index_t p, index_t s, const T& G, const T& lx_t, sign sx_t,
                                             float la_next, sign sa_next) const {
    signed_log<float> grad;
    if (dx_val()) {
      grad = detail::log_form_of(static_cast<float>(G));
      if (p == 0 && dlog_x_final)
        grad = signed_log_add(grad, detail::log_quotient(detail::log_form_of(static_cast<float>(dlog_x_final[s])),
                                                         static_cast<float>(lx_t), sx_t != 0));
    } else {
      float upstream = static_cast<float>(G);
      if (p == 0 && dlog_x_final) upstream += static_cast<float>(dlog_x_final[s]);
      grad = detail::log_quotient(detail::log_form_of(upstream), static_cast<float>(lx_t), sx_t != 0);
    }
    const signed_log<float> a_next = detail::input_log_form(la_next, sa_next != 0, a_val());
    return p == 0 ? acc_type(0.0f, false, grad.log_mag, grad.neg)
                  : acc_type(a_next.log_mag, a_next.neg, grad.log_mag, grad.neg);
  }

  __device__ PARSCAN_INLINE void load_run(const cursor& c, index_t p, acc_type (&items)[run]) const {
    const int n = count(p), d = dir();
    const index_t t = step(p);
    T rdx[run], rx[run], ra[run];
    sign nx[run] = {}, na[run] = {};
    read_steps(c.dlog_x, ldx.step_stride, t, d, n, rdx);
    read_steps(c.log_x, lx.step_stride, t, d, n, rx);
    if (c.x_negative) read_steps(c.x_negative, lx.step_stride, t, d, n, nx);
    if (p > 0) {
      read_steps(c.log_a, la.step_stride, t - d, d, n, ra);  // the gate of each step's forward successor
      if (c.a_negative) read_steps(c.a_negative, la.step_stride, t - d, d, n, na);
    } else {  // the forward's last step has no successor
      ra[0] = T{};
#pragma unroll
      for (int v = 1; v < run; ++v)
        if (v < n) {
          const index_t k = (t - d + v * d) * la.step_stride;
          ra[v] = c.log_a[k];
          if (c.a_negative) na[v] = c.a_negative[k];
        }
    }
#pragma unroll
    for (int v = 0; v < run; ++v)
      items[v] = v < n ? element(p + v, c.s, rdx[v], rx[v], nx[v], static_cast<float>(ra[v]), na[v]) : acc_type{};
  }

  // Staging through shared memory (the staged kernels): dlog_x, log|x| and log|a| of the run's
  // own steps (16 bytes each) and the signs of x and a (V bytes each) in a fourth slot. The
  // element wants the gate of each step's forward successor, one step off the run and so not
  // alignable; load_staged takes it from the previous lane's last gate by a shuffle (lane 0
  // reads its one gate directly). log|b| and its signs, read only when storing, are prefetched
  // into L2 here. All or nothing per run, as the forward.
  static_assert(run == 4 || run == 8, "sign runs are one 4- or 8-byte cp.async");
  static_assert(sizeof(T) * run == 16, "stage_steps copies 16-byte runs only");
  static constexpr int staged_tensors = 4;
  __device__ PARSCAN_INLINE bool stage_run(const cursor& c, index_t p, unsigned char* slot, int tensor_stride) const {
    const int n = count(p), d = dir();
    const index_t t = step(p);
    if (n != run || ldx.step_stride != 1 || lx.step_stride != 1 || la.step_stride != 1) return false;
    const index_t lo = d < 0 ? t - (run - 1) : t;
    if (!aligned16(c.dlog_x + lo) || !aligned16(c.log_x + lo) || !aligned16(c.log_a + lo) ||
        !sign_run_stageable<run>(c.x_negative, lo) || !sign_run_stageable<run>(c.a_negative, lo))
      return false;
    stage_steps<run>(slot, c.dlog_x, 1, t, d, n);
    stage_steps<run>(slot + tensor_stride, c.log_x, 1, t, d, n);
    stage_steps<run>(slot + 2 * tensor_stride, c.log_a, 1, t, d, n);
    stage_signs<run>(slot + 3 * tensor_stride, c.x_negative, lo);
    stage_signs<run>(slot + 3 * tensor_stride + 8, c.a_negative, lo);
    if (lb.step_stride == 1) {
      prefetch_l2(c.log_b + lo);
      if (c.b_negative) prefetch_l2(c.b_negative + lo);
    }
    return true;
  }
  // Called by every lane of the warp together (the shuffle), staged or not.
  __device__ PARSCAN_INLINE void load_staged(const cursor& c, index_t p, const unsigned char* slot, int tensor_stride,
                                             bool staged, acc_type (&items)[run]) const {
    const int n = count(p), d = dir();
    const index_t t = step(p);
    T rdx[run], rx[run], ra[run] = {};  // ra: the gate of each step itself
    sign nx[run] = {}, na[run] = {};
    float lane0_a = 0.0f;
    sign lane0_na = 0;
    if (lane_id() == 0 && p > 0 && n > 0) {  // issued first: the only load not staged
      const index_t k = (t - d) * la.step_stride;
      lane0_a = static_cast<float>(c.log_a[k]);
      if (c.a_negative) lane0_na = c.a_negative[k];
    }
    if (staged) {
      read_staged(slot, d, rdx);
      read_staged(slot + tensor_stride, d, rx);
      read_staged(slot + 2 * tensor_stride, d, ra);
      read_staged_signs(slot + 3 * tensor_stride, c.x_negative, d, nx);
      read_staged_signs(slot + 3 * tensor_stride + 8, c.a_negative, d, na);
    } else {
      read_steps(c.dlog_x, ldx.step_stride, t, d, n, rdx);
      read_steps(c.log_x, lx.step_stride, t, d, n, rx);
      if (c.x_negative) read_steps(c.x_negative, lx.step_stride, t, d, n, nx);
      read_steps(c.log_a, la.step_stride, t, d, n, ra);
      if (c.a_negative) read_steps(c.a_negative, la.step_stride, t, d, n, na);
    }
    // The successor of this run's first step is the previous lane's last step.
    float prev_a = __shfl_up_sync(0xffffffffu, static_cast<float>(ra[run - 1]), 1);
    sign prev_na = static_cast<sign>(__shfl_up_sync(0xffffffffu, static_cast<unsigned>(na[run - 1]), 1));
    if (lane_id() == 0) prev_a = lane0_a, prev_na = lane0_na;
    items[0] = n > 0 ? element(p, c.s, rdx[0], rx[0], nx[0], prev_a, prev_na) : acc_type{};
#pragma unroll
    for (int v = 1; v < run; ++v)
      items[v] = v < n ? element(p + v, c.s, rdx[v], rx[v], nx[v], static_cast<float>(ra[v - 1]), na[v - 1])
                       : acc_type{};
  }

  __device__ PARSCAN_INLINE acc_type load_at(const cursor& c, index_t p) const {
    const index_t t = step(p), ix = t * lx.step_stride;
    const index_t ia = p == 0 ? 0 : (t - dir()) * la.step_stride;
    return element(p, c.s, c.dlog_x[t * ldx.step_stride], c.log_x[ix], c.x_negative ? c.x_negative[ix] : sign(0),
                   p == 0 ? 0.0f : static_cast<float>(c.log_a[ia]), p > 0 && c.a_negative ? c.a_negative[ia] : sign(0));
  }

  // x0 in log form (zero without x0).
  __device__ PARSCAN_INLINE signed_log<float> x0_log_form(index_t s) const {
    const float neg_inf = -cuda::std::numeric_limits<float>::infinity();
    if (x0_val()) return log_x0 ? detail::log_form_of(static_cast<float>(log_x0[s])) : signed_log<float>{neg_inf, false};
    return {log_x0 ? static_cast<float>(log_x0[s]) : neg_inf, x0_negative != nullptr && x0_negative[s] != 0};
  }

  // Writes the gradients of the step at backward position p from db = v; x_prev is the stored
  // x at the step's forward predecessor (unused on the forward's first step, which uses x0).
  // a and b as stored; b is unused for a value-form b (its gradient is db itself). A
  // value-form input's own factor is left out of its gradient.
  __device__ PARSCAN_INLINE void gradients(index_t p, index_t s, const acc_type& v, const T& la_t, sign sa_t,
                                           const T& lb_t, sign sb_t, const T& lx_prev, sign sx_prev, T& da,
                                           T& db) const {
    const bool first_step = p == length - 1;
    float l_before = static_cast<float>(lx_prev);
    bool n_before = sx_prev != 0;
    if (first_step) {
      const signed_log<float> x0 = x0_log_form(s);
      l_before = x0.log_mag, n_before = x0.neg;
    }
    const signed_log<float> a = detail::input_log_form(static_cast<float>(la_t), sa_t != 0, a_val());
    const float b_l = b_val() ? 0.0f : static_cast<float>(lb_t);
    const bool b_n = !b_val() && sb_t != 0;
    db = static_cast<T>(detail::log_product(v.log_b, b_l, 0.0f, v.neg_b() != b_n));
    const float a_l = a_val() ? 0.0f : a.log_mag;
    const bool a_n = !a_val() && a.neg;
    const float grad_a = detail::log_product(v.log_b, a_l, l_before, v.neg_b() != (a_n != n_before));
    da = static_cast<T>(grad_a);
    if (first_step && dlog_x0) {
      if (!a_val() && !x0_val()) {
        dlog_x0[s] = static_cast<T>(grad_a);  // db·a·x0: the same product
      } else {  // db·a·x0, or db·a for a value-form x0
        const float x0_l = x0_val() ? 0.0f : l_before;
        const bool x0_n = !x0_val() && n_before;
        dlog_x0[s] = static_cast<T>(detail::log_product(v.log_b, a.log_mag, x0_l, v.neg_b() != (a.neg != x0_n)));
      }
    }
  }

  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t p, const acc_type& v) const {
    const index_t t = step(p), ia = t * la.step_stride, ib = t * lb.step_stride;
    const bool first_step = p == length - 1;
    const index_t ip = first_step ? 0 : (t + dir()) * lx.step_stride;
    T da, db;
    gradients(p, c.s, v, c.log_a[ia], c.a_negative ? c.a_negative[ia] : sign(0), c.log_b[ib],
              c.b_negative ? c.b_negative[ib] : sign(0), first_step ? T{} : c.log_x[ip],
              !first_step && c.x_negative ? c.x_negative[ip] : sign(0), da, db);
    c.dlog_b[t * ldb.step_stride] = db;  // dlog_x[t] was read when loading: in place is safe
    c.dlog_a[t * lda.step_stride] = da;
  }

  __device__ PARSCAN_INLINE void store_run(const cursor& c, index_t p, const acc_type (&items)[run]) const {
    const int n = count(p), d = dir();
    const index_t t = step(p);
    const index_t with_pred = length - 1 - p;  // steps of this run whose predecessor is in x
    const int with_x = with_pred >= run ? run : static_cast<int>(with_pred < 0 ? 0 : with_pred);
    const int nx_read = with_x < n ? with_x : n;
    T rx[run] = {}, ra[run], rb[run], rda[run], rdb[run];
    sign sx[run] = {}, sa[run] = {}, sb[run] = {};
    read_steps(c.log_x, lx.step_stride, t + d, d, nx_read, rx);
    if (c.x_negative) read_steps(c.x_negative, lx.step_stride, t + d, d, nx_read, sx);
    read_steps(c.log_a, la.step_stride, t, d, n, ra);
    if (c.a_negative) read_steps(c.a_negative, la.step_stride, t, d, n, sa);
    if (!Values || !b_value) read_steps(c.log_b, lb.step_stride, t, d, n, rb);  // not needed for a value-form b
    if (c.b_negative) read_steps(c.b_negative, lb.step_stride, t, d, n, sb);
#pragma unroll
    for (int v = 0; v < run; ++v) {
      if (v >= n) break;
      gradients(p + v, c.s, items[v], ra[v], sa[v], rb[v], sb[v], rx[v], sx[v], rda[v], rdb[v]);
    }
    write_steps(c.dlog_b, ldb.step_stride, t, d, n, rdb);
    write_steps(c.dlog_a, lda.step_stride, t, d, n, rda);
  }

  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t) const {
    const float neg_inf = -cuda::std::numeric_limits<float>::infinity();
    return {acc_type(neg_inf, false, neg_inf, false), true};  // nothing after the last step
  }
  __device__ PARSCAN_INLINE void finish(index_t s, const acc_type&) const {
    // No steps: x_final is x0 and the gradient passes straight through (dL/dx0 = G_final/x0
    // for a value-form x0).
    if (length == 0 && dlog_x0) {
      const T grad_final = dlog_x_final ? dlog_x_final[s] : T(0.0f);
      if (x0_val()) {
        const signed_log<float> x0 = x0_log_form(s);
        const signed_log<float> q = detail::log_quotient(detail::log_form_of(static_cast<float>(grad_final)), x0.log_mag, x0.neg);
        dlog_x0[s] = static_cast<T>(detail::value_of(q.log_mag, q.neg));
      } else {
        dlog_x0[s] = grad_final;
      }
    }
  }
};

}  // namespace parscan::cuda_detail
