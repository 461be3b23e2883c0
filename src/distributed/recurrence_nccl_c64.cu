// src/distributed/recurrence_nccl_c64.cu — the distributed gated recurrence over NCCL for parscan::complex<float>.
#include "recurrence_nccl.cuh"

PARSCAN_DISTRIBUTED_RECURRENCE(parscan::complex<float>)
