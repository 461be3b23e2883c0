// src/cuda/log_recurrence.cu — the log-space recurrence on the CUDA backend: validate with the
// host's planner, build the Problem, run the shared scan kernels.
#include <parscan/cuda/device/dispatch_scan.cuh>
#include <parscan/cuda/device/log_recurrence_problem.cuh>
#include <parscan/log_recurrence.hpp>
#include <parscan/ops/log_affine.hpp>

#include "../common/recurrence_args.hpp"

namespace parscan {
namespace {

template <class T>
cuda_detail::log_recurrence_forward_problem<T> make_problem(const log_forward_args<T>& g, const detail::forward_plan& p) {
  using cuda_detail::is_lane_major;
  cuda_detail::log_recurrence_forward_problem<T> P{};
  P.log_a = g.log_a, P.a_negative = g.a_negative, P.log_b = g.log_b, P.b_negative = g.b_negative;
  P.log_x = g.log_x, P.x_negative = g.x_negative;
  P.log_x0 = g.log_x0, P.x0_negative = g.x0_negative;
  P.log_x_final = g.log_x_final, P.x_final_negative = g.x_final_negative;
  P.la = p.a, P.lb = p.b, P.lx = p.x;
  P.length = g.shape.length;
  P.reverse = g.reverse;
  P.lane_major = is_lane_major(p.a) && is_lane_major(p.b) && is_lane_major(p.x);
  return P;
}

}  // namespace

template <class T>
std::size_t log_recurrence_workspace_size(const log_forward_args<T>& g) {
  detail::forward_plan p;
  if (detail::plan_log_forward(g, p) != status::success) return 0;
  return cuda_detail::scan_workspace_bytes<cuda_detail::log_recurrence_forward_problem<T>>(p.sequences, g.shape.length);
}

template <class T>
status log_recurrence_forward(const cuda_backend& be, const log_forward_args<T>& g) {
  detail::forward_plan p;
  if (status st = detail::plan_log_forward(g, p); st != status::success) return st;
  return cuda_detail::dispatch_scan(make_problem(g, p), log_affine_op<float>{}, p.sequences, be);
}

template status log_recurrence_forward<float>(const cuda_backend&, const log_forward_args<float>&);
template status log_recurrence_forward<bfloat16>(const cuda_backend&, const log_forward_args<bfloat16>&);
template std::size_t log_recurrence_workspace_size<float>(const log_forward_args<float>&);
template std::size_t log_recurrence_workspace_size<bfloat16>(const log_forward_args<bfloat16>&);

}  // namespace parscan
