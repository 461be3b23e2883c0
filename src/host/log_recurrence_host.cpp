// src/host/log_recurrence_host.cpp — the log-space recurrence on the host backend: one
// sequential loop per channel with log_affine_op<float>.
#include <cuda/std/limits>

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

template status log_recurrence_forward<float>(const host_backend&, const log_forward_args<float>&);
template status log_recurrence_forward<bfloat16>(const host_backend&, const log_forward_args<bfloat16>&);

}  // namespace parscan
