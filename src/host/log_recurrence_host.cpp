// src/host/log_recurrence_host.cpp — the log-space recurrence on the host backend: one
// sequential loop per channel with log_affine_op<float>, forward and backward.
#include <vector>

#include <cuda/std/limits>

#include <parscan/detail/log_recurrence_math.hpp>

#include <parscan/log_recurrence.hpp>
#include <parscan/ops/log_affine.hpp>

#include "../common/recurrence_args.hpp"

namespace parscan {

template <class T>
status log_recurrence_forward(const host_backend&, const log_forward_args<T>& g) {
  detail::forward_plan p;
  if (status st = detail::plan_log_forward(g, p); st != status::success) return st;
  const log_affine_op<float> op;
  const float neg_inf = -cuda::std::numeric_limits<float>::infinity();
  const index_t n = g.shape.length;
  for (index_t s = 0; s < p.sequences; ++s) {
    const index_t oa = p.a.sequence_offset(s), ob = p.b.sequence_offset(s), ox = p.x.sequence_offset(s);
    // The carry (a = 0, b = x0) makes the first step see x0; without x0 it is (0, 0).
    log_affine<float> state(neg_inf, false, g.log_x0 ? static_cast<float>(g.log_x0[s]) : neg_inf,
                            g.x0_negative != nullptr && g.x0_negative[s] != 0);
    for (index_t i = 0; i < n; ++i) {
      const index_t t = g.reverse ? n - 1 - i : i;
      const index_t ia = oa + t * p.a.step_stride, ib = ob + t * p.b.step_stride, ix = ox + t * p.x.step_stride;
      const log_affine<float> step(static_cast<float>(g.log_a[ia]), g.a_negative && g.a_negative[ia] != 0,
                                   static_cast<float>(g.log_b[ib]), g.b_negative && g.b_negative[ib] != 0);
      state = op(state, step);  // inputs are read before the outputs, which may replace them, are written
      g.log_x[ix] = static_cast<T>(state.log_b);
      if (g.x_negative) g.x_negative[ix] = state.neg_b ? 1 : 0;
    }
    if (g.log_x_final) g.log_x_final[s] = static_cast<T>(state.log_b);
    if (g.x_final_negative) g.x_final_negative[s] = state.neg_b ? 1 : 0;
  }
  return status::success;
}

template <class T>
status log_recurrence_backward(const host_backend&, const log_backward_args<T>& g) {
  detail::log_backward_plan p;
  if (status st = detail::plan_log_backward(g, p); st != status::success) return st;
  const log_affine_op<float> op;
  const float neg_inf = -cuda::std::numeric_limits<float>::infinity();
  const index_t n = g.shape.length;
  auto step_at = [&](index_t i) { return g.reverse ? n - 1 - i : i; };
  // x recomputed in compute precision when not given (the CUDA backend stores it as T).
  std::vector<signed_log<float>> x_recomputed(g.log_x ? 0 : static_cast<std::size_t>(n));
  for (index_t s = 0; s < p.sequences; ++s) {
    const index_t oa = p.a.sequence_offset(s), ob = p.b.sequence_offset(s), ox = p.x.sequence_offset(s);
    const index_t odx = p.dx.sequence_offset(s), oda = p.da.sequence_offset(s), odb = p.db.sequence_offset(s);
    auto gate = [&](index_t t) {
      const index_t k = oa + t * p.a.step_stride;
      return signed_log<float>{static_cast<float>(g.log_a[k]), g.a_negative && g.a_negative[k] != 0};
    };
    auto input = [&](index_t t) {
      const index_t k = ob + t * p.b.step_stride;
      return signed_log<float>{static_cast<float>(g.log_b[k]), g.b_negative && g.b_negative[k] != 0};
    };
    const signed_log<float> x0{g.log_x0 ? static_cast<float>(g.log_x0[s]) : neg_inf,
                               g.x0_negative != nullptr && g.x0_negative[s] != 0};
    const float grad_final = g.dlog_x_final ? static_cast<float>(g.dlog_x_final[s]) : 0.0f;
    if (n == 0) {  // x_final is x0: the gradient passes straight through
      if (g.log_x0) g.dlog_x0[s] = static_cast<T>(grad_final);
      continue;
    }
    if (!g.log_x) {
      log_affine<float> state(neg_inf, false, x0.log_mag, x0.neg);
      for (index_t i = 0; i < n; ++i) {
        const index_t t = step_at(i);
        const signed_log<float> a = gate(t), b = input(t);
        state = op(state, log_affine<float>(a.log_mag, a.neg, b.log_mag, b.neg));
        x_recomputed[static_cast<std::size_t>(i)] = {state.log_b, state.neg_b};
      }
    }
    // x at forward step i (in processing order), stored or recomputed.
    auto x_at = [&](index_t i) {
      if (!g.log_x) return x_recomputed[static_cast<std::size_t>(i)];
      const index_t k = ox + step_at(i) * p.x.step_stride;
      return signed_log<float>{static_cast<float>(g.log_x[k]), g.x_negative && g.x_negative[k] != 0};
    };
    // db in log form, from zero after the last step. G_final is added to G on the last step
    // before the division by x (as plain floats: a G that cancels G_final loses nothing).
    log_affine<float> db(neg_inf, false, neg_inf, false);
    signed_log<float> gate_after{0.0f, false};  // a at the step after (1 after the last step)
    for (index_t i = n - 1; i >= 0; --i) {
      const index_t t = step_at(i);
      const signed_log<float> x = x_at(i);
      float upstream = static_cast<float>(g.dlog_x[odx + t * p.dx.step_stride]);
      if (i == n - 1) upstream += grad_final;
      const signed_log<float> grad = detail::log_quotient(detail::log_form_of(upstream), x.log_mag, x.neg);
      db = op(db, log_affine<float>(gate_after.log_mag, gate_after.neg, grad.log_mag, grad.neg));
      const signed_log<float> a = gate(t), b = input(t), x_before = i > 0 ? x_at(i - 1) : x0;
      // dlog_x[t] was read above: in place is safe.
      g.dlog_b[odb + t * p.db.step_stride] = static_cast<T>(detail::log_product(db.log_b, b.log_mag, 0.0f, db.neg_b != b.neg));
      g.dlog_a[oda + t * p.da.step_stride] =
          static_cast<T>(detail::log_product(db.log_b, a.log_mag, x_before.log_mag, db.neg_b != (a.neg != x_before.neg)));
      gate_after = a;
    }
    if (g.log_x0)
      g.dlog_x0[s] = static_cast<T>(
          detail::log_product(db.log_b, gate_after.log_mag, x0.log_mag, db.neg_b != (gate_after.neg != x0.neg)));
  }
  return status::success;
}

template status log_recurrence_forward<float>(const host_backend&, const log_forward_args<float>&);
template status log_recurrence_forward<bfloat16>(const host_backend&, const log_forward_args<bfloat16>&);
template status log_recurrence_backward<float>(const host_backend&, const log_backward_args<float>&);
template status log_recurrence_backward<bfloat16>(const host_backend&, const log_backward_args<bfloat16>&);

}  // namespace parscan
