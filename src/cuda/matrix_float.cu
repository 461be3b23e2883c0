// Instantiates the CUDA matrix recurrence and matrix chains for float (see matrix_cuda.cuh).
#include "matrix_cuda.cuh"

namespace parscan {
PARSCAN_INSTANTIATE_MATRIX_CUDA(float)
}  // namespace parscan
