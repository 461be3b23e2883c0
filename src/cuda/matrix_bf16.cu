// Instantiates the CUDA matrix recurrence and matrix chains for bfloat16 (see matrix_cuda.cuh).
#include "matrix_cuda.cuh"

namespace parscan {
PARSCAN_INSTANTIATE_MATRIX_CUDA(bfloat16)
}  // namespace parscan
