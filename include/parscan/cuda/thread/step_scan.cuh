// parscan/cuda/thread/step_scan.cuh — a thread scanning steps of one sequence one at a time,
// through a Problem's load_at / store_at: for what the vector runs cannot take (a segment's
// misaligned head, the packed recurrence on arbitrary strides).
#pragma once

#include "../warp/warp_shuffle.cuh"

namespace parscan::cuda_detail {

/// Positions [first, last) of the sequence at cursor c, in order, from `running`, which is
/// updated: an exclusive Problem stores the prefix before each step (an exclusive scan always
/// has one), an inclusive one the prefix through it.
template <class Problem, class Op>
__device__ PARSCAN_INLINE void scan_steps_in_thread(const Problem& P, const Op& op, const typename Problem::cursor& c,
                                                    index_t first, index_t last,
                                                    maybe<typename Problem::acc_type>& running) {
  using Acc = typename Problem::acc_type;
  for (index_t pos = first; pos < last; ++pos) {
    const Acc x = P.load_at(c, pos);
    if (P.exclusive) P.store_at(c, pos, running.value);
    running = combine(running, maybe<Acc>{x, true}, op);
    if (!P.exclusive) P.store_at(c, pos, running.value);
  }
}

}  // namespace parscan::cuda_detail
