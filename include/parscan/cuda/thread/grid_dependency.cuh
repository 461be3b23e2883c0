// parscan/cuda/thread/grid_dependency.cuh — what one thread says or waits for when two grids
// in a stream overlap (programmatic dependent launch, sm_90): the first lets the next start
// before it ends, the next waits for the first's writes only where it needs them.
//
// Nothing before sm_90: there the launches stay serialised, and both are no-ops.
#pragma once

#include "../../config.hpp"

namespace parscan::cuda_detail {

/// Lets a grid launched after this one with programmatic stream serialization start now, before
/// this one ends (griddepcontrol.launch_dependents: a hint; nothing before sm_90).
__device__ PARSCAN_INLINE void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Waits until the grids this one was launched after have finished and their writes are visible
/// (griddepcontrol.wait; returns at once where the launch allowed no early start).
__device__ PARSCAN_INLINE void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace parscan::cuda_detail
