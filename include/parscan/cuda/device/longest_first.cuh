// parscan/cuda/device/longest_first.cuh — packed sequences longest first: the order in which
// the packed lane loop (recurrence/varlen_recurrence.cuh, lane_loop_order) hands out its jobs.
// Blocks start in block order as earlier ones finish, so taking the longest sequences first is
// longest-processing-time-first list scheduling: the grid's last blocks to start hold the
// shortest jobs and end together. The sort is CUB's device radix sort on the lengths, in one
// translation unit of the library (src/cuda/longest_first.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "../../config.hpp"
#include "../../status.hpp"

namespace parscan::cuda_detail {

/// Workspace bytes of longest_first for `sequences` sequences of `total_length` steps in all
/// (256-byte aligned pieces); 0 where nothing is sorted (fewer than two sequences, or 2^31 or
/// more, which keep the index order).
std::size_t longest_first_bytes(index_t sequences, index_t total_length);

/// Sorts the N sequences that `offsets` (N + 1, device memory) describe by length, longest
/// first and equal lengths in index order, into `workspace` (longest_first_bytes of it), and
/// points `order` at the N indices there; leaves `order` null where longest_first_bytes is 0.
/// Lengths are clamped to [0, total_length] first, so offsets that break the caller's contract
/// still give a permutation.
status longest_first(const std::int64_t* offsets, index_t sequences, index_t total_length, void* workspace,
                     cudaStream_t stream, const index_t*& order);

/// The sequence that the q-th job group of a loop belongs to: order[q], or q in index order.
__device__ PARSCAN_INLINE index_t sequence_at(const index_t* order, index_t q) { return order ? order[q] : q; }

}  // namespace parscan::cuda_detail
