// parscan/cuda/scan.cuh — the CUDA backend of the generic algorithms in parscan/scan.hpp.
// Include from a .cu file; the operator and element types are the caller's, so this part of
// the library is header-only, like CUB.
//
// Contract: asynchronous and ordered on backend.stream, no device synchronisation; pointers
// (input, output, carry arrays) are device-accessible; temporary storage as described in
// parscan/backend.hpp (size: scan_workspace_size). Results are deterministic: the same call
// on the same data gives bitwise identical results. The operator must be associative and
// callable on the device (PARSCAN_HD); it need not be commutative or have an identity.
#pragma once

#include "../backend.hpp"
#include "../scan.hpp"
#include "device/dispatch_scan.cuh"
#include "device/generic_problem.cuh"

namespace parscan {

/// Workspace bytes the CUDA backend needs for a generic scan or reduce of elements In laid out
/// as `layout` with operator op (pass it as cuda_backend::workspace to avoid an allocation).
template <class In, class Op>
std::size_t scan_workspace_size(const sequence_layout& layout, const Op&) {
  using problem = cuda_detail::generic_problem<In, accumulator_t<Op, In>, accumulator_t<Op, In>>;
  return cuda_detail::scan_workspace_bytes<problem>(layout.num_sequences(), layout.length);
}

/// CUDA backend's full form of every generic algorithm (see parscan/scan.hpp).
template <class In, class Out, class Acc, class Op>
status run_scan(const cuda_backend& be, const scan_problem<In, Out, Acc>& p, const Op& op) {
  if (status s = detail::validate(p); s != status::success) return s;
  const auto problem = cuda_detail::generic_problem<In, Out, Acc>::from(p);
  return cuda_detail::dispatch_scan(problem, op, p.in_layout.num_sequences(), be);
}

}  // namespace parscan
