// src/host/log_recurrence_host.cpp — the log-space recurrence on the host backend: one
// sequential loop per channel with log_affine_op<float>, forward and backward, for a batch or
// for packed sequences (cu_seqlens).
#include <vector>

#include <cuda/std/limits>

#include <parscan/detail/log_recurrence_math.hpp>

#include <parscan/log_recurrence.hpp>
#include <parscan/ops/log_affine.hpp>

#include "../common/varlen_args.hpp"
#include "varlen_segments.hpp"

namespace parscan {

namespace {

// The sequences of plan `p` (validated), each one loop; p.a.length steps.
template <class T>
void forward_sequences(const log_forward_tensors<T>& g, const detail::forward_plan& p) {
  detail::log_forward_forms<T> f;
  detail::pick_forward_forms(g, f);  // validated by the caller
  const log_affine_op<float> op;
  const float neg_inf = -cuda::std::numeric_limits<float>::infinity();
  const index_t n = p.a.length;
  for (index_t s = 0; s < p.sequences; ++s) {
    const index_t oa = p.a.sequence_offset(s), ob = p.b.sequence_offset(s), ox = p.x.sequence_offset(s);
    // The carry (a = 0, b = x0) makes the first step see x0; without x0 it is (0, 0).
    const signed_log<float> x0 =
        f.x0 ? detail::input_log_form(static_cast<float>(f.x0[s]), g.x0_negative && g.x0_negative[s] != 0, f.x0_value)
             : signed_log<float>{neg_inf, false};
    log_affine<float> state(neg_inf, false, x0.log_mag, x0.neg);
    for (index_t i = 0; i < n; ++i) {
      const index_t t = g.reverse ? n - 1 - i : i;
      const index_t ia = oa + t * p.a.step_stride, ib = ob + t * p.b.step_stride, ix = ox + t * p.x.step_stride;
      const signed_log<float> a =
          detail::input_log_form(static_cast<float>(f.a[ia]), g.a_negative && g.a_negative[ia] != 0, f.a_value);
      const signed_log<float> b =
          detail::input_log_form(static_cast<float>(f.b[ib]), g.b_negative && g.b_negative[ib] != 0, f.b_value);
      state = op(state, log_affine<float>(a.log_mag, a.neg, b.log_mag, b.neg));
      // Inputs are read before the outputs, which may replace them, are written.
      if (g.log_x) g.log_x[ix] = static_cast<T>(state.log_b);
      if (g.x_negative) g.x_negative[ix] = state.neg_b ? 1 : 0;
      if (g.x) g.x[ix] = static_cast<T>(detail::value_of(state.log_b, state.neg_b));
    }
    if (g.log_x_final) g.log_x_final[s] = static_cast<T>(state.log_b);
    if (g.x_final_negative) g.x_final_negative[s] = state.neg_b ? 1 : 0;
  }
}

template <class T>
void backward_sequences(const log_backward_tensors<T>& g, const detail::log_backward_plan& p) {
  detail::log_backward_forms<T> f;
  detail::pick_backward_forms(g, f);  // validated by the caller
  const log_affine_op<float> op;
  const float neg_inf = -cuda::std::numeric_limits<float>::infinity();
  const index_t n = p.a.length;
  auto step_at = [&](index_t i) { return g.reverse ? n - 1 - i : i; };
  // x recomputed in compute precision when not given (the CUDA backend stores it as T).
  std::vector<signed_log<float>> x_recomputed(g.log_x ? 0 : static_cast<std::size_t>(n));
  for (index_t s = 0; s < p.sequences; ++s) {
    const index_t oa = p.a.sequence_offset(s), ob = p.b.sequence_offset(s), ox = p.x.sequence_offset(s);
    const index_t odx = p.dx.sequence_offset(s), oda = p.da.sequence_offset(s), odb = p.db.sequence_offset(s);
    auto gate = [&](index_t t) {
      const index_t k = oa + t * p.a.step_stride;
      return detail::input_log_form(static_cast<float>(f.a[k]), g.a_negative && g.a_negative[k] != 0, f.a_value);
    };
    auto input = [&](index_t t) {
      const index_t k = ob + t * p.b.step_stride;
      return detail::input_log_form(static_cast<float>(f.b[k]), g.b_negative && g.b_negative[k] != 0, f.b_value);
    };
    const signed_log<float> x0 =
        f.x0 ? detail::input_log_form(static_cast<float>(f.x0[s]), g.x0_negative && g.x0_negative[s] != 0, f.x0_value)
             : signed_log<float>{neg_inf, false};
    const float grad_final = g.dlog_x_final ? static_cast<float>(g.dlog_x_final[s]) : 0.0f;
    if (n == 0) {  // x_final is x0: the gradient passes straight through (divided by x0 for dx0)
      if (f.x0) {
        const signed_log<float> q = detail::log_quotient(detail::log_form_of(grad_final), x0.log_mag, x0.neg);
        f.dx0[s] = static_cast<T>(f.x0_value ? detail::value_of(q.log_mag, q.neg) : grad_final);
      }
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
    // before the division by x (as plain floats: a G that cancels G_final loses nothing); a
    // value-form upstream dL/dx needs no division, and G_final/x is added to it in log form.
    log_affine<float> db(neg_inf, false, neg_inf, false);
    signed_log<float> gate_after{0.0f, false};  // a at the step after (1 after the last step)
    for (index_t i = n - 1; i >= 0; --i) {
      const index_t t = step_at(i);
      const signed_log<float> x = x_at(i);
      const float upstream = static_cast<float>(f.dx[odx + t * p.dx.step_stride]);
      signed_log<float> grad;
      if (f.dx_value) {
        grad = detail::log_form_of(upstream);
        if (i == n - 1 && g.dlog_x_final)
          grad = signed_log_add(grad, detail::log_quotient(detail::log_form_of(grad_final), x.log_mag, x.neg));
      } else {
        grad = detail::log_quotient(detail::log_form_of(i == n - 1 ? upstream + grad_final : upstream), x.log_mag, x.neg);
      }
      db = op(db, log_affine<float>(gate_after.log_mag, gate_after.neg, grad.log_mag, grad.neg));
      const signed_log<float> a = gate(t), b = input(t), x_before = i > 0 ? x_at(i - 1) : x0;
      // The upstream gradient at t was read above: in place is safe. Value-form gradients
      // drop the input's own factor: dL/db = db, dL/da = db·x_before.
      const signed_log<float> b_factor = f.b_value ? signed_log<float>{0.0f, false} : b;
      const signed_log<float> a_factor = f.a_value ? signed_log<float>{0.0f, false} : a;
      f.db[odb + t * p.db.step_stride] =
          static_cast<T>(detail::log_product(db.log_b, b_factor.log_mag, 0.0f, db.neg_b != b_factor.neg));
      f.da[oda + t * p.da.step_stride] = static_cast<T>(detail::log_product(
          db.log_b, a_factor.log_mag, x_before.log_mag, db.neg_b != (a_factor.neg != x_before.neg)));
      gate_after = a;
    }
    if (f.x0) {  // dlog_x0 = db·a·x0, dx0 = db·a
      const signed_log<float> x0_factor = f.x0_value ? signed_log<float>{0.0f, false} : x0;
      f.dx0[s] = static_cast<T>(detail::log_product(db.log_b, gate_after.log_mag, x0_factor.log_mag,
                                                    db.neg_b != (gate_after.neg != x0_factor.neg)));
    }
  }
}

using host_varlen::for_each_segment;
using host_varlen::narrow;
using host_varlen::shifted;

}  // namespace

template <class T>
status log_recurrence_forward(const host_backend&, const log_forward_args<T>& g) {
  detail::forward_plan p;
  if (status st = detail::plan_log_forward(g, p); st != status::success) return st;
  forward_sequences(g, p);
  return status::success;
}

template <class T>
status log_recurrence_backward(const host_backend&, const log_backward_args<T>& g) {
  detail::log_backward_plan p;
  if (status st = detail::plan_log_backward(g, p); st != status::success) return st;
  backward_sequences(g, p);
  return status::success;
}

// Packed sequences: each job the loops above on a view of one sequence's steps and a block of
// its channels (varlen_segments.hpp); the states of sequence n start at n·D.

template <class T>
status log_recurrence_forward(const host_backend& be, const log_varlen_forward_args<T>& g) {
  detail::forward_plan whole;
  if (status st = detail::plan_log_varlen_forward(g, true, whole); st != status::success) return st;
  const index_t D = g.shape.channels;
  for_each_segment(be, g.shape, [&](index_t n, index_t start, index_t length, index_t d0, index_t channels) {
    detail::forward_plan p = whole;
    log_forward_tensors<T> one = g;
    const index_t oa = narrow(p.a, start, length, d0, channels), ob = narrow(p.b, start, length, d0, channels);
    const index_t ox = narrow(p.x, start, length, d0, channels), os = n * D + d0;
    p.sequences = channels;
    one.log_a = shifted(g.log_a, oa), one.a = shifted(g.a, oa), one.a_negative = shifted(g.a_negative, oa);
    one.log_b = shifted(g.log_b, ob), one.b = shifted(g.b, ob), one.b_negative = shifted(g.b_negative, ob);
    one.log_x = shifted(g.log_x, ox), one.x = shifted(g.x, ox), one.x_negative = shifted(g.x_negative, ox);
    one.log_x0 = shifted(g.log_x0, os), one.x0 = shifted(g.x0, os), one.x0_negative = shifted(g.x0_negative, os);
    one.log_x_final = shifted(g.log_x_final, os), one.x_final_negative = shifted(g.x_final_negative, os);
    forward_sequences(one, p);
  });
  return status::success;
}

template <class T>
status log_recurrence_backward(const host_backend& be, const log_varlen_backward_args<T>& g) {
  detail::log_backward_plan whole;
  if (status st = detail::plan_log_varlen_backward(g, true, whole); st != status::success) return st;
  const index_t D = g.shape.channels;
  for_each_segment(be, g.shape, [&](index_t n, index_t start, index_t length, index_t d0, index_t channels) {
    detail::log_backward_plan p = whole;
    log_backward_tensors<T> one = g;
    const index_t oa = narrow(p.a, start, length, d0, channels), ob = narrow(p.b, start, length, d0, channels);
    const index_t ox = narrow(p.x, start, length, d0, channels), odx = narrow(p.dx, start, length, d0, channels);
    const index_t oda = narrow(p.da, start, length, d0, channels), odb = narrow(p.db, start, length, d0, channels);
    const index_t os = n * D + d0;
    p.sequences = channels;
    one.log_a = shifted(g.log_a, oa), one.a = shifted(g.a, oa), one.a_negative = shifted(g.a_negative, oa);
    one.log_b = shifted(g.log_b, ob), one.b = shifted(g.b, ob), one.b_negative = shifted(g.b_negative, ob);
    one.log_x = shifted(g.log_x, ox), one.x_negative = shifted(g.x_negative, ox);
    one.dlog_x = shifted(g.dlog_x, odx), one.dx = shifted(g.dx, odx);
    one.dlog_a = shifted(g.dlog_a, oda), one.da = shifted(g.da, oda);
    one.dlog_b = shifted(g.dlog_b, odb), one.db = shifted(g.db, odb);
    one.log_x0 = shifted(g.log_x0, os), one.x0 = shifted(g.x0, os), one.x0_negative = shifted(g.x0_negative, os);
    one.dlog_x_final = shifted(g.dlog_x_final, os);
    one.dlog_x0 = shifted(g.dlog_x0, os), one.dx0 = shifted(g.dx0, os);
    backward_sequences(one, p);
  });
  return status::success;
}

template status log_recurrence_forward<float>(const host_backend&, const log_forward_args<float>&);
template status log_recurrence_forward<bfloat16>(const host_backend&, const log_forward_args<bfloat16>&);
template status log_recurrence_backward<float>(const host_backend&, const log_backward_args<float>&);
template status log_recurrence_backward<bfloat16>(const host_backend&, const log_backward_args<bfloat16>&);
template status log_recurrence_forward<float>(const host_backend&, const log_varlen_forward_args<float>&);
template status log_recurrence_forward<bfloat16>(const host_backend&, const log_varlen_forward_args<bfloat16>&);
template status log_recurrence_backward<float>(const host_backend&, const log_varlen_backward_args<float>&);
template status log_recurrence_backward<bfloat16>(const host_backend&, const log_varlen_backward_args<bfloat16>&);

}  // namespace parscan
