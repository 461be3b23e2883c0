// parscan/host/scan.hpp — the host backend: the generic algorithms on the CPU.
//
// A problem is cut into jobs that run on a few threads (parallel_for.hpp): blocks of whole
// sequences, and, for a sequence of at least chunked_min_length steps, chunks of steps scanned
// in three passes — each chunk's total (in parallel), a sequential scan of the chunk totals from
// the carry in (or init), and each chunk rescanned from its prefix, writing the output (in
// parallel). Where the chunks lie depends on the sequence length alone, never on the thread
// count or the machine, so every result is bitwise the same on 1 thread or 64. Plain C++17, no
// CUDA needed.
#pragma once

#include <algorithm>
#include <memory>
#include <new>

#include "../backend.hpp"
#include "../scan.hpp"
#include "parallel_for.hpp"

namespace parscan {

namespace host::detail {

// ---------------------------------------------------------------------------------------------
// The chunking rule. It fixes the order in which the operator combines elements, so it is a
// function of the sequence length n alone: the same call gives the same bits whatever the
// thread count. (A float sum chunked associates differently from the plain loop, so even the
// choice between the two must not depend on anything else.)

/// Sequences of at least this many steps are scanned in chunks; shorter ones by one plain loop.
inline constexpr index_t chunked_min_length = index_t(1) << 17;
/// Steps per chunk at least: enough work per job that claiming it, and its step of pass 2,
/// are lost beside it.
inline constexpr index_t min_chunk_length = index_t(1) << 16;
/// Chunks per sequence at most: bounds the sequential pass over the chunk totals.
inline constexpr index_t max_chunks = 1024;

/// Steps per chunk for sequences of n steps: n itself below chunked_min_length (one chunk, the
/// plain loop), else max(2^16, ⌈n / 1024⌉ rounded up to a multiple of 1024), which makes 2 to
/// 1024 chunks, all full but the last in processing order.
constexpr index_t chunk_length(index_t n) {
  if (n < chunked_min_length) return n;
  const index_t even_share = (n + max_chunks - 1) / max_chunks;
  return std::max(min_chunk_length, (even_share + 1023) / 1024 * 1024);
}

// ---------------------------------------------------------------------------------------------
// How the work is shared out. None of this changes a result, only how fast it comes.

/// No thread is started for fewer elements than this per thread: starting one costs more.
inline constexpr index_t min_elements_per_thread = index_t(1) << 15;
/// Whole sequences are handed out in jobs of about this many elements: few enough claims of
/// the shared job counter, and enough jobs to even out the threads.
inline constexpr index_t elements_per_job = index_t(1) << 14;

/// Sequences scanned side by side, one step of each in turn, where the input interleaves them
/// (a channel-last (B, T, D) tensor keeps a step of D sequences in each row): a block then
/// reads and writes whole rows instead of one element per row, and threads write apart. Each
/// sequence is still combined in its own order. At most 1 KiB of running values per block.
template <class Acc>
inline constexpr index_t lane_block_width = std::clamp<index_t>(1024 / static_cast<index_t>(sizeof(Acc)), 1, 16);

inline bool interleaved(const sequence_layout& l) { return l.count > 1 && l.sequence_stride < l.step_stride; }

struct scan_plan {
  index_t chunk_length;  // steps per chunk; the whole length when a sequence is one chunk
  int threads;           // at most this many threads, the calling one included
};

/// Threads for `elements` elements of work: as the backend asks, but no more than the work is
/// worth.
inline int threads_for(const host_backend& be, index_t elements) {
  const index_t worth = std::max<index_t>(1, elements / min_elements_per_thread);
  if (be.threads == 1 || worth <= 1) return 1;
  return static_cast<int>(std::min<index_t>(worth, be.threads > 0 ? be.threads : hardware_threads()));
}

/// The plan run_scan follows: chunks by chunk_length(length), threads by threads_for.
inline scan_plan plan_scan(const host_backend& be, const sequence_layout& l) {
  return {chunk_length(l.length), threads_for(be, l.num_sequences() * l.length)};  // validated: no overflow
}

// ---------------------------------------------------------------------------------------------
// The loops. Input and output are only ever indexed (p.in[i], p.out[i]), at element offsets.

/// One step: reads the element at in[in_at] before writing anything (the output may alias the
/// input exactly), then writes what Kind asks for at out[out_at] (nothing for reduce). `has`
/// says whether `run` holds a prefix yet: the operator need not have an identity to start from.
/// With HasRun the caller knows it does.
template <scan_kind Kind, bool HasRun, class In, class Out, class Acc, class Op>
inline void step(const scan_problem<In, Out, Acc>& p, const Op& op, index_t in_at, index_t out_at, Acc& run, bool& has) {
  const Acc x = static_cast<Acc>(p.in[in_at]);
  if constexpr (Kind == scan_kind::exclusive) parscan::detail::write_element(p.out, out_at, run);
  if constexpr (HasRun) {
    run = op(run, x);
  } else {
    run = has ? op(run, x) : x;
    has = true;
  }
  if constexpr (Kind == scan_kind::inclusive) parscan::detail::write_element(p.out, out_at, run);
}

/// Positions [first, last) in processing order (first < last) of the `lanes` sequences from s0,
/// each carrying on from its own running value (run[j], has[j]).
template <scan_kind Kind, class In, class Out, class Acc, class Op>
void scan_lanes(const scan_problem<In, Out, Acc>& p, const Op& op, index_t s0, index_t lanes, index_t first,
                index_t last, Acc* run, bool* has) {
  // Element offsets of position `first` in each lane, and how far one position moves them
  // (negative for a reverse scan). The lanes share a layout, so they share the step.
  const bool reverse = p.opts.dir == direction::reverse;
  const index_t t = reverse ? p.in_layout.length - 1 - first : first;
  const index_t in_step = reverse ? -p.in_layout.step_stride : p.in_layout.step_stride;
  const index_t out_step = reverse ? -p.out_layout.step_stride : p.out_layout.step_stride;
  if (lanes == 1) {
    index_t in_at = p.in_layout.offset(s0, t), out_at = p.out_layout.offset(s0, t);
    step<Kind, false>(p, op, in_at, out_at, run[0], has[0]);
    for (index_t i = first + 1; i < last; ++i) {
      in_at += in_step;
      out_at += out_step;
      step<Kind, true>(p, op, in_at, out_at, run[0], has[0]);
    }
    return;
  }
  index_t in_at[lane_block_width<Acc>], out_at[lane_block_width<Acc>];
  for (index_t j = 0; j < lanes; ++j) {
    in_at[j] = p.in_layout.offset(s0 + j, t);
    out_at[j] = p.out_layout.offset(s0 + j, t);
    step<Kind, false>(p, op, in_at[j], out_at[j], run[j], has[j]);
  }
  for (index_t i = 1; i < last - first; ++i) {
    const index_t in_moved = i * in_step, out_moved = i * out_step;
    for (index_t j = 0; j < lanes; ++j) step<Kind, true>(p, op, in_at[j] + in_moved, out_at[j] + out_moved, run[j], has[j]);
  }
}

/// A sequence's c: its carry in, else init (exclusive scan and reduce), else nothing.
template <class In, class Out, class Acc>
void start(const scan_problem<In, Out, Acc>& p, index_t s, Acc& run, bool& has) {
  has = p.opts.carry_in != nullptr || p.has_init;
  if (p.opts.carry_in) run = p.opts.carry_in[s];
  else if (p.has_init) run = p.init;
}

template <scan_kind Kind, class In, class Out, class Acc, class Op>
status scan_as(const scan_problem<In, Out, Acc>& p, const Op& op, const scan_plan& plan) {
  const index_t n_seq = p.in_layout.num_sequences(), n = p.in_layout.length;
  if (n_seq == 0) return status::success;
  constexpr index_t width = lane_block_width<Acc>;
  const index_t lanes = interleaved(p.in_layout) ? width : 1;
  const index_t blocks = (n_seq + lanes - 1) / lanes;
  const index_t chunk = std::clamp<index_t>(plan.chunk_length, 1, std::max<index_t>(n, 1));
  const index_t chunks = n == 0 ? 1 : (n + chunk - 1) / chunk;

  if (chunks == 1) {
    // Each sequence in one pass, blocks of them per job.
    const index_t blocks_per_job = std::max<index_t>(1, elements_per_job / std::max<index_t>(1, lanes * n));
    const index_t jobs = (blocks + blocks_per_job - 1) / blocks_per_job;
    parallel_for(jobs, plan.threads, [&](index_t job) {
      const index_t end = std::min(blocks, (job + 1) * blocks_per_job);
      for (index_t b = job * blocks_per_job; b < end; ++b) {
        const index_t s0 = b * lanes, m = std::min(lanes, n_seq - s0);
        Acc run[width]{};
        bool has[width];
        for (index_t j = 0; j < m; ++j) start(p, s0 + j, run[j], has[j]);
        if (n > 0) scan_lanes<Kind>(p, op, s0, m, 0, n, run, has);
        if (p.opts.carry_out)
          for (index_t j = 0; j < m; ++j)
            if (has[j]) p.opts.carry_out[s0 + j] = run[j];
      }
    });
    return status::success;
  }

  // One slot per (sequence, chunk): first the chunk's total (every chunk holds at least one
  // step, so every chunk has one), then, after pass 2, the prefix the chunk starts from.
  const std::unique_ptr<Acc[]> slots(new (std::nothrow) Acc[static_cast<std::size_t>(n_seq * chunks)]);
  if (!slots) return status::allocation_failed;  // before anything is written
  const auto slot = [&](index_t s, index_t k) -> Acc& { return slots[static_cast<std::size_t>(s * chunks + k)]; };
  // Passes 1 and 3 share the jobs out the same way: one (block of lanes, chunk) per job.
  struct chunk_job {
    index_t s0, lanes, k, first, last;
  };
  const auto locate = [&](index_t job) {
    const index_t b = job / chunks, k = job % chunks;
    return chunk_job{b * lanes, std::min(lanes, n_seq - b * lanes), k, k * chunk, std::min(n, (k + 1) * chunk)};
  };

  // Pass 1: each chunk's total.
  parallel_for(blocks * chunks, plan.threads, [&](index_t job) {
    const chunk_job c = locate(job);
    Acc total[width];
    bool has[width] = {};
    scan_lanes<scan_kind::reduce>(p, op, c.s0, c.lanes, c.first, c.last, total, has);
    for (index_t j = 0; j < c.lanes; ++j) slot(c.s0 + j, c.k) = total[j];
  });

  // Pass 2, on this thread: each sequence's chunk totals scanned in order from its c. Chunk 0
  // starts from c itself, so it has a prefix exactly when the sequence has a c.
  const bool first_chunk_has_prefix = p.opts.carry_in != nullptr || p.has_init;
  for (index_t s = 0; s < n_seq; ++s) {
    Acc run{};
    bool has;
    start(p, s, run, has);
    for (index_t k = 0; k < chunks; ++k) {
      const Acc total = slot(s, k);
      slot(s, k) = run;
      run = has ? op(run, total) : total;
      has = true;
    }
    if (p.opts.carry_out) p.opts.carry_out[s] = run;
  }

  // Pass 3: each chunk rescanned from its prefix, writing the output. A chunk reads and writes
  // only its own steps, so an exact in-place scan still reads each input before overwriting it.
  if constexpr (Kind != scan_kind::reduce) {
    parallel_for(blocks * chunks, plan.threads, [&](index_t job) {
      const chunk_job c = locate(job);
      Acc run[width];
      bool has[width];
      for (index_t j = 0; j < c.lanes; ++j) {
        run[j] = slot(c.s0 + j, c.k);
        has[j] = c.k > 0 || first_chunk_has_prefix;
      }
      scan_lanes<Kind>(p, op, c.s0, c.lanes, c.first, c.last, run, has);
    });
  }
  return status::success;
}

/// Runs a validated problem by `plan`. run_scan passes plan_scan's plan; the tests also pass
/// plans of their own, to chunk short sequences finely.
template <class In, class Out, class Acc, class Op>
status scan_with_plan(const scan_problem<In, Out, Acc>& p, const Op& op, const scan_plan& plan) {
  switch (p.kind) {
    case scan_kind::inclusive: return scan_as<scan_kind::inclusive>(p, op, plan);
    case scan_kind::exclusive: return scan_as<scan_kind::exclusive>(p, op, plan);
    case scan_kind::reduce: return scan_as<scan_kind::reduce>(p, op, plan);
  }
  return status::unsupported;
}

}  // namespace host::detail

/// Host backend's full form of every generic algorithm (see parscan/scan.hpp).
/// An inclusive scan of an empty sequence with no carry in leaves its carry_out unwritten.
/// Large problems run on up to be.threads threads; the operator is then called from several
/// threads at once. Results do not depend on the thread count (see the top of this file).
/// status::allocation_failed (nothing written) if the chunk totals of long sequences (one
/// accumulator per 2^16 steps or more) cannot be allocated.
template <class In, class Out, class Acc, class Op>
status run_scan(const host_backend& be, const scan_problem<In, Out, Acc>& p, const Op& op) {
  if (status s = detail::validate(p); s != status::success) return s;
  return host::detail::scan_with_plan(p, op, host::detail::plan_scan(be, p.in_layout));
}

}  // namespace parscan
