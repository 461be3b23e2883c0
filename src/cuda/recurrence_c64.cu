// Instantiates the CUDA gated recurrence for complex<float> (see recurrence_cuda.cuh).
#include "recurrence_cuda.cuh"

namespace parscan {
PARSCAN_INSTANTIATE_CUDA_RECURRENCE(complex<float>)
}  // namespace parscan
