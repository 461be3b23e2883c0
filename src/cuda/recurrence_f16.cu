// Instantiates the CUDA gated recurrence for float16 (see recurrence_cuda.cuh).
#include "recurrence_cuda.cuh"

namespace parscan {
PARSCAN_INSTANTIATE_CUDA_RECURRENCE(float16)
}  // namespace parscan
