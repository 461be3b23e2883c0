// parscan/cuda/recurrence/recurrence_problems.cuh — the gated recurrence, forward and backward,
// as Problems for the shared scan kernels (block/tile_scan.cuh). The step arithmetic comes
// from detail/recurrence_math.hpp, the same code the host backend runs.
#pragma once

#include <cstdint>

#include "../../detail/recurrence_math.hpp"
#include "../../layout.hpp"
#include "../../ops/affine.hpp"
#include "../block/lane_tile_scan.cuh"
#include "../thread/bulk_copy.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

/// x[t] = a[t]·x[t-1] + b[t]: element (a[t], b[t]); the carry (0, x0) makes every x[t] the
/// .b of an inclusive prefix, and a missing x0 is the exact carry (0, 0).
template <class T>
struct recurrence_forward_problem {
  using C = compute_t<T>;
  using acc_type = affine<C>;
  const T* a;
  const T* b;
  T* x;
  const T* x0;
  T* x_final;
  sequence_layout la, lb, lx;
  index_t length;
  bool reverse, log_gate;
  bool lane_major;  // adjacent sequences are adjacent in memory, steps are not (channel-last)
  static constexpr bool exclusive = false;

  struct cursor {
    const T* a;
    const T* b;
    T* x;
  };
  // The tensors share their shape (detail::as_sequences): one place for all.
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    const sequence_layout::place q = la.place_of(s);
    return {a + la.offset_of(q), b + lb.offset_of(q), x + lx.offset_of(q)};
  }
  static constexpr int run = run_length<T>;
  __device__ PARSCAN_INLINE index_t step(index_t pos) const { return reverse ? length - 1 - pos : pos; }
  __device__ PARSCAN_INLINE int count(index_t pos) const { return steps_in_run<run>(length, pos); }
  __device__ PARSCAN_INLINE void load_run(const cursor& c, index_t pos, acc_type (&items)[run]) const {
    T ra[run], rb[run];
    const int n = count(pos), dir = reverse ? -1 : 1;
    read_steps(c.a, la.step_stride, step(pos), dir, n, ra);
    read_steps(c.b, lb.step_stride, step(pos), dir, n, rb);
#pragma unroll
    for (int v = 0; v < run; ++v)
      items[v] = v < n ? acc_type(detail::load_gate<C>(ra[v], log_gate), static_cast<C>(rb[v])) : acc_type{};
  }
  __device__ PARSCAN_INLINE acc_type load_at(const cursor& c, index_t pos) const {
    const index_t t = step(pos);
    return acc_type(detail::load_gate<C>(c.a[t * la.step_stride], log_gate), static_cast<C>(c.b[t * lb.step_stride]));
  }
  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t pos, const acc_type& v) const {
    c.x[step(pos) * lx.step_stride] = static_cast<T>(v.b);
  }

  // Staging through shared memory (the staged kernels): a and b of a run, 16 bytes each, at
  // slot and slot + tensor_stride. Only both or neither are staged.
  static constexpr int staged_tensors = 2;
  __device__ PARSCAN_INLINE bool stage_run(const cursor& c, index_t pos, unsigned char* slot, int tensor_stride) const {
    const int n = count(pos), dir = reverse ? -1 : 1;
    const index_t t = step(pos);
    if (n != run || la.step_stride != 1 || lb.step_stride != 1) return false;
    const index_t lo = reverse ? t - (run - 1) : t;
    if (!aligned16(c.a + lo) || !aligned16(c.b + lo))
      return false;
    return stage_steps<run>(slot, c.a, 1, t, dir, n) && stage_steps<run>(slot + tensor_stride, c.b, 1, t, dir, n);
  }
  __device__ PARSCAN_INLINE void load_staged(const cursor& c, index_t pos, const unsigned char* slot, int tensor_stride,
                                             bool staged, acc_type (&items)[run]) const {
    if constexpr (sizeof(T) * run == 16) {
      if (staged) {
        T ra[run], rb[run];
        const int dir = reverse ? -1 : 1;
        read_staged(slot, dir, ra);
        read_staged(slot + tensor_stride, dir, rb);
        items_of(ra, rb, items);
        return;
      }
    }
    load_run(c, pos, items);
  }
  __device__ PARSCAN_INLINE void store_run(const cursor& c, index_t pos, const acc_type (&items)[run]) const {
    T rx[run];
#pragma unroll
    for (int v = 0; v < run; ++v) rx[v] = static_cast<T>(items[v].b);
    write_steps(c.x, lx.step_stride, step(pos), reverse ? -1 : 1, count(pos), rx);
  }
  /// The elements of N whole steps from their stored gates and inputs, with one test of the
  /// gate form for all of them (load_gates).
  template <int N>
  __device__ PARSCAN_INLINE void items_of(const T (&ra)[N], const T (&rb)[N], acc_type (&items)[N]) const {
    C gates[N], inputs[N];
    detail::load_gates(ra, log_gate, gates);
    detail::widen(rb, inputs);
#pragma unroll
    for (int v = 0; v < N; ++v) items[v] = acc_type(gates[v], inputs[v]);
  }

  // Bulk tiles (agent/bulk_tiles.cuh): a and b staged whole by the copy engine, x written from
  // each step's prefix; time-contiguous sequences, each starting on a 16-byte boundary.
  using bulk_element = T;
  using bulk_output = T;
  static constexpr int bulk_tensors = 2;
  bool stages_bulk() const {
    return !lane_major && la.step_stride == 1 && lb.step_stride == 1 && lx.step_stride == 1 &&
           bulk_aligned(a, la, sizeof(T)) && bulk_aligned(b, lb, sizeof(T)) && bulk_aligned(x, lx, sizeof(T));
  }
  // One place for all three tensors (as at()): a division each cost ~35 uniform instructions a
  // warp and tile (ncu source counters of the bf16 kernel).
  __device__ PARSCAN_INLINE const T* bulk_in(index_t s, int n) const {
    const sequence_layout::place q = la.place_of(s);
    return n == 0 ? a + la.offset_of(q) : b + lb.offset_of(q);
  }
  __device__ PARSCAN_INLINE T* bulk_out(index_t s) const { return x + lx.offset_of(la.place_of(s)); }
  template <int V>
  __device__ PARSCAN_INLINE void bulk_items(const T (&e)[2][V], acc_type (&items)[V]) const {
    items_of(e[0], e[1], items);
  }
  __device__ PARSCAN_INLINE T bulk_result(const acc_type& v) const { return static_cast<T>(v.b); }

  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t s) const {
    return {acc_type(C(0), x0 ? static_cast<C>(x0[s]) : C(0)), true};
  }
  __device__ PARSCAN_INLINE void finish(index_t s, const acc_type& total) const {
    if (x_final) x_final[s] = static_cast<T>(total.b);
  }
};

/// The backward pass is a scan in the opposite direction of the forward one. With
/// y[t] = a[t]*·db[t], the gradient that step t passes to its forward predecessor,
///   y[t] = a[t]*·(dx[t] + y[next]),  db[t] = dx[t] + y[next],  dx0 = y[first],
/// so the element of step t is (a[t]*, a[t]*·dx[t]), read at step t itself, and the carry is
/// (0, dx_final): the exclusive prefix at step t is y[next]. Every load is then aligned with
/// its step and can be staged; only x[prev], read when storing, is one step off.
template <class T>
struct recurrence_backward_problem {
  using C = compute_t<T>;
  using acc_type = affine<C>;
  const T* a;
  const T* x;
  const T* dx;
  const T* x0;
  const T* dx_final;
  T* da;
  T* db;
  T* dx0;
  sequence_layout la, lx, ldx, lda, ldb;
  index_t length;
  bool forward_reverse, log_gate;
  bool lane_major;
  static constexpr bool exclusive = true;

  struct cursor {
    const T* a;
    const T* x;
    const T* dx;
    T* da;
    T* db;
    index_t s;
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    const sequence_layout::place q = la.place_of(s);  // one shape for all tensors, as the forward's
    return {a + la.offset_of(q),   x + lx.offset_of(q),   dx + ldx.offset_of(q),
            da + lda.offset_of(q), db + ldb.offset_of(q), s};
  }
  static constexpr int run = run_length<T>;
  // Backward position p visits the forward's steps last to first; `dir` is the step change
  // from one backward position to the next, so the forward's previous step is t + dir.
  __device__ PARSCAN_INLINE index_t step(index_t p) const { return forward_reverse ? p : length - 1 - p; }
  __device__ PARSCAN_INLINE int dir() const { return forward_reverse ? 1 : -1; }
  __device__ PARSCAN_INLINE int count(index_t pos) const { return steps_in_run<run>(length, pos); }

  __device__ PARSCAN_INLINE acc_type element_of_gate(const C& gate, const T& grad) const {
    const C g = detail::conj_if_complex(gate);
    return acc_type(g, product(g, static_cast<C>(grad)));
  }
  __device__ PARSCAN_INLINE acc_type element(const T& gate_raw, const T& grad) const {
    return element_of_gate(detail::load_gate<C>(gate_raw, log_gate), grad);
  }
  __device__ PARSCAN_INLINE void load_run(const cursor& c, index_t p, acc_type (&items)[run]) const {
    const int n = count(p), d = dir();
    const index_t t = step(p);
    T ra[run], rdx[run];
    read_steps(c.a, la.step_stride, t, d, n, ra);
    read_steps(c.dx, ldx.step_stride, t, d, n, rdx);
#pragma unroll
    for (int v = 0; v < run; ++v) items[v] = v < n ? element(ra[v], rdx[v]) : acc_type{};
  }
  __device__ PARSCAN_INLINE acc_type load_at(const cursor& c, index_t p) const {
    const index_t t = step(p);
    return element(c.a[t * la.step_stride], c.dx[t * ldx.step_stride]);
  }

  // The 16-bit backward's staged warp loop took 136 registers, three 4-warp blocks per SM; held
  // to 128 (four blocks, no spills) it ran at 55.5 / 57.6% of copy instead of 49.8 / 51.3% at
  // (8, 1536, 4096 / 16384) on an H100. (The bf16 forward, held the same way, lost 1–2 points.)
  static constexpr int loop_min_blocks = sizeof(T) == 2 ? 4 : 0;

  // Lane tiles of 16 steps per thread: with 32 (the forward's best) the channel-last backward,
  // which also reads x[prev] and dx when storing, fell from 29% to 20% of copy (H100).
  static constexpr int lane_steps = 16;

  // Staging through shared memory (the staged kernels): a, dx and x of a run's own steps, and
  // beside them (staged_lane_word) the word of x that holds the step after the run in
  // backward order, the forward predecessor of the run's last step. x[prev] is one step off
  // the run, so it cannot be one aligned copy; staged this way, store_staged writes da and db
  // from shared memory alone. (Read from global memory when storing, x[prev] took four scalar
  // loads a run and a wait on DRAM per chunk: the f32 backward at (8, 1536, 4096) spent 3.5 of
  // its 10.1 cycles an instruction on long scoreboard stalls, ncu on an H100.)
  static constexpr int staged_tensors = 3;
  static constexpr int staged_lane_bytes = sizeof(T) < 4 ? 4 : static_cast<int>(sizeof(T));
  // Whether stage_run stages the word of x after the run at p. A 16-bit step's word also holds
  // the step beyond it, which above the run may lie past the tensor's end: then store_staged
  // reads the step itself. (Below the run the word starts at or after the allocation's start,
  // which is aligned, since the run is.)
  __device__ PARSCAN_INLINE bool staged_x_after(index_t p) const {
    return p + run < length && (sizeof(T) >= 4 || dir() < 0 || p + run + 1 < length);
  }
  __device__ PARSCAN_INLINE bool stage_run(const cursor& c, index_t p, unsigned char* slot, int tensor_stride) const {
    const int n = count(p), d = dir();
    const index_t t = step(p);
    if (n != run || la.step_stride != 1 || ldx.step_stride != 1 || lx.step_stride != 1) return false;
    const index_t lo = d < 0 ? t - (run - 1) : t;
    if (!aligned16(c.a + lo) || !aligned16(c.dx + lo) || !aligned16(c.x + lo)) return false;
    stage_steps<run>(slot, c.a, 1, t, d, n);
    stage_steps<run>(slot + tensor_stride, c.dx, 1, t, d, n);
    stage_steps<run>(slot + 2 * tensor_stride, c.x, 1, t, d, n);
    // The word holding step t + run·d: just below the run's lowest address, or just above it.
    if (staged_x_after(p))
      stage_bytes<staged_lane_bytes>(staged_lane_word<recurrence_backward_problem>(slot, tensor_stride),
                                     reinterpret_cast<const unsigned char*>(c.x + lo) + (d < 0 ? -staged_lane_bytes : 16));
    return true;
  }
  __device__ PARSCAN_INLINE void load_staged(const cursor& c, index_t p, const unsigned char* slot, int tensor_stride,
                                             bool staged, acc_type (&items)[run]) const {
    if constexpr (sizeof(T) * run == 16) {
      if (staged) {
        T ra[run], rdx[run];
        read_staged(slot, dir(), ra);
        read_staged(slot + tensor_stride, dir(), rdx);
        C gates[run];
        detail::load_gates(ra, log_gate, gates);
#pragma unroll
        for (int v = 0; v < run; ++v) items[v] = element_of_gate(gates[v], rdx[v]);
        return;
      }
    }
    load_run(c, p, items);
  }

  // da[t] = db[t]·x[prev]* (x0, or 0, before the first step), times a[t]* for a log gate.
  __device__ PARSCAN_INLINE C gate_gradient(index_t s, index_t p, const C& grad, const T& x_prev,
                                            const T& gate_raw) const {
    return gate_gradient_as(log_gate, s, p, grad, x_prev, gate_raw);
  }
  /// The same with the gate form given (a compile-time constant in the lane packs' loops).
  __device__ PARSCAN_INLINE C gate_gradient_as(bool log_form, index_t s, index_t p, const C& grad, const T& x_prev,
                                               const T& gate_raw) const {
    const bool first_step = p == length - 1;
    const C x_before = !first_step ? static_cast<C>(x_prev) : (x0 ? static_cast<C>(x0[s]) : C(0));
    const C grad_gate = product(grad, detail::conj_if_complex(x_before));
    return log_form ? product(grad_gate, detail::conj_if_complex(detail::load_gate<C>(gate_raw, true))) : grad_gate;
  }

  // A staged run's gradients (p, run as stage_run staged it): dx, x and a from the slot; x[prev]
  // of the run's last step from its staged word (in the word's high half for 16-bit steps
  // below the run). Runs without the forward's first step (all but one a sequence) with linear
  // gates take a loop without the per-step tests of gate_gradient.
  __device__ PARSCAN_INLINE void store_staged(const cursor& c, index_t p, const unsigned char* slot, int tensor_stride,
                                              const acc_type (&items)[run]) const {
    const int d = dir();
    const index_t t = step(p);
    T rdx[run], rx[run], rdb[run], rda[run];
    read_staged(slot + tensor_stride, d, rdx);
    read_staged(slot + 2 * tensor_stride, d, rx);
    T x_after = T{};  // x at the step after the run: the forward predecessor of its last step
    if (staged_x_after(p)) {
      const unsigned char* word = staged_lane_word<recurrence_backward_problem>(slot, tensor_stride);
      memcpy(&x_after, word + (d < 0 ? staged_lane_bytes - static_cast<int>(sizeof(T)) : 0), sizeof(T));
    } else if (p + run < length) {
      x_after = c.x[(t + run * d) * lx.step_stride];
    }
    if (p + run < length && !log_gate) {
#pragma unroll
      for (int v = 0; v < run; ++v) {
        const C grad = static_cast<C>(rdx[v]) + items[v].b;
        rdb[v] = static_cast<T>(grad);
        rda[v] = static_cast<T>(product(grad, detail::conj_if_complex(static_cast<C>(v + 1 < run ? rx[v + 1] : x_after))));
      }
    } else {
      T ra[run] = {};
      if (log_gate) read_staged(slot, d, ra);
#pragma unroll
      for (int v = 0; v < run; ++v) {
        const C grad = static_cast<C>(rdx[v]) + items[v].b;
        rdb[v] = static_cast<T>(grad);
        rda[v] = static_cast<T>(gate_gradient(c.s, p + v, grad, v + 1 < run ? rx[v + 1] : x_after, ra[v]));
      }
    }
    write_steps(c.db, ldb.step_stride, t, d, run, rdb);
    write_steps(c.da, lda.step_stride, t, d, run, rda);
  }

  // v.b is y[next]: the exclusive prefix.
  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t p, const acc_type& v) const {
    const index_t t = step(p);
    const bool first_step = p == length - 1;
    const T x_prev = first_step ? T{} : c.x[(t + dir()) * lx.step_stride];
    const T gate_raw = log_gate ? c.a[t * la.step_stride] : T{};
    const C grad = static_cast<C>(c.dx[t * ldx.step_stride]) + v.b;
    c.db[t * ldb.step_stride] = static_cast<T>(grad);
    c.da[t * lda.step_stride] = static_cast<T>(gate_gradient(c.s, p, grad, x_prev, gate_raw));
  }

  __device__ PARSCAN_INLINE void store_run(const cursor& c, index_t p, const acc_type (&items)[run]) const {
    const int n = count(p), d = dir();
    const index_t t = step(p);
    const index_t with_pred = length - 1 - p;  // steps of this run whose predecessor is in x
    const int with_x = with_pred >= run ? run : static_cast<int>(with_pred < 0 ? 0 : with_pred);
    T rx[run], ra[run], rdx[run], rdb[run], rda[run];
    read_steps(c.x, lx.step_stride, t + d, d, with_x < n ? with_x : n, rx);
    read_steps(c.dx, ldx.step_stride, t, d, n, rdx);  // read again: db may be written over dx
    if (log_gate) read_steps(c.a, la.step_stride, t, d, n, ra);
#pragma unroll
    for (int v = 0; v < run; ++v) {
      if (v >= n) break;
      const C grad = static_cast<C>(rdx[v]) + items[v].b;
      rdb[v] = static_cast<T>(grad);
      rda[v] = static_cast<T>(gate_gradient(c.s, p + v, grad, rx[v], ra[v]));
    }
    write_steps(c.db, ldb.step_stride, t, d, n, rdb);
    write_steps(c.da, lda.step_stride, t, d, n, rda);
  }
  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t s) const {
    return {acc_type(C(0), dx_final ? static_cast<C>(dx_final[s]) : C(0)), true};
  }
  /// total.b = y[first] = dx0 (with no steps, the carry: dx_final passes straight through).
  __device__ PARSCAN_INLINE void finish(index_t s, const acc_type& total) const {
    if (dx0) dx0[s] = static_cast<T>(total.b);
  }
};

}  // namespace parscan::cuda_detail
