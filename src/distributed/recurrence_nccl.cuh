// src/distributed/recurrence_nccl.cuh — the NCCL path of the distributed gated recurrence for
// one dtype: the shared passes (parscan/distributed/passes.hpp) on the NCCL executor. Each
// recurrence_nccl_<dtype>.cu instantiates it once, so the dtypes compile in parallel.
#pragma once

#include <parscan/distributed.cuh>

namespace parscan::distributed {

template <class T>
status gated_recurrence_forward(const cuda_backend& be, ncclComm_t comm, const gated_forward_args<T>& args, T* x_entry) {
  cuda_detail::nccl_executor ex(be, comm);
  if (status s = ex.init(); s != status::success) return s;
  return recurrence_forward_passes(ex, args, x_entry);
}

template <class T>
status gated_recurrence_backward(const cuda_backend& be, ncclComm_t comm, const gated_backward_args<T>& args) {
  cuda_detail::nccl_executor ex(be, comm);
  if (status s = ex.init(); s != status::success) return s;
  return recurrence_backward_passes(ex, args);
}

}  // namespace parscan::distributed

#define PARSCAN_DISTRIBUTED_RECURRENCE(T)                                                                        \
  template parscan::status parscan::distributed::gated_recurrence_forward<T>(                                   \
      const parscan::cuda_backend&, ncclComm_t, const parscan::gated_forward_args<T>&, T*);                     \
  template parscan::status parscan::distributed::gated_recurrence_backward<T>(                                  \
      const parscan::cuda_backend&, ncclComm_t, const parscan::gated_backward_args<T>&);
