// src/distributed/recurrence_nccl_float.cu — the distributed gated recurrence over NCCL for float.
#include "recurrence_nccl.cuh"

PARSCAN_DISTRIBUTED_RECURRENCE(float)
