// parscan/host/scan.hpp — the host backend: the generic algorithms on the CPU.
// Sequences are independent, so each is scanned in order by one loop; results are
// deterministic. Plain C++17, no CUDA needed.
#pragma once

#include "../backend.hpp"
#include "../scan.hpp"

namespace parscan {

namespace host::detail {

// The one loop every generic host algorithm runs: visit each sequence in processing
// order, keep an optional running prefix, and write what the kind asks for.
template <class In, class Out, class Acc, class Op>
void scan_sequences(const scan_problem<In, Out, Acc>& p, const Op& op) {
  const sequence_layout& il = p.in_layout;
  const index_t n_seq = il.num_sequences(), n = il.length;
  const bool reverse = p.opts.dir == direction::reverse;
  for (index_t s = 0; s < n_seq; ++s) {
    bool has = false;
    Acc run{};
    if (p.opts.carry_in) run = p.opts.carry_in[s], has = true;
    else if (p.has_init) run = p.init, has = true;
    const auto in = p.in + il.sequence_offset(s);
    // Iterators (pointers included); a reduce has no output (its out is null).
    const auto out = p.kind == scan_kind::reduce ? p.out : p.out + p.out_layout.sequence_offset(s);
    for (index_t i = 0; i < n; ++i) {
      const index_t t = reverse ? n - 1 - i : i;
      // Read before writing: the output may alias the input exactly.
      const Acc x = static_cast<Acc>(in[t * il.step_stride]);
      if (p.kind == scan_kind::exclusive) parscan::detail::write_element(out, t * p.out_layout.step_stride, run);
      run = has ? op(run, x) : x;
      has = true;
      if (p.kind == scan_kind::inclusive) parscan::detail::write_element(out, t * p.out_layout.step_stride, run);
    }
    if (p.opts.carry_out && has) p.opts.carry_out[s] = run;
  }
}

}  // namespace host::detail

/// Host backend's full form of every generic algorithm (see parscan/scan.hpp).
/// An inclusive scan of an empty sequence with no carry in leaves its carry_out unwritten.
template <class In, class Out, class Acc, class Op>
status run_scan(const host_backend&, const scan_problem<In, Out, Acc>& p, const Op& op) {
  if (status s = detail::validate(p); s != status::success) return s;
  host::detail::scan_sequences(p, op);
  return status::success;
}

}  // namespace parscan
