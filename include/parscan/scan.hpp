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
//
// Inputs and outputs are random-access iterators, indexed at layout.offset(s, t) exactly like
// pointers: raw pointers, or any iterator with std::iterator_traits (value_type,
// difference_type, ...) and it + i, it[i] (Thrust's fancy iterators, say). An input's value
// must convert to the operator's accumulator (static_cast<Acc>(it[i])); an output is written
// as out[i] = acc (a raw pointer: out[i] = static_cast<T>(acc)). Carries and reduce's result
// stay pointers. Raw pointers are checked for null and for overlap (see detail::validate);
// an iterator has no address to check, so overlap between an iterator and any other argument
// is the caller's responsibility; its layout is still checked, an output's for writing every
// element once. Plain C++: nothing here needs Thrust or CUDA.
#pragma once

#include <iterator>
#include <limits>
#include <type_traits>
#include <utility>

#include "detail/validate.hpp"
#include "layout.hpp"
#include "status.hpp"

namespace parscan {

/// The accumulator type of op over elements of type In: what op(In, In) returns.
template <class Op, class In>
using accumulator_t = std::decay_t<decltype(std::declval<const Op&>()(std::declval<const In&>(), std::declval<const In&>()))>;

namespace detail {

/// Whether X is an iterator: std::iterator_traits<X> names its category and difference type.
template <class X, class = void>
struct is_iterator : std::false_type {};
template <class X>
struct is_iterator<X, std::void_t<typename std::iterator_traits<X>::iterator_category,
                                  typename std::iterator_traits<X>::difference_type>> : std::true_type {};

}  // namespace detail

/// What scan_problem<In, Out, Acc> stores for In and Out: an iterator type names itself; any
/// other type T names a pointer to T (const for the input), as before iterators were accepted.
template <class In>
using input_iterator_t = std::conditional_t<detail::is_iterator<In>::value, In, const In*>;
template <class Out>
using output_iterator_t = std::conditional_t<detail::is_iterator<Out>::value, Out, Out*>;

/// The element an input iterator yields (its value_type, without cv).
template <class It>
using iterator_value_t = std::remove_cv_t<typename std::iterator_traits<It>::value_type>;

/// The accumulator of op over what the input iterator It yields.
template <class Op, class It>
using iterator_accumulator_t = accumulator_t<Op, iterator_value_t<It>>;

template <class Acc>
struct scan_options {
  direction dir = direction::forward;
  const Acc* carry_in = nullptr;  // [num_sequences] state before each sequence, or null
  Acc* carry_out = nullptr;       // [num_sequences] total of each sequence, or null
};

enum class scan_kind { inclusive, exclusive, reduce };

/// Everything a backend needs to run one generic scan; built by the entry points below and
/// checked by the backend. In and Out are element types (raw pointers: the form every call with
/// pointers takes) or iterator types (see input_iterator_t).
template <class In, class Out, class Acc>
struct scan_problem {
  scan_kind kind;
  input_iterator_t<In> in;
  sequence_layout in_layout;
  output_iterator_t<Out> out;  // not read for reduce, whose Out is Acc and out null
  sequence_layout out_layout;
  scan_options<Acc> opts;
  Acc init;       // used by exclusive scan and reduce when there is no carry_in
  bool has_init;  // false for inclusive scan
};

namespace detail {

/// Checks the argument `it` laid out as `l` and fills `t` for the overlap checks. A raw pointer
/// gets every check (check_input / check_output). Any other iterator has no address: its
/// layout is checked (sizes, strides, offsets within its difference_type; an output's for
/// one-to-one), and `t` gets no bytes, so no overlap check sees it.
template <class It>
status check_argument(const It& it, const sequence_layout& l, bool output, tensor_ref& t) {
  if constexpr (std::is_pointer_v<It>) {
    t = {it, l, sizeof(*it)};
    return output ? check_output(t) : check_input(t);
  } else {
    t = {nullptr, l, 1};
    index_t span;
    if (status s = check_layout(l, 1, span); s != status::success) return s;
    using diff = typename std::iterator_traits<It>::difference_type;
    if (span > 0 && static_cast<std::uintmax_t>(span - 1) > static_cast<std::uintmax_t>(std::numeric_limits<diff>::max()))
      return status::size_overflow;
    if (output && span > 0 && !is_one_to_one(l)) return status::overlapping_output;
    return status::success;
  }
}

template <class In, class Out, class Acc>
status validate(const scan_problem<In, Out, Acc>& p) {
  tensor_ref in;
  if (status s = check_argument(p.in, p.in_layout, false, in); s != status::success) return s;
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
  tensor_ref out;
  if (status s = check_argument(p.out, p.out_layout, true, out); s != status::success) return s;
  if (status s = check_aliasing(out, in); s != status::success) return s;
  if (status s = check_disjoint(out, carry_out); s != status::success) return s;
  if (status s = check_disjoint(out, carry_in); s != status::success) return s;
  if (status s = check_aliasing(carry_out, in); s != status::success) return s;
  return check_aliasing(carry_out, carry_in);
}

/// it[i] = v: a raw pointer's element converted explicitly (as pointer outputs always were);
/// through any other iterator v is assigned as it is, to whatever its reference is (a proxy for
/// discard, transform-output or zip iterators).
template <class It, class V>
void write_element(const It& it, index_t i, const V& v) {
  if constexpr (std::is_pointer_v<It>) it[i] = static_cast<std::remove_pointer_t<It>>(v);
  else it[i] = v;
}

/// How the entry points name an argument of iterator type It in scan_problem: a raw pointer to
/// an element by the element (so calls with pointers make the same problems as ever), anything
/// else by itself.
template <class It, class = void>
struct problem_arg {
  using type = It;
};
template <class T>
struct problem_arg<T*, std::enable_if_t<!is_iterator<std::remove_cv_t<T>>::value>> {
  using type = std::remove_cv_t<T>;
};
template <class It>
using problem_arg_t = typename problem_arg<It>::type;

/// The problem the entry points build for input InIt and output OutIt.
template <class InIt, class OutIt, class Op>
using problem_for = scan_problem<problem_arg_t<InIt>, problem_arg_t<OutIt>, iterator_accumulator_t<Op, InIt>>;

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Convenience forms, shared by every backend. Each forwards to the backend's full form
//   run_scan(backend, scan_problem, op)
// after building the problem; validation happens there, before any work. `in` and `out` are
// iterators (raw pointers included): InIt and OutIt are deduced, and the accumulator is
// Acc = accumulator_t<Op, value type of InIt> (iterator_accumulator_t<Op, InIt>).

/// Inclusive scan of a batch, input and output with their own layouts of the same shape.
template <class Backend, class InIt, class OutIt, class Op>
status inclusive_scan(const Backend& be, InIt in, const sequence_layout& in_layout, OutIt out,
                      const sequence_layout& out_layout, Op op, const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  using problem = detail::problem_for<InIt, OutIt, Op>;
  return run_scan(be, problem{scan_kind::inclusive, in, in_layout, out, out_layout, opts, iterator_accumulator_t<Op, InIt>{}, false}, op);
}

/// Inclusive scan of a batch whose input and output share a layout.
template <class Backend, class InIt, class OutIt, class Op>
status inclusive_scan(const Backend& be, InIt in, OutIt out, const sequence_layout& layout, Op op,
                      const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  return inclusive_scan(be, in, layout, out, layout, op, opts);
}

/// Inclusive scan of one contiguous sequence of n elements.
template <class Backend, class InIt, class OutIt, class Op>
status inclusive_scan(const Backend& be, InIt in, OutIt out, index_t n, Op op,
                      const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  return inclusive_scan(be, in, out, sequence_layout::contiguous(n), op, opts);
}

/// Exclusive scan of a batch: out[0] = init (or the carry in), out[i] = init ⊕ x[0..i-1].
template <class Backend, class InIt, class OutIt, class Op>
status exclusive_scan(const Backend& be, InIt in, const sequence_layout& in_layout, OutIt out,
                      const sequence_layout& out_layout, Op op, const iterator_accumulator_t<Op, InIt>& init,
                      const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  using problem = detail::problem_for<InIt, OutIt, Op>;
  return run_scan(be, problem{scan_kind::exclusive, in, in_layout, out, out_layout, opts, init, true}, op);
}

template <class Backend, class InIt, class OutIt, class Op>
status exclusive_scan(const Backend& be, InIt in, OutIt out, const sequence_layout& layout, Op op,
                      const iterator_accumulator_t<Op, InIt>& init,
                      const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  return exclusive_scan(be, in, layout, out, layout, op, init, opts);
}

template <class Backend, class InIt, class OutIt, class Op>
status exclusive_scan(const Backend& be, InIt in, OutIt out, index_t n, Op op, const iterator_accumulator_t<Op, InIt>& init,
                      const scan_options<iterator_accumulator_t<Op, InIt>>& opts = {}) {
  return exclusive_scan(be, in, out, sequence_layout::contiguous(n), op, init, opts);
}

/// Reduce each sequence of a batch: result[s] = init (or carry_in[s]) ⊕ x[0] ⊕ … ⊕ x[n-1].
/// `result` has num_sequences() elements; opts.carry_out is ignored (result is the carry out).
template <class Backend, class InIt, class Op>
status reduce(const Backend& be, InIt in, const sequence_layout& layout, Op op, const iterator_accumulator_t<Op, InIt>& init,
              iterator_accumulator_t<Op, InIt>* result, scan_options<iterator_accumulator_t<Op, InIt>> opts = {}) {
  using Acc = iterator_accumulator_t<Op, InIt>;
  opts.carry_out = result;
  return run_scan(be, scan_problem<detail::problem_arg_t<InIt>, Acc, Acc>{scan_kind::reduce, in, layout, nullptr, layout, opts, init, true},
                  op);
}

/// Reduce one contiguous sequence of n elements into *result.
template <class Backend, class InIt, class Op>
status reduce(const Backend& be, InIt in, index_t n, Op op, const iterator_accumulator_t<Op, InIt>& init,
              iterator_accumulator_t<Op, InIt>* result) {
  return reduce(be, in, sequence_layout::contiguous(n), op, init, result);
}

}  // namespace parscan
