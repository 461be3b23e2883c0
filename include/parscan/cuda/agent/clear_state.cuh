// parscan/cuda/agent/clear_state.cuh — the zeroing of a look-back's state (its records and
// tile counter) as a grid of its own that lets the scan's grid start at once.
//
// A cudaMemsetAsync ahead of the scan kernel serialises the two: the scan's launch begins only
// when the memset has ended. Launched with programmatic stream serialization after this grid,
// the scan's blocks are placed and start while it runs, and wait for its writes
// (wait_for_prerequisite_grids) before they first touch the state, so the zeroing and the
// launch between the two grids overlap: about 1 µs a call on an H200 (docs/performance.md,
// "The look-back state zeroed by a grid that lets the scan start").
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "../thread/grid_dependency.cuh"

namespace parscan::cuda_detail {

constexpr int clear_state_threads = 256;

/// Zeroes `count` 16-byte words at `words`, a grid-stride loop of Threads-thread blocks. Lets the
/// next grid start first: that grid must wait for this one before it reads or writes the words.
template <int Threads>
__global__ void __launch_bounds__(Threads) clear_state_kernel(uint4* words, index_t count) {
  allow_dependent_grids();
  const index_t stride = static_cast<index_t>(gridDim.x) * Threads;
  for (index_t i = static_cast<index_t>(blockIdx.x) * Threads + threadIdx.x; i < count; i += stride)
    words[i] = uint4{0u, 0u, 0u, 0u};
}

}  // namespace parscan::cuda_detail
