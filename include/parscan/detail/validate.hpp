// parscan/detail/validate.hpp — argument checks shared by every backend and entry point,
// so bad input is refused in one place before anything is written.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "../layout.hpp"
#include "../status.hpp"

namespace parscan::detail {

inline bool mul_overflows(index_t a, index_t b, index_t& r) { return __builtin_mul_overflow(a, b, &r); }
inline bool add_overflows(index_t a, index_t b, index_t& r) { return __builtin_add_overflow(a, b, &r); }

/// Sizes are non-negative, strides non-negative, and every offset and byte count fits.
/// On success `span` is one past the largest element offset (0 for an empty layout).
inline status check_layout(const sequence_layout& l, std::size_t elem_bytes, index_t& span) {
  span = 0;
  if (l.count < 0 || l.length < 0 || l.groups < 0) return status::negative_size;
  if (l.sequence_stride < 0 || l.step_stride < 0 || l.group_stride < 0) return status::invalid_stride;
  index_t total;
  if (mul_overflows(l.groups, l.count, total) || mul_overflows(total, l.length, total)) return status::size_overflow;
  if (total == 0) return status::success;
  index_t a, b, c, last;
  if (mul_overflows(l.groups - 1, l.group_stride, a) || mul_overflows(l.count - 1, l.sequence_stride, b) ||
      mul_overflows(l.length - 1, l.step_stride, c) || add_overflows(a, b, last) || add_overflows(last, c, last) ||
      add_overflows(last, 1, span))
    return status::size_overflow;
  index_t bytes;
  if (mul_overflows(span, static_cast<index_t>(elem_bytes), bytes)) return status::size_overflow;
  return status::success;
}

/// True when no two (group, sequence, step) triples map to one element. Dimensions are
/// sorted by stride; each stride must step past everything the smaller ones reach.
inline bool is_one_to_one(const sequence_layout& l) {
  struct dim { index_t extent, stride; };
  dim d[3] = {{l.groups, l.group_stride}, {l.count, l.sequence_stride}, {l.length, l.step_stride}};
  std::sort(d, d + 3, [](dim x, dim y) { return x.stride < y.stride; });
  index_t reach = 0;  // largest offset reachable by the smaller dimensions
  for (const dim& x : d) {
    if (x.extent <= 1) continue;
    if (x.stride <= reach) return false;
    reach += x.stride * (x.extent - 1);
  }
  return true;
}

inline bool ranges_overlap(const void* p, index_t p_bytes, const void* q, index_t q_bytes) {
  if (p_bytes == 0 || q_bytes == 0) return false;
  const auto a = reinterpret_cast<std::uintptr_t>(p), b = reinterpret_cast<std::uintptr_t>(q);
  return a < b + static_cast<std::uintptr_t>(q_bytes) && b < a + static_cast<std::uintptr_t>(p_bytes);
}

inline bool same_shape(const sequence_layout& x, const sequence_layout& y) {
  return x.groups == y.groups && x.count == y.count && x.length == y.length;
}

inline bool same_offsets(const sequence_layout& x, const sequence_layout& y) {
  const bool steps = x.length <= 1 || x.step_stride == y.step_stride;
  const bool seqs = x.count <= 1 || x.sequence_stride == y.sequence_stride;
  const bool grps = x.groups <= 1 || x.group_stride == y.group_stride;
  return same_shape(x, y) && steps && seqs && grps;
}

/// A read-only tensor: non-null when it holds data, and a valid layout.
struct tensor_ref {
  const void* ptr;
  sequence_layout layout;
  std::size_t elem_bytes;
  index_t span_bytes = 0;
};

/// Checks one input. Fills span_bytes.
inline status check_input(tensor_ref& t) {
  index_t span;
  if (status s = check_layout(t.layout, t.elem_bytes, span); s != status::success) return s;
  t.span_bytes = span * static_cast<index_t>(t.elem_bytes);
  if (span > 0 && t.ptr == nullptr) return status::null_pointer;
  return status::success;
}

/// Checks one output: as an input, plus one-to-one.
inline status check_output(tensor_ref& t) {
  if (status s = check_input(t); s != status::success) return s;
  if (t.span_bytes > 0 && !is_one_to_one(t.layout)) return status::overlapping_output;
  return status::success;
}

/// An output may alias an input only exactly: same address, same element size, same
/// offsets. Any other overlap of their byte ranges is refused.
inline status check_aliasing(const tensor_ref& out, const tensor_ref& in) {
  if (!ranges_overlap(out.ptr, out.span_bytes, in.ptr, in.span_bytes)) return status::success;
  if (out.ptr == in.ptr && out.elem_bytes == in.elem_bytes && same_offsets(out.layout, in.layout))
    return status::success;
  return status::overlapping_output;
}

/// Two outputs may not overlap at all.
inline status check_disjoint(const tensor_ref& x, const tensor_ref& y) {
  return ranges_overlap(x.ptr, x.span_bytes, y.ptr, y.span_bytes) ? status::overlapping_output : status::success;
}

/// Checks every input, then every output (filling their span_bytes); the first failure wins.
inline status check_tensors(std::initializer_list<tensor_ref*> inputs, std::initializer_list<tensor_ref*> outputs) {
  for (tensor_ref* t : inputs)
    if (status s = check_input(*t); s != status::success) return s;
  for (tensor_ref* t : outputs)
    if (status s = check_output(*t); s != status::success) return s;
  return status::success;
}

/// Segment offsets where the caller can read them (host memory): o[0] = 0, never decreasing,
/// o[n] ≤ total. A full pass, O(n).
inline status check_offsets(const std::int64_t* o, index_t n, index_t total) {
  if (o[0] != 0) return status::invalid_offsets;
  for (index_t i = 0; i < n; ++i)
    if (o[i + 1] < o[i]) return status::invalid_offsets;
  return o[n] <= total ? status::success : status::invalid_offsets;
}

/// A dense per-sequence array of n elements (carry in, carry out, x0, ...).
inline tensor_ref dense(const void* p, index_t n, std::size_t elem_bytes) {
  return {p, sequence_layout::contiguous(n), elem_bytes, 0};
}

}  // namespace parscan::detail
