// src/distributed/recurrence_nccl_bf16.cu — the distributed gated recurrence over NCCL for parscan::bfloat16.
#include "recurrence_nccl.cuh"

PARSCAN_DISTRIBUTED_RECURRENCE(parscan::bfloat16)
