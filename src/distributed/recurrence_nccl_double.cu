// src/distributed/recurrence_nccl_double.cu — the distributed gated recurrence over NCCL for double.
#include "recurrence_nccl.cuh"

PARSCAN_DISTRIBUTED_RECURRENCE(double)
