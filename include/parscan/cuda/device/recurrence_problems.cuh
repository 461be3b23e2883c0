// parscan/cuda/device/recurrence_problems.cuh — the gated recurrence, forward and backward,
// as Problems for the shared scan kernels (block/tile_scan.cuh). The step arithmetic comes
// from detail/recurrence_math.hpp, the same code the host backend runs.
#pragma once

#include "../../detail/recurrence_math.hpp"
#include "../../layout.hpp"
#include "../../ops/affine.hpp"
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
  bool exclusive = false;

  struct cursor {
    const T* a;
    const T* b;
    T* x;
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    return {a + la.sequence_offset(s), b + lb.sequence_offset(s), x + lx.sequence_offset(s)};
  }
  __device__ PARSCAN_INLINE index_t step(index_t pos) const { return reverse ? length - 1 - pos : pos; }
  __device__ PARSCAN_INLINE acc_type load(const cursor& c, index_t pos) const {
    const index_t t = step(pos);
    return acc_type(detail::load_gate<C>(c.a[t * la.step_stride], log_gate), static_cast<C>(c.b[t * lb.step_stride]));
  }
  __device__ PARSCAN_INLINE void store(const cursor& c, index_t pos, const acc_type& v) const {
    c.x[step(pos) * lx.step_stride] = static_cast<T>(v.b);
  }
  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t s) const {
    return {acc_type(C(0), x0 ? static_cast<C>(x0[s]) : C(0)), true};
  }
  __device__ PARSCAN_INLINE void finish(index_t s, const acc_type& total) const {
    if (x_final) x_final[s] = static_cast<T>(total.b);
  }
};

/// The backward pass is a scan in the opposite direction of the forward one:
///   db[t] = g[t] + a[next]*·db[next],  element (a[next]*, dx[t]), carry (0, dx_final),
/// with a[next] = 1 on the forward's last step so the carry enters as g's dx_final term.
/// Storing db[t] also forms da[t] = db[t]·x[prev]* and, on the forward's first step, dx0.
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
  bool exclusive = false;

  struct cursor {
    const T* a;
    const T* x;
    const T* dx;
    T* da;
    T* db;
    index_t s;
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    return {a + la.sequence_offset(s),   x + lx.sequence_offset(s),   dx + ldx.sequence_offset(s),
            da + lda.sequence_offset(s), db + ldb.sequence_offset(s), s};
  }
  // Backward position p visits the forward's steps last to first.
  __device__ PARSCAN_INLINE index_t step(index_t p) const { return forward_reverse ? p : length - 1 - p; }
  __device__ PARSCAN_INLINE index_t forward_next(index_t t) const { return forward_reverse ? t - 1 : t + 1; }
  __device__ PARSCAN_INLINE index_t forward_prev(index_t t) const { return forward_reverse ? t + 1 : t - 1; }
  __device__ PARSCAN_INLINE C gate(const cursor& c, index_t t) const {
    return detail::load_gate<C>(c.a[t * la.step_stride], log_gate);
  }

  __device__ PARSCAN_INLINE acc_type load(const cursor& c, index_t p) const {
    const index_t t = step(p);
    const C gate_next = p > 0 ? detail::conj_if_complex(gate(c, forward_next(t))) : C(1);
    return acc_type(gate_next, static_cast<C>(c.dx[t * ldx.step_stride]));
  }
  __device__ PARSCAN_INLINE void store(const cursor& c, index_t p, const acc_type& v) const {
    const index_t t = step(p);
    const C grad = v.b;
    const bool first_step = p == length - 1;
    const C x_before = !first_step ? static_cast<C>(c.x[forward_prev(t) * lx.step_stride])
                                   : (x0 ? static_cast<C>(x0[c.s]) : C(0));
    C grad_gate = grad * detail::conj_if_complex(x_before);
    if (log_gate || (first_step && dx0)) {
      const C g = detail::conj_if_complex(gate(c, t));
      if (log_gate) grad_gate = grad_gate * g;
      if (first_step && dx0) dx0[c.s] = static_cast<T>(g * grad);
    }
    c.db[t * ldb.step_stride] = static_cast<T>(grad);
    c.da[t * lda.step_stride] = static_cast<T>(grad_gate);
  }
  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t s) const {
    return {acc_type(C(0), dx_final ? static_cast<C>(dx_final[s]) : C(0)), true};
  }
  __device__ PARSCAN_INLINE void finish(index_t s, const acc_type& total) const {
    if (length == 0 && dx0) dx0[s] = static_cast<T>(total.b);  // no steps: the gradient passes straight through
  }
};

}  // namespace parscan::cuda_detail
