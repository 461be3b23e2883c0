// Instantiates the CUDA matrix recurrence and matrix chains for double (see matrix_cuda.cuh).
#include "matrix_cuda.cuh"

namespace parscan {
PARSCAN_INSTANTIATE_MATRIX_CUDA(double)
}  // namespace parscan
