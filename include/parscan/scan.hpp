// parscan/scan.hpp — the generic algorithms: inclusive scan, exclusive scan and reduce over
// any associative operator, on a single sequence or a strided batch, forward or reverse,
// with optional per-sequence carry in and carry out. Backends overload the full forms:
//   host_backend   (parscan/host/scan.hpp)  runs on the CPU;
//   cuda_backend   (parscan/cuda/scan.cuh)  runs on the device, ordered on a stream.
//
// Definitions, for one sequence x[0..n-1] visited in processing order (see direction):
//   inclusive: out[i] = c ⊕ x[0] ⊕ … ⊕ x[i]
//   exclusive: out[i] = c ⊕ x[0] ⊕ … ⊕ x[i-1]          (out[0] = c)
//   reduce:    result = c ⊕ x[0] ⊕ … ⊕ x[n-1]
// where ⊕ is op(earlier, later), and c is the sequence's carry_in when given, else `init`
// (exclusive scan and reduce), else nothing (inclusive scan). carry_out receives c ⊕ x[0..n-1],
// so feeding one call's carry_out to the next call's carry_in scans a long sequence in chunks
// with the same result as one call.
#pragma once

#include <type_traits>
#include <utility>

#include "detail/validate.hpp"
#include "layout.hpp"
#include "status.hpp"

namespace parscan {

/// The accumulator type of op over elements of type In: what op(In, In) returns.
template <class Op, class In>
using accumulator_t = std::decay_t<decltype(std::declval<const Op&>()(std::declval<const In&>(), std::declval<const In&>()))>;

template <class Acc>
struct scan_options {
  direction dir = direction::forward;
  const Acc* carry_in = nullptr;  // [num_sequences] state before each sequence, or null
  Acc* carry_out = nullptr;       // [num_sequences] total of each sequence, or null
};

enum class scan_kind { inclusive, exclusive, reduce };

/// Everything a backend needs to run one generic scan; built and checked by make_scan_problem.
template <class In, class Out, class Acc>
struct scan_problem {
  scan_kind kind;
  const In* in;
  sequence_layout in_layout;
  Out* out;  // null for reduce
  sequence_layout out_layout;
  scan_options<Acc> opts;
  Acc init;       // used by exclusive scan and reduce when there is no carry_in
  bool has_init;  // false for inclusive scan
};

namespace detail {

template <class In, class Out, class Acc>
status validate(const scan_problem<In, Out, Acc>& p) {
  tensor_ref in{p.in, p.in_layout, sizeof(In)};
  if (status s = check_input(in); s != status::success) return s;
  const index_t n_seq = p.in_layout.num_sequences();
  tensor_ref carry_in = dense(p.opts.carry_in, p.opts.carry_in ? n_seq : 0, sizeof(Acc));
  if (status s = check_input(carry_in); s != status::success) return s;
  tensor_ref carry_out = dense(p.opts.carry_out, p.opts.carry_out ? n_seq : 0, sizeof(Acc));
  if (status s = check_output(carry_out); s != status::success) return s;
  if (p.kind == scan_kind::reduce) {
    if (n_seq > 0 && !p.opts.carry_out) return status::null_pointer;  // reduce's result is carry_out
    if (status s = check_aliasing(carry_out, in); s != status::success) return s;
    return check_aliasing(carry_out, carry_in);
  }
  if (!same_shape(p.in_layout, p.out_layout)) return status::shape_mismatch;
  tensor_ref out{p.out, p.out_layout, sizeof(Out)};
  if (status s = check_output(out); s != status::success) return s;
  if (status s = check_aliasing(out, in); s != status::success) return s;
  if (status s = check_disjoint(out, carry_out); s != status::success) return s;
  if (status s = check_disjoint(out, carry_in); s != status::success) return s;
  if (status s = check_aliasing(carry_out, in); s != status::success) return s;
  return check_aliasing(carry_out, carry_in);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Convenience forms, shared by every backend. Each forwards to the backend's full form
//   run_scan(backend, scan_problem)
// after building the problem; validation happens there, before any work.

/// Inclusive scan of a batch, input and output with their own layouts of the same shape.
template <class Backend, class In, class Out, class Op>
status inclusive_scan(const Backend& be, const In* in, const sequence_layout& in_layout, Out* out,
                      const sequence_layout& out_layout, Op op, const scan_options<accumulator_t<Op, In>>& opts = {}) {
  using Acc = accumulator_t<Op, In>;
  return run_scan(be, scan_problem<In, Out, Acc>{scan_kind::inclusive, in, in_layout, out, out_layout, opts, Acc{}, false},
                  op);
}

/// Inclusive scan of a batch whose input and output share a layout.
template <class Backend, class In, class Out, class Op>
status inclusive_scan(const Backend& be, const In* in, Out* out, const sequence_layout& layout, Op op,
                      const scan_options<accumulator_t<Op, In>>& opts = {}) {
  return inclusive_scan(be, in, layout, out, layout, op, opts);
}

/// Inclusive scan of one contiguous sequence of n elements.
template <class Backend, class In, class Out, class Op>
status inclusive_scan(const Backend& be, const In* in, Out* out, index_t n, Op op,
                      const scan_options<accumulator_t<Op, In>>& opts = {}) {
  return inclusive_scan(be, in, out, sequence_layout::contiguous(n), op, opts);
}

/// Exclusive scan of a batch: out[0] = init (or the carry in), out[i] = init ⊕ x[0..i-1].
template <class Backend, class In, class Out, class Op>
status exclusive_scan(const Backend& be, const In* in, const sequence_layout& in_layout, Out* out,
                      const sequence_layout& out_layout, Op op, const accumulator_t<Op, In>& init,
                      const scan_options<accumulator_t<Op, In>>& opts = {}) {
  using Acc = accumulator_t<Op, In>;
  return run_scan(be, scan_problem<In, Out, Acc>{scan_kind::exclusive, in, in_layout, out, out_layout, opts, init, true},
                  op);
}

template <class Backend, class In, class Out, class Op>
status exclusive_scan(const Backend& be, const In* in, Out* out, const sequence_layout& layout, Op op,
                      const accumulator_t<Op, In>& init, const scan_options<accumulator_t<Op, In>>& opts = {}) {
  return exclusive_scan(be, in, layout, out, layout, op, init, opts);
}

template <class Backend, class In, class Out, class Op>
status exclusive_scan(const Backend& be, const In* in, Out* out, index_t n, Op op, const accumulator_t<Op, In>& init,
                      const scan_options<accumulator_t<Op, In>>& opts = {}) {
  return exclusive_scan(be, in, out, sequence_layout::contiguous(n), op, init, opts);
}

/// Reduce each sequence of a batch: result[s] = init (or carry_in[s]) ⊕ x[0] ⊕ … ⊕ x[n-1].
/// `result` has num_sequences() elements; opts.carry_out is ignored (result is the carry out).
template <class Backend, class In, class Op>
status reduce(const Backend& be, const In* in, const sequence_layout& layout, Op op, const accumulator_t<Op, In>& init,
              accumulator_t<Op, In>* result, scan_options<accumulator_t<Op, In>> opts = {}) {
  using Acc = accumulator_t<Op, In>;
  opts.carry_out = result;
  return run_scan(be, scan_problem<In, Acc, Acc>{scan_kind::reduce, in, layout, nullptr, layout, opts, init, true}, op);
}

/// Reduce one contiguous sequence of n elements into *result.
template <class Backend, class In, class Op>
status reduce(const Backend& be, const In* in, index_t n, Op op, const accumulator_t<Op, In>& init,
              accumulator_t<Op, In>* result) {
  return reduce(be, in, sequence_layout::contiguous(n), op, init, result);
}

}  // namespace parscan
