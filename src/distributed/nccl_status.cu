// src/distributed/nccl_status.cu — the NCCL error behind the last status::communication_error.
#include <parscan/distributed.cuh>

namespace parscan::distributed {

int nccl_last_error() { return cuda_detail::nccl_error_slot(); }

}  // namespace parscan::distributed
