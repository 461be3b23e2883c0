// Instantiates the CUDA gated recurrence for double (see recurrence_cuda.cuh).
#include "recurrence_cuda.cuh"

namespace parscan {
PARSCAN_INSTANTIATE_CUDA_RECURRENCE(double)
}  // namespace parscan
