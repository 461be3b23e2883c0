// parscan/cuda/recurrence/recurrence_lane_packs.cuh — lane tiles whose lanes own K adjacent
// channels each, for the gated recurrence on lane-major (channel-last) layouts.
//
// A lane tile gives each lane one sequence, so a warp load of a 2-byte type reads only 64
// bytes (the bf16 channel-last forward and backward ran at 12% of copy on an H100). Here a
// lane owns K adjacent sequences and reads their step t with one K·sizeof(T)-byte access: a
// warp load covers 32·K adjacent channels. The accumulator is K affine pairs side by side and
// the operator acts on each of them on its own (thread/lane_packs.cuh), so the staged lane
// tiles and their look-back (agent/staged_lane_tiles.cuh, tile_state.cuh) run unchanged over
// sequences/K "sequences".
// The other dtypes use the same Problems with K = 1: one channel per lane, staged the same way.
//
// Only for layouts whose K-channel groups are whole and aligned (lane_packs_fit); the caller
// falls back to one channel per lane without staging (agent/lane_tiles.cuh) otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../layout.hpp"
#include "../runtime.cuh"
#include "../device/dispatch_scan.cuh"
#include "../thread/lane_packs.cuh"
#include "recurrence_problems.cuh"

namespace parscan::cuda_detail {

/// Channels a lane owns: enough for a 4-byte access with the 2-byte types. (Wider types keep
/// one channel: the f32 forward already reached 50–55% of copy with 4-byte lane loads.)
template <class T>
constexpr int channels_per_lane = sizeof(T) < 4 ? static_cast<int>(4 / sizeof(T)) : 1;

/// What the lane packs of a one-channel Problem share (the gated recurrence's forward and
/// backward here, the log-space forward in log_recurrence_lane_packs.cuh): pack q's cursor
/// (that of its first channel), and the carries and totals of its K channels, each its own.
template <class Base, int K>
struct lane_pack_problem {
  using base_type = Base;
  using acc_type = lane_pack<typename Base::acc_type, K>;
  using cursor = typename Base::cursor;
  Base base;
  index_t length;

  PARSCAN_HD explicit lane_pack_problem(const Base& b) : base(b), length(b.length) {}

  __device__ PARSCAN_INLINE cursor at(index_t q) const { return base.at(q * K); }
  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t q) const {
    acc_type r;
#pragma unroll
    for (int j = 0; j < K; ++j) r.v[j] = base.initial(q * K + j).value;  // always present
    return {r, true};
  }
  __device__ PARSCAN_INLINE void finish(index_t q, const acc_type& total) const {
#pragma unroll
    for (int j = 0; j < K; ++j) base.finish(q * K + j, total.v[j]);
  }
};

/// Step i of a forward lane cursor's two inputs (c.a and c.b, element strides c.da and c.db),
/// staged at slot and slot + tensor_stride; read_lane_inputs reads them back. The gated and the
/// log-space forwards' lane packs stage the same way.
template <int Bytes, class Cursor>
__device__ PARSCAN_INLINE void stage_lane_inputs(const Cursor& c, int i, unsigned char* slot, int tensor_stride) {
  stage_bytes<Bytes>(slot, c.a + i * c.da);
  stage_bytes<Bytes>(slot + tensor_stride, c.b + i * c.db);
}
template <class T, int K>
__device__ PARSCAN_INLINE void read_lane_inputs(const unsigned char* slot, int tensor_stride, T (&a)[K], T (&b)[K]) {
  read_staged_bytes(slot, 1, a);
  read_staged_bytes(slot + tensor_stride, 1, b);
}

/// The gate form of a lane-pack Problem: read from the call (run_time_gates), or fixed at
/// compile time, linear or log. The staged lane tiles' loops run on a copy with the form fixed
/// (specialized(), agent/staged_lane_tiles.cuh's with_specialized), so that a linear gate's
/// loops carry no exp at all. On an H100 the 16-bit channel-last backward ran 8–10 points of
/// copy faster so (its gate gradient's log-form product was likely being computed for linear
/// gates too), f32 2 points; the forwards did not move (docs/performance.md).
constexpr int run_time_gates = -1, linear_gates = 0, log_gates = 1;

/// What the forward and backward packs share on top of lane_pack_problem: the gate form and
/// the copies with it fixed. complex<float> keeps the form read at run time: its copies measured
/// 2–3 points of copy slower in the channel-last backward (H100), where the 16-bit types gained
/// 8–10 (docs/performance.md).
template <template <class, int, int> class Lanes, class T, int K, int Form>
struct lane_pack_gates {
  static constexpr bool specializes = Form == run_time_gates && !std::is_same_v<T, complex<float>>;
  /// Calls f with a copy of `self` whose gate form is a compile-time constant.
  template <class Self, class F>
  __device__ PARSCAN_INLINE static void specialize(const Self& self, F&& f) {
    if (self.base.log_gate) f(Lanes<T, K, log_gates>(self.base));
    else f(Lanes<T, K, linear_gates>(self.base));
  }
  template <class Base>
  __device__ PARSCAN_INLINE static bool log_form(const Base& base) {
    if constexpr (Form == run_time_gates) return base.log_gate;
    else return Form == log_gates;
  }
};

/// The forward Problem (recurrence_problems.cuh) over packs of K channels: pack q is
/// sequences K·q … K·q+K-1. Lane tiles only.
template <class T, int K, int Form>
struct recurrence_forward_lanes_of : lane_pack_problem<recurrence_forward_problem<T>, K>,
                                     lane_pack_gates<recurrence_forward_lanes_of, T, K, Form> {
  using common = lane_pack_problem<recurrence_forward_problem<T>, K>;
  using gates = lane_pack_gates<recurrence_forward_lanes_of, T, K, Form>;
  using typename common::acc_type;
  using C = typename common::base_type::C;
  using typename common::cursor;
  using common::base;
  static constexpr bool exclusive = false;

  using common::common;

  template <class F>
  __device__ PARSCAN_INLINE void specialized(F&& f) const {
    gates::specialize(*this, f);
  }

  __device__ PARSCAN_INLINE acc_type load_at(const cursor& c, index_t pos) const {
    const index_t t = base.step(pos);
    T ra[K], rb[K];
    read_channels(c.a + t * base.la.step_stride, ra);
    read_channels(c.b + t * base.lb.step_stride, rb);
    acc_type r;
#pragma unroll
    for (int j = 0; j < K; ++j) r.v[j] = affine<C>(detail::load_gate<C>(ra[j], base.log_gate), static_cast<C>(rb[j]));
    return r;
  }
  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t pos, const acc_type& v) const {
    T rx[K];
#pragma unroll
    for (int j = 0; j < K; ++j) rx[j] = static_cast<T>(v.v[j].b);
    write_channels(c.x + base.step(pos) * base.lx.step_stride, rx);
  }

  // Staged lane tiles (agent/staged_lane_tiles.cuh): a and b of a step. The lane cursor points
  // at a thread's first step of a tile, with each tensor's element stride from step to step in
  // processing order, so a step's address is one add.
  static constexpr int staged_lane_tensors = 2;
  static constexpr int staged_lane_bytes = K * static_cast<int>(sizeof(T));
  bool stages_lanes() const { return true; }  // the packs fit: every word is aligned to its size
  struct lane_cursor {
    const T* a;
    const T* b;
    T* x;
    index_t da, db, dx;
  };
  __device__ PARSCAN_INLINE lane_cursor lane_at(index_t q, index_t first) const {
    const cursor c = this->at(q);
    const index_t t = base.step(first), dir = base.reverse ? -1 : 1;
    const index_t sa = base.la.step_stride, sb = base.lb.step_stride, sx = base.lx.step_stride;
    return {c.a + t * sa, c.b + t * sb, c.x + t * sx, dir * sa, dir * sb, dir * sx};
  }
  __device__ PARSCAN_INLINE void stage_lane_step(const lane_cursor& c, int i, unsigned char* slot,
                                                 int tensor_stride) const {
    stage_lane_inputs<staged_lane_bytes>(c, i, slot, tensor_stride);
  }
  __device__ PARSCAN_INLINE acc_type staged_element(const unsigned char* slot, int tensor_stride) const {
    T ra[K], rb[K];
    read_lane_inputs(slot, tensor_stride, ra, rb);
    C g[K];
    detail::load_gates(ra, gates::log_form(base), g);
    acc_type r;
#pragma unroll
    for (int j = 0; j < K; ++j) r.v[j] = affine<C>(g[j], static_cast<C>(rb[j]));
    return r;
  }
  __device__ PARSCAN_INLINE void store_staged(const lane_cursor& c, int i, const unsigned char*, int,
                                              const acc_type& v) const {
    T rx[K];
#pragma unroll
    for (int j = 0; j < K; ++j) rx[j] = static_cast<T>(v.v[j].b);
    write_channels(c.x + i * c.dx, rx);
  }
};

/// The gate form read from the call: what the dispatch builds.
template <class T, int K>
using recurrence_forward_lanes = recurrence_forward_lanes_of<T, K, run_time_gates>;

/// The backward Problem over packs of K channels, as recurrence_forward_lanes does the forward.
template <class T, int K, int Form>
struct recurrence_backward_lanes_of : lane_pack_problem<recurrence_backward_problem<T>, K>,
                                      lane_pack_gates<recurrence_backward_lanes_of, T, K, Form> {
  using common = lane_pack_problem<recurrence_backward_problem<T>, K>;
  using gates = lane_pack_gates<recurrence_backward_lanes_of, T, K, Form>;
  using typename common::acc_type;
  using C = typename common::base_type::C;
  using typename common::cursor;
  using common::base;
  using common::length;
  static constexpr bool exclusive = true;

  using common::common;

  template <class F>
  __device__ PARSCAN_INLINE void specialized(F&& f) const {
    gates::specialize(*this, f);
  }

  __device__ PARSCAN_INLINE acc_type load_at(const cursor& c, index_t p) const {
    const index_t t = base.step(p);
    T ra[K], rdx[K];
    read_channels(c.a + t * base.la.step_stride, ra);
    read_channels(c.dx + t * base.ldx.step_stride, rdx);
    acc_type r;
#pragma unroll
    for (int j = 0; j < K; ++j) r.v[j] = base.element(ra[j], rdx[j]);
    return r;
  }
  // v.v[j].b is y[next] of channel j: see recurrence_backward_problem::store_at.
  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t p, const acc_type& v) const {
    const index_t t = base.step(p);
    const bool first_step = p == length - 1;
    T rx[K], ra[K], rdx[K], rdb[K], rda[K];
#pragma unroll
    for (int j = 0; j < K; ++j) rx[j] = ra[j] = T{};
    if (!first_step) read_channels(c.x + (t + base.dir()) * base.lx.step_stride, rx);
    if (base.log_gate) read_channels(c.a + t * base.la.step_stride, ra);
    read_channels(c.dx + t * base.ldx.step_stride, rdx);  // read again: db or da may be written over dx
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const C grad = static_cast<C>(rdx[j]) + v.v[j].b;
      rdb[j] = static_cast<T>(grad);
      rda[j] = static_cast<T>(base.gate_gradient(c.s + j, p, grad, rx[j], ra[j]));
    }
    write_channels(c.db + t * base.ldb.step_stride, rdb);
    write_channels(c.da + t * base.lda.step_stride, rda);
  }

  // Staged lane tiles (agent/staged_lane_tiles.cuh): a, dx and x[prev] of a step (x[prev] only
  // where the step has a predecessor). Staged before anything of the tile is written, so db or
  // da written over dx is safe. The lane cursor is the forward's: pointers at a thread's first
  // step and element strides in processing order.
  static constexpr int staged_lane_tensors = 3;
  static constexpr int staged_lane_bytes = K * static_cast<int>(sizeof(T));
  bool stages_lanes() const { return true; }  // the packs fit: every word is aligned to its size
  struct lane_cursor {
    const T* a;
    const T* dx;
    const T* x;  // x at the first step; x[prev] of step i is at x + i·d_x + x_prev
    T* da;
    T* db;
    index_t d_a, d_dx, d_x, d_da, d_db, x_prev;
    index_t s, first;  // the pack's first channel and the first step's position
  };
  __device__ PARSCAN_INLINE lane_cursor lane_at(index_t q, index_t first) const {
    const cursor c = this->at(q);
    const index_t t = base.step(first), d = base.dir();
    const index_t sa = base.la.step_stride, sdx = base.ldx.step_stride, sx = base.lx.step_stride;
    const index_t sda = base.lda.step_stride, sdb = base.ldb.step_stride;
    return {c.a + t * sa, c.dx + t * sdx, c.x + t * sx, c.da + t * sda, c.db + t * sdb, d * sa, d * sdx, d * sx, d * sda,
            d * sdb, d * sx, c.s, first};
  }
  __device__ PARSCAN_INLINE void stage_lane_step(const lane_cursor& c, int i, unsigned char* slot,
                                                 int tensor_stride) const {
    stage_bytes<staged_lane_bytes>(slot, c.a + i * c.d_a);
    stage_bytes<staged_lane_bytes>(slot + tensor_stride, c.dx + i * c.d_dx);
    if (c.first + i != length - 1) stage_bytes<staged_lane_bytes>(slot + 2 * tensor_stride, c.x + i * c.d_x + c.x_prev);
  }
  __device__ PARSCAN_INLINE acc_type staged_element(const unsigned char* slot, int tensor_stride) const {
    T ra[K], rdx[K];
    read_staged_bytes(slot, 1, ra);
    read_staged_bytes(slot + tensor_stride, 1, rdx);
    C g[K];
    detail::load_gates(ra, gates::log_form(base), g);
    acc_type r;
#pragma unroll
    for (int j = 0; j < K; ++j) r.v[j] = base.element_of_gate(g[j], rdx[j]);
    return r;
  }
  // v.v[j].b is y[next] of channel j, as in store_at.
  __device__ PARSCAN_INLINE void store_staged(const lane_cursor& c, int i, const unsigned char* slot, int tensor_stride,
                                              const acc_type& v) const {
    const index_t p = c.first + i;
    T ra[K], rdx[K], rx[K], rdb[K], rda[K];
    read_staged_bytes(slot, 1, ra);
    read_staged_bytes(slot + tensor_stride, 1, rdx);
    if (p != length - 1) {
      read_staged_bytes(slot + 2 * tensor_stride, 1, rx);
    } else {
#pragma unroll
      for (int j = 0; j < K; ++j) rx[j] = T{};
    }
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const C grad = static_cast<C>(rdx[j]) + v.v[j].b;
      rdb[j] = static_cast<T>(grad);
      rda[j] = static_cast<T>(base.gate_gradient_as(gates::log_form(base), c.s + j, p, grad, rx[j], ra[j]));
    }
    write_channels(c.db + i * c.d_db, rdb);
    write_channels(c.da + i * c.d_da, rda);
  }
};

template <class T, int K>
using recurrence_backward_lanes = recurrence_backward_lanes_of<T, K, run_time_gates>;

}  // namespace parscan::cuda_detail
