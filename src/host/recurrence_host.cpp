// src/host/recurrence_host.cpp — the gated recurrence on the host backend: one sequential
// loop per channel, in compute precision. It is also what CI checks the API against.
#include <vector>

#include <algorithm>

#include <parscan/detail/recurrence_math.hpp>
#include <parscan/host/parallel_for.hpp>
#include <parscan/recurrence.hpp>

#include "../common/varlen_args.hpp"
#include "varlen_segments.hpp"

namespace parscan {
namespace {

// Position of the i-th step computed, in the forward's processing order.
inline index_t step_at(index_t i, index_t n, bool reverse) { return reverse ? n - 1 - i : i; }

template <class T>
void forward_sequences(const gated_forward_args<T>& g, const detail::forward_plan& p) {
  using C = compute_t<T>;
  const index_t n = p.a.length;
  const bool log_form = g.gate == gate_form::log;
  for (index_t s = 0; s < p.sequences; ++s) {
    const T* a = g.a + p.a.sequence_offset(s);
    const T* b = g.b + p.b.sequence_offset(s);
    T* x = g.x + p.x.sequence_offset(s);
    C state = g.x0 ? static_cast<C>(g.x0[s]) : C(0);
    for (index_t i = 0; i < n; ++i) {
      const index_t t = step_at(i, n, g.reverse);
      const C gate = detail::load_gate<C>(a[t * p.a.step_stride], log_form);
      state = product(gate, state) + static_cast<C>(b[t * p.b.step_stride]);
      x[t * p.x.step_stride] = static_cast<T>(state);
    }
    if (g.x_final) g.x_final[s] = static_cast<T>(state);
  }
}

template <class T>
void backward_sequences(const gated_backward_args<T>& g, const detail::backward_plan& p) {
  using C = compute_t<T>;
  using detail::conj_if_complex;
  const index_t n = p.a.length;
  const bool log_form = g.gate == gate_form::log;
  std::vector<C> x_recomputed(g.x ? 0 : static_cast<std::size_t>(n));
  for (index_t s = 0; s < p.sequences; ++s) {
    const T* a = g.a + p.a.sequence_offset(s);
    const T* dx = g.dx + p.dx.sequence_offset(s);
    T* da = g.da + p.da.sequence_offset(s);
    T* db = g.db + p.db.sequence_offset(s);
    const C x0 = g.x0 ? static_cast<C>(g.x0[s]) : C(0);
    // x at forward step i (in processing order), stored or recomputed.
    const T* x_stored = g.x ? g.x + p.x.sequence_offset(s) : nullptr;
    if (!g.x) {
      const T* b = g.b + p.b.sequence_offset(s);
      C state = x0;
      for (index_t i = 0; i < n; ++i) {
        const index_t t = step_at(i, n, g.reverse);
        const C gate = detail::load_gate<C>(a[t * p.a.step_stride], log_form);
        state = product(gate, state) + static_cast<C>(b[t * p.b.step_stride]);
        x_recomputed[i] = state;  // compute precision; the CUDA backend recomputes into a buffer of T
      }
    }
    auto x_at = [&](index_t i) -> C {
      return x_stored ? static_cast<C>(x_stored[step_at(i, n, g.reverse) * p.x.step_stride]) : x_recomputed[i];
    };
    C carried = g.dx_final ? static_cast<C>(g.dx_final[s]) : C(0);  // db at the step after
    C gate_after = C(1);                                               // a at the step after
    for (index_t i = n - 1; i >= 0; --i) {
      const index_t t = step_at(i, n, g.reverse);
      const C gate = detail::load_gate<C>(a[t * p.a.step_stride], log_form);
      const C grad = static_cast<C>(dx[t * p.dx.step_stride]) + product(conj_if_complex(gate_after), carried);
      const C x_before = i > 0 ? x_at(i - 1) : x0;
      C grad_gate = product(grad, conj_if_complex(x_before));
      if (log_form) grad_gate = product(grad_gate, conj_if_complex(gate));
      db[t * p.db.step_stride] = static_cast<T>(grad);  // dx[t] was read above: in place is safe
      da[t * p.da.step_stride] = static_cast<T>(grad_gate);
      carried = grad;
      gate_after = gate;
    }
    if (g.x0) g.dx0[s] = static_cast<T>(n > 0 ? product(conj_if_complex(gate_after), carried) : carried);
  }
}

// ---------------------------------------------------------------------------------------------
// Packed sequences (cu_seqlens): host_varlen's jobs (varlen_segments.hpp) over the loops above.

using host_varlen::for_each_segment;
using host_varlen::narrow;

template <class T>
void varlen_forward(const host_backend& be, const gated_varlen_forward_args<T>& g, const detail::varlen_forward_plan& vp) {
  const index_t D = g.shape.channels;
  for_each_segment(be, g.shape, [&](index_t n, index_t start, index_t length, index_t d0, index_t channels) {
    detail::forward_plan p = vp.whole;
    gated_forward_args<T> one{};
    one.a = g.a + narrow(p.a, start, length, d0, channels);
    one.b = g.b + narrow(p.b, start, length, d0, channels);
    one.x = g.x + narrow(p.x, start, length, d0, channels);
    one.x0 = g.x0 ? g.x0 + n * D + d0 : nullptr;
    one.x_final = g.x_final ? g.x_final + n * D + d0 : nullptr;
    one.reverse = g.reverse, one.gate = g.gate;
    p.sequences = channels;
    forward_sequences(one, p);
  });
}

template <class T>
void varlen_backward(const host_backend& be, const gated_varlen_backward_args<T>& g,
                     const detail::varlen_backward_plan& vp) {
  const index_t D = g.shape.channels;
  for_each_segment(be, g.shape, [&](index_t n, index_t start, index_t length, index_t d0, index_t channels) {
    detail::backward_plan p = vp.whole;
    gated_backward_args<T> one{};
    one.a = g.a + narrow(p.a, start, length, d0, channels);
    const index_t x_offset = narrow(p.x, start, length, d0, channels);
    one.x = g.x ? g.x + x_offset : nullptr;
    one.b = g.b ? g.b + narrow(p.b, start, length, d0, channels) : nullptr;
    one.dx = g.dx + narrow(p.dx, start, length, d0, channels);
    one.da = g.da + narrow(p.da, start, length, d0, channels);
    one.db = g.db + narrow(p.db, start, length, d0, channels);
    one.x0 = g.x0 ? g.x0 + n * D + d0 : nullptr;
    one.dx_final = g.dx_final ? g.dx_final + n * D + d0 : nullptr;
    one.dx0 = g.x0 ? g.dx0 + n * D + d0 : nullptr;
    one.reverse = g.reverse, one.gate = g.gate;
    p.sequences = channels;
    backward_sequences(one, p);
  });
}

}  // namespace

template <class T>
status gated_recurrence_forward(const host_backend& be, const gated_varlen_forward_args<T>& g) {
  detail::varlen_forward_plan p;
  if (status st = detail::plan_varlen_forward(g, true, p); st != status::success) return st;
  varlen_forward(be, g, p);
  return status::success;
}

template <class T>
status gated_recurrence_backward(const host_backend& be, const gated_varlen_backward_args<T>& g) {
  detail::varlen_backward_plan p;
  if (status st = detail::plan_varlen_backward(g, true, p); st != status::success) return st;
  varlen_backward(be, g, p);
  return status::success;
}

template <class T>
status gated_recurrence_forward(const host_backend&, const gated_forward_args<T>& g) {
  detail::forward_plan p;
  if (status st = detail::plan_forward(g, p); st != status::success) return st;
  forward_sequences(g, p);
  return status::success;
}

template <class T>
status gated_recurrence_backward(const host_backend&, const gated_backward_args<T>& g) {
  detail::backward_plan p;
  if (status st = detail::plan_backward(g, p); st != status::success) return st;
  backward_sequences(g, p);
  return status::success;
}

#define PARSCAN_INSTANTIATE_HOST(T)                                                              \
  template status gated_recurrence_forward<T>(const host_backend&, const gated_forward_args<T>&); \
  template status gated_recurrence_backward<T>(const host_backend&, const gated_backward_args<T>&); \
  template status gated_recurrence_forward<T>(const host_backend&, const gated_varlen_forward_args<T>&); \
  template status gated_recurrence_backward<T>(const host_backend&, const gated_varlen_backward_args<T>&);
PARSCAN_INSTANTIATE_HOST(float)
PARSCAN_INSTANTIATE_HOST(double)
PARSCAN_INSTANTIATE_HOST(bfloat16)
PARSCAN_INSTANTIATE_HOST(float16)
PARSCAN_INSTANTIATE_HOST(complex<float>)
#undef PARSCAN_INSTANTIATE_HOST

}  // namespace parscan
