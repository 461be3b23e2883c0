// Instantiates the CUDA gated recurrence for bfloat16 (see recurrence_cuda.cuh).
#include "recurrence_cuda.cuh"

namespace parscan {
PARSCAN_INSTANTIATE_CUDA_RECURRENCE(bfloat16)
}  // namespace parscan
