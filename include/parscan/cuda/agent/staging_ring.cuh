// parscan/cuda/agent/staging_ring.cuh — how a worker keeps its next tiles in flight without
// holding registers: a ring of tiles in shared memory, filled by cp.async.
#pragma once

#include <type_traits>

#include "../block/tile_scan.cuh"
#include "../thread/run_io.cuh"

namespace parscan::cuda_detail {

/// Whether a Problem can stage its runs through shared memory (stage_run / load_staged).
template <class Problem, class = void>
constexpr bool has_staging = false;
template <class Problem>
constexpr bool has_staging<Problem, std::void_t<decltype(Problem::staged_tensors)>> = true;

/// Whether a Problem's tiles can be read from the ring in blocked order (block/blocked_tile_scan.cuh):
/// it says so in stages_blocked (one staged tensor whose element is the accumulator, so that
/// the results can go back through the same slots).
template <class Problem, class = void>
constexpr bool has_blocked_staging = false;
template <class Problem>
constexpr bool has_blocked_staging<Problem, std::void_t<decltype(Problem::stages_blocked)>> = Problem::stages_blocked;

/// A ring of Stages tiles per block in dynamic shared memory, filled by cp.async so that loads
/// stay in flight without holding registers. Every lane copies its own 16-byte runs and later
/// reads back only those, so no barrier is needed between a copy and its read; a run that
/// cannot be staged (misaligned, strided, the sequence's end) is read directly instead.
///
/// Blocked: the warp's runs are read back in blocked order instead (lane l takes runs l·R …
/// l·R+R-1, R = Chunks; has_blocked_staging), after `complete` has filled in the runs that could
/// not be staged and the warp has synchronised. A run's slot is swizzled within its group of 8
/// (run r sits at r ^ ((r / R) mod 8)), so that both the blocked reads and the lanes' own
/// striped runs spread each quarter-warp's 16-byte accesses over all 32 banks.
template <int BlockWarps, int Chunks, int Stages, class Problem, bool Blocked = false>
struct staging_ring {
  static constexpr int V = Problem::run;
  static constexpr index_t chunk = static_cast<index_t>(warp_threads) * V;
  static constexpr int tensor_stride = warp_threads * 16;  // one 16-byte run per lane
  static constexpr int chunk_bytes = Problem::staged_tensors * tensor_stride;
  static constexpr int slot_bytes = BlockWarps * Chunks * chunk_bytes;
  static constexpr int mask_bytes = BlockWarps * warp_threads * static_cast<int>(sizeof(unsigned));
  static constexpr int bytes = Stages * (slot_bytes + mask_bytes);
  unsigned char* base;

  static_assert(!Blocked || Problem::staged_tensors == 1, "blocked reads need one staged tensor");
  __device__ static PARSCAN_INLINE int position(int r) {
    return Blocked && Chunks > 1 ? r ^ ((r / Chunks) & 7) : r;
  }
  // Run r (0 … 32·Chunks-1, in processing order) of this warp's segment in `slot`.
  __device__ PARSCAN_INLINE unsigned char* run_slot(int slot, int r) const {
    const int warp = static_cast<int>(threadIdx.x) / warp_threads;
    return base + slot * slot_bytes + warp * Chunks * chunk_bytes + position(r) * 16;
  }
  // This lane's run of chunk j (the runs it stages).
  __device__ PARSCAN_INLINE unsigned char* run_at(int slot, int j) const {
    if constexpr (Blocked) {
      return run_slot(slot, j * warp_threads + lane_id());
    } else {
      const int warp = static_cast<int>(threadIdx.x) / warp_threads;
      return base + slot * slot_bytes + (warp * Chunks + j) * chunk_bytes + lane_id() * 16;
    }
  }
  // Bit j: chunk j of this lane's runs in `slot` was staged.
  __device__ PARSCAN_INLINE unsigned& staged(int slot) const {
    return reinterpret_cast<unsigned*>(base + Stages * slot_bytes)[slot * BlockWarps * warp_threads + threadIdx.x];
  }
  /// Starts copying this warp's segment (from step `segment`) of sequence s into `slot`.
  __device__ PARSCAN_INLINE void stage(const Problem& P, index_t s, index_t segment, int slot) const {
    const auto cur = P.at(s);
    unsigned mask = 0;
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
      if (P.stage_run(cur, segment + j * chunk + lane_id() * V, run_at(slot, j), tensor_stride)) mask |= 1u << j;
    staged(slot) = mask;
  }
  /// The segment staged in `slot`, into registers (after the copies have been waited for).
  __device__ PARSCAN_INLINE void load(const Problem& P, index_t s, index_t segment, int slot,
                                      tile_items<Problem, Chunks>& items) const {
    const auto cur = P.at(s);
    const unsigned mask = staged(slot);
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
      P.load_staged(cur, segment + j * chunk + lane_id() * V, run_at(slot, j), tensor_stride, (mask >> j) & 1u,
                    items.v[j]);
  }

  // Blocked reads (Blocked only).
  /// Once this lane's copies into `slot` are complete: reads the runs it could not stage
  /// directly into their slots, then synchronises the warp, so that every lane may read any
  /// run of the warp's segment.
  __device__ PARSCAN_INLINE void complete(const Problem& P, index_t s, index_t segment, int slot) const {
    static_assert(Blocked, "complete is for blocked reads");
    const unsigned mask = staged(slot);
    if (mask != (1u << Chunks) - 1) {
      const auto cur = P.at(s);
#pragma unroll
      for (int j = 0; j < Chunks; ++j)
        if (!((mask >> j) & 1u)) P.fill_staged(cur, segment + j * chunk + lane_id() * V, run_at(slot, j));
    }
    __syncwarp();
  }
  /// This lane's runs in blocked order (after complete).
  template <class Items>
  __device__ PARSCAN_INLINE void load_blocked(const Problem& P, int slot, Items& items) const {
#pragma unroll
    for (int i = 0; i < Chunks; ++i) P.read_staged_run(run_slot(slot, lane_id() * Chunks + i), items.v[i]);
  }
  /// Stores this lane's scanned runs (blocked order) through `slot`: each lane writes its runs
  /// back, the warp synchronises, and each lane stores its striped runs, coalesced. Afterwards
  /// each lane touches only its own striped runs of the slot again (the next stage()).
  template <class Items>
  __device__ PARSCAN_INLINE void store_blocked(const Problem& P, index_t s, index_t segment, int slot,
                                               const Items& items) const {
    using Acc = typename Problem::acc_type;
#pragma unroll
    for (int i = 0; i < Chunks; ++i) store_shared_run(run_slot(slot, lane_id() * Chunks + i), items.v[i]);
    __syncwarp();
    const auto cur = P.at(s);
#pragma unroll
    for (int j = 0; j < Chunks; ++j) {
      Acc run[V];
      load_shared_run(run_at(slot, j), run);
      P.store_run(cur, segment + j * chunk + lane_id() * V, run);
    }
  }
};

}  // namespace parscan::cuda_detail
