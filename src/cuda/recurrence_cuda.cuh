// src/cuda/recurrence_cuda.cuh — the gated recurrence on the CUDA backend: validate with
// the same planner as the host, build the forward or backward Problem, run the shared scan
// kernels. Instantiated per dtype by recurrence_<dtype>.cu so the dtypes compile in parallel.
#pragma once

#include <type_traits>

#include <parscan/cuda/device/dispatch_scan.cuh>
#include <parscan/cuda/generic/generic_problem.cuh>
#include <parscan/cuda/recurrence/channel_last_chunks.cuh>
#include <parscan/cuda/recurrence/recurrence_head_pads.cuh>
#include <parscan/cuda/recurrence/recurrence_lane_packs.cuh>
#include <parscan/cuda/recurrence/recurrence_problems.cuh>
#include <parscan/cuda/recurrence/varlen_recurrence.cuh>
#include <parscan/cuda/recurrence/whole_sequence_backward.cuh>
#include <parscan/ops/affine.hpp>
#include <parscan/recurrence.hpp>

#include "../common/varlen_args.hpp"

namespace parscan {
namespace cuda_detail {

inline std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }

template <class T>
recurrence_forward_problem<T> make_forward(const gated_forward_args<T>& g, const detail::forward_plan& p) {
  return {g.a,         g.b,         g.x,         g.x0,           g.x_final,
          p.a,         p.b,         p.x,         g.shape.length, g.reverse,
          g.gate == gate_form::log,
          is_lane_major(p.a) && is_lane_major(p.b) && is_lane_major(p.x)};
}

// Lane packs (recurrence_lane_packs.cuh): K channels per lane when every tensor's layout keeps
// K-channel groups whole and the pointers are aligned to them; otherwise one channel per lane,
// exactly as without packs. The workspace sizes look at the layouts only, an upper bound
// whatever the pointers turn out to be.
template <class T>
bool uses_lane_packs(const recurrence_forward_problem<T>& f) {
  constexpr int K = channels_per_lane<T>;
  return f.lane_major && f.length > 0 && lane_packs_fit<K>(f.la, f.a) && lane_packs_fit<K>(f.lb, f.b) &&
         lane_packs_fit<K>(f.lx, f.x);
}
template <class T>
bool uses_lane_packs(const recurrence_backward_problem<T>& b) {
  constexpr int K = channels_per_lane<T>;
  return b.lane_major && b.length > 0 && lane_packs_fit<K>(b.la, b.a) && lane_packs_fit<K>(b.lx, b.x) &&
         lane_packs_fit<K>(b.ldx, b.dx) && lane_packs_fit<K>(b.lda, b.da) && lane_packs_fit<K>(b.ldb, b.db);
}

/// Runs a forward or backward Problem. On channel-last layouts with groups enough to fill the
/// device, a block owns a group of channels for the whole length instead of chaining tiles:
/// the chunk loop (recurrence/channel_last_chunks.cuh: a 16-byte word of channels a lane, a
/// block per 16, 8 or 4 words) for the 16-bit types, complex<float>, the float backward and (on
/// GPUs that give each SM an H200's share of the memory bandwidth: chunk_loop_takes) the float
/// forward, where every tensor keeps whole chunks (H100, (8, T, 1536), against the staged lane tiles in one
/// process: bf16 forward 47 / 57 / 60% of copy at T = 1024 / 4096 / 16384, backward 51 / 55 /
/// 54%, float backward 57–59 / 60 / 58%, complex forward – / 61 / 59%, backward – / 55 / 52%;
/// the chunk loop 74 / 88 / 94–95% (256-byte rows), 78–79 / 91–92 / 96%, 78 / 85 / 89%,
/// – / 86 / 90% and – / 87 / 90%, docs/performance.md), the lane loop
/// (agent/lane_loop.cuh: 88% of copy against the staged lane tiles' 51% at (8, 4096, 1536), H100)
/// for the rest of the float forward in lane packs. Otherwise in lane packs when they fit (the
/// staged lane tiles), else one channel per lane (with head pads where sequences start off
/// 16-byte boundaries).
template <template <class, int> class Lanes, class T, class Problem>
status run_recurrence(const Problem& P, index_t sequences, const cuda_backend& be) {
  constexpr int K = channels_per_lane<T>;
  if constexpr (chunk_type<T>) {
    if (chunk_loop_fits(P)) {
      const device_facts dev = current_device();
      if (dev.st != status::success) return dev.st;
      const chunk_group g = chunk_loop_group<T>(P, P.la.groups, dev);
      if (g.width > 0) return launch_chunk_loop<T>(P, g, dev, be);
    }
  }
  if (uses_lane_packs(P)) {
    if constexpr (std::is_same_v<T, float> && std::is_same_v<Problem, recurrence_forward_problem<T>>) {
      const device_facts dev = current_device();
      if (dev.st != status::success) return dev.st;
      if (lane_loop_fills(sequences, dev.multiprocessors))
        return launch_lane_loop(Lanes<T, K>(P), lanewise_op<affine_op<T>, K>{}, sequences / K, be);
    }
    return dispatch_lane_tiles(Lanes<T, K>(P), lanewise_op<affine_op<T>, K>{}, sequences / K, be);
  }
  return dispatch_recurrence(P, affine_op<T>{}, sequences, be);
}

/// Workspace bytes of Problem, and of its lane packs if the layouts let them be used.
template <template <class, int> class Lanes, class T, class Problem>
std::size_t recurrence_scan_bytes(index_t sequences, index_t length, bool packs_fit) {
  std::size_t bytes = recurrence_workspace_bytes<Problem>(sequences, length);
  constexpr int K = channels_per_lane<T>;
  if (packs_fit) {
    const std::size_t packed = lane_tile_workspace_bytes<Lanes<T, K>>(sequences / K, length);
    if (packed > bytes) bytes = packed;
  }
  return bytes;
}

// Whether packs of K channels fit the layouts of a forward call, of a backward call, and of the
// forward that recomputes x (written laid out like b) for a backward call: the workspace sizes
// look at the layouts only, an upper bound whatever the pointers turn out to be.
template <int K>
bool packs_fit(const detail::forward_plan& p) {
  return lane_packs_fit<K>(p.a) && lane_packs_fit<K>(p.b) && lane_packs_fit<K>(p.x);
}
template <int K>
bool packs_fit(const detail::backward_plan& p) {
  return lane_packs_fit<K>(p.a) && lane_packs_fit<K>(p.x) && lane_packs_fit<K>(p.dx) && lane_packs_fit<K>(p.da) &&
         lane_packs_fit<K>(p.db);
}
template <int K>
bool recompute_packs_fit(const detail::backward_plan& p) {
  return lane_packs_fit<K>(p.a) && lane_packs_fit<K>(p.b);
}

// A batch's backward without x over sequences one block holds (whole_sequence_backward.cuh)
// recomputes x in registers: no workspace, one kernel. (Packed sequences do not take it.)
template <class T>
whole_sequence_backward_args<T> whole_sequence_args(const gated_backward_args<T>& g, const detail::backward_plan& p) {
  return {g.a, g.b, g.x0, g.dx, g.dx_final, g.da, g.db, g.x0 ? g.dx0 : nullptr, p.a, p.b, p.dx, p.da, p.db,
          g.shape.length, g.reverse, g.gate == gate_form::log};
}
template <class T>
bool takes_whole_sequences(const gated_backward_args<T>& g, const detail::backward_plan& p) {
  return !g.x && whole_sequence_backward_fits(whole_sequence_args(g, p));
}

// Bytes of the recomputed x (laid out like b) when backward is not given x.
template <class T>
std::size_t recompute_bytes(const gated_backward_args<T>& g, const detail::backward_plan& p) {
  if (g.x) return 0;
  index_t span = 0;
  detail::check_layout(p.b, sizeof(T), span);
  return align256(static_cast<std::size_t>(span) * sizeof(T));
}

}  // namespace cuda_detail

template <class T>
std::size_t gated_recurrence_workspace_size(const gated_forward_args<T>& g) {
  detail::forward_plan p;
  if (detail::plan_forward(g, p) != status::success) return 0;
  using namespace cuda_detail;
  const bool fit = packs_fit<channels_per_lane<T>>(p);
  using forward_problem = recurrence_forward_problem<T>;
  return recurrence_scan_bytes<recurrence_forward_lanes, T, forward_problem>(p.sequences, g.shape.length, fit);
}

template <class T>
std::size_t gated_recurrence_workspace_size(const gated_backward_args<T>& g) {
  detail::backward_plan p;
  if (detail::plan_backward(g, p) != status::success) return 0;
  using namespace cuda_detail;
  if (takes_whole_sequences(g, p)) return 0;
  // The recompute (forward) and the backward scan run one after the other and share the rest.
  // The recomputed x is laid out like b.
  constexpr int K = channels_per_lane<T>;
  const bool forward_fit = recompute_packs_fit<K>(p), backward_fit = packs_fit<K>(p);
  const index_t S = p.sequences, L = g.shape.length;
  using forward_problem = recurrence_forward_problem<T>;
  using backward_problem = recurrence_backward_problem<T>;
  const std::size_t forward =
      g.x ? 0 : recurrence_scan_bytes<recurrence_forward_lanes, T, forward_problem>(S, L, forward_fit);
  const std::size_t backward =
      recurrence_scan_bytes<recurrence_backward_lanes, T, backward_problem>(S, L, backward_fit);
  return recompute_bytes(g, p) + (forward > backward ? forward : backward);
}

template <class T>
status gated_recurrence_forward(const cuda_backend& be, const gated_forward_args<T>& g) {
  detail::forward_plan p;
  if (status st = detail::plan_forward(g, p); st != status::success) return st;
  return cuda_detail::run_recurrence<cuda_detail::recurrence_forward_lanes, T>(cuda_detail::make_forward(g, p),
                                                                              p.sequences, be);
}

template <class T>
status gated_recurrence_backward(const cuda_backend& be, const gated_backward_args<T>& g) {
  detail::backward_plan p;
  if (status st = detail::plan_backward(g, p); st != status::success) return st;
  if (p.sequences == 0) return status::success;
  if (cuda_detail::takes_whole_sequences(g, p))
    return cuda_detail::launch_whole_sequence_backward(cuda_detail::whole_sequence_args(g, p), p.sequences, be);

  const std::size_t x_bytes = cuda_detail::recompute_bytes(g, p);
  cuda_detail::workspace_lease ws(be);
  // One lease for the recomputed x and the kernels' storage after it. With x given the call holds
  // nothing of its own: the kernels lease what they need, the lane loop nothing.
  const std::size_t bytes = x_bytes > 0 ? gated_recurrence_workspace_size(g) : 0;
  if (status st = ws.acquire(bytes); st != status::success) return st;
  const cuda_backend rest = cuda_detail::backend_after(be, ws, x_bytes, bytes);

  const T* x = g.x;
  if (!x && g.shape.length > 0) {  // recompute the forward states into the workspace
    T* x_tmp = static_cast<T*>(ws.get());
    gated_forward_args<T> f{};
    f.shape = g.shape;
    f.a = g.a;
    f.b = g.b;
    f.x = x_tmp;
    f.x0 = g.x0;
    f.reverse = g.reverse;
    f.gate = g.gate;
    const auto fp = cuda_detail::make_forward(f, detail::forward_plan{p.a, p.b, p.b, p.sequences});
    if (status st = cuda_detail::run_recurrence<cuda_detail::recurrence_forward_lanes, T>(fp, p.sequences, rest);
        st != status::success)
      return st;
    x = x_tmp;
  }
  using cuda_detail::is_lane_major;
  cuda_detail::recurrence_backward_problem<T> bp{};
  bp.a = g.a, bp.x = x, bp.dx = g.dx, bp.x0 = g.x0, bp.dx_final = g.dx_final;
  bp.da = g.da, bp.db = g.db;
  bp.dx0 = g.x0 ? g.dx0 : nullptr;  // dx0 is an output only when x0 is given
  bp.la = p.a, bp.lx = p.x, bp.ldx = p.dx, bp.lda = p.da, bp.ldb = p.db;
  bp.length = g.shape.length;
  bp.forward_reverse = g.reverse;
  bp.log_gate = g.gate == gate_form::log;
  bp.lane_major = is_lane_major(p.a) && is_lane_major(p.x) && is_lane_major(p.dx) && is_lane_major(p.da) &&
                  is_lane_major(p.db);
  return cuda_detail::run_recurrence<cuda_detail::recurrence_backward_lanes, T>(bp, p.sequences, rest);
}

// ---------------------------------------------------------------------------------------------
// Packed sequences (cu_seqlens): the Problems above over the whole packed tensor, narrowed to
// each sequence by varlen_recurrence.cuh. The offsets live in device memory and are not read
// here (see recurrence.hpp for the caller's contract).

namespace cuda_detail {
template <class T>
recurrence_forward_problem<T> make_varlen_forward(const gated_varlen_forward_args<T>& g, const detail::forward_plan& p) {
  gated_forward_args<T> whole = detail::packed_forward(g);
  whole.x0 = g.x0, whole.x_final = g.x_final;  // (N, D): sequence_of() steps through them by n·D
  return make_forward(whole, p);
}

/// Whether a packed Problem whose lane packs fit takes the staged lane tiles: all but the float
/// forward, whose lane loop is faster (bench_varlen on an H100, docs/performance.md).
template <class T, class Problem>
constexpr bool packed_lane_tiles_take =
    !(std::is_same_v<T, float> && std::is_same_v<Problem, recurrence_forward_problem<T>>);

/// Runs a packed forward or backward Problem: as the batch's run_recurrence, the chunk loop where
/// it takes the call and its (sequence, group) jobs fill the device; else where the lane packs
/// fit, in packs, as staged lane tiles of each sequence or (the float forward) the lane loop;
/// else varlen_recurrence.cuh's loops on the one-channel Problem.
template <template <class, int> class Lanes, class T, class Problem>
status run_varlen_recurrence(const Problem& P, const std::int64_t* cu_seqlens, index_t sequences, index_t channels,
                             const cuda_backend& be) {
  constexpr int K = channels_per_lane<T>;
  if constexpr (chunk_type<T>) {
    if (chunk_loop_fits(P)) {
      const device_facts dev = current_device();
      if (dev.st != status::success) return dev.st;
      const chunk_group g = chunk_loop_group<T>(P, sequences, dev);
      if (g.width > 0) return launch_packed_chunk_loop<T>(P, cu_seqlens, sequences, g, dev, be);
    }
  }
  if (uses_lane_packs(P)) {
    const Lanes<T, K> packs(P);
    const lanewise_op<affine_op<T>, K> op{};
    if constexpr (packed_lane_tiles_take<T, Problem>)
      return dispatch_packed_lane_tiles(packs, op, cu_seqlens, sequences, channels, channels / K, be);
    else
      return launch_varlen_lane_loop(packs, op, cu_seqlens, sequences, channels, channels / K, be);
  }
  return dispatch_varlen(P, affine_op<T>{}, cu_seqlens, sequences, channels, be);
}

/// Workspace bytes of a packed Problem: its staged lane tiles' where the layouts let it take them,
/// else, unless time-contiguous, the order of the sequences that the lane loop and the chunk loop
/// take (longest first, sorted where their grid takes more than one wave); the larger of the two
/// where the chunk loop may take the call.
template <template <class, int> class Lanes, class T, class Problem>
std::size_t varlen_scan_bytes(const varlen_shape& s, bool packs_fit) {
  constexpr int K = channels_per_lane<T>;
  const std::size_t order = varlen_order_bytes(s);
  if (packed_lane_tiles_take<T, Problem> && packs_fit) {
    const std::size_t tiles = packed_lane_workspace_bytes<Lanes<T, K>>(s.channels / K, s.total_length, s.sequences);
    return chunk_type<T> && order > tiles ? order : tiles;
  }
  return order;
}
}  // namespace cuda_detail

template <class T>
std::size_t gated_recurrence_workspace_size(const gated_varlen_forward_args<T>& g) {
  detail::varlen_forward_plan p;
  if (detail::plan_varlen_forward(g, false, p) != status::success) return 0;
  using namespace cuda_detail;
  const bool fit = packs_fit<channels_per_lane<T>>(p.whole);
  return varlen_scan_bytes<recurrence_forward_lanes, T, recurrence_forward_problem<T>>(g.shape, fit);
}

template <class T>
std::size_t gated_recurrence_workspace_size(const gated_varlen_backward_args<T>& g) {
  detail::varlen_backward_plan p;
  if (detail::plan_varlen_backward(g, false, p) != status::success) return 0;
  using namespace cuda_detail;
  constexpr int K = channels_per_lane<T>;
  const detail::backward_plan& w = p.whole;
  const bool forward_fit = recompute_packs_fit<K>(w), backward_fit = packs_fit<K>(w);
  const std::size_t forward =
      g.x ? 0 : varlen_scan_bytes<recurrence_forward_lanes, T, recurrence_forward_problem<T>>(g.shape, forward_fit);
  const std::size_t backward =
      varlen_scan_bytes<recurrence_backward_lanes, T, recurrence_backward_problem<T>>(g.shape, backward_fit);
  // x, when recomputed, then the scans' tile state
  return recompute_bytes(detail::packed_backward(g), w) + (forward > backward ? forward : backward);
}

template <class T>
status gated_recurrence_forward(const cuda_backend& be, const gated_varlen_forward_args<T>& g) {
  detail::varlen_forward_plan p;
  if (status st = detail::plan_varlen_forward(g, false, p); st != status::success) return st;
  return cuda_detail::run_varlen_recurrence<cuda_detail::recurrence_forward_lanes, T>(
      cuda_detail::make_varlen_forward(g, p.whole), g.shape.cu_seqlens, g.shape.sequences, g.shape.channels, be);
}

template <class T>
status gated_recurrence_backward(const cuda_backend& be, const gated_varlen_backward_args<T>& g) {
  detail::varlen_backward_plan p;
  if (status st = detail::plan_varlen_backward(g, false, p); st != status::success) return st;
  const index_t N = g.shape.sequences, D = g.shape.channels;
  if (N * D == 0) return status::success;
  const std::size_t x_bytes = cuda_detail::recompute_bytes(detail::packed_backward(g), p.whole);
  cuda_detail::workspace_lease ws(be);
  // As the batch's backward: a lease here only for a recomputed x.
  const std::size_t bytes = x_bytes > 0 ? gated_recurrence_workspace_size(g) : 0;
  if (status st = ws.acquire(bytes); st != status::success) return st;
  const cuda_backend rest = cuda_detail::backend_after(be, ws, x_bytes, bytes);

  const T* x = g.x;
  if (!x && g.shape.total_length > 0) {  // recompute the forward states, laid out like b
    T* x_tmp = static_cast<T*>(ws.get());
    gated_varlen_forward_args<T> f{};
    f.shape = g.shape;
    f.shape.layout = recurrence_layout::strided;
    f.a = g.a, f.b = g.b, f.x = x_tmp, f.x0 = g.x0;
    f.reverse = g.reverse, f.gate = g.gate;
    f.a_strides = detail::packed_strides(g.shape, g.a_strides);
    f.b_strides = f.x_strides = detail::packed_strides(g.shape, g.b_strides);
    const detail::forward_plan fp{p.whole.a, p.whole.b, p.whole.b, p.whole.sequences};
    if (status st = cuda_detail::run_varlen_recurrence<cuda_detail::recurrence_forward_lanes, T>(
            cuda_detail::make_varlen_forward(f, fp), g.shape.cu_seqlens, N, D, rest);
        st != status::success)
      return st;
    x = x_tmp;
  }
  using cuda_detail::is_lane_major;
  const detail::backward_plan& w = p.whole;
  cuda_detail::recurrence_backward_problem<T> bp{};
  bp.a = g.a, bp.x = x, bp.dx = g.dx, bp.x0 = g.x0, bp.dx_final = g.dx_final;
  bp.da = g.da, bp.db = g.db;
  bp.dx0 = g.x0 ? g.dx0 : nullptr;  // dx0 is an output only when x0 is given
  bp.la = w.a, bp.lx = w.x, bp.ldx = w.dx, bp.lda = w.da, bp.ldb = w.db;
  bp.length = g.shape.total_length;
  bp.forward_reverse = g.reverse;
  bp.log_gate = g.gate == gate_form::log;
  bp.lane_major = is_lane_major(w.a) && is_lane_major(w.x) && is_lane_major(w.dx) && is_lane_major(w.da) &&
                  is_lane_major(w.db);
  return cuda_detail::run_varlen_recurrence<cuda_detail::recurrence_backward_lanes, T>(bp, g.shape.cu_seqlens, N, D,
                                                                                       rest);
}

bool cuda_available();

}  // namespace parscan

#define PARSCAN_INSTANTIATE_CUDA_RECURRENCE(T)                                                       \
  template status gated_recurrence_forward<T>(const cuda_backend&, const gated_forward_args<T>&);    \
  template status gated_recurrence_backward<T>(const cuda_backend&, const gated_backward_args<T>&);  \
  template std::size_t gated_recurrence_workspace_size<T>(const gated_forward_args<T>&);             \
  template std::size_t gated_recurrence_workspace_size<T>(const gated_backward_args<T>&);            \
  template status gated_recurrence_forward<T>(const cuda_backend&, const gated_varlen_forward_args<T>&);   \
  template status gated_recurrence_backward<T>(const cuda_backend&, const gated_varlen_backward_args<T>&); \
  template std::size_t gated_recurrence_workspace_size<T>(const gated_varlen_forward_args<T>&);            \
  template std::size_t gated_recurrence_workspace_size<T>(const gated_varlen_backward_args<T>&);
