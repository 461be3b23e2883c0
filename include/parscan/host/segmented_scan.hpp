// parscan/host/segmented_scan.hpp — the host backend of parscan/segmented_scan.hpp.
//
// Each segment is scanned by host/scan.hpp's loop for one contiguous sequence, in one pass and
// on one thread, and segments are shared out among the threads in jobs of about
// elements_per_job elements. Which thread takes which segment changes nothing: results do not
// depend on the thread count. One pass, not host/scan.hpp's chunks for sequences of 2^17 steps
// or more: chunks need storage for their totals, and a failed allocation after earlier
// segments were written would break the rule that a failing call writes nothing. So a segment
// of 2^17 elements or more gives the plain loop's bits, which a float sum of the same sequence
// through inclusive_scan (chunked) matches only within rounding.
#pragma once

#include <new>
#include <vector>

#include "../segmented_scan.hpp"
#include "scan.hpp"

namespace parscan {

/// Host backend's full form of the segmented algorithms (see parscan/segmented_scan.hpp).
/// The offsets are read from host memory and checked first (status::invalid_offsets);
/// status::allocation_failed (nothing written) if the list of jobs cannot be allocated.
template <class In, class Out, class Acc, class Op>
status run_segmented_scan(const host_backend& be, const segmented_problem<In, Out, Acc>& p, const Op& op) {
  if (status s = detail::validate(p); s != status::success) return s;
  const index_t n = p.seg.count;
  if (n == 0) return status::success;
  if (status s = detail::check_offsets(p.seg.offsets, n, p.seg.total); s != status::success) return s;
  // Jobs of whole segments, cut where the elements so far pass another elements_per_job: a
  // prefix walk over the offsets, O(N), on this thread, before anything is written.
  std::vector<index_t> job_start;
  try {
    job_start.push_back(0);
    for (index_t s = 1; s < n; ++s)
      if (p.seg.offsets[s] - p.seg.offsets[job_start.back()] >= host::detail::elements_per_job) job_start.push_back(s);
    job_start.push_back(n);
  } catch (const std::bad_alloc&) {
    return status::allocation_failed;  // before anything is written
  }
  const index_t jobs = static_cast<index_t>(job_start.size()) - 1;
  const int threads = host::detail::threads_for(be, p.seg.offsets[n]);
  host::detail::parallel_for(jobs, threads, [&](index_t job) {
    for (index_t s = job_start[static_cast<std::size_t>(job)]; s < job_start[static_cast<std::size_t>(job) + 1]; ++s) {
      const index_t begin = p.seg.offsets[s], length = p.seg.offsets[s + 1] - begin;
      // One chunk (the whole segment) allocates nothing and cannot fail.
      host::detail::scan_with_plan(p.segment(s, begin, length), op, host::detail::scan_plan{length, 1});
    }
  });
  return status::success;
}

}  // namespace parscan
