// src/cuda/device_query.cu — whether the CUDA backend can run here.
#include <cuda_runtime.h>

#include <parscan/recurrence.hpp>

namespace parscan {

bool cuda_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

}  // namespace parscan
