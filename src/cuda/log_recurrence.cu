// src/cuda/log_recurrence.cu — the log-space recurrence on the CUDA backend: validate with the
// host's planner, build the forward or backward Problem, run the shared scan kernels.
#include <parscan/cuda/device/dispatch_scan.cuh>
#include <parscan/cuda/recurrence/log_channel_last_chunks.cuh>
#include <parscan/cuda/recurrence/log_recurrence_lane_packs.cuh>
#include <parscan/cuda/recurrence/log_recurrence_problem.cuh>
#include <parscan/cuda/recurrence/log_varlen_recurrence.cuh>
#include <parscan/log_recurrence.hpp>
#include <parscan/detail/log_affine_bits.hpp>

#include "../common/varlen_args.hpp"

namespace parscan {
namespace {

// log_affine_op<float> with the signs in bits: the Problems' accumulator (detail/log_affine_bits.hpp).
using log_op = detail::log_affine_bits_op;

// Value forms run their own instantiation of the Problems (Values = true, the forms chosen per
// tensor at run time); calls in log form only run the log-form kernels, which carry none of
// the value forms' code.
template <class T>
bool has_value_forms(const log_forward_tensors<T>& g) {
  return g.a || g.b || g.x0 || g.x;
}
template <class T>
bool has_value_forms(const log_backward_tensors<T>& g) {
  return g.a || g.b || g.x0 || g.dx;
}

// The forward Problem of validated tensors laid out as `p`, of `length` steps (the packed
// total for packed sequences, whose states it keeps at their (N, D) places).
template <bool Values, class T>
cuda_detail::log_recurrence_forward_problem<T, Values> make_problem(const log_forward_tensors<T>& g,
                                                                    const detail::forward_plan& p, index_t length) {
  using cuda_detail::is_lane_major;
  detail::log_forward_forms<T> f;
  detail::pick_forward_forms(g, f);  // validated by the caller
  cuda_detail::log_recurrence_forward_problem<T, Values> P{};
  P.log_a = f.a, P.a_negative = g.a_negative, P.log_b = f.b, P.b_negative = g.b_negative;
  P.a_value = f.a_value, P.b_value = f.b_value;
  P.log_x = g.log_x, P.x_negative = g.x_negative, P.x = g.x;
  P.log_x0 = f.x0, P.x0_negative = g.x0_negative, P.x0_value = f.x0_value;
  P.log_x_final = g.log_x_final, P.x_final_negative = g.x_final_negative;
  P.la = p.a, P.lb = p.b, P.lx = p.x;
  P.length = length;
  P.reverse = g.reverse;
  P.lane_major = is_lane_major(p.a) && is_lane_major(p.b) && is_lane_major(p.x);
  return P;
}

// Channel-last calls without input sign arrays run in the chunk loop where their tensors keep
// whole 16-byte chunks and their jobs fill the device (log_channel_last_chunks.cuh), otherwise
// in lane packs on the staged lane tiles (log_recurrence_lane_packs.cuh); everything else on
// the shared scan kernels.
template <bool Values, class T>
status run_forward(const log_forward_args<T>& g, const detail::forward_plan& p, const cuda_backend& be) {
  constexpr int K = cuda_detail::channels_per_lane<T>;
  const auto P = make_problem<Values>(g, p, g.shape.length);
  bool chunked = false;
  if (const status st = cuda_detail::run_log_forward_chunks(P, be, &chunked); chunked || st != status::success)
    return st;
  if (cuda_detail::log_lane_packs_fit<K>(P))
    return cuda_detail::dispatch_lane_tiles(cuda_detail::log_forward_lanes<T, K, Values>(P),
                                            cuda_detail::lanewise_op<log_op, K>{}, p.sequences / K, be);
  return cuda_detail::dispatch_scan(P, log_op{}, p.sequences, be);
}

// Workspace bytes of a forward call's scan, and of its lane packs if the layouts let them be
// used (an upper bound whatever the pointers turn out to be).
template <bool Values, class T>
std::size_t forward_scan_bytes(const detail::forward_plan& p, index_t length) {
  constexpr int K = cuda_detail::channels_per_lane<T>;
  std::size_t bytes = cuda_detail::scan_workspace_bytes<cuda_detail::log_recurrence_forward_problem<T, Values>>(
      p.sequences, length);
  using cuda_detail::lane_packs_fit;
  if (lane_packs_fit<K>(p.a) && lane_packs_fit<K>(p.b) && lane_packs_fit<K>(p.x)) {
    const std::size_t packed =
        cuda_detail::lane_tile_workspace_bytes<cuda_detail::log_forward_lanes<T, K, Values>>(p.sequences / K, length);
    if (packed > bytes) bytes = packed;
  }
  return bytes;
}

inline std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }

// Bytes of the recomputed x (log|x| as T, then the signs as bytes, each laid out like b) when
// backward is not given x.
template <class T>
std::size_t recompute_bytes(const log_backward_tensors<T>& g, const detail::log_backward_plan& p,
                            std::size_t& sign_offset) {
  sign_offset = 0;
  if (g.log_x) return 0;
  index_t span = 0;
  detail::check_layout(p.b, sizeof(T), span);
  sign_offset = align256(static_cast<std::size_t>(span) * sizeof(T));
  return sign_offset + (p.signed_values ? align256(static_cast<std::size_t>(span)) : 0);
}

}  // namespace

template <class T>
std::size_t log_recurrence_workspace_size(const log_backward_args<T>& g) {
  detail::log_backward_plan p;
  if (detail::plan_log_backward(g, p) != status::success) return 0;
  std::size_t sign_offset;
  // The recompute (forward) and the backward scan run one after the other and share the rest.
  const index_t L = g.shape.length;
  std::size_t scan =
      has_value_forms(g)
          ? cuda_detail::scan_workspace_bytes<cuda_detail::log_recurrence_backward_problem<T, true>>(p.sequences, L)
          : cuda_detail::scan_workspace_bytes<cuda_detail::log_recurrence_backward_problem<T>>(p.sequences, L);
  if (!g.log_x) {
    const detail::forward_plan fp{p.a, p.b, p.b, p.sequences};  // x recomputed laid out like b
    const bool values = g.a || g.b || g.x0;  // the recompute's own forms (has_value_forms of its args)
    const std::size_t forward = values ? forward_scan_bytes<true, T>(fp, L) : forward_scan_bytes<false, T>(fp, L);
    if (forward > scan) scan = forward;
  }
  return recompute_bytes(g, p, sign_offset) + scan;
}

namespace {

// The backward Problem of validated tensors laid out as `p`, of `length` steps, reading x from
// log_x / x_negative (given or recomputed).
template <bool Values, class T>
cuda_detail::log_recurrence_backward_problem<T, Values> make_backward_problem(const log_backward_tensors<T>& g,
                                                                              const detail::log_backward_plan& p,
                                                                              index_t length, const T* log_x,
                                                                              const std::uint8_t* x_negative) {
  using cuda_detail::is_lane_major;
  detail::log_backward_forms<T> f;
  detail::pick_backward_forms(g, f);  // validated by the caller
  cuda_detail::log_recurrence_backward_problem<T, Values> bp{};
  bp.log_a = f.a, bp.a_negative = g.a_negative, bp.log_b = f.b, bp.b_negative = g.b_negative;
  bp.log_x = log_x, bp.x_negative = x_negative;
  bp.log_x0 = f.x0, bp.x0_negative = g.x0_negative;
  bp.dlog_x = f.dx, bp.dlog_x_final = g.dlog_x_final;
  bp.dlog_a = f.da, bp.dlog_b = f.db;
  bp.dlog_x0 = f.dx0;  // an output only when x0 is given (null otherwise)
  bp.a_value = f.a_value, bp.b_value = f.b_value, bp.x0_value = f.x0_value, bp.dx_value = f.dx_value;
  bp.la = p.a, bp.lb = p.b, bp.lx = p.x, bp.ldx = p.dx, bp.lda = p.da, bp.ldb = p.db;
  bp.length = length;
  bp.forward_reverse = g.reverse;
  bp.lane_major = is_lane_major(p.a) && is_lane_major(p.b) && is_lane_major(p.x) && is_lane_major(p.dx) &&
                  is_lane_major(p.da) && is_lane_major(p.db);
  return bp;
}

template <bool Values, class T>
status run_backward(const log_backward_args<T>& g, const detail::log_backward_plan& p, const T* log_x,
                    const std::uint8_t* x_negative, const cuda_backend& be) {
  return cuda_detail::dispatch_scan(make_backward_problem<Values>(g, p, g.shape.length, log_x, x_negative),
                                    log_op{}, p.sequences, be);
}

// The forward that recomputes x for a backward without it: the backward's inputs, x written
// to log_x / x_negative (laid out like b).
template <class T>
log_forward_tensors<T> recompute_forward(const log_backward_tensors<T>& g, T* log_x, std::uint8_t* x_negative) {
  log_forward_tensors<T> f{};
  f.log_a = g.log_a, f.a_negative = g.a_negative, f.log_b = g.log_b, f.b_negative = g.b_negative;
  f.a = g.a, f.b = g.b;  // whichever form was given
  f.log_x = log_x, f.x_negative = x_negative;
  f.log_x0 = g.log_x0, f.x0_negative = g.x0_negative, f.x0 = g.x0;
  f.reverse = g.reverse;
  return f;
}

}  // namespace

namespace {

// A backward's run: x from the call, or recomputed into the head of the workspace by
// forward(tensors, plan, backend) (laid out like b); then backward(log_x, x_negative, backend),
// which takes its tile state from what follows x. `total` is the call's workspace size.
template <class T, class Forward, class Backward>
status backward_with_x(const log_backward_tensors<T>& g, const detail::log_backward_plan& p, index_t length,
                       std::size_t total, const cuda_backend& be, const Forward& forward, const Backward& backward) {
  std::size_t sign_offset;
  const std::size_t x_bytes = recompute_bytes(g, p, sign_offset);
  cuda_detail::workspace_lease ws(be);
  if (status st = ws.acquire(total); st != status::success) return st;
  const cuda_backend rest = cuda_detail::backend_after(be, ws, x_bytes, total);
  const T* log_x = g.log_x;
  const std::uint8_t* x_negative = g.log_x ? g.x_negative : nullptr;
  if (!log_x && length > 0) {  // recompute the forward states into the workspace
    T* lx_tmp = static_cast<T*>(ws.get());
    std::uint8_t* sx_tmp = p.signed_values ? static_cast<std::uint8_t*>(ws.get()) + sign_offset : nullptr;
    const detail::forward_plan fp{p.a, p.b, p.b, p.sequences};
    if (status st = forward(recompute_forward(g, lx_tmp, sx_tmp), fp, rest); st != status::success) return st;
    log_x = lx_tmp, x_negative = sx_tmp;
  }
  return backward(log_x, x_negative, rest);
}

}  // namespace

template <class T>
status log_recurrence_backward(const cuda_backend& be, const log_backward_args<T>& g) {
  detail::log_backward_plan p;
  if (status st = detail::plan_log_backward(g, p); st != status::success) return st;
  if (p.sequences == 0) return status::success;
  auto forward = [&](const log_forward_tensors<T>& t, const detail::forward_plan& fp, const cuda_backend& rest) {
    log_forward_args<T> f{};
    static_cast<log_forward_tensors<T>&>(f) = t;
    f.shape = g.shape;
    return has_value_forms(f) ? run_forward<true>(f, fp, rest) : run_forward<false>(f, fp, rest);
  };
  auto backward = [&](const T* log_x, const std::uint8_t* x_negative, const cuda_backend& rest) {
    return has_value_forms(g) ? run_backward<true>(g, p, log_x, x_negative, rest)
                              : run_backward<false>(g, p, log_x, x_negative, rest);
  };
  return backward_with_x(g, p, g.shape.length, log_recurrence_workspace_size(g), be, forward, backward);
}

template <class T>
std::size_t log_recurrence_workspace_size(const log_forward_args<T>& g) {
  detail::forward_plan p;
  if (detail::plan_log_forward(g, p) != status::success) return 0;
  const index_t L = g.shape.length;
  return has_value_forms(g) ? forward_scan_bytes<true, T>(p, L) : forward_scan_bytes<false, T>(p, L);
}

template <class T>
status log_recurrence_forward(const cuda_backend& be, const log_forward_args<T>& g) {
  detail::forward_plan p;
  if (status st = detail::plan_log_forward(g, p); st != status::success) return st;
  return has_value_forms(g) ? run_forward<true>(g, p, be) : run_forward<false>(g, p, be);
}

// ---------------------------------------------------------------------------------------------
// Packed sequences (cu_seqlens): the Problems above over the whole packed tensor, narrowed to
// each sequence by varlen_recurrence.cuh's loops (log_varlen_recurrence.cuh). The offsets live
// in device memory and are not read here (recurrence.hpp states the caller's contract).

namespace {

// Channel-last tensors without input sign arrays run as the batch's forward does: in the chunk
// loop, a block a sequence's group of chunks, or in lane packs on the staged lane tiles over
// every sequence's tiles (the packed tile plan of varlen_recurrence.cuh); the rest on
// dispatch_varlen's loops.
template <bool Values, class T>
status run_varlen_forward(const log_forward_tensors<T>& g, const detail::forward_plan& p, const varlen_shape& s,
                          const cuda_backend& be) {
  constexpr int K = cuda_detail::channels_per_lane<T>;
  const auto P = make_problem<Values>(g, p, s.total_length);
  bool chunked = false;
  if (const status st = cuda_detail::run_log_forward_chunks(P, be, &chunked, s.cu_seqlens, s.sequences);
      chunked || st != status::success)
    return st;
  if (cuda_detail::log_lane_packs_fit<K>(P))
    return cuda_detail::dispatch_packed_lane_tiles(cuda_detail::log_forward_lanes<T, K, Values>(P),
                                                   cuda_detail::lanewise_op<log_op, K>{}, s.cu_seqlens,
                                                   s.sequences, s.channels, s.channels / K, be);
  return cuda_detail::dispatch_varlen(P, log_op{}, s.cu_seqlens, s.sequences, s.channels, be);
}

// Workspace of a packed forward: the order of dispatch_varlen's lane loop, or the staged lane
// tiles' slot table and tile state where the layouts let the lane packs take it.
template <bool Values, class T>
std::size_t varlen_forward_bytes(const detail::forward_plan& p, const varlen_shape& s) {
  constexpr int K = cuda_detail::channels_per_lane<T>;
  const std::size_t order = cuda_detail::varlen_order_bytes(s);
  using cuda_detail::lane_packs_fit;
  if (!lane_packs_fit<K>(p.a) || !lane_packs_fit<K>(p.b) || !lane_packs_fit<K>(p.x)) return order;
  const std::size_t tiles = cuda_detail::packed_lane_workspace_bytes<cuda_detail::log_forward_lanes<T, K, Values>>(
      s.channels / K, s.total_length, s.sequences);
  return tiles > order ? tiles : order;
}

template <class T>
status varlen_forward(const log_forward_tensors<T>& g, const detail::forward_plan& p, const varlen_shape& s,
                      const cuda_backend& be) {
  return has_value_forms(g) ? run_varlen_forward<true>(g, p, s, be) : run_varlen_forward<false>(g, p, s, be);
}

}  // namespace

template <class T>
std::size_t log_recurrence_workspace_size(const log_varlen_forward_args<T>& g) {
  detail::forward_plan p;
  if (detail::plan_log_varlen_forward(g, false, p) != status::success) return 0;
  return has_value_forms(g) ? varlen_forward_bytes<true, T>(p, g.shape) : varlen_forward_bytes<false, T>(p, g.shape);
}

template <class T>
std::size_t log_recurrence_workspace_size(const log_varlen_backward_args<T>& g) {
  detail::log_backward_plan p;
  if (detail::plan_log_varlen_backward(g, false, p) != status::success) return 0;
  std::size_t sign_offset, scan = cuda_detail::varlen_order_bytes(g.shape);
  if (!g.log_x) {  // the recompute (laid out like b) runs first and shares what follows x
    const detail::forward_plan fp{p.a, p.b, p.b, p.sequences};
    const bool values = g.a || g.b || g.x0;
    const std::size_t forward =
        values ? varlen_forward_bytes<true, T>(fp, g.shape) : varlen_forward_bytes<false, T>(fp, g.shape);
    if (forward > scan) scan = forward;
  }
  return recompute_bytes(g, p, sign_offset) + scan;
}

template <class T>
status log_recurrence_forward(const cuda_backend& be, const log_varlen_forward_args<T>& g) {
  detail::forward_plan p;
  if (status st = detail::plan_log_varlen_forward(g, false, p); st != status::success) return st;
  return varlen_forward(g, p, g.shape, be);  // the plan holds the packed layouts
}

template <class T>
status log_recurrence_backward(const cuda_backend& be, const log_varlen_backward_args<T>& g) {
  detail::log_backward_plan p;
  if (status st = detail::plan_log_varlen_backward(g, false, p); st != status::success) return st;
  const varlen_shape& s = g.shape;
  if (s.sequences == 0 || s.channels == 0) return status::success;
  auto forward = [&](const log_forward_tensors<T>& t, const detail::forward_plan& fp, const cuda_backend& rest) {
    return varlen_forward(t, fp, s, rest);
  };
  auto backward = [&](const T* log_x, const std::uint8_t* x_negative, const cuda_backend& rest) {
    auto run = [&](auto values) {
      return cuda_detail::dispatch_varlen(
          make_backward_problem<decltype(values)::value>(g, p, s.total_length, log_x, x_negative),
          log_op{}, s.cu_seqlens, s.sequences, s.channels, rest);
    };
    return has_value_forms(g) ? run(std::true_type{}) : run(std::false_type{});
  };
  return backward_with_x(g, p, s.total_length, log_recurrence_workspace_size(g), be, forward, backward);
}

template status log_recurrence_forward<float>(const cuda_backend&, const log_forward_args<float>&);
template status log_recurrence_forward<bfloat16>(const cuda_backend&, const log_forward_args<bfloat16>&);
template std::size_t log_recurrence_workspace_size<float>(const log_forward_args<float>&);
template std::size_t log_recurrence_workspace_size<bfloat16>(const log_forward_args<bfloat16>&);
template status log_recurrence_backward<float>(const cuda_backend&, const log_backward_args<float>&);
template status log_recurrence_backward<bfloat16>(const cuda_backend&, const log_backward_args<bfloat16>&);
template std::size_t log_recurrence_workspace_size<float>(const log_backward_args<float>&);
template std::size_t log_recurrence_workspace_size<bfloat16>(const log_backward_args<bfloat16>&);
#define PARSCAN_INSTANTIATE_LOG_VARLEN(T)                                                                  \
  template status log_recurrence_forward<T>(const cuda_backend&, const log_varlen_forward_args<T>&);   \
  template status log_recurrence_backward<T>(const cuda_backend&, const log_varlen_backward_args<T>&); \
  template std::size_t log_recurrence_workspace_size<T>(const log_varlen_forward_args<T>&);            \
  template std::size_t log_recurrence_workspace_size<T>(const log_varlen_backward_args<T>&);
PARSCAN_INSTANTIATE_LOG_VARLEN(float)
PARSCAN_INSTANTIATE_LOG_VARLEN(bfloat16)
#undef PARSCAN_INSTANTIATE_LOG_VARLEN

}  // namespace parscan
