// src/cuda/matrix_chain_cublas.cu — cuBLAS handles for the matrix chain, and its batched
// products (matrix_chain_cublas.hpp). Host code only.
#include "matrix_chain_cublas.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#include <cublas_v2.h>

#include <parscan/cuda/runtime.cuh>

namespace parscan {
namespace cuda_detail {
namespace {

status report_cublas(cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return status::success;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return status::allocation_failed;
  const cudaError_t e = cudaGetLastError();  // a launch failure inside cuBLAS, if that was it
  return report(e != cudaSuccess ? e : cudaErrorUnknown);
}

/// Idle cuBLAS handles per device. A call borrows one (a handle serves one stream at a time)
/// and gives it back, so there are as many as calls ever ran at once. They are never destroyed:
/// at exit the CUDA runtime may already be gone when static destructors run.
struct handle_pool {
  std::mutex lock;
  std::vector<std::vector<cublasHandle_t>> idle;  // by device
};

handle_pool& pool() {
  static handle_pool* p = new handle_pool;  // never destroyed, as the handles
  return *p;
}

/// A handle of the current device for the length of one call.
class cublas_lease {
 public:
  cublas_lease() = default;
  cublas_lease(const cublas_lease&) = delete;
  cublas_lease& operator=(const cublas_lease&) = delete;
  ~cublas_lease() {
    if (!handle_) return;
    std::lock_guard<std::mutex> guard(pool().lock);
    pool().idle[static_cast<std::size_t>(device_)].push_back(handle_);
  }

  status acquire() {
    if (status st = report(cudaGetDevice(&device_)); st != status::success) return st;
    {
      std::lock_guard<std::mutex> guard(pool().lock);
      auto& idle = pool().idle;
      if (idle.size() <= static_cast<std::size_t>(device_)) idle.resize(static_cast<std::size_t>(device_) + 1);
      if (!idle[static_cast<std::size_t>(device_)].empty()) {
        handle_ = idle[static_cast<std::size_t>(device_)].back();
        idle[static_cast<std::size_t>(device_)].pop_back();
        return status::success;
      }
    }
    // A new handle. cublasCreate makes calls a capturing stream forbids in the global capture
    // mode (it allocates); relaxed mode lets it run, outside the graph, if the first call of
    // this thread on this device is being captured.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (status st = report(cudaThreadExchangeStreamCaptureMode(&mode)); st != status::success) return st;
    const cublasStatus_t created = cublasCreate(&handle_);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (created != CUBLAS_STATUS_SUCCESS) {
      handle_ = nullptr;
      return report_cublas(created);
    }
    return status::success;
  }
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
  int device_ = 0;
};

/// The stride between consecutive matrices of a list over `count` of them, if one stride
/// describes it: within one group (count ≤ per), groups of one, or groups laid end to end.
template <class X>
bool uniform_stride(const mat_list<X>& l, index_t count, long long& stride) {
  if (l.div != 1) return false;
  if (count <= l.per) return stride = l.inner, true;
  if (l.per == 1) return stride = l.outer, true;
  if (l.outer == l.per * l.inner) return stride = l.inner, true;
  return false;
}

cublasComputeType_t compute_type(chain_math math) {
  switch (math) {
    case chain_math::tf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case chain_math::bf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case chain_math::exact: break;
  }
  return CUBLAS_COMPUTE_32F_PEDANTIC;  // no TF32, whatever NVIDIA_TF32_OVERRIDE says
}

}  // namespace

status cublas_chain_products(mat_list<const float> a, mat_list<const float> b, mat_list<float> o, index_t count,
                             index_t d, chain_math math, void* workspace, cudaStream_t stream) {
  if (count <= 0) return status::success;
  cublas_lease lease;
  if (status st = lease.acquire(); st != status::success) return st;
  cublasHandle_t h = lease.get();
  // SetStream first: it also resets the handle to cuBLAS's own workspace pool.
  if (status st = report_cublas(cublasSetStream(h, stream)); st != status::success) return st;
  if (status st = report_cublas(cublasSetWorkspace(h, workspace, chain_cublas_workspace_bytes)); st != status::success)
    return st;

  const int n = static_cast<int>(d);
  const float one = 1.0f, zero = 0.0f;
  const cublasComputeType_t compute = compute_type(math);
  // Row-major o = a·b is column-major oᵀ = bᵀ·aᵀ, and a row-major matrix read column-major is
  // its transpose: so cuBLAS multiplies b by a, both untransposed, with leading dimension d.
  auto batch = [&](const float* pa, long long sa, const float* pb, long long sb, float* po, long long so,
                   index_t items) {
    constexpr index_t max_batch = 65535;  // the batch limit of older cuBLAS releases
    for (index_t first = 0; first < items; first += max_batch) {
      const int k = static_cast<int>(std::min(max_batch, items - first));
      if (status st = report_cublas(cublasGemmStridedBatchedEx(
              h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, pb + first * sb, CUDA_R_32F, n, sb, pa + first * sa,
              CUDA_R_32F, n, sa, &zero, po + first * so, CUDA_R_32F, n, so, k, compute, CUBLAS_GEMM_DEFAULT));
          st != status::success)
        return st;
    }
    return status::success;
  };

  long long sa = 0, sb = 0, so = 0;
  if (uniform_stride(a, count, sa) && uniform_stride(b, count, sb) && uniform_stride(o, count, so))
    return batch(a.ptr, sa, b.ptr, sb, o.ptr, so, count);
  // One call per group: within a group every list steps by its inner stride.
  if (a.per != b.per || a.per != o.per || a.div != 1 || b.div != 1 || o.div != 1) return status::unsupported;
  for (index_t first = 0; first < count; first += a.per) {
    const index_t group = first / a.per;
    if (status st = batch(a.ptr + group * a.outer, a.inner, b.ptr + group * b.outer, b.inner, o.ptr + group * o.outer,
                          o.inner, std::min(a.per, count - first));
        st != status::success)
      return st;
  }
  return status::success;
}

}  // namespace cuda_detail
}  // namespace parscan
