// parscan/cuda/device/dispatch_chunk_loop.cuh — launching the chunk loop (agent/chunk_loop.cuh)
// over a batch of channel-last sequences.
#pragma once

#include "../agent/chunk_loop.cuh"
#include "../runtime.cuh"
#include "dispatch_scan.cuh"

namespace parscan::cuda_detail {

/// The chunk loop over a batch's `jobs` (chunk_group_for) with Chunks C: a block a job, as many
/// as are resident at most.
template <class shape, class Chunks>
status launch_batch_chunk_loop(const Chunks& C, index_t jobs, const device_facts& dev, const cuda_backend& be) {
  constexpr auto kernel = &chunk_loop_kernel<shape, Chunks, batch_chunk_jobs>;
  const int per_sm = blocks_per_multiprocessor<kernel>(shape::threads, dev.device, shape::smem_bytes);
  if (per_sm == 0) return status::exceeds_device_limits;
  const index_t resident = static_cast<index_t>(per_sm) * dev.multiprocessors;
  return launch(kernel, jobs < resident ? jobs : resident, shape::threads, shape::smem_bytes, be, C,
                batch_chunk_jobs{});
}

}  // namespace parscan::cuda_detail
