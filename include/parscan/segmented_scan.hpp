// parscan/segmented_scan.hpp — the generic algorithms over the segments of one packed array: a
// segmented inclusive scan, exclusive scan and reduce over any associative operator, with a
// carry in and a carry out per segment. Segment s holds the elements
// [offsets[s], offsets[s+1]) (N + 1 int64 offsets, cu_seqlens as FlashAttention names them),
// and each segment is scanned as one sequence of parscan/scan.hpp's: it starts from its own
// carry_in[s] (else `init`, for exclusive scan and reduce), ends in its own carry_out[s], runs
// backwards on its own with direction::reverse; nothing passes from one segment to the next.
// Unlike a scan by key (CUB's ScanByKey), no key is read per element.
//
// Offsets: offsets[0] = 0, never decreasing, offsets[N] ≤ total (elements past offsets[N] are
// neither read nor written). Zero-length segments are valid: their carry out is their carry in
// (or init; an inclusive scan without a carry in leaves it unwritten). The host backend reads
// the offsets from host memory and checks all of this (status::invalid_offsets). The CUDA
// backend reads them from device memory, where a check would cost a synchronisation: it checks
// that the pointer is non-null and N ≥ 0, and offsets that break the rule are the caller's
// error (they make the call read and write out of bounds).
//
// Pointers only (input, output, carries, result): raw pointers of the same rules as scan.hpp's,
// checked for null and for overlap over `total` elements. Plain C++: nothing here needs CUDA.
#pragma once

#include <cstdint>

#include "detail/validate.hpp"
#include "scan.hpp"

namespace parscan {

/// The segments of a packed array of `total` elements.
struct segments {
  index_t count = 0;                      // N
  const std::int64_t* offsets = nullptr;  // N + 1 (host memory for host_backend, device memory for cuda_backend)
  index_t total = 0;                      // elements of the packed input (and output)
};

/// Everything a backend needs to run one segmented algorithm; built by the entry points below.
template <class In, class Out, class Acc>
struct segmented_problem {
  scan_kind kind;
  const In* in;
  Out* out;  // null for reduce
  segments seg;
  scan_options<Acc> opts;  // carry_in, carry_out: [seg.count]
  Acc init;                // exclusive scan and reduce, when there is no carry_in
  bool has_init;

  /// Segment s, elements [begin, begin + length), as the scan_problem of one contiguous
  /// sequence with its own carries.
  scan_problem<In, Out, Acc> segment(index_t s, index_t begin, index_t length) const {
    scan_options<Acc> o = opts;
    o.carry_in = opts.carry_in ? opts.carry_in + s : nullptr;
    o.carry_out = opts.carry_out ? opts.carry_out + s : nullptr;
    const sequence_layout l = sequence_layout::contiguous(length);
    return {kind, in + begin, l, out ? out + begin : nullptr, l, o, init, has_init};
  }
};

namespace detail {

/// The checks both backends make before any work: sizes, null pointers, overlaps.
template <class In, class Out, class Acc>
status validate(const segmented_problem<In, Out, Acc>& p) {
  if (p.seg.count < 0 || p.seg.total < 0) return status::negative_size;
  index_t offsets;
  if (add_overflows(p.seg.count, 1, offsets)) return status::size_overflow;
  if (p.seg.count > 0 && !p.seg.offsets) return status::null_pointer;
  tensor_ref in = dense(p.in, p.seg.total, sizeof(In));
  tensor_ref carry_in = dense(p.opts.carry_in, p.opts.carry_in ? p.seg.count : 0, sizeof(Acc));
  tensor_ref carry_out = dense(p.opts.carry_out, p.opts.carry_out ? p.seg.count : 0, sizeof(Acc));
  if (status s = check_tensors({&in, &carry_in}, {&carry_out}); s != status::success) return s;
  if (p.kind == scan_kind::reduce) {
    if (p.seg.count > 0 && !p.opts.carry_out) return status::null_pointer;  // reduce's result is carry_out
  } else {
    tensor_ref out = dense(p.out, p.seg.total, sizeof(Out));
    if (status s = check_output(out); s != status::success) return s;
    if (status s = check_aliasing(out, in); s != status::success) return s;
    if (status s = check_disjoint(out, carry_out); s != status::success) return s;
    if (status s = check_disjoint(out, carry_in); s != status::success) return s;
  }
  if (status s = check_aliasing(carry_out, in); s != status::success) return s;
  return check_aliasing(carry_out, carry_in);
}

}  // namespace detail

/// Segmented inclusive scan: out[i] = c ⊕ x[offsets[s]] ⊕ … ⊕ x[i] within segment s.
template <class Backend, class In, class Out, class Op>
status segmented_inclusive_scan(const Backend& be, const In* in, Out* out, const segments& seg, Op op,
                                const scan_options<accumulator_t<Op, In>>& opts = {}) {
  using Acc = accumulator_t<Op, In>;
  return run_segmented_scan(be, segmented_problem<In, Out, Acc>{scan_kind::inclusive, in, out, seg, opts, Acc{}, false},
                            op);
}

/// Segmented exclusive scan: the first element of segment s gets init (or carry_in[s]).
template <class Backend, class In, class Out, class Op>
status segmented_exclusive_scan(const Backend& be, const In* in, Out* out, const segments& seg, Op op,
                                const accumulator_t<Op, In>& init, const scan_options<accumulator_t<Op, In>>& opts = {}) {
  using Acc = accumulator_t<Op, In>;
  return run_segmented_scan(be, segmented_problem<In, Out, Acc>{scan_kind::exclusive, in, out, seg, opts, init, true},
                            op);
}

/// Segmented reduce: result[s] = init (or carry_in[s]) ⊕ every element of segment s.
/// `result` has seg.count elements; opts.carry_out is ignored (result is the carry out).
template <class Backend, class In, class Op>
status segmented_reduce(const Backend& be, const In* in, const segments& seg, Op op, const accumulator_t<Op, In>& init,
                        accumulator_t<Op, In>* result, scan_options<accumulator_t<Op, In>> opts = {}) {
  using Acc = accumulator_t<Op, In>;
  opts.carry_out = result;
  return run_segmented_scan(be, segmented_problem<In, Acc, Acc>{scan_kind::reduce, in, nullptr, seg, opts, init, true},
                            op);
}

}  // namespace parscan
