// parscan/host/parallel_for.hpp — the host backend's only parallel machinery: run a count of
// independent jobs on a few threads. Threads are started for the call and joined before it
// returns, so nothing outlives a library call and nothing needs setting up or tearing down.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <exception>
#include <thread>
#include <vector>

#include "../config.hpp"

namespace parscan::host::detail {

/// std::thread::hardware_concurrency(), asked once per process; 1 when the system won't say.
inline int hardware_threads() {
  static const int count = [] {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(std::min<unsigned>(n, INT_MAX));
  }();
  return count;
}

/// Calls job(i) once for every i in [0, jobs), on at most `threads` threads: the calling
/// thread and up to threads - 1 started for this call. Jobs are claimed one at a time from a
/// shared counter, so which thread runs which job varies from run to run: each job must write
/// only its own outputs, and then the results cannot depend on the threads.
///
/// Every job runs even when threads cannot be had: if starting one throws (resources
/// exhausted), the calling thread and those already started share the jobs. If a job throws,
/// no further jobs are claimed, and the first exception is rethrown on the calling thread once
/// every started thread has been joined (an exception escaping a std::thread would terminate
/// the program).
template <class Job>
void parallel_for(index_t jobs, int threads, const Job& job) {
  const index_t helpers = std::min<index_t>(threads, jobs) - 1;
  if (helpers <= 0) {
    for (index_t i = 0; i < jobs; ++i) job(i);
    return;
  }

  std::atomic<index_t> next_job{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;  // written by the first job to throw, read after the joins
  const auto work = [&]() noexcept {
    for (index_t i = next_job.fetch_add(1, std::memory_order_relaxed); i < jobs;
         i = next_job.fetch_add(1, std::memory_order_relaxed)) {
      try {
        job(i);
      } catch (...) {
        if (!failed.exchange(true)) failure = std::current_exception();
        next_job.store(jobs, std::memory_order_relaxed);  // the others stop at their next claim
      }
    }
  };

  std::vector<std::thread> pool;
  try {
    pool.reserve(static_cast<std::size_t>(helpers));
  } catch (...) {
    // No room to keep threads in: start none, and the calling thread runs every job.
  }
  // Up to the room reserved, so keeping a started thread never needs memory.
  const std::size_t wanted = std::min(static_cast<std::size_t>(helpers), pool.capacity());
  while (pool.size() < wanted) {
    try {
      pool.emplace_back(work);
    } catch (...) {
      break;  // no more threads to be had: run on those that started
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace parscan::host::detail
