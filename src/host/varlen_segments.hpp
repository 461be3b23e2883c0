// src/host/varlen_segments.hpp — the host backend's work over packed sequences (cu_seqlens):
// a job is one sequence's steps for a block of channels, run by a fixed-length loop on a view
// of just those steps and channels, so that a packed result is bitwise the result of calling
// the fixed-length API on each sequence alone. Shared by the gated and the log-space
// recurrences.
#pragma once

#include <algorithm>

#include <parscan/host/parallel_for.hpp>
#include <parscan/recurrence.hpp>

namespace parscan::host_varlen {

/// Channels per job: enough steps per job to be worth a claim, and blocks of channels so that
/// one long sequence among short ones still spreads over the threads.
constexpr index_t job_channels = 64;
/// No thread is started for fewer steps than this per thread (as the generic scans).
constexpr index_t min_steps_per_thread = index_t(1) << 15;

inline int threads_for(const host_backend& be, index_t steps) {
  const index_t worth = std::max<index_t>(1, steps / min_steps_per_thread);
  if (be.threads == 1 || worth == 1) return 1;
  return static_cast<int>(std::min<index_t>(worth, be.threads > 0 ? be.threads : host::detail::hardware_threads()));
}

/// Calls job(n, start, length, d0, channels) for every sequence n and block of channels
/// [d0, d0 + channels), in parallel. The offsets were checked by the caller.
template <class Job>
void for_each_segment(const host_backend& be, const varlen_shape& s, const Job& job) {
  const index_t blocks = (s.channels + job_channels - 1) / job_channels;
  const index_t steps = s.cu_seqlens[s.sequences] * s.channels;
  host::detail::parallel_for(s.sequences * blocks, threads_for(be, steps), [&](index_t i) {
    const index_t n = i / blocks, d0 = (i % blocks) * job_channels;
    const index_t start = s.cu_seqlens[n];
    job(n, start, s.cu_seqlens[n + 1] - start, d0, std::min(job_channels, s.channels - d0));
  });
}

/// Layout `l` (D channels of the packed tensor) narrowed to `channels` channels from d0 and
/// `length` steps from `start`; returns the element offset of its first element.
inline index_t narrow(sequence_layout& l, index_t start, index_t length, index_t d0, index_t channels) {
  l.length = length;
  l.count = channels;
  return start * l.step_stride + d0 * l.sequence_stride;
}

/// `p` advanced by `offset` elements, or null.
template <class P>
P* shifted(P* p, index_t offset) {
  return p ? p + offset : nullptr;
}

}  // namespace parscan::host_varlen
