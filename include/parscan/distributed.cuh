// parscan/distributed.cuh — the NCCL path of parscan/distributed.hpp: the executor that runs
// distributed/passes.hpp on a CUDA stream (per-sequence steps as small kernels, the exchange as
// one in-place ncclAllGather) and the generic forms, which are header-only like the core's CUDA
// scans because the operator is the caller's. Include from a .cu file; link parscan::distributed.
//
// Nothing here synchronises the host: the kernels, the all-gather and the core's passes are all
// enqueued on backend.stream, in that order. The communicator's device must be the current one.
#pragma once

#include <nccl.h>

#include "cuda/runtime.cuh"
#include "cuda/scan.cuh"
#include "distributed.hpp"

namespace parscan::distributed {

namespace cuda_detail {

inline int& nccl_error_slot() {
  static thread_local int last = 0;
  return last;
}

inline status report(ncclResult_t r) {
  if (r == ncclSuccess) return status::success;
  nccl_error_slot() = static_cast<int>(r);
  return status::communication_error;
}

template <class F>
__global__ void for_each_kernel(index_t n, F f) {
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    f(i);
}

/// The executor of distributed/passes.hpp on the CUDA backend over NCCL.
class nccl_executor {
 public:
  nccl_executor(const cuda_backend& be, ncclComm_t comm) : be_(be), scratch_be_(without_workspace(be)), comm_(comm), lease_(scratch_be_) {}

  /// Asks NCCL for the rank and the rank count (host-side queries: no device work).
  status init() {
    if (!comm_) return status::null_pointer;
    if (status s = report(ncclCommUserRank(comm_, &rank_)); s != status::success) return s;
    return report(ncclCommCount(comm_, &ranks_));
  }
  rank_place place(direction dir) const { return {rank_, ranks_, dir}; }
  status scratch(std::size_t bytes, void*& p) {
    if (status s = lease_.acquire(bytes); s != status::success) return s;
    p = lease_.get();
    return status::success;
  }
  template <class F>
  status for_each(index_t n, const F& f) {
    if (n <= 0) return status::success;
    constexpr int threads = 256;
    const index_t blocks = (n + threads - 1) / threads;
    for_each_kernel<<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), threads, 0, be_.stream>>>(n, f);
    return parscan::cuda_detail::check_launch();
  }
  status all_gather(void* blocks, std::size_t block_bytes) {
    unsigned char* base = static_cast<unsigned char*>(blocks);
    // In place: NCCL reads this rank's block where the gathered result will hold it.
    return report(ncclAllGather(base + static_cast<std::size_t>(rank_) * block_bytes, base, block_bytes, ncclUint8,
                                comm_, be_.stream));
  }
  const cuda_backend& backend() const { return be_; }

 private:
  // The exchange's buffers live through the core passes, which take the caller's workspace,
  // so they come from the allocator or the library's pool instead.
  static cuda_backend without_workspace(cuda_backend be) {
    be.workspace = nullptr;
    be.workspace_bytes = 0;
    return be;
  }

  cuda_backend be_;
  cuda_backend scratch_be_;
  ncclComm_t comm_;
  int rank_ = 0, ranks_ = 1;
  // Declared after scratch_be_, which it refers to; released stream-ordered, after the passes.
  parscan::cuda_detail::workspace_lease lease_;
};

}  // namespace cuda_detail

/// CUDA backend's full form of every generic algorithm over NCCL (see distributed.hpp).
template <class In, class Out, class Acc, class Op>
status run_scan(const cuda_backend& be, ncclComm_t comm, const scan_problem<In, Out, Acc>& p, const Op& op) {
  cuda_detail::nccl_executor ex(be, comm);
  if (status s = ex.init(); s != status::success) return s;
  return scan_passes(ex, p, op);
}

}  // namespace parscan::distributed
