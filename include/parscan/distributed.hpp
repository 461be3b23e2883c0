// parscan/distributed.hpp — sequence-parallel scans: every sequence's time axis is split over
// ranks (GPUs, or host threads), rank r holding one contiguous slice that follows rank r − 1's.
// Every rank calls the same function with its slice; the results are those of one call over the
// whole sequences. What crosses between ranks is one accumulator per sequence per rank (the
// slices' totals), never the data (docs/design.md, "Sequence-parallel scans").
//
// Two transports, one algorithm (distributed/passes.hpp):
//   (const host_backend&, communicator&, ...)  host backend; `communicator` is an abstract
//       all-gather (distributed/host.hpp): in_process_group gives ranks that are threads.
//   (const cuda_backend&, ncclComm_t, ...)     the CUDA backend over NCCL (target
//       parscan::distributed; the generic forms are in parscan/distributed.cuh). Asynchronous and
//       ordered on backend.stream, like the core; NCCL failures return status::communication_error
//       (distributed::nccl_last_error() has NCCL's code).
//
// Contract, beyond the core's (scan.hpp, recurrence.hpp):
//   * Collective: every rank of the communicator calls the same function with the same options,
//     number of sequences, operator and init; slice lengths may differ, and may be 0. A rank
//     that returns an error before the exchange (bad arguments) leaves the others waiting, as
//     with any collective, so check arguments the same way on every rank.
//   * carry_in (and x0, dx_final) is read on the rank whose slice comes first in processing order
//     (rank 0 forward; rank R − 1 for direction::reverse) and ignored elsewhere. carry_out, and
//     reduce's result, are written on every rank that passes them: each receives the total of
//     the whole sequence.
//   * Deterministic: the carries fold the ranks' totals in processing order, so results are
//     bitwise the same run to run. Against one call over the whole sequence they are equal for
//     exact operators; floating-point results differ by reassociation at the rank boundaries.
//   * Temporary storage: the core's (backend.workspace, allocator, or the library's pool) for the
//     local passes; the exchange needs R·(16 + S·sizeof(Acc)) bytes more, rounded up to 256 per
//     rank, taken from the allocator or the library's pool (the host: operator new).
#pragma once

#include "backend.hpp"
#include "distributed/host.hpp"
#include "distributed/passes.hpp"
#include "recurrence.hpp"
#include "scan.hpp"

typedef struct ncclComm* ncclComm_t;  // as nccl.h declares it; users of this header need no NCCL headers

namespace parscan::distributed {

/// CUDA backend's full form over NCCL: declared here so that the forms below find it, defined in
/// distributed.cuh (include it from the .cu file that calls them).
template <class In, class Out, class Acc, class Op>
status run_scan(const cuda_backend& be, ncclComm_t comm, const scan_problem<In, Out, Acc>& p, const Op& op);

/// Host backend's full form of every generic algorithm.
template <class In, class Out, class Acc, class Op>
status run_scan(const host_backend& be, communicator& comm, const scan_problem<In, Out, Acc>& p, const Op& op) {
  host_executor ex(be, comm);
  return scan_passes(ex, p, op);
}

// ---------------------------------------------------------------------------------------------
// Convenience forms, shared by both transports, as in parscan/scan.hpp: `layout` describes this
// rank's slice (its length is the slice's).

template <class Backend, class Comm, class InIt, class OutIt, class Op>
status inclusive_scan(const Backend& be, Comm&& comm, InIt in, const sequence_layout& in_layout, OutIt out,
                      const sequence_layout& out_layout, Op op, const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  using problem = parscan::detail::problem_for<InIt, OutIt, Op>;
  return run_scan(be, comm, problem{scan_kind::inclusive, in, in_layout, out, out_layout, opts, iterator_accumulator_t<Op, InIt>{}, false},
                  op);
}

template <class Backend, class Comm, class InIt, class OutIt, class Op>
status inclusive_scan(const Backend& be, Comm&& comm, InIt in, OutIt out, const sequence_layout& layout, Op op,
                      const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  return inclusive_scan(be, comm, in, layout, out, layout, op, opts);
}

template <class Backend, class Comm, class InIt, class OutIt, class Op>
status exclusive_scan(const Backend& be, Comm&& comm, InIt in, const sequence_layout& in_layout, OutIt out,
                      const sequence_layout& out_layout, Op op, const iterator_accumulator_t<Op, InIt>& init,
                      const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  using problem = parscan::detail::problem_for<InIt, OutIt, Op>;
  return run_scan(be, comm, problem{scan_kind::exclusive, in, in_layout, out, out_layout, opts, init, true}, op);
}

template <class Backend, class Comm, class InIt, class OutIt, class Op>
status exclusive_scan(const Backend& be, Comm&& comm, InIt in, OutIt out, const sequence_layout& layout, Op op,
                      const iterator_accumulator_t<Op, InIt>& init, const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  return exclusive_scan(be, comm, in, layout, out, layout, op, init, opts);
}

/// result[s] = init (or carry_in[s] on the first rank) ⊕ every rank's slice of sequence s, on
/// every rank.
template <class Backend, class Comm, class InIt, class Op>
status reduce(const Backend& be, Comm&& comm, InIt in, const sequence_layout& layout, Op op,
              const iterator_accumulator_t<Op, InIt>& init, iterator_accumulator_t<Op, InIt>* result,
              scan_options<iterator_accumulator_t<Op, InIt>> opts = {}) {
  using Acc = iterator_accumulator_t<Op, InIt>;
  opts.carry_out = result;
  return run_scan(be, comm,
                  scan_problem<parscan::detail::problem_arg_t<InIt>, Acc, Acc>{scan_kind::reduce, in, layout, nullptr, layout, opts,
                                                                               init, true},
                  op);
}

// ---------------------------------------------------------------------------------------------
// The gated recurrence (recurrence.hpp) over slices of T. Shapes, layouts and dtypes as for
// one call; args.shape.length is this rank's slice length. The slice's maps read a with b (and
// a with dx) through one layout: with recurrence_layout::strided their strides must be equal
// (status::unsupported otherwise).
//
// Forward: x0 is read on the first rank in processing order (rank 0; rank R − 1 with reverse),
// x_final written on every rank that passes it (the state after the whole sequence). x_entry,
// optional dense (B, D), receives the state entering this rank's slice (x0, or 0, on the first):
// keep it for the backward.
//
// Backward: args.x0 is the first rank's x0 (optional, as for one call) and, on every other rank,
// the state entering the slice (the forward's x_entry; required). dx_final is read on the last
// rank in processing order, dx0 written on the first (when it has x0). x may be null (recomputed
// from b and x0, as for one call). The carried states cross ranks as T, as when chaining chunked
// calls: with 16-bit T they are rounded once per rank boundary.

template <class T>
status gated_recurrence_forward(const host_backend& be, communicator& comm, const gated_forward_args<T>& args,
                                T* x_entry = nullptr) {
  host_executor ex(be, comm);
  return recurrence_forward_passes(ex, args, x_entry);
}

template <class T>
status gated_recurrence_backward(const host_backend& be, communicator& comm, const gated_backward_args<T>& args) {
  host_executor ex(be, comm);
  return recurrence_backward_passes(ex, args);
}

/// NCCL path: T = float, double, bfloat16, float16, complex<float>. Defined by parscan::distributed.
template <class T>
status gated_recurrence_forward(const cuda_backend& be, ncclComm_t comm, const gated_forward_args<T>& args,
                                T* x_entry = nullptr);
template <class T>
status gated_recurrence_backward(const cuda_backend& be, ncclComm_t comm, const gated_backward_args<T>& args);

/// The NCCL result behind the calling thread's most recent status::communication_error from the
/// NCCL path (an ncclResult_t as int; 0 if none). Defined by parscan::distributed.
int nccl_last_error();

}  // namespace parscan::distributed
