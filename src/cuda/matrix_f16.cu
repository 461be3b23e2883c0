// Instantiates the CUDA matrix recurrence and matrix chains for float16 (see matrix_cuda.cuh).
#include "matrix_cuda.cuh"

namespace parscan {
PARSCAN_INSTANTIATE_MATRIX_CUDA(float16)
}  // namespace parscan
