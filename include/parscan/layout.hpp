// parscan/layout.hpp — how a batch of sequences sits in memory.
//
// Sequence s (0 ≤ s < groups·count) has group g = s / count and index c = s % count inside
// it; its step t lives at element offset
//     g·group_stride + c·sequence_stride + t·step_stride.
// `count`, `length`, `sequence_stride` and `step_stride` describe any 2-D batch; the optional
// group dimension lets a (B, T, D) tensor (channel-last) be scanned along T without a
// transpose, since its B·D sequences do not share one stride. Strides count elements, not
// bytes, and are never negative (use direction::reverse to scan backwards).
//
// An output layout must be nested: ordered by stride, each dimension's stride steps past
// everything the smaller ones reach. Every dense or padded tensor layout is; a few exotic
// interleavings that happen not to collide are refused as overlapping_output.
#pragma once

#include "config.hpp"

namespace parscan {

struct sequence_layout {
  index_t count = 1;            // sequences per group
  index_t length = 0;           // steps per sequence
  index_t sequence_stride = 0;  // elements between sequences c and c+1 of a group
  index_t step_stride = 1;      // elements between steps t and t+1
  index_t groups = 1;           // outer batch dimension
  index_t group_stride = 0;     // elements between groups g and g+1

  /// One contiguous sequence of n elements.
  static constexpr sequence_layout contiguous(index_t n) { return {1, n, n, 1, 1, 0}; }
  /// `sequences` rows of `length` contiguous steps: a (B, D, T) tensor is (B·D, T).
  static constexpr sequence_layout time_contiguous(index_t sequences, index_t length) {
    return {sequences, length, length, 1, 1, 0};
  }
  /// A (batch, length, channels) tensor scanned along its middle dimension.
  static constexpr sequence_layout channel_last(index_t batch, index_t length, index_t channels) {
    return {channels, length, 1, channels, batch, length * channels};
  }

  constexpr index_t num_sequences() const { return groups * count; }

  /// Where sequence s sits: its group and its index inside the group. Layouts of one shape
  /// (every tensor of a recurrence call) share `count`, so one place, one division, serves
  /// them all: the kernels find a sequence's tensors with offset_of(place_of(s)) on each.
  struct place {
    index_t group, index;
  };
  PARSCAN_HD constexpr place place_of(index_t s) const { return {s / count, s % count}; }
  PARSCAN_HD constexpr index_t offset_of(const place& q) const {
    return q.group * group_stride + q.index * sequence_stride;
  }
  PARSCAN_HD constexpr index_t sequence_offset(index_t s) const { return offset_of(place_of(s)); }
  PARSCAN_HD constexpr index_t offset(index_t s, index_t t) const { return sequence_offset(s) + t * step_stride; }
};

enum class direction {
  forward,  // steps 0, 1, …, length-1; "earlier" means a lower index
  reverse,  // steps length-1, …, 0; "earlier" means a higher index
};

}  // namespace parscan
