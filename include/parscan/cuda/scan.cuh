// parscan/cuda/scan.cuh — the CUDA backend of the generic algorithms in parscan/scan.hpp.
// Include from a .cu file; the operator and element types are the caller's, so this part of
// the library is header-only, like CUB.
//
// Contract: asynchronous and ordered on backend.stream, no device synchronisation; pointers
// (input, output, carry arrays) are device-accessible, and so is whatever an iterator reads or
// writes (its operator[] and the operator are called on the device); temporary storage as
// described in parscan/backend.hpp (size: scan_workspace_size). Results are deterministic: the
// same call on the same data gives bitwise identical results. The operator must be associative
// and callable on the device (PARSCAN_HD); it need not be commutative or have an identity.
//
// Iterators: a contiguous one that wraps a raw pointer (thrust::device_ptr, the iterators of
// thrust::device_vector, anything thrust::is_contiguous_iterator_v accepts) is unwrapped here
// to that pointer, so it runs exactly the raw-pointer path (vector loads, staging) and gets the
// pointer checks (null, overlap). Any other iterator (counting, transform, zip,
// transform_output, discard, a user's) is read and written element by element.
#pragma once

#include <type_traits>

#include <thrust/type_traits/is_contiguous_iterator.h>
#include <thrust/type_traits/unwrap_contiguous_iterator.h>

#include "../backend.hpp"
#include "../scan.hpp"
#include "device/dispatch_scan.cuh"
#include "generic/generic_lane_packs.cuh"
#include "generic/generic_problem.cuh"

namespace parscan {

namespace cuda_detail {

/// Whether It is a contiguous iterator other than a raw pointer: it then travels as the raw
/// pointer it wraps.
template <class It>
constexpr bool unwraps_to_pointer = !std::is_pointer_v<It> && thrust::is_contiguous_iterator_v<It>;

/// The scan_problem name of what iterator It travels as (the element, for a raw pointer).
template <class It>
using unwrapped_arg_t = detail::problem_arg_t<thrust::try_unwrap_contiguous_iterator_t<It>>;

/// The Problem the CUDA backend runs for input In (an element or iterator type, as in
/// scan_problem) and output Out.
template <class In, class Out, class Acc>
using generic_problem_for =
    generic_problem<unwrapped_arg_t<input_iterator_t<In>>, unwrapped_arg_t<output_iterator_t<Out>>, Acc>;

}  // namespace cuda_detail

/// Workspace bytes the CUDA backend needs for a generic scan or reduce of elements In laid out
/// as `layout` with operator op (pass it as cuda_backend::workspace to avoid an allocation).
/// In is the input's element type (raw pointers) or its iterator type.
template <class In, class Op>
std::size_t scan_workspace_size(const sequence_layout& layout, const Op&) {
  using Acc = iterator_accumulator_t<Op, input_iterator_t<In>>;
  using problem = cuda_detail::generic_problem_for<In, Acc, Acc>;
  return cuda_detail::generic_workspace_bytes<problem>(layout.num_sequences(), layout.length);
}

/// The same, with the input's iterator type taken from `in`.
template <class InIt, class Op>
std::size_t scan_workspace_size(const InIt&, const sequence_layout& layout, const Op& op) {
  return scan_workspace_size<InIt>(layout, op);
}

/// CUDA backend's full form of every generic algorithm (see parscan/scan.hpp).
template <class In, class Out, class Acc, class Op>
status run_scan(const cuda_backend& be, const scan_problem<In, Out, Acc>& p, const Op& op) {
  using in_it = input_iterator_t<In>;
  using out_it = output_iterator_t<Out>;
  if constexpr (cuda_detail::unwraps_to_pointer<in_it> || cuda_detail::unwraps_to_pointer<out_it>) {
    // Run (and check) as the raw pointers these iterators wrap. &*it reads nothing.
    using unwrapped = scan_problem<cuda_detail::unwrapped_arg_t<in_it>, cuda_detail::unwrapped_arg_t<out_it>, Acc>;
    return run_scan(be,
                    unwrapped{p.kind, thrust::try_unwrap_contiguous_iterator(p.in), p.in_layout,
                              thrust::try_unwrap_contiguous_iterator(p.out), p.out_layout, p.opts, p.init, p.has_init},
                    op);
  } else {
    if (status s = detail::validate(p); s != status::success) return s;
    const auto problem = cuda_detail::generic_problem<In, Out, Acc>::from(p);
    return cuda_detail::dispatch_generic(problem, op, p.in_layout.num_sequences(), be);
  }
}

}  // namespace parscan
