// parscan/cuda/recurrence/recurrence_head_pads.cuh — the gated recurrence's Problems
// (recurrence_problems.cuh) for sequences that start off 16-byte boundaries.
//
// A run of V = 16/sizeof(T) steps is one 16-byte access only when it is aligned. In a (B, D, T)
// tensor whose T·sizeof(T) is not a multiple of 16, sequence s starts at s·T elements, so every
// sequence but the first would read and write all its runs a step at a time (T = 100003 ran at
// 59% of copy against 92% for T = 50000 on an H100). head_padded<Problem> scans each sequence
// as a virtual one of T + V - 1 steps, the same for all so the tiling is untouched: virtual
// position p is the real processing index k = p - pad, where pad (0 … V-1, per sequence) puts
// k = 0 as far past a 16-byte boundary as the sequence's first processed step is. Every whole
// run of real steps is then aligned and goes to the Problem's own vector and staged paths; the
// first and last runs, partly virtual, are read and written step by step, their real steps in
// the run's first slots and the identity (1, -0) after them. So the identity only ever follows
// a step, where (A, B)·(1, -0) = (A, B + -0) = (A, B) bit for bit, -0, ±inf and NaN included;
// before a step (a, b) it would give a·(-0) + b, NaN for an infinite gate. A lane folds its run
// left to right, and the scan's outputs for the run are taken in the same order, so the slots
// need not match positions within the run. The total after the virtual tail is the total at
// the last real step, so finish() still gives x_final (dx0). A sequence whose tensors are
// misaligned differently gets pad 0 and runs as without pads.
//
// A wrapper rather than a flag in the Problems: the aligned case keeps exactly the code it had
// (a run-time flag cost the aligned backward 10 points of copy).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "../../layout.hpp"
#include "../device/dispatch_scan.cuh"
#include "recurrence_problems.cuh"

namespace parscan::cuda_detail {

/// Steps of T by which p is past the previous 16-byte boundary; -1 when that is not a whole
/// number of steps.
template <class T>
__device__ PARSCAN_INLINE int steps_past_boundary(const T* p) {
  const int bytes = static_cast<int>(reinterpret_cast<std::uintptr_t>(p) % 16);
  return bytes % static_cast<int>(sizeof(T)) != 0 ? -1 : bytes / static_cast<int>(sizeof(T));
}

/// The head pad of a sequence of `steps` steps whose tensors start at `first`, `rest`...: the
/// steps from the 16-byte boundary before the first processed step (the sequence's start, or
/// with `backwards` its end) to that step, when all tensors agree; 0 otherwise.
template <int V, class T, class... Rest>
__device__ PARSCAN_INLINE int head_pad(index_t steps, bool backwards, const T* first, const Rest*... rest) {
  const int m = steps_past_boundary(first);
  if (m < 0 || ((steps_past_boundary(rest) != m) || ...)) return 0;
  return backwards ? (V - static_cast<int>((m + steps) % V)) % V : m;
}

/// Whether every sequence of the tensor at p (layout l) starts on a 16-byte boundary.
template <class T>
inline bool sequences_start_aligned(const T* p, const sequence_layout& l, int V) {
  const bool by_sequence = l.count <= 1 || l.sequence_stride % V == 0;
  const bool by_group = l.groups <= 1 || l.group_stride % V == 0;
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && by_sequence && by_group;
}

/// Whether head pads turn scalar runs into aligned ones: runs of several steps of a real type
/// (complex·1 is not exact for infinities), steps adjacent in memory, and some sequence that
/// starts off a 16-byte boundary or a length that is not a whole number of runs.
template <int V, class T, class... Layouts>
inline bool head_pads_help(index_t length, bool lane_major, const std::pair<const T*, Layouts>&... tensors) {
  if (V <= 1 || !std::is_floating_point_v<compute_t<T>> || lane_major || length <= 0) return false;
  if (((tensors.second.step_stride != 1) || ...)) return false;
  return length % V != 0 || !(sequences_start_aligned(tensors.first, tensors.second, V) && ...);
}

/// The forward's tensors that decide its pads: a, b and x, first processed step at the start
/// (or the end, reversed).
template <class T>
bool head_pads_help(const recurrence_forward_problem<T>& P) {
  using L = sequence_layout;
  return head_pads_help<recurrence_forward_problem<T>::run, T>(P.length, P.lane_major, std::pair<const T*, L>{P.a, P.la},
                                                               std::pair<const T*, L>{P.b, P.lb},
                                                               std::pair<const T*, L>{P.x, P.lx});
}
template <class T>
__device__ PARSCAN_INLINE int head_pad_of(const recurrence_forward_problem<T>& P,
                                          const typename recurrence_forward_problem<T>::cursor& c) {
  return head_pad<recurrence_forward_problem<T>::run>(P.length, P.reverse, c.a, c.b, c.x);
}

/// The backward's: a, dx, x (staged with the run's own steps), da and db; it processes the
/// forward's steps last to first.
template <class T>
bool head_pads_help(const recurrence_backward_problem<T>& P) {
  using L = sequence_layout;
  return head_pads_help<recurrence_backward_problem<T>::run, T>(
      P.length, P.lane_major, std::pair<const T*, L>{P.a, P.la}, std::pair<const T*, L>{P.dx, P.ldx},
      std::pair<const T*, L>{P.x, P.lx}, std::pair<const T*, L>{P.da, P.lda}, std::pair<const T*, L>{P.db, P.ldb});
}
template <class T>
__device__ PARSCAN_INLINE int head_pad_of(const recurrence_backward_problem<T>& P,
                                          const typename recurrence_backward_problem<T>::cursor& c) {
  return head_pad<recurrence_backward_problem<T>::run>(P.length, !P.forward_reverse, c.a, c.dx, c.x, c.da, c.db);
}

/// Problem over virtual sequences of Problem::run - 1 more steps (see the top of this file).
/// Problem's positions are its real processing indices; its length is the real length.
template <class Problem>
struct head_padded {
  using acc_type = typename Problem::acc_type;
  static constexpr int run = Problem::run;
  static constexpr int staged_tensors = Problem::staged_tensors;
  static constexpr int staged_lane_bytes = cuda_detail::staged_lane_bytes<Problem>;
  static constexpr int lane_steps = default_lane_steps<Problem>;

  Problem base;
  index_t length;  // virtual steps: the real length + run - 1
  bool lane_major, exclusive;

  PARSCAN_HD explicit head_padded(const Problem& P)
      : base(P), length(P.length + run - 1), lane_major(P.lane_major), exclusive(P.exclusive) {}

  struct cursor {
    typename Problem::cursor base;
    int pad;  // virtual steps before the first real one
  };
  __device__ PARSCAN_INLINE cursor at(index_t s) const {
    const typename Problem::cursor c = base.at(s);
    return {c, head_pad_of(base, c)};
  }
  __device__ PARSCAN_INLINE bool whole_run(index_t k) const { return k >= 0 && k + run <= base.length; }
  __device__ PARSCAN_INLINE bool is_real(index_t k) const { return k >= 0 && k < base.length; }
  // The virtual steps' element: after a step, b = -0 leaves every b, -0 included, unchanged.
  static __device__ PARSCAN_INLINE acc_type pad_element() {
    using C = typename Problem::C;
    return acc_type(C(1), -C(0));
  }
  // A partly virtual run starting at processing index k0: its real steps are first … last - 1,
  // and slot v holds step first + v.
  __device__ PARSCAN_INLINE index_t first_real(index_t k0) const { return k0 > 0 ? k0 : 0; }
  __device__ PARSCAN_INLINE index_t end_real(index_t k0) const {
    return k0 + run < base.length ? k0 + run : base.length;
  }

  __device__ PARSCAN_INLINE void load_run(const cursor& c, index_t pos, acc_type (&items)[run]) const {
    const index_t k0 = pos - c.pad;
    if (whole_run(k0)) return base.load_run(c.base, k0, items);
    const index_t first = first_real(k0), end = end_real(k0);
#pragma unroll
    for (int v = 0; v < run; ++v) items[v] = first + v < end ? base.load_at(c.base, first + v) : pad_element();
  }
  __device__ PARSCAN_INLINE void store_run(const cursor& c, index_t pos, const acc_type (&items)[run]) const {
    const index_t k0 = pos - c.pad;
    if (whole_run(k0)) return base.store_run(c.base, k0, items);
    const index_t first = first_real(k0), end = end_real(k0);
#pragma unroll
    for (int v = 0; v < run; ++v)
      if (first + v < end) base.store_at(c.base, first + v, items[v]);
  }
  __device__ PARSCAN_INLINE bool stage_run(const cursor& c, index_t pos, unsigned char* slot, int tensor_stride) const {
    const index_t k0 = pos - c.pad;
    return whole_run(k0) && base.stage_run(c.base, k0, slot, tensor_stride);
  }
  __device__ PARSCAN_INLINE void load_staged(const cursor& c, index_t pos, const unsigned char* slot, int tensor_stride,
                                             bool staged, acc_type (&items)[run]) const {
    if (staged) return base.load_staged(c.base, pos - c.pad, slot, tensor_stride, true, items);
    load_run(c, pos, items);
  }
  // A staged run is a whole real one (stage_run), so the Problem stores it itself.
  template <class Base = Problem, class = std::enable_if_t<has_staged_store<Base>>>
  __device__ PARSCAN_INLINE void store_staged(const cursor& c, index_t pos, const unsigned char* slot,
                                              int tensor_stride, const acc_type (&items)[run]) const {
    base.store_staged(c.base, pos - c.pad, slot, tensor_stride, items);
  }
  // Lane tiles never run padded (lane-major layouts have step strides other than 1); these
  // keep the kernels that dispatch_scan instantiates compiling.
  __device__ PARSCAN_INLINE acc_type load_at(const cursor& c, index_t pos) const {
    return is_real(pos - c.pad) ? base.load_at(c.base, pos - c.pad) : pad_element();
  }
  __device__ PARSCAN_INLINE void store_at(const cursor& c, index_t pos, const acc_type& v) const {
    if (is_real(pos - c.pad)) base.store_at(c.base, pos - c.pad, v);
  }
  __device__ PARSCAN_INLINE maybe<acc_type> initial(index_t s) const { return base.initial(s); }
  __device__ PARSCAN_INLINE void finish(index_t s, const acc_type& total) const { base.finish(s, total); }
};

/// Workspace bytes of Problem over sequences of `length` steps, padded or not.
template <class Problem>
std::size_t recurrence_workspace_bytes(index_t sequences, index_t length) {
  const std::size_t plain = scan_workspace_bytes<Problem>(sequences, length);
  const std::size_t padded =
      length > 0 ? scan_workspace_bytes<head_padded<Problem>>(sequences, length + Problem::run - 1) : 0;
  return plain > padded ? plain : padded;
}

/// Runs Problem (one channel per lane), through head pads where they help.
template <class Problem, class Op>
status dispatch_recurrence(const Problem& P, const Op& op, index_t sequences, const cuda_backend& be) {
  if (head_pads_help(P)) return dispatch_scan(head_padded<Problem>(P), op, sequences, be);
  return dispatch_scan(P, op, sequences, be);
}

}  // namespace parscan::cuda_detail
