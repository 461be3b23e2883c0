// parscan/cuda/device/log_recurrence_problem.cuh — the log-space recurrence forward as a
// Problem for the shared scan kernels: element (log|a|, sign a, log|b|, sign b) under
// log_affine_op<float>; the carry (a = 0, b = x0) brings in the state exactly.
#pragma once

#include <cstdint>

#include <cuda/std/limits>

#include "../../layout.hpp"
#include "../../ops/log_affine.hpp"
#include "../block/lane_tile_scan.cuh"
#include "../thread/run_io.cuh"
#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

template <class T>
struct log_recurrence_forward_problem {
  using acc_type = log_affine<float>;
  using sign = std::uint8_t;
  const T* log_a;
  const sign* a_negative;  // null: all positive
  const T* log_b;
  const sign* b_negative;
  T* log_x;
  sign* x_negative;        // null: not written (x is positive)
  const T* log_x0;
  const sign* x0_negative;
  T* log_x_final;
  sign* x_final_negative;
  sequence_layout la, lb, lx;
  index_t length;
  bool reverse;
  bool lane_major;
  bool exclusive = false;

  struct cursor {
    const T* log_a;
    const sign* a_negative;
    const T* log_b;
    const sign* b_negative;
    T* log_x;
    sign* x_negative;
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    const index_t oa = la.sequence_offset(s), ob = lb.sequence_offset(s), ox = lx.sequence_offset(s);
    return {log_a + oa, a_negative ? a_negative + oa : nullptr, log_b + ob, b_negative ? b_negative + ob : nullptr,
            log_x + ox, x_negative ? x_negative + ox : nullptr};
  }
  static constexpr int run = run_length<T>;
  __device__ PARSCAN_INLINE index_t step(index_t pos) const { return reverse ? length - 1 - pos : pos; }
  __device__ PARSCAN_INLINE int count(index_t pos) const { return steps_in_run<run>(length, pos); }

  __device__ PARSCAN_INLINE void load_run(const cursor& c, index_t pos, acc_type (&items)[run]) const {
    T ra[run], rb[run];
    sign na[run] = {}, nb[run] = {};
    const int n = count(pos), dir = reverse ? -1 : 1;
    const index_t t = step(pos);
    read_steps(c.log_a, la.step_stride, t, dir, n, ra);
    read_steps(c.log_b, lb.step_stride, t, dir, n, rb);
    if (c.a_negative) read_steps(c.a_negative, la.step_stride, t, dir, n, na);
    if (c.b_negative) read_steps(c.b_negative, lb.step_stride, t, dir, n, nb);
#pragma unroll
    for (int v = 0; v < run; ++v)
      items[v] = v < n ? acc_type(static_cast<float>(ra[v]), na[v] != 0, static_cast<float>(rb[v]), nb[v] != 0)
                       : acc_type{};
  }
  __device__ PARSCAN_INLINE void store_run(const cursor& c, index_t pos, const acc_type (&items)[run]) const {
    T rx[run];
    sign nx[run];
#pragma unroll
    for (int v = 0; v < run; ++v) rx[v] = static_cast<T>(items[v].log_b), nx[v] = items[v].neg_b ? 1 : 0;
    const int n = count(pos), dir = reverse ? -1 : 1;
    write_steps(c.log_x, lx.step_stride, step(pos), dir, n, rx);
    if (c.x_negative) write_steps(c.x_negative, lx.step_stride, step(pos), dir, n, nx);
  }
  __device__ PARSCAN_INLINE acc_type load_at(const cursor& c, index_t pos) const {
    const index_t ia = step(pos) * la.step_stride, ib = step(pos) * lb.step_stride;
    return acc_type(static_cast<float>(c.log_a[ia]), c.a_negative && c.a_negative[ia] != 0,
                    static_cast<float>(c.log_b[ib]), c.b_negative && c.b_negative[ib] != 0);
  }
  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t pos, const acc_type& v) const {
    const index_t ix = step(pos) * lx.step_stride;
    c.log_x[ix] = static_cast<T>(v.log_b);
    if (c.x_negative) c.x_negative[ix] = v.neg_b ? 1 : 0;
  }
  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t s) const {
    const float neg_inf = -cuda::std::numeric_limits<float>::infinity();
    return {acc_type(neg_inf, false, log_x0 ? static_cast<float>(log_x0[s]) : neg_inf,
                     x0_negative != nullptr && x0_negative[s] != 0),
            true};
  }
  __device__ PARSCAN_INLINE void finish(index_t s, const acc_type& total) const {
    if (log_x_final) log_x_final[s] = static_cast<T>(total.log_b);
    if (x_final_negative) x_final_negative[s] = total.neg_b ? 1 : 0;
  }
};

}  // namespace parscan::cuda_detail
