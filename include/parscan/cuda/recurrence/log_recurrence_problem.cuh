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
#include "../agent/staging_ring.cuh"
#include "../block/lane_tile_scan.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

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

/// Each byte's high bit of `bytes`, set where the byte is nonzero (its low seven bits carry
/// into it): four sign bytes tested at once.
__device__ PARSCAN_INLINE std::uint32_t nonzero_bytes(std::uint32_t bytes) {
  return (((bytes & 0x7f7f7f7fu) + 0x7f7f7f7fu) | bytes) & 0x80808080u;
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
    const std::uint32_t nonzero = nonzero_bytes(signs ? reinterpret_cast<const std::uint32_t*>(slot)[w] : 0u);
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

/// Step v, in processing order (dir as read_staged's), of a run of 16 bytes of T staged as `w`
/// (lowest address first). Taken a step at a time where a run's values are used, so that a
/// lane holds the run's 16-byte words rather than every step converted (the log-space backward
/// spilled with its runs held as arrays).
template <class T>
__device__ PARSCAN_INLINE float staged_step(const uint4& w, int v, int dir) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  const std::uint32_t r[4] = {w.x, w.y, w.z, w.w};
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(dir > 0 ? r[v] : r[V - 1 - v]);
  } else {
    static_assert(sizeof(T) == 2, "16-bit or 32-bit steps");
    const int f = v, b = V - 1 - v;  // the step's element forward and backward
    const std::uint32_t half = dir > 0 ? r[f / 2] >> (16 * (f % 2)) : r[b / 2] >> (16 * (b % 2));
    const auto bits = static_cast<std::uint16_t>(half);
    T x;
    memcpy(&x, &bits, sizeof(T));
    return static_cast<float>(x);
  }
}

/// The sign mask (log_affine_bits') of step v of a run of V sign bytes staged as `word`
/// (V / 4 words), in processing order; 0 throughout where the tensor is absent (null).
template <int V>
struct staged_signs {
  std::uint32_t nonzero[V / 4];  // each byte's high bit, set where the byte is nonzero
  __device__ PARSCAN_INLINE staged_signs(const unsigned char* slot, const std::uint8_t* signs) {
#pragma unroll
    for (int w = 0; w < V / 4; ++w)
      nonzero[w] = nonzero_bytes(signs ? reinterpret_cast<const std::uint32_t*>(slot)[w] : 0u);
  }
  __device__ PARSCAN_INLINE std::uint32_t mask(int v, int dir) const {
    const int f = v, b = V - 1 - v;
    const std::uint32_t mf = nonzero[f / 4] << (24 - 8 * (f % 4)), mb = nonzero[b / 4] << (24 - 8 * (b % 4));
    return (dir > 0 ? mf : mb) & detail::float_sign_bit;
  }
};

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
    bool runs_stage;  // whether this sequence's whole runs stage dlog_x, log|x|, log|a| and their signs
    bool b_stages;    // and log|b| with its signs too (a log-form b, read when storing)
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    const sequence_layout::place q = la.place_of(s);  // one shape for all tensors
    const index_t oa = la.offset_of(q), ob = lb.offset_of(q), ox = lx.offset_of(q);
    cursor c{log_a + oa,
             a_negative ? a_negative + oa : nullptr,
             log_b + ob,
             b_negative ? b_negative + ob : nullptr,
             log_x + ox,
             x_negative ? x_negative + ox : nullptr,
             dlog_x + ldx.offset_of(q),
             dlog_a + lda.offset_of(q),
             dlog_b + ldb.offset_of(q),
             s,
             false,
             false};
    // Whole runs start a multiple of 16 bytes (of magnitudes) and of V bytes (of signs) apart,
    // so the run at position 0 decides for all of them, once a sequence (as the forward's).
    const index_t lo = forward_reverse ? 0 : length - run;  // its lowest step (any sign: only addresses)
    const auto at_lo = [&](const void* p, index_t bytes) { return reinterpret_cast<std::uintptr_t>(p) + lo * bytes; };
    const auto signs_at_lo = [&](const sign* p) { return p == nullptr || at_lo(p, 1) % run == 0; };
    c.runs_stage = ldx.step_stride == 1 && lx.step_stride == 1 && la.step_stride == 1 &&
                   at_lo(c.dlog_x, sizeof(T)) % 16 == 0 && at_lo(c.log_x, sizeof(T)) % 16 == 0 &&
                   at_lo(c.log_a, sizeof(T)) % 16 == 0 && signs_at_lo(c.x_negative) && signs_at_lo(c.a_negative);
    c.b_stages = c.runs_stage && !b_val() && lb.step_stride == 1 && at_lo(c.log_b, sizeof(T)) % 16 == 0 &&
                 signs_at_lo(c.b_negative);
    return c;
  }
  // Registers and tiles of the staged warp loop. With its runs held as arrays and two runs a
  // lane a tile, the float kernel held 128 registers only by spilling the cursor's pointers,
  // and waited on the spills (ncu on an H200: long scoreboard a third of its stalls); with one
  // run of 4 steps a lane a tile it needs 115 without spills, and held to five 4-warp blocks an
  // SM (96 registers, 40 bytes of spills) it ran at 48.3% of copy against 31.7% with two runs
  // (8 × 1536 × 4096, H200; docs/performance.md, "The log-space backward's store from the
  // ring"). bfloat16's runs are 8 steps, one a tile already, at four blocks an SM as before.
  static constexpr int loop_min_blocks = sizeof(T) == 4 ? 5 : 4;
  static constexpr int per_lane = run_length<T>;
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

  // Staging through shared memory (the staged kernels): dlog_x, log|x|, log|a| and log|b| of the
  // run's own steps (16 bytes each; log|b| where c.b_stages), the signs of x and a (V bytes each)
  // in a fourth slot, and beside them (staged_lane_word, 16 bytes a lane) the 4-byte words of
  // log|x| and of its signs that hold x one step past the run, and b's signs (from byte 8).
  // The element wants the gate of each step's forward successor, one step off the run and so
  // not alignable; load_staged takes it from the previous lane's last gate by a shuffle (lane 0
  // reads its one gate directly). The store wants x at each step's forward predecessor: the
  // next step's staged x, and for the run's last step the word past the run. So store_staged
  // reads nothing from global memory where b and those words stage (all but a sequence's last
  // runs): read there when storing, x[prev] was four scalar loads a run (and their 64-bit
  // addresses), with a, b and their signs in more loads.
  // All or nothing per run, as the forward.
  static_assert(run == 4 || run == 8, "sign runs are one 4- or 8-byte cp.async");
  static_assert(sizeof(T) * run == 16, "stage_steps copies 16-byte runs only");
  static constexpr int staged_tensors = 5;
  static constexpr int staged_lane_bytes = 16;
  // Whether stage_run stages the words that hold x one step past the run at p (in backward
  // order: the forward predecessor of the run's last step). Their 4-byte sign word reaches
  // three bytes beyond that step, either side of the run, so it must lie within the sequence.
  __device__ PARSCAN_INLINE bool staged_x_after(index_t p) const { return p + run + 4 <= length; }
  __device__ PARSCAN_INLINE bool stage_run(const cursor& c, index_t p, unsigned char* slot, int tensor_stride) const {
    // c.runs_stage holds for runs at multiples of `run`, where the staged kernels start them.
    if (count(p) != run || !c.runs_stage || p % run != 0) return false;
    const int d = dir();
    const index_t t = step(p), lo = d < 0 ? t - (run - 1) : t;
    stage_word(slot, c.dlog_x + lo);
    stage_word(slot + tensor_stride, c.log_x + lo);
    stage_word(slot + 2 * tensor_stride, c.log_a + lo);
    stage_signs<run>(slot + 3 * tensor_stride, c.x_negative, lo);
    stage_signs<run>(slot + 3 * tensor_stride + 8, c.a_negative, lo);
    unsigned char* lane_word = staged_lane_word<log_recurrence_backward_problem>(slot, tensor_stride);
    if (c.b_stages) {
      stage_word(slot + 4 * tensor_stride, c.log_b + lo);
      stage_signs<run>(lane_word + 8, c.b_negative, lo);
    }
    if (staged_x_after(p)) {  // the words just below the run's lowest address, or just above it
      const auto* x_bytes = reinterpret_cast<const unsigned char*>(c.log_x + lo);
      stage_bytes<4>(lane_word, d < 0 ? x_bytes - 4 : x_bytes + 16);
      if (c.x_negative) stage_bytes<4>(lane_word + 4, d < 0 ? c.x_negative + lo - 4 : c.x_negative + lo + run);
    }
    return true;
  }
  // The element of a step in log form with its signs as masks (every run but the forward's
  // last, staged or not): g = G / x with G = dlog_x, and the gate of the step's forward
  // successor. As element() and log_quotient, except that a zero or NaN may carry either sign
  // (log_affine_bits allows it inside the scan).
  __device__ PARSCAN_INLINE acc_type element_from_masks(const T& G, const T& lx_t, std::uint32_t mx_t, float la_next,
                                                        std::uint32_t ma_next) const {
    const float g = static_cast<float>(G), lx = static_cast<float>(lx_t);
    // log|g| = ln 2 · log2|g| from the special-function unit (two instructions; logf takes
    // about twenty): an absolute error below 2^-22, the scan's own per add (docs/numerics.md).
    // Not ftz: a subnormal upstream gradient keeps its log. log 0 = -inf, inf and NaN pass.
    float lg;
    asm("lg2.approx.f32 %0, %1;" : "=f"(lg) : "f"(cuda::std::fabs(g)));
    lg *= 0.69314718055994530942f;
    // A zero upstream gradient contributes nothing, even where x is 0 (log -inf - -inf is NaN).
    const float q = lg == -cuda::std::numeric_limits<float>::infinity() && lx == lx ? lg : lg - lx;
    return acc_type::from_masks(la_next, ma_next, q, (__float_as_uint(g) & detail::float_sign_bit) ^ mx_t);
  }
  // Called by every lane of the warp together (the shuffle), staged or not.
  __device__ PARSCAN_INLINE void load_staged(const cursor& c, index_t p, const unsigned char* slot, int tensor_stride,
                                             bool staged, acc_type (&items)[run]) const {
    const int n = count(p), d = dir();
    const index_t t = step(p);
    T rdx[run], rx[run], ra[run] = {};  // ra: the gate of each step itself
    std::uint32_t mx[run] = {}, ma[run] = {};
    float lane0_a = 0.0f;
    std::uint32_t lane0_ma = 0;
    if (lane_id() == 0 && p > 0 && n > 0) {  // issued first: the only load not staged
      const index_t k = (t - d) * la.step_stride;
      lane0_a = static_cast<float>(c.log_a[k]);
      if (c.a_negative && c.a_negative[k] != 0) lane0_ma = detail::float_sign_bit;
    }
    if (staged) {
      read_staged(slot, d, rdx);
      read_staged(slot + tensor_stride, d, rx);
      read_staged(slot + 2 * tensor_stride, d, ra);
      read_staged_sign_masks(slot + 3 * tensor_stride, c.x_negative, d, mx);
      read_staged_sign_masks(slot + 3 * tensor_stride + 8, c.a_negative, d, ma);
    } else {
      sign nx[run] = {}, na[run] = {};
      read_steps(c.dlog_x, ldx.step_stride, t, d, n, rdx);
      read_steps(c.log_x, lx.step_stride, t, d, n, rx);
      if (c.x_negative) read_steps(c.x_negative, lx.step_stride, t, d, n, nx);
      read_steps(c.log_a, la.step_stride, t, d, n, ra);
      if (c.a_negative) read_steps(c.a_negative, la.step_stride, t, d, n, na);
#pragma unroll
      for (int v = 0; v < run; ++v) {
        mx[v] = nx[v] != 0 ? detail::float_sign_bit : 0u;
        ma[v] = na[v] != 0 ? detail::float_sign_bit : 0u;
      }
    }
    // The successor of this run's first step is the previous lane's last step.
    float prev_a = __shfl_up_sync(0xffffffffu, static_cast<float>(ra[run - 1]), 1);
    std::uint32_t prev_ma = __shfl_up_sync(0xffffffffu, ma[run - 1], 1);
    if (lane_id() == 0) prev_a = lane0_a, prev_ma = lane0_ma;
    if constexpr (!Values) {
      if (p > 0) {  // the forward's last step (p = 0) adds G_final and has no successor: element()
#pragma unroll
        for (int v = 0; v < run; ++v)
          items[v] = v < n ? element_from_masks(rdx[v], rx[v], mx[v],
                                                v == 0 ? prev_a : static_cast<float>(ra[(v + run - 1) % run]),
                                                v == 0 ? prev_ma : ma[(v + run - 1) % run])
                           : acc_type{};
        return;
      }
    }
    const auto byte_of = [](std::uint32_t mask) { return static_cast<sign>(mask != 0); };
    items[0] = n > 0 ? element(p, c.s, rdx[0], rx[0], byte_of(mx[0]), prev_a, byte_of(prev_ma)) : acc_type{};
#pragma unroll
    for (int v = 1; v < run; ++v)
      items[v] = v < n ? element(p + v, c.s, rdx[v], rx[v], byte_of(mx[v]), static_cast<float>(ra[v - 1]),
                                 byte_of(ma[v - 1]))
                       : acc_type{};
  }

  // A staged run's gradients from the slot alone (where stage_run staged the words past the run
  // and b): log|x| of the forward predecessors (the next step's, and for the last step the
  // word past the run), log|a| and log|b| with their signs. Runs without the forward's first
  // step (all but one a sequence) in log form take a loop without gradients()' per-step tests.
  __device__ PARSCAN_INLINE void store_staged(const cursor& c, index_t p, const unsigned char* slot, int tensor_stride,
                                              const acc_type (&items)[run]) const {
    const int d = dir();
    const index_t t = step(p);
    const uint4 wx = *reinterpret_cast<const uint4*>(slot + tensor_stride);
    const uint4 wa = *reinterpret_cast<const uint4*>(slot + 2 * tensor_stride);
    const staged_signs<run> sx(slot + 3 * tensor_stride, c.x_negative), sa(slot + 3 * tensor_stride + 8, c.a_negative);
    const unsigned char* lane_word = staged_lane_word<log_recurrence_backward_problem>(slot, tensor_stride);
    uint4 wb = {};
    staged_signs<run> sb(lane_word + 8, c.b_stages ? c.b_negative : nullptr);  // unstaged: set below
    if (c.b_stages) {
      wb = *reinterpret_cast<const uint4*>(slot + 4 * tensor_stride);
    } else if (!b_val()) {  // read here, and kept as staged words (signs as their bytes)
      T rb[run];
      sign nb[run] = {};
      read_steps(c.log_b, lb.step_stride, t, d, run, rb);
      if (c.b_negative) read_steps(c.b_negative, lb.step_stride, t, d, run, nb);
      T low_first[run];  // as staged: lowest address first
      sign nb_low_first[run];
#pragma unroll
      for (int v = 0; v < run; ++v) {
        low_first[v] = d > 0 ? rb[v] : rb[run - 1 - v];
        nb_low_first[v] = d > 0 ? nb[v] : nb[run - 1 - v];
      }
      memcpy(&wb, low_first, 16);
      std::uint32_t bytes[run / 4];
      memcpy(bytes, nb_low_first, run);
#pragma unroll
      for (int w = 0; w < run / 4; ++w) sb.nonzero[w] = nonzero_bytes(bytes[w]);
    }
    // x at the step past the run: the forward predecessor of its last step (none past the
    // forward's first step).
    float lx_after = 0.0f;
    std::uint32_t mx_after = 0;
    if (staged_x_after(p)) {
      T word[4 / sizeof(T)];
      memcpy(word, lane_word, 4);
      lx_after = static_cast<float>(word[d < 0 ? 4 / sizeof(T) - 1 : 0]);
      const std::uint32_t signs = c.x_negative ? *reinterpret_cast<const std::uint32_t*>(lane_word + 4) : 0u;
      mx_after = (d < 0 ? signs >> 24 : signs & 0xffu) != 0 ? detail::float_sign_bit : 0u;
    } else if (p + run < length) {
      const index_t k = (t + run * d) * lx.step_stride;
      lx_after = static_cast<float>(c.log_x[k]);
      if (c.x_negative && c.x_negative[k] != 0) mx_after = detail::float_sign_bit;
    }
    T rda[run], rdb[run];
    if (!Values && p + run < length) {
#pragma unroll
      for (int v = 0; v < run; ++v) {
        // db·b and db·a·x[prev]; a zero or NaN db gives +0 or NaN whatever its sign mask.
        const float lv = items[v].log_b;
        const float lx_prev = v + 1 < run ? staged_step<T>(wx, v + 1, d) : lx_after;
        const std::uint32_t mx_prev = v + 1 < run ? sx.mask(v + 1, d) : mx_after;
        rdb[v] = static_cast<T>(
            detail::log_product_bits(lv, staged_step<T>(wb, v, d), 0.0f, items[v].sign_b ^ sb.mask(v, d), true));
        rda[v] = static_cast<T>(detail::log_product_bits(lv, staged_step<T>(wa, v, d), lx_prev,
                                                         items[v].sign_b ^ sa.mask(v, d) ^ mx_prev, true));
      }
    } else {
      const auto byte_of = [](std::uint32_t mask) { return static_cast<sign>(mask != 0); };
#pragma unroll
      for (int v = 0; v < run; ++v) {
        const bool last = v + 1 == run;
        gradients(p + v, c.s, items[v], static_cast<T>(staged_step<T>(wa, v, d)), byte_of(sa.mask(v, d)),
                  static_cast<T>(staged_step<T>(wb, v, d)), byte_of(sb.mask(v, d)),
                  static_cast<T>(last ? lx_after : staged_step<T>(wx, (v + 1) % run, d)),
                  byte_of(last ? mx_after : sx.mask((v + 1) % run, d)), rda[v], rdb[v]);
      }
    }
    write_steps(c.dlog_b, ldb.step_stride, t, d, run, rdb);
    write_steps(c.dlog_a, lda.step_stride, t, d, run, rda);
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
    db = static_cast<T>(detail::gradient_product(v.log_b, b_l, 0.0f, v.neg_b() != b_n));
    const float a_l = a_val() ? 0.0f : a.log_mag;
    const bool a_n = !a_val() && a.neg;
    const float grad_a = detail::gradient_product(v.log_b, a_l, l_before, v.neg_b() != (a_n != n_before));
    da = static_cast<T>(grad_a);
    if (first_step && dlog_x0) {
      if (!a_val() && !x0_val()) {
        dlog_x0[s] = static_cast<T>(grad_a);  // db·a·x0: the same product
      } else {  // db·a·x0, or db·a for a value-form x0
        const float x0_l = x0_val() ? 0.0f : l_before;
        const bool x0_n = !x0_val() && n_before;
        dlog_x0[s] = static_cast<T>(detail::gradient_product(v.log_b, a.log_mag, x0_l, v.neg_b() != (a.neg != x0_n)));
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
