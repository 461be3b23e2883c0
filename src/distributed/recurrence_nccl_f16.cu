// src/distributed/recurrence_nccl_f16.cu — the distributed gated recurrence over NCCL for parscan::float16.
#include "recurrence_nccl.cuh"

PARSCAN_DISTRIBUTED_RECURRENCE(parscan::float16)
