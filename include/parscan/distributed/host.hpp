// parscan/distributed/host.hpp — the sequence-parallel scans on the host backend: the executor
// that runs distributed/passes.hpp with plain loops, the abstract all-gather it exchanges through,
// and an in-process group of ranks (threads) that implements it. The NCCL path runs the same
// passes; this one lets CI test the decomposition with no GPU, and lets a user plug in any
// transport (MPI, say) by implementing `communicator`.
#pragma once

#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "../backend.hpp"
#include "../host/scan.hpp"
#include "passes.hpp"

namespace parscan::distributed {

/// One rank's view of a group of ranks that exchange blocks of bytes. Every rank of the group
/// calls all_gather with the same block size; on return, block r of `blocks` (bytes
/// [r·block_bytes, (r+1)·block_bytes)) on every rank holds what rank r put there. Collective:
/// a rank that never calls it leaves the others waiting.
class communicator {
 public:
  virtual ~communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual status all_gather(void* blocks, std::size_t block_bytes) = 0;
};

/// Ranks that are threads of one process: the all-gather copies through shared memory, with a
/// generation-counted barrier on each side so that one call's blocks never mix with the next's.
class in_process_group {
 public:
  explicit in_process_group(int ranks) : ranks_(ranks), views_(static_cast<std::size_t>(ranks)) {
    for (int r = 0; r < ranks; ++r) views_[static_cast<std::size_t>(r)] = std::make_unique<view>(*this, r);
  }
  int size() const { return ranks_; }
  /// The communicator rank r uses (owned by the group).
  communicator& rank(int r) { return *views_.at(static_cast<std::size_t>(r)); }

 private:
  class view final : public communicator {
   public:
    view(in_process_group& g, int r) : group_(g), rank_(r) {}
    int rank() const override { return rank_; }
    int size() const override { return group_.ranks_; }
    status all_gather(void* blocks, std::size_t block_bytes) override {
      return group_.exchange(rank_, static_cast<unsigned char*>(blocks), block_bytes);
    }

   private:
    in_process_group& group_;
    int rank_;
  };

  void barrier(std::unique_lock<std::mutex>& lock) {
    const unsigned long gen = generation_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != gen; });
    }
  }

  status exchange(int r, unsigned char* blocks, std::size_t block_bytes) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (arrived_ == 0) shared_.assign(block_bytes * static_cast<std::size_t>(ranks_), 0);
    const std::size_t at = static_cast<std::size_t>(r) * block_bytes;
    // A rank that disagrees on the size fails the call rather than reading past a block.
    const bool fits = shared_.size() == block_bytes * static_cast<std::size_t>(ranks_);
    if (fits) std::memcpy(shared_.data() + at, blocks + at, block_bytes);
    barrier(lock);  // every block is in
    const bool ok = fits && shared_.size() == block_bytes * static_cast<std::size_t>(ranks_);
    if (ok) std::memcpy(blocks, shared_.data(), shared_.size());
    barrier(lock);  // every rank has read before the next exchange refills shared_
    return ok ? status::success : status::communication_error;
  }

  int ranks_;
  std::vector<std::unique_ptr<view>> views_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  unsigned long generation_ = 0;
  std::vector<unsigned char> shared_;
};

/// The executor of distributed/passes.hpp on the host backend.
class host_executor {
 public:
  host_executor(const host_backend& be, communicator& comm) : be_(be), comm_(comm) {}
  rank_place place(direction dir) const { return {comm_.rank(), comm_.size(), dir}; }
  status scratch(std::size_t bytes, void*& p) {
    // max_align_t units: the blocks hold accumulators of any ordinary alignment.
    storage_.reset(new (std::nothrow) std::max_align_t[(bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)]);
    if (!storage_ && bytes > 0) return status::allocation_failed;
    p = storage_.get();
    return status::success;
  }
  template <class F>
  status for_each(index_t n, const F& f) {
    for (index_t i = 0; i < n; ++i) f(i);
    return status::success;
  }
  status all_gather(void* blocks, std::size_t block_bytes) {
    if (comm_.size() < 1 || comm_.rank() < 0 || comm_.rank() >= comm_.size()) return status::communication_error;
    return comm_.all_gather(blocks, block_bytes);
  }
  const host_backend& backend() const { return be_; }

 private:
  host_backend be_;
  communicator& comm_;
  std::unique_ptr<std::max_align_t[]> storage_;
};

}  // namespace parscan::distributed
