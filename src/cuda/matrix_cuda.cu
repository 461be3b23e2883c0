// src/cuda/matrix_cuda.cu — PLACEHOLDER for the matrix recurrence and matrix chains on the
// CUDA backend, to be replaced by the real kernels. Until then every entry point validates its
// arguments with the same planner as the host (so bad input gets the same status on both
// backends) and refuses valid input with status::unsupported; nothing is written, and no
// workspace is needed.
#include <parscan/matrix_recurrence.hpp>

#include "../common/matrix_args.hpp"

namespace parscan {

template <class T>
status matrix_recurrence_forward(const cuda_backend&, const matrix_forward_args<T>& g) {
  detail::matrix_forward_plan p;
  if (status st = detail::plan_matrix_forward(g, p); st != status::success) return st;
  return status::unsupported;
}

template <class T>
status matrix_recurrence_backward(const cuda_backend&, const matrix_backward_args<T>& g) {
  detail::matrix_backward_plan p;
  if (status st = detail::plan_matrix_backward(g, p); st != status::success) return st;
  return status::unsupported;
}

template <class T>
status matrix_chain(const cuda_backend&, const matrix_chain_args<T>& g) {
  detail::matrix_chain_plan p;
  if (status st = detail::plan_matrix_chain(g, p); st != status::success) return st;
  return status::unsupported;
}

template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_forward_args<T>&) { return 0; }
template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_backward_args<T>&) { return 0; }
template <class T>
std::size_t matrix_chain_workspace_size(const matrix_chain_args<T>&) { return 0; }

#define PARSCAN_INSTANTIATE_MATRIX_CUDA(T)                                                              \
  template status matrix_recurrence_forward<T>(const cuda_backend&, const matrix_forward_args<T>&);    \
  template status matrix_recurrence_backward<T>(const cuda_backend&, const matrix_backward_args<T>&);  \
  template status matrix_chain<T>(const cuda_backend&, const matrix_chain_args<T>&);                   \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_forward_args<T>&);             \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_backward_args<T>&);            \
  template std::size_t matrix_chain_workspace_size<T>(const matrix_chain_args<T>&);
PARSCAN_INSTANTIATE_MATRIX_CUDA(float)
PARSCAN_INSTANTIATE_MATRIX_CUDA(double)
PARSCAN_INSTANTIATE_MATRIX_CUDA(bfloat16)
PARSCAN_INSTANTIATE_MATRIX_CUDA(float16)
#undef PARSCAN_INSTANTIATE_MATRIX_CUDA

}  // namespace parscan
