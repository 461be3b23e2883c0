// src/host/cuda_stubs.cpp — in a build without CUDA, the CUDA-backend entry points exist
// and refuse with status::unsupported, so code written for both backends still links.
#include <parscan/log_recurrence.hpp>
#include <parscan/matrix_recurrence.hpp>
#include <parscan/recurrence.hpp>

#if !PARSCAN_HAS_CUDA
namespace parscan {

template <class T>
status gated_recurrence_forward(const cuda_backend&, const gated_forward_args<T>&) { return status::unsupported; }
template <class T>
status gated_recurrence_backward(const cuda_backend&, const gated_backward_args<T>&) { return status::unsupported; }
template <class T>
std::size_t gated_recurrence_workspace_size(const gated_forward_args<T>&) { return 0; }
template <class T>
std::size_t gated_recurrence_workspace_size(const gated_backward_args<T>&) { return 0; }
template <class T>
status gated_recurrence_forward(const cuda_backend&, const gated_varlen_forward_args<T>&) { return status::unsupported; }
template <class T>
status gated_recurrence_backward(const cuda_backend&, const gated_varlen_backward_args<T>&) { return status::unsupported; }
template <class T>
std::size_t gated_recurrence_workspace_size(const gated_varlen_forward_args<T>&) { return 0; }
template <class T>
std::size_t gated_recurrence_workspace_size(const gated_varlen_backward_args<T>&) { return 0; }
bool cuda_available() { return false; }

#define PARSCAN_INSTANTIATE_STUB(T)                                                                  \
  template status gated_recurrence_forward<T>(const cuda_backend&, const gated_forward_args<T>&);    \
  template status gated_recurrence_backward<T>(const cuda_backend&, const gated_backward_args<T>&);  \
  template std::size_t gated_recurrence_workspace_size<T>(const gated_forward_args<T>&);             \
  template std::size_t gated_recurrence_workspace_size<T>(const gated_backward_args<T>&);            \
  template status gated_recurrence_forward<T>(const cuda_backend&, const gated_varlen_forward_args<T>&);   \
  template status gated_recurrence_backward<T>(const cuda_backend&, const gated_varlen_backward_args<T>&); \
  template std::size_t gated_recurrence_workspace_size<T>(const gated_varlen_forward_args<T>&);            \
  template std::size_t gated_recurrence_workspace_size<T>(const gated_varlen_backward_args<T>&);
PARSCAN_INSTANTIATE_STUB(float)
PARSCAN_INSTANTIATE_STUB(double)
PARSCAN_INSTANTIATE_STUB(bfloat16)
PARSCAN_INSTANTIATE_STUB(float16)
PARSCAN_INSTANTIATE_STUB(complex<float>)
#undef PARSCAN_INSTANTIATE_STUB

template <class T>
status log_recurrence_forward(const cuda_backend&, const log_forward_args<T>&) { return status::unsupported; }
template <class T>
std::size_t log_recurrence_workspace_size(const log_forward_args<T>&) { return 0; }
template status log_recurrence_forward<float>(const cuda_backend&, const log_forward_args<float>&);
template status log_recurrence_forward<bfloat16>(const cuda_backend&, const log_forward_args<bfloat16>&);
template std::size_t log_recurrence_workspace_size<float>(const log_forward_args<float>&);
template std::size_t log_recurrence_workspace_size<bfloat16>(const log_forward_args<bfloat16>&);
template <class T>
status log_recurrence_backward(const cuda_backend&, const log_backward_args<T>&) { return status::unsupported; }
template <class T>
std::size_t log_recurrence_workspace_size(const log_backward_args<T>&) { return 0; }
template status log_recurrence_backward<float>(const cuda_backend&, const log_backward_args<float>&);
template status log_recurrence_backward<bfloat16>(const cuda_backend&, const log_backward_args<bfloat16>&);
template std::size_t log_recurrence_workspace_size<float>(const log_backward_args<float>&);
template std::size_t log_recurrence_workspace_size<bfloat16>(const log_backward_args<bfloat16>&);
template <class T>
status log_recurrence_forward(const cuda_backend&, const log_varlen_forward_args<T>&) { return status::unsupported; }
template <class T>
status log_recurrence_backward(const cuda_backend&, const log_varlen_backward_args<T>&) { return status::unsupported; }
template <class T>
std::size_t log_recurrence_workspace_size(const log_varlen_forward_args<T>&) { return 0; }
template <class T>
std::size_t log_recurrence_workspace_size(const log_varlen_backward_args<T>&) { return 0; }
#define PARSCAN_INSTANTIATE_LOG_VARLEN_STUB(T)                                                          \
  template status log_recurrence_forward<T>(const cuda_backend&, const log_varlen_forward_args<T>&);   \
  template status log_recurrence_backward<T>(const cuda_backend&, const log_varlen_backward_args<T>&); \
  template std::size_t log_recurrence_workspace_size<T>(const log_varlen_forward_args<T>&);            \
  template std::size_t log_recurrence_workspace_size<T>(const log_varlen_backward_args<T>&);
PARSCAN_INSTANTIATE_LOG_VARLEN_STUB(float)
PARSCAN_INSTANTIATE_LOG_VARLEN_STUB(bfloat16)
#undef PARSCAN_INSTANTIATE_LOG_VARLEN_STUB

template <class T>
status matrix_recurrence_forward(const cuda_backend&, const matrix_forward_args<T>&) { return status::unsupported; }
template <class T>
status matrix_recurrence_backward(const cuda_backend&, const matrix_backward_args<T>&) { return status::unsupported; }
template <class T>
status matrix_chain(const cuda_backend&, const matrix_chain_args<T>&) { return status::unsupported; }
template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_forward_args<T>&) { return 0; }
template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_backward_args<T>&) { return 0; }
template <class T>
std::size_t matrix_chain_workspace_size(const matrix_chain_args<T>&) { return 0; }
template <class T>
status matrix_recurrence_forward(const cuda_backend&, const matrix_varlen_forward_args<T>&) {
  return status::unsupported;
}
template <class T>
status matrix_recurrence_backward(const cuda_backend&, const matrix_varlen_backward_args<T>&) {
  return status::unsupported;
}
template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_varlen_forward_args<T>&) { return 0; }
template <class T>
std::size_t matrix_recurrence_workspace_size(const matrix_varlen_backward_args<T>&) { return 0; }

#define PARSCAN_INSTANTIATE_MATRIX_STUB(T)                                                              \
  template status matrix_recurrence_forward<T>(const cuda_backend&, const matrix_forward_args<T>&);    \
  template status matrix_recurrence_backward<T>(const cuda_backend&, const matrix_backward_args<T>&);  \
  template status matrix_chain<T>(const cuda_backend&, const matrix_chain_args<T>&);                   \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_forward_args<T>&);             \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_backward_args<T>&);            \
  template std::size_t matrix_chain_workspace_size<T>(const matrix_chain_args<T>&);                  \
  template status matrix_recurrence_forward<T>(const cuda_backend&, const matrix_varlen_forward_args<T>&);   \
  template status matrix_recurrence_backward<T>(const cuda_backend&, const matrix_varlen_backward_args<T>&); \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_varlen_forward_args<T>&);            \
  template std::size_t matrix_recurrence_workspace_size<T>(const matrix_varlen_backward_args<T>&);
PARSCAN_INSTANTIATE_MATRIX_STUB(float)
PARSCAN_INSTANTIATE_MATRIX_STUB(double)
PARSCAN_INSTANTIATE_MATRIX_STUB(bfloat16)
PARSCAN_INSTANTIATE_MATRIX_STUB(float16)
#undef PARSCAN_INSTANTIATE_MATRIX_STUB

}  // namespace parscan
#endif
